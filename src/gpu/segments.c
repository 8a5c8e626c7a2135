/*
 * segments.c -- the reduction passes without keys: a full reduction (one output) on a
 * persistent, tree or sequential grid, segments (one reduction per output) under the kernel
 * the strategy or gpu_choose_segments picks, and counting a ranged domain on the device.
 */
#include "gpu_internal.h"
#include "tuning.h"

static int epilogue_on(run_ctx *r, pass_entry *e, int k);

/* A full reduction; a map of its result (plan_pass.epilogue) runs in the
 * launch that writes the result (rj_final, or the persistent grid's last
 * block), r->epi_done then set. */
int gpu_run_full(run_ctx *r, pass_entry *e, long long n, int strategy, int ordered)
{
    gpu_dev *g = r->g;
    long long *P = r->params;
    size_t asz = (size_t)e->k.acc_size;
    P[RJ_NOUT] = 1;
    r->epi_done = 0;
    /* segmented: the one segment in block-sized pieces combined in order, as
     * tree does (one block for all of it was 151x the best on 2^26 gathered
     * elements, bench/RESULTS-sparse.md) */
    if (strategy == RED_STRATEGY_SEGMENTED) strategy = RED_STRATEGY_TREE;
    long long grid;
    int vec = gpu_vec_ok(r, e);
    int persist = vec ? GPU_E_PERSISTV : GPU_E_PERSIST;
    if (strategy == RED_STRATEGY_PERSISTENT || strategy == RED_STRATEGY_AUTO) {
        int rc = gpu_occupancy_grid(r, e, persist, &grid);
        if (rc) return rc;
        grid *= gpu_tuning_get()->waves ? gpu_tuning_get()->waves : n >= 3 * grid * 16384 && !e->k.arg ? 3 : 1;
        /* occupancy waves (gpu_tuning.waves): three where each block of three
         * has 16384 elements or more, balancing SMs whose blocks do not finish
         * together; else one, whose blocks pay the tree and the ticket once.
         * Small inputs: no more blocks than have 8 elements a thread (the full
         * grid over 2^10 elements was twice CUB's time: bench/TUNING.md) */
        if (grid > cdiv(n, (long long)BLOCK * 8)) grid = cdiv(n, (long long)BLOCK * 8);
    } else if (strategy == RED_STRATEGY_SEQUENTIAL) {
        grid = cdiv(n, (long long)BLOCK * 16);
        if (grid > 4 * g->nsm) grid = 4 * g->nsm;
    } else {
        grid = cdiv(n, (long long)BLOCK * 16);
        if (grid > 8 * g->nsm) grid = 8 * g->nsm;
    }
    if (grid < 1) grid = 1;
    CUdeviceptr part;
    int rc = gpu_run_get(r, (size_t)grid * asz, &part, 1);
    if (rc) return rc;
    P[RJ_PARTIALS] = (long long)part;
    P[RJ_N] = n;
    if (strategy == RED_STRATEGY_SEQUENTIAL) {
        P[RJ_PER] = cdiv(n, grid * BLOCK);
        rc = gpu_launch(r, e, GPU_E_SEQ, grid);
    } else {
        /* contiguous ranges per block, a multiple of the block size (for
         * rj_persistv of its batches of vectors: only the last block has
         * elements left over, which it folds one at a time) */
        int batches = vec && strategy != RED_STRATEGY_TREE;
        long long step = BLOCK * (long long)(batches ? e->k.vec * e->k.vec_unroll : 1);
        long long per = cdiv(cdiv(n, grid), step) * step;
        P[RJ_PER] = per > 0 ? per : step;
        if (strategy == RED_STRATEGY_PERSISTENT || strategy == RED_STRATEGY_AUTO) {
            gpu_publish_arm(r);
            P[RJ_EPION] = r->epi_done = epilogue_on(r, e, persist);
        }
        rc = gpu_launch(r, e, strategy == RED_STRATEGY_TREE ? GPU_E_BLOCK : persist, grid);
    }
    if (!rc && strategy != RED_STRATEGY_PERSISTENT && strategy != RED_STRATEGY_AUTO) {
        P[RJ_NBLK] = grid;
        gpu_publish_arm(r);
        P[RJ_EPION] = r->epi_done = epilogue_on(r, e, GPU_E_FINAL);
        rc = gpu_launch(r, e, GPU_E_FINAL, 1);
    }
    P[RJ_EPION] = 0;
    gpu_publish_disarm(r, rc);
    (void)ordered;
    return rc;
}

