/*
 * expr.c -- prepared expressions: prepare and finalize, options, bindings, the binding
 * signature and its plan, the inputs of a run, the choice of backend, red_run itself, and
 * the stream and sync of queued GPU work.
 *
 * A red_expr is one user's handle on a program plus its bindings and results, so threads
 * working on distinct red_exprs never share mutable state beyond the context's two caches
 * (programs, and each program's plans), which are locked.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api_internal.h"
#include "core/dtype.h"
#include "cpu/exec.h"

/* ---- expressions -------------------------------------------------------------------- */

/* Whether the last run left temporary `t` in device memory. */
int expr_temp_on_device(const red_expr *e, int t)
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
            if (expr_temp_on_device(e, i) && e->temps.t[i].data) {
                if (nextra == 8) chain = 0;
                else extra[nextra++] = (unsigned long long)(uintptr_t)e->temps.t[i].data;
            }
    if (chain && gpu_rechain(e->gpu, &e->run, extra, nextra)) {
        for (int i = 0; i < e->temps.n; i++)
            if (expr_temp_on_device(e, i)) e->temps.t[i].data = NULL;
    } else if (e->gpu && (e->run.pending || e->run.ws)) {
        util_diag ignore = {0};
        gpu_finish(e->gpu, &e->run, &ignore);
    }
    if (e->results_on_device && e->temps.t)
        for (int i = 0; i < e->temps.n; i++)
            if (expr_temp_on_device(e, i)) {
                gpu_release(e->gpu, (void *)e->temps.t[i].data);
                e->temps.t[i].data = NULL;
            }
    e->results_on_device = 0;
    core_results_free(&e->temps);
    if (e->detached != e->detached_inl) free(e->detached);
    e->detached = NULL;
    e->nresults = 0;
    free(e->split_res);
    e->split_res = NULL;
    plan_entry_unref(e->run_pe);
    e->run_pe = NULL;
}

/* Outside red_run (a failure, red_finalize): the buffers are not kept for
 * a next run either. */
void expr_clear_results(red_expr *e)
{
    expr_clear_results_chain(e, 0);
    core_results_trim(&e->temps);
    core_scratch_free(&e->temps.scratch);
}

void expr_init(red_expr *e, red_ctx *ctx, program *pg)
{
    memset(e, 0, offsetof(red_expr, diag));
    e->diag.code = 0;
    e->diag.msg[0] = 0;
    e->errmsg[0] = 0;
    e->ctx = ctx;
    e->pg = pg;
    e->binds = e->binds_inl;
    e->capbinds = (int)(sizeof e->binds_inl / sizeof e->binds_inl[0]);
    /* the options are fixed here (red_expr_set_option changes them): each is one int,
     * stored atomically by red_set_option, so no lock is needed to read them */
    for (int k = 0; k < (int)(sizeof e->opt / sizeof e->opt[0]); k++)
        e->opt[k] = __atomic_load_n(&ctx->opt[k], __ATOMIC_RELAXED);
    util_buf_init(&e->explain);
}

static void free_name(red_expr *e, char *name)
{
    if (!e->borrow_names) free(name);
}

void expr_release(red_expr *e)
{
    expr_clear_results(e);
    for (int i = 0; i < e->nbinds; i++) free_name(e, e->binds[i].name);
    if (e->binds != e->binds_inl) free(e->binds);
    util_buf_free(&e->explain);
    plan_entry_unref(e->last_pe);
    e->last_pe = NULL;
    ranks_plan_free(e->rplan);
    e->rplan = NULL;
    program_unref(e->pg);
}

void expr_start(red_expr *e)
{
    e->diag.code = 0;
    e->diag.msg[0] = 0;
}

int expr_fail(red_expr *e, int code)
{
    if (!e->diag.code || !e->diag.msg[0]) util_diag_set(&e->diag, code, "%s", red_errstr(code));
    snprintf(e->errmsg, sizeof e->errmsg, "%s", e->diag.msg);
    ctx_note_error(e->ctx, &e->diag);
    return code;
}

