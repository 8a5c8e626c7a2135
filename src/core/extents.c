/*
 * extents.c -- the per-run resolution of index ranges (extents.h), shared by
 * the CPU executor and the GPU runtime.
 */
#include "core/extents.h"

#include <stdio.h>
#include <string.h>

static int ext_mul_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }

static int depends_on_vars(const ir *x)
{
    if (!x) return 0;
    if (x->kind == IR_INDEX) return 1;
    for (int i = 0; i < x->nargs; i++)
        if (depends_on_vars(x->args[i])) return 1;
    return 0;
}

static int eval_bounds(const plan *p, const plan_var *pv, const core_bounds *b, int64_t *lo, int64_t *hi,
                       util_diag *diag)
{
    if (!b || !b->eval)
        return util_diag_at(diag, p->src, pv->pos, RED_ERR_UNSUPPORTED,
                            "the range of '%s' cannot be evaluated by this backend", pv->name);
    int rc = b->eval(b->arg, p, pv->lo, lo, diag);
    if (!rc) rc = b->eval(b->arg, p, pv->hi, hi, diag);
    return rc;
}

/* The largest extent an explicitly ranged free index may reach: 2^24, or the element count
 * of the largest bound array when that is larger. */
static int64_t padding_cap(const plan *p, const core_buf *bufs)
{
    int64_t cap = (int64_t)1 << 24;
    for (int i = 0; i < p->nbufs; i++) {
        int64_t n = 1;
        for (int d = 0; d < bufs[i].ndim && n >= 0; d++)
            if (__builtin_mul_overflow(n, bufs[i].shape[d], &n)) n = -1;
        if (n < 0) return INT64_MAX;   /* an array past 2^63 elements: no smaller cap applies */
        if (n > cap) cap = n;
    }
    return cap;
}

/* A free variable's range, the first pass that has it. */
static int resolve_free(const plan *p, int var, const core_buf *bufs, const core_bounds *b, core_vars *v,
                        util_diag *diag)
{
    const plan_var *pv = &p->vars[var];
    if (pv->key_pass >= 0) return util_diag_set(diag, RED_ERR_INTERNAL, "key count used before it is known");
    if (!pv->lo) {
        v->lo[var] = 0;
        return core_infer_extent(p, var, bufs, &v->hi[var], diag);
    }
    if (depends_on_vars(pv->lo) || depends_on_vars(pv->hi))
        return util_diag_at(diag, p->src, pv->pos, RED_ERR_UNSUPPORTED,
                            "a reduction nested inside the ranged index '%s' whose range depends on "
                            "another index is not supported",
                            pv->name);
    int rc = eval_bounds(p, pv, b, &v->lo[var], &v->hi[var], diag);
    if (rc) return rc;
    if (v->hi[var] < v->lo[var]) v->hi[var] = v->lo[var];
    if (v->lo[var] < 0)
        return util_diag_at(diag, p->src, pv->pos, RED_ERR_INDEX,
                            "index '%s' starts at %lld: a nested result cannot have negative indices",
                            pv->name, (long long)v->lo[var]);
    /* A nested result is stored from index 0 up (the positions below lo are padding that
     * nothing reads), so its size follows hi, not hi - lo.  hi is held to what the
     * bindings justify, so that a short text cannot make a run allocate gigabytes. */
    int64_t cap = padding_cap(p, bufs);
    if (v->hi[var] > cap)
        return util_diag_at(diag, p->src, pv->pos, RED_ERR_LIMIT,
                            "index '%s' runs to %lld: a result along it is stored from index 0, and "
                            "%lld elements is more than the %lld allowed (2^24, or the size of the "
                            "largest bound array)",
                            pv->name, (long long)v->hi[var], (long long)v->hi[var], (long long)cap);
    return 0;
}

/* A reduced variable's uniform range, or *ranged when it differs per output
 * (or the backend evaluates explicit ranges itself). */
