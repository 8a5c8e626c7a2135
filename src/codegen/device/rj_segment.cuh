// rj_segment.cuh -- one reduction per output: a thread, warp or block per
// segment, CSR rows (rj_seg1a, rj_seg1s), outputs split into chunks, and the
// element count.  Pasted after rj_full.cuh.

// A thread per output: outputs gid, gid + ng, ..., each folded in two
// parts: head(o, lo, sz, cnt) issues the output's first loads, straight-line
// code with no store, and returns them; then the next output's range is
// read; then tail(o, lo, sz, cnt, h) folds them and the rest of the domain.
// The next range's loads thus go out beside this output's first loads, and
// one round trip to memory an output is waited for, not two.  With the
// next range read first (rj_seg1, whose head issues nothing), a row's
// loads could not pass out_range's fault record (a store that may alias
// them), so a short CSR row waited for its offsets and then for its
// values, two round trips.  The next output's index
// is clamped rather than branched on, so no branch separates the two sets
// of loads (the last output's range is read twice).
template <class Head, class Tail>
__device__ __forceinline__ void rj_rows_split(const Params &P, long long gid, long long ng, Head head, Tail tail)
{
    long long nout = P.v[RJ_NOUT];
    if (gid >= nout) return;
    long long lo[RJ_NRED + 1], sz[RJ_NRED + 1], lo2[RJ_NRED + 1], sz2[RJ_NRED + 1];
    long long cnt = out_range(P, gid, lo, sz);
    for (long long o = gid; o < nout; o += ng) {
        auto h = head(o, (const long long *)lo, (const long long *)sz, cnt);
        long long cn = out_range(P, o + ng < nout ? o + ng : o, lo2, sz2);
        acc_write(P, o, tail(o, (const long long *)lo, (const long long *)sz, cnt, h));
        rj_epilogue(P, o, 1, lo, sz, cnt, 0, 1);
#pragma unroll
        for (int d = 0; d <= RJ_NRED; d++) {
            lo[d] = lo2[d];
            sz[d] = sz2[d];
        }
        cnt = cn;
    }
}

#if RJ_VEC && RJ_RVEC
// rj_seg1a: a thread per output over a ranged index (CSR rows) whose
// arrays are loaded at that index alone, contiguous and on 16 bytes (the
// runtime's check), RJ_VEC elements a load.  The next row's range is read
// before this one is folded, as in rj_segmented.  (acc_elem and acc_one_v
// at absolute positions: lo 0.)
__device__ __forceinline__ void rj_segmented_ranged_vec(const Params &P)
{
    long long gid = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x, ng = (long long)gridDim.x * RJ_BLOCK;
    const long long lo0[RJ_NRED + 1] = {0}, sz0[RJ_NRED + 1] = {0};
    long long ext = rvec_extent(P);
    rj_flt F;
    rj_flt_init(F);
    // head: the row's first vector, where it is read whole (see below)
    auto first = [&](long long o, const long long *lo, const long long *sz, long long cnt) {
        (void)sz;
        Vld L;
        long long b = lo[0], e = b + cnt, u0 = b / RJ_VEC, u1 = (e - 1) / RJ_VEC;
        if (cnt > 0 && (u0 < u1 || (u1 + 1) * RJ_VEC <= ext)) acc_load_v(L, P, o, lo0, u0);
        return L;
    };
    rj_rows_split(P, gid, ng, first, [&](long long o, const long long *lo, const long long *sz, long long cnt,
                                         const Vld &L0) {
        (void)sz;
        long long b = lo[0], e = b + cnt;   // cnt > 0: in every array (out_range)
        Acc a;
        acc_init(a);
        if (cnt > 0) {
            // the vectors the row touches: the first and the last masked
            // (one load each instead of up to RJ_VEC - 1), the last one
            // only where it ends inside every array (nothing past an array
            // is read), else its elements by themselves
            long long u0 = b / RJ_VEC, u1 = (e - 1) / RJ_VEC;
            bool last_in = (u1 + 1) * RJ_VEC <= ext;
            {   // the first vector (the last too, where it is the same): L0
                long long hend = u0 == u1 ? e : (u0 + 1) * RJ_VEC;
                if (u0 < u1 || last_in) {
#pragma unroll
                    for (int c = 0; c < RJ_VEC; c++) {
                        long long t = u0 * RJ_VEC + c;
                        if (t >= b && t < hend) acc_one_v(a, P, L0, lo0, u0, c);
                    }
                } else {
                    for (long long t = b; t < hend; t++) acc_elem(a, F, P, o, lo0, sz0, t);
                }
            }
#pragma unroll 4
            for (long long u = u0 + 1; u < u1; u++) {
                Vld L;
                acc_load_v(L, P, o, lo0, u);
#pragma unroll
                for (int c = 0; c < RJ_VEC; c++) acc_one_v(a, P, L, lo0, u, c);
            }
            if (u1 > u0) {   // the last vector
                if (last_in) {
                    Vld L;
                    acc_load_v(L, P, o, lo0, u1);
#pragma unroll
                    for (int c = 0; c < RJ_VEC; c++)
                        if (u1 * RJ_VEC + c < e) acc_one_v(a, P, L, lo0, u1, c);
                } else {
                    for (long long t = u1 * RJ_VEC; t < e; t++) acc_elem(a, F, P, o, lo0, sz0, t);
                }
            }
        }
        return a;
    });
    rj_flush(P, F);
}
#endif

