/*
 * results.c -- the results of a run: access, conversion to numbers, copies into the
 * caller's arrays, detaching, the explained plan, and the one-call red_eval and
 * red_eval_f64 on top of prepare, bind and run.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "codegen/cuda.h"
#include "core/dtype.h"
#include "cpu/exec.h"

/* ---- results --------------------------------------------------------------------------- */

RED_API int red_result_count(red_expr *e) { return e ? e->nresults : 0; }

int expr_result_index(red_expr *e, int i)
{
    if (e->nresults == 0)
        return expr_failf(e, RED_ERR_ARG, "no result %d: the expression has no results (it has not run, or its "
                          "last run failed)", i);
    if (i < 0 || i >= e->nresults)
        return expr_failf(e, RED_ERR_ARG, "no result %d: the last run gave %d result%s (0 to %d)", i, e->nresults,
                          e->nresults == 1 ? "" : "s", e->nresults - 1);
    return 0;
}

RED_API int red_result(red_expr *e, int i, red_array *out, const char **name)
{
    if (!e) return RED_ERR_ARG;
    int rc = red_sync(e);   /* starts the call */
    if (rc) return rc;
    if (!out) return expr_failf(e, RED_ERR_ARG, "red_result: `out` is NULL");
    if ((rc = expr_result_index(e, i))) return rc;
    /* only red_eval takes a result's buffer, and it never reads the result again */
    if (e->detached[i]) return expr_failf(e, RED_ERR_MISUSE, "result %d was handed over to the caller", i);
    const plan_result *pr = &e->run_pe->plan->results[i];
    const core_buf *t = &e->temps.t[pr->temp];
    memset(out, 0, sizeof *out);
    out->data = (void *)t->data;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    out->memory = expr_temp_on_device(e, pr->temp) ? RED_MEM_CUDA : RED_MEM_HOST;
    if (out->memory == RED_MEM_CUDA) {   /* the GPU the context runs on (not always 0) */
        CUcontext cuctx;
        gpu_driver(e->gpu, &cuctx, &out->device_id);
    }
    for (int d = 0; d < t->ndim; d++) {
        out->shape[d] = t->shape[d];
        out->strides[d] = t->strides[d];
    }
    if (pr->cplx) {
        /* complex: the temporary holds the parts, [..., 2] contiguous */
        out->dtype = t->dtype == RED_F32 ? RED_C64 : RED_C128;
        out->ndim--;
        for (int d = 0; d < out->ndim; d++) out->strides[d] /= 2;
        out->shape[out->ndim] = out->strides[out->ndim] = 0;
    }
    if (name) *name = pr->name;
    return RED_OK;
}

/* Result i as one value of its compute type, for red_result_f64 and red_result_i64, whose
 * `out` must not be NULL. */
static int scalar_result(red_expr *e, int i, const void *out, plan_value *v, int *ct)
{
    if (e && !out) {
        expr_start(e);
        return expr_failf(e, RED_ERR_ARG, "result %d: `out` is NULL", i);
    }
    red_array a;
    int rc = red_result(e, i, &a, NULL);
    if (rc) return rc;
    if (red_array_size(&a) != 1) {
        util_diag_set(&e->diag, RED_ERR_ARG, "result %d is an array of %lld elements, not a scalar", i,
                      (long long)red_array_size(&a));
        return expr_fail(e, RED_ERR_ARG);
    }
    if (a.dtype == RED_C64 || a.dtype == RED_C128) {
        util_diag_set(&e->diag, RED_ERR_ARG, "result %d is a complex number: read it with red_result", i);
        return expr_fail(e, RED_ERR_ARG);
    }
    unsigned char host[8];
    const void *src = a.data;
    if (a.memory == RED_MEM_CUDA) {
        rc = gpu_copy(e->gpu, host, 0, a.data, 1, red_dtype_size(a.dtype), &e->diag);
        if (rc) return expr_fail(e, rc);
        src = host;
    }
    *v = core_read_dtype(a.dtype, src);
    *ct = plan_ct_of_dtype(a.dtype);
    return 0;
}

RED_API int red_result_f64(red_expr *e, int i, double *out)
{
    plan_value v = {0};
    int ct = 0;
    int rc = scalar_result(e, i, out, &v, &ct);
    if (rc) return rc;
    if (CT_IS_FLOAT(ct)) *out = v.f;
    else if (ct == CT_U32 || ct == CT_U64) *out = (double)v.u;
    else *out = (double)v.i;
    return RED_OK;
}

