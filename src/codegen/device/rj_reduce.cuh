// rj_reduce.cuh -- device code that does not depend on the expression: the
// folds and trees every reduction strategy is built from, written once
// against the names every generated kernel defines before this text (Acc,
// acc_init, acc_combine, acc_shfl_down, acc_elem, acc_write, out_range).
// Whatever folds elements keeps an rj_flt (its first bad subscript) and ends
// with rj_flush.  The strategies follow it in rj_full.cuh, rj_segment.cuh,
// rj_keys.cuh and rj_kfused.cuh; all are embedded into the library at build
// time and pasted, in that order, after the generated part of each kernel.
//
// Every tree here is order preserving: the value of a lane, warp or block
// covers elements that come before those of the next one, and a combine
// always takes (earlier, later).  So `ordered` operators keep left-to-right
// order under every strategy, and results are deterministic for a given
// launch configuration (no atomics on values).

// Order-preserving warp tree over `width` lanes (a power of two <= 32):
// step s combines lane i with lane i + s where i is a multiple of 2s.
// Unroll 1 keeps the steps a loop: the block trees do, which run once a
// block, where a few instructions a step are nothing; unrolled, each of
// their 8 steps was a copy of acc_combine, a fifth of argmax's NVRTC time.
template <int Unroll = 32> __device__ __forceinline__ Acc rj_warp_reduce(Acc a, int width)
{
    int lane = threadIdx.x & 31;
#pragma unroll Unroll
    for (int s = 1; s < width; s <<= 1) {
        Acc o = acc_shfl_down(a, s);
        if ((lane & (2 * s - 1)) == 0 && (lane & 31) + s < 32) acc_combine(a, o);
    }
    return a;
}

