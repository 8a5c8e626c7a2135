/*
 * api.c -- the public C API: contexts, prepared expressions, bindings,
 * results, and the one-call red_eval with its cache of prepared programs.
 *
 * A program (parsed text) is shared, immutable and reference counted; it
 * caches one plan per binding signature (names, kinds, dtypes, ranks).  A
 * red_expr is one user's handle on a program plus its bindings and results,
 * so threads working on distinct red_exprs never share mutable state
 * beyond the two caches, which are locked.
 */
#include <dlpack/dlpack.h>
#include <omp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check/check.h"
#include "codegen/cuda.h"
#include "core/dtype.h"
#include "cpu/exec.h"
#include "parser/ast.h"
#include "gpu/gpu.h"
#include "gpu/kcache.h"
#include "redjit.h"

#define PROGRAM_CACHE_MAX 256     /* texts a context keeps parsed               */
#define PLAN_CACHE_MAX 16         /* binding signatures a program keeps planned */
#define CACHE_MB_DEFAULT 64       /* RED_OPT_CACHE_MB                           */

/* ---- versions, names ------------------------------------------------------ */

RED_API int red_version_number(void) { return REDJIT_VERSION_NUMBER; }
RED_API const char *red_version_string(void) { return REDJIT_VERSION_STRING; }

RED_API const char *red_errstr(int status)
{
    switch (status) {
    case RED_OK: return "ok";
    case RED_ERR_NOMEM: return "out of memory";
    case RED_ERR_ARG: return "bad argument";
    case RED_ERR_SYNTAX: return "syntax error";
    case RED_ERR_NAME: return "unknown or unbound name";
    case RED_ERR_TYPE: return "type error";
    case RED_ERR_SHAPE: return "shape or extent error";
    case RED_ERR_BIND: return "bad binding";
    case RED_ERR_INDEX: return "subscript out of range";
    case RED_ERR_EMPTY: return "empty reduction has no result";
    case RED_ERR_KEYS: return "bad keys";
    case RED_ERR_LIMIT: return "implementation limit exceeded";
    case RED_ERR_UNSUPPORTED: return "not supported";
    case RED_ERR_DEVICE: return "device error";
    case RED_ERR_COMPILE: return "kernel compilation failed";
    case RED_ERR_MISUSE: return "API misuse";
    case RED_ERR_INTERNAL: return "internal error";
    case RED_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}

RED_API const char *red_dtype_name(red_dtype t)
{
    switch (t) {
    case RED_BOOL: return "bool";
    case RED_I32: return "i32";
    case RED_I64: return "i64";
    case RED_U32: return "u32";
    case RED_U64: return "u64";
    case RED_F16: return "f16";
    case RED_BF16: return "bf16";
    case RED_F32: return "f32";
    case RED_F64: return "f64";
    }
    return "?";
}

/* ---- arrays ---------------------------------------------------------------- */

RED_API int red_array_init(red_array *a, void *data, red_dtype dtype, int ndim, const int64_t *shape,
                           const int64_t *strides)
{
    if (!a || ndim < 0 || ndim > RED_MAX_DIMS || (ndim > 0 && !shape)) return RED_ERR_ARG;
    memset(a, 0, sizeof *a);
    a->data = data;
    a->dtype = dtype;
    a->ndim = ndim;
    a->memory = RED_MEM_HOST;
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] < 0) return RED_ERR_ARG;
        a->shape[d] = shape[d];
        a->strides[d] = strides ? strides[d] : s;
        if (__builtin_mul_overflow(s, shape[d] > 0 ? shape[d] : 1, &s)) return RED_ERR_ARG;
    }
    return RED_OK;
}

RED_API int64_t red_array_size(const red_array *a)
{
    if (!a) return 0;
    int64_t n = 1;   /* INT64_MAX where the product does not fit */
    for (int d = 0; d < a->ndim && d < RED_MAX_DIMS; d++)
        if (__builtin_mul_overflow(n, a->shape[d], &n)) return INT64_MAX;
    return n;
}

RED_API int red_array_from_dlpack(red_array *a, const void *dltensor)
{
    const DLTensor *t = dltensor;
    if (!a || !t) return RED_ERR_ARG;
    if (t->ndim < 0 || t->ndim > RED_MAX_DIMS || (t->ndim > 0 && !t->shape)) return RED_ERR_BIND;
    memset(a, 0, sizeof *a);
    if (t->dtype.lanes != 1) return RED_ERR_BIND;
    int code = t->dtype.code, bits = t->dtype.bits;
    if (code == kDLInt && bits == 32) a->dtype = RED_I32;
    else if (code == kDLInt && bits == 64) a->dtype = RED_I64;
    else if (code == kDLUInt && bits == 32) a->dtype = RED_U32;
    else if (code == kDLUInt && bits == 64) a->dtype = RED_U64;
    else if (code == kDLFloat && bits == 16) a->dtype = RED_F16;
    else if (code == kDLFloat && bits == 32) a->dtype = RED_F32;
    else if (code == kDLFloat && bits == 64) a->dtype = RED_F64;
    else if (code == kDLBfloat && bits == 16) a->dtype = RED_BF16;
    else if (code == 6 /* kDLBool in DLPack >= 0.8 */ && bits == 8) a->dtype = RED_BOOL;
    else return RED_ERR_BIND;
    if (t->device.device_type == kDLCPU || t->device.device_type == kDLCUDAHost) a->memory = RED_MEM_HOST;
    else if (t->device.device_type == kDLCUDA) a->memory = RED_MEM_CUDA;
    else return RED_ERR_BIND;
    a->device_id = t->device.device_id;
    a->ndim = t->ndim;
    int64_t s = 1, n = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] < 0) return RED_ERR_BIND;
        a->shape[d] = t->shape[d];
        a->strides[d] = t->strides ? t->strides[d] : s;
        if (__builtin_mul_overflow(s, t->shape[d] > 0 ? t->shape[d] : 1, &s) ||
            __builtin_mul_overflow(n, t->shape[d], &n))
            return RED_ERR_BIND;
    }
    /* no data and an offset would make a pointer that passes red_bind_array's NULL test */
    if (!t->data && n > 0) return RED_ERR_BIND;
    a->data = t->data ? (char *)t->data + t->byte_offset : NULL;
    return RED_OK;
}

RED_API void red_free(void *p) { free(p); }

/* ---- programs and their plans ------------------------------------------------ */

/* A plan for one binding signature of a program.  Counted references: the
 * program's list holds one, and so does each expression that last ran it or
 * whose results came from it, so a plan dropped from the list (beyond
 * PLAN_CACHE_MAX, or with its program) lives until they are done. */
typedef struct plan_entry {
    char *sig;              /* canonical signature text */
    util_arena arena;
    plan *plan;
    size_t bytes;
    int refs;
    struct plan_entry *next;
} plan_entry;