int expr_failf(red_expr *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->diag.msg, sizeof e->diag.msg, fmt, ap);
    va_end(ap);
    e->diag.code = code;
    return expr_fail(e, code);
}

RED_API int red_prepare(red_ctx *ctx, const char *text, red_expr **out)
{
    if (!out) return ctx_fail(ctx, RED_ERR_ARG, "red_prepare: `out` is NULL");
    *out = NULL;
    if (!ctx) return RED_ERR_ARG;
    if (!text) return ctx_fail(ctx, RED_ERR_ARG, "red_prepare: the text is NULL");
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
        return ctx_fail(ctx, RED_ERR_NOMEM, "out of memory");
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
    if (!e) return RED_ERR_ARG;
    expr_start(e);
    if (opt == RED_OPT_CACHE_MB || opt == RED_OPT_MAX_TEXT || opt == RED_OPT_MAX_NODES)
        return expr_failf(e, RED_ERR_ARG, "red_expr_set_option: %s belongs to the context (red_set_option)",
                          opt == RED_OPT_CACHE_MB ? "RED_OPT_CACHE_MB"
                          : opt == RED_OPT_MAX_TEXT ? "RED_OPT_MAX_TEXT"
                                                    : "RED_OPT_MAX_NODES");
    if (!api_opt_known(opt))
        return expr_failf(e, RED_ERR_ARG, "red_expr_set_option: %d is not a RED_OPT_* option", (int)opt);
    if (!api_check_opt(opt, value))
        return expr_failf(e, RED_ERR_ARG, "red_expr_set_option: %d is not a value of option %d", value, (int)opt);
    e->opt[opt] = value;
    return RED_OK;
}

int expr_opt(red_expr *e, red_option opt) { return e->opt[opt]; }

gpu_limits expr_gpu_limits(red_expr *e)
{
    gpu_limits lim = {expr_opt(e, RED_OPT_MAX_SOURCE), expr_opt(e, RED_OPT_MAX_COMPILES), &e->compiles};
    return lim;
}

/* A cached plan was built under this expression's RED_OPT_MAX_PASSES or
 * another's, perhaps higher: checked again at each use. */
static int plan_passes_ok(red_expr *e, const plan *p)
{
    int max = expr_opt(e, RED_OPT_MAX_PASSES);
    if (p->npasses <= max) return 0;
    return expr_failf(e, RED_ERR_LIMIT, "the plan has %d passes: the limit is %d (RED_OPT_MAX_PASSES)", p->npasses,
                      max);
}

RED_API const char *red_expr_errmsg(red_expr *e) { return e ? e->errmsg : "no expression"; }