RED_API int red_result_i64(red_expr *e, int i, int64_t *out)
{
    plan_value v = {0};
    int ct = 0;
    int rc = scalar_result(e, i, out, &v, &ct);
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

static int is_cplx(red_dtype t) { return t == RED_C64 || t == RED_C128; }

/* A complex array into a complex one (c64 and c128 either way), same shape. */
static int copy_cplx(const red_array *src, const red_array *dst)
{
    int64_t n = red_array_size(src), idx[RED_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t so = 0, doff = 0;
        for (int d = 0; d < src->ndim; d++) {
            so += idx[d] * src->strides[d];
            doff += idx[d] * dst->strides[d];
        }
        double z[2];
        for (int q = 0; q < 2; q++)
            z[q] = src->dtype == RED_C64 ? ((const float *)src->data)[2 * so + q] : ((const double *)src->data)[2 * so + q];
        for (int q = 0; q < 2; q++) {
            if (dst->dtype == RED_C64) ((float *)dst->data)[2 * doff + q] = (float)z[q];
            else ((double *)dst->data)[2 * doff + q] = z[q];
        }
        for (int d = src->ndim - 1; d >= 0; d--) {
            if (++idx[d] < src->shape[d]) break;
            idx[d] = 0;
        }
    }
    return 0;
}

/* Copy a host array into another of the same shape, converting dtypes. */
static int copy_array(const red_array *src, const red_array *dst)
{
    if (is_cplx(src->dtype)) return copy_cplx(src, dst);
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
        if ((int)dsz < plan_ct_size(dct) && dct == CT_I32) {
            /* 8 and 16 bits: as the language's casts, floats saturate, integers wrap */
            int32_t x;
            memcpy(&x, out, 4);
            if (sct == CT_F32 || sct == CT_F64) x = core_saturate_small(dst->dtype, sct == CT_F32 ? (float)v.f : v.f);
            core_store_small(dst->dtype, dp, x);
        } else if (dst->dtype == RED_F16 || dst->dtype == RED_BF16) {
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
    if (e && !dst) {
        expr_start(e);
        return expr_failf(e, RED_ERR_ARG, "red_result_copy: `dst` is NULL");
    }
    int rc = red_result(e, i, &src, NULL);
    if (rc) return rc;
    if (dst->ndim != src.ndim) {
        util_diag_set(&e->diag, RED_ERR_BIND, "result %d has %d dimension%s; the destination has %d", i,
                      src.ndim, src.ndim == 1 ? "" : "s", dst->ndim);
        return expr_fail(e, RED_ERR_BIND);
    }
    if (red_dtype_size(dst->dtype) == 0) {
        util_diag_set(&e->diag, RED_ERR_BIND, "result %d: the destination's dtype %d is unknown", i, (int)dst->dtype);
        return expr_fail(e, RED_ERR_BIND);
    }
    if (is_cplx(src.dtype) != is_cplx(dst->dtype)) {
        util_diag_set(&e->diag, RED_ERR_BIND, "result %d is %s; the destination is %s: a copy keeps complex "
                      "numbers complex (take real(z) or abs(z) in the expression for a real result)",
                      i, red_dtype_name(src.dtype), red_dtype_name(dst->dtype));
        return expr_fail(e, RED_ERR_BIND);
    }
    /* (RED_MEM_CUDA goes on to the device copy below; it was refused here by mistake) */
    if (dst->memory != 0 && dst->memory != RED_MEM_HOST && dst->memory != RED_MEM_CUDA) {
        util_diag_set(&e->diag, RED_ERR_BIND, "result %d: the destination's memory kind %d is unknown", i,
                      (int)dst->memory);
        return expr_fail(e, RED_ERR_BIND);
    }
    for (int d = 0; d < src.ndim; d++)
        if (dst->shape[d] != src.shape[d]) {
            util_diag_set(&e->diag, RED_ERR_BIND,
                          "result %d has extent %lld along dimension %d; the destination has %lld", i,
                          (long long)src.shape[d], d, (long long)dst->shape[d]);
            return expr_fail(e, RED_ERR_BIND);
        }
    if (!dst->data && red_array_size(&src) > 0) {
        util_diag_set(&e->diag, RED_ERR_BIND, "result %d: the destination's data pointer is NULL", i);
        return expr_fail(e, RED_ERR_BIND);
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
            return expr_fail(e, RED_ERR_UNSUPPORTED);
        }
        int rc2 = gpu_copy(e->gpu, dst->data, 1, src.data, src.memory == RED_MEM_CUDA, bytes, &e->diag);
        return rc2 ? expr_fail(e, rc2) : RED_OK;
    }
    if (src.memory == RED_MEM_CUDA) {
        void *h = malloc(bytes ? bytes : 1);
        if (!h) return expr_fail(e, RED_ERR_NOMEM);
        int rc2 = gpu_copy(e->gpu, h, 0, src.data, 1, bytes, &e->diag);
        if (!rc2) {
            red_array hs = src;
            hs.data = h;
            hs.memory = RED_MEM_HOST;
            copy_array(&hs, dst);
        }
        free(h);
        return rc2 ? expr_fail(e, rc2) : RED_OK;
    }
    return copy_array(&src, dst);
}

/* Result `i` in memory the caller owns: a copy, or with `take` the buffer
 * itself when no other result shares its temporary (host memory from
 * malloc, device memory from the pool: what red_free and red_device_free
 * take), after which the result reads RED_ERR_MISUSE.  red_eval and
 * red_result_take take, as nothing reads those results again;
 * red_result_detach copies, since a caller may still read the result (the
 * REPL shows what it stored). */
static int expr_result_detach(red_expr *e, int i, red_array *out, int take)
{
    red_array src;
    if (e && !out) {
        expr_start(e);
        return expr_failf(e, RED_ERR_ARG, "red_result_detach: `out` is NULL");
    }
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
            return expr_fail(e, rc);
        }
        *out = src;
        out->data = d;
        return RED_OK;
    }
    void *h = malloc(bytes ? bytes : 1);
    if (!h) return expr_fail(e, RED_ERR_NOMEM);
    memcpy(h, src.data, bytes);
    *out = src;
    out->data = h;
    return RED_OK;
}