/* Every element of every output's domain, counted on the device (ranges come
 * from the data): a full reduction's size, or the segments' total for auto. */
int gpu_count_on_device(run_ctx *r, pass_entry *e, long long nout, long long step, long long *total)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    long long *P = r->params;
    P[RJ_NOUT] = nout;
    P[RJ_PER] = step;
    CU(g->cu.MemsetD8Async(r->ws + RJ_WS_KSTATS, 0, 8, r->s), "cuMemsetD8Async");
    long long grid = cdiv(cdiv(nout, step), BLOCK);
    if (grid > (long long)g->nsm * 8) grid = (long long)g->nsm * 8;
    int rc = gpu_launch(r, e, GPU_E_COUNT, grid);
    P[RJ_PER] = 0;
    if (rc) return rc;
    long long cnt = 0;
    CU(g->cu.MemcpyDtoHAsync(&cnt, r->ws + RJ_WS_KSTATS, 8, r->s), "cuMemcpyDtoHAsync");
    CU(g->cu.StreamSynchronize(r->s), "cuStreamSynchronize");
    if (step > 1) {
        /* a sample of cdiv(nout, step) outputs: scaled to all of them */
        double est = (double)cnt * (double)nout / (double)cdiv(nout, step);
        cnt = est < 4e18 ? (long long)est : (long long)4e18;
    }
    *total = cnt;
    return 0;
}

/* epi_out_v's result (cg_kernel.epi_vec): rows of stride-1 elements starting on 16 bytes. */
static int epi_vec_ok(const run_ctx *r, const pass_entry *e)
{
    const long long *P = r->params, *a = P + e->k.epi_base;   /* pointer, extents, strides */
    int nd = e->k.epi_ndim;
    unsigned long long esz = (unsigned long long)e->k.vec_esz;
    if (!e->k.epi_vec || (unsigned long long)a[0] % 16 || a[nd + nd] != 1) return 0;
    if ((unsigned long long)P[e->k.vec_lo[0]] * esz % 16) return 0;
    for (int d = 0; d + 1 < nd; d++)
        if (a[1 + d] > 1 && (unsigned long long)a[1 + nd + d] * esz % 16) return 0;
    return 1;
}

/* Does segment kernel k run the next pass per output (cg_kernel.epi, rj_epilogue)?  One
 * element an output: every kernel, rj_splitf included.  A map over each output's domain:
 * where a block or a warp's lanes take a row, which then store it coalesced (a thread a row
 * would store 32 rows' elements a warp); 2 where over 16-byte vectors.  Cutting the grid so
 * that the rows in flight fit in L2 until their second reading made the 16384-column
 * softmax slower at every size tried (bench/TUNING.md): it runs on the kernel's own grid. */
static int epilogue_on(run_ctx *r, pass_entry *e, int k)
{
    const gpu_tuning *tu = gpu_tuning_get();
    if (!e->k.epi || !tu->epi) return 0;
    if (e->k.epi == 1) return 1;
    if (k != GPU_E_SEGB && k != GPU_E_SEGBV && k != GPU_E_SEG32 && k != GPU_E_SEG32V && k != GPU_E_SEGNV) return 0;
    /* the 16-byte kernels have checked the arrays (vec_ok) */
    return (k == GPU_E_SEGBV || k == GPU_E_SEG32V || k == GPU_E_SEGNV) && epi_vec_ok(r, e) ? 2 : 1;
}

/* rj_splitf: each output's chunk partials (P[RJ_PARTIALS], P[RJ_NBLK] of them) folded in
 * order, and a map of one element after it.  Few outputs: a block folds each one's chunks (a
 * thread each took 37 us for one output of 1056 chunks). */
static int run_split_final(run_ctx *r, pass_entry *e, long long nout)
{
    gpu_dev *g = r->g;
    long long *P = r->params;
    P[RJ_PER] = nout < 4LL * g->nsm;
    long long grid = P[RJ_PER] ? nout : cdiv(nout, BLOCK);
    if (grid > (long long)g->nsm * 64) grid = (long long)g->nsm * 64;
    P[RJ_EPION] = r->epi_done = epilogue_on(r, e, GPU_E_SPLITF);
    int rc = gpu_launch(r, e, GPU_E_SPLITF, grid);
    P[RJ_PER] = P[RJ_EPION] = 0;
    return rc;
}

