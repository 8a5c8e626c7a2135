/*
 * scan.c -- a scan pass on the device: rj_scan (src/codegen/device/rj_scan.cuh),
 * one launch of blocks of BLOCK data threads and a look-back warp.  Its scratch
 * (the ticket, then each tile's and each group's published fold) starts at zero.
 */
#include "gpu_internal.h"
#include "tuning.h"

int gpu_run_scan(run_ctx *r, pass_entry *e, long long nout, long long L, int strategy)
{
    gpu_dev *g = r->g;
    long long *P = r->params;
    int rc;
    r->pub_words = 0;   /* the results come back the plain way */
    if (nout <= 0 || L <= 0) return 0;
    long long tile = (long long)BLOCK * e->k.scan_items;
    long long T = cdiv(L, tile), nt = nout * T, ng = nout * cdiv(T, 32);
    /* tiles (or rows) are taken from the ticket: a grid of resident blocks walks them all */
    long long grid = 8LL * g->nsm;
    /* Three ways: each warp walks whole rows (sequential; rj_scanwv in
     * registers over 16-byte loads where every array allows them, else
     * rj_scanw through shared memory), a block walks whole rows tile by tile
     * (persistent), or tiles go to blocks one by one and look back for their
     * carry (tree: the tiles' folds combined in groups of 32).  Otherwise from
     * the shape (H200, 2^28 f32, bench/TUNING.md "Scans"):
     * - a warp a row where every resident warp gets two rows, or over 16-byte
     *   loads half a row: no barrier, and a short row fills a warp's share of
     *   a tile, not a block's tile (2^20 rows of 256: 1.4 ms through shared
     *   memory, 0.56 in registers, 9.4 a block a row; in registers, 4096 rows
     *   of 2^16: 0.61 ms against 0.76, but 1024 rows of 2^18: 0.88 against
     *   0.78); in registers at every row length (rows of 4096: 0.57-0.59 ms
     *   against 0.79 through shared memory; of 64: 1.05 against 4.9);
     * - else a block a row where a row is one tile or there are at least 1.5
     *   rows an SM: the look-back over many rows took twice the time of one
     *   row's (256 rows of 2^20 f32: 1.05 ms a block a row, 1.49 the look-back);
     * - else the look-back.
     * Ranged rows (plan_scan_ranged: rows of their own lengths, each written
     * at its range) never take the look-back, whose tiles are uniform, nor
     * 16-byte loads: under tree a block a row, under auto a warp a row from
     * two rows a resident warp, else a block a row. */
    long long warps = (long long)CG_SCANW_MINB * (BLOCK / 32) * g->nsm;
    int ranged = plan_scan_ranged(r->p, &r->p->passes[e->pi]);
    int vok = gpu_vec_ok(r, e);   /* every array allows 16-byte loads (never ranged rows: vec.c) */
    int vec_ok = vok && strategy != RED_STRATEGY_PERSISTENT && strategy != RED_STRATEGY_TREE;
    int rows = strategy == RED_STRATEGY_SEQUENTIAL                 ? 2
             : strategy == RED_STRATEGY_PERSISTENT                ? 1
             : strategy == RED_STRATEGY_TREE                      ? ranged
             : nout >= 2 * warps || (vec_ok && 2 * nout >= warps) ? 2
                                                                  : ranged || T == 1 || 2 * nout >= 3LL * g->nsm;
    /* the look-back over 16-byte loads (rj_scanlv), in tiles of its own, where
     * every array allows them and it was faster (H200, bench/TUNING.md
     * "Scans"): over several rows (16384 rows of 16384 f32 under tree: 0.89
     * ms against 1.75 through shared memory) and for states over 8 bytes (the
     * linear recurrence over 2^26 f32, a 12-byte state: 0.51 against 0.58);
     * not for one row of 4- or 8-byte states (2^28 f32: 0.94 against 0.79),
     * nor for states over 12 bytes, whose two tiles a thread holds would spill */
    int lv = rows == 0 && vok && gpu_tuning_get()->scanlv && e->k.acc_size <= 12 && (nout > 1 || e->k.acc_size > 8);
    if (lv) {
        tile = cg_scanlv_tile(&e->k);
        T = cdiv(L, tile), nt = nout * T, ng = nout * cdiv(T, 32);
    }
    size_t bytes = (size_t)cg_scan_scratch(&e->k, rows ? 0 : nt, rows ? 0 : ng);
    /* a warp a row over 16-byte loads (rj_scanwv) where every array allows them */
    int vec = rows == 2 && vec_ok;
    long long smem = vec || lv ? 0 : cg_scan_smem(&e->k, rows == 2);
    if (smem > g->smem_optin)
        return util_diag_set(r->diag, RED_ERR_LIMIT, "scan: its state (%d bytes an element) needs %lld bytes of shared memory a block, the device has %d",
                             e->k.scan_esize, smem, g->smem_optin);
    /* rj_scanwv deals rows to warps by their place in the grid, so its grid is
     * what fits on the device at once (a second wave would idle the first's
     * SMs); the others take rows or tiles from a ticket */
    if (vec && (rc = gpu_occupancy_grid(r, e, GPU_E_SCANWV, &grid))) return rc;
    long long work = rows == 2 ? cdiv(nout, BLOCK / 32) : rows ? nout : nt;
    if (work < grid) grid = work;
    CUdeviceptr s;
    if ((rc = gpu_run_get(r, bytes, &s, 1))) return rc;
    if (g->cu.MemsetD8Async(s, 0, bytes, r->s)) return util_diag_set(r->diag, RED_ERR_DEVICE, "cuMemsetD8Async failed");
    P[RJ_PARTIALS] = (long long)s;
    P[RJ_NOUT] = nout;
    P[RJ_NBLK] = T;
    P[RJ_PER] = rows;
    if (rows == 2) return gpu_launch_block(r, e, vec ? GPU_E_SCANWV : GPU_E_SCANW, grid, (int)smem, BLOCK);
    return gpu_launch_block(r, e, lv ? GPU_E_SCANLV : GPU_E_SCAN, grid, (int)smem, BLOCK + 32);
}
