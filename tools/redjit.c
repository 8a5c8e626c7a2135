/*
 * redjit.c -- the `redjit` command-line tool: evaluates one expression (-e)
 * over arrays loaded from .npy files and prints the results (text or JSON),
 * or runs a session (repl.h) from a script file, a pipe or the prompt.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "npy.h"
#include "print.h"
#include "repl.h"
#include "redjit.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

static const char cli_help[] =
    "usage: redjit -e EXPR [options]     evaluate one program\n"
    "       redjit FILE.red [options]    run a script: statements as typed at the prompt,\n"
    "                                    stopping at the first error ('-': stdin)\n"
    "       redjit [options]             the interactive prompt on a terminal (:help there);\n"
    "                                    from a pipe, the same statements without prompts.\n"
    "                                    A session keeps its arrays in GPU memory when it\n"
    "                                    runs on a GPU\n"
    "\n"
    "options:\n"
    "  -e, --expr EXPR          the program to evaluate, e.g. 'max(abs(x-y))'\n"
    "  --load NAME=FILE.npy     bind array NAME to a NumPy .npy file (bool, int8..int64,\n"
    "                           uint8..uint64, float16, float32, float64, complex64,\n"
    "                           complex128; C or Fortran order)\n"
    "  --set NAME=VALUE         bind scalar NAME: an integer (42, -7, 0x1f) binds as i64,\n"
    "                           anything else (2.5, 1e-3, inf, nan) as f64; both adapt to\n"
    "                           the type of the other operand like a literal\n"
    "  --device cpu|gpu|auto    where to run (default auto: the GPU when there is one)\n"
    "  --strategy S             auto, tree, sequential, persistent or segmented\n"
    "  --threads N              CPU threads, 0 = all cores (default)\n"
    "  --format text|json       how results are printed (default text)\n"
    "  --out NAME=FILE.npy      save the result named NAME (from 'NAME[i,j] = ...') or at\n"
    "                           position NAME (0, 1, ...) as a .npy file; may be repeated.\n"
    "                           With a script: the value NAME holds when it ends\n"
    "  --explain[=plan|cuda]    print the evaluation plan before the results: the passes,\n"
    "                           the backend and, for the CPU, its threads; the generated\n"
    "                           CUDA too when the GPU runs it (=cuda: always, =plan: never)\n"
    "  --verbose                on stderr: the backend of each evaluation (the CPU's\n"
    "                           threads, the GPU's strategy, why not the GPU), where its\n"
    "                           time went, and the library's notes\n"
    "  -h, --help               this text\n"
    "  -V, --version            the library version\n"
    "\n"
    "output:\n"
    "  text   one result per line (at the prompt too); a named result is prefixed\n"
    "         'NAME = '.  Floats print the shortest digits that read back to the same\n"
    "         value, integers exactly, bools as true/false.  Arrays print like NumPy:\n"
    "         nested brackets, lines wrapped to $COLUMNS or the terminal's width (80\n"
    "         when not a terminal), and above 1000 elements only 3 items at each end\n"
    "         of each axis, with '...' between.\n"
    "  json   one object {\"results\": [...]}, each result {\"name\": \"C\", \"dtype\": \"f32\",\n"
    "         \"shape\": [2, 3], \"value\": ...} with arrays as nested lists (never elided).\n"
    "         JSON has no NaN or infinity: they are written as the strings \"nan\", \"inf\"\n"
    "         and \"-inf\".  With --explain the plan is the object's \"explain\" member.\n"
    "\n"
    "exit status: 0 success, 1 an evaluation or file error (message on stderr),\n"
    "2 a usage error.\n";

/* ---- the session: what every evaluation binds and how it prints ---------------- */

typedef struct cli_load {
    const char *name, *path;
    red_array array;
    void *owned;
} cli_load;

typedef struct cli_set {
    const char *name;
    bool is_int;
    int64_t i;
    double f;
} cli_set;

typedef struct cli_out {
    const char *name;   /* result name, or NULL when chosen by position */
    int pos;
    const char *path;
} cli_out;

typedef struct cli_session {
    red_ctx *ctx;
    cli_load *loads;
    int nloads;
    cli_set *sets;
    int nsets;
    cli_out *outs;
    int nouts;
    bool json, explain, verbose;
    int explain_what;    /* RED_EXPLAIN_*: what follows the plan */
    const char *origin;  /* script file name prefixed to its errors, or NULL */
} cli_session;

