// rj_reduce.cuh -- device code that does not depend on the expression: the
// reduction strategies, written once against the names every generated
// kernel defines before this text (Acc, acc_init, acc_combine, acc_shfl_down,
// acc_elem, acc_write, out_range).  Whatever folds elements keeps an rj_flt
// (its first bad subscript) and ends with rj_flush.  Embedded into the library at
// build time and pasted after the generated part of each kernel.
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
    // round trip to L2 for every four partials.  (Grids of three waves put
    // 13 partials on a thread; the first four so and the rest one at a
    // time, as this was before, made those waves slower than one.
    // `#pragma unroll 4` over the whole run issued as many loads, but its
    // remainder code cost NVRTC 12 ms of 188; no unrolling at all saved 21
    // ms and cost sum(x) 1.2 to 1.5 us at 2^24 on the H200.  Eight or
    // sixteen at a time, H200, 2026-11-26, three rounds, us at 2^28 (CUB
    // 245.0-246.9): sum f32 245.3-245.8 (four) / 245.3-245.7 / 244.5-244.9,
    // max 246.4-246.6 / 246.6-247.0 / 247.3-247.5, argmax 258.0-258.9 /
    // 271.2-271.3 / 357.2-357.3; NVRTC 77 / 82 / 90 ms for sum(x) here.)
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

// ---- full reductions (one output) --------------------------------------------

// tree and persistent, first stage: block b folds its contiguous range.
__device__ __forceinline__ Acc rj_full_block_fold(const Params &P, long long b)
{
    long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
    out_range(P, 0, lo, sz);
    long long n = P.v[RJ_N], per = P.v[RJ_PER];
    long long begin = b * per, end = begin + per < n ? begin + per : n;
    return rj_block_range(P, 0, lo, sz, begin, end);   // valid in thread 0
}

__device__ __forceinline__ void rj_full_block_stage(const Params &P, long long b)
{
    Acc a = rj_full_block_fold(P, b);
    if (threadIdx.x == 0) ((Acc *)P.v[RJ_PARTIALS])[b] = a;
}

// sequential, first stage: each thread folds a contiguous run in order.
__device__ __forceinline__ void rj_full_seq_stage(const Params &P)
{
    long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
    out_range(P, 0, lo, sz);
    long long n = P.v[RJ_N], per = P.v[RJ_PER];
    long long g = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x;
    long long begin = g * per, end = begin + per < n ? begin + per : n;
    Acc a = rj_thread_run(P, 0, lo, sz, begin, end, 1);
    a = rj_block_reduce(a);
    if (threadIdx.x == 0) ((Acc *)P.v[RJ_PARTIALS])[blockIdx.x] = a;
}

__device__ __forceinline__ void rj_full_final(const Params &P)
{
    Acc a = rj_combine_partials((const Acc *)P.v[RJ_PARTIALS], P.v[RJ_NBLK]);
    if (threadIdx.x == 0) acc_write(P, 0, a);
    rj_publish(P);
}

// persistent: a grid that fills the GPU once; the last block to finish
// combines every block's partial (after its stage wrote it), so the whole
// reduction is one launch.
// A grid of one block (small inputs) has its answer in thread 0 already
// (`a`): written straight out, without the fence, the ticket and the second
// block reduction over one partial (7.1 us a call at 2^10, event-timed on
// the H200, against 6.0 for rj_segb's single block).
__device__ __forceinline__ void rj_persist_finish(const Params &P, const Acc &a)
{
    Acc t = a;
    if (gridDim.x > 1) {
        // the ticket: one atomic that releases this block's partial (and,
        // through the barrier before it, every thread's fault record) and,
        // in the last block, acquires all the others' (the barrier after it
        // passes that on to the block's other threads).  In place of a
        // fence by every thread, the atomic, and a fence again in the last
        // block: H200, 2026-11-26, event-timed, three rounds in one call,
        // us at 2^16 / 2^20 / 2^22 / 2^24: 7.94-8.19 / 10.46-10.62 /
        // 13.82-13.89 / 25.28-25.41 against 8.42-9.68 / 10.91-12.13 /
        // 14.59-15.65 / 25.73-27.30; a dot product at 2^28 483.4-483.9
        // against 484.4-486.7.
        __shared__ int last;
        __syncthreads();
        if (threadIdx.x == 0) {
            ((Acc *)P.v[RJ_PARTIALS])[blockIdx.x] = a;
            unsigned *ctr = (unsigned *)P.v[RJ_COUNTER];
            unsigned ticket;
#if __CUDA_ARCH__ >= 700
            asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], 1;\n" : "=r"(ticket) : "l"(ctr) : "memory");
#else
            __threadfence();
            ticket = atomicAdd(ctr, 1u);
            __threadfence();
#endif
            last = ticket == gridDim.x - 1;
        }
        __syncthreads();
        if (!last) return;
        t = rj_combine_partials((const Acc *)P.v[RJ_PARTIALS], gridDim.x);
        if (threadIdx.x == 0) *(unsigned *)P.v[RJ_COUNTER] = 0u;   // ready for the next launch
    }
    // one copy of the result's write and of rj_publish for both grid sizes
    if (threadIdx.x == 0) acc_write(P, 0, t);
    rj_publish(P);
}

__device__ __forceinline__ void rj_full_persistent(const Params &P)
{
    rj_persist_finish(P, rj_full_block_fold(P, blockIdx.x));
}

#if RJ_VEC && !RJ_KEYED && !RJ_RVEC
// A batch of RJ_VUNROLL whole vectors folded into `in` in order: into
// fresh accumulators first, combined in order, as rj_fold_batch does;
// argmin and argmax straight into `in`.
__device__ __forceinline__ void rj_fold_vbatch(Acc &in, const Params &P, const Vld *L, long long o,
                                               const long long *lo, long long u, int step)
{
#if RJ_FOLD_DIRECT
#pragma unroll
    for (int j = 0; j < RJ_VUNROLL; j++) acc_elem_v(in, P, L[j], o, lo, u + (long long)j * step);
#else
    Acc x[RJ_VUNROLL];
#pragma unroll
    for (int j = 0; j < RJ_VUNROLL; j++) {
        acc_init(x[j]);
        acc_elem_v(x[j], P, L[j], o, lo, u + (long long)j * step);
    }
#pragma unroll
    for (int j = 0; j < RJ_VUNROLL; j++) acc_combine(in, x[j]);
#endif
}