#if RJ_RVEC
// rj_seg1s: rj_seg1 for short CSR rows (an average under rj_seg1a's) whose
// arrays are loaded at the ranged index alone with stride 1 (the runtime's
// check, no alignment needed).  acc_one_s loads element t at base + t; a
// row's first four elements are loaded (guarded) before the first is
// folded, what it has past four goes four at a time, with no 64-bit stride
// to multiply at each element as rj_seg1 has.  More rows in flight a thread
// cost registers and warps and was slower; what held it was the order
// (rj_rows_split): the row's first loads issued before the next range is
// read (bench/TUNING.md).
// Two levels past four, as rj_thread_run: a fresh inner accumulator every
// RJ_INNER elements (a long row among short ones).
__device__ __forceinline__ Acc rj_row_rest_s(const Params &P, long long b, long long cnt, Acc in)
{
    Acc a;
    acc_init(a);
#pragma unroll 1
    for (long long j0 = 4; j0 < cnt; j0 += RJ_INNER) {   // (unrolled, NVVM made copies of it)
        long long j1 = cnt - j0 < RJ_INNER ? cnt : j0 + RJ_INNER;
#pragma unroll 1
        for (long long j = j0; j < j1; j += 4) {
            int m = j1 - j < 4 ? (int)(j1 - j) : 4;
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (u < m) acc_one_s(in, P, b + j + u);
        }
        acc_combine(a, in);
        acc_init(in);
    }
    acc_combine(a, in);
    return a;
}

__device__ __forceinline__ void rj_segmented_ranged_s(const Params &P)
{
    long long gid = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x, ng = (long long)gridDim.x * RJ_BLOCK;
    // head: the row's first four elements folded (predicated loads, no
    // branch); tail: the rest of a longer row
    auto first = [&](long long o, const long long *lo, const long long *sz, long long cnt) {
        (void)o;
        (void)sz;
        Acc in;   // cnt > 0: in every array (out_range)
        acc_init(in);
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (u < cnt) acc_one_s(in, P, lo[0] + u);
        return in;
    };
    rj_rows_split(P, gid, ng, first, [&](long long o, const long long *lo, const long long *sz, long long cnt,
                                         const Acc &in) {
        (void)o;
        (void)sz;
        return cnt > 4 ? rj_row_rest_s(P, lo[0], cnt, in) : in;
    });
}
#endif

// ---- one reduction per output: thread, warp or block per segment ------------

// A block's tree over output o.
__device__ __forceinline__ void rj_block_row(const Params &P, long long o)
{
    long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
    long long cnt = out_range(P, o, lo, sz);
    Acc a = rj_block_range(P, o, lo, sz, 0, cnt);
    if (threadIdx.x == 0) acc_write(P, o, a);
    rj_epilogue(P, o, 1, lo, sz, cnt, threadIdx.x, RJ_BLOCK);
}

// defer (rj_seg32d, a warp a row under the tree strategy): rows of more than
// P.v[RJ_NBLK] elements are left to rj_segl, a block each, through the list
// at P.v[RJ_PARTIALS] (its first word the count, then up to P.v[RJ_PER] rows;
// past that room rj_segl finds them itself, so that a long row is always a
// block's and its bits the same every run).  A warp walked a power-law
// matrix's rows of 2^17 alone, 12x the best strategy's time.
__device__ __forceinline__ void rj_segmented(const Params &P, int group, bool defer = false)
{
    long long nout = P.v[RJ_NOUT];
    if (group >= RJ_BLOCK) {
        for (long long o = blockIdx.x; o < nout; o += gridDim.x) rj_block_row(P, o);
        return;
    }
    long long gid = ((long long)blockIdx.x * RJ_BLOCK + threadIdx.x) / group;
    long long ngroups = (long long)gridDim.x * RJ_BLOCK / group;
    if (group == 1) {
        auto none = [](long long, const long long *, const long long *, long long) { return 0; };
        rj_rows_split(P, gid, ngroups, none, [&](long long o, const long long *lo, const long long *sz, long long cnt,
                                                 int) { return rj_thread_run(P, o, lo, sz, 0, cnt, 1); });
        return;
    }
    int lane = threadIdx.x % group;
    // every lane of a warp runs the same number of iterations (shuffles)
    long long iters = (nout + ngroups - 1) / ngroups;
    for (long long it = 0; it < iters; it++) {
        long long o = gid + it * ngroups;
        int valid = o < nout;
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        long long cnt = valid ? out_range(P, o, lo, sz) : 0;
        if (defer && cnt > P.v[RJ_NBLK]) {   // (uniform over the warp: its lanes share o)
            unsigned long long *list = (unsigned long long *)P.v[RJ_PARTIALS];
            unsigned long long slot = 0;
            if (lane == 0) slot = atomicAdd(list, 1ull);
            slot = __shfl_sync(0xffffffffu, slot, 0);
            if (lane == 0 && slot < (unsigned long long)P.v[RJ_PER]) list[1 + slot] = (unsigned long long)o;
            valid = 0;
            cnt = 0;
        }
        Acc a;
        acc_init(a);
        {
#if RJ_ORDERED
            // tiles of `group` elements, each reduced in order
            long long c2 = cnt;   // the warp's longest segment: shuffles stay uniform
            for (int s = 1; s < 32; s <<= 1) c2 = max(c2, __shfl_xor_sync(0xffffffffu, c2, s));
            rj_flt F;
            rj_flt_init(F);
            for (long long base = 0; base < c2; base += group) {
                Acc x;
                acc_init(x);
                if (base + lane < cnt) acc_elem(x, F, P, o, lo, sz, base + lane);
                x = rj_warp_reduce(x, group);
                if (lane == 0) acc_combine(a, x);
            }
            rj_flush(P, F);
#else
            a = rj_thread_run(P, o, lo, sz, lane, cnt, group);
            a = rj_warp_reduce(a, group);
#endif
        }
        if (valid && lane == 0) acc_write(P, o, a);
        rj_epilogue(P, o, valid, lo, sz, cnt, lane, group);
    }
}