/* rj_split1's chunks an output (`guess`, gpu_choose_segments's, from a full GPU), once the
 * kernel's resident threads are known: its work items (a thread's chunk of a column) all take
 * as long, so they should fill a whole number of waves of resident threads, two at least.
 * The chunks of at least 32 elements (at most 1024) that fill the waves best, the fewest of
 * those: 32768 columns of 16384 on an H200 made 2.06 waves, and the third's 2% of the work
 * took a fifth of the time (589 us, torch 498). */
static long long column_chunks(long long nout, long long cnt, long long resident, long long guess)
{
    long long hi = cnt / 32 < 1024 ? cnt / 32 : 1024, best = guess;
    double best_fill = 0;
    for (long long nc = 2; nc <= hi; nc++) {
        long long items = nc * nout, waves = cdiv(items, resident);
        if (waves < 2 && nc < hi) continue;
        double fill = (double)items / (double)(waves * resident);
        if (fill > best_fill + 1e-9) {
            best_fill = fill;
            best = nc;
        }
        if (waves > 8) break;
    }
    return best;
}

/* rj_tile (cg_kernel.tile): a block's RJ_BLOCK * RJ_TILE_OUTS outputs over a chunk of their common reduced
 * domain, folded by rj_splitf in order where there are several chunks.  The work items
 * (blocks of outputs times chunks), all alike, come to at least two waves of resident blocks
 * and as near a whole number of waves as chunks of at least two tiles allow: 2.2 waves (2304
 * items on 1056 resident blocks) left the last wave four-fifths idle. */
static int run_tile(run_ctx *r, pass_entry *e, long long nout, long long total)
{
    gpu_dev *g = r->g;
    long long *P = r->params;
    long long nob = cdiv(nout, (long long)BLOCK * RJ_TILE_OUTS), cnt = total / nout, res;
    int rc = gpu_occupancy_grid(r, e, GPU_E_TILE, &res);
    if (rc) return rc;
    long long waves = cdiv(cdiv(2 * res, nob) * nob, res);
    long long nc = waves * res / nob;
    if (nc > cnt / (2 * BLOCK)) nc = cnt / (2 * BLOCK);
    if (nc > 1024) nc = 1024;
    if (nc < 1) nc = 1;
    P[RJ_NBLK] = nc;
    P[RJ_PARTIALS] = 0;
    if (nc > 1) {
        CUdeviceptr part;
        rc = gpu_run_get(r, (size_t)(nc * nout) * (size_t)e->k.acc_size, &part, 1);
        if (rc) return rc;
        P[RJ_PARTIALS] = (long long)part;
    }
    long long grid = nob * nc;
    if (grid > (long long)g->nsm * 64) grid = (long long)g->nsm * 64;
    P[RJ_EPION] = r->epi_done = nc == 1 ? epilogue_on(r, e, GPU_E_TILE) : 0;
    rc = gpu_launch(r, e, GPU_E_TILE, grid);
    P[RJ_EPION] = 0;
    return rc || nc == 1 ? rc : run_split_final(r, e, nout);
}

/* Contractions (cg_kernel.tile2): the two sides staged (cp.async: sm_80 on), a register tile
 * of outputs a thread, where there are some 32 rows and columns at least, however few the
 * reduced elements (3-D distances, k of 3: 1837 us against 3538 for a thread an output,
 * bench/TUNING.md). */
static int tile2_fits(const run_ctx *r, const pass_entry *e, long long nout, long long total)
{
    const gpu_tuning *tu = gpu_tuning_get();
    const long long *P = r->params;
    return e->k.tile2 && r->g->sm_major >= 8 && tu->tile_min > 0 && P[e->k.t2_ni] >= 32 && P[e->k.t2_nj] >= 32 &&
           (double)total >= tu->tile2_kmin * (double)nout;
}

/* rj_tile2 over every tile of every batch; no epilogue: a map after it is a launch of its own */
static int run_tile2(run_ctx *r, pass_entry *e, long long nout)
{
    const long long *P = r->params;
    long long ni = P[e->k.t2_ni], nj = P[e->k.t2_nj], side = 16LL * e->k.tile2;
    long long tiles = nout / ni / nj * cdiv(ni, side) * cdiv(nj, side), cap = (long long)r->g->nsm * 64;
    return gpu_launch(r, e, GPU_E_TILE2, tiles < cap ? tiles : cap);
}

/* CSR rows along the merge path (cg_kernel.merge): rj_segm on a grid of resident blocks,
 * each an equal share of rows and elements, leaving each block's first and last rows' parts
 * (two records a block), then rj_segmf, which ends the rows that cross blocks, or runs every
 * row by itself where rj_segm raised its flag (offsets it could not follow). */
