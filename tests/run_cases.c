/*
 * run_cases.c -- the data-driven test runner.  It reads a manifest written by
 * tests/gen_cases.py (expressions, inputs, and NumPy's expected values), runs
 * every case through the public API only, and compares dtype, shape and
 * values.  Error cases check the status code, the `line:col` and the caret.
 *
 *   run_cases [--device cpu|gpu] [--strategy NAME|all] [--threads N]
 *             [--filter SUBSTR] [--shard K/N] [--verbose] MANIFEST...
 *   run_cases --compile-only ARCH [--threads N] [--filter SUBSTR] MANIFEST...
 *
 * run_cases_mpi (this file built with RUN_CASES_MPI) also takes --split, under mpirun: each
 * case runs with its arrays split across the ranks, along each axis in turn (see run_split).
 * run_cases --split-nccl N [--device gpu] does the same over N ranks it forks, through NCCL.
 *
 * --compile-only runs nothing: it compiles the GPU kernels of every valid case
 * with NVRTC for ARCH ("sm_90"), each distinct source once, without a GPU.
 *
 * (REDJIT_TEST_FILTER in the environment stands for a missing --filter.)
 * --shard K/N runs only the cases whose index in the manifest is K modulo N,
 * so that N processes share the suite (the GPU run is bound by NVRTC, which
 * runs on one core per process).
 *
 * Ends with "N passed, M failed[, K skipped]"; exit 1 on any failure, 77 when
 * --device gpu is asked for and no GPU is usable (CTest SKIP_RETURN_CODE).
 */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "redjit.h"

#define SKIP_CODE 77
#define MAX_INPUTS 32
#define MAX_RESULTS 32
#define MAX_MSGS 8

/* ---- The manifest, in memory ------------------------------------------- */

enum input_kind { IN_ARRAY, IN_WEAK_F64, IN_WEAK_I64, IN_NULL, IN_RAW };

typedef struct input {
    char name[64];
    enum input_kind kind;
    int dtype;                  /* red_dtype, or an invalid code for IN_RAW */
    int ndim;                   /* may exceed RED_MAX_DIMS for IN_RAW       */
    int64_t shape[16];
    int64_t strides[RED_MAX_DIMS];
    int64_t offset;             /* elements from the buffer start to [0,..] */
    int64_t blob_off, nbytes;
    double f;
    int64_t i;
    unsigned char *buf;         /* loaded per run                           */
} input;

typedef struct result_spec {
    red_dtype dtype;
    int ndim;
    int64_t shape[RED_MAX_DIMS];
    int64_t count;
    double rtol, atol;
    int64_t exp_off, mag_off;
    char name[64];              /* "-" for unnamed                          */
} result_spec;

typedef struct tcase {
    char *name, *src, *expr;
    int nin, nres;
    input in[MAX_INPUTS];
    result_spec res[MAX_RESULTS];
    int is_error;
    int ncodes, codes[8];
    int npos, line[4], col[4];  /* accepted positions; none: not checked */
    int nmsgs;
    char *msgs[MAX_MSGS];
} tcase;

typedef struct manifest {
    char *path;
    unsigned long seed;
    FILE *bin;
    int ncases;
    tcase *cases;
} manifest;

/* ---- Options and tallies ------------------------------------------------ */

static struct {
    int device;                 /* RED_DEVICE_CPU / GPU */
    int strategies[8], nstrat;
    int threads;
    const char *filter;
    int verbose;
    const char *compile_arch;   /* --compile-only: NVRTC every case's kernels */
    int shard, nshards;         /* --shard K/N */
    int split;                  /* --split (run_cases_mpi) */
    int split_nccl;             /* --split-nccl N */
} opt = {RED_DEVICE_CPU, {RED_STRATEGY_AUTO}, 1, 2, NULL, 0, NULL, 0, 1, 0, 0};

static long npassed, nfailed, nskipped;

static const char *strategy_name(int s)
{
    static const char *names[] = {"auto", "tree", "sequential", "persistent", "segmented"};
    return s >= 0 && s < 5 ? names[s] : "?";
}

static const char *status_name(int code)
{
    static const char *names[] = {
        "RED_OK", "RED_ERR_NOMEM", "RED_ERR_ARG", "RED_ERR_SYNTAX", "RED_ERR_NAME",
        "RED_ERR_TYPE", "RED_ERR_SHAPE", "RED_ERR_BIND", "RED_ERR_INDEX", "RED_ERR_EMPTY",
        "RED_ERR_KEYS", "RED_ERR_LIMIT", "RED_ERR_UNSUPPORTED", "RED_ERR_DEVICE",
        "RED_ERR_COMPILE", "RED_ERR_MISUSE", "RED_ERR_INTERNAL", "RED_ERR_INTERRUPTED", "RED_ERR_COMM"};
    return code >= 0 && code <= 18 ? names[code] : "RED_ERR_?";
}

static int status_code(const char *name)
{
    for (int c = 0; c <= 18; c++)
        if (strcmp(status_name(c), name) == 0) return c;
    return -1;
}

static const char *dtype_str(int t)
{
    static const char *names[] = {"?",   "bool", "i32", "i64", "u32", "u64", "f16",  "bf16",
                                  "f32", "f64",  "i8",  "u8",  "i16", "u16", "c64", "c128"};
    return t >= 1 && t <= 15 ? names[t] : "?";
}

static int dtype_code(const char *s)
{
    for (int t = 1; t <= 15; t++)
        if (strcmp(dtype_str(t), s) == 0) return t;
    return -1;
}

static size_t dtype_bytes(int t)
{
    switch (t) {
    case RED_BOOL: case RED_I8: case RED_U8: return 1;
    case RED_F16: case RED_BF16: case RED_I16: case RED_U16: return 2;
    case RED_I32: case RED_U32: case RED_F32: return 4;
    case RED_I64: case RED_U64: case RED_F64: case RED_C64: return 8;
    case RED_C128: return 16;
    default: return 0;
    }
}

static int is_float(int t) { return t == RED_F16 || t == RED_BF16 || t == RED_F32 || t == RED_F64; }
static int is_cplx(int t) { return t == RED_C64 || t == RED_C128; }
static int is_unsigned(int t) { return t == RED_U32 || t == RED_U64 || t == RED_U8 || t == RED_U16; }

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "run_cases: out of memory\n");
        exit(2);
    }
    return p;
}

static char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* ---- Manifest parsing ---------------------------------------------------- */

typedef struct reader {
    const char *p, *end, *path;
    int line;
} reader;

static void die(const reader *r, const char *what)
{
    fprintf(stderr, "run_cases: %s:%d: bad manifest: %s\n", r->path, r->line, what);
    exit(2);
}

static int at_eol(reader *r)
{
    while (r->p < r->end && *r->p == ' ') r->p++;
    return r->p >= r->end || *r->p == '\n';
}

static void next_line(reader *r)
{
    while (r->p < r->end && *r->p != '\n') r->p++;
    if (r->p < r->end) r->p++;
    r->line++;
}

/* The next space-separated word, copied into `buf`. */
static const char *word(reader *r, char *buf, size_t cap)
{
    while (r->p < r->end && *r->p == ' ') r->p++;
    size_t n = 0;
    while (r->p < r->end && *r->p != ' ' && *r->p != '\n') {
        if (n + 1 >= cap) die(r, "word too long");
        buf[n++] = *r->p++;
    }
    if (n == 0) die(r, "missing field");
    buf[n] = 0;
    return buf;
}

static int64_t word_i64(reader *r)
{
    char buf[64], *end;
    word(r, buf, sizeof buf);
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (*end || errno) die(r, "bad integer");
    return (int64_t)v;
}

static double word_f64(reader *r)
{
    char buf[64], *end;
    word(r, buf, sizeof buf);
    double v = strtod(buf, &end);
    if (*end) die(r, "bad number");
    return v;
}

/* "N <N bytes>" up to the end of the line: the text may hold newlines. */
static char *counted(reader *r)
{
    int64_t n = word_i64(r);
    if (r->p >= r->end || *r->p != ' ' || n < 0 || r->end - r->p - 1 < n) die(r, "bad string");
    r->p++;
    char *s = xstrndup(r->p, (size_t)n);
    for (int64_t k = 0; k < n; k++)
        if (s[k] == '\n') r->line++;
    r->p += n;
    if (!at_eol(r)) die(r, "junk after string");
    return s;
}

static void read_shape(reader *r, int nd, int64_t *shape, int cap)
{
    char buf[64];
    if (nd == 0) {
        word(r, buf, sizeof buf);       /* "-" */
        return;
    }
    for (int d = 0; d < nd; d++) {
        int64_t v = word_i64(r);
        if (d < cap) shape[d] = v;
    }
}

