// rj_keys.cuh -- reductions by key: the key checks and segment starts
// (rj_kends, rj_koffs, rj_kscan) and private rows for keys in any order.
// Compiled for keyed passes only (RJ_KEYED).  Pasted after rj_segment.cuh.

// ---- keys -------------------------------------------------------------------
#if RJ_KEYED

// Sorted keys are the common case.  rj_key_ends reads the first and the
// last key (the host sizes the result from them; a run may skip it and take
// the count from the run before, which rj_key_fused then checks), and
// rj_key_fused (rj_kfused.cuh) reduces the keys in one pass, checking on the way that
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
