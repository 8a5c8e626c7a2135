/*
 * session.c -- what persists between statements typed at the prompt: named
 * arrays and scalars, saved `op` definitions, and how one entry becomes a
 * program for the library (bind every value, store or print the results).
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "print.h"
#include "repl.h"

volatile sig_atomic_t repl_sigint;

/* ---- the token scanner ----------------------------------------------------------- */

static bool scan_namechar(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* Tokens as the library's lexer sees them, to the precision the session
 * needs: a newline separates statements only outside brackets. */
scan_tok scan_next(scan_state *st)
{
    const char *p = st->p;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || (*p == '\n' && st->depth > 0))
            p++;
        if (*p != '#')
            break;
        while (*p && *p != '\n')
            p++;
    }
    scan_tok t = {SC_END, p, 0, st->depth};
    if (!*p) {
        st->p = p;
        return t;
    }
    const char *q = p + 1;
    if (isalpha((unsigned char)*p) || *p == '_') {
        while (scan_namechar(*q))
            q++;
        t.kind = SC_NAME;
    } else if (isdigit((unsigned char)*p)) {
        /* 1.5e-3, 0x7f; "0..n" is a number and a range, not "0." */
        while (scan_namechar(*q) || (*q == '.' && isdigit((unsigned char)q[1])) ||
               ((*q == '+' || *q == '-') && (q[-1] == 'e' || q[-1] == 'E') && p[1] != 'x'))
            q++;
        t.kind = SC_NUM;
    } else if (*p == '(' || *p == '[') {
        t.kind = SC_OPEN;
        st->depth++;
    } else if (*p == ')' || *p == ']') {
        t.kind = SC_CLOSE;
        t.depth = --st->depth;
    } else if (*p == ';' || *p == '\n') {
        t.kind = SC_SEP;
    } else if (*p == ',') {
        t.kind = SC_COMMA;
    } else {
        static const char *const two[] = {"==", "!=", "<=", ">=", "&&", "||", "<<", ">>", ".."};
        t.kind = SC_OP;
        for (size_t i = 0; i < sizeof two / sizeof two[0]; i++)
            if (p[0] == two[i][0] && p[1] == two[i][1])
                q = p + 2;
        if (q == p + 1 && *p == '=')
            t.kind = SC_ASSIGN;
    }
    t.len = (size_t)(q - p);
    st->p = q;
    return t;
}

bool scan_is(const scan_tok *t, const char *word)
{
    return t->len == strlen(word) && strncmp(t->p, word, t->len) == 0;
}

static char *dup_n(const char *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

/* ---- values ----------------------------------------------------------------------- */

void session_init(repl_session *s, red_ctx *ctx)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->line = 1;
    gen_seed(s, 0x5eed);
}

static void storage_release(repl_session *s, repl_storage storage, void *data)
{
    switch (storage) {
    case STORE_NONE: break;
    case STORE_MALLOC: free(data); break;
    case STORE_LIBRARY: red_free(data); break;
    case STORE_DEVICE: red_device_free(s->ctx, data); break;
    }
}

static void var_release(repl_session *s, repl_var *v)
{
    storage_release(s, v->storage, v->data);
    free(v->name);
}

void session_free(repl_session *s)
{
    for (int i = 0; i < s->nvars; i++)
        var_release(s, &s->vars[i]);
    free(s->vars);
    free(s->ops);
    s->vars = NULL;
    s->nvars = s->capvars = 0;
    s->ops = NULL;
}

repl_var *session_find(repl_session *s, const char *name)
{
    for (int i = 0; i < s->nvars; i++)
        if (strcmp(s->vars[i].name, name) == 0)
            return &s->vars[i];
    return NULL;
}

bool session_del(repl_session *s, const char *name)
{
    repl_var *v = session_find(s, name);
    if (!v)
        return false;
    var_release(s, v);
    /* keep the order of definition: :vars lists them as they were made */
    memmove(v, v + 1, (size_t)(s->vars + s->nvars - (v + 1)) * sizeof *v);
    s->nvars--;
    return true;
}