static void parse_input(reader *r, tcase *c)
{
    if (c->nin == MAX_INPUTS) die(r, "too many inputs");
    input *in = &c->in[c->nin++];
    memset(in, 0, sizeof *in);
    char kind[16], dt[16];
    word(r, in->name, sizeof in->name);
    word(r, kind, sizeof kind);
    if (strcmp(kind, "f64") == 0) {
        in->kind = IN_WEAK_F64;
        in->f = word_f64(r);
    } else if (strcmp(kind, "i64") == 0) {
        in->kind = IN_WEAK_I64;
        in->i = word_i64(r);
    } else if (strcmp(kind, "array") == 0) {
        in->kind = IN_ARRAY;
        in->dtype = dtype_code(word(r, dt, sizeof dt));
        in->ndim = (int)word_i64(r);
        if (in->ndim < 0 || in->ndim > RED_MAX_DIMS || in->dtype < 0) die(r, "bad array");
        read_shape(r, in->ndim, in->shape, 16);
        read_shape(r, in->ndim, in->strides, RED_MAX_DIMS);
        in->offset = word_i64(r);
        in->blob_off = word_i64(r);
        in->nbytes = word_i64(r);
    } else if (strcmp(kind, "null") == 0 || strcmp(kind, "raw") == 0) {
        in->kind = kind[0] == 'n' ? IN_NULL : IN_RAW;
        word(r, dt, sizeof dt);
        in->ndim = (int)word_i64(r);
        if (in->ndim < 0 || in->ndim > 16) die(r, "bad ndim");
        read_shape(r, in->ndim, in->shape, 16);
        in->dtype = (int)word_i64(r);
    } else {
        die(r, "unknown input kind");
    }
}

static void parse_result(reader *r, tcase *c)
{
    if (c->nres == MAX_RESULTS) die(r, "too many results");
    result_spec *s = &c->res[c->nres++];
    char dt[16];
    s->dtype = (red_dtype)dtype_code(word(r, dt, sizeof dt));
    s->ndim = (int)word_i64(r);
    if ((int)s->dtype < 0 || s->ndim < 0 || s->ndim > RED_MAX_DIMS) die(r, "bad result");
    read_shape(r, s->ndim, s->shape, RED_MAX_DIMS);
    s->count = 1;
    for (int d = 0; d < s->ndim; d++) s->count *= s->shape[d];
    s->rtol = word_f64(r);
    s->atol = word_f64(r);
    s->exp_off = word_i64(r);
    s->mag_off = word_i64(r);
    word(r, s->name, sizeof s->name);
}

static void parse_error(reader *r, tcase *c)
{
    char buf[256];
    word(r, buf, sizeof buf);
    c->is_error = 1;
    for (char *tok = strtok(buf, "|"); tok; tok = strtok(NULL, "|")) {
        int code = status_code(tok);
        if (code < 0 || c->ncodes == 8) die(r, "bad status");
        c->codes[c->ncodes++] = code;
    }
    c->npos = (int)word_i64(r);
    if (c->npos < 0 || c->npos > 4) die(r, "bad position count");
    for (int k = 0; k < c->npos; k++) {
        c->line[k] = (int)word_i64(r);
        c->col[k] = (int)word_i64(r);
    }
}

static char *dir_join(const char *path, const char *file)
{
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path + 1) : 0;
    char *s = xmalloc(dl + strlen(file) + 1);
    memcpy(s, path, dl);
    strcpy(s + dl, file);
    return s;
}

static void load_manifest(manifest *m, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "run_cases: cannot open %s: %s\n", path, strerror(errno));
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = xmalloc((size_t)len + 1);
    if (fread(text, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "run_cases: cannot read %s\n", path);
        exit(2);
    }
    text[len] = 0;
    fclose(f);

    memset(m, 0, sizeof *m);
    m->path = xstrndup(path, strlen(path));
    reader r = {text, text + len, path, 1};
    char key[64], buf[512];
    int cap = 0;
    tcase *c = NULL;
    while (r.p < r.end) {
        if (at_eol(&r)) {
            next_line(&r);
            continue;
        }
        word(&r, key, sizeof key);
        if (strcmp(key, "redjit-cases") == 0) {
            if (word_i64(&r) != 1) die(&r, "unknown version");
        } else if (strcmp(key, "seed") == 0) {
            m->seed = (unsigned long)word_i64(&r);
        } else if (strcmp(key, "bin") == 0) {
            char *bp = dir_join(path, word(&r, buf, sizeof buf));
            m->bin = fopen(bp, "rb");
            if (!m->bin) {
                fprintf(stderr, "run_cases: cannot open %s: %s\n", bp, strerror(errno));
                exit(2);
            }
            free(bp);
        } else if (strcmp(key, "case") == 0) {
            if (m->ncases == cap) {
                cap = cap ? 2 * cap : 256;
                m->cases = realloc(m->cases, (size_t)cap * sizeof *m->cases);
                if (!m->cases) exit(2);
            }
            c = &m->cases[m->ncases++];
            memset(c, 0, sizeof *c);
            word(&r, buf, sizeof buf);
            c->name = xstrndup(buf, strlen(buf));
        } else if (strcmp(key, "count") == 0) {
            if (word_i64(&r) != m->ncases) die(&r, "case count mismatch (truncated manifest?)");
        } else if (!c) {
            die(&r, "field outside a case");
        } else if (strcmp(key, "src") == 0) {
            word(&r, buf, sizeof buf);
            c->src = xstrndup(buf, strlen(buf));
        } else if (strcmp(key, "expr") == 0) {
            c->expr = counted(&r);
        } else if (strcmp(key, "input") == 0) {
            parse_input(&r, c);
        } else if (strcmp(key, "result") == 0) {
            parse_result(&r, c);
        } else if (strcmp(key, "error") == 0) {
            parse_error(&r, c);
        } else if (strcmp(key, "msg") == 0) {
            if (c->nmsgs == MAX_MSGS) die(&r, "too many msg");
            c->msgs[c->nmsgs++] = counted(&r);
        } else if (strcmp(key, "end") == 0) {
            if (!c->expr) die(&r, "case without expr");
            c = NULL;
        } else {
            die(&r, "unknown key");
        }
        if (!at_eol(&r)) die(&r, "junk at end of line");
        next_line(&r);
    }
    if (!m->bin) die(&r, "no bin line");
    free(text);
}

static void free_manifest(manifest *m)
{
    for (int k = 0; k < m->ncases; k++) {
        tcase *c = &m->cases[k];
        free(c->name);
        free(c->src);
        free(c->expr);
        for (int j = 0; j < c->nmsgs; j++) free(c->msgs[j]);
    }
    free(m->cases);
    free(m->path);
    if (m->bin) fclose(m->bin);
}

static void blob_read(manifest *m, int64_t off, void *dst, size_t n)
{
    if (n == 0) return;
    if (fseek(m->bin, (long)off, SEEK_SET) != 0 || fread(dst, 1, n, m->bin) != n) {
        fprintf(stderr, "run_cases: %s: short data file\n", m->path);
        exit(2);
    }
}

/* ---- Reporting ---------------------------------------------------------- */

typedef struct run_ctx {
    manifest *m;
    tcase *c;
    int strategy;
    int failed;                 /* failures reported for this unit */
    int skipped;                /* the strategy does not apply        */
} run_ctx;

/* One line per failure: name, seed, strategy, expression (escaped), reason. */
static void fail(run_ctx *rc, const char *fmt, ...)
{
    char why[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    char ex[400];
    size_t n = 0;
    for (const char *s = rc->c->expr; *s && n + 8 < sizeof ex; s++) {
        if (*s == '\n') {
            ex[n++] = '\\';
            ex[n++] = 'n';
        } else {
            ex[n++] = *s;
        }
    }
    ex[n] = 0;
    if (strlen(rc->c->expr) > 300) strcpy(ex + 280, "...");
    for (char *p = why; *p; p++)
        if (*p == '\n') *p = '|';
    printf("FAIL %s (%s, %s, seed %lu): `%s`: %s\n", rc->c->name, rc->c->src ? rc->c->src : "?",
           strategy_name(rc->strategy), rc->m->seed, ex, why);
    rc->failed++;
}

/* ---- Inputs --------------------------------------------------------------- */

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t k = 0; k < n; k++) h = (h ^ b[k]) * 1099511628211ull;
    return h;
}

static void load_inputs(manifest *m, tcase *c)
{
    for (int k = 0; k < c->nin; k++) {
        input *in = &c->in[k];
        if (in->kind != IN_ARRAY) continue;
        in->buf = xmalloc((size_t)in->nbytes);
        blob_read(m, in->blob_off, in->buf, (size_t)in->nbytes);
    }
}

static void free_inputs(tcase *c)
{
    for (int k = 0; k < c->nin; k++) {
        free(c->in[k].buf);
        c->in[k].buf = NULL;
    }
}

static uint64_t inputs_sum(const tcase *c)
{
    uint64_t h = 0;
    for (int k = 0; k < c->nin; k++)
        if (c->in[k].buf) h ^= fnv(c->in[k].buf, (size_t)c->in[k].nbytes) + (uint64_t)k;
    return h;
}

/* The descriptor of an input as the caller would fill it in.  Raw inputs
 * (bad dtype, negative extent, too many dimensions) bypass red_array_init. */
static void describe(const input *in, red_array *a)
{
    static double dummy[64];
    memset(a, 0, sizeof *a);
    a->dtype = (red_dtype)in->dtype;
    a->ndim = in->ndim;
    a->memory = RED_MEM_HOST;
    for (int d = 0; d < in->ndim && d < RED_MAX_DIMS; d++) a->shape[d] = in->shape[d];
    if (in->kind == IN_ARRAY) {
        for (int d = 0; d < in->ndim; d++) a->strides[d] = in->strides[d];
        a->data = in->buf + in->offset * (int64_t)dtype_bytes(in->dtype);
    } else {
        int64_t st = 1;
        for (int d = (in->ndim < RED_MAX_DIMS ? in->ndim : RED_MAX_DIMS) - 1; d >= 0; d--) {
            a->strides[d] = st;
            st *= in->shape[d] > 0 ? in->shape[d] : 1;
        }
        a->data = in->kind == IN_NULL ? NULL : (void *)dummy;
    }
}

