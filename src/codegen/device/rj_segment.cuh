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

__device__ __forceinline__ void rj_segmented(const Params &P, int group)
{
    long long nout = P.v[RJ_NOUT];
    if (group >= RJ_BLOCK) {
        for (long long o = blockIdx.x; o < nout; o += gridDim.x) {
            long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
            long long cnt = out_range(P, o, lo, sz);
            Acc a = rj_block_range(P, o, lo, sz, 0, cnt);
            if (threadIdx.x == 0) acc_write(P, o, a);
            rj_epilogue(P, o, 1, lo, sz, cnt, threadIdx.x, RJ_BLOCK);
        }
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