void session_drop_hidden(repl_session *s)
{
    for (int i = s->nvars - 1; i >= 0; i--)
        if (s->vars[i].hidden)
            session_del(s, s->vars[i].name);
    s->ntemp = 0;
}

/* Scalars typed at the prompt (`eps = 1e-3`, `n = 10`) act like the
 * literal they came from: `x > eps` stays f32 for f32 x.  They are bound by
 * value, so they must be in host memory. */
static void set_weak(repl_var *v)
{
    v->weak = v->a.ndim == 0 && v->a.memory != RED_MEM_CUDA && (v->a.dtype == RED_F64 || v->a.dtype == RED_I64);
}

/* Add `a` to the table as it is, where it is. */
static repl_var *var_insert(repl_session *s, const char *name, const red_array *a, void *data,
                            repl_storage storage)
{
    char *nm = strdup(name);
    if (!nm || (s->nvars == s->capvars && !session_find(s, name))) {
        int cap = s->capvars ? 2 * s->capvars : 16;
        repl_var *nv = nm ? realloc(s->vars, (size_t)cap * sizeof *nv) : NULL;
        if (!nv) {
            free(nm);
            storage_release(s, storage, data);
            return NULL;
        }
        s->vars = nv;
        s->capvars = cap;
    }
    session_del(s, name);
    repl_var *v = &s->vars[s->nvars++];
    *v = (repl_var){nm, *a, data, storage, false, false};
    set_weak(v);
    return v;
}

repl_var *session_adopt(repl_session *s, const char *name, const red_array *a, void *data,
                        repl_storage storage)
{
    repl_var *v = var_insert(s, name, a, data, storage);
    if (v)
        session_settle(s, v);   /* a failure leaves a usable value where it is */
    return v;
}

repl_var *session_new_array(repl_session *s, const char *name, red_dtype t, int ndim,
                            const int64_t *shape)
{
    red_array a;
    if (red_array_init(&a, NULL, t, ndim, shape, NULL) != RED_OK)
        return NULL;
    int64_t n = red_array_size(&a);
    size_t es = red_dtype_size(t);
    if (n < 0 || es == 0 || (uint64_t)n > SIZE_MAX / es)
        return NULL;
    void *p = malloc(n ? (size_t)n * es : 1);
    if (!p)
        return NULL;
    a.data = p;
    return var_insert(s, name, &a, p, STORE_MALLOC);
}

/* ---- where values live ------------------------------------------------------------ */

/* The bytes from a->data that hold every element, when the elements are
 * exactly one block of red_array_size elements (C or Fortran order, or any
 * order of the axes: the axes longer than 1, by increasing stride, have
 * strides 1, n0, n0*n1, ...).  Moving such a block and keeping the strides
 * moves the array. */
static bool block_bytes(const red_array *a, size_t *bytes)
{
    int64_t n = red_array_size(a), want = 1;
    size_t es = red_dtype_size(a->dtype);
    if (n <= 0 || es == 0 || (uint64_t)n > SIZE_MAX / es)
        return false;
    bool done[RED_MAX_DIMS] = {false};
    for (int k = 0; k < a->ndim; k++) {
        int next = -1;
        for (int d = 0; d < a->ndim; d++)
            if (!done[d] && a->shape[d] > 1 && (next < 0 || a->strides[d] < a->strides[next]))
                next = d;
        if (next < 0)
            break;
        if (a->strides[next] != want)
            return false;
        done[next] = true;
        want *= a->shape[next];   /* at most n: no overflow */
    }
    *bytes = (size_t)n * es;
    return true;
}

static red_memory memory_of(const red_array *a)
{
    return a->memory == RED_MEM_CUDA ? RED_MEM_CUDA : RED_MEM_HOST;
}

red_memory session_home(repl_session *s, const red_array *a)
{
    size_t bytes;
    int device = RED_DEVICE_AUTO;
    if (a->ndim == 0 || !block_bytes(a, &bytes))
        return RED_MEM_HOST;
    if (red_get_option(s->ctx, RED_OPT_DEVICE, &device) != RED_OK || device == RED_DEVICE_CPU)
        return RED_MEM_HOST;
    return red_gpu_available(s->ctx) ? RED_MEM_CUDA : RED_MEM_HOST;
}