static int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int cli_usage(const char *fmt, ...)
{
    va_list ap;
    fputs("redjit: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (see 'redjit --help')\n", stderr);
    return CLI_USAGE;
}

/* Print a library error.  Messages for the program text start with
 * "line:col"; a script's name goes in front so editors can jump to it. */
static int cli_lib_error(const cli_session *s, int status, const char *msg)
{
    fflush(stdout);   /* keep the order results and errors happened in */
    if (!msg || !*msg)
        msg = red_errstr(status);
    if (!msg || !*msg)
        msg = "unknown error";
    if (s->origin)
        fprintf(stderr, "%s:%s", s->origin, msg[0] >= '0' && msg[0] <= '9' ? "" : " ");
    else if (!(msg[0] >= '0' && msg[0] <= '9'))
        fputs("redjit: ", stderr);
    fputs(msg, stderr);
    if (msg[strlen(msg) - 1] != '\n')
        fputc('\n', stderr);
    return CLI_FAIL;
}

static void cli_log(void *user, int level, const char *msg)
{
    bool verbose = *(const bool *)user;
    if (verbose || level >= 2)
        fprintf(stderr, "redjit: %s%s\n", level >= 2 ? "warning: " : "", msg);
}

/* ---- one evaluation ------------------------------------------------------------------- */

/* Result `i` in host memory.  `*tmp` receives a buffer to free when the
 * result had to be copied off the GPU. */
static int cli_result(red_expr *e, int i, red_array *a, const char **name, void **tmp)
{
    *tmp = NULL;
    int rc = red_result(e, i, a, name);
    if (rc != RED_OK)
        return rc;
    if (a->memory == 0 || a->memory == RED_MEM_HOST)
        return a->data || red_array_size(a) == 0 ? RED_OK : RED_ERR_INTERNAL;
    int64_t n = red_array_size(a);
    size_t es = print_dtype_size(a->dtype);
    if (n < 0 || (es && (uint64_t)n > SIZE_MAX / es))
        return RED_ERR_NOMEM;
    void *buf = malloc(n ? (size_t)n * es : 1);
    if (!buf)
        return RED_ERR_NOMEM;
    red_array h;
    rc = red_array_init(&h, buf, a->dtype, a->ndim, a->shape, NULL);
    if (rc == RED_OK)
        rc = red_result_copy(e, i, &h);
    if (rc != RED_OK) {
        free(buf);
        return rc;
    }
    *a = h;
    *tmp = buf;
    return RED_OK;
}

static int cli_bind(const cli_session *s, red_expr *e)
{
    int rc = RED_OK;
    for (int i = 0; i < s->nloads && rc == RED_OK; i++)
        rc = red_bind_array(e, s->loads[i].name, &s->loads[i].array);
    for (int i = 0; i < s->nsets && rc == RED_OK; i++)
        rc = s->sets[i].is_int ? red_bind_i64(e, s->sets[i].name, s->sets[i].i)
                               : red_bind_f64(e, s->sets[i].name, s->sets[i].f);
    return rc;
}

/* Which result each --out names; -1 with a message when one matches none. */
static int cli_match_outs(const cli_session *s, red_expr *e, int count, int *which)
{
    for (int k = 0; k < s->nouts; k++) {
        const cli_out *o = &s->outs[k];
        which[k] = -1;
        if (!o->name) {
            if (o->pos < count)
                which[k] = o->pos;
        } else {
            for (int i = 0; i < count && which[k] < 0; i++) {
                red_array a;
                const char *name = NULL;
                if (red_result(e, i, &a, &name) == RED_OK && name && strcmp(name, o->name) == 0)
                    which[k] = i;
            }
        }
        if (which[k] < 0) {
            fflush(stdout);
            if (o->name)
                fprintf(stderr, "redjit: --out %s=%s: no result is named '%s'\n", o->name, o->path, o->name);
            else
                fprintf(stderr, "redjit: --out %d=%s: there %s only %d result%s\n", o->pos, o->path,
                        count == 1 ? "is" : "are", count, count == 1 ? "" : "s");
            return -1;
        }
    }
    return 0;
}

