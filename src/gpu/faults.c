/*
 * faults.c -- a GPU backend's failures as the caller sees them: a failed driver call as a
 * status and message, a device fault record turned into a message that points at the
 * expression, and the test hook that makes NVRTC, module loads, allocations and launches
 * fail on demand (gpu_inject_fault, gpu.h).
 */
#include <stddef.h>

#include "gpu_internal.h"

static int fault_countdown[GPU_NFAULTS];

void gpu_inject_fault(int kind, int nth)
{
    if (kind >= 0 && kind < GPU_NFAULTS) __atomic_store_n(&fault_countdown[kind], nth, __ATOMIC_RELAXED);
}

/* 1 when this call of `kind` is the one to fail. */
int gpu_fault_now(int kind)
{
    int c = __atomic_load_n(&fault_countdown[kind], __ATOMIC_RELAXED);
    while (c > 0)
        if (__atomic_compare_exchange_n(&fault_countdown[kind], &c, c - 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return c == 1;
    return 0;
}


static const ir *find_node(const ir *x, int id)
{
    if (!x) return NULL;
    if (x->id == id) return x;
    for (int i = 0; i < x->nargs; i++) {
        const ir *f = find_node(x->args[i], id);
        if (f) return f;
    }
    return NULL;
}

static const ir *plan_node(const plan *p, int id)
{
    for (int i = 0; i < p->npasses; i++) {
        const plan_pass *ps = &p->passes[i];
        const ir *f = find_node(ps->map, id);
        if (!f) f = find_node(ps->key, id);
        for (int q = 0; q < ps->nreds && !f; q++)
            for (int c = 0; c < ps->reds[q].ncomp && !f; c++) f = find_node(ps->reds[q].map[c], id);
        for (int d = 0; d < ps->nred && !f; d++) {
            f = find_node(p->vars[ps->red[d]].lo, id);
            if (!f) f = find_node(p->vars[ps->red[d]].hi, id);
        }
        if (f) return f;
    }
    return NULL;
}

int gpu_report_device_fault(run_ctx *r, const unsigned long long err[4], const core_buf *bufs)
{
    const plan *p = r->p;
    if ((int)err[0] == RED_ERR_EMPTY) {
        int pi = (int)(err[1] >> 16), q = (int)(err[1] & 0xffff);
        util_pos pos = {0, 0};
        const char *what = "argmin/argmax", *nan = "";
        if (pi < p->npasses && q < p->passes[pi].nreds) {
            pos = p->passes[pi].reds[q].pos;
            what = plan_red_name(&p->passes[pi].reds[q]);
            if (p->passes[pi].reds[q].skipnan) nan = " (or of NaN only)";
        }
        return util_diag_at(r->diag, p->src, pos, RED_ERR_EMPTY, "%s of an empty set%s: there is no index to return",
                            what, nan);
    }
    if ((int)err[0] == RED_ERR_LIMIT && err[2] == ~0ull)   /* out_range: the product of the extents */
        return util_diag_set(r->diag, RED_ERR_LIMIT, "reduction domain too large: an output's ranges span more "
                             "than 2^40 elements together");
    if ((int)err[0] == RED_ERR_LIMIT)
        return util_diag_set(r->diag, RED_ERR_LIMIT, "reduction domain too large: a range of index values has more "
                             "than 2^40 elements (upper bound %lld)", (long long)err[3]);
    if ((int)err[0] == RED_ERR_SHAPE) {   /* out_range: ranged rows that do not tile a scan's result */
        int pi = (int)(err[1] & 0xffff);
        if (pi < p->npasses && plan_scan_ranged(p, &p->passes[pi])) {
            int64_t K = 0;   /* the result's length, as the run found it */
            if (bufs) core_infer_extent(p, p->passes[pi].red[0], bufs, &K, r->diag);
            return core_scan_tile_error(p, pi, (int)(err[1] >> 16), (int64_t)err[2], (int64_t)err[3], K, r->diag);
        }
        return util_diag_set(r->diag, RED_ERR_SHAPE, "a scan's ranges do not cover its result one after another");
    }
    const ir *node = plan_node(p, (int)err[1]);
    if (!node || node->kind != IR_LOAD)
        return util_diag_set(r->diag, RED_ERR_INDEX, "a subscript is out of range (value %lld)", (long long)err[3]);
    int dim = (int)err[2];
    long long shape = 0;
    const char *name = "(intermediate)";
    if (node->slot >= 0 && bufs) {
        name = bufs[node->slot].name;
        shape = bufs[node->slot].shape[dim];
    }
    return util_diag_at(r->diag, p->src, node->pos, RED_ERR_INDEX, "subscript %d of '%s' is %lld, outside 0..%lld",
                        dim, name, (long long)err[3], shape);
}

/* A driver call that failed, as a redjit status (out of memory is RED_ERR_NOMEM) with the
 * driver's name for the error. */
int gpu_cu_fail(gpu_dev *g, CUresult r, const char *what, util_diag *diag)
{
    const char *name = NULL;
    if (g && g->cu.GetErrorName) g->cu.GetErrorName(r, &name);
    int code = r == CUDA_ERROR_OUT_OF_MEMORY ? RED_ERR_NOMEM : RED_ERR_DEVICE;
    return util_diag_set(diag, code, "CUDA driver call %s failed: %s (%d)", what, name ? name : "unknown error", r);
}