static void plan_entry_unref(plan_entry *pe)
{
    if (!pe || __atomic_sub_fetch(&pe->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    util_arena_free(&pe->arena);
    free(pe->sig);
    free(pe);
}

typedef struct program {
    char *text;
    uint64_t hash;          /* of text */
    size_t bytes;           /* text and AST */
    util_arena arena;       /* the AST */
    ast_program *ast;
    int refs;
    pthread_mutex_t lock;   /* guards plans */
    plan_entry *plans;      /* newest first, at most PLAN_CACHE_MAX */
} program;

static void program_unref(program *pg)
{
    if (!pg) return;
    if (__atomic_sub_fetch(&pg->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    for (plan_entry *e = pg->plans; e;) {
        plan_entry *n = e->next;
        plan_entry_unref(e);
        e = n;
    }
    util_arena_free(&pg->arena);
    pthread_mutex_destroy(&pg->lock);
    free(pg->text);
    free(pg);
}

static uint64_t text_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Memory a program holds, its plans included. */
static size_t program_bytes(program *pg)
{
    pthread_mutex_lock(&pg->lock);
    size_t n = pg->bytes;
    for (plan_entry *e = pg->plans; e; e = e->next) n += e->bytes;
    pthread_mutex_unlock(&pg->lock);
    return n;
}

static int program_new(const char *text, uint64_t hash, program **out, util_diag *diag)
{
    program *pg = calloc(1, sizeof *pg);
    if (!pg) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    pg->text = strdup(text);
    pg->refs = 1;
    pthread_mutex_init(&pg->lock, NULL);
    util_arena_init(&pg->arena);
    if (!pg->text) {
        program_unref(pg);
        return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    }
    int rc = ast_parse(&pg->arena, pg->text, &pg->ast, diag, NULL);
    if (rc) {
        program_unref(pg);
        return rc;
    }
    pg->hash = hash;
    pg->bytes = sizeof *pg + strlen(text) + 1 + util_arena_bytes(&pg->arena);
    *out = pg;
    return 0;
}

/* ---- context ---------------------------------------------------------------------- */

typedef struct cache_entry {
    program *pg;
} cache_entry;

struct red_ctx {
    pthread_mutex_t lock;
    int opt[8];
    red_log_fn log;
    void *log_user;
    char errmsg[UTIL_DIAG_MAX];
    cache_entry cache[PROGRAM_CACHE_MAX];   /* least recently used first */
    int ncache;
    red_expr *exprs;        /* live prepared expressions (closed with ctx) */
    gpu_dev *gpu;           /* opened on first use                          */
    int gpu_tried;
    int interrupts;         /* red_interrupt counts up; runs watch it       */
    util_diag gpu_err;      /* why there is no GPU                          */
};

typedef struct binding {
    char *name;
    int is_array;
    red_array arr;
    plan_value scalar;      /* scalars by value */
    red_dtype sdtype;
    int weak;
} binding;

struct red_expr {
    red_ctx *ctx;
    program *pg;
    int opt[8], opt_set[8];
    binding *binds;         /* binds_inl until more are needed              */
    int nbinds, capbinds;
    int borrow_names;       /* red_eval's: binding names are the caller's,
                               valid for the call, not copies               */
    binding binds_inl[4];
    /* results of the last run (their temporaries and names: run_pe's plan) */
    core_results temps;
    int nresults;
    unsigned char *detached;   /* detached_inl unless there are more results */
    unsigned char detached_inl[16];
    util_buf explain;
    util_diag diag;
    red_expr *prev, *next;  /* in ctx->exprs (prepared ones only) */
    int on_list;
    /* GPU runs */
    gpu_dev *gpu;           /* the backend of the last run, NULL: the CPU   */
    gpu_run run;            /* its queued work, stream, result placement    */
    void *stream;
    int results_on_device;  /* RED_RESULTS_* of the run: which temps.t[].data
                               are device pointers (temp_on_device)          */
    /* the plan for the binding signature of the last run: rebinding the
     * same names with arrays of the same kinds, types and ranks reuses it */
    plan_entry *last_pe;
    plan_entry *run_pe;     /* the plan of the current results (a queued GPU run reads it) */
    int sig_dirty;
    red_timings timings;
};

static _Thread_local char tl_errmsg[UTIL_DIAG_MAX];

static void ctx_note_error(red_ctx *ctx, const util_diag *d)
{
    if (!ctx) return;
    pthread_mutex_lock(&ctx->lock);
    snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", d->msg);
    pthread_mutex_unlock(&ctx->lock);
}

RED_API int red_open(red_ctx **out)
{
    if (!out) return RED_ERR_ARG;
    red_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return RED_ERR_NOMEM;
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->opt[RED_OPT_CACHE_MB] = CACHE_MB_DEFAULT;
    *out = ctx;
    return RED_OK;
}

RED_API void red_close(red_ctx *ctx)
{
    if (!ctx) return;
    while (ctx->exprs) red_finalize(ctx->exprs);
    for (int i = 0; i < ctx->ncache; i++) program_unref(ctx->cache[i].pg);
    gpu_close(ctx->gpu);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

RED_API void red_interrupt(red_ctx *ctx)
{
    if (ctx) __atomic_add_fetch(&ctx->interrupts, 1, __ATOMIC_RELAXED);
}

RED_API const char *red_errmsg(red_ctx *ctx)
{
    if (!ctx) return "no context";
    pthread_mutex_lock(&ctx->lock);
    snprintf(tl_errmsg, sizeof tl_errmsg, "%s", ctx->errmsg);
    pthread_mutex_unlock(&ctx->lock);
    return tl_errmsg;
}

static int check_opt(red_option opt, int value)
{
    switch (opt) {
    case RED_OPT_DEVICE: return value >= RED_DEVICE_AUTO && value <= RED_DEVICE_GPU;
    case RED_OPT_STRATEGY: return value >= RED_STRATEGY_AUTO && value <= RED_STRATEGY_SEGMENTED;
    case RED_OPT_THREADS: return value >= 0 && value <= 4096;
    case RED_OPT_RESULTS: return value >= RED_RESULTS_HOST && value <= RED_RESULTS_DEVICE_ARRAYS;
    case RED_OPT_CACHE_MB: return value >= 0 && value <= 65536;
    case RED_OPT_TIMINGS: return value == 0 || value == 1;
    }
    return 0;
}

RED_API int red_set_option(red_ctx *ctx, red_option opt, int value)
{
    if (!ctx || !check_opt(opt, value)) return RED_ERR_ARG;
    pthread_mutex_lock(&ctx->lock);
    __atomic_store_n(&ctx->opt[opt], value, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&ctx->lock);
    return RED_OK;
}

RED_API int red_get_option(red_ctx *ctx, red_option opt, int *value)
{
    if (!ctx || !value || !check_opt(opt, 0)) return RED_ERR_ARG;
    pthread_mutex_lock(&ctx->lock);
    *value = ctx->opt[opt];
    pthread_mutex_unlock(&ctx->lock);
    return RED_OK;
}

RED_API void red_set_log(red_ctx *ctx, red_log_fn fn, void *user)
{
    if (!ctx) return;
    pthread_mutex_lock(&ctx->lock);
    ctx->log = fn;
    ctx->log_user = user;
    pthread_mutex_unlock(&ctx->lock);
}

/* Drop the oldest cached programs while the cache holds more than
 * RED_OPT_CACHE_MB (expressions using one keep it alive by reference). */
static void ctx_trim(red_ctx *ctx)
{
    program *drop[PROGRAM_CACHE_MAX];
    int ndrop = 0;
    pthread_mutex_lock(&ctx->lock);
    size_t budget = (size_t)ctx->opt[RED_OPT_CACHE_MB] << 20, total = 0;
    size_t bytes[PROGRAM_CACHE_MAX];
    for (int i = 0; i < ctx->ncache; i++) total += bytes[i] = program_bytes(ctx->cache[i].pg);
    while (ndrop < ctx->ncache && total > budget) {
        total -= bytes[ndrop];
        drop[ndrop] = ctx->cache[ndrop].pg;
        ndrop++;
    }
    if (ndrop) {
        memmove(ctx->cache, ctx->cache + ndrop, (size_t)(ctx->ncache - ndrop) * sizeof ctx->cache[0]);
        ctx->ncache -= ndrop;
    }
    pthread_mutex_unlock(&ctx->lock);
    for (int i = 0; i < ndrop; i++) program_unref(drop[i]);
}

/* The cached program for `text`, parsed on a miss. */
/* The cached program for `text` (taking a reference), moved to the newest
 * place; NULL if none.  Under ctx->lock. */
static program *cache_find(red_ctx *ctx, const char *text, uint64_t h)
{
    for (int i = ctx->ncache - 1; i >= 0; i--)
        if (ctx->cache[i].pg->hash == h && strcmp(ctx->cache[i].pg->text, text) == 0) {
            program *pg = ctx->cache[i].pg;
            /* the newest again: eviction takes the least recently used */
            memmove(ctx->cache + i, ctx->cache + i + 1, (size_t)(ctx->ncache - 1 - i) * sizeof ctx->cache[0]);
            ctx->cache[ctx->ncache - 1].pg = pg;
            __atomic_add_fetch(&pg->refs, 1, __ATOMIC_ACQ_REL);
            return pg;
        }
    return NULL;
}

/* The cached program for `text`, parsed on a miss (outside the lock; a
 * thread that parsed the same text meanwhile wins, and this parse is dropped). */
static int ctx_program(red_ctx *ctx, const char *text, program **out, util_diag *diag)
{
    uint64_t h = text_hash(text);
    pthread_mutex_lock(&ctx->lock);
    program *pg = cache_find(ctx, text, h);
    pthread_mutex_unlock(&ctx->lock);
    if (pg) {
        *out = pg;
        return 0;
    }
    int rc = program_new(text, h, &pg, diag);
    if (rc) return rc;
    program *old = NULL;
    pthread_mutex_lock(&ctx->lock);
    program *won = cache_find(ctx, text, h);
    if (won) {
        pthread_mutex_unlock(&ctx->lock);
        program_unref(pg);
        *out = won;
        return 0;
    }
    if (ctx->ncache == PROGRAM_CACHE_MAX) {
        old = ctx->cache[0].pg;
        memmove(ctx->cache, ctx->cache + 1, (size_t)(PROGRAM_CACHE_MAX - 1) * sizeof ctx->cache[0]);
        ctx->ncache--;
    }
    ctx->cache[ctx->ncache++].pg = pg;
    __atomic_add_fetch(&pg->refs, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&ctx->lock);
    program_unref(old);
    ctx_trim(ctx);
    *out = pg;
    return 0;
}

/* ---- expressions -------------------------------------------------------------------- */

/* Whether the last run left temporary `t` in device memory. */
static int temp_on_device(const red_expr *e, int t)
{
    return gpu_result_on_device(e->results_on_device, e->temps.t[t].ndim);
}

/* Drop the last run's results.  `chain`: the next run is about to be
 * queued behind it (see expr_chains), which then keeps its workspace and
 * may reuse its buffers and device results, all still queued. */
static void expr_clear_results_chain(red_expr *e, int chain)
{
    unsigned long long extra[8];
    int nextra = 0;
    if (chain && e->results_on_device && e->temps.t)
        for (int i = 0; i < e->temps.n && chain; i++)
            if (temp_on_device(e, i) && e->temps.t[i].data) {
                if (nextra == 8) chain = 0;
                else extra[nextra++] = (unsigned long long)(uintptr_t)e->temps.t[i].data;
            }
    if (chain && gpu_rechain(e->gpu, &e->run, extra, nextra)) {
        for (int i = 0; i < e->temps.n; i++)
            if (temp_on_device(e, i)) e->temps.t[i].data = NULL;
    } else if (e->gpu && (e->run.pending || e->run.ws)) {
        util_diag ignore = {0};
        gpu_finish(e->gpu, &e->run, &ignore);
    }
    if (e->results_on_device && e->temps.t)
        for (int i = 0; i < e->temps.n; i++)
            if (temp_on_device(e, i)) {
                gpu_release(e->gpu, (void *)e->temps.t[i].data);
                e->temps.t[i].data = NULL;
            }
    e->results_on_device = 0;
    core_results_free(&e->temps);
    if (e->detached != e->detached_inl) free(e->detached);
    e->detached = NULL;
    e->nresults = 0;
    plan_entry_unref(e->run_pe);
    e->run_pe = NULL;
}

/* Outside red_run (a failure, red_finalize): the buffers are not kept for
 * a next run either. */
static void expr_clear_results(red_expr *e)
{
    expr_clear_results_chain(e, 0);
    core_results_trim(&e->temps);
}


static void expr_init(red_expr *e, red_ctx *ctx, program *pg)
{
    memset(e, 0, sizeof *e);
    e->ctx = ctx;
    e->pg = pg;
    e->binds = e->binds_inl;
    e->capbinds = (int)(sizeof e->binds_inl / sizeof e->binds_inl[0]);
    util_buf_init(&e->explain);
}

static void free_name(red_expr *e, char *name)
{
    if (!e->borrow_names) free(name);
}

static void expr_release(red_expr *e)
{
    expr_clear_results(e);
    for (int i = 0; i < e->nbinds; i++) free_name(e, e->binds[i].name);
    if (e->binds != e->binds_inl) free(e->binds);
    util_buf_free(&e->explain);
    plan_entry_unref(e->last_pe);
    e->last_pe = NULL;
    program_unref(e->pg);
}

static int fail(red_expr *e, int code)
{
    if (!e->diag.code) util_diag_set(&e->diag, code, "%s", red_errstr(code));
    ctx_note_error(e->ctx, &e->diag);
    return code;
}

RED_API int red_prepare(red_ctx *ctx, const char *text, red_expr **out)
{
    if (!out) return RED_ERR_ARG;
    *out = NULL;
    if (!ctx || !text) return RED_ERR_ARG;
    util_diag diag = {0};
    program *pg = NULL;
    int rc = ctx_program(ctx, text, &pg, &diag);
    if (rc) {
        ctx_note_error(ctx, &diag);
        return rc;
    }
    red_expr *e = malloc(sizeof *e);
    if (!e) {
        program_unref(pg);
        return RED_ERR_NOMEM;
    }
    expr_init(e, ctx, pg);
    pthread_mutex_lock(&ctx->lock);
    e->next = ctx->exprs;
    if (ctx->exprs) ctx->exprs->prev = e;
    ctx->exprs = e;
    e->on_list = 1;
    pthread_mutex_unlock(&ctx->lock);
    *out = e;
    return RED_OK;
}

RED_API void red_finalize(red_expr *e)
{
    if (!e) return;
    red_ctx *ctx = e->ctx;
    if (e->on_list) {
        pthread_mutex_lock(&ctx->lock);
        if (e->prev) e->prev->next = e->next;
        else ctx->exprs = e->next;
        if (e->next) e->next->prev = e->prev;
        pthread_mutex_unlock(&ctx->lock);
    }
    expr_release(e);
    free(e);
}

RED_API int red_expr_set_option(red_expr *e, red_option opt, int value)
{
    if (!e || !check_opt(opt, value) || opt == RED_OPT_CACHE_MB) return RED_ERR_ARG;
    e->opt[opt] = value;
    e->opt_set[opt] = 1;
    return RED_OK;
}

/* The context's options are read without its lock (a run reads several):
 * each is one int, stored atomically under the lock by red_set_option. */
static int expr_opt(red_expr *e, red_option opt)
{
    if (e->opt_set[opt]) return e->opt[opt];
    return __atomic_load_n(&e->ctx->opt[opt], __ATOMIC_RELAXED);
}

RED_API const char *red_expr_errmsg(red_expr *e) { return e ? e->diag.msg : "no expression"; }

static binding *find_binding(red_expr *e, const char *name)
{
    for (int i = 0; i < e->nbinds; i++)
        if (strcmp(e->binds[i].name, name) == 0) return &e->binds[i];
    return NULL;
}

static int valid_name(const char *s)
{
    if (!s || !*s) return 0;
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

static binding *new_binding(red_expr *e, const char *name)
{
    binding *b = find_binding(e, name);
    if (b) return b;
    if (e->nbinds == e->capbinds) {
        int cap = e->capbinds * 2;
        binding *nb = malloc((size_t)cap * sizeof *nb);
        if (!nb) return NULL;
        memcpy(nb, e->binds, (size_t)e->nbinds * sizeof *nb);
        if (e->binds != e->binds_inl) free(e->binds);
        e->binds = nb;
        e->capbinds = cap;
    }
    b = &e->binds[e->nbinds];
    memset(b, 0, sizeof *b);
    b->name = e->borrow_names ? (char *)name : strdup(name);
    if (!b->name) return NULL;
    e->nbinds++;
    return b;
}

RED_API int red_bind_array(red_expr *e, const char *name, const red_array *a)
{
    if (!e) return RED_ERR_ARG;
    e->diag.code = 0;
    e->diag.msg[0] = 0;
    if (!valid_name(name)) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': not a valid name", name ? name : "(null)");
        return fail(e, RED_ERR_BIND);
    }
    if (!a) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': the array descriptor is NULL", name);
        return fail(e, RED_ERR_BIND);
    }
    if (red_dtype_size(a->dtype) == 0) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': unknown dtype %d", name, (int)a->dtype);
        return fail(e, RED_ERR_BIND);
    }
    if (a->ndim < 0 || a->ndim > RED_MAX_DIMS) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': %d dimensions (0 to %d are allowed)",
                      name, a->ndim, RED_MAX_DIMS);
        return fail(e, RED_ERR_BIND);
    }
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] < 0) {
            util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': dimension %d has negative extent %lld",
                          name, d, (long long)a->shape[d]);
            return fail(e, RED_ERR_BIND);
        }
        if (__builtin_mul_overflow(n, a->shape[d], &n) || n > ((int64_t)1 << 48)) {
            util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': %lld elements is too many", name,
                          (long long)n);
            return fail(e, RED_ERR_BIND);
        }
    }
    if (!a->data && n > 0) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': data pointer is NULL for %lld elements",
                      name, (long long)n);
        return fail(e, RED_ERR_BIND);
    }
    /* the bytes the strides span must fit in int64, or an element's offset would wrap and
     * read the wrong element (or outside the array) */
    if (n > 0) {
        int64_t span = 0, t;
        for (int d = 0; d < a->ndim; d++) {
            if (a->strides[d] == INT64_MIN) {
                span = -1;
                break;
            }
            int64_t st = a->strides[d] < 0 ? -a->strides[d] : a->strides[d];
            if (__builtin_mul_overflow(st, a->shape[d] - 1, &t) || __builtin_add_overflow(span, t, &span)) {
                span = -1;
                break;
            }
        }
        if (span < 0 || __builtin_mul_overflow(span, (int64_t)red_dtype_size(a->dtype), &span)) {
            util_diag_set(&e->diag, RED_ERR_BIND,
                          "cannot bind '%s': its strides span more bytes than an int64 holds", name);
            return fail(e, RED_ERR_BIND);
        }
    }
    if (a->memory != 0 && a->memory != RED_MEM_HOST && a->memory != RED_MEM_CUDA) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': unknown memory kind %d", name, (int)a->memory);
        return fail(e, RED_ERR_BIND);
    }
    if (a->ndim == 0 && a->memory == RED_MEM_CUDA) {
        /* refused before anything changes: the name keeps its binding */
        util_diag_set(&e->diag, RED_ERR_UNSUPPORTED,
                      "cannot bind '%s': a 0-d array in device memory is not supported yet", name);
        return fail(e, RED_ERR_UNSUPPORTED);
    }
    int had = e->nbinds;
    binding *b = new_binding(e, name);
    if (!b) return fail(e, RED_ERR_NOMEM);
    if (e->nbinds != had || !b->is_array != !(a->ndim > 0) || b->arr.dtype != a->dtype || b->arr.ndim != a->ndim ||
        b->weak)
        e->sig_dirty = 1;
    b->arr = *a;
    if (!b->arr.memory) b->arr.memory = RED_MEM_HOST;
    b->is_array = a->ndim > 0;
    b->weak = 0;
    if (!b->is_array) {
        /* a 0-d array is a scalar of its type, read now */
        b->sdtype = a->dtype == RED_F16 || a->dtype == RED_BF16 ? RED_F32 : a->dtype;
        b->scalar = core_read_dtype(a->dtype, a->data);
    }
    return RED_OK;
}