static int has_weak(const tcase *c)
{
    for (int k = 0; k < c->nin; k++)
        if (c->in[k].kind == IN_WEAK_F64 || c->in[k].kind == IN_WEAK_I64) return 1;
    return 0;
}

/* Bind every input; returns the first failing status. */
static int bind_all(red_expr *e, const tcase *c)
{
    for (int k = 0; k < c->nin; k++) {
        const input *in = &c->in[k];
        int st;
        if (in->kind == IN_WEAK_F64) {
            st = red_bind_f64(e, in->name, in->f);
        } else if (in->kind == IN_WEAK_I64) {
            st = red_bind_i64(e, in->name, in->i);
        } else {
            red_array a;
            describe(in, &a);
            st = red_bind_array(e, in->name, &a);
        }
        if (st != RED_OK) return st;
    }
    return RED_OK;
}

/* ---- Results ------------------------------------------------------------- */

static double half_to_double(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, f = h & 1023;
    double v;
    if (e == 0) v = ldexp(f, -24);
    else if (e == 31) v = f ? NAN : INFINITY;
    else v = ldexp(f + 1024, e - 25);
    return s ? -v : v;
}

static double bf16_to_double(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Element k of a contiguous buffer as double / int64 / uint64. */
static double elem_f64(const void *p, int t, int64_t k)
{
    const unsigned char *b = (const unsigned char *)p + k * (int64_t)dtype_bytes(t);
    switch (t) {
    case RED_BOOL: return *b ? 1 : 0;
    case RED_I8: return (int8_t)*b;
    case RED_U8: return *b;
    case RED_I16: { int16_t v; memcpy(&v, b, 2); return v; }
    case RED_U16: { uint16_t v; memcpy(&v, b, 2); return v; }
    case RED_I32: { int32_t v; memcpy(&v, b, 4); return v; }
    case RED_I64: { int64_t v; memcpy(&v, b, 8); return (double)v; }
    case RED_U32: { uint32_t v; memcpy(&v, b, 4); return v; }
    case RED_U64: { uint64_t v; memcpy(&v, b, 8); return (double)v; }
    case RED_F16: { uint16_t v; memcpy(&v, b, 2); return half_to_double(v); }
    case RED_BF16: { uint16_t v; memcpy(&v, b, 2); return bf16_to_double(v); }
    case RED_F32: { float v; memcpy(&v, b, 4); return v; }
    case RED_F64: { double v; memcpy(&v, b, 8); return v; }
    default: return NAN;
    }
}

static uint64_t elem_bits(const void *p, int t, int64_t k)
{
    const unsigned char *b = (const unsigned char *)p + k * (int64_t)dtype_bytes(t);
    switch (t) {
    case RED_BOOL: return *b;
    case RED_I32: { int32_t v; memcpy(&v, b, 4); return (uint64_t)(int64_t)v; }
    case RED_U32: { uint32_t v; memcpy(&v, b, 4); return v; }
    case RED_I64: case RED_U64: { uint64_t v; memcpy(&v, b, 8); return v; }
    default: return 0;
    }
}

/* Copy a (possibly strided) result into a contiguous buffer. */
static void *gather(const red_array *a, int64_t n)
{
    size_t es = dtype_bytes(a->dtype);
    unsigned char *dst = xmalloc((size_t)n * es);
    int64_t idx[RED_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int d = 0; d < a->ndim; d++) off += idx[d] * a->strides[d];
        memcpy(dst + k * (int64_t)es, (const unsigned char *)a->data + off * (int64_t)es, es);
        for (int d = a->ndim - 1; d >= 0; d--) {
            if (++idx[d] < a->shape[d]) break;
            idx[d] = 0;
        }
    }
    return dst;
}