binding *expr_find_binding(red_expr *e, const char *name)
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
    binding *b = expr_find_binding(e, name);
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
    expr_start(e);
    if (!valid_name(name)) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': not a valid name", name ? name : "(null)");
        return expr_fail(e, RED_ERR_BIND);
    }
    if (!a) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': the array descriptor is NULL", name);
        return expr_fail(e, RED_ERR_BIND);
    }
    if (red_dtype_size(a->dtype) == 0) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': unknown dtype %d", name, (int)a->dtype);
        return expr_fail(e, RED_ERR_BIND);
    }
    if (a->ndim < 0 || a->ndim > RED_MAX_DIMS) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': %d dimensions (0 to %d are allowed)",
                      name, a->ndim, RED_MAX_DIMS);
        return expr_fail(e, RED_ERR_BIND);
    }
    if ((a->dtype == RED_C64 || a->dtype == RED_C128) && a->ndim == RED_MAX_DIMS) {
        /* read as an array of its parts, one dimension more (expr_inputs) */
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': a complex array has at most %d dimensions, not %d",
                      name, RED_MAX_DIMS - 1, a->ndim);
        return expr_fail(e, RED_ERR_BIND);
    }
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] < 0) {
            util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': dimension %d has negative extent %lld",
                          name, d, (long long)a->shape[d]);
            return expr_fail(e, RED_ERR_BIND);
        }
        if (__builtin_mul_overflow(n, a->shape[d], &n) || n > ((int64_t)1 << 48)) {
            util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': %lld elements is too many", name,
                          (long long)n);
            return expr_fail(e, RED_ERR_BIND);
        }
    }
    if (!a->data && n > 0) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': data pointer is NULL for %lld elements",
                      name, (long long)n);
        return expr_fail(e, RED_ERR_BIND);
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
            return expr_fail(e, RED_ERR_BIND);
        }
    }
    if (a->memory != 0 && a->memory != RED_MEM_HOST && a->memory != RED_MEM_CUDA) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': unknown memory kind %d", name, (int)a->memory);
        return expr_fail(e, RED_ERR_BIND);
    }
    if (a->ndim == 0 && a->memory == RED_MEM_CUDA) {
        /* refused before anything changes: the name keeps its binding */
        util_diag_set(&e->diag, RED_ERR_UNSUPPORTED,
                      "cannot bind '%s': a 0-d array in device memory is not supported yet", name);
        return expr_fail(e, RED_ERR_UNSUPPORTED);
    }
    int had = e->nbinds;
    binding *b = new_binding(e, name);
    if (!b) return expr_fail(e, RED_ERR_NOMEM);
    if (e->nbinds != had || !b->is_array != !(a->ndim > 0) || b->arr.dtype != a->dtype || b->arr.ndim != a->ndim ||
        b->weak)
        e->sig_dirty = 1;
    b->arr = *a;
    if (!b->arr.memory) b->arr.memory = RED_MEM_HOST;
    b->split = 0;
    b->is_array = a->ndim > 0;
    b->weak = 0;
    if (!b->is_array) {
        /* a 0-d array is a scalar of its type, read now; a complex one, both parts */
        b->sdtype = a->dtype == RED_C64 || a->dtype == RED_C128 ? a->dtype : plan_dtype_of_ct(plan_ct_of_dtype(a->dtype));
        b->scalar = core_read_dtype(a->dtype, a->data);
        b->scalar_im.u = 0;
        if (a->dtype == RED_C64) b->scalar_im.f = ((const float *)a->data)[1];
        if (a->dtype == RED_C128) b->scalar_im.f = ((const double *)a->data)[1];
    }
    return RED_OK;
}