static int bind_scalar(red_expr *e, const char *name, red_dtype t, plan_value v)
{
    if (!e) return RED_ERR_ARG;
    e->diag.code = 0;
    if (!valid_name(name)) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': not a valid name", name ? name : "(null)");
        return fail(e, RED_ERR_BIND);
    }
    int had = e->nbinds;
    binding *b = new_binding(e, name);
    if (!b) return fail(e, RED_ERR_NOMEM);
    if (e->nbinds != had || b->is_array || b->sdtype != t || !b->weak) e->sig_dirty = 1;
    b->is_array = 0;
    b->sdtype = t;
    b->scalar = v;
    b->weak = 1;
    memset(&b->arr, 0, sizeof b->arr);
    return RED_OK;
}

RED_API int red_bind_f64(red_expr *e, const char *name, double v)
{
    return bind_scalar(e, name, RED_F64, (plan_value){.f = v});
}

RED_API int red_bind_i64(red_expr *e, const char *name, int64_t v)
{
    return bind_scalar(e, name, RED_I64, (plan_value){.i = v});
}

RED_API void red_clear_bindings(red_expr *e)
{
    if (!e) return;
    red_sync(e);   /* a queued run's fault message names these bindings */
    for (int i = 0; i < e->nbinds; i++) free_name(e, e->binds[i].name);
    e->nbinds = 0;
    e->sig_dirty = 1;
}