static int cli_show(const cli_session *s, red_expr *e)
{
    int count = red_result_count(e);
    int *which = calloc((size_t)(s->nouts ? s->nouts : 1), sizeof *which);
    if (!which)
        return cli_lib_error(s, RED_ERR_NOMEM, NULL);
    if (count < 0) {
        free(which);
        return cli_lib_error(s, RED_ERR_INTERNAL, red_expr_errmsg(e));
    }
    if (cli_match_outs(s, e, count, which) != 0) {
        free(which);
        return CLI_FAIL;
    }
    const char *plan = NULL;
    if (s->explain) {
        int rc = red_explain_ex(e, s->explain_what, &plan);
        if (rc != RED_OK) {
            free(which);
            return cli_lib_error(s, rc, red_expr_errmsg(e));
        }
        plan = plan ? plan : "";
    }
    /* In JSON the plan is a member, so the output stays one object. */
    if (plan && !s->json) {
        fputs(plan, stdout);
        if (*plan && plan[strlen(plan) - 1] != '\n')
            fputc('\n', stdout);
    }
    int status = CLI_OK;
    if (s->json) {
        fputc('{', stdout);
        if (plan) {
            fputs("\"explain\": ", stdout);
            print_json_string(stdout, plan);
            fputs(", ", stdout);
        }
        fputs("\"results\": [", stdout);
    }
    for (int i = 0; i < count && status == CLI_OK; i++) {
        red_array a;
        const char *name = NULL;
        void *tmp;
        int rc = cli_result(e, i, &a, &name, &tmp);
        if (rc != RED_OK) {
            status = cli_lib_error(s, rc, red_expr_errmsg(e));
            break;
        }
        if (s->json)
            print_json(stdout, &a, name, i == 0);
        else
            print_text(stdout, &a, name);
        for (int k = 0; k < s->nouts; k++) {
            char err[1024];
            if (which[k] == i && npy_save(s->outs[k].path, &a, err, sizeof err) != 0) {
                fflush(stdout);
                fprintf(stderr, "redjit: %s\n", err);
                status = CLI_FAIL;
            }
        }
        free(tmp);
    }
    if (s->json)
        fputs(count > 0 ? "\n]}\n" : "]}\n", stdout);
    free(which);
    return status;
}

/* Prepare, bind, run and print one program.  Errors are printed here. */
static int cli_eval(const cli_session *s, const char *text)
{
    red_expr *e = NULL;
    int rc = red_prepare(s->ctx, text, &e);
    if (rc != RED_OK)
        return cli_lib_error(s, rc, red_errmsg(s->ctx));
    rc = cli_bind(s, e);
    red_cache_info before = {0};
    if (s->verbose)
        red_cache_stats(s->ctx, &before);
    if (rc == RED_OK)
        rc = red_run(e);
    int status;
    if (rc == RED_OK) {
        if (s->verbose) {
            fflush(stdout);
            print_run_note(stderr, s->ctx, e, &before);
        }
        status = cli_show(s, e);
    } else {
        const char *msg = red_expr_errmsg(e);
        status = cli_lib_error(s, rc, msg && *msg ? msg : red_errmsg(s->ctx));
    }
    red_finalize(e);
    return status;
}

/* ---- the session: scripts, pipes and the prompt ---------------------------------------- */

/* Everything but -e runs as a session (repl.h): statements persist, and
 * --load / --set values are its first names. */