// rj_segl: the rows rj_seg32d left, a block each; where they were more than
// its list holds, every row's range is read again and each long one taken.
__device__ __forceinline__ void rj_segmented_list(const Params &P)
{
    const unsigned long long *list = (const unsigned long long *)P.v[RJ_PARTIALS];
    const unsigned long long n = list[0], room = (unsigned long long)P.v[RJ_PER];
    if (n <= room) {
        for (unsigned long long i = blockIdx.x; i < n; i += gridDim.x) rj_block_row(P, (long long)list[1 + i]);
        return;
    }
    const long long nout = P.v[RJ_NOUT];
    for (long long o = blockIdx.x; o < nout; o += gridDim.x) {
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        if (out_range(P, o, lo, sz) > P.v[RJ_NBLK]) rj_block_row(P, o);   // (uniform over the block)
    }
}

// ---- split: each output's domain cut into RJ_NBLK chunks ---------------------
// For few long segments (a block per chunk: the whole GPU on one output) and
// for columns (a thread per chunk, neighbouring threads on neighbouring
// outputs, so a row-major matrix is read in coalesced rows).  Chunk c of
// output o leaves its partial at part[c * nout + o]; rj_split_final folds
// each output's chunks in order, so ordered operators stay ordered.

__device__ __forceinline__ void rj_chunk(long long cnt, long long c, long long nc, long long *b, long long *e)
{
    long long per = (cnt + nc - 1) / nc, s = c * per;   // cnt <= 2^40: no overflow
    *b = s < cnt ? s : cnt;
    *e = s + per < cnt ? s + per : cnt;
}

__device__ __forceinline__ void rj_split_threads(const Params &P)
{
    long long nout = P.v[RJ_NOUT], nc = P.v[RJ_NBLK], total = nout * nc;
    Acc *part = (Acc *)P.v[RJ_PARTIALS];
    for (long long g = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x; g < total;
         g += (long long)gridDim.x * RJ_BLOCK) {
        long long o = g % nout, c = g / nout, b, e;
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        rj_chunk(out_range(P, o, lo, sz), c, nc, &b, &e);
        part[g] = rj_thread_run(P, o, lo, sz, b, e, 1);
    }
}

__device__ __forceinline__ void rj_split_blocks(const Params &P)
{
    long long nout = P.v[RJ_NOUT], nc = P.v[RJ_NBLK], total = nout * nc;
    Acc *part = (Acc *)P.v[RJ_PARTIALS];
    for (long long g = blockIdx.x; g < total; g += gridDim.x) {   // uniform in the block
        long long o = g / nc, c = g % nc, b, e;
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        rj_chunk(out_range(P, o, lo, sz), c, nc, &b, &e);
        Acc a = rj_block_range(P, o, lo, sz, b, e);
        if (threadIdx.x == 0) part[c * nout + o] = a;
    }
}

#if RJ_VEC && !RJ_KEYED && !RJ_RVEC
// rj_splitbv: rj_splitb over 16-byte vectors (vec_ok), for few long contiguous
// rows (a 3-D block's j,k): chunks of whole vectors, so that each one starts on
// 16 bytes; the last chunk folds what it has past its vectors one at a time.
__device__ __forceinline__ void rj_split_blocks_vec(const Params &P)
{
    long long nout = P.v[RJ_NOUT], nc = P.v[RJ_NBLK], total = nout * nc;
    Acc *part = (Acc *)P.v[RJ_PARTIALS];
    for (long long g = blockIdx.x; g < total; g += gridDim.x) {   // uniform in the block
        long long o = g / nc, c = g % nc;
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        long long cnt = out_range(P, o, lo, sz);
        long long per = ((cnt + nc - 1) / nc + RJ_VEC - 1) / RJ_VEC * RJ_VEC;
        long long b = c * per, e = b + per < cnt ? b + per : cnt;
        if (b >= e) b = e = 0;   // past the end: nothing (rj_run_v wants b on a vector)
        Acc a = rj_block_reduce(rj_run_v(P, o, lo, b, e, threadIdx.x, RJ_BLOCK));
        if (threadIdx.x == 0) part[c * nout + o] = a;
    }
}
#endif

__device__ __forceinline__ void rj_split_final(const Params &P)
{
    long long nout = P.v[RJ_NOUT], nc = P.v[RJ_NBLK];
    const Acc *part = (const Acc *)P.v[RJ_PARTIALS];
    if (P.v[RJ_PER]) {
        // few outputs: a block folds each output's chunks (the first
        // thread's run of chunks, then the next thread's, ... in order)
        for (long long o = blockIdx.x; o < nout; o += gridDim.x) {
            long long per = (nc + RJ_BLOCK - 1) / RJ_BLOCK;
            long long b = threadIdx.x * per, e = b + per < nc ? b + per : nc;
            Acc a;
            acc_init(a);
            for (long long c = b; c < e; c++) acc_combine(a, part[c * nout + o]);
            a = rj_block_reduce(a);
            if (threadIdx.x == 0) acc_write(P, o, a);
#if RJ_EPI == 1
            rj_epilogue(P, o, 1, NULL, NULL, 1, threadIdx.x, RJ_BLOCK);
#endif
        }
        return;
    }
    for (long long o = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x; o < nout;
         o += (long long)gridDim.x * RJ_BLOCK) {
        Acc a;
        acc_init(a);
        for (long long c = 0; c < nc; c++) acc_combine(a, part[c * nout + o]);
        acc_write(P, o, a);
#if RJ_EPI == 1
        rj_epilogue(P, o, 1, NULL, NULL, 1, 0, 1);
#endif
    }
}