RED_API int red_result_detach(red_expr *e, int i, red_array *out) { return expr_result_detach(e, i, out, 0); }

RED_API int red_result_take(red_expr *e, int i, red_array *out) { return expr_result_detach(e, i, out, 1); }

RED_API int red_explain_ex(red_expr *e, int what, const char **text)
{
    if (!e) return RED_ERR_ARG;
    expr_start(e);
    if (!text) return expr_failf(e, RED_ERR_ARG, "red_explain: `text` is NULL");
    if (what < RED_EXPLAIN_PLAN || what > RED_EXPLAIN_CUDA_ON_GPU)
        return expr_failf(e, RED_ERR_ARG, "red_explain_ex: %d is not one of RED_EXPLAIN_*", what);
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
    /* the plan the bound arrays' sizes run, where it is another */
    const plan *rp = expr_run_plan(e, p);
    if (rp != p) {
        util_buf_printf(&e->explain, "as run with these sizes: a sum or product over a few elements is written "
                                     "out where the next pass reads it (%d pass%s):\n",
                        rp->npasses, rp->npasses == 1 ? "" : "es");
        plan_explain(&e->explain, rp);
    }
    if (what == RED_EXPLAIN_CUDA || (what == RED_EXPLAIN_CUDA_ON_GPU && gpu)) {
        util_buf_puts(&e->explain, "generated CUDA (helpers from src/codegen/device elided):\n");
        rc = cg_explain(rp, cg_tuning_get(), &e->explain, &e->diag);
        if (rc) return expr_fail(e, rc);
    }
    if (e->explain.failed) return expr_fail(e, RED_ERR_NOMEM);
    *text = util_buf_str(&e->explain);
    return RED_OK;
}

RED_API int red_explain(red_expr *e, const char **text) { return red_explain_ex(e, RED_EXPLAIN_CUDA, text); }

/* ---- one call ------------------------------------------------------------------------- */

RED_API int red_eval(red_ctx *ctx, const char *text, const red_binding *binds, int nbinds,
                     red_array *results, int nresults, int *count)
{
    if (!ctx) return RED_ERR_ARG;
    if (!text) return ctx_fail(ctx, RED_ERR_ARG, "red_eval: the text is NULL");
    if (nbinds < 0 || (nbinds > 0 && !binds))
        return ctx_fail(ctx, RED_ERR_ARG, "red_eval: %d bindings at %s", nbinds, binds ? "an address" : "NULL");
    if (nresults < 0 || (nresults > 0 && !results))
        return ctx_fail(ctx, RED_ERR_ARG, "red_eval: room for %d results at %s", nresults, results ? "an address" : "NULL");
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
        if (!mine) rc = ctx_fail(ctx, RED_ERR_NOMEM, "out of memory");
        for (int i = 0; i < n && !rc; i++) {
            if (results[i].data) {
                rc = red_result_copy(&e, i, &results[i]);
            } else {
                rc = expr_result_detach(&e, i, &results[i], 1);
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
    if (!v) return ctx_fail(ctx, RED_ERR_ARG, "red_eval_f64: `v` is NULL");
    double x = 0;
    red_array r;
    red_array_init(&r, &x, RED_F64, 0, NULL, NULL);
    int count = 0;
    int rc = red_eval(ctx, text, binds, nbinds, &r, 1, &count);
    /* one result or an error: the first of several is not silently the answer */
    if (!rc && count != 1)
        return ctx_fail(ctx, RED_ERR_ARG, "red_eval_f64: the expression has %d results; it takes one (use red_eval "
                        "for several)", count);
    if (!rc) *v = x;
    return rc;
}