// Block tree: warps first, then a tree over the warps' values in order.
// The result is valid in thread 0.  Every warp runs the second tree, though
// only warp 0's is used: its shuffles under `if (warp == 0)` made NVVM add a
// fallback for a diverged warp to each (BRA.DIV, WARPSYNC), a tenth of the
// SASS of argmax's kernel.  It spans RJ_BLOCK / 32 lanes, the warps' values,
// not 32: lanes past them hold the identity.
__device__ __forceinline__ Acc rj_block_reduce(Acc a)
{
    __shared__ Acc warp_vals[RJ_BLOCK / 32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    a = rj_warp_reduce<1>(a, 32);
    __syncthreads();   // warp_vals may still be read by a previous call
    if (lane == 0) warp_vals[warp] = a;
    __syncthreads();
    Acc w;
    if (lane < RJ_BLOCK / 32) w = warp_vals[lane];
    else acc_init(w);
    return rj_warp_reduce<1>(w, RJ_BLOCK / 32);
}

// RJ_UNROLL elements t, t + step, ... folded into `in` in order.  Each is
// first evaluated into an accumulator of its own, so every load is issued
// before any value is compared or added: folding straight into `in` made
// argmax branch on each loaded value before the next load, one load in
// flight per thread.  (For a fresh accumulator acc_elem's "first element?"
// test is known at compile time and drops out.)  argmin and argmax, whose
// acc_elem selects instead of branching, fold straight into `in`
// (RJ_FOLD_DIRECT): the same order and result, without the general
// combine's tie test on 64-bit indices, which made argmax of 2^28 floats
// bound by instructions (63% of DRAM bandwidth, against 93% for sum).
__device__ __forceinline__ void rj_fold_batch(Acc &in, rj_flt &F, const Params &P, long long o, const long long *lo,
                                              const long long *sz, long long t, long long step)
{
#if RJ_FOLD_DIRECT
#pragma unroll
    for (int u = 0; u < RJ_UNROLL; u++) acc_elem(in, F, P, o, lo, sz, t + (long long)u * step);
#else
    Acc x[RJ_UNROLL];
#pragma unroll
    for (int u = 0; u < RJ_UNROLL; u++) {
        acc_init(x[u]);
        acc_elem(x[u], F, P, o, lo, sz, t + (long long)u * step);
    }
#pragma unroll
    for (int u = 0; u < RJ_UNROLL; u++) acc_combine(in, x[u]);
#endif
}

// What a batch loop leaves: the at most RJ_UNROLL - 1 elements t, t + step,
// ... < end, folded into `in` in order, four loads at a time.  Fixed loops
// with guards, not `for (; t < end; t += step)`: NVVM could not tell that
// loop was short and unrolled it 16, 8 and 4 times over (this and the
// partials' loop below took sum(x)'s SASS from 712 instructions to 496, its
// NVRTC time by a fifth).  The guards become predicates, so a
// group's loads are all issued before the first is folded.  Groups of four:
// all seven at once took sum(x) in f64 from 32 registers to 36 and the row
// sums' kernel to 40, a block an SM less; in fours no kernel of the JIT
// benchmark falls in occupancy (CSR's thread-per-row kernel went from 34 to
// 38, allocated as 40 either way; sum(x) in f32 from 38 to 31).
__device__ __forceinline__ void rj_fold_tail(Acc &in, rj_flt &F, const Params &P, long long o, const long long *lo,
                                             const long long *sz, long long t, long long end, long long step)
{
#pragma unroll
    for (int h = 0; h < RJ_UNROLL - 1; h += 4) {
        if (t + (long long)h * step >= end) break;
#pragma unroll
        for (int u = h; u < h + 4 && u < RJ_UNROLL - 1; u++)
            if (t + (long long)u * step < end) acc_elem(in, F, P, o, lo, sz, t + (long long)u * step);
    }
}

// A contiguous range [begin, end) of the linear domain of output `o`,
// folded by the whole block.  Commutative operators: each thread strides
// through the range with RJ_UNROLL independent elements in flight, then one
// block tree.  Ordered operators: tile by tile, each tile reduced by the block
// and folded in order by thread 0.
__device__ __forceinline__ Acc rj_block_range(const Params &P, long long o, const long long *lo,
                                              const long long *sz, long long begin, long long end)
{
    Acc a;
    acc_init(a);
    rj_flt F;
    rj_flt_init(F);
#if RJ_ORDERED
    for (long long base = begin; base < end; base += RJ_BLOCK) {
        Acc x;
        acc_init(x);
        long long t = base + threadIdx.x;
        if (t < end) acc_elem(x, F, P, o, lo, sz, t);
        x = rj_block_reduce(x);
        if (threadIdx.x == 0) acc_combine(a, x);
    }
    rj_flush(P, F);
    return a;
#else
    // two levels: a fresh inner accumulator every RJ_INNER elements keeps
    // float sums over millions of elements per thread accurate
    Acc in;
    acc_init(in);
    int k = 0;
    long long t = begin + threadIdx.x;
    for (; t + (RJ_UNROLL - 1) * RJ_BLOCK < end; t += RJ_UNROLL * RJ_BLOCK) {
        rj_fold_batch(in, F, P, o, lo, sz, t, RJ_BLOCK);
        if (++k == RJ_INNER / RJ_UNROLL) {
            acc_combine(a, in);
            acc_init(in);
            k = 0;
        }
    }
    rj_fold_tail(in, F, P, o, lo, sz, t, end, RJ_BLOCK);
    acc_combine(a, in);
    rj_flush(P, F);
    return rj_block_reduce(a);
#endif
}

// One thread folds elements begin, begin+step, ... < end in order, in two
// levels (see rj_block_range): contiguous runs stay left-to-right.
__device__ __forceinline__ Acc rj_thread_run(const Params &P, long long o, const long long *lo,
                                             const long long *sz, long long begin, long long end, int step)
{
    Acc a, in;
    acc_init(a);
    acc_init(in);
    rj_flt F;
    rj_flt_init(F);
    int k = 0;
    long long t = begin;
    for (; t + (long long)(RJ_UNROLL - 1) * step < end; t += (long long)RJ_UNROLL * step) {
        rj_fold_batch(in, F, P, o, lo, sz, t, step);
        if (++k == RJ_INNER / RJ_UNROLL) {
            acc_combine(a, in);
            acc_init(in);
            k = 0;
        }
    }
    rj_fold_tail(in, F, P, o, lo, sz, t, end, step);
    acc_combine(a, in);
    rj_flush(P, F);
    return a;
}

// Combine the partials of nblk blocks in order (one block); thread 0 gets it.
__device__ __forceinline__ Acc rj_combine_partials(const Acc *part, long long nblk)
{
    long long per = (nblk + RJ_BLOCK - 1) / RJ_BLOCK;
    long long b = threadIdx.x * per, e = b + per < nblk ? b + per : nblk;
    Acc a;
    acc_init(a);
    // Four at a time, behind guards, their loads issued together: one
    // round trip to L2 for every four partials, without the remainder code
    // of `#pragma unroll 4` (NVRTC time); eight or sixteen were no faster
    // and slowed argmax (bench/TUNING.md).
#pragma unroll 1
    for (long long i = b; i < e; i += 4) {
        Acc x[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (i + j < e) x[j] = part[i + j];
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (i + j < e) acc_combine(a, x[j]);
    }
    return rj_block_reduce(a);
}

// The next pass run per output (RJ_EPI, codegen/epilogue.c's epi_out), where
// the runtime asks for it (RJ_EPION), after output o's result is written by
// the first of the `group` threads that reduced it (this one is `lane`):
// RJ_EPI 2, the map over o's domain, its cnt elements shared by the group
// once the result is visible to all of them (RJ_EPION 2: over 16-byte
// vectors, epi_out_v); RJ_EPI 1, o's one element, by
// the thread that wrote the result.  valid 0: no output (past the end), but
// the group's threads still meet at the barrier.
__device__ __forceinline__ void rj_epilogue(const Params &P, long long o, int valid, const long long *lo,
                                            const long long *sz, long long cnt, int lane, int group)
{
#if RJ_EPI
    if (!P.v[RJ_EPION]) return;
#if RJ_EPI == 2
    if (group >= RJ_BLOCK) __syncthreads();
    else if (group > 1) __syncwarp();
#if RJ_EPIV
    if (P.v[RJ_EPION] == 2) {   // over 16-byte vectors (the runtime's check)
        epi_out_v(P, o, lo, valid ? cnt : 0, lane, group);
        return;
    }
#endif
    epi_out(P, o, lo, sz, valid ? cnt : 0, lane, group);
#else
    (void)cnt;
    epi_out(P, o, lo, sz, valid ? 1 : 0, lane, group);
#endif
#else
    (void)P, (void)o, (void)valid, (void)lo, (void)sz, (void)cnt, (void)lane, (void)group;
#endif
}