#if RJ_TILE
// rj_tile: pairwise reductions whose operand has parts that read along the
// reduced indices alone (tile.c).  A block takes RJ_BLOCK * RJ_TILE_OUTS
// consecutive outputs, RJ_TILE_OUTS a thread (RJ_BLOCK apart), and chunk c
// of P.v[RJ_NBLK] of their common reduced domain; for each tile of RJ_BLOCK
// positions its threads evaluate those parts once into shared memory
// (tile_stage), then each thread folds the tile from there in order into
// each of its outputs (tile_elem), a staged position read once for them all
// (3-D kernel sums of 2^16 points: 2879 us with one output a thread, 
// bench/RESULTS-pairwise.md), a fresh accumulator a tile.
// One chunk: the results written (and a map over them, RJ_EPI 1); several:
// partials at part[c * nout + o] for rj_split_final, which folds them in
// order.  Every output has the same domain (tile.c), so threads past the
// last output still stage.
__device__ __forceinline__ void rj_tile_run(const Params &P)
{
    __shared__ Stile S;
    long long nout = P.v[RJ_NOUT], nc = P.v[RJ_NBLK];
    const long long span = (long long)RJ_BLOCK * RJ_TILE_OUTS;
    long long nob = (nout + span - 1) / span, total = nob * nc;
    Acc *part = (Acc *)P.v[RJ_PARTIALS];
    for (long long g = blockIdx.x; g < total; g += gridDim.x) {   // uniform in the block
        long long ob = g % nob, c = g / nob, b, e;
        // this thread's outputs; one past the end folds its first one's
        // elements again (uniform work, its result not written)
        long long o[RJ_TILE_OUTS], oc[RJ_TILE_OUTS];
        bool valid[RJ_TILE_OUTS];
#pragma unroll
        for (int u = 0; u < RJ_TILE_OUTS; u++) {
            o[u] = ob * span + u * RJ_BLOCK + threadIdx.x;
            valid[u] = o[u] < nout;
            oc[u] = valid[u] ? o[u] : u ? oc[0] : nout - 1;
        }
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        rj_chunk(out_range(P, oc[0], lo, sz), c, nc, &b, &e);
        rj_flt F;
        rj_flt_init(F);
        Acc a[RJ_TILE_OUTS];
#pragma unroll
        for (int u = 0; u < RJ_TILE_OUTS; u++) acc_init(a[u]);
        for (long long base = b; base < e; base += RJ_BLOCK) {
            int m = e - base < RJ_BLOCK ? (int)(e - base) : RJ_BLOCK;
            __syncthreads();   // the tile before is read
            if ((int)threadIdx.x < m) tile_stage(S, threadIdx.x, F, P, lo, sz, base + threadIdx.x);
            __syncthreads();
            if (valid[0]) {
                Acc in[RJ_TILE_OUTS];
#pragma unroll
                for (int u = 0; u < RJ_TILE_OUTS; u++) acc_init(in[u]);
#pragma unroll 4
                for (int s = 0; s < m; s++) {
#pragma unroll
                    for (int u = 0; u < RJ_TILE_OUTS; u++) tile_elem(in[u], F, P, S, s, oc[u], lo, sz, base + s);
                }
#pragma unroll
                for (int u = 0; u < RJ_TILE_OUTS; u++) acc_combine(a[u], in[u]);
            }
        }
        rj_flush(P, F);
#pragma unroll
        for (int u = 0; u < RJ_TILE_OUTS; u++) {
            if (nc > 1) {
                if (valid[u]) part[c * nout + o[u]] = a[u];
                continue;
            }
            if (valid[u]) acc_write(P, o[u], a[u]);
#if RJ_EPI == 1
            rj_epilogue(P, o[u], valid[u], lo, sz, 1, 0, 1);
#endif
        }
    }
}
#endif

#if RJ_T2
// rj_tile2: contractions (tile.c, cg_emit_tile2).  Work item g: batch bt, a
// tile of RJ_T2BM x RJ_T2BN outputs (rows i0.., columns j0..); thread (ty, tx)
// of a 16 x 16 grid holds rows RJ_T2POS(ty, u) and columns RJ_T2POS(tx, w) of
// it: runs of four, 64 apart, so that the 16 threads of a row of the grid
// read 64 neighbouring columns from shared memory (no bank conflicts).
// Slices of RJ_T2K reduced positions: the block stages the A parts of the
// tile's rows and the B parts of its columns (consecutive threads on
// consecutive positions for A, on consecutive columns for B; plain loads by
// cp.async, all in flight at once), then each thread folds every position of
// the slice into each of its outputs, in order.  With two buffers the next
// slice loads while the current one folds.  Positions past the domain are
// neither staged nor folded; rows and columns past the extents are not
// staged and their outputs not written.  Every output has the same reduced
// domain (tile.c).