static int cmp_binding(const void *x, const void *y)
{
    return strcmp(((const binding *)x)->name, ((const binding *)y)->name);
}

/* Append `v` in decimal. */
static void put_int(util_buf *b, int v)
{
    char d[16];
    int n = 0;
    unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
    do d[sizeof d - 1 - n++] = (char)('0' + u % 10);
    while ((u /= 10) && n < 15);
    if (v < 0) d[sizeof d - 1 - n++] = '-';
    util_buf_putn(b, d + sizeof d - n, (size_t)n);
}

/* The canonical signature of the bindings (sorted by name): for each,
 * "name:<a|s><dtype>:<ndim>:<weak>;".  Written without printf, which was a
 * quarter of a red_eval call's host time. */
static void expr_signature(const red_expr *e, util_buf *sig)
{
    for (int i = 0; i < e->nbinds; i++) {
        const binding *b = &e->binds[i];
        util_buf_puts(sig, b->name);
        util_buf_puts(sig, b->is_array ? ":a" : ":s");
        put_int(sig, b->is_array ? (int)b->arr.dtype : (int)b->sdtype);
        util_buf_putn(sig, ":", 1);
        put_int(sig, b->arr.ndim);
        util_buf_putn(sig, ":", 1);
        put_int(sig, b->weak);
        util_buf_putn(sig, ";", 1);
    }
}

