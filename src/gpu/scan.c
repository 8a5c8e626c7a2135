/*
 * scan.c -- a scan pass on the device: rj_scan (src/codegen/device/rj_scan.cuh),
 * one launch over tiles of each row, their look-back state (tiles' and groups'
 * aggregates) in a scratch buffer whose ticket and status words start at zero.
 */
#include "gpu_internal.h"

int gpu_run_scan(run_ctx *r, pass_entry *e, long long nout, long long L)
{
    gpu_dev *g = r->g;
    long long *P = r->params;
    r->pub_words = 0;   /* the results come back the plain way */
    if (nout <= 0 || L <= 0) return 0;
    long long tile = (long long)BLOCK * cg_scan_items(e->k.acc_size);
    long long T = cdiv(L, tile), nt = nout * T, ng = nout * cdiv(T, 32);
    /* a slot (rj_scan.cuh's RjSlot: Acc, a flag, 16-byte aligned) is at most this */
    long long slot = (e->k.acc_size + 8 + 15) / 16 * 16;
    long long head = (16 + 4 * (nt + ng) + 15) / 16 * 16;
    CUdeviceptr s;
    int rc = gpu_run_get(r, (size_t)(head + (nt + 2 * ng) * slot), &s, 1);
    if (rc) return rc;
    if (g->cu.MemsetD8Async(s, 0, (size_t)head, r->s))
        return util_diag_set(r->diag, RED_ERR_DEVICE, "cuMemsetD8Async failed");
    P[RJ_PARTIALS] = (long long)s;
    P[RJ_NOUT] = nout;
    P[RJ_NBLK] = T;
    /* tiles are taken from the ticket: a grid of resident blocks walks them all */
    long long grid = nt < 8LL * g->nsm ? nt : 8LL * g->nsm;
    return gpu_launch(r, e, GPU_E_SCAN, grid);
}