static int resolve_reduced(const plan *p, int var, const core_buf *bufs, const core_bounds *b, int flags,
                           core_vars *v, int64_t *lo, int64_t *sz, int *ranged, util_diag *diag)
{
    const plan_var *pv = &p->vars[var];
    *lo = 0;
    *sz = 0;
    if (pv->lo) {
        if (!(flags & CORE_EVAL_UNIFORM_RANGES) || depends_on_vars(pv->lo) || depends_on_vars(pv->hi)) {
            *ranged = 1;
            return 0;
        }
        int64_t hi;
        int rc = eval_bounds(p, pv, b, lo, &hi, diag);
        if (rc) return rc;
        if (hi > *lo && __builtin_sub_overflow(hi, *lo, sz))
            return util_diag_at(diag, p->src, pv->pos, RED_ERR_LIMIT,
                                "the range of '%s' is too large (more than 2^63 elements)", pv->name);
    } else if (pv->key_pass >= 0) {
        /* the keys of an earlier keyed pass: their count is known now */
        if (!v->done[var]) return util_diag_set(diag, RED_ERR_INTERNAL, "key count used before it is known");
        *sz = v->hi[var];
    } else {
        int rc = core_infer_extent(p, var, bufs, sz, diag);
        if (rc) return rc;
    }
    v->lo[var] = *lo;
    v->hi[var] = *lo + *sz;
    return 0;
}

int core_resolve_pass(const plan *p, int pass, const core_buf *bufs, const core_bounds *bounds, int flags,
                      core_vars *v, core_domain *dom, util_diag *diag)
{
    const plan_pass *ps = &p->passes[pass];
    int rc = 0;
    memset(dom, 0, sizeof *dom);
    dom->nf = ps->nfree;
    dom->nout = 1;
    for (int d = 0; d < ps->nfree; d++) {
        int var = ps->free[d];
        if (!v->done[var]) {
            rc = resolve_free(p, var, bufs, bounds, v, diag);
            if (rc) return rc;
            v->done[var] = 1;
        }
        dom->fvar[d] = var;
        dom->flo[d] = v->lo[var];
        dom->fext[d] = v->hi[var] - v->lo[var];
        if (!ext_mul_ok(dom->nout, dom->fext[d], &dom->nout))
            return util_diag_set(diag, RED_ERR_LIMIT, "result too large (more than 2^63 elements)");
    }
    dom->nr = ps->nred;
    dom->L = 1;
    for (int d = 0; d < ps->nred; d++) {
        int var = ps->red[d], ranged = 0;
        dom->rvar[d] = var;
        rc = resolve_reduced(p, var, bufs, bounds, flags, v, &dom->rlo[d], &dom->rsz[d], &ranged, diag);
        if (rc) return rc;
        if (ranged) {
            dom->ranged = 1;
            if (plan_scan_ranged(p, ps)) {
                /* its result: k over the arrays' length, which the rows tile */
                int64_t K;
                rc = core_infer_extent(p, var, bufs, &K, diag);
                if (rc) return rc;
                v->lo[var] = 0;
                v->hi[var] = K;
                v->done[var] = 1;
            }
            continue;
        }
        if (!ext_mul_ok(dom->L, dom->rsz[d], &dom->L))
            return util_diag_set(diag, RED_ERR_LIMIT, "reduction domain too large (more than 2^63 elements)");
        if (ps->scan) {   /* a scan's results are indexed by its scanned indices too */
            v->lo[var] = dom->rlo[d];
            v->hi[var] = dom->rlo[d] + dom->rsz[d];
            v->done[var] = 1;
        }
    }
    if (!ext_mul_ok(dom->nout, dom->L, &dom->N))
        return util_diag_set(diag, RED_ERR_LIMIT, "reduction domain too large (more than 2^63 elements)");
    if (plan_scan_ranged(p, ps) && dom->nout == 0 && v->hi[ps->red[0]] > 0)   /* no rows to cover it */
        return core_scan_tile_error(p, pass, CORE_TILE_END, -1, 0, v->hi[ps->red[0]], diag);
    if (dom->N > CORE_MAX_DOMAIN)
        return util_diag_set(diag, RED_ERR_LIMIT, "reduction domain too large: %lld elements (at most 2^40)",
                             (long long)dom->N);
    return 0;
}