/* The plan for the current bindings, from the program's cache or built. */
static int expr_plan(red_expr *e, plan **out)
{
    program *pg = e->pg;
    if (e->last_pe && !e->sig_dirty) {
        *out = e->last_pe->plan;
        return 0;
    }
    /* canonical signature: bindings sorted by name */
    if (e->nbinds > 1) qsort(e->binds, (size_t)e->nbinds, sizeof *e->binds, cmp_binding);
    util_buf sig;
    util_buf_init(&sig);
    expr_signature(e, &sig);
    if (sig.failed) {
        util_buf_free(&sig);
        return fail(e, RED_ERR_NOMEM);
    }
    const char *s = util_buf_str(&sig);
    pthread_mutex_lock(&pg->lock);
    for (plan_entry *pe = pg->plans; pe; pe = pe->next)
        if (strcmp(pe->sig, s) == 0) {
            __atomic_add_fetch(&pe->refs, 1, __ATOMIC_ACQ_REL);
            pthread_mutex_unlock(&pg->lock);
            util_buf_free(&sig);
            plan_entry_unref(e->last_pe);
            e->last_pe = pe;
            e->sig_dirty = 0;
            *out = pe->plan;
            return 0;
        }
    pthread_mutex_unlock(&pg->lock);

    chk_binding *cb = calloc((size_t)e->nbinds + 1, sizeof *cb);
    plan_entry *pe = calloc(1, sizeof *pe);
    if (!cb || !pe) {
        free(cb);
        free(pe);
        util_buf_free(&sig);
        return fail(e, RED_ERR_NOMEM);
    }
    util_arena_init(&pe->arena);
    for (int i = 0; i < e->nbinds; i++) {
        const binding *b = &e->binds[i];
        /* names are copied: the plan outlives this expression's bindings */
        cb[i].name = util_arena_strndup(&pe->arena, b->name, strlen(b->name));
        cb[i].is_array = b->is_array;
        cb[i].dtype = b->is_array ? b->arr.dtype : b->sdtype;
        cb[i].ndim = b->arr.ndim;
        cb[i].weak = b->weak;
    }
    plan *p = NULL;
    int rc = chk_build(pg->ast, cb, e->nbinds, &pe->arena, &p, &e->diag);
    free(cb);
    if (rc) {
        util_arena_free(&pe->arena);
        free(pe);
        util_buf_free(&sig);
        return fail(e, rc);
    }
    pe->plan = p;
    pe->sig = strdup(s);
    util_buf_free(&sig);
    if (!pe->sig) {
        util_arena_free(&pe->arena);
        free(pe);
        return fail(e, RED_ERR_NOMEM);
    }
    pe->bytes = sizeof *pe + strlen(pe->sig) + 1 + util_arena_bytes(&pe->arena);
    pe->refs = 2;   /* the list's and this expression's */
    /* newest first; entries beyond PLAN_CACHE_MAX leave the list (an
     * expression still using one keeps it alive) */
    plan_entry *drop = NULL;
    pthread_mutex_lock(&pg->lock);
    for (plan_entry *q = pg->plans; q; q = q->next)
        if (strcmp(q->sig, pe->sig) == 0) {
            /* another thread planned the same signature meanwhile: use its */
            __atomic_add_fetch(&q->refs, 1, __ATOMIC_ACQ_REL);
            pthread_mutex_unlock(&pg->lock);
            util_arena_free(&pe->arena);
            free(pe->sig);
            free(pe);
            plan_entry_unref(e->last_pe);
            e->last_pe = q;
            e->sig_dirty = 0;
            *out = q->plan;
            return 0;
        }
    pe->next = pg->plans;
    pg->plans = pe;
    int k = 1;
    for (plan_entry *q = pe; q; q = q->next, k++)
        if (k == PLAN_CACHE_MAX) {
            drop = q->next;
            q->next = NULL;
            break;
        }
    pthread_mutex_unlock(&pg->lock);
    while (drop) {
        plan_entry *n = drop->next;
        plan_entry_unref(drop);
        drop = n;
    }
    plan_entry_unref(e->last_pe);
    e->last_pe = pe;
    e->sig_dirty = 0;
    *out = p;
    ctx_trim(e->ctx);
    return 0;
}

/* Map the plan's buffers and scalars to this expression's bindings. */
static int expr_inputs(red_expr *e, const plan *p, core_buf *bufs, plan_value *scalars, int *on_device)
{
    for (int i = 0; i < p->nbufs; i++) {
        binding *b = find_binding(e, p->bufs[i].name);
        if (!b) return fail(e, RED_ERR_INTERNAL);
        on_device[i] = b->arr.memory == RED_MEM_CUDA;
        core_buf *v = &bufs[i];
        v->data = b->arr.data;
        v->dtype = b->arr.dtype;
        v->ndim = b->arr.ndim;
        v->name = b->name;
        for (int d = 0; d < v->ndim; d++) {
            v->shape[d] = b->arr.shape[d];
            v->strides[d] = b->arr.strides[d];
        }
    }
    for (int i = 0; i < p->nscalars; i++) {
        binding *b = find_binding(e, p->scalars[i].name);
        if (!b) return fail(e, RED_ERR_INTERNAL);
        scalars[i] = b->scalar;
    }
    return 0;
}

/* The GPU of the context, opened on first use (NULL with the reason kept). */
static gpu_dev *ctx_gpu(red_ctx *ctx)
{
    /* once tried, ctx->gpu never changes until red_close: no lock */
    if (__atomic_load_n(&ctx->gpu_tried, __ATOMIC_ACQUIRE)) return ctx->gpu;
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->gpu_tried) {
        if (gpu_open(&ctx->gpu, &ctx->gpu_err)) ctx->gpu = NULL;
        __atomic_store_n(&ctx->gpu_tried, 1, __ATOMIC_RELEASE);
    }
    gpu_dev *g = ctx->gpu;
    pthread_mutex_unlock(&ctx->lock);
    return g;
}

RED_API int red_gpu_available(red_ctx *ctx)
{
    if (!ctx) return 0;
    if (ctx_gpu(ctx)) return 1;
    ctx_note_error(ctx, &ctx->gpu_err);
    return 0;
}