// slice k0 (kn positions) into S
__device__ __forceinline__ void rj_t2_stage(Stile2 &S, rj_flt &F, const Params &P, long long bt, long long i0,
                                            long long j0, long long ni, long long nj, const long long *lo,
                                            const long long *sz, long long k0, int kn)
{
#pragma unroll
    for (int q = threadIdx.x; q < RJ_T2BM * RJ_T2K; q += RJ_BLOCK) {
        int kk = q % RJ_T2K, u = q / RJ_T2K;
        if (kk < kn && i0 + u < ni) t2_stage_a(S, kk, u, F, P, bt, i0 + u, 0, lo, sz, k0 + kk);
    }
#pragma unroll
    for (int q = threadIdx.x; q < RJ_T2BN * RJ_T2K; q += RJ_BLOCK) {
        int w = q % RJ_T2BN, kk = q / RJ_T2BN;
        if (kk < kn && j0 + w < nj) t2_stage_b(S, kk, w, F, P, bt, 0, j0 + w, lo, sz, k0 + kk);
    }
}

__device__ __forceinline__ void rj_tile2_run(const Params &P)
{
    __shared__ Stile2 S[RJ_T2BUF];
    long long ni, nj;
    t2_dims(P, &ni, &nj);
    long long nout = P.v[RJ_NOUT], nbt = nout / (ni * nj);   // the runtime: ni, nj > 0
    long long ti = (ni + RJ_T2BM - 1) / RJ_T2BM, tj = (nj + RJ_T2BN - 1) / RJ_T2BN, total = nbt * ti * tj;
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    for (long long g = blockIdx.x; g < total; g += gridDim.x) {   // uniform in the block
        long long bt = g / (ti * tj), rem = g % (ti * tj);
        long long i0 = rem / tj * RJ_T2BM, j0 = rem % tj * RJ_T2BN;
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        long long cnt = out_range(P, t2_out(P, bt, 0, 0), lo, sz);
        rj_flt F;
        rj_flt_init(F);
        Acc acc[RJ_T2M][RJ_T2N];
#pragma unroll
        for (int u = 0; u < RJ_T2M; u++)
#pragma unroll
            for (int w = 0; w < RJ_T2N; w++) acc_init(acc[u][w]);
        int buf = 0;
        __syncthreads();   // the tile before has left S
        if (cnt > 0) rj_t2_stage(S[0], F, P, bt, i0, j0, ni, nj, lo, sz, 0, cnt < RJ_T2K ? (int)cnt : RJ_T2K);
        for (long long k0 = 0; k0 < cnt; k0 += RJ_T2K) {
            int kn = cnt - k0 < RJ_T2K ? (int)(cnt - k0) : RJ_T2K;
            long long k1 = k0 + RJ_T2K;
            rj_cp_async_wait_all();
            __syncthreads();   // slice k0 is in S[buf]; the slice before it is read
            if (RJ_T2BUF == 2 && k1 < cnt)
                rj_t2_stage(S[buf ^ 1], F, P, bt, i0, j0, ni, nj, lo, sz, k1, cnt - k1 < RJ_T2K ? (int)(cnt - k1) : RJ_T2K);
            if (kn == RJ_T2K) {
#pragma unroll 4
                for (int kk = 0; kk < RJ_T2K; kk++)
                    t2_step(acc, F, P, S[buf], kk, ty, tx, bt, i0, j0, ni, nj, lo, sz, k0 + kk);
            } else {
                for (int kk = 0; kk < kn; kk++) t2_step(acc, F, P, S[buf], kk, ty, tx, bt, i0, j0, ni, nj, lo, sz, k0 + kk);
            }
            if (RJ_T2BUF == 1 && k1 < cnt) {
                __syncthreads();   // S is read
                rj_t2_stage(S[0], F, P, bt, i0, j0, ni, nj, lo, sz, k1, cnt - k1 < RJ_T2K ? (int)(cnt - k1) : RJ_T2K);
            }
            buf ^= RJ_T2BUF - 1;
        }
        rj_flush(P, F);
#pragma unroll
        for (int u = 0; u < RJ_T2M; u++)
#pragma unroll
            for (int w = 0; w < RJ_T2N; w++) {
                long long ii = i0 + RJ_T2POS(ty, u), jj = j0 + RJ_T2POS(tx, w);
                if (ii < ni && jj < nj) t2_write(P, bt, ii, jj, acc[u][w]);
            }
    }
}
#endif

// The number of elements of the domains of outputs 0, step, 2 step, ...
// (step = P.v[RJ_PER], at least 1; ranges are read from the data), added
// into P.v[RJ_KSTATS][0], which the host zeroes first: with step 1 a full
// reduction's domain size, with a larger one a sample for the average
// segment length auto needs.
__device__ __forceinline__ void rj_count_all(const Params &P)
{
    long long nout = P.v[RJ_NOUT], step = P.v[RJ_PER] > 1 ? P.v[RJ_PER] : 1, s = 0;
    for (long long j = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x; j * step < nout;
         j += (long long)gridDim.x * RJ_BLOCK) {
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        long long c = out_range(P, j * step, lo, sz);
        s = s + c < (1ll << 62) ? s + c : (1ll << 62);   // c <= 2^40: no overflow
    }
    // one atomic a warp: a thread each made 2.2 million atomics on one
    // address for CSR rows of 10..50, which took longer than the reduction
    for (int d = 16; d > 0; d >>= 1) {
        long long o = __shfl_down_sync(0xffffffffu, s, d);
        s = o > (1ll << 62) - s ? (1ll << 62) : s + o;   // both in [0, 2^62]
    }
    if ((threadIdx.x & 31) == 0 && s) atomicAdd((unsigned long long *)P.v[RJ_KSTATS], (unsigned long long)s);
}