// Contiguous reductions (the runtime's vec_ok): output o's elements begin
// .. end-1 (begin a multiple of RJ_VEC), RJ_VEC of them a 16-byte load of
// each array (acc_load_v, then acc_elem_v folds them), RJ_VUNROLL such loads
// in flight per thread; this thread takes the vectors first, first + step,
// ..., the last of them cut short where the domain ends inside it.
// Commutative operators only; no subscript to check.  Scalar loads at a
// stride the kernel reads from its parameters, 8 in flight, left sum(x) of
// 2^28 floats at 91.6% of DRAM bandwidth with 57.4 M warp instructions,
// against CUB's 95.2% with 24.6 M (ncu, H200); these reach CUB's time.
__device__ __forceinline__ Acc rj_run_v(const Params &P, long long o, const long long *lo, long long begin,
                                        long long end, int first, int step)
{
    Acc a, in;
    acc_init(a);
    acc_init(in);
    int k = 0;
    long long vend = end / RJ_VEC;   // whole vectors, then fewer than RJ_VEC elements
    // whole batches of RJ_VUNROLL vectors, unguarded: their loads are all
    // issued before the first fold.  NVVM unrolls this loop four times (8
    // loads a thread in flight), which is much of the kernel's NVRTC time
    // and of its speed.  Tried on the H200 and not kept (2026-11-26, three
    // rounds each in one call, us at 2^28): the batch folded by a loop over
    // its vectors, one copy of acc_elem_v (NVRTC median of jit_compile's
    // kernels 80 -> 66 ms here), left 2 loads in flight: sum f32
    // 247.2-247.9 -> 248.1-250.6, sum i32 246.0-246.5 -> 249.2-251.5,
    // argmax 259.3-261.8 -> 268.5-270.8; the next batch's loads issued
    // before this one's fold (4 in flight, 30 registers), 242.3-244.3 ->
    // 243.0-245.4; RJ_VUNROLL 4, 242.0-242.4 against CUB's 240.8-243.7, but
    // rows of 8 floats (rj_seg1v) 283.4-284.6 -> 313.2-314.0 and NVRTC 8 ms
    // more a kernel.
    long long u = begin / RJ_VEC + first;
    for (; u + (long long)(RJ_VUNROLL - 1) * step < vend; u += (long long)RJ_VUNROLL * step) {
        Vld L[RJ_VUNROLL];
#pragma unroll
        for (int j = 0; j < RJ_VUNROLL; j++) acc_load_v(L[j], P, o, lo, u + (long long)j * step);
        rj_fold_vbatch(in, P, L, o, lo, u, step);
        if (++k == RJ_INNER / (RJ_VUNROLL * RJ_VEC)) {
            acc_combine(a, in);
            acc_init(in);
            k = 0;
        }
    }
    // what is left (fewer than RJ_VUNROLL whole vectors, then fewer than
    // RJ_VEC elements), one element at a time: a batch of its own, cut
    // short by guards, cost NVRTC a fifth of the kernel's time, and so did
    // the generic acc_elem.  A 16-byte load a whole vector here, then the
    // elements, was no faster (H100, two rounds each, us, auto: sum(x) of
    // 2^10 floats 9.0 and 8.1 against 7.6 and 8.4; of 2^12 10.1 and 9.9
    // against 9.3 and 9.2; rows of 12 floats, 2^20 of them, 28.4 and 28.6
    // against 27.1 and 27.9), and cost NVRTC 4 to 9 ms a kernel (this
    // CPU, 2026-11-26)
#pragma unroll 1
    for (long long t = u * RJ_VEC; t < end; t += (t % RJ_VEC == RJ_VEC - 1) ? (long long)(step - 1) * RJ_VEC + 1 : 1)
        acc_elem_1(in, P, o, lo, t);
    acc_combine(a, in);
    return a;
}

// rj_full_block_fold over 16-byte vectors (RJ_PER is a multiple of RJ_VEC).
__device__ __forceinline__ Acc rj_full_vec_fold(const Params &P, long long b)
{
    long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
    out_range(P, 0, lo, sz);
    long long n = P.v[RJ_N], per = P.v[RJ_PER];
    long long begin = b * per, end = begin + per < n ? begin + per : n;
    if (end < begin) end = begin;   // a block past the end: nothing
    return rj_block_reduce(rj_run_v(P, 0, lo, begin, end, threadIdx.x, RJ_BLOCK));   // valid in thread 0
}

__device__ __forceinline__ void rj_full_persistent_vec(const Params &P)
{
    rj_persist_finish(P, rj_full_vec_fold(P, blockIdx.x));
}

// rj_segnv: contiguous rows of a few vectors, w lanes a row (P.v[RJ_PER],
// a power of 2 up to 16): lane l takes vectors l, l + w, ... of its row,
// then a tree of w lanes.  Two rows a step (o and o + ng), both rows' loads
// issued before either is folded.  Rows of 64 floats took rj_seg1v (a
// thread a row, 16 vectors) 391-393 us for 2^28 floats and this 280 at 4
// lanes (H200); for rows of 2 to 8 vectors a thread a row stayed faster
// (gpu.c, row_min).  Every output has the same domain (vec_ok).
__device__ __forceinline__ void rj_segmented_vec_lanes(const Params &P)
{
    long long nout = P.v[RJ_NOUT];
    int w = (int)P.v[RJ_PER], sh = __ffs(w) - 1;
    int lane = threadIdx.x & (w - 1);
    long long gid = ((long long)blockIdx.x * RJ_BLOCK + threadIdx.x) >> sh;
    long long ng = ((long long)gridDim.x * RJ_BLOCK) >> sh;
    long long iters = (nout + 2 * ng - 1) / (2 * ng);   // uniform: the trees' shuffles
    for (long long it = 0; it < iters; it++) {
        // rows past the end read row 0 (uniform trips), and are not written
        long long r0 = gid + 2 * it * ng, r1 = r0 + ng;
        long long o0 = r0 < nout ? r0 : 0, o1 = r1 < nout ? r1 : 0;
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        long long cnt = out_range(P, o0, lo, sz);   // no loads; the same domain for o1
        long long nv = cnt / RJ_VEC;
        Acc a0, a1;
        acc_init(a0);
        acc_init(a1);
        for (long long u = lane; u < nv; u += w) {
            Vld L0, L1;
            acc_load_v(L0, P, o0, lo, u);
            acc_load_v(L1, P, o1, lo, u);
            acc_elem_v(a0, P, L0, o0, lo, u);
            acc_elem_v(a1, P, L1, o1, lo, u);
        }
#pragma unroll 1
        for (long long t = nv * RJ_VEC + lane; t < cnt; t += w) {   // fewer than RJ_VEC left
            acc_elem_1(a0, P, o0, lo, t);
            acc_elem_1(a1, P, o1, lo, t);
        }
        a0 = rj_warp_reduce(a0, w);
        a1 = rj_warp_reduce(a1, w);
        if (lane == 0 && r0 < nout) acc_write(P, r0, a0);
        if (lane == 0 && r1 < nout) acc_write(P, r1, a1);
    }
}