static int bind_scalar(red_expr *e, const char *name, red_dtype t, plan_value v)
{
    if (!e) return RED_ERR_ARG;
    expr_start(e);
    if (!valid_name(name)) {
        util_diag_set(&e->diag, RED_ERR_BIND, "cannot bind '%s': not a valid name", name ? name : "(null)");
        return expr_fail(e, RED_ERR_BIND);
    }
    int had = e->nbinds;
    binding *b = new_binding(e, name);
    if (!b) return expr_fail(e, RED_ERR_NOMEM);
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
int expr_plan(red_expr *e, plan **out)
{
    program *pg = e->pg;
    if (e->last_pe && !e->sig_dirty) {
        *out = e->last_pe->plan;
        return plan_passes_ok(e, *out);
    }
    /* canonical signature: bindings sorted by name */
    if (e->nbinds > 1) qsort(e->binds, (size_t)e->nbinds, sizeof *e->binds, cmp_binding);
    util_buf sig;
    util_buf_init(&sig);
    expr_signature(e, &sig);
    if (sig.failed) {
        util_buf_free(&sig);
        return expr_fail(e, RED_ERR_NOMEM);
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
            return plan_passes_ok(e, pe->plan);
        }
    pthread_mutex_unlock(&pg->lock);

    chk_binding *cb = calloc((size_t)e->nbinds + 1, sizeof *cb);
    plan_entry *pe = calloc(1, sizeof *pe);
    if (!cb || !pe) {
        free(cb);
        free(pe);
        util_buf_free(&sig);
        return expr_fail(e, RED_ERR_NOMEM);
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
    chk_limits lim = {expr_opt(e, RED_OPT_MAX_PASSES)};
    int rc = chk_build(pg->ast, cb, e->nbinds, &lim, &pe->arena, &p, &e->diag);
    free(cb);
    if (rc) {
        util_arena_free(&pe->arena);
        free(pe);
        util_buf_free(&sig);
        return expr_fail(e, rc);
    }
    pe->plan = p;
    pe->sig = strdup(s);
    util_buf_free(&sig);
    if (!pe->sig) {
        util_arena_free(&pe->arena);
        free(pe);
        return expr_fail(e, RED_ERR_NOMEM);
    }
    pe->bytes = sizeof *pe + strlen(pe->sig) + 1 + util_arena_bytes(&pe->arena);
    pe->unroll_passes = core_unroll_candidates(p);
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
int expr_inputs(red_expr *e, const plan *p, core_buf *bufs, plan_value *scalars, int *on_device)
{
    for (int i = 0; i < p->nbufs; i++) {
        binding *b = expr_find_binding(e, p->bufs[i].name);
        if (!b) return expr_fail(e, RED_ERR_INTERNAL);
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
        if (v->dtype == RED_C64 || v->dtype == RED_C128) {
            /* a complex array is read as an array of its real parts, one dimension
             * more: [..., 2], the real part at 0 and the imaginary one at 1 */
            v->dtype = v->dtype == RED_C64 ? RED_F32 : RED_F64;
            for (int d = 0; d < v->ndim; d++) v->strides[d] *= 2;
            v->shape[v->ndim] = 2;
            v->strides[v->ndim++] = 1;
        }
    }
    for (int i = 0; i < p->nscalars; i++) {
        binding *b = expr_find_binding(e, p->scalars[i].name);
        if (!b) return expr_fail(e, RED_ERR_INTERNAL);
        scalars[i] = p->scalars[i].part ? b->scalar_im : b->scalar;
    }
    return 0;
}

/* Where this run goes: the GPU (returned) or the CPU (NULL, rc 0). */
int expr_backend(red_expr *e, gpu_dev **gpu)
{
    *gpu = NULL;
    int want = expr_opt(e, RED_OPT_DEVICE), device_arrays = 0;
    for (int i = 0; i < e->nbinds; i++) device_arrays |= e->binds[i].is_array && e->binds[i].arr.memory == RED_MEM_CUDA;
    if (want == RED_DEVICE_CPU) {
        if (device_arrays) {
            util_diag_set(&e->diag, RED_ERR_BIND, "device cpu was chosen, but an array is in CUDA device memory");
            return expr_fail(e, RED_ERR_BIND);
        }
        return 0;
    }
    gpu_dev *g = ctx_gpu(e->ctx);
    if (!g && (want == RED_DEVICE_GPU || device_arrays))
        return expr_failf(e, RED_ERR_DEVICE, "%s, but no GPU can be used (%s)",
                          want == RED_DEVICE_GPU ? "RED_OPT_DEVICE is RED_DEVICE_GPU"
                                                 : "an array is in CUDA device memory",
                          e->ctx->gpu_err.msg[0] ? e->ctx->gpu_err.msg : "no reason given");
    *gpu = g;
    return 0;
}

double expr_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

RED_API int red_last_timings(red_expr *e, red_timings *t)
{
    if (!e) return RED_ERR_ARG;
    if (!t) {
        expr_start(e);
        return expr_failf(e, RED_ERR_ARG, "red_last_timings: `t` is NULL");
    }
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

int expr_take_results(red_expr *e, const plan *p)
{
    e->nresults = p->nresults;
    e->detached = p->nresults <= (int)sizeof e->detached_inl ? e->detached_inl
                                                              : malloc((size_t)p->nresults);
    if (!e->detached) {
        expr_clear_results(e);
        return expr_fail(e, RED_ERR_NOMEM);
    }
    memset(e->detached, 0, (size_t)p->nresults);
    return RED_OK;
}

/* The plan to run p with on these inputs: p with its small inner reductions written out where
 * it has some (core/unroll.h), made once for each binding's sizes and kept with p's entry;
 * else p. */
static const plan *expr_unrolled(red_expr *e, plan_entry *pe, const plan *p, const core_buf *bufs,
                                 const plan_value *scalars, const int *on_device)
{
    if (!pe || !pe->unroll_passes) return p;   /* (most plans: nothing more a run) */
    cpu_bound_arg barg = {bufs, scalars, NULL, on_device};
    core_bounds bounds = {cpu_eval_bound, &barg};
    core_unroll_key key;
    if (!core_unroll_find(p, pe->unroll_passes, bufs, &bounds, &key)) return p;
    const plan *out = p;
    int n = 0;
    pthread_mutex_lock(&e->pg->lock);
    for (plan_unrolled *u = pe->unrolled; u && out == p; u = u->next, n++)
        if (memcmp(&u->key, &key, sizeof key) == 0) out = u->plan;
    plan_unrolled *u = out == p && n < PLAN_UNROLLED_MAX ? calloc(1, sizeof *u) : NULL;
    if (u) {
        util_arena_init(&u->arena);
        if (core_unroll_make(p, &key, &u->arena, &u->plan) == 0) {
            u->key = key;
            u->next = pe->unrolled;
            pe->unrolled = u;
            pe->bytes += sizeof *u + util_arena_bytes(&u->arena);   /* (the context's cache counts it) */
            out = u->plan;
        } else {   /* (out of memory: the plan as it is) */
            util_arena_free(&u->arena);
            free(u);
        }
    }
    pthread_mutex_unlock(&e->pg->lock);
    return out;
}

const plan *expr_run_plan(red_expr *e, const plan *p)
{
    core_buf *bufs = calloc((size_t)p->nbufs + 1, sizeof *bufs);
    plan_value *scalars = calloc((size_t)p->nscalars + 1, sizeof *scalars);
    int *on_device = calloc((size_t)p->nbufs + 1, sizeof *on_device);
    const plan *rp = p;
    if (bufs && scalars && on_device && !expr_inputs(e, p, bufs, scalars, on_device))
        rp = expr_unrolled(e, e->last_pe, p, bufs, scalars, on_device);
    free(bufs);
    free(scalars);
    free(on_device);
    return rp;
}

int expr_gpu_run(red_expr *e, gpu_dev *gpu, const plan *p, const core_buf *bufs, const int *on_device,
                 const plan_value *scalars, const core_cancel *cancel, const core_pass_hook *hook, int chained)
{
    e->gpu = gpu;
    if (!chained) {
        memset(&e->run, 0, sizeof e->run);
    } else {   /* keeps its workspace and the buffers it may reuse */
        e->run.compile_ms = e->run.upload_ms = e->run.kernel_ms = e->run.download_ms = 0;
        e->run.timing_failed = 0;
    }
    e->run.stream = e->stream;
    e->run.device_results = expr_opt(e, RED_OPT_RESULTS);
    e->run.timings = expr_opt(e, RED_OPT_TIMINGS);
    e->run.blas = expr_opt(e, RED_OPT_BLAS);
    e->run.limits = expr_gpu_limits(e);
    e->run.cancel = cancel;
    /* explicit ranges of free indices are evaluated on the host, from
     * host arrays and scalars (the pending run keeps no pointer to it) */
    cpu_bound_arg barg = {bufs, scalars, NULL, on_device};
    e->run.bounds = (core_bounds){cpu_eval_bound, &barg};
    int rc = gpu_execute(gpu, p, bufs, on_device, scalars, expr_opt(e, RED_OPT_STRATEGY), hook, &e->run, &e->temps,
                         &e->diag);
    e->run.bounds = (core_bounds){0};   /* both point into this frame */
    e->run.cancel = NULL;
    e->results_on_device = rc ? RED_RESULTS_HOST : e->run.device_results;
    e->timings.compile_ms = e->run.compile_ms;
    return rc;
}

RED_API int red_run(red_expr *e)
{
    if (!e) return RED_ERR_ARG;
    if (e->ctx->comm || e->ctx->nccl) return expr_run_split(e);
    double t0 = expr_now_ms();
    memset(&e->timings, 0, sizeof e->timings);
    expr_start(e);
    gpu_dev *gpu;
    int rc = expr_backend(e, &gpu);
    plan *p = NULL;
    double tp = expr_now_ms();
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
    if (!was_cached) e->timings.plan_ms = expr_now_ms() - tp;
    /* the inputs' descriptors: on the stack for up to 8 arrays and scalars */
    core_buf bufs_stack[8];
    plan_value scalars_stack[8];
    int on_device_stack[8];
    int small = p->nbufs <= 8 && p->nscalars <= 8;
    core_buf *bufs = small ? bufs_stack : calloc((size_t)p->nbufs + 1, sizeof *bufs);
    plan_value *scalars = small ? scalars_stack : calloc((size_t)p->nscalars + 1, sizeof *scalars);
    int *on_device = small ? on_device_stack : calloc((size_t)p->nbufs + 1, sizeof *on_device);
    core_cancel cancel = {&e->ctx->interrupts, __atomic_load_n(&e->ctx->interrupts, __ATOMIC_RELAXED)};
    rc = bufs && scalars && on_device ? expr_inputs(e, p, bufs, scalars, on_device) : expr_fail(e, RED_ERR_NOMEM);
    if (!rc) {
        e->gpu = gpu;
        /* (a run queued behind the last one keeps its plan) */
        const plan *rp = chained ? p : expr_unrolled(e, e->run_pe, p, bufs, scalars, on_device);
        if (gpu) {
            rc = expr_gpu_run(e, gpu, rp, bufs, on_device, scalars, &cancel, NULL, chained);
        } else {
            double tc = expr_now_ms();
            rc = cpu_execute(rp, bufs, scalars, expr_opt(e, RED_OPT_THREADS), &cancel, &e->temps, &e->diag);
            e->timings.cpu_ms = expr_now_ms() - tc;
        }
        if (rc) expr_fail(e, rc);
    }
    if (!small) {
        free(on_device);
        free(bufs);
        free(scalars);
    }
    e->timings.total_ms = expr_now_ms() - t0;
    if (rc) {
        core_results_trim(&e->temps);
        return rc;
    }
    return expr_take_results(e, p);
}

RED_API int red_sync(red_expr *e)
{
    if (!e) return RED_ERR_ARG;
    expr_start(e);
    if (!e->gpu || !e->run.pending) return RED_OK;
    int rc = gpu_finish(e->gpu, &e->run, &e->diag);
    if (rc) {
        expr_clear_results(e);   /* a fault on the device: no results */
        return expr_fail(e, rc);
    }
    return RED_OK;
}

RED_API int red_expr_set_stream(red_expr *e, void *cuda_stream)
{
    if (!e) return RED_ERR_ARG;
    int rc = red_sync(e);   /* the work queued on the old stream: its fault is this call's */
    e->stream = cuda_stream;
    return rc;
}

/* ---- GPU compilation ---------------------------------------------------------------------- */

RED_API int red_precompile(red_expr *e, const char *arch)
{
    if (!e) return RED_ERR_ARG;
    expr_start(e);
    plan *p;
    int rc = expr_plan(e, &p);
    /* with split arrays and a communicator, the plan each rank runs */
    if (!rc) rc = expr_split_plan(e, p, &p);
    if (rc) return rc;
    gpu_limits lim = expr_gpu_limits(e);
    rc = gpu_compile_only(p, arch && *arch ? arch : "sm_90", &lim, &e->diag);
    /* and the plan the bound sizes run, where it is another (core/unroll.h) */
    const plan *rp = rc || e->ctx->comm || e->ctx->nccl ? p : expr_run_plan(e, p);
    if (!rc && rp != p) rc = gpu_compile_only(rp, arch && *arch ? arch : "sm_90", &lim, &e->diag);
    return rc ? expr_fail(e, rc) : RED_OK;
}