/* Where this run goes: the GPU (returned) or the CPU (NULL, rc 0). */
static int expr_backend(red_expr *e, gpu_dev **gpu)
{
    *gpu = NULL;
    int want = expr_opt(e, RED_OPT_DEVICE), device_arrays = 0;
    for (int i = 0; i < e->nbinds; i++) device_arrays |= e->binds[i].is_array && e->binds[i].arr.memory == RED_MEM_CUDA;
    if (want == RED_DEVICE_CPU) {
        if (device_arrays) {
            util_diag_set(&e->diag, RED_ERR_BIND, "device cpu was chosen, but an array is in CUDA device memory");
            return fail(e, RED_ERR_BIND);
        }
        return 0;
    }
    gpu_dev *g = ctx_gpu(e->ctx);
    if (!g && (want == RED_DEVICE_GPU || device_arrays)) {
        util_diag_set(&e->diag, RED_ERR_DEVICE, "%s%s", device_arrays ? "an array is in CUDA device memory, but " : "",
                      e->ctx->gpu_err.msg);
        return fail(e, RED_ERR_DEVICE);
    }
    *gpu = g;
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

RED_API int red_last_timings(red_expr *e, red_timings *t)
{
    if (!e || !t) return RED_ERR_ARG;
    int rc = red_sync(e);
    if (e->gpu) {
        e->timings.upload_ms = e->run.upload_ms;
        e->timings.kernel_ms = e->run.kernel_ms;
        e->timings.download_ms = e->run.download_ms;
    }
    *t = e->timings;
    return rc;
}

/* Whether the next run of `e`, on plan `p`, can be queued behind its last
 * one without waiting for it: that run is still queued, on the same stream,
 * with the same plan (its fault record's meaning), its results all left
 * on the device, and no timings to read. */
static int expr_chains(red_expr *e, const plan *p)
{
    return e->gpu && e->run.pending && e->run.stream && e->run.stream == e->stream && e->run.p == p &&
           e->run.device_results == RED_RESULTS_DEVICE && expr_opt(e, RED_OPT_RESULTS) == RED_RESULTS_DEVICE &&
           !e->run.timings && !expr_opt(e, RED_OPT_TIMINGS);
}

RED_API int red_run(red_expr *e)
{
    if (!e) return RED_ERR_ARG;
    double t0 = now_ms();
    memset(&e->timings, 0, sizeof e->timings);
    e->diag.code = 0;
    e->diag.msg[0] = 0;
    gpu_dev *gpu;
    int rc = expr_backend(e, &gpu);
    plan *p = NULL;
    double tp = now_ms();
    int was_cached = e->last_pe && !e->sig_dirty;
    if (!rc) rc = expr_plan(e, &p);
    /* the last run's results go; its work is waited for unless this run
     * can be queued behind it */
    int chained = !rc && gpu && e->gpu == gpu && expr_chains(e, p);
    expr_clear_results_chain(e, chained);
    chained = chained && e->run.ws;   /* gpu_rechain may have declined */
    if (rc) {
        core_results_trim(&e->temps);   /* no run to take the kept buffers */
        return rc;
    }
    e->run_pe = e->last_pe;   /* expr_clear_results let go of the previous one */
    __atomic_add_fetch(&e->run_pe->refs, 1, __ATOMIC_ACQ_REL);
    if (!was_cached) e->timings.plan_ms = now_ms() - tp;
    /* the inputs' descriptors: on the stack for up to 8 arrays and scalars */
    core_buf bufs_stack[8];
    plan_value scalars_stack[8];
    int on_device_stack[8];
    int small = p->nbufs <= 8 && p->nscalars <= 8;
    core_buf *bufs = small ? bufs_stack : calloc((size_t)p->nbufs + 1, sizeof *bufs);
    plan_value *scalars = small ? scalars_stack : calloc((size_t)p->nscalars + 1, sizeof *scalars);
    int *on_device = small ? on_device_stack : calloc((size_t)p->nbufs + 1, sizeof *on_device);
    core_cancel cancel = {&e->ctx->interrupts, __atomic_load_n(&e->ctx->interrupts, __ATOMIC_RELAXED)};
    rc = bufs && scalars && on_device ? expr_inputs(e, p, bufs, scalars, on_device) : fail(e, RED_ERR_NOMEM);
    if (!rc) {
        e->gpu = gpu;
        if (gpu) {
            if (!chained) {
                memset(&e->run, 0, sizeof e->run);
            } else {   /* keeps its workspace and the buffers it may reuse */
                e->run.compile_ms = e->run.upload_ms = e->run.kernel_ms = e->run.download_ms = 0;
                e->run.timing_failed = 0;
            }
            e->run.stream = e->stream;
            e->run.device_results = expr_opt(e, RED_OPT_RESULTS);
            e->run.timings = expr_opt(e, RED_OPT_TIMINGS);
            e->run.cancel = &cancel;
            /* explicit ranges of free indices are evaluated on the host, from
             * host arrays and scalars (the pending run keeps no pointer to it) */
            cpu_bound_arg barg = {bufs, scalars, NULL, on_device};
            e->run.bounds = (core_bounds){cpu_eval_bound, &barg};
            rc = gpu_execute(gpu, p, bufs, on_device, scalars, expr_opt(e, RED_OPT_STRATEGY), &e->run, &e->temps,
                             &e->diag);
            e->run.bounds = (core_bounds){0};
            e->results_on_device = rc ? RED_RESULTS_HOST : e->run.device_results;
            e->timings.compile_ms = e->run.compile_ms;
        } else {
            double tc = now_ms();
            rc = cpu_execute(p, bufs, scalars, expr_opt(e, RED_OPT_THREADS), &cancel, &e->temps, &e->diag);
            e->timings.cpu_ms = now_ms() - tc;
        }
        if (rc) fail(e, rc);
    }
    if (!small) {
        free(on_device);
        free(bufs);
        free(scalars);
    }
    e->timings.total_ms = now_ms() - t0;
    if (rc) {
        core_results_trim(&e->temps);
        return rc;
    }
    e->nresults = p->nresults;
    e->detached = p->nresults <= (int)sizeof e->detached_inl ? e->detached_inl
                                                              : malloc((size_t)p->nresults);
    if (!e->detached) {
        expr_clear_results(e);
        return fail(e, RED_ERR_NOMEM);
    }
    memset(e->detached, 0, (size_t)p->nresults);
    return RED_OK;
}

RED_API int red_result_count(red_expr *e) { return e ? e->nresults : 0; }

RED_API int red_sync(red_expr *e)
{
    if (!e) return RED_ERR_ARG;
    if (!e->gpu || !e->run.pending) return RED_OK;
    int rc = gpu_finish(e->gpu, &e->run, &e->diag);
    if (rc) {
        expr_clear_results(e);   /* a fault on the device: no results */
        return fail(e, rc);
    }
    return RED_OK;
}

RED_API int red_expr_set_stream(red_expr *e, void *cuda_stream)
{
    if (!e) return RED_ERR_ARG;
    red_sync(e);
    e->stream = cuda_stream;
    return RED_OK;
}

RED_API int red_result(red_expr *e, int i, red_array *out, const char **name)
{
    if (!e || !out) return RED_ERR_ARG;
    int rc = red_sync(e);
    if (rc) return rc;
    if (i < 0 || i >= e->nresults) return RED_ERR_ARG;
    if (e->detached[i]) return RED_ERR_MISUSE;
    const plan_result *pr = &e->run_pe->plan->results[i];
    const core_buf *t = &e->temps.t[pr->temp];
    memset(out, 0, sizeof *out);
    out->data = (void *)t->data;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    out->memory = temp_on_device(e, pr->temp) ? RED_MEM_CUDA : RED_MEM_HOST;
    for (int d = 0; d < t->ndim; d++) {
        out->shape[d] = t->shape[d];
        out->strides[d] = t->strides[d];
    }
    if (name) *name = pr->name;
    return RED_OK;
}

static int scalar_result(red_expr *e, int i, plan_value *v, int *ct)
{
    red_array a;
    int rc = red_result(e, i, &a, NULL);
    if (rc) return rc;
    if (red_array_size(&a) != 1) {
        util_diag_set(&e->diag, RED_ERR_ARG, "result %d is an array of %lld elements, not a scalar", i,
                      (long long)red_array_size(&a));
        return fail(e, RED_ERR_ARG);
    }
    unsigned char host[8];
    const void *src = a.data;
    if (a.memory == RED_MEM_CUDA) {
        rc = gpu_copy(e->gpu, host, 0, a.data, 1, red_dtype_size(a.dtype), &e->diag);
        if (rc) return fail(e, rc);
        src = host;
    }
    *v = core_read_dtype(a.dtype, src);
    *ct = plan_ct_of_dtype(a.dtype);
    return 0;
}

RED_API int red_result_f64(red_expr *e, int i, double *out)
{
    plan_value v;
    int ct;
    if (!out) return RED_ERR_ARG;
    int rc = scalar_result(e, i, &v, &ct);
    if (rc) return rc;
    if (CT_IS_FLOAT(ct)) *out = v.f;
    else if (ct == CT_U32 || ct == CT_U64) *out = (double)v.u;
    else *out = (double)v.i;
    return RED_OK;
}

RED_API int red_result_i64(red_expr *e, int i, int64_t *out)
{
    plan_value v;
    int ct;
    if (!out) return RED_ERR_ARG;
    int rc = scalar_result(e, i, &v, &ct);
    if (rc) return rc;
    if (CT_IS_FLOAT(ct)) {
        int64_t r;
        core_convert(CT_I64, &r, CT_F64, &v.f, 1);
        *out = r;
    } else {
        *out = v.i;
    }
    return RED_OK;
}

/* Copy a host array into another of the same shape, converting dtypes. */
static int copy_array(const red_array *src, const red_array *dst)
{
    int64_t n = red_array_size(src);
    int nd = src->ndim;
    int64_t idx[RED_MAX_DIMS] = {0};
    size_t ssz = red_dtype_size(src->dtype), dsz = red_dtype_size(dst->dtype);
    int sct = plan_ct_of_dtype(src->dtype), dct = plan_ct_of_dtype(dst->dtype);
    for (int64_t k = 0; k < n; k++) {
        int64_t so = 0, doff = 0;
        for (int d = 0; d < nd; d++) {
            so += idx[d] * src->strides[d];
            doff += idx[d] * dst->strides[d];
        }
        plan_value v = core_read_dtype(src->dtype, (const char *)src->data + so * (int64_t)ssz);
        unsigned char tmp[8];
        /* widen the value to its compute type's storage, then convert */
        switch (sct) {
        case CT_BOOL: tmp[0] = v.i != 0; break;
        case CT_I32: { int32_t x = (int32_t)v.i; memcpy(tmp, &x, 4); } break;
        case CT_U32: { uint32_t x = (uint32_t)v.u; memcpy(tmp, &x, 4); } break;
        case CT_F32: { float x = (float)v.f; memcpy(tmp, &x, 4); } break;
        default: memcpy(tmp, &v, 8);
        }
        unsigned char out[8];
        core_convert(dct, out, sct, tmp, 1);
        char *dp = (char *)dst->data + doff * (int64_t)dsz;
        if (dst->dtype == RED_F16 || dst->dtype == RED_BF16) {
            float f;
            memcpy(&f, out, 4);
            uint16_t h = dst->dtype == RED_BF16 ? core_f32_to_bf16(f) : core_f32_to_f16(f);
            memcpy(dp, &h, 2);
        } else {
            memcpy(dp, out, dsz);
        }
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < src->shape[d]) break;
            idx[d] = 0;
        }
    }
    return 0;
}