// A block per output over 16-byte vectors (rj_segbv): long contiguous rows.
__device__ __forceinline__ void rj_segmented_vec_block(const Params &P)
{
    long long nout = P.v[RJ_NOUT];
    for (long long o = blockIdx.x; o < nout; o += gridDim.x) {   // uniform in the block
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        long long cnt = out_range(P, o, lo, sz);
        Acc a = rj_block_reduce(rj_run_v(P, o, lo, 0, cnt, threadIdx.x, RJ_BLOCK));
        if (threadIdx.x == 0) acc_write(P, o, a);
    }
}

// rj_segmented's thread (group 1) and warp (32) per output over 16-byte
// vectors: rows whose reduced dimension is contiguous.
__device__ __forceinline__ void rj_segmented_vec(const Params &P, int group)
{
    long long nout = P.v[RJ_NOUT];
    long long gid = ((long long)blockIdx.x * RJ_BLOCK + threadIdx.x) / group;
    long long ngroups = (long long)gridDim.x * RJ_BLOCK / group;
    int lane = threadIdx.x % group;
    // every lane of a warp runs the same number of iterations (shuffles)
    long long iters = (nout + ngroups - 1) / ngroups;
    for (long long it = 0; it < iters; it++) {
        long long o = gid + it * ngroups;
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        long long cnt = out_range(P, o, lo, sz);   // no loads: the domain is the same for every output
        if (o >= nout) cnt = 0;
        Acc a = rj_run_v(P, o, lo, 0, cnt, lane, group);
        if (group > 1) a = rj_warp_reduce(a, group);
        if (o < nout && lane == 0) acc_write(P, o, a);
    }
}
#endif

// A thread per output: outputs gid, gid + ng, ..., each folded in two
// parts: head(o, lo, sz, cnt) issues the output's first loads, straight-line
// code with no store, and returns them; then the next output's range is
// read; then tail(o, lo, sz, cnt, h) folds them and the rest of the domain.
// The next range's loads thus go out beside this output's first loads, and
// one round trip to memory an output is waited for, not two.  With the
// next range read first (rj_seg1, whose head issues nothing), a row's
// loads could not pass out_range's fault record (a store that may alias
// them), so a short CSR row waited for its offsets and then for its
// values: in rj_seg1s, 31.6% of the stall samples on the offsets and 43.5%
// on the values (ncu, rows of 3, 2^26 f32, H200).  The next output's index
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
// folded, what it has past four goes four at a time.  rj_seg1 multiplied a
// 64-bit stride for every element: rows of 3 (2^26 f32 values, H200) took
// 151.9 us with 109.4 M warp instructions, this 142.5 with 71.9 M (ncu).
// Both wait on loads (warps stalled on them 79% of the time, DRAM 68%
// busy), but more in flight a thread cost registers and warps and was
// slower: two rows at a time 185.2 us, three 174.0, four 205.0; ranges
// read two rows ahead and each row's lines asked of L1 (prefetch.global.L1)
// a row ahead, 38 registers: 146.8-148.9, capped at 32 (spilling) 196.1.
// What held it was the order (rj_rows_split): with the row's first loads
// issued before the next range is read, rows of 3 took 121.1-121.8 us
// against 141.4-142.9 in the same call (H200, 2026-11-26; 120.6-121.1 in
// three later calls; 114.2 us in ncu, DRAM 79.8% busy, the offsets' wait
// now 44.5% of the stall samples and the values' 19.2%).  Then tried and
// not kept (same day): the next row's first loads issued a row ahead too
// (ranges two rows ahead), 142.1-161.5 us at every grid; grids of 4, 8,
// 12, 16, 64 (the default) and 128 blocks an SM, 153.3-153.7 / 118.3-120.6 / 130.0-131.2 / 120.2-121.3 /
// 120.6-121.1 / 123.6-124.3, within the noise at 8 to 64; the offsets
// that out_range would load 2, 3 or 4 rows ahead asked of L2 (a generated
// out_range_pf, prefetch.global.L2), 128.5-131.6 against 120.6-121.4.
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
        }
        return;
    }
    for (long long o = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x; o < nout;
         o += (long long)gridDim.x * RJ_BLOCK) {
        Acc a;
        acc_init(a);
        for (long long c = 0; c < nc; c++) acc_combine(a, part[c * nout + o]);
        acc_write(P, o, a);
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

// ---- keys -------------------------------------------------------------------
#if RJ_KEYED

// Sorted keys are the common case.  rj_key_ends reads the first and the
// last key (the host sizes the result from them; a run may skip it and take
// the count from the run before, which rj_key_fused then checks), and
// rj_key_fused (below) reduces the keys in one pass, checking on the way that
// they are sorted and within 0..nkeys-1.  Forced tree, sequential and
// persistent strategies take rj_key_offsets instead, which writes the segment
// starts (with the same checks) for the segment kernels.  Keys that fail the
// checks take rj_key_scan and private rows.

// P.v[RJ_KSTATS][0..1] = first and last key; [2] = 0, the flag word
// rj_key_offsets and rj_key_fused raise.  One thread.
__device__ __forceinline__ void rj_key_ends(const Params &P)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
    out_range(P, 0, lo, sz);
    long long n = P.v[RJ_N];
    rj_flt F;
    rj_flt_init(F);
    long long *st = (long long *)P.v[RJ_KSTATS];
    st[0] = key_at(F, P, lo, sz, 0);
    st[1] = key_at(F, P, lo, sz, n - 1);
    st[2] = 0;
    rj_flush(P, F);
}

// offs[k] = first element whose key is >= k, offs[nkeys] = n, for keys that
// never decrease.  Each warp takes RJ_KUNROLL runs of 32 consecutive
// elements at a time, all loaded before any is used: a key's predecessor is
// the lane before's key (a shuffle), lane 31's of the run before for lane 0,
// and one extra load for the warp's first element, so each key is loaded
// about once.  A decrease, or a key outside 0..nkeys-1, sets
// P.v[RJ_KSTATS][2]; the offsets are then not used.
#define RJ_KUNROLL 8
__device__ __forceinline__ void rj_key_offsets(const Params &P)
{
    long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
    out_range(P, 0, lo, sz);
    long long n = P.v[RJ_N], nk = P.v[RJ_NOUT];
    long long *offs = (long long *)P.v[RJ_OFFS];
    rj_flt F;
    rj_flt_init(F);
    int lane = threadIdx.x & 31, bad = 0;
    long long warp = ((long long)blockIdx.x * RJ_BLOCK + threadIdx.x) >> 5;
    long long span = 32 * RJ_KUNROLL, stride = (long long)gridDim.x * (RJ_BLOCK / 32) * span;
    for (long long base = warp * span; base < n; base += stride) {   // uniform in the warp
        long long k[RJ_KUNROLL];
#pragma unroll
        for (int u = 0; u < RJ_KUNROLL; u++) {   // past the end: the last element again
            long long t = base + u * 32 + lane;
            k[u] = key_at(F, P, lo, sz, t < n ? t : n - 1);
        }
        long long kfirst = lane == 0 && base > 0 ? key_at(F, P, lo, sz, base - 1) : -1;
#pragma unroll
        for (int u = 0; u < RJ_KUNROLL; u++) {
            long long t = base + u * 32 + lane;
            long long kp = __shfl_up_sync(0xffffffffu, k[u], 1);
            long long kl = __shfl_sync(0xffffffffu, u > 0 ? k[u > 0 ? u - 1 : 0] : kfirst, 31);
            if (lane == 0) kp = u > 0 ? kl : kfirst;
            if (t >= n) continue;
            if (k[u] != kp) {   // t == 0: kp is -1
                bad |= k[u] < kp || k[u] >= nk;
                long long q = kp + 1 > 0 ? kp + 1 : 0, qe = k[u] < nk - 1 ? k[u] : nk - 1;
                for (; q <= qe; q++) offs[q] = t;
            }
            if (t == n - 1) offs[nk] = n;
        }
    }
    rj_flush(P, F);
    if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr((unsigned long long *)P.v[RJ_KSTATS] + 2, 1ull);
}

