// rj_full.cuh -- full reductions (one output: tree, sequential, persistent) and the
// 16-byte-load kernels of contiguous reductions (rj_persistv, rj_seg*v).
// Pasted after rj_reduce.cuh, whose folds and trees it uses.

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
#if RJ_EPI == 1
    if (threadIdx.x == 0) rj_epilogue(P, 0, 1, NULL, NULL, 1, 0, 1);   // the map of the result (mean's division)
#endif
    rj_publish(P);
}

// persistent: a grid that fills the GPU once; the last block to finish
// combines every block's partial (after its stage wrote it), so the whole
// reduction is one launch.
// A grid of one block (small inputs) has its answer in thread 0 already
// (`a`): written straight out, without the fence, the ticket and the second
// block reduction over one partial, which cost small inputs a microsecond.
__device__ __forceinline__ void rj_persist_finish(const Params &P, const Acc &a)
{
    Acc t = a;
    if (gridDim.x > 1) {
        // the ticket: one atomic that releases this block's partial (and,
        // through the barrier before it, every thread's fault record) and,
        // in the last block, acquires all the others' (the barrier after it
        // passes that on to the block's other threads), in place of a
        // fence by every thread, the atomic and a fence again in the last
        // block, which was slower (bench/TUNING.md).
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
#if RJ_EPI == 1
    if (threadIdx.x == 0) rj_epilogue(P, 0, 1, NULL, NULL, 1, 0, 1);   // the map of the result (mean's division)
#endif
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
// stride read from the parameters stayed short of CUB's bandwidth on
// instructions; these reach CUB's time (bench/TUNING.md).
// `load` brings vector u: from the arrays (rj_from_arrays), or from a row
// staged in shared memory (rj_from_stage, rj_segbs).
struct rj_from_arrays {
    __device__ __forceinline__ void operator()(Vld &L, const Params &P, long long o, const long long *lo,
                                               long long u) const
    {
        acc_load_v(L, P, o, lo, u);
    }
};

template <class Load>
__device__ __forceinline__ Acc rj_run_v_from(const Load &load, const Params &P, long long o, const long long *lo,
                                             long long begin, long long end, int first, int step)
{
    Acc a, in;
    acc_init(a);
    acc_init(in);
    int k = 0;
    long long vend = end / RJ_VEC;   // whole vectors, then fewer than RJ_VEC elements
    // whole batches of RJ_VUNROLL vectors, unguarded: their loads are all
    // issued before the first fold.  NVVM unrolls this loop four times (8
    // loads a thread in flight), which is much of the kernel's NVRTC time
    // and of its speed.
    long long u = begin / RJ_VEC + first;
    for (; u + (long long)(RJ_VUNROLL - 1) * step < vend; u += (long long)RJ_VUNROLL * step) {
        Vld L[RJ_VUNROLL];
#pragma unroll
        for (int j = 0; j < RJ_VUNROLL; j++) load(L[j], P, o, lo, u + (long long)j * step);
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
    // the generic acc_elem; a 16-byte load a whole vector here was no
    // faster and cost NVRTC time.
#pragma unroll 1
    for (long long t = u * RJ_VEC; t < end; t += (t % RJ_VEC == RJ_VEC - 1) ? (long long)(step - 1) * RJ_VEC + 1 : 1)
        acc_elem_1(in, P, o, lo, t);
    acc_combine(a, in);
    return a;
}

__device__ __forceinline__ Acc rj_run_v(const Params &P, long long o, const long long *lo, long long begin,
                                        long long end, int first, int step)
{
    return rj_run_v_from(rj_from_arrays(), P, o, lo, begin, end, first, step);
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
// issued before either is folded.  Faster than a thread a row (rj_seg1v)
// for rows of 16 vectors; for rows of 2 to 8 a thread a row stays faster
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
        rj_epilogue(P, r0, r0 < nout, lo, sz, cnt, lane, w);
        rj_epilogue(P, r1, r1 < nout, lo, sz, cnt, lane, w);
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
        rj_epilogue(P, o, 1, lo, sz, cnt, threadIdx.x, RJ_BLOCK);
    }
}

#if RJ_EPIS
// rj_segbs: a block a long contiguous row whose epilogue reads the row again
// (softmax), the row staged in dynamic shared memory (P.v[RJ_NOUT] rows,
// every one of cnt elements): each thread copies its vectors of every array
// the reduction reads (acc_stage_v, cp.async: all of them in flight at once),
// folds them from there through rj_run_v_from (rj_run_v's order and batches:
// the same bits as rj_segbv), and after the block's tree the epilogue reads the row from
// shared memory too (epi_out_s).  The row leaves memory once; rj_segbv's
// epilogue found it in neither L1 nor L2.  The runtime sizes the shared
// memory (cnt / RJ_VEC vectors of sizeof(Vld)) and sets RJ_EPION to 2.
struct rj_from_stage {
    const Vld *S;
    __device__ __forceinline__ void operator()(Vld &L, const Params &, long long, const long long *,
                                               long long u) const
    {
        L = S[u];
    }
};

__device__ __forceinline__ void rj_segmented_staged(const Params &P)
{
    extern __shared__ __align__(16) unsigned char rj_stage[];
    Vld *S = (Vld *)rj_stage;
    long long nout = P.v[RJ_NOUT];
    for (long long o = blockIdx.x; o < nout; o += gridDim.x) {   // uniform in the block
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        long long cnt = out_range(P, o, lo, sz);
        long long nv = cnt / RJ_VEC;
        for (long long u = threadIdx.x; u < nv; u += RJ_BLOCK) acc_stage_v(S + u, P, o, lo, u);
        rj_cp_async_wait_all();   // this thread's copies: the only ones it folds
        Acc a = rj_run_v_from(rj_from_stage{S}, P, o, lo, 0, cnt, threadIdx.x, RJ_BLOCK);
        a = rj_block_reduce(a);
        if (threadIdx.x == 0) acc_write(P, o, a);
        if (P.v[RJ_EPION]) {
            __syncthreads();   // the row's result and every thread's copies
            epi_out_s(P, o, lo, cnt, threadIdx.x, RJ_BLOCK, S);
        }
        __syncthreads();   // S is read before the next row overwrites it
    }
}
#endif

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
        rj_epilogue(P, o, o < nout, lo, sz, cnt, lane, group);
    }
}
#endif
