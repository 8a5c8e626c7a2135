// rj_kfused.cuh -- sorted keys reduced in one pass (rj_kfused, rj_kfusedv).
// Compiled for keyed passes only (RJ_KEYED).  Pasted after rj_keys.cuh.

#if RJ_KEYED

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

// Keys with no elements between this lane's consecutive elements (the
// rare case: the lane's keys step by more than its heads), each reported
// by rj_key_gap.  The pair around each gap is picked out by selects: one
// copy of the loop, and no index into k[] that is not a constant (which
// would put k[] in local memory).
template <int KT>
__device__ __forceinline__ void rj_key_gaps(const Params &P, const rj_key (&k)[KT], long long nk)
{
    unsigned gaps = 0;   // bit j: keys with no elements between elements j-1 and j
#pragma unroll
    for (int j = 1; j < KT; j++) gaps |= ((long long)k[j] > (long long)k[j - 1] + 1 ? 1u : 0u) << j;
    while (gaps) {
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
}

// One tile's fold (see above): this lane's KT consecutive elements k[],
// x[], in order; kprev: the key of the element before them.  Its first run
// may come from the lane before; a run that starts and ends here is written
// now.  The carry (ck, ca in lane 0: the run open before this tile) becomes
// the run open at its end; the warp's first complete run goes to hk/ha
// while `want`.
//
// S: the completed runs go through shared memory, sl (the warp's 32 KT
// slots), in key order, and are written from there, 32 consecutive keys a
// store: stored from the fold itself, a warp's store of runs of 3 touched
// a sector a lane and kept L2 busy.  A lane's slots follow the lanes'
// before it: e1, e2, then the runs inside it, as many as its heads
// (counted before the fold).  Slots indexed by key need no count or scan
// but a second fold for tiles whose keys have gaps, slower to run and to
// compile.
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
    if (gapped) rj_key_gaps(P, k, nk);   // keys with no elements between this lane's runs
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
// bytes), or RJ_KVT of them (REDJIT_KVT, codegen/tuning.c), halved down
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
#endif // RJ_KEYED