// Any keys: the smallest and the largest, and whether they never decrease
// (integers: atomics are exact; one set a block).
__device__ __forceinline__ void rj_key_scan(const Params &P)
{
    __shared__ long long smin[RJ_BLOCK / 32], smax[RJ_BLOCK / 32];
    __shared__ unsigned ssorted[RJ_BLOCK / 32];
    long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
    out_range(P, 0, lo, sz);
    long long n = P.v[RJ_N];
    long long kmin = 0x7fffffffffffffffll, kmax = -1;
    unsigned sorted = 1;
    rj_flt F;
    rj_flt_init(F);
    long long stride = (long long)gridDim.x * RJ_BLOCK;
    for (long long t0 = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x; t0 < n; t0 += RJ_UNROLL * stride) {
        long long k[RJ_UNROLL], kp[RJ_UNROLL];
#pragma unroll
        for (int u = 0; u < RJ_UNROLL; u++) {   // past the end: the last element again, no change
            long long t = t0 + u * stride, tc = t < n ? t : n - 1;
            k[u] = key_at(F, P, lo, sz, tc);
            kp[u] = key_at(F, P, lo, sz, tc > 0 ? tc - 1 : 0);
        }
#pragma unroll
        for (int u = 0; u < RJ_UNROLL; u++) {
            kmin = min(kmin, k[u]);
            kmax = max(kmax, k[u]);
            if (kp[u] > k[u]) sorted = 0;
        }
    }
    rj_flush(P, F);
    for (int d = 16; d > 0; d >>= 1) {
        kmin = min(kmin, __shfl_down_sync(0xffffffffu, kmin, d));
        kmax = max(kmax, __shfl_down_sync(0xffffffffu, kmax, d));
        sorted &= __shfl_down_sync(0xffffffffu, sorted, d);
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        smin[warp] = kmin;
        smax[warp] = kmax;
        ssorted[warp] = sorted;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    for (int w = 1; w < RJ_BLOCK / 32; w++) {
        kmin = min(kmin, smin[w]);
        kmax = max(kmax, smax[w]);
        sorted &= ssorted[w];
    }
    long long *st = (long long *)P.v[RJ_KSTATS];
    atomicMin(&st[0], kmin);
    atomicMax(&st[1], kmax);
    if (!sorted) atomicAnd((unsigned *)&st[2], 0u);
}

// ---- sorted keys in one pass ---------------------------------------------------
// rj_key_fused reads keys and values once and writes each key's result
// directly: no segment starts, no second read.  A warp walks a contiguous
// range in tiles of 32 RJ_KT elements: loaded in coalesced rows, passed
// through shared memory, and folded by each lane over RJ_KT consecutive
// elements, where a run of equal keys costs a compare and a combine an
// element and a run that starts and ends in the lane is written at once.
// What crosses lanes is settled once a tile: each lane's last run continues
// in the next lane unless that lane starts a run, so an in-order fold over
// lanes (shuffles, as many steps as the longest chain of lanes needs) gives
// each lane the run coming into it.  The run open at the tile's end is the
// carry into the next (lane 0 holds it).  Only the warp's first complete run
// and its last run may continue across the warp's ends: they go to shared
// memory as the warp's two items, warp 0 folds the block's items the same
// way (rj_key_items: items are sorted by key too), and the last block to
// finish folds the blocks' items, writing what is left.  Every fold takes
// (earlier, later), so ordered operators keep their order, and every key's
// result is written exactly once.  A key that decreases or lies outside
// 0..nkeys-1 raises P.v[RJ_KSTATS][2] (the host then falls back to private
// rows) and is never written.  Keys with no elements get the identity from
// the element after them, as with the segment starts.

// elements a lane folds in a row in rj_kfused: the tile, keys and
// accumulators, sits in shared memory (8 warps, each lane's row padded by
// one against bank conflicts); the host uses these kernels for accumulators
// of up to 32 bytes
#define RJ_KT (sizeof(Acc) <= 8 ? 8 : sizeof(Acc) <= 16 ? 4 : 2)
#define RJ_KROW (RJ_KT + 1)
#define RJ_KTILE (sizeof(Acc) <= 32 ? 32 * RJ_KROW : 1)

// Keys in the tiles: 32-bit when the key expression is an int (half the
// shared memory, the compares and the shuffles), else 64-bit.  As unsigned,
// a negative key is out of range too.
#if RJ_KEY32
typedef int rj_key;
typedef unsigned rj_ukey;
#else
typedef long long rj_key;
typedef unsigned long long rj_ukey;
#endif

__device__ __forceinline__ void rj_key_put(const Params &P, long long k, const Acc &a, long long nk, int &bad)
{
    if ((unsigned long long)k < (unsigned long long)nk) acc_write(P, k, a);
    else bad = 1;
}

// keys kp+1 .. k-1 have no elements: the identity (callers test k > kp + 1
// first, so the loop is off the common path)
__device__ __forceinline__ void rj_key_gap(const Params &P, long long kp, long long k, long long nk)
{
    Acc id;
    acc_init(id);
    for (long long q = kp + 1 > 0 ? kp + 1 : 0; q < k && q < nk; q++) acc_write(P, q, id);
}

// Reduce by key the items (ik, ia) begin..end-1, sorted by key, a warp at a
// time, 32 items a step.  Complete runs are written, except the first when
// keep_first (it goes to hk/ha, -1 if none completed); the run open at the
// end is returned in tk/ta.  ha and ta are valid in lane 0.
__device__ __forceinline__ void rj_key_items(const Params &P, const long long *ik, const Acc *ia, long long begin,
                                             long long end, bool keep_first, long long &hk, Acc &ha, long long &tk,
                                             Acc &ta, int &bad)
{
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    long long nk = P.v[RJ_NOUT];
    long long ck = -1;   // the carry: the run open before this step, its fold in lane 0
    Acc ca;
    acc_init(ca);
    acc_init(ha);
    hk = -1;
    bool live = false, want = keep_first;
    for (long long base = begin; base < end; base += 32) {   // uniform in the warp
        long long t = base + lane;
        long long k = ik[t < end ? t : end - 1];   // past the end: the last key, no value
        Acc a;
        if (t < end) a = ia[t];
        else acc_init(a);
        long long kp = __shfl_up_sync(full, k, 1);
        if (lane == 0) kp = ck;
        bool head = k != kp;
        unsigned heads = __ballot_sync(full, head), starts = heads | 1u;
        unsigned above = heads & ~((2u << lane) - 1u);   // lane 31: 2u << 31 is 0
        int rend = above ? __ffs(above) - 2 : 31;
        // suffix fold within runs: each run's fold, in order, in its first lane
        for (int s = 1; s < 32; s <<= 1) {
            Acc o = acc_shfl_down(a, s);
            if (lane + s <= rend) acc_combine(a, o);
        }
        bool c_done = live && (heads & 1u);   // the carry ended at the last step
        if (lane == 0 && !(heads & 1u)) {     // lane 0's run goes on with it
            Acc c = ca;
            acc_combine(c, a);
            a = c;
        }
        bool mine = ((starts >> lane) & 1u) && rend < 31;   // a run that ends in this step
        unsigned comp = __ballot_sync(full, mine);
        int first = want && !c_done && comp ? __ffs(comp) - 1 : -1;   // uniform
        if (first >= 0) {
            Acc h = acc_shfl_idx(a, first);
            long long hkey = __shfl_sync(full, k, first);
            if (lane == 0) {
                ha = h;
                hk = hkey;
            }
        }
        if (lane == 0 && c_done) {
            if (want) {
                ha = ca;
                hk = kp;   // lane 0's kp is the carry's key
            } else {
                rj_key_put(P, kp, ca, nk, bad);
            }
        }
        if (c_done || comp) want = false;
        if (mine && lane != first) rj_key_put(P, k, a, nk, bad);
        Acc nc = acc_shfl_idx(a, 31 - __clz(starts));   // the run open at lane 31
        if (lane == 0) ca = nc;
        ck = __shfl_sync(full, k, 31);
        live = true;
    }
    tk = ck;
    ta = ca;
}

// A completed run in rj_key_fold's slots: aligned to its size where that
// is 8 or 16 bytes (f32 values with i32 keys, f64 with i64), so that it
// goes in and out of shared memory in one access
#define RJ_SLOT_BYTES (sizeof(Acc) + sizeof(rj_key))
#define RJ_SLOT_ALIGN (alignof(Acc) > alignof(rj_key) ? alignof(Acc) : alignof(rj_key))
struct alignas(RJ_SLOT_BYTES == 8 ? 8 : RJ_SLOT_BYTES == 16 ? 16 : RJ_SLOT_ALIGN) RjSlot {
    Acc a;
    rj_key k;
};

// One tile's fold (see above): this lane's KT consecutive elements k[],
// x[], in order; kprev: the key of the element before them.  Its first run
// may come from the lane before; a run that starts and ends here is written
// now.  The carry (ck, ca in lane 0: the run open before this tile) becomes
// the run open at its end; the warp's first complete run goes to hk/ha
// while `want`.
//
// S: the completed runs go through shared memory, sl (the warp's 32 KT
// slots), in key order, and are written from there, 32 consecutive keys a
// store.  Stored from the fold itself, a warp's store of runs of 3 touched
// a sector a lane: the keys of length 3 took 238 us, and 163 without any
// stores (2^26 f32, H200), the L2 88% busy; through the slots, 213, and
// 195 once the keys' checks moved out of the loop and a slot became one
// 8-byte store.  A lane's slots follow the lanes' before it: e1, e2, then
// the runs inside it, as many as its heads (counted before the fold).
// (Slots indexed by key, which need no count or scan but a second fold for
// tiles whose keys have gaps, were slower: 219 to 226 us, and NVRTC took
// 30% longer.)
template <int KT, bool S>
__device__ __forceinline__ void rj_key_fold(const Params &P, const rj_key (&k)[KT], const Acc (&x)[KT], rj_key kprev,
                                            rj_key &ck, Acc &ca, bool &live, bool &want, long long &hk, Acc &ha,
                                            int &bad, RjSlot *sl)
{
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    long long nk = P.v[RJ_NOUT];
    rj_ukey unk = (rj_ukey)nk;   // int keys: nk is at most 2^31
    rj_key fk = k[0], curk = fk;
    bool head0 = fk != kprev;   // past the end: the same key, never
    if (head0) {
        bad |= fk < kprev || (rj_ukey)fk >= unk;
        if ((long long)fk > (long long)kprev + 1) rj_key_gap(P, kprev, fk, nk);
    }
    bool e1 = head0 && (lane > 0 || live);   // the run coming in ends here
    // the lane's keys checked once rather than at each element: none
    // decreases, so the first and the last bound the others in range; a
    // key with no elements between two of them shows as steps that add up
    // to more than the heads
    int nh = 0;   // heads after the first element: runs this lane completes
    bool up = true;
#pragma unroll
    for (int j = 1; j < KT; j++) {
        nh += k[j] != k[j - 1];
        up &= k[j] >= k[j - 1];
    }
    rj_key kl = k[KT - 1];
    bad |= !up || (rj_ukey)fk >= unk || (rj_ukey)kl >= unk;
    bool gapped = up && (long long)kl - (long long)fk > nh;
    int base = 0, total = 0, sb = 0;
    if constexpr (S) {
        int mine = e1 + nh, incl = mine;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            int o = __shfl_up_sync(full, incl, d);
            if (lane >= d) incl += o;
        }
        base = incl - mine;
        total = __shfl_sync(full, incl, 31);
        sb = base + e1 + 1;
    }
    // without branches but for the rare gap: every element selects whether
    // it starts a run, and the run it ends is stored under a predicate (a
    // branch an element diverged for short runs)
    Acc cur = x[0], fa;
    acc_init(fa);
    bool closed = false;   // the first run ended in this lane
#pragma unroll
    for (int j = 1; j < KT; j++) {
        rj_key kj = k[j];
        bool nb = kj != curk;
        if constexpr (S) {   // runs after the first: slots sb, sb + 1, ...
            if (nb && closed) {
                RjSlot t;
                t.a = cur;
                t.k = curk;
                sl[sb] = t;   // one shared store where they fit 8 or 16 bytes
            }
            sb += nb && closed;
        } else {
            if (nb && closed && (rj_ukey)curk < unk) acc_write(P, curk, cur);
        }
        if (nb && !closed) fa = cur;
        closed |= nb;
        Acc c = cur;
        acc_combine(c, x[j]);
        cur = nb ? x[j] : c;
        curk = kj;
    }
    unsigned gaps = 0;   // bit j: keys with no elements between elements j-1 and j
    if (gapped) {
#pragma unroll
        for (int j = 1; j < KT; j++) gaps |= ((long long)k[j] > (long long)k[j - 1] + 1 ? 1u : 0u) << j;
    }
    while (gaps) {   // keys with no elements between this lane's runs
        // the pair around the lowest gap, picked out by selects: one copy
        // of the loop, and no index into k[] that is not a constant (which
        // would put k[] in local memory)
        int jg = __ffs(gaps) - 1;
        gaps &= gaps - 1;
        rj_key ka = k[0], kb = k[0];
#pragma unroll
        for (int j = 1; j < KT; j++) {
            ka = j == jg ? k[j - 1] : ka;
            kb = j == jg ? k[j] : kb;
        }
        rj_key_gap(P, ka, kb, nk);
    }
    unsigned heads = __ballot_sync(full, head0), starts = heads | __ballot_sync(full, closed);
    if (lane == 0 && !head0) {   // lane 0's first run goes on with the carry
        Acc c = ca;
        acc_combine(c, closed ? fa : cur);
        if (closed) fa = c;
        else cur = c;
    }
    // v: the run open at the end of each lane, folded over the lanes it
    // spans (from the last lane at or before this one that starts a run)
    int m = 31 - __clz((starts | 1u) & (full >> (31 - lane)));
#if __CUDA_ARCH__ >= 800
    int longest = (int)__reduce_max_sync(full, (unsigned)(lane - m + 1));
#else
    int longest = lane - m + 1;
    for (int d = 16; d > 0; d >>= 1) longest = max(longest, __shfl_xor_sync(full, longest, d));
#endif
    Acc v = cur;
    for (int s = 1; s < longest; s <<= 1) {   // uniform
        Acc o = acc_shfl_idx(v, lane >= s ? lane - s : 0);
        if (lane - s >= m) {
            acc_combine(o, v);
            v = o;
        }
    }
    Acc before = acc_shfl_idx(v, lane > 0 ? lane - 1 : 0);   // the run coming into this lane
    // what completes here: e1, the run coming in, ended before this lane;
    // e2, this lane's first run, ended inside it
    bool e2 = closed;
    rj_key e1k = kprev, e2k = fk;
    Acc e1a = lane > 0 ? before : ca, e2a = fa;
    if (closed && !head0 && lane > 0) {
        e2a = before;
        acc_combine(e2a, fa);
    }
    // the warp's first complete run is kept for the block: the lowest
    int held = -1;
    bool held1 = false;
    unsigned any = __ballot_sync(full, e1 || e2);
    if (want && any) {   // uniform
        held = __ffs(any) - 1;
        held1 = rj_shfl_idx(e1, held);
        Acc h = acc_shfl_idx(held1 ? e1a : e2a, held);
        rj_key hkey = __shfl_sync(full, held1 ? e1k : e2k, held);
        if (lane == 0) {
            ha = h;
            hk = hkey;
        }
        want = false;
    }
    if constexpr (S) {
        // e1 and e2 take the lane's first slots; the held run is slot 0
        // (no lane before it completed a run), which the flush leaves out
        if (e1) {
            RjSlot t;
            t.a = e1a;
            t.k = e1k;
            sl[base] = t;
        }
        if (e2) {
            RjSlot t;
            t.a = e2a;
            t.k = e2k;
            sl[base + e1] = t;
        }
        __syncwarp();
        for (int q = lane + (held >= 0); q < total; q += 32) {   // key order: coalesced
            RjSlot t = sl[q];
            if ((rj_ukey)t.k < unk) acc_write(P, t.k, t.a);
            else bad = 1;
        }
        __syncwarp();   // read before the next tile's slots are written
    } else {
        if (e1 && !(lane == held && held1)) rj_key_put(P, e1k, e1a, nk, bad);
        if (e2 && !(lane == held && !held1)) rj_key_put(P, e2k, e2a, nk, bad);
    }
    Acc nc = acc_shfl_idx(v, 31);   // the run open at the tile's end
    if (lane == 0) ca = nc;
    ck = __shfl_sync(full, curk, 31);
    live = true;
}

