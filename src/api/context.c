/*
 * context.c -- the context and what hangs on it: versions and names, array descriptors, the
 * cache of parsed programs, options, the last error message, the GPU opened on first use and
 * its device memory, the caches' statistics, and the syntax check.
 */
#include <dlpack/dlpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "core/dtype.h"
#include "gpu/kcache.h"

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
    case RED_ERR_COMM: return "communicator error";
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
    case RED_I8: return "i8";
    case RED_U8: return "u8";
    case RED_I16: return "i16";
    case RED_U16: return "u16";
    case RED_C64: return "c64";
    case RED_C128: return "c128";
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
    if (code == kDLInt && bits == 8) a->dtype = RED_I8;
    else if (code == kDLUInt && bits == 8) a->dtype = RED_U8;
    else if (code == kDLInt && bits == 16) a->dtype = RED_I16;
    else if (code == kDLUInt && bits == 16) a->dtype = RED_U16;
    else if (code == kDLInt && bits == 32) a->dtype = RED_I32;
    else if (code == kDLInt && bits == 64) a->dtype = RED_I64;
    else if (code == kDLUInt && bits == 32) a->dtype = RED_U32;
    else if (code == kDLUInt && bits == 64) a->dtype = RED_U64;
    else if (code == kDLFloat && bits == 16) a->dtype = RED_F16;
    else if (code == kDLFloat && bits == 32) a->dtype = RED_F32;
    else if (code == kDLFloat && bits == 64) a->dtype = RED_F64;
    else if (code == kDLBfloat && bits == 16) a->dtype = RED_BF16;
    else if (code == 5 /* kDLComplex */ && bits == 64) a->dtype = RED_C64;
    else if (code == 5 && bits == 128) a->dtype = RED_C128;
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

