/*
 * scan.c -- a scan pass on the device: rj_scan (src/codegen/device/rj_scan.cuh),
 * one launch of blocks of BLOCK data threads and a look-back warp.  Its scratch
 * (the ticket, then each tile's and each group's published fold) starts at zero.
 */
#include "gpu_internal.h"

int gpu_run_scan(run_ctx *r, pass_entry *e, long long nout, long long L, int strategy)
{
    gpu_dev *g = r->g;
    long long *P = r->params;
    r->pub_words = 0;   /* the results come back the plain way */
    if (nout <= 0 || L <= 0) return 0;
    long long tile = (long long)BLOCK * e->k.scan_items;
    long long T = cdiv(L, tile), nt = nout * T, ng = nout * cdiv(T, 32);
    /* tiles (or rows) are taken from the ticket: a grid of resident blocks walks them all */
    long long grid = 8LL * g->nsm;
    /* Two ways: a block walks whole rows tile by tile (sequential), or tiles go
     * to blocks one by one and look back for their carry (tree: the tiles'
     * folds combined in groups of 32).  Whole rows where every block gets
     * several (the tail is at most a row a block) or a row is one tile. */
    int rows = strategy == RED_STRATEGY_SEQUENTIAL ? 1
             : strategy == RED_STRATEGY_TREE       ? 0
                                                   : T == 1 || nout >= 4 * grid;
    size_t bytes = (size_t)cg_scan_scratch(&e->k, rows ? 0 : nt, rows ? 0 : ng);
    long long smem = cg_scan_smem(&e->k);
    if (smem > g->smem_optin)
        return util_diag_set(r->diag, RED_ERR_LIMIT, "scan: its state (%d bytes an element) needs %lld bytes of shared memory a block, the device has %d",
                             e->k.scan_esize, smem, g->smem_optin);
    if ((rows ? nout : nt) < grid) grid = rows ? nout : nt;
    CUdeviceptr s;
    int rc = gpu_run_get(r, bytes, &s, 1);
    if (rc) return rc;
    if (g->cu.MemsetD8Async(s, 0, bytes, r->s)) return util_diag_set(r->diag, RED_ERR_DEVICE, "cuMemsetD8Async failed");
    P[RJ_PARTIALS] = (long long)s;
    P[RJ_NOUT] = nout;
    P[RJ_NBLK] = T;
    P[RJ_PER] = rows;
    return gpu_launch_block(r, e, GPU_E_SCAN, grid, (int)smem, BLOCK + 32);
}