#if RJ_VEC
// rj_kfusedv, where every array the pass loads (keys and values) is
// contiguous with elements of one size (the runtime's vec_ok): each lane
// takes RJ_KVE consecutive elements a tile, RJ_KVT 16-byte loads of each
// array, straight into registers, with no index arithmetic per element and
// no trip through shared memory.  RJ_KVE: 4 vectors (16 elements of 4
// bytes), or RJ_KVT of them (REDJIT_KVT, cuda.c, for sweeps), halved down
// to one vector until a lane's keys and accumulators, as its result slots
// (rj_key_fold), take at most 128 bytes: 32 registers, and 32 KB of slots a
// block.  (At one vector the largest slot, a 32-byte accumulator and an
// 8-byte key, takes 160 bytes a lane: 40 KB a block.)  The host's ranges
// are multiples of 512 elements, 32 RJ_KVE.
__host__ __device__ constexpr int rj_kve_fit(int want)
{
    return want > RJ_VEC && want * (int)sizeof(RjSlot) > 128 ? rj_kve_fit(want / 2) : want;
}
#define RJ_KVE rj_kve_fit(RJ_VEC * (RJ_KVT ? RJ_KVT : 4))

// A tile's parts: rj_key_vloads, a whole tile's 16-byte loads of each
// array (vectors u .. u + KT/RJ_VEC - 1 of this lane); rj_key_conv, its
// keys and values from them; rj_key_cut, a tile cut short by `end`, element
// by element, past the end the last key again with no value.
template <int KT>
__device__ __forceinline__ void rj_key_vloads(const Params &P, const long long *lo, long long u,
                                              Vld (&L)[KT / RJ_VEC])
{
#pragma unroll
    for (int v = 0; v < KT / RJ_VEC; v++) acc_load_v(L[v], P, 0, lo, u + v);
}