static void fmt_shape(char *buf, size_t cap, int nd, const int64_t *shape)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < nd && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, d ? "," : "", shape[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static void fmt_index(char *buf, size_t cap, const result_spec *s, int64_t k)
{
    int64_t idx[RED_MAX_DIMS];
    for (int d = s->ndim - 1; d >= 0; d--) {
        idx[d] = s->shape[d] ? k % s->shape[d] : 0;
        k = s->shape[d] ? k / s->shape[d] : 0;
    }
    fmt_shape(buf, cap, s->ndim, idx);
}

/* Check one result's descriptor and values; `tag` names the path taken. */
static int check_result(run_ctx *rc, int r, const red_array *got, const char *gname,
                        const void *data, const char *tag)
{
    const result_spec *s = &rc->c->res[r];
    char a[128], b[128];
    if ((int)got->dtype != (int)s->dtype) {
        fail(rc, "%s: result %d has dtype %s, expected %s", tag, r, dtype_str(got->dtype),
             dtype_str(s->dtype));
        return 0;
    }
    int same = got->ndim == s->ndim;
    for (int d = 0; same && d < s->ndim; d++) same = got->shape[d] == s->shape[d];
    if (!same) {
        fmt_shape(a, sizeof a, got->ndim > RED_MAX_DIMS ? RED_MAX_DIMS : got->ndim, got->shape);
        fmt_shape(b, sizeof b, s->ndim, s->shape);
        fail(rc, "%s: result %d has shape %s (ndim %d), expected %s", tag, r, a, got->ndim, b);
        return 0;
    }
    if (gname && strcmp(s->name, "-") != 0 && strcmp(gname, s->name) != 0) {
        fail(rc, "%s: result %d is named '%s', expected '%s'", tag, r, gname, s->name);
        return 0;
    }
    int64_t n = s->count, bad = 0, first = -1;
    double fg = 0, fe = 0, ftol = 0;
    uint64_t ig = 0, ie = 0;
    if (is_float(s->dtype) || is_cplx(s->dtype)) {
        /* a complex result's parts, re and im in turn, each against the number's magnitude */
        int parts = is_cplx(s->dtype) ? 2 : 1;
        int64_t m = parts * n;
        double *exp = xmalloc((size_t)m * 8), *mag = xmalloc((size_t)m * 8);
        blob_read(rc->m, s->exp_off, exp, (size_t)m * 8);
        blob_read(rc->m, s->mag_off, mag, (size_t)m * 8);
        for (int64_t k = 0; k < m; k++) {
            double g = parts == 1 ? elem_f64(data, s->dtype, k)
                     : s->dtype == RED_C64 ? ((const float *)data)[k] : ((const double *)data)[k];
            double e = exp[k], tol = s->rtol * mag[k] + s->atol;
            int ok;
            if (isnan(e)) ok = isnan(g);
            else if (isinf(e)) ok = g == e;
            else ok = !isnan(g) && fabs(g - e) <= tol;
            if (!ok && bad++ == 0) {
                first = k;
                fg = g;
                fe = e;
                ftol = tol;
            }
        }
        free(exp);
        free(mag);
        if (bad) {
            fmt_index(a, sizeof a, s, first / parts);
            fail(rc, "%s: result %d%s: %sgot %.17g, expected %.17g (|diff| %.3g, tol %.3g); "
                 "%" PRId64 " of %" PRId64 " %s differ", tag, r, s->ndim ? a : "",
                 parts == 1 ? "" : first % 2 ? "imaginary part " : "real part ", fg, fe, fabs(fg - fe), ftol, bad, m,
                 parts == 1 ? "elements" : "parts");
        }
    } else {
        uint64_t *exp = xmalloc((size_t)n * 8);
        blob_read(rc->m, s->exp_off, exp, (size_t)n * 8);
        for (int64_t k = 0; k < n; k++) {
            uint64_t g = elem_bits(data, s->dtype, k);
            if (g != exp[k] && bad++ == 0) {
                first = k;
                ig = g;
                ie = exp[k];
            }
        }
        free(exp);
        if (bad) {
            fmt_index(a, sizeof a, s, first);
            if (is_unsigned(s->dtype))
                fail(rc, "%s: result %d%s: got %" PRIu64 ", expected %" PRIu64 "; %" PRId64
                     " of %" PRId64 " elements differ", tag, r, s->ndim ? a : "", ig, ie, bad, n);
            else
                fail(rc, "%s: result %d%s: got %" PRId64 ", expected %" PRId64 "; %" PRId64
                     " of %" PRId64 " elements differ", tag, r, s->ndim ? a : "", (int64_t)ig,
                     (int64_t)ie, bad, n);
        }
    }
    return bad == 0;
}

/* All results of a finished run, gathered contiguous (for the bit-identity
 * comparison between thread counts and paths). */
typedef struct snapshot {
    int n;
    void *data[MAX_RESULTS];
    size_t bytes[MAX_RESULTS];
} snapshot;

static void snapshot_free(snapshot *s)
{
    for (int k = 0; k < s->n; k++) free(s->data[k]);
    s->n = 0;
}

static int check_run(run_ctx *rc, red_expr *e, snapshot *snap, const char *tag)
{
    tcase *c = rc->c;
    int nres = red_result_count(e);
    if (nres != c->nres) {
        fail(rc, "%s: %d results, expected %d", tag, nres, c->nres);
        return 0;
    }
    int ok = 1;
    snap->n = 0;
    for (int r = 0; r < nres; r++) {
        red_array a;
        const char *name = NULL;
        int st = red_result(e, r, &a, &name);
        if (st != RED_OK) {
            fail(rc, "%s: red_result(%d): %s", tag, r, status_name(st));
            ok = 0;
            break;
        }
        int64_t n = 1;
        for (int d = 0; d < a.ndim && d < RED_MAX_DIMS; d++) n *= a.shape[d];
        if (a.ndim < 0 || a.ndim > RED_MAX_DIMS || n < 0 || dtype_bytes(a.dtype) == 0 ||
            (n > 0 && !a.data)) {
            fail(rc, "%s: result %d: unusable descriptor (ndim %d, dtype %d)", tag, r, a.ndim,
                 (int)a.dtype);
            ok = 0;
            break;
        }
        void *data = gather(&a, n);
        snap->data[snap->n] = data;
        snap->bytes[snap->n++] = (size_t)n * dtype_bytes(a.dtype);
        if (!check_result(rc, r, &a, name, data, tag)) {
            ok = 0;
            continue;
        }
        /* the scalar accessors agree with the data */
        if ((a.ndim == 0 || n == 1) && !is_cplx(a.dtype)) {
            double v;
            int64_t iv;
            if (red_result_f64(e, r, &v) != RED_OK ||
                !(v == elem_f64(data, a.dtype, 0) || (isnan(v) && isnan(elem_f64(data, a.dtype, 0))))) {
                fail(rc, "%s: red_result_f64(%d) disagrees with the result data", tag, r);
                ok = 0;
            }
            if (!is_float(a.dtype) &&
                (red_result_i64(e, r, &iv) != RED_OK || (uint64_t)iv != elem_bits(data, a.dtype, 0))) {
                fail(rc, "%s: red_result_i64(%d) disagrees with the result data", tag, r);
                ok = 0;
            }
        }
    }
    return ok;
}

static int same_bits(run_ctx *rc, const snapshot *a, const snapshot *b, const char *what)
{
    if (a->n != b->n) {
        fail(rc, "%s: %d results vs %d", what, a->n, b->n);
        return 0;
    }
    for (int k = 0; k < a->n; k++) {
        if (a->bytes[k] != b->bytes[k] || memcmp(a->data[k], b->data[k], a->bytes[k]) != 0) {
            fail(rc, "%s: result %d differs bitwise", what, k);
            return 0;
        }
    }
    return 1;
}

/* red_eval on the same inputs: results allocated by the library. */
static void run_eval(run_ctx *rc, red_ctx *ctx, const snapshot *ref)
{
    tcase *c = rc->c;
    red_binding b[MAX_INPUTS];
    for (int k = 0; k < c->nin; k++) {
        b[k].name = c->in[k].name;
        describe(&c->in[k], &b[k].array);
    }
    red_array res[MAX_RESULTS];
    memset(res, 0, sizeof res);
    int count = -1;
    /* red_eval takes its options from the context: the same strategy as the
     * red_run it is compared with bit for bit */
    int saved = RED_STRATEGY_AUTO;
    red_get_option(ctx, RED_OPT_STRATEGY, &saved);
    red_set_option(ctx, RED_OPT_STRATEGY, rc->strategy);
    int st = red_eval(ctx, c->expr, b, c->nin, res, c->nres, &count);
    red_set_option(ctx, RED_OPT_STRATEGY, saved);
    if (st != RED_OK) {
        fail(rc, "red_eval: %s: %s", status_name(st), red_errmsg(ctx));
    } else if (count != c->nres) {
        fail(rc, "red_eval: %d results, expected %d", count, c->nres);
    } else {
        snapshot s = {0};
        for (int r = 0; r < c->nres; r++) {
            int64_t n = 1;
            for (int d = 0; d < res[r].ndim && d < RED_MAX_DIMS; d++) n *= res[r].shape[d];
            if (n > 0 && !res[r].data) {
                fail(rc, "red_eval: result %d has no data", r);
                break;
            }
            void *data = gather(&res[r], n);
            s.data[s.n] = data;
            s.bytes[s.n++] = (size_t)n * dtype_bytes(res[r].dtype);
            check_result(rc, r, &res[r], NULL, data, "red_eval");
        }
        if (!rc->failed) same_bits(rc, ref, &s, "red_eval vs red_run");
        snapshot_free(&s);
    }
    for (int r = 0; r < c->nres; r++) red_free(res[r].data);
}

/* ---- A case that must succeed --------------------------------------------- */

static void run_good(run_ctx *rc, red_ctx *ctx, int index)
{
    tcase *c = rc->c;
    red_expr *e = NULL;
    int st = red_prepare(ctx, c->expr, &e);
    if (st != RED_OK) {
        fail(rc, "red_prepare: %s: %s", status_name(st), red_errmsg(ctx));
        return;
    }
    st = red_expr_set_option(e, RED_OPT_STRATEGY, rc->strategy);
    if (st == RED_OK) st = red_expr_set_option(e, RED_OPT_THREADS, opt.threads);
    if (st != RED_OK) {
        fail(rc, "red_expr_set_option: %s", status_name(st));
        red_finalize(e);
        return;
    }
    st = bind_all(e, c);
    if (st != RED_OK) {
        fail(rc, "bind: %s: %s", status_name(st), red_expr_errmsg(e));
        red_finalize(e);
        return;
    }
    st = red_run(e);
    if (st == RED_ERR_UNSUPPORTED && rc->strategy != RED_STRATEGY_AUTO) {
        rc->skipped = 1;        /* this strategy does not apply */
        red_finalize(e);
        return;
    }
    if (st != RED_OK) {
        fail(rc, "red_run: %s: %s", status_name(st), red_expr_errmsg(e));
        red_finalize(e);
        return;
    }
    snapshot first = {0}, second = {0};
    int ok = check_run(rc, e, &first, "red_run");

    /* Determinism: another thread count must give the same bits. */
    if (ok) {
        int other = opt.threads == 1 ? 3 : 1;
        if (opt.device == RED_DEVICE_GPU) other = opt.threads;
        red_expr_set_option(e, RED_OPT_THREADS, other);
        st = red_run(e);
        if (st != RED_OK) {
            fail(rc, "second red_run (threads=%d): %s: %s", other, status_name(st), red_expr_errmsg(e));
        } else {
            char tag[64];
            snprintf(tag, sizeof tag, "threads=%d vs %d", other, opt.threads);
            if (check_run(rc, e, &second, tag)) same_bits(rc, &first, &second, tag);
        }
    }
    red_finalize(e);

    /* A share of the cases also goes through the one-call interface (which
     * takes typed arrays only: weak scalars cannot be passed to it). */
    if (ok && index % 3 == 0 && !has_weak(c)) run_eval(rc, ctx, &first);
    snapshot_free(&first);
    snapshot_free(&second);
}

/* ---- A case that must fail --------------------------------------------- */

static const char *nth_line(const char *s, int line, size_t *len)
{
    for (int l = 1; l < line && s; l++) {
        s = strchr(s, '\n');
        if (s) s++;
    }
    if (!s) return NULL;
    const char *e = strchr(s, '\n');
    *len = e ? (size_t)(e - s) : strlen(s);
    return s;
}

static int contains(const char *p, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    for (size_t k = 0; k + m <= n; k++)
        if (memcmp(p + k, needle, m) == 0) return 1;
    return 0;
}

/* "L:C: text", then the quoted source line and a caret under column C. */
static int check_message(run_ctx *rc, const char *msg, const char *tag)
{
    tcase *c = rc->c;
    for (int k = 0; k < c->nmsgs; k++) {
        if (!strstr(msg, c->msgs[k])) {
            fail(rc, "%s: message lacks \"%s\": %s", tag, c->msgs[k], msg);
            return 0;
        }
    }
    if (!*msg) {
        fail(rc, "%s: empty error message", tag);
        return 0;
    }
    if (c->npos == 0) return 1;
    char pre[32], want[160] = "";
    int line = 0, col = 0;
    for (int k = 0; k < c->npos && !line; k++) {
        snprintf(pre, sizeof pre, "%d:%d: ", c->line[k], c->col[k]);
        if (strncmp(msg, pre, strlen(pre)) == 0) {
            line = c->line[k];
            col = c->col[k];
        }
        size_t n = strlen(want);
        snprintf(want + n, sizeof want - n, "%s\"%d:%d: \"", k ? " or " : "", c->line[k], c->col[k]);
    }
    if (!line) {
        fail(rc, "%s: message does not start with %s: %s", tag, want, msg);
        return 0;
    }
    /* find the caret line and the line quoted above it */
    const char *prev = NULL, *p = msg;
    size_t prevlen = 0;
    while (p && *p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        size_t sp = 0;
        while (sp < len && p[sp] == ' ') sp++;
        if (prev && sp < len && p[sp] == '^') {
            size_t q = sp + 1;
            while (q < len && p[q] == '~') q++;
            if (q == len) {
                size_t slen;
                const char *src = nth_line(c->expr, line, &slen);
                /* The quote may be shortened with "..." for long lines: then
                 * only the presence of the caret is checked. */
                if (src && !contains(prev, prevlen, "...")) {
                    if (prevlen < slen || memcmp(prev + prevlen - slen, src, slen) != 0) {
                        fail(rc, "%s: message does not quote source line %d: %s", tag, line, msg);
                        return 0;
                    }
                    size_t indent = prevlen - slen;
                    if (sp != indent + (size_t)col - 1) {
                        fail(rc, "%s: caret at column %zu, expected %d: %s", tag, sp - indent + 1,
                             col, msg);
                        return 0;
                    }
                }
                return 1;
            }
        }
        prev = p;
        prevlen = len;
        p = e ? e + 1 : NULL;
    }
    fail(rc, "%s: no caret line in message: %s", tag, msg);
    return 0;
}

static int code_expected(const tcase *c, int st)
{
    for (int k = 0; k < c->ncodes; k++)
        if (c->codes[k] == st) return 1;
    return 0;
}

static void expect_codes(char *buf, size_t cap, const tcase *c)
{
    buf[0] = 0;
    for (int k = 0; k < c->ncodes; k++) {
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%s%s", k ? "|" : "", status_name(c->codes[k]));
    }
}

/* After an error the context must still evaluate a good expression. */
static void check_still_usable(run_ctx *rc, red_ctx *ctx)
{
    int64_t okv[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    int64_t shape[1] = {10};
    red_binding b = {"okv", {0}};
    red_array_init(&b.array, okv, RED_I64, 1, shape, NULL);
    double v = 0;
    int st = red_eval_f64(ctx, "sum(okv)", &b, 1, &v);
    if (st != RED_OK || v != 55) {
        fail(rc, "context unusable after the error: sum(okv) gave %s, %g", status_name(st), v);
        return;
    }
    red_expr *e = NULL;
    int64_t iv = 0;
    st = red_prepare(ctx, "okv[i] * 2, max(okv)", &e);
    if (st == RED_OK) st = red_bind_array(e, "okv", &b.array);
    if (st == RED_OK) st = red_run(e);
    if (st == RED_OK) st = red_result_i64(e, 1, &iv);
    if (st != RED_OK || iv != 10) fail(rc, "context unusable after the error: %s", status_name(st));
    red_finalize(e);
}

static void run_bad(run_ctx *rc, red_ctx *ctx)
{
    tcase *c = rc->c;
    char want[256];
    expect_codes(want, sizeof want, c);
    red_expr *e = NULL;
    const char *stage = "red_prepare";
    const char *msg = "";
    int st = red_prepare(ctx, c->expr, &e);
    if (st != RED_OK) {
        msg = red_errmsg(ctx);
        if (e) fail(rc, "red_prepare failed but set *out");
        e = NULL;
    } else {
        red_expr_set_option(e, RED_OPT_STRATEGY, rc->strategy);
        red_expr_set_option(e, RED_OPT_THREADS, opt.threads);
        stage = "bind";
        st = bind_all(e, c);
        if (st == RED_OK) {
            stage = "red_run";
            st = red_run(e);
        }
        if (st != RED_OK) msg = red_expr_errmsg(e);
        if (st != RED_OK && !*msg) msg = red_errmsg(ctx);
    }
    if (st == RED_OK) {
        fail(rc, "expected %s, got RED_OK", want);
    } else if (!code_expected(c, st)) {
        fail(rc, "%s: got %s, expected %s: %s", stage, status_name(st), want, msg);
    } else {
        char *saved = xstrndup(msg, strlen(msg));
        if (opt.verbose) printf("%s: %s: %s\n", c->name, status_name(st), saved);
        check_message(rc, saved, stage);
        if (e && strcmp(stage, "red_run") == 0) {
            /* no partial result, and the same error again on a second run */
            if (red_result_count(e) > 0)
                fail(rc, "red_run failed but reports %d results", red_result_count(e));
            int st2 = red_run(e);
            if (st2 != st) fail(rc, "second red_run gave %s after %s", status_name(st2), status_name(st));
        }
        free(saved);
    }
    red_finalize(e);

    /* The one-call interface must report the same error. */
    if (!has_weak(c)) {
        red_binding b[MAX_INPUTS];
        for (int k = 0; k < c->nin; k++) {
            b[k].name = c->in[k].name;
            describe(&c->in[k], &b[k].array);
        }
        red_array res[4];
        memset(res, 0, sizeof res);
        int count = 0;
        int st2 = red_eval(ctx, c->expr, b, c->nin, res, 4, &count);
        if (st2 == RED_OK) {
            fail(rc, "red_eval: expected %s, got RED_OK", want);
            for (int r = 0; r < 4 && r < count; r++) red_free(res[r].data);
        } else if (!code_expected(c, st2)) {
            fail(rc, "red_eval: got %s, expected %s: %s", status_name(st2), want, red_errmsg(ctx));
        } else {
            char *saved = xstrndup(red_errmsg(ctx), strlen(red_errmsg(ctx)));
            check_message(rc, saved, "red_eval");
            free(saved);
        }
    }
    check_still_usable(rc, ctx);
}

/* ---- Driver -------------------------------------------------------------- */

static red_ctx *open_ctx(void)
{
    red_ctx *ctx = NULL;
    if (red_open(&ctx) != RED_OK || !ctx) {
        fprintf(stderr, "run_cases: red_open failed\n");
        exit(2);
    }
    int st = red_set_option(ctx, RED_OPT_DEVICE, opt.device);
    if (st != RED_OK && opt.device == RED_DEVICE_GPU) {
        /* a build without the GPU backend may refuse the option itself */
        printf("run_cases: no GPU device option (%s): skipped\n", status_name(st));
        red_close(ctx);
        exit(SKIP_CODE);
    }
    if (st != RED_OK || red_set_option(ctx, RED_OPT_THREADS, opt.threads) != RED_OK) {
        fprintf(stderr, "run_cases: red_set_option failed: %s\n", red_errmsg(ctx));
        exit(2);
    }
    return ctx;
}

/* With --device gpu: is there a GPU?  Evaluate something tiny. */
static int gpu_usable(red_ctx *ctx)
{
    float x[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    red_binding b = {"x", {0}};
    red_array_init(&b.array, x, RED_F32, 1, shape, NULL);
    double v;
    int st = red_eval_f64(ctx, "sum(x)", &b, 1, &v);
    if (st == RED_ERR_DEVICE || st == RED_ERR_UNSUPPORTED) {
        printf("run_cases: no usable GPU (%s: %s): skipped\n", status_name(st), red_errmsg(ctx));
        return 0;
    }
    return 1;
}

/* ---- NVRTC compile of every distinct generated kernel (no GPU needed) ----
 *
 * Cases that differ only in their data or names generate the same kernels, and
 * an NVRTC compile of a case's kernels (every group of every pass: what any
 * strategy may load) takes a quarter of a second to several seconds.  So the
 * cases are first grouped by their generated CUDA, the text red_explain shows:
 * it is the source red_precompile gives NVRTC with the fixed helpers of
 * src/codegen/device elided, so equal texts mean equal sources, and the compile
 * options are the same for the whole run.  Then one case of each group is
 * compiled, on --threads threads (0: one per core), with a progress line every
 * PROGRESS_S seconds; a failure names the case, its expression, NVRTC's log and
 * the other cases of its group. */

#define PROGRESS_S 10.0

typedef struct kernel_group {
    char *text;             /* the generated CUDA of its cases          */
    uint64_t hash;
    int first;              /* the case compiled for the group          */
    int ncases;
} kernel_group;

typedef struct compile_job {
    manifest *m;
    const char *arch;
    kernel_group *groups;
    int ngroups;
    const int *group_of;    /* per case: its group, -1 for none         */
    int next;               /* next group, taken under the lock         */
    pthread_mutex_t lock;
    long ok, bad, none;
    int ndone;              /* groups compiled, whatever the outcome    */
    double t0, last_progress;
    struct { double ms; const char *name; } slow[5];   /* the slowest compiles, slowest first */
} compile_job;

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Bind descriptors with a stand-in data pointer: precompiling reads only
 * dtypes and ranks, and 0-d inputs read zeros. */
static int bind_signature(red_expr *e, const tcase *c)
{
    static _Alignas(16) unsigned char zeros[64];
    for (int k = 0; k < c->nin; k++) {
        const input *in = &c->in[k];
        int st;
        if (in->kind == IN_WEAK_F64) st = red_bind_f64(e, in->name, in->f);
        else if (in->kind == IN_WEAK_I64) st = red_bind_i64(e, in->name, in->i);
        else {
            red_array a;
            memset(&a, 0, sizeof a);
            a.dtype = (red_dtype)in->dtype;
            a.ndim = in->ndim;
            a.memory = RED_MEM_HOST;
            int64_t stv = 1;
            for (int d = (in->ndim < RED_MAX_DIMS ? in->ndim : RED_MAX_DIMS) - 1; d >= 0; d--) {
                a.shape[d] = in->shape[d];
                a.strides[d] = stv;
                stv *= in->shape[d] > 0 ? in->shape[d] : 1;
            }
            a.data = in->kind == IN_NULL ? NULL : zeros;
            st = red_bind_array(e, in->name, &a);
        }
        if (st != RED_OK) return st;
    }
    return RED_OK;
}

/* A case's expression prepared and bound as the compile sees it; NULL, with
 * the FAIL line printed, where that fails (a valid case must prepare). */
static red_expr *compile_prepare(red_ctx *ctx, const tcase *c)
{
    red_expr *e = NULL;
    int st = red_prepare(ctx, c->expr, &e);
    if (st == RED_OK) st = bind_signature(e, c);
    if (st == RED_OK) return e;
    printf("FAIL %s (%s): `%s`: %s: %s\n", c->name, c->src, c->expr, status_name(st),
           e ? red_expr_errmsg(e) : red_errmsg(ctx));
    red_finalize(e);
    return NULL;
}

/* The other cases that share group g's kernels, named on its failure. */
static void print_sharers(const compile_job *j, int g)
{
    const kernel_group *kg = &j->groups[g];
    if (kg->ncases < 2) return;
    printf("     (the same kernels as %d other case%s:", kg->ncases - 1, kg->ncases > 2 ? "s" : "");
    int shown = 0;
    for (int k = 0; k < j->m->ncases && shown < 5; k++)
        if (j->group_of[k] == g && k != kg->first) {
            printf(" %s", j->m->cases[k].name);
            shown++;
        }
    printf("%s)\n", kg->ncases - 1 > shown ? " ..." : "");
}

static void *compile_worker(void *arg)
{
    compile_job *j = arg;
    red_ctx *ctx = NULL;
    if (red_open(&ctx) != RED_OK) return NULL;
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);   /* no driver: NVRTC only */
    for (;;) {
        pthread_mutex_lock(&j->lock);
        int g = j->next++;
        pthread_mutex_unlock(&j->lock);
        if (g >= j->ngroups) break;
        const tcase *c = &j->m->cases[j->groups[g].first];
        red_expr *e = compile_prepare(ctx, c);
        int st = e ? RED_OK : RED_ERR_INTERNAL;
        double t0 = wall_ms();
        if (e) st = red_precompile(e, j->arch);
        double now = wall_ms(), ms = now - t0;
        pthread_mutex_lock(&j->lock);
        if (st == RED_OK) {
            j->ok++;
            int n = (int)(sizeof j->slow / sizeof j->slow[0]), at = n;
            while (at > 0 && ms > j->slow[at - 1].ms) at--;
            if (at < n) {
                memmove(&j->slow[at + 1], &j->slow[at], (size_t)(n - 1 - at) * sizeof j->slow[0]);
                j->slow[at].ms = ms;
                j->slow[at].name = c->name;
            }
        } else if (st == RED_ERR_DEVICE) {
            j->none++;   /* no NVRTC on this machine */
        } else {
            j->bad++;
            if (e)   /* the message holds NVRTC's log */
                printf("FAIL %s (%s): `%s`: %s: %s\n", c->name, c->src, c->expr, status_name(st),
                       red_expr_errmsg(e));
            print_sharers(j, g);
        }
        j->ndone++;
        if (now - j->last_progress >= PROGRESS_S * 1e3 && j->ndone < j->ngroups) {
            j->last_progress = now;
            printf("run_cases: %d/%d kernel sources compiled, %.0f s\n", j->ndone, j->ngroups,
                   (now - j->t0) / 1e3);
        }
        pthread_mutex_unlock(&j->lock);
        red_finalize(e);
    }
    red_close(ctx);
    return NULL;
}

/* Group the valid cases by their generated CUDA: group_of[k] for each. */
static void group_cases(compile_job *j, int *group_of, long *bad)
{
    red_ctx *ctx = NULL;
    if (red_open(&ctx) != RED_OK) {
        fprintf(stderr, "run_cases: red_open failed\n");
        exit(2);
    }
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    static const char marker[] = "\ngenerated CUDA";
    int cap = 0;
    for (int k = 0; k < j->m->ncases; k++) {
        const tcase *c = &j->m->cases[k];
        group_of[k] = -1;
        if (c->is_error || (opt.filter && !strstr(c->name, opt.filter))) continue;
        red_expr *e = compile_prepare(ctx, c);
        if (!e) {
            ++*bad;
            continue;
        }
        const char *text = NULL, *src;
        int st = red_explain(e, &text);
        if (st != RED_OK || !(src = strstr(text, marker))) {   /* code generation failed */
            printf("FAIL %s (%s): `%s`: red_explain: %s: %s\n", c->name, c->src, c->expr,
                   status_name(st), red_expr_errmsg(e));
            ++*bad;
            red_finalize(e);
            continue;
        }
        uint64_t h = fnv(src, strlen(src));
        int g = 0;
        while (g < j->ngroups && (j->groups[g].hash != h || strcmp(j->groups[g].text, src) != 0)) g++;
        if (g == j->ngroups) {
            if (j->ngroups == cap) {
                cap = cap ? 2 * cap : 256;
                j->groups = realloc(j->groups, (size_t)cap * sizeof *j->groups);
                if (!j->groups) exit(2);
            }
            j->groups[g] = (kernel_group){xstrndup(src, strlen(src)), h, k, 0};
            j->ngroups++;
        }
        j->groups[g].ncases++;
        group_of[k] = g;
        red_finalize(e);
    }
    red_close(ctx);
}

static int compile_all(const char *file, const char *arch)
{
    manifest m;
    load_manifest(&m, file);
    compile_job j = {.m = &m, .arch = arch};
    pthread_mutex_init(&j.lock, NULL);
    int *group_of = xmalloc((size_t)m.ncases * sizeof *group_of);
    j.group_of = group_of;
    double t0 = wall_ms();
    group_cases(&j, group_of, &j.bad);
    long ncompiled = 0;
    for (int g = 0; g < j.ngroups; g++) ncompiled += j.groups[g].ncases;

    int nt = opt.threads > 0 ? opt.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nt < 1) nt = 1;
    if (nt > 64) nt = 64;
    if (nt > j.ngroups) nt = j.ngroups > 0 ? j.ngroups : 1;
    printf("run_cases: %s: %ld cases with kernels, %d distinct kernel sources (%.1f s to generate), "
           "compiled by NVRTC for %s on %d thread%s\n", file, ncompiled, j.ngroups,
           (wall_ms() - t0) / 1e3, arch, nt, nt == 1 ? "" : "s");
    j.t0 = j.last_progress = wall_ms();
    pthread_t th[64];
    for (int t = 0; t < nt; t++) pthread_create(&th[t], NULL, compile_worker, &j);
    for (int t = 0; t < nt; t++) pthread_join(th[t], NULL);
    printf("run_cases: %d/%d kernel sources compiled in %.0f s\n", j.ndone,
           j.ngroups, (wall_ms() - j.t0) / 1e3);
    /* every group of each pass in one source, so more than a first run compiles; an outlier
     * here is a kernel that keeps a user waiting (a user operator's float % once took 9.5 s) */
    for (size_t k = 0; k < sizeof j.slow / sizeof j.slow[0] && j.slow[k].name; k++)
        printf("%s %.0f ms %s\n", k ? "                " : "slowest compiles", j.slow[k].ms, j.slow[k].name);
    for (int g = 0; g < j.ngroups; g++) free(j.groups[g].text);
    free(j.groups);
    free(group_of);
    free_manifest(&m);
    if (j.none && !j.ok && !j.bad) {
        printf("run_cases: NVRTC is not available here: skipped\n");
        return SKIP_CODE;
    }
    printf("%ld passed, %ld failed\n", j.ok, j.bad + j.none);
    return j.bad + j.none ? 1 : 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: run_cases [--device cpu|gpu] [--strategy NAME|all] [--threads N]\n"
                    "                 [--filter SUBSTR] [--shard K/N] [--verbose]\n"
                    "                 [--compile-only ARCH] MANIFEST...\n"
                    "       run_cases_mpi --split [--threads N] [--filter SUBSTR] MANIFEST... (under mpirun)\n"
                    "       run_cases --split-nccl N [--device gpu] [--threads N] [--filter SUBSTR] MANIFEST...\n");
    exit(2);
}