static int run_merge(run_ctx *r, pass_entry *e, long long nout)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    long long *P = r->params;
    long long grid;
    int rc = gpu_occupancy_grid(r, e, GPU_E_SEGM, &grid);
    if (rc) return rc;
    size_t rec = 16 + ((size_t)e->k.acc_size + 15) / 16 * 16;   /* rj_mrec, generously aligned */
    CUdeviceptr part;
    rc = gpu_run_get(r, 2 * (size_t)grid * rec, &part, 1);
    if (rc) return rc;
    P[RJ_PARTIALS] = (long long)part;
    P[RJ_NBLK] = grid;
    CU(g->cu.MemsetD8Async(r->ws + RJ_WS_MFLAG, 0, 8, r->s), "cuMemsetD8Async");
    rc = gpu_launch(r, e, GPU_E_SEGM, grid);
    if (rc) return rc;
    long long fix = cdiv(nout, BLOCK);   /* the fallback's thread a row, else a thread a block */
    if (fix > (long long)g->nsm * 8) fix = (long long)g->nsm * 8;
    return gpu_launch(r, e, GPU_E_SEGMF, fix);
}

/* CSR rows (cg_kernel.merge) under the tree strategy where they average a warp's width or
 * more: rj_seg32d, a warp a row, leaves rows of more than `longer` elements to rj_segl, a
 * block's tree each, through a list of up to LONG_ROOM rows (past that, rj_segl reads
 * every row's range again: a long row is a block's whatever the order of the atomics, so
 * its bits are the same every run).  A warp alone on a power-law matrix's rows of 2^17
 * took 12x the best strategy's time (bench/RESULTS-sparse.md); the sampled average cannot
 * see such rows. */
enum { LONG_ROOM = 1 << 16 };
static int run_rows_deferred(run_ctx *r, pass_entry *e, long long nout, double longer)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    long long *P = r->params;
    long long room = nout < LONG_ROOM ? nout : LONG_ROOM;
    CUdeviceptr list;
    int rc = gpu_run_get(r, (size_t)(room + 1) * 8, &list, 1);
    if (rc) return rc;
    CU(g->cu.MemsetD8Async(list, 0, 8, r->s), "cuMemsetD8Async");
    P[RJ_PARTIALS] = (long long)list;
    P[RJ_NBLK] = longer < 9e18 ? (long long)longer : (1LL << 62);
    P[RJ_PER] = room;
    long long grid = cdiv(nout * 32, BLOCK), cap = (long long)g->nsm * 64;
    rc = gpu_launch(r, e, GPU_E_SEG32D, grid < cap ? grid : cap);
    /* as many blocks as rows fit in the room, at most four an SM: each takes rows while any are left */
    long long lg = room < (long long)g->nsm * 4 ? room : (long long)g->nsm * 4;
    if (!rc) rc = gpu_launch(r, e, GPU_E_SEGL, lg);
    P[RJ_PER] = 0;
    return rc;
}

/* The elements of all outputs' domains where ranges make them known only on
 * the device: their lengths are in the data; one round trip (tens of
 * microseconds) against a kernel that can be 20x off.  The choice needs the
 * average length only: a sample of about 16384 outputs (counting all 22
 * million CSR rows of length 3 took 50 us, as long as a third of the
 * reduction). */
static int ranged_total(run_ctx *r, pass_entry *e, long long nout, long long *total)
{
    uint64_t key = gpu_count_key(r, e, nout);
    if (e->count_key == key) {
        /* the same arrays and sizes as last time: the same choice (it
         * affects speed only; a stale one is still correct) */
        *total = e->count_total;
        return 0;
    }
    int rc = gpu_count_on_device(r, e, nout, nout > 32768 ? nout / 16384 : 1, total);
    if (rc) return rc;
    e->count_key = key;
    e->count_total = *total;
    return 0;
}