template <int KT>
__device__ __forceinline__ void rj_key_conv(const Params &P, const long long *lo, long long u,
                                            const Vld (&L)[KT / RJ_VEC], rj_key (&k)[KT], Acc (&x)[KT])
{
    constexpr int NV = KT / RJ_VEC;
#pragma unroll
    for (int v = 0; v < NV; v++)
#pragma unroll
        for (int c = 0; c < RJ_VEC; c++) {
            k[v * RJ_VEC + c] = (rj_key)key_v(P, L[v], lo, u + v, c);
            acc_init(x[v * RJ_VEC + c]);
            acc_one_v(x[v * RJ_VEC + c], P, L[v], lo, u + v, c);
        }
}

template <int KT>
__device__ __forceinline__ void rj_key_cut(const Params &P, rj_flt &F, const long long *lo, const long long *sz,
                                           long long t0, long long end, rj_key (&k)[KT], Acc (&x)[KT])
{
#pragma unroll
    for (int j = 0; j < KT; j++) {
        long long t = t0 + j, tc = t < end ? t : end - 1;
        acc_init(x[j]);
        k[j] = (rj_key)key_at(F, P, lo, sz, tc);
        if (t < end) acc_elem(x[j], F, P, 0, lo, sz, t);
    }
}

// A tile of rj_kfusedv: lane l's elements base + l KT .. + KT-1; a tile
// that ends past `end` (a warp's last) element by element.
template <int KT>
__device__ __forceinline__ void rj_key_load_v(const Params &P, rj_flt &F, const long long *lo, const long long *sz,
                                              long long base, long long end, rj_key (&k)[KT], Acc (&x)[KT])
{
    long long t0 = base + (threadIdx.x & 31) * KT;
    if (base + 32 * KT <= end) {   // uniform
        Vld L[KT / RJ_VEC];
        long long u = t0 / RJ_VEC;
        rj_key_vloads<KT>(P, lo, u, L);
        rj_key_conv<KT>(P, lo, u, L, k, x);
    } else {
        rj_key_cut<KT>(P, F, lo, sz, t0, end, k, x);
    }
}
#else
#define RJ_KVE 1
struct Vld {};   // never used
template <int KT>
__device__ void rj_key_load_v(const Params &P, rj_flt &F, const long long *lo, const long long *sz, long long base,
                              long long end, rj_key (&k)[KT], Acc (&x)[KT]);