/* ---- Split across ranks ---------------------------------------------------------------------
 * run_cases_mpi --split, under mpirun: the ranks are MPI's, the engine MPI, over host arrays.
 * run_cases --split-nccl N: N ranks forked here, the engine NCCL (REDJIT_NCCL_LIB may name a
 * stand-in), over device arrays with --device gpu (one GPU per rank: CUDA_VISIBLE_DEVICES),
 * else over host arrays on the CPU.  The harness's own verdicts go through MPI or through
 * memory shared by the forked ranks. */

#ifdef RUN_CASES_MPI
#include <mpi.h>
#endif
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

static int split_rank, split_size;

/* The forked ranks' meeting place. */
typedef struct shared_area {
    pthread_barrier_t bar;
    long long slot[64];
    int status;
    unsigned char id[RED_NCCL_ID_BYTES];
} shared_area;
static shared_area *area;   /* NULL under MPI */

enum { H_MAX, H_MIN, H_SUM, H_EXSCAN };

/* v combined over the ranks (H_EXSCAN: the sum of the ranks' before this one). */
static long long h_reduce(long long v, int how)
{
#ifdef RUN_CASES_MPI
    if (!area) {
        long long r = 0;
        MPI_Op op = how == H_MAX ? MPI_MAX : how == H_MIN ? MPI_MIN : MPI_SUM;
        if (how == H_EXSCAN) MPI_Exscan(&v, &r, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        else MPI_Allreduce(&v, &r, 1, MPI_LONG_LONG, op, MPI_COMM_WORLD);
        return how == H_EXSCAN && split_rank == 0 ? 0 : r;
    }
#endif
    area->slot[split_rank] = v;
    pthread_barrier_wait(&area->bar);
    long long r = how == H_EXSCAN ? 0 : area->slot[0];
    if (how == H_EXSCAN)
        for (int k = 0; k < split_rank; k++) r += area->slot[k];
    for (int k = 1; how != H_EXSCAN && k < split_size; k++) {
        long long x = area->slot[k];
        r = how == H_MAX ? (x > r ? x : r) : how == H_MIN ? (x < r ? x : r) : r + x;
    }
    pthread_barrier_wait(&area->bar);
    return r;
}

/* Every rank's verdict: the worst. */
static int all_max(int v)
{
    return (int)h_reduce(v, H_MAX);
}

/* Device copies of the inputs (--split-nccl with --device gpu): the blocks and the whole
 * arrays are then bound in device memory. */
static unsigned char *dev_buf[64];

static int inputs_to_device(red_ctx *ctx, const tcase *c)
{
    for (int k = 0; k < c->nin && k < 64; k++) {
        const input *in = &c->in[k];
        dev_buf[k] = NULL;
        /* (0-d arrays stay on the host: red_bind_array takes no 0-d device array) */
        if (in->kind != IN_ARRAY || in->nbytes <= 0 || in->ndim == 0) continue;
        void *d = NULL;
        if (red_device_alloc(ctx, (size_t)in->nbytes, &d) != RED_OK ||
            red_memcpy(ctx, d, RED_MEM_CUDA, in->buf, RED_MEM_HOST, (size_t)in->nbytes) != RED_OK) {
            printf("run_cases: rank %d: inputs to the device: %s\n", split_rank, red_errmsg(ctx));
            red_device_free(ctx, d);
            return 1;
        }
        dev_buf[k] = d;
    }
    return 0;
}

static void free_device_inputs(red_ctx *ctx, const tcase *c)
{
    for (int k = 0; k < c->nin && k < 64; k++) {
        red_device_free(ctx, dev_buf[k]);
        dev_buf[k] = NULL;
    }
}

/* Input k as bound: on the device where it has a copy there. */
static void describe_here(const tcase *c, int k, red_array *a)
{
    const input *in = &c->in[k];
    describe(in, a);
    if (k < 64 && dev_buf[k]) {
        a->memory = RED_MEM_CUDA;
        a->data = dev_buf[k] + in->offset * (int64_t)dtype_bytes(in->dtype);
    }
}

/* Bind every input, the arrays of `split` (a mask of inputs) as this rank's block along
 * `axis`: rows [rank * n / size, (rank + 1) * n / size). */
static int bind_split_all(red_expr *e, const tcase *c, unsigned split, int axis)
{
    for (int k = 0; k < c->nin; k++) {
        const input *in = &c->in[k];
        red_array a;
        if (in->kind != IN_ARRAY && !(split >> k & 1)) continue;   /* bound by bind_all below */
        describe_here(c, k, &a);
        int st;
        if (split >> k & 1) {
            int64_t n = a.shape[axis], lo = split_rank * n / split_size, hi = (split_rank + 1) * n / split_size;
            a.data = (unsigned char *)a.data + lo * a.strides[axis] * (int64_t)dtype_bytes(in->dtype);
            a.shape[axis] = hi - lo;
            st = red_bind_split(e, in->name, &a, axis);
        } else {
            st = red_bind_array(e, in->name, &a);
        }
        if (st != RED_OK) return st;
    }
    tcase weak = *c;   /* the inputs that are not arrays */
    weak.nin = 0;
    for (int k = 0; k < c->nin; k++)
        if (c->in[k].kind != IN_ARRAY && !(split >> k & 1)) weak.in[weak.nin++] = c->in[k];
    return bind_all(e, &weak);
}

/* The blocks of a split result: each rank's along the axis red_result_split names, which
 * together make the whole. */
static void check_blocks(run_ctx *rc, red_expr *e, const char *tag)
{
    for (int r = 0; r < red_result_count(e); r++) {
        red_array a;
        int axis = -2;
        int64_t off = -1, ext = -1;
        if (red_result(e, r, &a, NULL) != RED_OK || red_result_split(e, r, &axis, &off, &ext) != RED_OK) {
            fail(rc, "%s: result %d unreadable", tag, r);
            continue;
        }
        long long mine = axis >= 0 ? a.shape[axis] : 0;
        long long sum = h_reduce(mine, H_SUM), start = h_reduce(mine, H_EXSCAN);
        if (axis >= 0 && (sum != ext || start != off))
            fail(rc, "%s: result %d: block at %lld of %lld along axis %d, but the ranks' blocks start at %lld "
                 "and make %lld", tag, r, (long long)off, (long long)ext, axis, start, sum);
    }
}

/* One way of splitting case c: the inputs of `split` along `axis`.  Every rank must come
 * to the same status; a run that succeeds must give the whole results (gathered) that
 * one process gives, and blocks that fit together (not gathered). */
static void run_split_one(run_ctx *rc, red_ctx *ctx, unsigned split, int axis, long *refused)
{
    tcase *c = rc->c;
    char tag[96];
    snprintf(tag, sizeof tag, "split 0x%x along axis %d over %d ranks", split, axis, split_size);
    for (int gather = 1; gather >= 0; gather--) {
        red_expr *e = NULL;
        int st = red_prepare(ctx, c->expr, &e);
        if (st == RED_OK) st = red_expr_set_option(e, RED_OPT_GATHER, gather);
        if (st == RED_OK) st = red_expr_set_option(e, RED_OPT_THREADS, opt.threads);
        if (st == RED_OK) st = bind_split_all(e, c, split, axis);
        if (opt.compile_arch) {
            /* --compile-only: NVRTC compiles the rank's plan; what the checker refuses is skipped */
            if (st == RED_OK) st = red_precompile(e, opt.compile_arch);
            if (st == RED_ERR_DEVICE && strstr(red_expr_errmsg(e), "NVRTC")) {
                printf("run_cases: no NVRTC (%s): skipped\n", red_expr_errmsg(e));
                exit(SKIP_CODE);
            }
            if (st == RED_ERR_COMPILE || st == RED_ERR_INTERNAL || st == RED_ERR_DEVICE)
                fail(rc, "%s: red_precompile: %s: %s", tag, status_name(st), red_expr_errmsg(e));
            red_finalize(e);
            return;
        }
        /* a binding refused here (an empty block is never refused) runs nowhere */
        if (all_max(st != RED_OK)) {
            if (c->is_error && st != RED_OK && code_expected(c, st)) {
                red_finalize(e);
                return;
            }
            fail(rc, "%s: binding on some rank: %s", tag, status_name(st));
            red_finalize(e);
            return;
        }
        st = red_run(e);
        int lo = (int)h_reduce(st, H_MIN), hi = (int)h_reduce(st, H_MAX);
        if (lo != hi) {
            fail(rc, "%s: the ranks disagree: status %s here, %s to %s over the ranks (%s)", tag, status_name(st),
                 status_name(lo), status_name(hi), red_expr_errmsg(e));
        } else if (st == RED_ERR_UNSUPPORTED) {
            if (gather) ++*refused;
            if (opt.verbose && split_rank == 0) printf("refused %s: %s: %s\n", c->name, tag, red_expr_errmsg(e));
        } else if (c->is_error) {
            if (st == RED_OK || !code_expected(c, st))
                fail(rc, "%s: %s, expected an error of the case's (%s)", tag, status_name(st), red_expr_errmsg(e));
        } else if (st != RED_OK) {
            fail(rc, "%s: red_run: %s: %s", tag, status_name(st), red_expr_errmsg(e));
        } else if (gather) {
            snapshot snap = {0};
            check_run(rc, e, &snap, tag);
            snapshot_free(&snap);
        } else {
            check_blocks(rc, e, tag);
        }
        red_finalize(e);
        if (st != RED_OK) return;
    }
}

/* Case c split every way: each array input along each of its axes, alone, and with the
 * other inputs of the same shape. */
static void run_split(run_ctx *rc, red_ctx *ctx, long *refused)
{
    tcase *c = rc->c;
    for (int k = 0; k < c->nin && k < 32; k++) {
        const input *in = &c->in[k];
        if (in->kind != IN_ARRAY || in->ndim < 1 || in->ndim > RED_MAX_DIMS) continue;
        unsigned same = 0;
        for (int j = 0; j < c->nin && j < 32; j++) {
            const input *o = &c->in[j];
            int eq = o->kind == IN_ARRAY && o->ndim == in->ndim;
            for (int d = 0; eq && d < in->ndim; d++) eq = o->shape[d] == in->shape[d];
            if (eq) same |= 1u << j;
        }
        for (int axis = 0; axis < in->ndim; axis++) {
            run_split_one(rc, ctx, 1u << k, axis, refused);
            if (same != 1u << k && (same & ((1u << k) - 1)) == 0) run_split_one(rc, ctx, same, axis, refused);
        }
    }
}

/* The context's communicator: MPI_COMM_WORLD, or NCCL from a unique id rank 0 makes. */
static int attach_engine(red_ctx *ctx)
{
#ifdef RUN_CASES_MPI
    if (!area) {
        MPI_Comm world = MPI_COMM_WORLD;
        if (red_attach_mpi(ctx, &world) == RED_OK) return 0;
        printf("run_cases: red_attach_mpi: %s\n", red_errmsg(ctx));
        return 1;
    }
#endif
    if (split_rank == 0) area->status = red_nccl_unique_id(ctx, area->id);
    pthread_barrier_wait(&area->bar);
    int st = area->status;
    if (st == RED_OK) st = red_attach_nccl_id(ctx, area->id, split_size, split_rank);
    if (st != RED_OK) printf("run_cases: rank %d: NCCL: %s: %s\n", split_rank, status_name(st), red_errmsg(ctx));
    return all_max(st != RED_OK);
}

static int split_main(int nfiles, const char **files)
{
    red_ctx *ctx = open_ctx();
    if (attach_engine(ctx)) {
        red_close(ctx);
        return 1;
    }
    int device = area && opt.device == RED_DEVICE_GPU;
    long refused = 0, ran = 0;
    for (int f = 0; f < nfiles; f++) {
        manifest m;
        load_manifest(&m, files[f]);
        if (split_rank == 0)
            printf("run_cases: %s: %d cases split over %d ranks (%s, %s arrays), seed %lu\n", files[f], m.ncases,
                   split_size, area ? "NCCL" : "MPI", device ? "device" : "host", m.seed);
        for (int k = 0; k < m.ncases; k++) {
            tcase *c = &m.cases[k];
            if (opt.filter && !strstr(c->name, opt.filter)) continue;
            if (k % opt.nshards != opt.shard) continue;
            if (opt.verbose && split_rank == 0) printf("case %s\n", c->name);
            load_inputs(&m, c);
            run_ctx rc = {&m, c, RED_STRATEGY_AUTO, 0, 0};
            if (all_max(device && inputs_to_device(ctx, c))) rc.failed = 1;
            else run_split(&rc, ctx, &refused);
            ran++;
            if (all_max(rc.failed > 0)) nfailed++;
            else npassed++;
            free_device_inputs(ctx, c);
            free_inputs(c);
        }
        free_manifest(&m);
    }
    red_close(ctx);
    if (split_rank == 0)
        printf("%ld passed, %ld failed (%ld cases; %ld ways of splitting refused as unsupported)\n", npassed,
               nfailed, ran, refused);
    return nfailed ? 1 : 0;
}

/* --split-nccl N: N ranks forked here, each with its GPU (the parent's CUDA_VISIBLE_DEVICES
 * list, else the ordinals, one each) under --device gpu.  A rank that dies takes the others
 * down with it, so that none waits for it for ever. */
static int split_fork(int n, int nfiles, const char **files)
{
    if (n < 1 || n > 64) usage();
    /* memory the forked ranks share (/dev/zero mapped shared: POSIX's anonymous mapping) */
    int zero = open("/dev/zero", O_RDWR);
    area = zero < 0 ? MAP_FAILED : mmap(NULL, sizeof *area, PROT_READ | PROT_WRITE, MAP_SHARED, zero, 0);
    if (zero >= 0) close(zero);
    if (area == MAP_FAILED) {
        perror("run_cases: mmap");
        return 2;
    }
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&area->bar, &ba, (unsigned)n);
    split_size = n;
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    char list[256];
    snprintf(list, sizeof list, "%s", visible ? visible : "");
    pid_t pid[64];
    for (int r = 0; r < n; r++) {
        fflush(stdout);
        pid[r] = fork();
        if (pid[r] < 0) {
            perror("run_cases: fork");
            for (int k = 0; k < r; k++) kill(pid[k], SIGKILL);
            return 2;
        }
        if (pid[r] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);   /* a parent killed (a timeout) takes its ranks */
            split_rank = r;
            if (opt.device == RED_DEVICE_GPU) {
                char dev[64] = "";
                const char *at = list;
                for (int k = 0; k < r && at; k++) at = (at = strchr(at, ',')) ? at + 1 : NULL;
                if (visible && at) snprintf(dev, sizeof dev, "%.*s", (int)strcspn(at, ","), at);
                else snprintf(dev, sizeof dev, "%d", r);
                setenv("CUDA_VISIBLE_DEVICES", dev, 1);
            }
            _exit(split_main(nfiles, files));
        }
    }
    int worst = 0;
    for (int left = n; left > 0; left--) {
        int st = 0;
        pid_t w = wait(&st);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 3;
        if (WIFSIGNALED(st)) printf("run_cases: a rank died of signal %d\n", WTERMSIG(st));
        if (code > worst) worst = code;
        if (code > 1 || WIFSIGNALED(st))
            for (int r = 0; r < n; r++)
                if (pid[r] != w) kill(pid[r], SIGKILL);
    }
    return worst;
}