static int cli_session_run(cli_session *s, const char *script)
{
    repl_session rs;
    session_init(&rs, s->ctx);
    gen_seed(&rs, (uint64_t)time(NULL) * 0x9e3779b97f4a7c15u ^ (uint64_t)getpid());
    rs.json = s->json;
    rs.explain = s->explain;
    rs.explain_what = s->explain_what;
    rs.verbose = s->verbose;
    int status = CLI_OK;
    for (int i = 0; i < s->nloads && status == CLI_OK; i++) {
        cli_load *l = &s->loads[i];
        repl_var *v = session_adopt(&rs, l->name, &l->array, l->owned, STORE_MALLOC);
        l->owned = NULL;   /* the session frees it now, even on failure */
        if (!v)
            status = cli_lib_error(s, RED_ERR_NOMEM, NULL);
        else
            v->weak = false;
    }
    for (int i = 0; i < s->nsets && status == CLI_OK; i++) {
        const cli_set *c = &s->sets[i];
        repl_var *v = session_new_array(&rs, c->name, c->is_int ? RED_I64 : RED_F64, 0, NULL);
        if (!v)
            status = cli_lib_error(s, RED_ERR_NOMEM, NULL);
        else if (c->is_int)
            *(int64_t *)v->a.data = c->i;   /* a new array is in host memory */
        else
            *(double *)v->a.data = c->f;
        if (v)
            session_settle(&rs, v);   /* a scalar: it stays there */
    }
    FILE *in = stdin;
    if (status == CLI_OK && script && strcmp(script, "-") != 0 && !(in = fopen(script, "r"))) {
        fprintf(stderr, "redjit: %s: cannot open: %s\n", script, strerror(errno));
        status = CLI_FAIL;
    }
    if (status == CLI_OK) {
        rs.origin = !script ? NULL : strcmp(script, "-") == 0 ? "<stdin>" : script;
        /* a script stops at its first error, as a shell script under set -e */
        status = repl_run(&rs, in, script != NULL) == 0 ? CLI_OK : CLI_FAIL;
        if (in != stdin)
            fclose(in);
    }
    /* --out saves the session's values once the script has run. */
    for (int k = 0; k < s->nouts && status == CLI_OK; k++) {
        const cli_out *o = &s->outs[k];
        const repl_var *v = o->name ? session_find(&rs, o->name) : NULL;
        char err[1024];
        fflush(stdout);
        if (!o->name) {
            fprintf(stderr, "redjit: --out %d=%s: a script's results have no positions; "
                            "give the value a name (NAME = ...) and use --out NAME=%s\n", o->pos, o->path, o->path);
            status = CLI_FAIL;
        } else if (!v) {
            fprintf(stderr, "redjit: --out %s=%s: no value is named '%s'\n", o->name, o->path, o->name);
            status = CLI_FAIL;
        } else {
            red_array a;
            void *tmp;
            if (session_host_array(&rs, v, &a, &tmp) != RED_OK) {   /* a copy of a GPU value */
                fprintf(stderr, "redjit: --out %s=%s: copying it from the GPU failed: %s\n", o->name, o->path,
                        rs.move_error);
                status = CLI_FAIL;
            } else if (npy_save(o->path, &a, err, sizeof err) != 0) {
                fprintf(stderr, "redjit: %s\n", err);
                status = CLI_FAIL;
            }
            free(tmp);
        }
    }
    session_free(&rs);
    return status;
}

/* ---- command line ---------------------------------------------------------------------- */

typedef struct cli_args {
    const char *expr, *script;
    int device, strategy, threads;   /* -1: leave the library's default */
    bool verbose;
} cli_args;