template <int KT>
__device__ void rj_key_vloads(const Params &P, const long long *lo, long long u, Vld (&L)[1]);
template <int KT>
__device__ void rj_key_conv(const Params &P, const long long *lo, long long u, const Vld (&L)[1], rj_key (&k)[KT],
                            Acc (&x)[KT]);
template <int KT>
__device__ void rj_key_cut(const Params &P, rj_flt &F, const long long *lo, const long long *sz, long long t0,
                           long long end, rj_key (&k)[KT], Acc (&x)[KT]);
#endif

// A warp's elements begin..end-1 (see above): rj_kfused's tiles (V false)
// through shared memory, rj_kfusedv's (V) straight from 16-byte loads.
// Returns its first complete run in hk/ha (-1 if none) and its last run in
// tk/ta (ha and ta valid in lane 0); writes every other run.
template <bool V>
__device__ __forceinline__ void rj_key_tiles(const Params &P, rj_flt &F, const long long *lo, const long long *sz,
                                             long long begin, long long end, long long &hk, Acc &ha, long long &tk,
                                             Acc &ta, int &bad)
{
    constexpr int KT = V ? RJ_KVE : RJ_KT;
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    // the carry: the run open before this tile, its fold in lane 0; at the
    // start, the key before the range, whose run is not this warp's
    rj_key ck = begin > 0 ? (rj_key)key_at(F, P, lo, sz, begin - 1) : (rj_key)-1;
    Acc ca, lp;   // lp: this lane's share of the carry (commutative operators)
    acc_init(ca);
    acc_init(lp);
    acc_init(ha);
    hk = -1;
    bool live = false, want = true, shares = false;
#if RJ_KDB
    // the next tile's loads issued as soon as this one's are converted, in
    // flight while it folds
    Vld L[V ? KT / (RJ_VEC ? RJ_VEC : 1) : 1];
    long long lt0 = (threadIdx.x & 31) * KT;
    if constexpr (V)
        if (begin + 32 * KT <= end) rj_key_vloads<KT>(P, lo, (begin + lt0) / RJ_VEC, L);
#endif
    for (long long base = begin; base < end; base += 32 * KT) {   // uniform in the warp
        rj_key k[KT];
        Acc x[KT];
        if constexpr (V) {
#if RJ_KDB
            if (base + 32 * KT <= end) rj_key_conv<KT>(P, lo, (base + lt0) / RJ_VEC, L, k, x);
            else rj_key_cut<KT>(P, F, lo, sz, base + lt0, end, k, x);
            long long nb = base + 32 * KT;
            if (nb + 32 * KT <= end) rj_key_vloads<KT>(P, lo, (nb + lt0) / RJ_VEC, L);
#else
            rj_key_load_v<KT>(P, F, lo, sz, base, end, k, x);
#endif
        } else {
#pragma unroll
            for (int j = 0; j < KT; j++) {   // past the end: the last key again, no value
                long long t = base + j * 32 + lane, tc = t < end ? t : end - 1;
                acc_init(x[j]);
                k[j] = (rj_key)key_at(F, P, lo, sz, tc);
                if (t < end) acc_elem(x[j], F, P, 0, lo, sz, t);
            }
        }
#if !RJ_ORDERED
        // the carry's key all through the tile: each lane folds its share
        bool same = true;
#pragma unroll
        for (int j = 0; j < KT; j++) same &= k[j] == ck;
        if (__all_sync(full, same)) {
#pragma unroll
            for (int j = 0; j < KT; j++) acc_combine(lp, x[j]);
            shares = live = true;
            continue;
        }
        if (shares) {   // the shares join the carry, in lane 0
            Acc w = rj_warp_reduce<1>(lp, 32);
            if (lane == 0) acc_combine(ca, w);
            acc_init(lp);
            shares = false;
        }
#endif
        if constexpr (V) {
            // the runs this tile completes go out through shared memory
            // (rj_key_fold, S)
            __shared__ RjSlot sl[RJ_BLOCK / 32][sizeof(Acc) <= 32 ? 32 * KT : 1];   // (not used past 32 bytes)
            rj_key kprev = __shfl_up_sync(full, k[KT - 1], 1);
            if (lane == 0) kprev = ck;
            rj_key_fold<KT, true>(P, k, x, kprev, ck, ca, live, want, hk, ha, bad, sl[threadIdx.x >> 5]);
        } else {
            // loaded in coalesced rows, folded along a lane's own row: the
            // tile passes through shared memory (each lane's row padded by
            // one against bank conflicts; the row before ends with its pad)
            __shared__ rj_key sk[RJ_BLOCK / 32][RJ_KTILE];
            __shared__ Acc sa[RJ_BLOCK / 32][RJ_KTILE];
            rj_key *wk = sk[threadIdx.x >> 5];
            Acc *wa = sa[threadIdx.x >> 5];
            __syncwarp();   // the last tile is read
#pragma unroll
            for (int j = 0; j < KT; j++) {
                int e = j * 32 + lane, q = e / RJ_KT * RJ_KROW + e % RJ_KT;
                wk[q] = k[j];
                wa[q] = x[j];
            }
            __syncwarp();
            const rj_key *rk = wk + lane * RJ_KROW;
            const Acc *ra = wa + lane * RJ_KROW;
#pragma unroll
            for (int j = 0; j < KT; j++) {
                k[j] = rk[j];
                x[j] = ra[j];
            }
            rj_key_fold<KT, false>(P, k, x, lane > 0 ? rk[-2] : ck, ck, ca, live, want, hk, ha, bad, nullptr);
        }
    }
#if !RJ_ORDERED
    if (shares) {
        Acc w = rj_warp_reduce<1>(lp, 32);
        if (lane == 0) acc_combine(ca, w);
    }
#endif
    (void)shares;
    tk = ck;
    ta = ca;
}

