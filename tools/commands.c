/*
 * commands.c -- the session's ':' commands: help, files in and out, the
 * table of values, the evaluation settings, and the looks inside an
 * evaluation (:explain, :time, :bench, :cache).
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "npy.h"
#include "print.h"
#include "repl.h"

const char *const command_names[] = {":help", ":load", ":save", ":vars", ":del", ":explain", ":strategy",
                                     ":device", ":time", ":bench", ":cache", ":seed", ":ops", ":quit", NULL};

static const char help_text[] =
    "Type a statement and press Enter; an unfinished one (open bracket, trailing\n"
    "operator) continues on the next line, and an empty line ends it.\n"
    "\n"
    "  x = randn(1e8)              keep a value under a name for the session\n"
    "  y = x + 0.001 * randn(1e8)  generators work inside expressions too\n"
    "  max(abs(x - y))             evaluate and print\n"
    "  d = x - y; max(abs(d))      one program: d names a value inside it, not kept\n"
    "  p = x + 1; q = x * 2        assignments only: each runs in turn, p and q are kept\n"
    "  C[i,j] = sum(A[i,k]*B[k,j]) over k      stores C\n"
    "  op cmul(a,b) = (a.0*b.0 - a.1*b.1, a.0*b.1 + a.1*b.0) identity (1, 0)\n"
    "                              operators are kept for later statements\n"
    "\n"
    "generators (f32 unless dtype=...; sizes may be expressions, n... is a shape):\n"
    "  iota(n...) (i64)  rand(n...)  randn(n...)  randint(lo, hi, n...) (i64)\n"
    "  zeros(n...)  ones(n...)  full(n..., value)      e.g. randn(1000, 1000, dtype=f64)\n"
    "  (dtype: bool i8 u8 i16 u16 i32 i64 u32 u64 f32 f64 c64 c128; rand and randn of a\n"
    "   complex type draw both parts)\n"
    "\n"
    "commands:\n"
    "  :help                  this text\n"
    "  :load NAME FILE        read a .npy file, or a .csv table (1-D or 2-D)\n"
    "  :save NAME FILE        write NAME as .npy or .csv\n"
    "  :vars                  the session's values: dtype, shape, where (gpu/host), bytes\n"
    "  :del NAME...           forget values\n"
    "  :seed N                restart the generators from seed N\n"
    "  :ops [clear]           the saved operators\n"
    "  :explain [--cuda] EXPR the plan: passes, backend, strategy, launch configuration;\n"
    "                         the generated CUDA too on the GPU, or with --cuda\n"
    "  :strategy [S]          auto, tree, sequential, persistent or segmented\n"
    "  :device [D]            auto, cpu or gpu; cpu copies the values on the GPU to the host\n"
    "  :time EXPR             time parsing, planning, compiling (or the cache hit), uploads,\n"
    "                         kernels and downloads, the first and later runs\n"
    "  :bench EXPR            every strategy on the same input, median times\n"
    "  :cache [clear]         kernel cache statistics; clear empties the disk cache\n"
    "  :quit                  leave (also Ctrl-D)\n"
    "\n"
    "With a GPU (and :device not cpu) the values made here (generators, :load, NAME = ...)\n"
    "live in GPU memory, so evaluations read them where they are; :save and printing\n"
    "copy them back.\n"
    "\n"
    "Tab completes names, functions, commands, and file names after :load NAME and\n"
    ":save NAME; Up and Down bring back whole statements, however many lines they took.\n"
    "Ctrl-C abandons the line being typed, or stops the statement being evaluated\n"
    "(\"interrupted\"; nothing is stored).\n";

static const char *const strategy_names[] = {"auto", "tree", "sequential", "persistent", "segmented"};
static const char *const device_names[] = {"auto", "cpu", "gpu"};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The next blank-separated word of `*p` (written into `buf`).  `*p` moves
 * past it only when it fits, so a word too long is still there for
 * extra_words to report. */
static bool word(const char **p, char *buf, size_t len)
{
    const char *b = *p + strspn(*p, " \t");
    size_t n = strcspn(b, " \t");
    if (n == 0 || n >= len)
        return false;
    *p = b + n;
    memcpy(buf, b, n);
    buf[n] = '\0';
    return true;
}

/* The rest of the line, blanks and one pair of quotes trimmed. */
static char *rest(const char *p, char *buf, size_t len)
{
    p += strspn(p, " \t");
    snprintf(buf, len, "%s", p);
    size_t n = strlen(buf);
    while (n && isspace((unsigned char)buf[n - 1]))
        buf[--n] = '\0';
    if (n >= 2 && (buf[0] == '"' || buf[0] == '\'') && buf[n - 1] == buf[0]) {
        buf[n - 1] = '\0';
        return buf + 1;
    }
    return buf;
}

