/*
 * strategy.c -- the pure decisions of the GPU backend: which segment kernel, whether a
 * pass's loads allow 16-byte vectors or read a column layout, the hash that says whether a
 * pass's arrays changed.  No driver calls, so tests check them without a GPU (test_segplan).
 */
#include "gpu_internal.h"
#include "kcache.h"
#include "tuning.h"

/* Whether a pass can take its 16-byte-load kernels (cuda.c, acc_elem_v:
 * rj_persistv, rj_seg1v, rj_seg32v): in every array it loads, the reduced
 * indices' dimensions make one contiguous run (the last of stride 1, each
 * other the stride of the run inside it; a dimension the domain holds at
 * one value has any stride), so that the domain's flat position is an
 * element offset; every other dimension has a stride of a multiple of 16
 * bytes (or one element), and the first element of the domain sits on 16
 * bytes, so that every vector of every output does.  A matrix's sum(A)
 * then reads it as one range, with no division per element. */
int gpu_vec_ok(const run_ctx *r, const pass_entry *e)
{
    const cg_kernel *k = &e->k;
    const long long *P = r->params;
    if (!k->vec || k->rvec) return 0;   /* rvec: no fixed domain (gpu_ranged_vec_ok) */
    /* vec_bc: a vector's elements all in one run of the last index */
    if (k->vec_bc && P[k->vec_sz[k->vec_nred - 1]] % k->vec) return 0;
    for (int l = 0; l < k->nvec; l++) {
        const long long *a = P + k->vec_base[l];   /* pointer, extents, strides */
        int nd = k->vec_ndim[l], rd = k->vec_rdim[l];
        unsigned long long first = 0;   /* element offset of the domain's first element */
        long long run = 1;              /* the stride the next dimension out must have */
        /* CG_V_LAST: the last reduced index alone, in dimension rd;
         * CG_V_ONE: element by element, any layout */
        int q0 = k->vec_kind[l] == CG_V_LAST ? k->vec_nred - 1 : 0;
        if (k->vec_kind[l] == CG_V_ONE) continue;
        for (int q = k->vec_nred - 1; q >= q0; q--) {
            long long sz = P[k->vec_sz[q]], stride = a[1 + nd + rd + q - q0];
            /* (the kernel adds the last one's start unscaled) */
            if ((sz != 1 || (q == k->vec_nred - 1 && P[k->vec_lo[q]])) && stride != run) return 0;
            first += (unsigned long long)P[k->vec_lo[q]] * (unsigned long long)stride;
            if (__builtin_mul_overflow(run, sz > 1 ? sz : 1, &run)) return 0;
        }
        if (((unsigned long long)a[0] + first * (unsigned long long)k->vec_esz) % 16) return 0;
        for (int d = 0; d < nd; d++)
            if ((d < rd || d >= rd + k->vec_nred - q0) && a[1 + d] > 1 &&
                ((unsigned long long)a[1 + nd + d] * (unsigned long long)k->vec_esz) % 16)   /* no signed overflow */
                return 0;
    }
    return 1;
}

/* Whether the pass reads a column layout: the fastest-varying dimension (the
 * smallest stride among extents > 1) of every load is subscripted by a free
 * index, so neighbouring outputs are neighbours in memory. */
int gpu_column_layout(const cg_kernel *k, const core_buf *bufs)
{
    if (!bufs || k->nloads == 0 || k->loads_overflow) return 0;
    for (int l = 0; l < k->nloads; l++) {
        const core_buf *b = &bufs[k->loads[l].slot];
        int best = -1;
        for (int d = 0; d < b->ndim && d < RED_MAX_DIMS; d++) {
            long long st = b->strides[d] < 0 ? -b->strides[d] : b->strides[d];
            long long bs = best < 0 ? 0 : b->strides[best] < 0 ? -b->strides[best] : b->strides[best];
            if (b->shape[d] > 1 && (best < 0 || st <= bs)) best = d;
        }
        if (best < 0 || k->loads[l].dim[best] != 1) return 0;
    }
    return 1;
}