#if RJ_MERGE
// ---- CSR rows along the merge path (rj_segm, rj_segmf) ----------------------
// Merrill and Garland's merge-based CSR: the rows' ends and the elements make
// one sequence of nout + nnz items, element j coming before the end of row i
// where j < end(i); each block takes an equal share of it (whatever the row
// lengths: one row of 2^18 elements among rows of 2), in tiles of RJ_MT items.
// A tile stages its rows' ends in shared memory, then its elements, each
// evaluated alone (coalesced loads, every thread's in flight together); each
// thread walks RJ_MITEMS items of the tile in order, writing the rows it ends;
// the parts of rows that cross threads are combined by a segmented scan in
// thread order, across tiles by the block's carry, across blocks by rj_segmf
// from each block's head and tail records.  Every combine keeps the
// elements' order, so ordered operators stay ordered, and the grid is fixed
// per device, so the bits are the same every run.
// The offsets are trusted nowhere: each staged row is checked (its raw end
// is lo + cnt: not decreasing, and in range of every array, as out_range
// checks it), each block's start must lie on the path and its walk must end
// where the next block starts; anything else raises a flag in the workspace,
// the block stops, and rj_segmf runs every row as rj_seg1 does instead.
// (Elements are evaluated before their row is known: the element code does
// not read the output index, merge_pass's condition.)

// Items a thread, and rj_segm's fewest blocks an SM (its __launch_bounds__):
// for sums of f32, 11 items and 4 blocks (at most 64 registers) took 620-630 us
// where 7 items and as many blocks as 70 registers allow (3) took 750 (H200,
// rows of 10..50; bench/TUNING.md).  RJ_MCLAMP 0 guards each item's loads
// by a branch instead, for comparing (the loads of one item then waited for
// the one before: 815-830 us).  All three can be set through REDJIT_NVRTC_OPTS.
#ifndef RJ_MITEMS
#define RJ_MITEMS (sizeof(Acc) <= 8 ? 11 : sizeof(Acc) <= 16 ? 5 : sizeof(Acc) <= 32 ? 3 : 1)
#endif
#ifndef RJ_SEGM_MINB
#define RJ_SEGM_MINB (sizeof(Acc) <= 8 ? 4 : 1)
#endif
#ifndef RJ_MCLAMP
#define RJ_MCLAMP 1
#endif
#define RJ_MT (RJ_BLOCK * RJ_MITEMS)

struct rj_mrec {   // a block's first or last row and its part there
    long long row, ends;
    Acc acc;
};

// row o's end relative to the first row's start; *ok: its range is sound
__device__ __forceinline__ long long rj_mend(const Params &P, long long o, long long k0, bool *ok)
{
    long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
    long long cnt = out_range(P, o, lo, sz);
    *ok = sz[RJ_NRED] == lo[0] + cnt;   // not decreasing, no fault
    return lo[0] + cnt - k0;
}

// The path's coordinates on diagonals d0 and d1 (rows ended; d - that many
// elements taken), searched by the whole block: each round every thread
// tests one row of the interval left (is its end, rj_mend, before the
// diagonal's element?), which cuts the interval 256-fold, three rounds for
// millions of rows where a binary search by one thread waited for twenty
// loads in a row.  On offsets that decrease the answer is some row, which
// the checks in rj_merge_rows then reject.
__device__ __forceinline__ void rj_msearch2(const Params &P, long long d0, long long d1, long long nout,
                                            long long nnz, long long k0, long long *r0, long long *r1)
{
    long long x[2][2] = {{d0 - nnz > 0 ? d0 - nnz : 0, d0 < nout ? d0 : nout},
                         {d1 - nnz > 0 ? d1 - nnz : 0, d1 < nout ? d1 : nout}};
    const long long dd[2] = {d0, d1};
    while (x[0][0] < x[0][1] || x[1][0] < x[1][1]) {
#pragma unroll
        for (int s = 0; s < 2; s++) {
            long long span = x[s][1] - x[s][0];
            long long m = x[s][0] + span * threadIdx.x / RJ_BLOCK;
            bool ok, before = false;
            if (span > 0 && (threadIdx.x == 0 || m > x[s][0] + span * (threadIdx.x - 1) / RJ_BLOCK))
                before = rj_mend(P, m, k0, &ok) <= dd[s] - m - 1;
            int c = __syncthreads_count(before);   // probes, in order, whose row ends first
            if (span > 0) {
                // the probes are distinct rows; the first c of them are before
                long long lo = x[s][0];
                if (span <= RJ_BLOCK) {
                    x[s][0] = x[s][1] = lo + c;
                } else {
                    if (c > 0) x[s][0] = lo + span * (c - 1) / RJ_BLOCK + 1;
                    if (c < RJ_BLOCK) x[s][1] = lo + span * c / RJ_BLOCK;
                    if (x[s][0] > x[s][1]) x[s][0] = x[s][1];
                }
            }
        }
    }
    *r0 = x[0][0];
    *r1 = x[1][0];
}

// The same within a tile: the nst row ends e[0..] staged of rows ci..,
// relative to the tile's first element (the answer is among them:
// rj_merge_rows stages enough)
__device__ __forceinline__ int rj_msearch_tile(const int *e, int d, int nst, long long nels)
{
    int x0 = (long long)d - nels > 0 ? (int)(d - nels) : 0, x1 = d < nst ? d : nst;
    while (x0 < x1) {
        int m = (x0 + x1) >> 1;
        if (e[m] <= d - m - 1) x0 = m + 1;
        else x1 = m;
    }
    return x0;
}