RED_API int red_result_copy(red_expr *e, int i, const red_array *dst)
{
    red_array src;
    if (!e || !dst) return RED_ERR_ARG;
    int rc = red_result(e, i, &src, NULL);
    if (rc) return rc;
    if (dst->ndim != src.ndim) {
        util_diag_set(&e->diag, RED_ERR_BIND, "result %d has %d dimension%s; the destination has %d", i,
                      src.ndim, src.ndim == 1 ? "" : "s", dst->ndim);
        return fail(e, RED_ERR_BIND);
    }
    if (red_dtype_size(dst->dtype) == 0) {
        util_diag_set(&e->diag, RED_ERR_BIND, "result %d: the destination's dtype %d is unknown", i, (int)dst->dtype);
        return fail(e, RED_ERR_BIND);
    }
    /* (RED_MEM_CUDA goes on to the device copy below; it was refused here by mistake) */
    if (dst->memory != 0 && dst->memory != RED_MEM_HOST && dst->memory != RED_MEM_CUDA) {
        util_diag_set(&e->diag, RED_ERR_BIND, "result %d: the destination's memory kind %d is unknown", i,
                      (int)dst->memory);
        return fail(e, RED_ERR_BIND);
    }
    for (int d = 0; d < src.ndim; d++)
        if (dst->shape[d] != src.shape[d]) {
            util_diag_set(&e->diag, RED_ERR_BIND,
                          "result %d has extent %lld along dimension %d; the destination has %lld", i,
                          (long long)src.shape[d], d, (long long)dst->shape[d]);
            return fail(e, RED_ERR_BIND);
        }
    if (!dst->data && red_array_size(&src) > 0) {
        util_diag_set(&e->diag, RED_ERR_BIND, "result %d: the destination's data pointer is NULL", i);
        return fail(e, RED_ERR_BIND);
    }
    size_t bytes = (size_t)red_array_size(&src) * red_dtype_size(src.dtype);
    if (dst->memory == RED_MEM_CUDA) {
        /* device to device: same type, contiguous destination only */
        int contiguous = 1;
        int64_t st = 1;
        for (int d = dst->ndim - 1; d >= 0; d--) {
            contiguous &= dst->shape[d] <= 1 || dst->strides[d] == st;
            st *= dst->shape[d];
        }
        if (dst->dtype != src.dtype || !contiguous || !e->gpu) {
            util_diag_set(&e->diag, RED_ERR_UNSUPPORTED, "result %d: a copy into device memory needs the same "
                          "dtype (%s) and a contiguous destination", i, red_dtype_name(src.dtype));
            return fail(e, RED_ERR_UNSUPPORTED);
        }
        int rc2 = gpu_copy(e->gpu, dst->data, 1, src.data, src.memory == RED_MEM_CUDA, bytes, &e->diag);
        return rc2 ? fail(e, rc2) : RED_OK;
    }
    if (src.memory == RED_MEM_CUDA) {
        void *h = malloc(bytes ? bytes : 1);
        if (!h) return fail(e, RED_ERR_NOMEM);
        int rc2 = gpu_copy(e->gpu, h, 0, src.data, 1, bytes, &e->diag);
        if (!rc2) {
            red_array hs = src;
            hs.data = h;
            hs.memory = RED_MEM_HOST;
            copy_array(&hs, dst);
        }
        free(h);
        return rc2 ? fail(e, rc2) : RED_OK;
    }
    return copy_array(&src, dst);
}

/* Result `i` in memory the caller owns: a copy, or with `take` the buffer
 * itself when no other result shares its temporary (host memory from
 * malloc, device memory from the pool: what red_free and red_device_free
 * take), after which the result reads RED_ERR_MISUSE.  red_eval takes, as
 * nothing reads its results again; red_result_detach copies, since a caller
 * may still read the result (the REPL shows what it stored). */
static int result_detach(red_expr *e, int i, red_array *out, int take)
{
    red_array src;
    if (!e || !out) return RED_ERR_ARG;
    int rc = red_result(e, i, &src, NULL);
    if (rc) return rc;
    const plan *p = e->run_pe->plan;
    int t = p->results[i].temp, shared = 0;
    for (int j = 0; j < e->nresults; j++) shared |= j != i && p->results[j].temp == t;
    if (take && !shared) {
        *out = src;
        if (src.memory != RED_MEM_CUDA)   /* the caller frees it */
            core_results_leave(&e->temps, (void *)src.data,
                            (size_t)red_array_size(&src) * red_dtype_size(src.dtype));
        e->temps.t[t].data = NULL;
        e->detached[i] = 1;
        return RED_OK;
    }
    size_t bytes = (size_t)red_array_size(&src) * red_dtype_size(src.dtype);
    if (src.memory == RED_MEM_CUDA) {
        void *d = NULL;
        rc = gpu_alloc(e->gpu, bytes, &d, &e->diag);
        if (!rc) rc = gpu_copy(e->gpu, d, 1, src.data, 1, bytes, &e->diag);
        if (rc) {
            gpu_release(e->gpu, d);
            return fail(e, rc);
        }
        *out = src;
        out->data = d;
        return RED_OK;
    }
    void *h = malloc(bytes ? bytes : 1);
    if (!h) return fail(e, RED_ERR_NOMEM);
    memcpy(h, src.data, bytes);
    *out = src;
    out->data = h;
    return RED_OK;
}

RED_API int red_result_detach(red_expr *e, int i, red_array *out) { return result_detach(e, i, out, 0); }

RED_API int red_explain_ex(red_expr *e, int what, const char **text)
{
    if (!e || !text || what < RED_EXPLAIN_PLAN || what > RED_EXPLAIN_CUDA_ON_GPU) return RED_ERR_ARG;
    e->diag.code = 0;
    plan *p;
    int rc = expr_plan(e, &p);
    if (rc) return rc;
    util_buf_free(&e->explain);
    util_buf_init(&e->explain);
    gpu_dev *gpu = NULL;
    rc = expr_backend(e, &gpu);
    if (rc) return rc;
    static const char *const strat[] = {"auto", "tree", "sequential", "persistent", "segmented"};
    util_buf_printf(&e->explain, "expression: %s\n", e->pg->text);
    if (gpu) {
        util_buf_printf(&e->explain, "backend: gpu, strategy %s (blocks of 256 threads; full reductions: "
                        "persistent grid from occupancy unless another strategy is chosen; partial: a thread, "
                        "warp or block per output by segment length)\n", strat[expr_opt(e, RED_OPT_STRATEGY)]);
    } else {
        /* the count cpu_execute takes for 0; small domains use fewer */
        int threads = expr_opt(e, RED_OPT_THREADS) > 0 ? expr_opt(e, RED_OPT_THREADS) : omp_get_max_threads();
        util_buf_printf(&e->explain, "backend: cpu (up to %d thread%s, blocks of %d, chunks of 65536)\n",
                        threads, threads == 1 ? "" : "s", VM_B);
    }
    plan_explain(&e->explain, p);
    if (what == RED_EXPLAIN_CUDA || (what == RED_EXPLAIN_CUDA_ON_GPU && gpu)) {
        util_buf_puts(&e->explain, "generated CUDA (helpers from src/codegen/device elided):\n");
        rc = cg_explain(p, cg_tuning_get(), &e->explain, &e->diag);
        if (rc) return fail(e, rc);
    }
    if (e->explain.failed) return fail(e, RED_ERR_NOMEM);
    *text = util_buf_str(&e->explain);
    return RED_OK;
}