static bool cli_is_name(const char *s)
{
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return false;
    for (s++; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

/* Split "NAME=REST" in place (the argv string is ours to cut). */
static bool cli_split(char *arg, char **rest)
{
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return false;
    *eq = '\0';
    *rest = eq + 1;
    return true;
}

static int cli_keyword(const char *opt, const char *v, const char *const *words, int nwords)
{
    for (int i = 0; i < nwords; i++)
        if (strcmp(v, words[i]) == 0)
            return i;
    cli_usage("%s: unknown value '%s'", opt, v);
    return -1;
}

/* Integers bind as i64 (exactly), anything else strtod reads as f64. */
static int cli_parse_set(const char *name, const char *v, cli_set *s)
{
    const char *p = v + (*v == '+' || *v == '-');
    bool hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X') && p[2];
    size_t digits = hex ? strspn(p + 2, "0123456789abcdefABCDEF") + 2 : strspn(p, "0123456789");
    char *end;
    s->name = name;
    errno = 0;
    if (digits > 0 && p[digits] == '\0') {
        s->is_int = true;
        s->i = strtoll(v, &end, hex ? 16 : 10);
        if (errno == ERANGE)
            return cli_usage("--set %s=%s: integer out of the range of i64", name, v);
        return CLI_OK;
    }
    s->is_int = false;
    s->f = strtod(v, &end);
    if (end == v || *end || *v == ' ' || *v == '\t')
        return cli_usage("--set %s=%s: VALUE is not a number", name, v);
    return CLI_OK;
}

/* Parse argv into `a` and `s`; returns CLI_OK, CLI_USAGE, or -1 when
 * --help or --version was answered. */
static int cli_parse(int argc, char **argv, cli_args *a, cli_session *s)
{
    static const char *const devices[] = {"auto", "cpu", "gpu"};
    static const char *const strategies[] = {"auto", "tree", "sequential", "persistent", "segmented"};
    static const char *const formats[] = {"text", "json"};
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        char *arg = argv[i], *val = NULL;
        if (options_done || arg[0] != '-' || strcmp(arg, "-") == 0) {
            if (a->script)
                return cli_usage("more than one script file ('%s' and '%s')", a->script, arg);
            a->script = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            options_done = true;
            continue;
        }
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            fputs(cli_help, stdout);
            fputc('\n', stdout);
            print_history_note(stdout);
            return -1;
        }
        if (strcmp(arg, "-V") == 0 || strcmp(arg, "--version") == 0) {
            printf("redjit %s\n", red_version_string());
            return -1;
        }
        if (strcmp(arg, "--explain") == 0 || strncmp(arg, "--explain=", 10) == 0) {
            static const char *const whats[] = {"plan", "cuda"};
            int w = arg[9] ? cli_keyword("--explain", arg + 10, whats, 2) : -1;
            if (arg[9] && w < 0)
                return CLI_USAGE;
            s->explain = true;
            s->explain_what = w == 0 ? RED_EXPLAIN_PLAN : w == 1 ? RED_EXPLAIN_CUDA : RED_EXPLAIN_CUDA_ON_GPU;
            continue;
        }
        if (strcmp(arg, "--verbose") == 0) {
            a->verbose = true;
            continue;
        }
        /* Every other option takes a value: "--opt VALUE" or "--opt=VALUE". */
        char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        if (eq) {
            *eq = '\0';
            val = eq + 1;
        }
        static const char *const valued[] = {"-e", "--expr", "--load", "--set", "--device",
                                             "--strategy", "--threads", "--format", "--out"};
        bool known = false;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
            known = known || strcmp(arg, valued[k]) == 0;
        if (!known)
            return cli_usage("unknown option '%s'", arg);
        if (!val) {
            if (i + 1 >= argc)
                return cli_usage("%s needs a value", arg);
            val = argv[++i];
        }
        if (strcmp(arg, "-e") == 0 || strcmp(arg, "--expr") == 0) {
            if (a->expr)
                return cli_usage("-e given twice");
            a->expr = val;
        } else if (strcmp(arg, "--load") == 0) {
            char *path;
            if (!cli_split(val, &path) || !cli_is_name(val))
                return cli_usage("--load needs NAME=FILE.npy, not '%s'", val);
            for (int k = 0; k < s->nloads; k++)
                if (strcmp(s->loads[k].name, val) == 0)
                    return cli_usage("--load %s given twice", val);
            s->loads[s->nloads++] = (cli_load){val, path, {0}, NULL};
        } else if (strcmp(arg, "--set") == 0) {
            char *v;
            if (!cli_split(val, &v) || !cli_is_name(val))
                return cli_usage("--set needs NAME=VALUE, not '%s'", val);
            if (cli_parse_set(val, v, &s->sets[s->nsets]) != CLI_OK)
                return CLI_USAGE;
            s->nsets++;
        } else if (strcmp(arg, "--out") == 0) {
            char *path;
            bool pos = strspn(val, "0123456789") == strcspn(val, "=") && val[0] != '=';
            if (!cli_split(val, &path) || (!pos && !cli_is_name(val)) || (pos && strlen(val) > 6))
                return cli_usage("--out needs NAME=FILE.npy or POSITION=FILE.npy, not '%s'", val);
            s->outs[s->nouts++] = (cli_out){pos ? NULL : val, pos ? atoi(val) : 0, path};
        } else if (strcmp(arg, "--device") == 0) {
            if ((a->device = cli_keyword(arg, val, devices, 3)) < 0)
                return CLI_USAGE;
        } else if (strcmp(arg, "--strategy") == 0) {
            if ((a->strategy = cli_keyword(arg, val, strategies, 5)) < 0)
                return CLI_USAGE;
        } else if (strcmp(arg, "--format") == 0) {
            int f = cli_keyword(arg, val, formats, 2);
            if (f < 0)
                return CLI_USAGE;
            s->json = f == 1;
        } else if (strcmp(arg, "--threads") == 0) {
            char *end;
            errno = 0;
            long n = strtol(val, &end, 10);
            if (end == val || *end || errno || n < 0 || n > INT_MAX)
                return cli_usage("--threads needs a non-negative integer, not '%s'", val);
            a->threads = (int)n;
        }
    }
    if (a->expr && a->script)
        return cli_usage("give either -e EXPR or a script file, not both");
    /* `redjit --load x=x.npy 'sum(x)'`: an expression where a script goes.
     * Not evaluated as one: a mistyped file name would then run as an
     * expression and fail with a message about names.  A missing FILE.red
     * stays a file error (exit 1). */
    size_t len = a->script ? strlen(a->script) : 0;
    if (a->script && strcmp(a->script, "-") != 0 && access(a->script, F_OK) != 0 && errno == ENOENT &&
        !(len >= 4 && strcmp(a->script + len - 4, ".red") == 0))
        return cli_usage("'%s' is not a file; to evaluate an expression, give it with -e: redjit -e '%s'",
                         a->script, a->script);
    if (s->nouts && !a->expr && !a->script)
        return cli_usage("--out needs -e EXPR or a script file");
    return CLI_OK;
}