// A tile's rows' ends into e (rj_merge_rows' s_end), each checked: a row a
// thread at a time, until the rows staged reach past the tile's last item
// (rows of 30 take one round; a tile can end td rows at most); *nst: rows
// staged.  True (for the whole block) where a row is unsound.
__device__ __forceinline__ bool rj_mstage(const Params &P, long long ci, long long cj, long long k0, int td,
                                          long long nrows, int *e, int *nst)
{
    const int t = threadIdx.x;
    bool badrow = nrows <= 0;
    *nst = 0;
    for (int q0 = 0; nrows > 0; q0 += RJ_BLOCK) {
        int q = q0 + t;
        if (q <= td && q < nrows) {
            bool ok;
            long long x = rj_mend(P, ci + q, k0, &ok) - cj;
            e[q] = x > td ? td + 1 : x < 0 ? -1 : (int)x;
            badrow |= !ok || (q == 0 && x < 0);   // (the start's second test)
        }
        int last = q0 + RJ_BLOCK - 1;   // staged: rows up to here
        if (last > td) last = td;
        if (last >= nrows - 1) last = (int)nrows - 1;
        // enough: row `last` ends past the tile's items (its end and the
        // rows before it are more items than the tile has), or no rows left
        __syncthreads();
        *nst = last + 1;
        if (last >= td || last >= nrows - 1 || e[last] + last + 1 > td) break;
    }
    return __syncthreads_or(badrow);
}

// The segmented scan of the threads' carries (myrow, a) in thread order:
// within each warp by shuffles, then across the warps (their last lanes'
// values in wrow, wfirst, wacc).  Returns the thread's row's parts so far.
__device__ __forceinline__ Acc rj_mscan(Acc a, long long myrow, long long *wrow, long long *wfirst, Acc *wacc)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        int src = lane >= off ? lane - off : lane;
        Acc o = acc_shfl_idx(a, src);
        long long orow = __shfl_sync(0xffffffffu, myrow, src);
        if (lane >= off && orow == myrow) {
            acc_combine(o, a);
            a = o;
        }
    }
    long long first = __shfl_sync(0xffffffffu, myrow, 0);
    if (lane == 31) {
        wrow[w] = myrow;
        wfirst[w] = first;
        wacc[w] = a;
    }
    __syncthreads();
    if (myrow == first)   // the row began in an earlier warp, or at the tile's start
        for (int q = w - 1; q >= 0 && wrow[q] == myrow; q--) {
            Acc o = wacc[q];
            acc_combine(o, a);
            a = o;
            if (wfirst[q] != myrow) break;
        }
    return a;
}

// A tile's ne > 0 elements from element k (the first ones of rows that
// follow each other) evaluated into v, a thread's items t, t + RJ_BLOCK, ...:
// every load issued before the first store (which may alias them).
__device__ __forceinline__ void rj_mvalues(const Params &P, rj_flt &F, long long k, int ne, Acc *v)
{
    const int t = threadIdx.x;
    const long long lo0[RJ_NRED + 1] = {0}, sz0[RJ_NRED + 1] = {0};
    Acc x[RJ_MITEMS];
#pragma unroll
    for (int u = 0; u < RJ_MITEMS; u++) {
        acc_init(x[u]);
#if RJ_MCLAMP
        // past the tile's elements: its last one again, unguarded, so that
        // no branch keeps an item's loads behind the one before
        const int q = t + u * RJ_BLOCK < ne ? t + u * RJ_BLOCK : ne - 1;
        acc_elem(x[u], F, P, 0, lo0, sz0, k + q);
#else
        if (t + u * RJ_BLOCK < ne) acc_elem(x[u], F, P, 0, lo0, sz0, k + t + u * RJ_BLOCK);
#endif
    }
#pragma unroll
    for (int u = 0; u < RJ_MITEMS; u++)
        if (t + u * RJ_BLOCK < ne) v[t + u * RJ_BLOCK] = x[u];
}