RED_API int red_explain(red_expr *e, const char **text) { return red_explain_ex(e, RED_EXPLAIN_CUDA, text); }

/* ---- one call ------------------------------------------------------------------------- */

RED_API int red_eval(red_ctx *ctx, const char *text, const red_binding *binds, int nbinds,
                     red_array *results, int nresults, int *count)
{
    if (!ctx || !text || nbinds < 0 || (nbinds > 0 && !binds) || nresults < 0 ||
        (nresults > 0 && !results))
        return RED_ERR_ARG;
    util_diag diag = {0};
    program *pg = NULL;
    int rc = ctx_program(ctx, text, &pg, &diag);
    if (rc) {
        ctx_note_error(ctx, &diag);
        return rc;
    }
    red_expr e;
    expr_init(&e, ctx, pg);
    e.borrow_names = 1;   /* the caller's names outlive this call's expression */
    for (int i = 0; i < nbinds && !rc; i++) rc = red_bind_array(&e, binds[i].name, &binds[i].array);
    if (!rc) rc = red_run(&e);
    if (!rc) {
        if (count) *count = e.nresults;
        int n = nresults < e.nresults ? nresults : e.nresults;
        /* which results this call detached; on the stack for the usual few, so a cached
         * expression's red_eval allocates nothing more for it */
        unsigned char few[64] = {0}, *mine = n <= 64 ? few : calloc((size_t)n, 1);
        if (!mine) rc = RED_ERR_NOMEM;
        for (int i = 0; i < n && !rc; i++) {
            if (results[i].data) {
                rc = red_result_copy(&e, i, &results[i]);
            } else {
                rc = result_detach(&e, i, &results[i], 1);
                mine[i] = !rc;
            }
        }
        /* a later result failed: the buffers detached for earlier ones go back, so a
         * failed call leaves the caller nothing to free */
        for (int i = 0; rc && mine && i < n; i++)
            if (mine[i]) {
                if (results[i].memory == RED_MEM_CUDA) red_device_free(ctx, results[i].data);
                else red_free(results[i].data);
                results[i].data = NULL;
            }
        if (mine != few) free(mine);
    }
    expr_release(&e);
    return rc;
}

RED_API int red_eval_f64(red_ctx *ctx, const char *text, const red_binding *binds, int nbinds, double *v)
{
    if (!v) return RED_ERR_ARG;
    red_array r;
    red_array_init(&r, v, RED_F64, 0, NULL, NULL);
    int count = 0;
    int rc = red_eval(ctx, text, binds, nbinds, &r, 1, &count);
    if (!rc && count < 1) rc = RED_ERR_ARG;
    return rc;
}

/* ---- GPU compilation and caches ------------------------------------------------------- */

RED_API int red_precompile(red_expr *e, const char *arch)
{
    if (!e) return RED_ERR_ARG;
    e->diag.code = 0;
    plan *p;
    int rc = expr_plan(e, &p);
    if (rc) return rc;
    rc = gpu_compile_only(p, arch && *arch ? arch : "sm_90", &e->diag);
    return rc ? fail(e, rc) : RED_OK;
}

RED_API int red_cache_stats(red_ctx *ctx, red_cache_info *info)
{
    if (!ctx || !info) return RED_ERR_ARG;
    memset(info, 0, sizeof *info);
    pthread_mutex_lock(&ctx->lock);
    gpu_dev *g = ctx->gpu;
    info->programs = ctx->ncache;
    for (int i = 0; i < ctx->ncache; i++) {
        program *pg = ctx->cache[i].pg;
        info->program_bytes += (long long)program_bytes(pg);
        pthread_mutex_lock(&pg->lock);
        for (plan_entry *e = pg->plans; e; e = e->next) info->plans++;
        pthread_mutex_unlock(&pg->lock);
    }
    pthread_mutex_unlock(&ctx->lock);
    if (!g) return RED_OK;
    gpu_stats s;
    gpu_get_stats(g, &s);
    info->memory_hits = s.mem_hits;
    info->disk_hits = s.disk_hits;
    info->disk_refused = s.disk_refused;
    info->compiles = s.compiles;
    info->compile_ms = s.compile_ms;
    info->pool_bytes = s.pool_bytes;
    info->pool_in_use = s.pool_live;
    return RED_OK;
}

RED_API int red_cache_clear(red_ctx *ctx)
{
    (void)ctx;
    return kc_clear();
}

/* ---- syntax, device memory --------------------------------------------------------- */

RED_API int red_check_syntax(red_ctx *ctx, const char *text, int *incomplete)
{
    if (incomplete) *incomplete = 0;
    if (!text) return RED_ERR_ARG;
    util_arena a;
    util_arena_init(&a);
    util_diag d = {0};
    ast_program *prog = NULL;
    int inc = 0;
    int rc = ast_parse(&a, text, &prog, &d, &inc);
    util_arena_free(&a);
    if (incomplete) *incomplete = rc ? inc : 0;
    if (rc && ctx) ctx_note_error(ctx, &d);
    return rc;
}

RED_API int red_device_alloc(red_ctx *ctx, size_t bytes, void **ptr)
{
    if (!ctx || !ptr) return RED_ERR_ARG;
    *ptr = NULL;
    gpu_dev *g = ctx_gpu(ctx);
    if (!g) {
        ctx_note_error(ctx, &ctx->gpu_err);
        return RED_ERR_DEVICE;
    }
    util_diag d = {0};
    int rc = gpu_alloc(g, bytes, ptr, &d);
    if (rc) ctx_note_error(ctx, &d);
    return rc;
}

RED_API void red_device_free(red_ctx *ctx, void *ptr)
{
    if (!ctx || !ptr) return;
    pthread_mutex_lock(&ctx->lock);
    gpu_dev *g = ctx->gpu;
    pthread_mutex_unlock(&ctx->lock);
    gpu_release(g, ptr);
}

RED_API int red_memcpy(red_ctx *ctx, void *dst, red_memory dst_memory, const void *src, red_memory src_memory,
                       size_t bytes)
{
    if (!ctx || (bytes && (!dst || !src))) return RED_ERR_ARG;
    /* 0 is host memory, as in red_array; anything else unknown is refused, not memcpy'd */
    if ((dst_memory && dst_memory != RED_MEM_HOST && dst_memory != RED_MEM_CUDA) ||
        (src_memory && src_memory != RED_MEM_HOST && src_memory != RED_MEM_CUDA))
        return RED_ERR_ARG;
    int dd = dst_memory == RED_MEM_CUDA, sd = src_memory == RED_MEM_CUDA;
    if (!dd && !sd) {
        memcpy(dst, src, bytes);
        return RED_OK;
    }
    gpu_dev *g = ctx_gpu(ctx);
    if (!g) {
        ctx_note_error(ctx, &ctx->gpu_err);
        return RED_ERR_DEVICE;
    }
    util_diag d = {0};
    int rc = gpu_copy(g, dst, dd, src, sd, bytes, &d);
    if (rc) ctx_note_error(ctx, &d);
    return rc;
}