static int cli_options(const cli_args *a, red_ctx *ctx)
{
    /* The enum orders of the keyword tables above match the library's. */
    static const int devices[] = {RED_DEVICE_AUTO, RED_DEVICE_CPU, RED_DEVICE_GPU};
    static const int strategies[] = {RED_STRATEGY_AUTO, RED_STRATEGY_TREE, RED_STRATEGY_SEQUENTIAL,
                                     RED_STRATEGY_PERSISTENT, RED_STRATEGY_SEGMENTED};
    int rc = RED_OK;
    if (a->device >= 0)
        rc = red_set_option(ctx, RED_OPT_DEVICE, devices[a->device]);
    if (rc == RED_OK && a->strategy >= 0)
        rc = red_set_option(ctx, RED_OPT_STRATEGY, strategies[a->strategy]);
    if (rc == RED_OK && a->threads >= 0)
        rc = red_set_option(ctx, RED_OPT_THREADS, a->threads);
    return rc;
}

static int cli_main(int argc, char **argv, cli_session *s)
{
    cli_args a = {NULL, NULL, -1, -1, -1, false};
    int status = cli_parse(argc, argv, &a, s);
    if (status != CLI_OK)
        return status < 0 ? CLI_OK : status;

    for (int i = 0; i < s->nloads; i++) {
        char err[1024];
        cli_load *l = &s->loads[i];
        if (npy_load(l->path, &l->array, &l->owned, err, sizeof err) != 0) {
            fprintf(stderr, "redjit: --load %s: %s\n", l->name, err);
            return CLI_FAIL;
        }
    }
    int rc = red_open(&s->ctx);
    if (rc != RED_OK) {
        fprintf(stderr, "redjit: cannot start: %s\n", red_errstr(rc));
        return CLI_FAIL;
    }
    static bool verbose;
    verbose = a.verbose;
    red_set_log(s->ctx, cli_log, &verbose);
    s->verbose = a.verbose;
    rc = cli_options(&a, s->ctx);
    if (rc == RED_OK && a.verbose)
        rc = red_set_option(s->ctx, RED_OPT_TIMINGS, 1);   /* the GPU phases of the note */
    if (rc != RED_OK)
        return cli_lib_error(s, rc, red_errmsg(s->ctx));

    if (a.expr) {
        status = cli_eval(s, a.expr);
    } else {
        status = cli_session_run(s, a.script);
    }
    /* A full disk or a closed pipe must not pass for success. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "redjit: writing the results failed: %s\n", strerror(errno));
        status = CLI_FAIL;
    }
    return status;
}

int main(int argc, char **argv)
{
    cli_session s;
    memset(&s, 0, sizeof s);
    /* Each option appears at most once per argument, so argc bounds every list. */
    s.loads = calloc((size_t)argc, sizeof *s.loads);
    s.sets = calloc((size_t)argc, sizeof *s.sets);
    s.outs = calloc((size_t)argc, sizeof *s.outs);
    int status;
    if (!s.loads || !s.sets || !s.outs) {
        fputs("redjit: out of memory\n", stderr);
        status = CLI_FAIL;
    } else {
        status = cli_main(argc, argv, &s);
    }
    red_close(s.ctx);
    for (int i = 0; s.loads && i < s.nloads; i++)
        free(s.loads[i].owned);
    free(s.loads);
    free(s.sets);
    free(s.outs);
    return status;
}