__device__ __forceinline__ void rj_merge_rows(const Params &P)
{
    // the staged rows' ends, relative to the tile's first element and held
    // to -1 .. td + 1, which keeps every comparison with the tile's items
    __shared__ int s_end[RJ_MT + 1];
    __shared__ Acc s_val[RJ_MT];
    __shared__ long long s_row[RJ_BLOCK];
    __shared__ Acc s_acc[RJ_BLOCK];
    __shared__ long long s_prev;
    __shared__ long long s_wrow[RJ_BLOCK / 32], s_wfirst[RJ_BLOCK / 32];
    __shared__ Acc s_wacc[RJ_BLOCK / 32];
    unsigned long long *flag = (unsigned long long *)(P.v[RJ_ERR] + RJ_WS_MFLAG);
    rj_mrec *rec = (rj_mrec *)P.v[RJ_PARTIALS];   // heads, then tails
    long long nout = P.v[RJ_NOUT], nb = gridDim.x, b = blockIdx.x;
    const int t = threadIdx.x;
    long long k0;
    {
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        out_range(P, 0, lo, sz);
        k0 = lo[0];
    }
    bool ok0;
    long long nnz = rj_mend(P, nout - 1, k0, &ok0);
    long long total = nout + nnz, per = (total + nb - 1) / nb;
    long long d0 = b * per < total ? b * per : total, d1 = d0 + per < total ? d0 + per : total;
    long long ia = 0, ib = 0;
    if (nnz >= 0) rj_msearch2(P, d0, d1, nout, nnz, k0, &ia, &ib);
    if (t == 0) {
        // the start lies on the path: a[i0 - 1] <= j0 <= a[i0] (the second
        // checked with the first tile's rows)
        bool okp = true;
        long long prev = ia > 0 ? rj_mend(P, ia - 1, k0, &okp) : 0;
        s_prev = nnz >= 0 && ok0 && okp && prev <= d0 - ia ? prev : -1;   // -1: unsound
    }
    __syncthreads();
    const long long i0 = ia, prev = s_prev;
    long long ci = ia, cj = d0 - ia, iend = ib, jend = d1 - ib;
    bool bad = prev < 0;
    bool mid = !bad && cj > prev;   // the block starts inside row ci
    // the carry: the part so far of the row in progress at the tile's start (ci)
    Acc cacc;
    acc_init(cacc);
    bool head_done = false;   // the block's first row ended (mid blocks)
    rj_flt F;
    rj_flt_init(F);
    for (long long d = d0; !bad && d < d1;) {
        int td = d1 - d < RJ_MT ? (int)(d1 - d) : RJ_MT;
        long long nrows = nout - ci;   // rows left (none: items past the last row, unsound)
        int nst;
        if (rj_mstage(P, ci, cj, k0, td, nrows, s_end, &nst)) {
            bad = true;
            break;
        }
        long long nels = nnz - cj;
        int te = rj_msearch_tile(s_end, td, nst, nels);   // rows the tile ends
        int ne = td - te;                                         // its elements
        if (ne > 0) rj_mvalues(P, F, k0 + cj, ne, s_val);
        __syncthreads();
        // this thread's items [a0, a1) of the tile, walked in order
        int a0 = t * RJ_MITEMS < td ? t * RJ_MITEMS : td, a1 = a0 + RJ_MITEMS < td ? a0 + RJ_MITEMS : td;
        const int i_first = rj_msearch_tile(s_end, a0, nst, nels);
        int i = i_first, j = a0 - i;
        Acc a, hd;
        acc_init(a);
        acc_init(hd);
        bool ended = false;
#pragma unroll 4
        for (int u = 0; u < RJ_MITEMS; u++) {
            if (a0 + u >= a1) break;
            if (i < nst && j < s_end[i]) {
                acc_combine(a, s_val[j]);
                j++;
            } else {
                if (!ended) hd = a;   // the first row it ends: earlier parts still to come
                else acc_write(P, ci + i, a);
                ended = true;
                acc_init(a);
                i++;
            }
        }
        // the carries: each thread's last row and its part; a segmented
        // scan in thread order, the tile's carry-in before thread 0
        long long myrow = ci + i;
        if (t == 0 && !ended) {   // thread 0 continues the carry's row
            Acc c = cacc;
            acc_combine(c, a);
            a = c;
        }
        a = rj_mscan(a, myrow, s_wrow, s_wfirst, s_wacc);
        s_row[t] = myrow;
        s_acc[t] = a;
        __syncthreads();
        if (ended) {   // the first row it ended: the parts before it, then its own
            Acc v;
            if (t == 0) v = cacc;
            else v = s_acc[t - 1];
            acc_combine(v, hd);
            long long fr = ci + i_first;
            if (mid && fr == i0 && !head_done) {   // the block's first row: rj_segmf ends it
                rec[b].row = fr;
                rec[b].ends = 1;
                rec[b].acc = v;
            } else {
                acc_write(P, fr, v);
            }
        }
        // the next tile starts where this one ends, in the last thread's row
        // (ci + te), its carry that thread's scanned part
        long long nci = ci + te, ncj = cj + ne;
        cacc = s_acc[RJ_BLOCK - 1];
        if (nci > i0) head_done = true;
        __syncthreads();   // s_end, s_val, s_row, s_acc are reused
        ci = nci;
        cj = ncj;
        d += td;
    }
    if (!bad && (ci != iend || cj != jend)) bad = true;   // the walk ends where the next block starts
    if (bad) {
        if (t == 0) atomicExch(flag, 1ull);
        return;
    }
    if (t == 0) {
        // head: the first row's part here, where the block starts inside it
        // and does not end it (else written above); tail: the row in
        // progress at the end, for the next block
        if (!mid) rec[b].row = -1;
        else if (!head_done) {
            rec[b].row = i0;
            rec[b].ends = 0;
            rec[b].acc = cacc;
        }
        rec[nb + b].row = ci < nout ? ci : -1;
        rec[nb + b].ends = 0;
        rec[nb + b].acc = cacc;
    }
    rj_flush(P, F);
}

// After rj_segm: with the flag raised, every row as rj_seg1 does; else the
// rows that cross blocks, each from the block that ends it, back over the
// blocks' tails and heads (P.v[RJ_NBLK] blocks).
__device__ __forceinline__ void rj_merge_fix(const Params &P)
{
    const unsigned long long *flag = (const unsigned long long *)(P.v[RJ_ERR] + RJ_WS_MFLAG);
    long long gid = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x, ng = (long long)gridDim.x * RJ_BLOCK;
    if (*(volatile const unsigned long long *)flag) {
        auto none = [](long long, const long long *, const long long *, long long) { return 0; };
        rj_rows_split(P, gid, ng, none, [&](long long o, const long long *lo, const long long *sz, long long cnt,
                                            int) { return rj_thread_run(P, o, lo, sz, 0, cnt, 1); });
        return;
    }
    long long nb = P.v[RJ_NBLK];
    const rj_mrec *rec = (const rj_mrec *)P.v[RJ_PARTIALS];
    for (long long b = gid; b < nb; b += ng) {
        long long row = rec[b].row;
        if (row < 0 || !rec[b].ends) continue;
        Acc a = rec[b].acc;
        for (long long q = b - 1; q >= 0 && rec[nb + q].row == row; q--) {
            Acc x = rec[nb + q].acc;
            acc_combine(x, a);
            a = x;
            if (rec[q].row != row || rec[q].ends) break;   // the row began in block q
        }
        acc_write(P, row, a);
    }
}
#endif
