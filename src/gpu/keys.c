/*
 * keys.c -- keyed passes: the key statistics read back, the keys' count, order and segment
 * starts (rj_kends, rj_koffs, rj_kscan), and sorted keys reduced in one fused pass.
 */
#include <string.h>

#include "gpu_internal.h"

/* Read the run's workspace up to the key statistics (the fault record at 0,
 * the key statistics at 64) in one round trip; a device fault is reported,
 * but with keys_flag set not when the keys' flag word (st[2]) is raised:
 * rj_kfused(v) then found the keys unsorted, and what it wrote, a fault
 * included (an argmax of a "key with no elements" between two keys out of
 * order), does not count: the record is cleared for the pass's rerun. */
static int read_ws_stats(run_ctx *r, long long st[3], int keys_flag)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    /* into the pinned staging area when there is one (it is free until the
     * run's end): a copy to pageable memory is staged by the driver */
    unsigned long long w_stack[(RJ_WS_KSTATS + RJ_WS_KSTATS_BYTES) / 8], *w = g->pinned ? (unsigned long long *)(void *)g->pinned : w_stack;
    CU(g->cu.MemcpyDtoHAsync(w, r->ws, sizeof w_stack, r->s), "cuMemcpyDtoHAsync");
    CU(g->cu.StreamSynchronize(r->s), "cuStreamSynchronize");
    memcpy(st, &w[RJ_WS_KSTATS / 8], 3 * sizeof *st);
    if (w[0] && keys_flag && st[2]) {
        CU(g->cu.MemsetD8Async(r->ws, 0, RJ_WS_ERR_BYTES, r->s), "cuMemsetD8Async");
        return 0;
    }
    return w[0] ? gpu_report_device_fault(r, w, r->bufs) : 0;
}

/* rj_koffs over N elements: a grid that fills the GPU once (it walks the keys
 * in steps of the grid; 2048 elements a block a step), or fewer blocks. */
static int key_offsets(run_ctx *r, pass_entry *e, long long N)
{
    long long grid = 1;
    int rc = gpu_occupancy_grid(r, e, GPU_E_KOFFS, &grid);
    if (rc) return rc;
    if (grid > cdiv(N, 2048)) grid = cdiv(N, 2048);
    return gpu_launch(r, e, GPU_E_KOFFS, grid);
}

/* The keys of a keyed pass over N > 0 elements: their count, whether they
 * never decrease and, if so, the segment starts (*offs, nkeys + 1 of them).
 * mode KEYS_FUSED, the default: rj_kends reads the first and the last key,
 * which give the count if the keys are sorted, and the pass then runs
 * rj_kfused, which checks that they are (*offs stays 0).  KEYS_OFFSETS, for
 * the forced strategies: rj_koffs writes the starts as well, and raises a
 * flag if the keys are not sorted.  KEYS_SCAN, or either when the first and
 * last key do not fit: rj_kscan finds the smallest and the largest key, for
 * the error messages and the private rows (unsorted keys have no offsets). */