int main(int argc, char **argv)
{
    const char *files[16];
    int nfiles = 0;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k];
        const char *v = k + 1 < argc ? argv[k + 1] : NULL;
        if (strcmp(a, "--device") == 0 && v) {
            if (strcmp(v, "cpu") == 0) opt.device = RED_DEVICE_CPU;
            else if (strcmp(v, "gpu") == 0) opt.device = RED_DEVICE_GPU;
            else usage();
            k++;
        } else if (strcmp(a, "--strategy") == 0 && v) {
            opt.nstrat = 0;
            for (int s = 0; s < 5; s++)
                if (strcmp(v, "all") == 0 || strcmp(v, strategy_name(s)) == 0)
                    opt.strategies[opt.nstrat++] = s;
            if (!opt.nstrat) usage();
            k++;
        } else if (strcmp(a, "--threads") == 0 && v) {
            opt.threads = atoi(v);
            k++;
        } else if (strcmp(a, "--filter") == 0 && v) {
            opt.filter = v;
            k++;
        } else if (strcmp(a, "--shard") == 0 && v) {
            if (sscanf(v, "%d/%d", &opt.shard, &opt.nshards) != 2 || opt.nshards < 1 ||
                opt.shard < 0 || opt.shard >= opt.nshards)
                usage();
            k++;
        } else if (strcmp(a, "--compile-only") == 0 && v) {
            opt.compile_arch = v;
            k++;
        } else if (strcmp(a, "--verbose") == 0) {
            opt.verbose = 1;
#ifdef RUN_CASES_MPI
        } else if (strcmp(a, "--split") == 0) {
            opt.split = 1;
#endif
        } else if (strcmp(a, "--split-nccl") == 0 && v) {
            opt.split_nccl = atoi(v);
            if (opt.split_nccl < 1) usage();
            k++;
        } else if (a[0] == '-' || nfiles == 16) {
            usage();
        } else {
            files[nfiles++] = a;
        }
    }
    if (!nfiles) usage();
    /* scripts that cannot change the command line (compute-sanitizer runs)
     * pass the filter through the environment */
    if (!opt.filter && getenv("REDJIT_TEST_FILTER") && *getenv("REDJIT_TEST_FILTER"))
        opt.filter = getenv("REDJIT_TEST_FILTER");
    setvbuf(stdout, NULL, _IOLBF, 0);