/* Segments: one reduction per output (partial reductions, sorted keys).
 * `total` is the elements of all outputs' domains, or -1 when ranges make
 * it unknown.  Forced strategies pick the kernel, sized to the outputs: tree
 * a block's tree per output, a warp's where outputs average fewer elements
 * than a block has threads (CSR rows: their rows of more than gpu_tuning.tree_long
 * elements a block's each, run_rows_deferred), a lane's where fewer than a warp has (CSR
 * rows: 4); sequential a thread per output; persistent a warp per output (a lane
 * where they average fewer than 32 elements) on an occupancy-sized grid; auto
 * and segmented ask gpu_choose_segments.  CSR rows (one sequence of their
 * elements, the merge path) under sequential, persistent and segmented: each
 * thread folds its run of the elements in order, each block of an
 * occupancy-sized grid takes an equal share (a thread a row walked a
 * power-law matrix's rows of 2^17 alone, 137x the best; a warp a row, 13x). */
int gpu_run_segments(run_ctx *r, pass_entry *e, long long nout, long long total, int strategy)
{
    gpu_dev *g = r->g;
    long long *P = r->params;
    P[RJ_NOUT] = nout;
    r->epi_done = 0;
    if (nout == 0) return 0;
    int k;   /* enum gpu_entry */
    int group, rc;
    long long grid;
    const gpu_tuning *tu = gpu_tuning_get();
    switch (strategy) {
    case RED_STRATEGY_TREE:
        /* a block's tree over rows of a few elements left most of its lanes
         * idle: 114x the best on 5-point stencil rows (bench/RESULTS-sparse.md) */
        if (total < 0 && (rc = ranged_total(r, e, nout, &total))) return rc;
        /* a lane for contiguous rows under a warp's width (a warp a row of 8:
         * 22x), for CSR rows only under 4 (their average hides rows of 2^17,
         * which a lane would walk alone) */
        group = (double)total < (e->k.merge ? 4.0 : 32.0) * (double)nout ? 1
              : (double)total < (double)BLOCK * (double)nout ? 32 : BLOCK;
        k = group == 1 ? GPU_E_SEG1 : group == 32 ? GPU_E_SEG32 : GPU_E_SEGB;
        if (group == 32 && e->k.merge && tu->tree_long < 1e300) return run_rows_deferred(r, e, nout, tu->tree_long);
        break;
    case RED_STRATEGY_SEQUENTIAL:
        if (e->k.merge && tu->merge) return run_merge(r, e, nout);
        k = GPU_E_SEG1;
        group = 1;
        break;
    case RED_STRATEGY_PERSISTENT:
        if (e->k.merge && tu->merge) return run_merge(r, e, nout);
        /* a warp a row, a lane where rows are shorter than a warp (rows of 8: 24x) */
        if (total < 0 && (rc = ranged_total(r, e, nout, &total))) return rc;
        group = (double)total < 32.0 * (double)nout ? 1 : 32;
        k = group == 1 ? GPU_E_SEG1 : GPU_E_SEG32;
        break;
    default: {
        /* CSR rows: the forced segmented strategy is the merge path (a segmented
         * reduction of the rows' elements as one sequence) */
        if (e->k.merge && tu->merge && strategy == RED_STRATEGY_SEGMENTED) return run_merge(r, e, nout);
        if (total < 0 && (rc = ranged_total(r, e, nout, &total))) return rc;
        /* a matrix product: cuBLASLt where it takes it (blas.c) */
        if (strategy == RED_STRATEGY_AUTO && e->k.gemm && (rc = gpu_blas_gemm(r, e)) != GPU_BLAS_NOT_TAKEN) return rc;
        if (strategy == RED_STRATEGY_AUTO && tile2_fits(r, e, nout, total)) return run_tile2(r, e, nout);
        /* pairwise: parts of the operand read along the reduced indices alone,
         * staged once a tile for a block's outputs */
        if (e->k.tile && strategy == RED_STRATEGY_AUTO && tu->tile_min > 0 && (double)total >= tu->tile_min * (double)nout)
            return run_tile(r, e, nout, total);
        /* ... and auto's from an average of gpu_tuning.merge_min elements a row
         * (below it a thread a row read rows of 1..5 at twice the merge path's
         * speed, bench/TUNING.md), where rows are not read by rj_seg1a or rj_seg1s
         * (contiguous loads at the row's index alone, at 3-3.7 TB/s) */
        if (e->k.merge && tu->merge && (double)total >= tu->merge_min * (double)nout &&
            !(e->k.rvec && gpu_ranged_scalar_ok(r, e)))
            return run_merge(r, e, nout);
        gpu_seg_choice c = gpu_choose_segments(nout, total, gpu_column_layout(&e->k, r->bufs), g->nsm);
        if (c.entry == GPU_E_SPLIT1) {
            long long res;
            if ((rc = gpu_occupancy_grid(r, e, GPU_E_SPLIT1, &res))) return rc;
            c.chunks = column_chunks(nout, total / nout, res * BLOCK, c.chunks);
        }
        if (c.chunks) {
            size_t bytes = (size_t)(c.chunks * nout) * (size_t)e->k.acc_size;
            CUdeviceptr part;
            rc = gpu_run_get(r, bytes, &part, 1);
            if (rc) return rc;
            P[RJ_PARTIALS] = (long long)part;
            P[RJ_NBLK] = c.chunks;
            P[RJ_NOUT] = nout;
            P[RJ_EPION] = 0;
            grid = cdiv(c.chunks * nout * c.group, BLOCK);
            if (grid > (long long)g->nsm * 64) grid = (long long)g->nsm * 64;
            /* a block a chunk of contiguous rows: 16-byte loads (the generic
             * element code split each position into its indices: 3-D row
             * statistics ran at 1.8 TB/s) */
            int entry = c.entry == GPU_E_SPLITB && e->k.kind == CG_PARTIAL && gpu_vec_ok(r, e) ? GPU_E_SPLITBV
                                                                                              : c.entry;
            rc = gpu_launch(r, e, entry, grid);
            return rc ? rc : run_split_final(r, e, nout);
        }
        k = c.entry;
        group = c.group;
        /* 16-byte loads (auto only: the forced strategies keep the scalar
         * kernels to compare against): CSR rows from an average of
         * gpu_tuning.seg1a_min elements, contiguous rows (a block each where they
         * are long, several lanes each where a thread's would be 16
         * vectors or more); shorter CSR rows with stride-1 arrays take
         * rj_seg1s, scalar loads without a stride to multiply */
        int occupancy = c.occupancy_grid;
        if (group == 1 && e->k.rvec && (double)total >= tu->seg1a_min * (double)nout && gpu_ranged_vec_ok(r, e)) {
            k = GPU_E_SEG1A;
        } else if (group == 1 && e->k.rvec && tu->seg1s && gpu_ranged_scalar_ok(r, e)) {
            k = GPU_E_SEG1S;
        } else if (e->k.kind == CG_PARTIAL && gpu_vec_ok(r, e)) {
            if (c.long_rows) {
                k = GPU_E_SEGBV;
                group = BLOCK;
                occupancy = 0;
                /* an epilogue that reads the row again: the row staged in
                 * shared memory, read from memory once (a block a row
                 * reading it back found it in neither L1 nor L2: softmax
                 * of 16384^2 moved 3 GiB) */
                long long staged = total / nout / e->k.vec * 16LL * e->k.nvec;
                /* cp.async: sm_80 on; the block's static shared memory (its
                 * tree's partials) within 4 KiB beside the row */
                if (e->k.epi_staged && g->sm_major >= 8 && staged <= tu->segbs_max && staged + 4096 <= g->smem_optin &&
                    epilogue_on(r, e, GPU_E_SEGBV) == 2) {
                    P[RJ_EPION] = r->epi_done = 2;
                    rc = gpu_launch_smem(r, e, GPU_E_SEGBS, nout < (long long)g->nsm * 64 ? nout : (long long)g->nsm * 64,
                                         (int)staged);
                    P[RJ_EPION] = 0;
                    return rc;
                }
            } else if (group == 1 || group == 32) {
                k = group == 1 ? GPU_E_SEG1V : GPU_E_SEG32V;
                /* a thread's rows of 16 vectors or more (64 floats): w
                 * lanes a row, four vectors each (rj_segnv) */
                long long nv = group == 1 && nout > 0 && total > 0 ? total / nout / e->k.vec : 0;
                int w = 1;
                while (w * 2 <= tu->segnv && w * 2 * 4 <= nv) w *= 2;
                if (w >= 4) {
                    k = GPU_E_SEGNV;
                    group = w;
                    P[RJ_PER] = w;
                }
            }
        }
        if (occupancy) strategy = RED_STRATEGY_PERSISTENT;
    }
    }
    if (strategy == RED_STRATEGY_PERSISTENT) {
        rc = gpu_occupancy_grid(r, e, k, &grid);
        if (rc) return rc;
    } else {
        grid = cdiv(nout * group, BLOCK);
        if (grid > (long long)g->nsm * 64) grid = (long long)g->nsm * 64;
    }
    P[RJ_EPION] = r->epi_done = epilogue_on(r, e, k);
    rc = gpu_launch(r, e, k, grid);
    P[RJ_PER] = P[RJ_EPION] = 0;
    return rc;
}