// The block's warps leave their two items each (first complete run, last
// run) in shared memory in order; warp 0 folds them.  keep: the block's own
// first and last runs are kept (bhk/bha, btk/bta, in thread 0); otherwise
// everything is written.
__device__ __forceinline__ void rj_key_block_items(const Params &P, long long *sk, Acc *sa, long long hk, const Acc &ha,
                                                   long long tk, const Acc &ta, bool keep, long long &bhk, Acc &bha,
                                                   long long &btk, Acc &bta, int &bad)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();   // the items of a previous call are read
    if (lane == 0) {
        // no complete run: an empty item with the last run's key folds into it
        sk[2 * warp] = hk >= 0 ? hk : tk;
        if (hk >= 0) sa[2 * warp] = ha;
        else acc_init(sa[2 * warp]);
        sk[2 * warp + 1] = tk;
        sa[2 * warp + 1] = ta;
    }
    __syncthreads();
    if (warp == 0) {
        rj_key_items(P, sk, sa, 0, 2 * (RJ_BLOCK / 32), keep, bhk, bha, btk, bta, bad);
        if (!keep && lane == 0) rj_key_put(P, btk, bta, P.v[RJ_NOUT], bad);
    }
}

// One pass over sorted keys: warp w takes elements [w per, (w+1) per).
// Block b leaves two items at P.v[RJ_OFFS] (keys) and P.v[RJ_PARTIALS]
// (folds), 2b and 2b+1; the last block folds them all.  V: rj_kfusedv's
// tiles (per a multiple of 512).
template <bool V> __device__ __forceinline__ void rj_key_fused(const Params &P)
{
    __shared__ long long ik[2 * (RJ_BLOCK / 32)];   // the warps' items
    __shared__ Acc ia[2 * (RJ_BLOCK / 32)];
    __shared__ int last;
    if (sizeof(Acc) > 32) return;   // the host does not use it then
    long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
    out_range(P, 0, lo, sz);
    long long n = P.v[RJ_N], per = P.v[RJ_PER];
    int warp = threadIdx.x >> 5;
    long long w = (long long)blockIdx.x * (RJ_BLOCK / 32) + warp;
    long long b = w * per < n ? w * per : n, e = b + per < n ? b + per : n;
    rj_flt F;
    rj_flt_init(F);
    int bad = 0;
    long long hk = -1, tk;
    Acc ha, ta;
    if (b < e) {
        rj_key_tiles<V>(P, F, lo, sz, b, e, hk, ha, tk, ta, bad);
    } else {   // no elements: empty items with the last key
        acc_init(ha);
        acc_init(ta);
        tk = key_at(F, P, lo, sz, n - 1);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        // what rj_key_ends would have found: the host may have taken the
        // count from an earlier run of the same arrays
        long long k0 = key_at(F, P, lo, sz, 0), kl = key_at(F, P, lo, sz, n - 1);
        bad |= k0 < 0 || kl != P.v[RJ_NOUT] - 1;
    }
    rj_flush(P, F);
    long long bhk, btk;
    Acc bha, bta;
    rj_key_block_items(P, ik, ia, hk, ha, tk, ta, true, bhk, bha, btk, bta, bad);
    long long *gk = (long long *)P.v[RJ_OFFS];
    Acc *ga = (Acc *)P.v[RJ_PARTIALS];
    if (threadIdx.x == 0) {
        gk[2 * blockIdx.x] = bhk >= 0 ? bhk : btk;
        if (bhk >= 0) ga[2 * blockIdx.x] = bha;
        else acc_init(ga[2 * blockIdx.x]);
        gk[2 * blockIdx.x + 1] = btk;
        ga[2 * blockIdx.x + 1] = bta;
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr((unsigned long long *)P.v[RJ_KSTATS] + 2, 1ull);
    __threadfence();
    if (threadIdx.x == 0) last = atomicAdd((unsigned *)P.v[RJ_COUNTER], 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    // the last block: each warp folds a contiguous share of the 2 gridDim.x
    // items, then warp 0 folds the warps' items and writes the rest (bad
    // keys were flagged by the tiles already: items carry no new key)
    long long ni = 2 * (long long)gridDim.x, wper = (ni + RJ_BLOCK / 32 - 1) / (RJ_BLOCK / 32);
    long long ib = warp * wper < ni ? warp * wper : ni, ie = ib + wper < ni ? ib + wper : ni;
    bad = 0;
    hk = -1;
    if (ib < ie) {
        rj_key_items(P, gk, ga, ib, ie, true, hk, ha, tk, ta, bad);
    } else {
        acc_init(ha);
        acc_init(ta);
        tk = gk[ni - 1];
    }
    rj_key_block_items(P, ik, ia, hk, ha, tk, ta, false, bhk, bha, btk, bta, bad);
    if (threadIdx.x == 0) *(unsigned *)P.v[RJ_COUNTER] = 0u;   // ready for the next launch
    // a run that reads its key flag back (P.v[RJ_KSTATS][2], raised by the
    // blocks before their tickets) gets the workspace published instead
    rj_publish(P);
}

// keys in any order (commutative operators): partition p folds its
// contiguous range in order into its own row of accumulators
__device__ __forceinline__ void rj_keyed_private(const Params &P)
{
    long long p = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x, np = P.v[RJ_NBLK];
    if (p >= np) return;
    long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
    out_range(P, 0, lo, sz);
    long long nk = P.v[RJ_NOUT], n = P.v[RJ_N], per = P.v[RJ_PER];
    Acc *row = (Acc *)P.v[RJ_PARTIALS] + p * nk;
    for (long long k = 0; k < nk; k++) acc_init(row[k]);
    long long b = p * per, e = b + per < n ? b + per : n;
    rj_flt F;
    rj_flt_init(F);
    for (long long t = b; t < e; t++) {
        long long k = key_at(F, P, lo, sz, t);
        Acc x;
        acc_init(x);
        acc_elem(x, F, P, 0, lo, sz, t);
        acc_combine(row[k], x);
    }
    rj_flush(P, F);
}

__device__ __forceinline__ void rj_keyed_combine(const Params &P)
{
    long long k = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x, nk = P.v[RJ_NOUT];
    if (k >= nk) return;
    const Acc *rows = (const Acc *)P.v[RJ_PARTIALS];
    Acc a;
    acc_init(a);
    for (long long p = 0; p < P.v[RJ_NBLK]; p++) acc_combine(a, rows[p * nk + k]);
    acc_write(P, k, a);
}
#endif // RJ_KEYED