#ifdef RUN_CASES_MPI
    if (opt.split) {
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &split_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &split_size);
        int rc = split_main(nfiles, files);
        MPI_Finalize();
        return rc;
    }
#endif
    if (opt.split_nccl) return split_fork(opt.split_nccl, nfiles, files);
    if (opt.compile_arch) {
        int rc = 0;
        for (int f = 0; f < nfiles; f++) {
            int r = compile_all(files[f], opt.compile_arch);
            if (r > rc) rc = r;
        }
        return rc;
    }

    red_ctx *ctx = open_ctx();
    if (opt.device == RED_DEVICE_GPU && !gpu_usable(ctx)) {
        red_close(ctx);
        return SKIP_CODE;
    }
    for (int f = 0; f < nfiles; f++) {
        manifest m;
        load_manifest(&m, files[f]);
        printf("run_cases: %s: %d cases, seed %lu (REDJIT_TEST_SEED=%lu reproduces), device %s, "
               "threads %d\n", files[f], m.ncases, m.seed, m.seed,
               opt.device == RED_DEVICE_GPU ? "gpu" : "cpu", opt.threads);
        for (int k = 0; k < m.ncases; k++) {
            tcase *c = &m.cases[k];
            if (opt.filter && !strstr(c->name, opt.filter)) continue;
            if (k % opt.nshards != opt.shard) continue;
            load_inputs(&m, c);
            uint64_t before = inputs_sum(c);
            for (int s = 0; s < opt.nstrat; s++) {
                run_ctx rc = {&m, c, opt.strategies[s], 0, 0};
                if (c->is_error) run_bad(&rc, ctx);
                else run_good(&rc, ctx, k);
                if (inputs_sum(c) != before) fail(&rc, "an input array was modified");
                if (rc.failed > 0) nfailed++;
                else if (rc.skipped) nskipped++;
                else npassed++;
                if (opt.verbose && rc.failed == 0)
                    printf("ok %s (%s)\n", c->name, strategy_name(rc.strategy));
            }
            free_inputs(c);
        }
        free_manifest(&m);
    }
    red_close(ctx);
    if (nskipped) printf("%ld passed, %ld failed, %ld skipped\n", npassed, nfailed, nskipped);
    else printf("%ld passed, %ld failed\n", npassed, nfailed);
    return nfailed ? 1 : 0;
}