/* The kernel for segments (see gpu.h), from the average length, as the
 * benchmark's forced strategies showed (figures in bench/TUNING.md, "GPU
 * runtime"): a thread per output up to 64 elements, else a warp on an
 * occupancy-sized grid.  Few long segments, and columns, split each
 * output's domain into chunks.  Long contiguous rows (gpu_tuning.segbv_min)
 * take a block each instead of a warp.  Staging short rows in shared memory,
 * several lanes a row, and folding rows as sorted keys are were all slower
 * than a thread a row (the same section). */
gpu_seg_choice gpu_choose_segments(long long nout, long long total, int columns, int nsm)
{
    gpu_seg_choice c = {0};
    double avg = nout > 0 ? (double)total / (double)nout : 0;
    long long threads = (long long)nsm * 2048;   /* resident on the GPU */
    if (avg >= 64 && nout >= 256 && nout < 4 * threads && columns) {
        /* columns: enough chunks for two threads per resident slot, each
         * thread at least 32 elements, at most 1024 partials an output for
         * rj_splitf's thread to fold */
        long long nc = (2 * threads + nout - 1) / nout;
        if (nc > (long long)(avg / 32)) nc = (long long)(avg / 32);
        if (nc > 1024) nc = 1024;
        if (nc >= 2) {
            c.entry = GPU_E_SPLIT1;
            c.kernel = gpu_entry_name[c.entry];
            c.group = 1;
            c.chunks = nc;
            return c;
        }
    } else if (avg >= 8192 && nout * 32 < threads) {
        /* few long segments: about 8 blocks per SM, each at least 4096
         * elements */
        long long nc = ((long long)nsm * 8 + nout - 1) / nout;
        if (nc > (long long)(avg / 4096)) nc = (long long)(avg / 4096);
        if (nc >= 2) {
            c.entry = GPU_E_SPLITB;
            c.kernel = gpu_entry_name[c.entry];
            c.group = 256;   /* BLOCK */
            c.chunks = nc;
            return c;
        }
    }
    if (avg <= 64) {
        c.entry = GPU_E_SEG1;
        c.kernel = gpu_entry_name[c.entry];
        c.group = 1;
    } else {
        c.entry = GPU_E_SEG32;
        c.kernel = gpu_entry_name[c.entry];
        c.group = 32;
        c.occupancy_grid = 1;
        c.long_rows = avg >= gpu_tuning_get()->segbv_min;
    }
    return c;
}

/* What the segment lengths of a ranged pass depend on, hashed: the inputs'
 * addresses, shapes and strides, the scalars and the number of outputs (not
 * the data: an array changed in place keeps its key, which costs speed at
 * most, since the count only chooses the kernel).  Never 0. */
uint64_t gpu_count_key(const run_ctx *r, const pass_entry *e, long long nout)
{
    const plan *p = r->p;
    uint64_t h = kc_hash(&nout, sizeof nout, 0);
    for (int i = 0; i < p->nbufs; i++) {
        const core_buf *b = &r->bufs[i];
        h = kc_hash(&b->data, sizeof b->data, h);
        h = kc_hash(&b->ndim, sizeof b->ndim, h);
        int nd = b->ndim > 0 && b->ndim <= RED_MAX_DIMS ? b->ndim : 0;
        h = kc_hash(b->shape, (size_t)nd * sizeof *b->shape, h);
        h = kc_hash(b->strides, (size_t)nd * sizeof *b->strides, h);
    }
    for (int i = 0; i < p->nscalars; i++) h = kc_hash(&r->params[e->k.lay.scalar_slot[i]], sizeof *r->params, h);
    return h | 1;
}

/* rj_seg1s's arrays (cg_kernel.rvec): one dimension of stride 1 each */
int gpu_ranged_scalar_ok(const run_ctx *r, const pass_entry *e)
{
    const cg_kernel *k = &e->k;
    const long long *P = r->params;
    for (int l = 0; l < k->nvec; l++)
        if (k->vec_ndim[l] != 1 || P[k->vec_base[l] + 2] != 1) return 0;   /* pointer, extent, stride */
    return k->nvec > 0;
}

/* rj_seg1a's: the same, each first element on 16 bytes */
int gpu_ranged_vec_ok(const run_ctx *r, const pass_entry *e)
{
    const cg_kernel *k = &e->k;
    for (int l = 0; l < k->nvec; l++)
        if ((unsigned long long)r->params[k->vec_base[l]] % 16) return 0;
    return gpu_ranged_scalar_ok(r, e);
}