void core_set_key_count(const plan *p, int pass, core_vars *v, int64_t nkeys)
{
    int var = p->passes[pass].key_var;
    v->lo[var] = 0;
    v->hi[var] = nkeys;
    v->done[var] = 1;
}

int core_temp_shape(const plan *p, int t, const core_vars *v, core_buf *out, size_t *bytes, util_diag *diag)
{
    const plan_temp *pt = &p->temps[t];
    out->dtype = plan_dtype_of_ct(pt->type);
    out->ndim = pt->ndim;
    out->name = "";
    int64_t n = 1;
    for (int d = pt->ndim - 1; d >= 0; d--) {
        out->shape[d] = v->hi[pt->dims[d]];
        out->strides[d] = n;
        if (!ext_mul_ok(n, out->shape[d] > 0 ? out->shape[d] : 1, &n) || n > CORE_MAX_DOMAIN)
            return util_diag_set(diag, RED_ERR_LIMIT, "an intermediate result would be too large");
    }
    *bytes = (size_t)n * (size_t)plan_ct_size(pt->type);
    return 0;
}

int core_infer_extent(const plan *p, int var, const core_buf *bufs, int64_t *ext, util_diag *diag)
{
    const plan_var *pv = &p->vars[var];
    int64_t e = INT64_MAX;
    const plan_constraint *plain = NULL;
    for (int i = 0; i < pv->nconstraints; i++) {
        const plan_constraint *k = &pv->constraints[i];
        const core_buf *b = &bufs[k->buf];
        int64_t sh = b->shape[k->dim];
        if (k->offset == 0) {
            if (plain && bufs[plain->buf].shape[plain->dim] != sh) {
                const core_buf *b0 = &bufs[plain->buf];
                const char *name = p->vars[k->var].name;   /* as the subscript wrote it */
                if (name[0] == '_')
                    return util_diag_at(diag, p->src, k->pos, RED_ERR_SHAPE,
                                        "whole arrays '%s' and '%s' differ along dimension %d "
                                        "(%lld and %lld elements): they must have the same shape",
                                        b0->name, b->name, k->dim, (long long)b0->shape[plain->dim],
                                        (long long)sh);
                return util_diag_at(diag, p->src, k->pos, RED_ERR_SHAPE,
                                    "index '%s' has conflicting extents: '%s' has %lld elements "
                                    "along dimension %d but '%s' has %lld along dimension %d",
                                    name, b0->name, (long long)b0->shape[plain->dim],
                                    plain->dim, b->name, (long long)sh, k->dim);
            }
            plain = k;
        }
        int64_t lim = sh - k->offset;
        if (lim < e) e = lim;
    }
    if (e < 0) e = 0;
    *ext = e;
    return 0;
}

int core_scan_tile_error(const plan *p, int pass, int what, int64_t row, int64_t value, int64_t K, util_diag *diag)
{
    const plan_var *pv = &p->vars[p->passes[pass].red[0]];
    char why[96];
    if (what == CORE_TILE_START)
        snprintf(why, sizeof why, "the first range starts at %lld", (long long)value);
    else if (what == CORE_TILE_BACK)
        snprintf(why, sizeof why, "range %lld ends at %lld, before it starts", (long long)row, (long long)value);
    else
        snprintf(why, sizeof why, "the last range ends at %lld", (long long)value);
    return util_diag_at(diag, p->src, pv->pos, RED_ERR_SHAPE,
                        "a scan over ranged rows writes each row's results at its range, so the ranges of '%s' must "
                        "cover 0..%lld (the length of the arrays '%s' subscripts) one after another: %s",
                        pv->name, (long long)K, pv->name, why);
}