int session_move(repl_session *s, repl_var *v, red_memory where)
{
    if (memory_of(&v->a) == where)
        return RED_OK;
    size_t bytes;
    if (!block_bytes(&v->a, &bytes)) {
        s->move_error = "its elements are not one block of memory";   /* kept on the host */
        return RED_ERR_ARG;
    }
    void *p = NULL;
    int rc;
    if (where == RED_MEM_CUDA) {
        rc = red_device_alloc(s->ctx, bytes, &p);
        if (rc == RED_OK) {
            rc = red_memcpy(s->ctx, p, RED_MEM_CUDA, v->a.data, RED_MEM_HOST, bytes);
            if (rc != RED_OK)
                red_device_free(s->ctx, p);
        }
    } else {
        p = malloc(bytes);
        rc = p ? red_memcpy(s->ctx, p, RED_MEM_HOST, v->a.data, RED_MEM_CUDA, bytes) : RED_ERR_NOMEM;
        if (rc != RED_OK)
            free(p);
    }
    if (rc != RED_OK) {
        s->move_error = !p && where == RED_MEM_HOST ? "out of host memory" : red_errmsg(s->ctx);
        return rc;
    }
    storage_release(s, v->storage, v->data);
    v->data = v->a.data = p;
    v->storage = where == RED_MEM_CUDA ? STORE_DEVICE : STORE_MALLOC;
    v->a.memory = where;
    v->a.device_id = 0;
    set_weak(v);
    return RED_OK;
}

int session_settle(repl_session *s, repl_var *v)
{
    red_memory where = session_home(s, &v->a);
    int rc = session_move(s, v, where);
    if (rc == RED_OK)
        return 0;
    fflush(stdout);
    fprintf(stderr, "redjit: note: %s stays in %s memory (moving it failed: %s)\n",
            v->hidden ? "a generated array" : v->name, where == RED_MEM_CUDA ? "host" : "GPU",
            s->move_error && *s->move_error ? s->move_error : red_errstr(rc));
    return 1;
}

int session_host_array(repl_session *s, const repl_var *v, red_array *out, void **tmp)
{
    *out = v->a;
    *tmp = NULL;
    if (memory_of(&v->a) == RED_MEM_HOST)
        return RED_OK;
    size_t bytes;
    if (!block_bytes(&v->a, &bytes)) {
        s->move_error = "its elements are not one block of memory";   /* never on the GPU */
        return RED_ERR_ARG;
    }
    if (!(*tmp = malloc(bytes))) {
        s->move_error = "out of host memory";
        return RED_ERR_NOMEM;
    }
    int rc = red_memcpy(s->ctx, *tmp, RED_MEM_HOST, v->a.data, RED_MEM_CUDA, bytes);
    if (rc != RED_OK) {
        s->move_error = red_errmsg(s->ctx);
        free(*tmp);
        *tmp = NULL;
        return rc;
    }
    out->data = *tmp;
    out->memory = RED_MEM_HOST;
    out->device_id = 0;
    return RED_OK;
}

/* ---- errors ----------------------------------------------------------------------- */