int gpu_key_segments(run_ctx *r, pass_entry *e, const plan_pass *ps, long long N, int mode, long long *nkeys,
                        int *sorted, CUdeviceptr *offs, long long ends[2], int *flag_dirty)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    const plan *p = r->p;
    long long *params = r->params;
    long long st[3] = {0, -1, 1};
    int rc;
    *offs = 0;
    util_diag alloc = {0};
    if (mode != KEYS_SCAN) {
        /* the module rj_kfused or rj_kfusedv comes in */
        rc = gpu_launch(r, e, mode == KEYS_FUSED && gpu_vec_ok(r, e) ? GPU_E_KENDSV : GPU_E_KENDS, 1);
        if (!rc) rc = read_ws_stats(r, st, 0);
        if (rc) return rc;
        *flag_dirty = 0;   /* rj_kends cleared it */
    }
    int plausible = mode != KEYS_SCAN && st[0] >= 0 && st[1] >= st[0] && st[1] < ((long long)1 << 40);
    ends[0] = st[0];   /* sorted keys' first and last */
    ends[1] = st[1];
    if (plausible && mode == KEYS_FUSED) {
        *nkeys = st[1] + 1;
        *sorted = 1;
        return 0;
    }
    /* the offsets' allocation failing is reported only once the scan below
     * has found the keys good (bad keys get RED_ERR_KEYS, not a size) */
    if (plausible && !gpu_pool_get(g, (size_t)(st[1] + 2) * 8, offs, &alloc)) {
        gpu_defer_release(r, *offs);
        params[RJ_OFFS] = (long long)*offs;
        params[RJ_NOUT] = st[1] + 1;
        rc = key_offsets(r, e, N);
        long long chk[3];
        if (!rc) rc = read_ws_stats(r, chk, 0);
        if (rc) return rc;
        if (!chk[2]) {
            *nkeys = st[1] + 1;
            *sorted = 1;
            return 0;
        }
    }
    *offs = 0;
    /* not sorted, or a key out of range: scan them all (the flag word is
     * rj_kscan's "sorted", 1 to start with) */
    *flag_dirty = 1;
    long long init[3] = {0x7fffffffffffffffll, -1, 1};
    CU(g->cu.MemcpyHtoDAsync(r->ws + RJ_WS_KSTATS, init, RJ_WS_KSTATS_BYTES, r->s), "cuMemcpyHtoDAsync");
    rc = gpu_launch(r, e, GPU_E_KSCAN, cdiv(N, BLOCK) < 8 * g->nsm ? cdiv(N, BLOCK) : 8 * g->nsm);
    if (!rc) rc = read_ws_stats(r, st, 0);
    if (rc) return rc;
    *sorted = (int)(st[2] & 0xffffffff) != 0;
    ends[0] = st[0];   /* the smallest and the largest: sorted keys' first and last */
    ends[1] = st[1];
    if (st[0] < 0)
        return util_diag_at(diag, p->src, ps->key_pos, RED_ERR_KEYS,
                            "keys must be non-negative, but this key is %lld for some element", st[0]);
    for (int q = 0; q < ps->nreds; q++)
        if (ps->reds[q].rop == ROP_USER && ps->reds[q].ordered && !*sorted)
            return util_diag_at(diag, p->src, ps->key_pos, RED_ERR_KEYS,
                                "ordered operator '%s' needs keys in non-decreasing order, and these are not sorted",
                                ps->reds[q].uname);
    if (st[1] >= ((long long)1 << 40))
        return util_diag_at(diag, p->src, ps->key_pos, RED_ERR_LIMIT, "key %lld is too large", st[1]);
    *nkeys = st[1] + 1;
    /* sorted keys come here when their offsets did not fit, or asked to
     * (KEYS_SCAN: the rerun after a key count taken from an earlier run
     * proved wrong); then rj_kfused runs with the count found here */
    if (*sorted && alloc.code) return util_diag_set(diag, alloc.code, "%s", alloc.msg);
    if (*sorted && mode != KEYS_SCAN) return util_diag_set(diag, RED_ERR_INTERNAL, "key statistics disagree");
    return 0;
}

/* Sorted keys in one pass (rj_kfused, for accumulators of up to 32 bytes,
 * whose tiles fit in shared memory; rj_kfusedv where gpu_vec_ok): a grid that
 * fills the GPU once, each warp on a contiguous range, two items a block for
 * the last block to fold.
 * *bad: the kernel found the keys unsorted, or one outside 0..nkeys-1; with
 * bad NULL the flag (key statistics [2]) is left for the run's last read. */
int gpu_key_fused(run_ctx *r, pass_entry *e, long long N, long long nkeys, int zero_flag, int *bad)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    long long *P = r->params;
    /* the flag word is zero in a clean workspace and after rj_kends; after
     * rj_kscan (which leaves its "sorted" there) or a raised flag it is
     * cleared here */
    if (zero_flag) CU(g->cu.MemsetD8Async(r->ws + RJ_WS_KFLAG, 0, 8, r->s), "cuMemsetD8Async");
    /* contiguous arrays: 16-byte loads, each warp's range a multiple of
     * rj_kfusedv's largest tile */
    int vec = gpu_vec_ok(r, e);
    int kn = vec ? GPU_E_KFUSEDV : GPU_E_KFUSED;
    long long tile = vec ? 512 : 32;
    long long grid = 1;
    int rc = gpu_occupancy_grid(r, e, kn, &grid);
    if (rc) return rc;
    long long wpb = BLOCK / 32, nw = grid * wpb;
    if (nw > cdiv(N, 256)) nw = cdiv(N, 256);   /* at least a tile (32 RJ_KT, at most 256 elements) each */
    long long per = cdiv(cdiv(N, nw), tile) * tile;
    grid = cdiv(cdiv(N, per), wpb);
    CUdeviceptr items;
    size_t kbytes = (size_t)(2 * grid) * 8;
    rc = gpu_pool_get(g, kbytes + (size_t)(2 * grid) * (size_t)e->k.acc_size, &items, r->diag);
    if (rc) return rc;
    gpu_defer_release(r, items);
    P[RJ_N] = N;
    P[RJ_NOUT] = nkeys;
    P[RJ_PARTIALS] = (long long)(items + kbytes);
    P[RJ_PER] = per;
    P[RJ_KEYMODE] = 0;
    P[RJ_OFFS] = (long long)items;
    /* the flag read at the run's end (no bad): from the workspace this
     * kernel's last block publishes, when the run armed that */
    if (!bad) gpu_publish_arm(r);
    rc = gpu_launch(r, e, kn, grid);
    if (!bad) gpu_publish_disarm(r, rc);
    if (rc || !bad) return rc;   /* no bad: the caller reads the flag later */
    long long chk[3] = {0, 0, 0};
    rc = read_ws_stats(r, chk, 1);
    *bad = chk[2] != 0;
    return rc;
}