void plan_entry_unref(plan_entry *pe)
{
    if (!pe || __atomic_sub_fetch(&pe->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    for (plan_unrolled *u = pe->unrolled; u;) {
        plan_unrolled *n = u->next;
        util_arena_free(&u->arena);
        free(u);
        u = n;
    }
    util_arena_free(&pe->arena);
    free(pe->sig);
    free(pe);
}

void program_unref(program *pg)
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

static int program_new(const char *text, uint64_t hash, const ast_limits *lim, program **out,
                       util_diag *diag)
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
    int rc = ast_parse_limited(&pg->arena, pg->text, lim, &pg->ast, diag, NULL);
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

static _Thread_local char tl_errmsg[UTIL_DIAG_MAX];

void ctx_note_error(red_ctx *ctx, const util_diag *d)
{
    if (!ctx) return;
    pthread_mutex_lock(&ctx->lock);
    snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", d->msg);
    pthread_mutex_unlock(&ctx->lock);
}

int ctx_fail(red_ctx *ctx, int code, const char *fmt, ...)
{
    if (!ctx) return code;
    util_diag d;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d.msg, sizeof d.msg, fmt, ap);
    va_end(ap);
    d.code = code;
    ctx_note_error(ctx, &d);
    return code;
}

RED_API int red_open(red_ctx **out)
{
    if (!out) return RED_ERR_ARG;
    red_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return RED_ERR_NOMEM;
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->opt[RED_OPT_CACHE_MB] = CACHE_MB_DEFAULT;
    ctx->opt[RED_OPT_MAX_TEXT] = AST_MAX_TEXT;
    ctx->opt[RED_OPT_MAX_NODES] = AST_MAX_NODES;
    ctx->opt[RED_OPT_MAX_PASSES] = CHK_MAX_PASSES;
    ctx->opt[RED_OPT_MAX_SOURCE] = MAX_SOURCE_DEFAULT;
    ctx->opt[RED_OPT_BLAS] = 1;
    *out = ctx;
    return RED_OK;
}

RED_API void red_close(red_ctx *ctx)
{
    if (!ctx) return;
    while (ctx->exprs) red_finalize(ctx->exprs);
    for (int i = 0; i < ctx->ncache; i++) program_unref(ctx->cache[i].pg);
    ctx_detach_comm(ctx);   /* the NCCL engine works on the GPU: first */
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

int api_opt_known(red_option opt)
{
    return opt >= RED_OPT_DEVICE && opt < API_NOPTS && opt != 4;   /* 4 is reserved */
}

int api_check_opt(red_option opt, int value)
{
    switch (opt) {
    case RED_OPT_DEVICE: return value >= RED_DEVICE_AUTO && value <= RED_DEVICE_GPU;
    case RED_OPT_STRATEGY: return value >= RED_STRATEGY_AUTO && value <= RED_STRATEGY_SEGMENTED;
    case RED_OPT_THREADS: return value >= 0 && value <= 4096;
    case RED_OPT_RESULTS: return value >= RED_RESULTS_HOST && value <= RED_RESULTS_DEVICE_ARRAYS;
    case RED_OPT_CACHE_MB: return value >= 0 && value <= 65536;
    case RED_OPT_TIMINGS: return value == 0 || value == 1;
    case RED_OPT_MAX_TEXT: return value >= 1 && value <= AST_MAX_TEXT;
    case RED_OPT_MAX_NODES: return value >= 1 && value <= AST_MAX_NODES;
    case RED_OPT_MAX_PASSES: return value >= 1 && value <= CHK_MAX_PASSES;
    case RED_OPT_MAX_SOURCE:
    case RED_OPT_MAX_COMPILES: return value >= 0;
    case RED_OPT_GATHER:
    case RED_OPT_BLAS: return value == 0 || value == 1;
    }
    return 0;
}

RED_API int red_set_option(red_ctx *ctx, red_option opt, int value)
{
    if (!ctx) return RED_ERR_ARG;
    if (!api_opt_known(opt)) return ctx_fail(ctx, RED_ERR_ARG, "red_set_option: %d is not a RED_OPT_* option", (int)opt);
    if (!api_check_opt(opt, value))
        return ctx_fail(ctx, RED_ERR_ARG, "red_set_option: %d is not a value of option %d", value, (int)opt);
    pthread_mutex_lock(&ctx->lock);
    __atomic_store_n(&ctx->opt[opt], value, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&ctx->lock);
    return RED_OK;
}

RED_API int red_get_option(red_ctx *ctx, red_option opt, int *value)
{
    if (!ctx) return RED_ERR_ARG;
    if (!value) return ctx_fail(ctx, RED_ERR_ARG, "red_get_option: `value` is NULL");
    if (!api_opt_known(opt)) return ctx_fail(ctx, RED_ERR_ARG, "red_get_option: %d is not a RED_OPT_* option", (int)opt);
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
void ctx_trim(red_ctx *ctx)
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

ast_limits ctx_ast_limits(red_ctx *ctx)
{
    ast_limits lim = {AST_MAX_TEXT, AST_MAX_NODES};
    if (ctx) {
        lim.max_text = __atomic_load_n(&ctx->opt[RED_OPT_MAX_TEXT], __ATOMIC_RELAXED);
        lim.max_nodes = __atomic_load_n(&ctx->opt[RED_OPT_MAX_NODES], __ATOMIC_RELAXED);
    }
    return lim;
}

/* The cached program for `text`, parsed on a miss (outside the lock; a
 * thread that parsed the same text meanwhile wins, and this parse is dropped).
 * A cached program may have been parsed under higher limits: its size is
 * checked again (the text's first, before hashing it). */
int ctx_program(red_ctx *ctx, const char *text, program **out, util_diag *diag)
{
    ast_limits lim = ctx_ast_limits(ctx);
    size_t len = strlen(text);
    if (len > (size_t)lim.max_text)
        return util_diag_set(diag, RED_ERR_LIMIT, "expression text is %zu bytes: the limit is %ld (RED_OPT_MAX_TEXT)",
                             len, lim.max_text);
    uint64_t h = text_hash(text);
    pthread_mutex_lock(&ctx->lock);
    program *pg = cache_find(ctx, text, h);
    pthread_mutex_unlock(&ctx->lock);
    if (pg && pg->ast->nnodes > lim.max_nodes) {
        long n = pg->ast->nnodes;
        program_unref(pg);
        return util_diag_set(diag, RED_ERR_LIMIT,
                             "expression has %ld syntax-tree nodes: the limit is %ld (RED_OPT_MAX_NODES)", n,
                             lim.max_nodes);
    }
    if (pg) {
        *out = pg;
        return 0;
    }
    int rc = program_new(text, h, &lim, &pg, diag);
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

/* The GPU of the context, opened on first use (NULL with the reason kept). */
gpu_dev *ctx_gpu(red_ctx *ctx)
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

/* ---- caches --------------------------------------------------------------------------- */

RED_API int red_cache_stats(red_ctx *ctx, red_cache_info *info)
{
    if (!ctx) return RED_ERR_ARG;
    if (!info) return ctx_fail(ctx, RED_ERR_ARG, "red_cache_stats: `info` is NULL");
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
    if (!text) return ctx_fail(ctx, RED_ERR_ARG, "red_check_syntax: the text is NULL");
    util_arena a;
    util_arena_init(&a);
    util_diag d = {0};
    ast_program *prog = NULL;
    int inc = 0;
    ast_limits lim = ctx_ast_limits(ctx);
    int rc = ast_parse_limited(&a, text, &lim, &prog, &d, &inc);
    util_arena_free(&a);
    if (incomplete) *incomplete = rc ? inc : 0;
    if (rc && ctx) ctx_note_error(ctx, &d);
    return rc;
}

RED_API int red_device_alloc(red_ctx *ctx, size_t bytes, void **ptr)
{
    if (!ctx) return RED_ERR_ARG;
    if (!ptr) return ctx_fail(ctx, RED_ERR_ARG, "red_device_alloc: `ptr` is NULL");
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
    if (!ctx) return RED_ERR_ARG;
    if (bytes && (!dst || !src))
        return ctx_fail(ctx, RED_ERR_ARG, "red_memcpy: the %s pointer is NULL for %zu bytes", dst ? "source" : "destination",
                        bytes);
    /* 0 is host memory, as in red_array; anything else unknown is refused, not memcpy'd */
    if ((dst_memory && dst_memory != RED_MEM_HOST && dst_memory != RED_MEM_CUDA) ||
        (src_memory && src_memory != RED_MEM_HOST && src_memory != RED_MEM_CUDA))
        return ctx_fail(ctx, RED_ERR_ARG, "red_memcpy: unknown memory kind %d",
                        dst_memory && dst_memory != RED_MEM_HOST && dst_memory != RED_MEM_CUDA ? (int)dst_memory
                                                                                             : (int)src_memory);
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