void session_error(repl_session *s, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    if (s->origin)
        fprintf(stderr, "%s:%d: ", s->origin, s->line);
    else
        fputs("redjit: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* The library numbers lines of the program it was given: saved operators
 * come first, and a script's statement starts at s->line. */
void session_lib_error(repl_session *s, int status, const char *msg, int oplines)
{
    if (status == RED_ERR_INTERRUPTED) {
        repl_sigint = 1;   /* Ctrl-C: session_exec says "interrupted" once */
        return;
    }
    fflush(stdout);
    if (!msg || !*msg)
        msg = red_errstr(status);
    char *end;
    long line = strtol(msg, &end, 10);
    if (isdigit((unsigned char)msg[0]) && *end == ':' && line > oplines) {
        line += s->line - 1 - oplines;
        if (s->origin)
            fprintf(stderr, "%s:", s->origin);
        fprintf(stderr, "%ld%s", line, end);
    } else if (isdigit((unsigned char)msg[0]) && *end == ':') {
        session_error(s, "in a saved operator:");
        fputs(msg, stderr);
    } else {
        session_error(s, "%s", msg);
        return;
    }
    if (msg[strlen(msg) - 1] != '\n')
        fputc('\n', stderr);
}

/* ---- statements ------------------------------------------------------------------- */

typedef struct span {
    const char *b, *e;
} span;

/* The top-level statements of `text` (empty ones skipped). */
static int split_stmts(const char *text, span *out, int max)
{
    scan_state st = {text, 0};
    int n = 0;
    const char *b = NULL, *e = NULL;
    for (;;) {
        scan_tok t = scan_next(&st);
        if (t.kind == SC_END || (t.kind == SC_SEP && t.depth == 0)) {
            if (b && n < max)
                out[n++] = (span){b, e};
            b = NULL;
            if (t.kind == SC_END)
                return n;
            continue;
        }
        if (!b)
            b = t.p;
        e = t.p + t.len;
    }
}

typedef enum { K_EXPR, K_OP, K_LET, K_INDEXED } stmt_kind;

/* What a statement is, from its first tokens; `*name` gets the assigned
 * name and `*eq` the '=' sign of an assignment. */
static stmt_kind classify(span sp, char **name, const char **eq)
{
    char *text = dup_n(sp.b, (size_t)(sp.e - sp.b));
    scan_state st = {text ? text : "", 0};
    scan_tok a = scan_next(&st), b = scan_next(&st);
    stmt_kind k = K_EXPR;
    *name = NULL;
    if (a.kind == SC_NAME && (scan_is(&a, "op") || (scan_is(&a, "ordered") && scan_is(&b, "op")))) {
        k = K_OP;
    } else if (a.kind == SC_NAME && b.kind == SC_ASSIGN) {
        k = K_LET;
        *eq = sp.b + (b.p - text);
    } else if (a.kind == SC_NAME && b.kind == SC_OPEN && *b.p == '[') {
        scan_tok t;
        do
            t = scan_next(&st);
        while (t.kind != SC_END && !(t.kind == SC_CLOSE && t.depth == 0));
        t = scan_next(&st);
        if (t.kind == SC_ASSIGN) {
            k = K_INDEXED;
            *eq = sp.b + (t.p - text);
        }
    }
    if (k == K_LET || k == K_INDEXED)
        *name = dup_n(a.p, a.len);
    free(text);
    return k;
}

static char *str_cat3(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *s = malloc(la + lb + lc + 1);
    if (s) {
        memcpy(s, a, la);
        memcpy(s + la, b, lb);
        memcpy(s + la + lb, c, lc + 1);
    }
    return s;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Whether `e` is one name of a hidden temporary (`x = randn(9)`). */
static char *only_temp(repl_session *s, const char *b, const char *e)
{
    char *text = dup_n(b, (size_t)(e - b));
    if (!text)
        return NULL;
    scan_state st = {text, 0};
    scan_tok a = scan_next(&st), z = scan_next(&st);
    char *name = NULL;
    if (a.kind == SC_NAME && z.kind == SC_END) {
        name = dup_n(a.p, a.len);
        repl_var *v = name ? session_find(s, name) : NULL;
        if (!v || !v->hidden) {
            free(name);
            name = NULL;
        }
    }
    free(text);
    return name;
}

enum { MAX_STMTS = 256 };

/* Generators become temporaries; the final statement decides what the entry
 * does (store NAME, print); saved operators go in front. */
int stmt_prepare(repl_session *s, const char *text, repl_stmt *st)
{
    memset(st, 0, sizeof *st);
    char *sub = gen_substitute(s, text);
    if (!sub)
        return 1;
    span *sp = malloc(MAX_STMTS * sizeof *sp);
    int n = sp ? split_stmts(sub, sp, MAX_STMTS) : 0;
    st->lets = calloc(MAX_STMTS, sizeof *st->lets);
    char *newops = strdup("");
    int status = sp && st->lets && newops ? 0 : 1;
    int nops = 0;
    for (int i = 0; i < n && status == 0; i++) {
        char *name;
        const char *eq = NULL;
        stmt_kind k = classify(sp[i], &name, &eq);
        if (k == K_OP) {
            nops++;
            char *body = dup_n(sp[i].b, (size_t)(sp[i].e - sp[i].b));
            char *grown = body ? str_cat3(newops, body, "\n") : NULL;
            free(body);
            free(newops);
            newops = grown;
            status = newops ? 0 : 1;
        } else if (i < n - 1 && name) {
            st->lets[st->nlets++] = name;
            name = NULL;
        } else if (i == n - 1 && name) {
            st->target = name;
            name = NULL;
            st->indexed = k == K_INDEXED;
            if (k == K_LET) {
                /* Blank "NAME =" rather than cut it so that carets in error
                 * messages stay under the text as typed. */
                for (char *c = sub + (sp[i].b - sub); c <= sub + (eq - sub); c++)
                    if (*c != '\n')
                        *c = ' ';
                if (n == 1)
                    st->alias = only_temp(s, eq + 1, sp[i].e);
            }
        }
        free(name);
    }
    st->ops_only = n > 0 && nops == n;
    st->newops = newops;
    free(sp);
    if (status != 0) {
        free(sub);
        session_error(s, "out of memory");
        return 1;
    }
    const char *ops = s->ops ? s->ops : "";
    st->oplines = count_lines(ops);
    /* A program of operators alone computes nothing: "0" lets the library
     * check their syntax. */
    st->prog = str_cat3(ops, sub, st->ops_only ? "\n0" : "");
    free(sub);
    if (!st->prog) {
        session_error(s, "out of memory");
        return 1;
    }
    if (st->alias)
        return 0;   /* nothing to evaluate: the temporary is renamed */
    int rc = red_prepare(s->ctx, st->prog, &st->e);
    if (rc != RED_OK) {
        session_lib_error(s, rc, red_errmsg(s->ctx), st->oplines);
        return 1;
    }
    /* A value to keep stays where a GPU run computed it (the CPU executor
     * gives host results whatever this says); session_adopt then settles
     * it where new values live. */
    if (st->target && (rc = red_expr_set_option(st->e, RED_OPT_RESULTS, RED_RESULTS_DEVICE)) != RED_OK) {
        session_lib_error(s, rc, red_expr_errmsg(st->e), st->oplines);
        return 1;
    }
    return 0;
}

int stmt_bind(repl_session *s, repl_stmt *st)
{
    for (int i = 0; i < s->nvars; i++) {
        repl_var *v = &s->vars[i];
        bool skip = st->indexed && strcmp(v->name, st->target) == 0;
        for (int k = 0; k < st->nlets && !skip; k++)
            skip = strcmp(v->name, st->lets[k]) == 0;
        if (skip)
            continue;
        int rc;
        /* weak values are host scalars (set_weak) */
        if (v->weak && v->a.dtype == RED_F64)
            rc = red_bind_f64(st->e, v->name, *(const double *)v->a.data);
        else if (v->weak)
            rc = red_bind_i64(st->e, v->name, *(const int64_t *)v->a.data);
        else
            rc = red_bind_array(st->e, v->name, &v->a);
        if (rc != RED_OK) {
            session_lib_error(s, rc, red_expr_errmsg(st->e), st->oplines);
            return 1;
        }
    }
    return 0;
}

void stmt_free(repl_session *s, repl_stmt *st)
{
    red_finalize(st->e);
    free(st->prog);
    free(st->target);
    free(st->alias);
    free(st->newops);
    for (int i = 0; i < st->nlets; i++)
        free(st->lets[i]);
    free(st->lets);
    memset(st, 0, sizeof *st);
    session_drop_hidden(s);
}

/* ---- results ---------------------------------------------------------------------- */

/* Result `i` in host memory; `*tmp` is a copy to free when it was not. */
static int result_host(red_expr *e, int i, red_array *a, const char **name, void **tmp)
{
    *tmp = NULL;
    int rc = red_result(e, i, a, name);
    if (rc != RED_OK || a->memory == 0 || a->memory == RED_MEM_HOST)
        return rc;
    int64_t n = red_array_size(a);
    size_t es = red_dtype_size(a->dtype);
    if (n < 0 || es == 0 || (uint64_t)n > SIZE_MAX / es || !(*tmp = malloc(n ? (size_t)n * es : 1)))
        return RED_ERR_NOMEM;
    red_array h;
    rc = red_array_init(&h, *tmp, a->dtype, a->ndim, a->shape, NULL);
    if (rc == RED_OK)
        rc = red_result_copy(e, i, &h);
    if (rc != RED_OK) {
        free(*tmp);
        *tmp = NULL;
        return rc;
    }
    *a = h;
    return RED_OK;
}

static int show_results(repl_session *s, repl_stmt *st)
{
    red_expr *e = st->e;
    int count = red_result_count(e);
    if (s->explain) {
        const char *plan = NULL;
        if (red_explain_ex(e, s->explain_what, &plan) == RED_OK && plan) {
            if (s->json) {
                fputs("{\"explain\": ", stdout);
                print_json_string(stdout, plan);
                fputs("}\n", stdout);
            } else {
                fputs(plan, stdout);
            }
        }
    }
    /* One result per line, at the prompt as from `redjit -e` and pipes:
     * what a person reads there is what a script will get. */
    if (s->json)
        fputs("{\"results\": [", stdout);
    for (int i = 0; i < count; i++) {
        red_array a;
        const char *name = NULL;
        void *tmp;
        int rc = result_host(e, i, &a, &name, &tmp);
        if (rc != RED_OK) {
            session_lib_error(s, rc, red_expr_errmsg(e), st->oplines);
            return 1;
        }
        if (s->json)
            print_json(stdout, &a, name, i == 0);
        else
            print_text(stdout, &a, name);
        free(tmp);
    }
    if (s->json)
        fputs(count > 0 ? "\n]}\n" : "]}\n", stdout);
    return 0;
}

static int save_ops(repl_session *s, const char *ops)
{
    if (!*ops)
        return 0;
    char *all = str_cat3(s->ops ? s->ops : "", ops, "");
    if (!all) {
        session_error(s, "out of memory");
        return 1;
    }
    free(s->ops);
    s->ops = all;
    return 0;
}

/* Keep the result of `NAME = EXPR` (or the result named NAME). */
static int store_result(repl_session *s, repl_stmt *st)
{
    red_expr *e = st->e;
    int count = red_result_count(e), which = -1;
    for (int i = 0; i < count; i++) {
        red_array a;
        const char *name = NULL;
        if (red_result(e, i, &a, &name) == RED_OK && name && strcmp(name, st->target) == 0)
            which = i;
    }
    if (!st->indexed) {
        if (count != 1) {
            session_error(s, "%s = ...: the value has %d parts; a session name holds one array "
                             "(name each part: a = EXPR1; b = EXPR2)", st->target, count);
            return 1;
        }
        which = 0;
    }
    if (which < 0) {
        session_error(s, "no result is named '%s'", st->target);
        return 1;
    }
    red_array a;
    int rc = red_result_detach(e, which, &a);
    if (rc != RED_OK) {
        session_lib_error(s, rc, red_expr_errmsg(e), st->oplines);
        return 1;
    }
    repl_storage storage = a.memory == RED_MEM_CUDA ? STORE_DEVICE : STORE_LIBRARY;
    if (!session_adopt(s, st->target, &a, a.data, storage)) {
        session_error(s, "out of memory");
        return 1;
    }
    /* Everything else an indexed entry computed is shown, as a program would. */
    return 0;
}

int stmt_deliver(repl_session *s, repl_stmt *st)
{
    if (repl_sigint)
        return 1;   /* reported by the caller; an interrupted entry keeps nothing */
    int status = st->target ? store_result(s, st) : show_results(s, st);
    if (status == 0 && st->target && st->indexed && red_result_count(st->e) > 1)
        status = show_results(s, st);
    if (status == 0)
        status = save_ops(s, st->newops);
    return status;
}

static bool is_blank(const char *text)
{
    scan_state st = {text, 0};
    scan_tok t;
    while ((t = scan_next(&st)).kind == SC_SEP) {}
    return t.kind == SC_END;
}

/* Whether `text` is two or more assignments (operators between them
 * allowed) and nothing else: `p = x; q = y`. */
static bool only_assignments(const char *text, span *sp, int *n)
{
    *n = split_stmts(text, sp, MAX_STMTS);
    int assigned = 0;
    for (int i = 0; i < *n; i++) {
        char *name;
        const char *eq;
        stmt_kind k = classify(sp[i], &name, &eq);
        free(name);
        if (k == K_EXPR)
            return false;
        assigned += k != K_OP;
    }
    return assigned >= 2;
}

static int stmt_exec(repl_session *s, const char *text);

/* `p = x; q = y` keeps both p and q: each statement runs as an entry of its
 * own, in order, so a later one reads the values the earlier ones stored.
 * Each gets a copy of the text with the others blanked, so that line
 * numbers and carets in its errors point where the user typed.  (An entry
 * that ends with an expression stays one program, whose names live only
 * in it: `d = x - y; max(abs(d))` computes d without storing it.) */
static int stmt_exec_each(repl_session *s, const char *text, const span *sp, int n)
{
    size_t len = strlen(text);
    char *copy = malloc(len + 1);
    if (!copy) {
        session_error(s, "out of memory");
        return 1;
    }
    int status = 0;
    for (int i = 0; i < n && status == 0 && !repl_sigint; i++) {
        for (size_t k = 0; k < len; k++) {
            bool inside = text + k >= sp[i].b && text + k < sp[i].e;
            copy[k] = inside || text[k] == '\n' ? text[k] : ' ';
        }
        copy[len] = '\0';
        status = stmt_exec(s, copy);
    }
    free(copy);
    return status;
}

/* One entry that is not a command: prepare, bind, run, store or print. */
static int stmt_exec(repl_session *s, const char *text)
{
    span *sp = malloc(MAX_STMTS * sizeof *sp);
    int n = 0;
    if (sp && only_assignments(text, sp, &n)) {
        int status = stmt_exec_each(s, text, sp, n);
        free(sp);
        return status;
    }
    free(sp);
    repl_stmt st;
    int status = stmt_prepare(s, text, &st);
    if (status == 0 && st.alias) {
        repl_var *v = session_find(s, st.alias);
        char *nm = strdup(st.target);
        if (!v || !nm) {
            free(nm);
            session_error(s, "out of memory");
            status = 1;
        } else {
            session_del(s, st.target);
            v = session_find(s, st.alias);   /* the table moved */
            free(v->name);
            v->name = nm;
            v->hidden = false;
        }
    } else if (status == 0 && st.ops_only) {
        status = save_ops(s, st.newops);
    } else if (status == 0 && (status = stmt_bind(s, &st)) == 0) {
        red_cache_info before = {0};
        if (s->verbose)
            red_cache_stats(s->ctx, &before);
        /* Ctrl-C now makes red_run return RED_ERR_INTERRUPTED (repl.c) */
        int rc = red_run(st.e);
        if (rc != RED_OK) {
            session_lib_error(s, rc, red_expr_errmsg(st.e), st.oplines);
            status = 1;
        } else {
            if (s->verbose) {
                fflush(stdout);
                print_run_note(stderr, s->ctx, st.e, &before);
            }
            status = stmt_deliver(s, &st);
        }
    }
    stmt_free(s, &st);
    return status;
}

int session_exec(repl_session *s, const char *text)
{
    const char *p = text + strspn(text, " \t\r\n");
    if (is_blank(p))
        return 0;
    /* :time and :bench evaluate too, so Ctrl-C is reported for both */
    int status = *p == ':' ? command_run(s, p) : stmt_exec(s, text);
    if (repl_sigint) {
        /* An interrupted entry stores nothing (stmt_deliver checks), and
         * the library's RED_ERR_INTERRUPTED was not printed as an error. */
        repl_sigint = 0;
        fflush(stdout);
        fputs("interrupted\n", stderr);
        status = 1;
    }
    fflush(stdout);
    return status;
}