/* Words after those a command takes are reported rather than ignored: a
 * stray word is more likely a mistake than a wish. */
static bool extra_words(repl_session *s, const char *args, const char *usage)
{
    args += strspn(args, " \t");
    if (!*args)
        return false;
    session_error(s, "usage: %s (unexpected '%.40s')", usage, args);
    return true;
}

/* The one optional word of `:ops [clear]` and its kind: "" when absent;
 * false after reporting more words than that. */
static bool optional_word(repl_session *s, const char *args, char *buf, size_t len, const char *usage)
{
    if (!word(&args, buf, len))
        buf[0] = '\0';
    return !extra_words(s, args, usage);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static bool valid_name(const char *s)
{
    static const char *const keywords[] = {"over", "in", "by", "reduce", "scan", "exscan", "op",
                                           "ordered", "identity", "true", "false", "inf", "nan", NULL};
    if (!(isalpha((unsigned char)*s) || *s == '_') || strncmp(s, "__g", 3) == 0)
        return false;
    for (const char *c = s; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '_'))
            return false;
    for (int i = 0; keywords[i]; i++)
        if (strcmp(s, keywords[i]) == 0)
            return false;
    return true;
}

static void fmt_bytes(char *buf, size_t n, double b)
{
    static const char *const units[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    while (b >= 1000 && u < 4) {
        b /= 1000;
        u++;
    }
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", b, units[u]);
}

/* ---- values and files ----------------------------------------------------------- */

static int cmd_vars(repl_session *s)
{
    int shown = 0;
    for (int i = 0; i < s->nvars; i++) {
        const repl_var *v = &s->vars[i];
        if (v->hidden)
            continue;
        if (shown++ == 0)
            printf("%-16s %-5s %-20s %-6s %10s\n", "name", "dtype", "shape", "where", "bytes");
        char shape[160] = "(", bytes[32];
        for (int d = 0; d < v->a.ndim; d++) {
            size_t len = strlen(shape);
            snprintf(shape + len, sizeof shape - len, "%s%" PRId64, d ? ", " : "", v->a.shape[d]);
        }
        strcat(shape, v->a.ndim == 1 ? ",)" : ")");
        if (v->a.ndim == 0 && v->a.memory != RED_MEM_CUDA) {   /* a scalar: its value says more than "()" */
            shape[0] = '=';
            shape[1] = ' ';
            print_fmt_elem(shape + 2, sizeof shape - 2, v->a.dtype, v->a.data, false);
        }
        fmt_bytes(bytes, sizeof bytes, (double)red_array_size(&v->a) * (double)red_dtype_size(v->a.dtype));
        printf("%-16s %-5s %-20s %-6s %10s\n", v->name, red_dtype_name(v->a.dtype), shape,
               v->a.memory == RED_MEM_CUDA ? "gpu" : "host", bytes);
    }
    if (!shown)
        puts("no values yet (x = randn(1000) makes one)");
    return 0;
}

static int cmd_del(repl_session *s, const char *args)
{
    char name[256];
    int status = 0, n = 0;
    while (word(&args, name, sizeof name)) {
        n++;
        if (!session_del(s, name)) {
            session_error(s, ":del: no value is named '%s'", name);
            status = 1;
        }
    }
    if (extra_words(s, args, ":del NAME..."))   /* a word too long to be a name */
        return 1;
    if (n == 0) {
        session_error(s, "usage: :del NAME...");
        return 1;
    }
    return status;
}

static int cmd_load(repl_session *s, const char *args)
{
    char name[256], pathbuf[4096], err[1024];
    if (!word(&args, name, sizeof name) || !*rest(args, pathbuf, sizeof pathbuf)) {
        session_error(s, "usage: :load NAME FILE (.npy or .csv)");
        return 1;
    }
    if (!valid_name(name)) {
        session_error(s, ":load: '%s' is not a usable name", name);
        return 1;
    }
    const char *path = rest(args, pathbuf, sizeof pathbuf);
    red_array a;
    void *owned = NULL;
    int rc = ends_with(path, ".csv") ? csv_load(path, &a, &owned, err, sizeof err)
                                     : npy_load(path, &a, &owned, err, sizeof err);
    if (rc != 0) {
        session_error(s, ":load: %s", err);
        return 1;
    }
    repl_var *v = session_adopt(s, name, &a, owned, STORE_MALLOC);   /* onto the GPU if it goes there */
    if (!v) {
        session_error(s, ":load: out of memory");
        return 1;
    }
    v->weak = false;   /* a file's value keeps the file's type */
    return 0;
}

static int cmd_save(repl_session *s, const char *args)
{
    char name[256], pathbuf[4096], err[1024];
    if (!word(&args, name, sizeof name) || !*rest(args, pathbuf, sizeof pathbuf)) {
        session_error(s, "usage: :save NAME FILE (.npy or .csv)");
        return 1;
    }
    const repl_var *v = session_find(s, name);
    if (!v || v->hidden) {
        session_error(s, ":save: no value is named '%s'", name);
        return 1;
    }
    const char *path = rest(args, pathbuf, sizeof pathbuf);
    red_array a;
    void *tmp;
    int rc = session_host_array(s, v, &a, &tmp);   /* a copy of a GPU value */
    if (rc != RED_OK) {
        session_error(s, ":save: %s: copying it from the GPU failed: %s", name, s->move_error);
        return 1;
    }
    rc = ends_with(path, ".csv") ? csv_save(path, &a, err, sizeof err) : npy_save(path, &a, err, sizeof err);
    free(tmp);
    if (rc != 0) {
        session_error(s, ":save: %s", err);
        return 1;
    }
    return 0;
}

/* ---- settings ----------------------------------------------------------------- */

static int cmd_option(repl_session *s, const char *cmd, const char *args, red_option opt,
                      const char *const *names, int nnames)
{
    char val[64], usage[64];
    int cur = 0;
    snprintf(usage, sizeof usage, "%s [%s]", cmd, opt == RED_OPT_DEVICE ? "D" : "S");
    if (!optional_word(s, args, val, sizeof val, usage))
        return 1;
    if (!val[0]) {
        red_get_option(s->ctx, opt, &cur);
        printf("%s\n", cur >= 0 && cur < nnames ? names[cur] : "?");
        return 0;
    }
    for (int i = 0; i < nnames; i++) {
        if (strcmp(val, names[i]) != 0)
            continue;
        if (opt == RED_OPT_DEVICE && i == RED_DEVICE_GPU && !red_gpu_available(s->ctx)) {
            session_error(s, ":device gpu: no usable GPU: %s", red_errmsg(s->ctx));
            return 1;
        }
        /* The CPU executor cannot read GPU memory: bring every value home
         * first, and keep the old device if one cannot be copied. */
        for (int k = 0; opt == RED_OPT_DEVICE && i == RED_DEVICE_CPU && k < s->nvars; k++) {
            int rc = session_move(s, &s->vars[k], RED_MEM_HOST);
            if (rc != RED_OK) {
                session_error(s, ":device cpu: copying %s from the GPU failed: %s", s->vars[k].name,
                              s->move_error);
                return 1;
            }
        }
        int rc = red_set_option(s->ctx, opt, i);   /* the name tables follow the enums */
        if (rc != RED_OK)
            session_lib_error(s, rc, red_errmsg(s->ctx), 0);
        return rc != RED_OK;
    }
    session_error(s, "%s: unknown value '%s'", cmd, val);
    return 1;
}

static int cmd_ops(repl_session *s, const char *args)
{
    char w[16];
    if (!optional_word(s, args, w, sizeof w, ":ops [clear]"))
        return 1;
    if (w[0]) {
        if (strcmp(w, "clear") != 0) {
            session_error(s, "usage: :ops [clear]");
            return 1;
        }
        free(s->ops);
        s->ops = NULL;
        return 0;
    }
    fputs(s->ops && *s->ops ? s->ops : "no operators yet (op NAME(a, b) = ... identity ...)\n", stdout);
    return 0;
}

/* ---- looking inside an evaluation ---------------------------------------------- */

static bool on_gpu(repl_session *s)
{
    int dev = RED_DEVICE_AUTO;
    red_get_option(s->ctx, RED_OPT_DEVICE, &dev);
    return dev == RED_DEVICE_GPU || (dev == RED_DEVICE_AUTO && red_gpu_available(s->ctx));
}

/* Prepare and bind EXPR as an entry; 1 after printing an error.  `st` is
 * filled in on every path, so the caller's stmt_free is always safe. */
static int prepared(repl_session *s, const char *cmd, const char *expr, repl_stmt *st)
{
    memset(st, 0, sizeof *st);
    expr += strspn(expr, " \t");
    if (!*expr) {
        session_error(s, "usage: %s EXPR", cmd);
        return 1;
    }
    if (stmt_prepare(s, expr, st) != 0)
        return 1;
    if (st->alias || st->ops_only) {
        session_error(s, "%s: give an expression to evaluate", cmd);
        return 1;
    }
    return stmt_bind(s, st);
}

/* `:explain [--cuda] EXPR`.  "--cuda" could begin an expression (minus
 * minus a value named cuda), but not one anybody asks to explain. */
static int cmd_explain(repl_session *s, const char *expr)
{
    repl_stmt st;
    int what = RED_EXPLAIN_CUDA_ON_GPU;
    expr += strspn(expr, " \t");
    if (strncmp(expr, "--cuda", 6) == 0 && (expr[6] == '\0' || expr[6] == ' ' || expr[6] == '\t')) {
        what = RED_EXPLAIN_CUDA;
        expr += 6;
    }
    int status = prepared(s, ":explain", expr, &st);
    const char *plan = NULL;
    if (status == 0) {
        int rc = red_explain_ex(st.e, what, &plan);
        if (rc != RED_OK) {
            session_lib_error(s, rc, red_expr_errmsg(st.e), st.oplines);
            status = 1;
        } else {
            fputs(plan, stdout);
            if (*plan && plan[strlen(plan) - 1] != '\n')
                fputc('\n', stdout);
        }
    }
    stmt_free(s, &st);
    return status;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Run `e` up to `max` times or about `budget_ms`; the median in ms. */
static int median_run(red_expr *e, int max, double budget_ms, double *median, int *runs)
{
    double t[64];
    double start = now_ms();
    int n = 0;
    if (max > 64)
        max = 64;
    while (n < max && (n < 3 || now_ms() - start < budget_ms) && !repl_sigint) {
        double t0 = now_ms();
        int rc = red_run(e);
        if (rc != RED_OK)
            return rc;
        t[n++] = now_ms() - t0;
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    *median = n ? t[n / 2] : 0;
    *runs = n;
    return RED_OK;
}

static int cmd_time(repl_session *s, const char *expr)
{
    repl_stmt st;
    double t0 = now_ms();
    int status = prepared(s, ":time", expr, &st);
    double t_prep = now_ms() - t0;
    if (status == 0) {
        bool gpu = on_gpu(s);
        red_expr_set_option(st.e, RED_OPT_TIMINGS, 1);   /* the kernel time below */
        red_cache_info before, after;
        red_cache_stats(s->ctx, &before);
        t0 = now_ms();
        int rc = red_run(st.e);
        double t_first = now_ms() - t0, med = 0;
        int runs = 0;
        red_timings first_t = {0};
        if (rc == RED_OK) red_last_timings(st.e, &first_t);
        red_cache_stats(s->ctx, &after);
        if (rc == RED_OK)
            rc = median_run(st.e, 20, 1000, &med, &runs);
        if (rc != RED_OK) {
            session_lib_error(s, rc, red_expr_errmsg(st.e), st.oplines);
            status = 1;
        } else {
            char what[128];
            print_cache_note(what, sizeof what, &before, &after, gpu);
            red_timings last = {0};
            red_last_timings(st.e, &last);
            printf("parse + generators  %10.3f ms\n", t_prep);
            printf("first run           %10.3f ms   %s\n", t_first, what);
            printf("  check and plan    %10.3f ms\n", first_t.plan_ms);
            if (gpu) printf("  compile           %10.3f ms\n", first_t.compile_ms);
            printf("run (median of %2d)  %10.3f ms\n", runs, med);
            if (gpu) {
                /* the phases of the last run, from CUDA events */
                printf("  upload            %10.3f ms\n", last.upload_ms);
                printf("  kernels           %10.3f ms   (last run)\n", last.kernel_ms);
                printf("  download          %10.3f ms\n", last.download_ms);
            } else {
                printf("  CPU executor      %10.3f ms   (last run)\n", last.cpu_ms);
            }
            status = stmt_deliver(s, &st);
        }
    }
    stmt_free(s, &st);
    return status;
}

static int cmd_bench(repl_session *s, const char *expr)
{
    repl_stmt st;
    int status = prepared(s, ":bench", expr, &st);
    if (status == 0) {
        bool gpu = on_gpu(s);
        printf("%-11s %12s %12s %5s\n", "strategy", "first (ms)", "median (ms)", "runs");
        for (int k = 0; k < 5 && !repl_sigint; k++) {
            double t0 = now_ms(), med = 0;
            int runs = 0;
            int rc = red_expr_set_option(st.e, RED_OPT_STRATEGY, k);
            if (rc == RED_OK)
                rc = red_run(st.e);
            double first = now_ms() - t0;
            if (rc == RED_OK)
                rc = median_run(st.e, 10, 500, &med, &runs);
            if (rc != RED_OK)
                printf("%-11s   n/a: %s\n", strategy_names[k], red_errstr(rc));
            else
                printf("%-11s %12.3f %12.3f %5d\n", strategy_names[k], first, med, runs);
            fflush(stdout);
        }
        if (!gpu)
            puts("(cpu executor: the strategy only changes GPU kernels)");
    }
    stmt_free(s, &st);
    return status;
}

static int cmd_cache(repl_session *s, const char *args)
{
    char w[16];
    if (!optional_word(s, args, w, sizeof w, ":cache [clear]"))
        return 1;
    if (w[0]) {
        if (strcmp(w, "clear") != 0) {
            session_error(s, "usage: :cache [clear]");
            return 1;
        }
        int n = red_cache_clear(s->ctx);
        printf("removed %d cached kernel%s from disk\n", n, n == 1 ? "" : "s");
        return 0;
    }
    red_cache_info c;
    int rc = red_cache_stats(s->ctx, &c);
    if (rc != RED_OK) {
        session_lib_error(s, rc, red_errmsg(s->ctx), 0);
        return 1;
    }
    char pool[32], used[32], progs[32];
    fmt_bytes(pool, sizeof pool, (double)c.pool_bytes);
    fmt_bytes(used, sizeof used, (double)c.pool_in_use);
    fmt_bytes(progs, sizeof progs, (double)c.program_bytes);
    printf("memory hits   %lld\ndisk hits     %lld\ncompiles      %lld (%.1f ms NVRTC)\n"
           "buffer pool   %s, %s in use\nprograms      %lld parsed, %lld plans, %s\n", c.memory_hits, c.disk_hits,
           c.compiles, c.compile_ms, pool, used, c.programs, c.plans, progs);
    return 0;
}

/* ---- dispatch ------------------------------------------------------------------- */

int command_run(repl_session *s, const char *line)
{
    char cmd[32];
    const char *args = line;
    if (!word(&args, cmd, sizeof cmd)) {
        session_error(s, "unknown command '%.40s' (:help lists them)", line);
        return 1;
    }
    if (strcmp(cmd, ":quit") == 0 || strcmp(cmd, ":q") == 0 || strcmp(cmd, ":exit") == 0) {
        if (extra_words(s, args, ":quit"))
            return 1;
        s->quit = true;
        return 0;
    }
    if (strcmp(cmd, ":help") == 0 || strcmp(cmd, ":h") == 0 || strcmp(cmd, ":?") == 0) {
        fputs(help_text, stdout);
        fputc('\n', stdout);
        print_history_note(stdout);
        return 0;
    }
    if (strcmp(cmd, ":seed") == 0) {
        char num[32] = "", *end = NULL;
        unsigned long long v = word(&args, num, sizeof num) ? strtoull(num, &end, 0) : 0;
        /* strtoull takes "-1" as 2^64 - 1 */
        if (!num[0] || *end || num[0] == '-') {
            session_error(s, "usage: :seed N (a non-negative integer)");
            return 1;
        }
        if (extra_words(s, args, ":seed N"))
            return 1;
        gen_seed(s, v);
        return 0;
    }
    int status;
    if (strcmp(cmd, ":vars") == 0)
        status = extra_words(s, args, ":vars") ? 1 : cmd_vars(s);
    else if (strcmp(cmd, ":del") == 0)
        status = cmd_del(s, args);
    else if (strcmp(cmd, ":load") == 0)
        status = cmd_load(s, args);
    else if (strcmp(cmd, ":save") == 0)
        status = cmd_save(s, args);
    else if (strcmp(cmd, ":ops") == 0)
        status = cmd_ops(s, args);
    else if (strcmp(cmd, ":strategy") == 0)
        status = cmd_option(s, cmd, args, RED_OPT_STRATEGY, strategy_names, 5);
    else if (strcmp(cmd, ":device") == 0)
        status = cmd_option(s, cmd, args, RED_OPT_DEVICE, device_names, 3);
    else if (strcmp(cmd, ":explain") == 0)
        status = cmd_explain(s, args);
    else if (strcmp(cmd, ":time") == 0)
        status = cmd_time(s, args);
    else if (strcmp(cmd, ":bench") == 0)
        status = cmd_bench(s, args);
    else if (strcmp(cmd, ":cache") == 0)
        status = cmd_cache(s, args);
    else {
        session_error(s, "unknown command '%s' (:help lists them)", cmd);
        return 1;
    }
    fflush(stdout);
    return status;
}
