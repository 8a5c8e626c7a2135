// rj_scan.cuh -- scan passes (RJ_SCAN): every element's running fold, in one
// pass over the data with decoupled look-back (Merrill and Garland, "Single-pass
// Parallel Prefix Scan with Decoupled Look-back", 2016).  Pasted alone after the
// generated part of a scan pass, which gives Acc, acc_init, acc_combine (a then
// b, in order), acc_shfl_idx, out_range, acc_elem, scan_store and, for a scan
// that restarts where a key changes (RJ_SCAN_RESET), scan_key.
//
// A tile is RJ_BLOCK * RJ_SCAN_ITEMS consecutive elements of one output's row;
// blocks take tiles in order from a ticket (so a tile's predecessors are all
// running or done: no deadlock whatever the scheduling).  A block evaluates its
// tile's elements striped (neighbouring threads on neighbouring elements: the
// loads coalesce), scans them through shared memory a thread's run of
// RJ_SCAN_ITEMS at a time, then publishes its tile's aggregate, looks back for
// the fold of the tiles before it, and writes its elements striped again.
//
// Deterministic, in two levels of a fixed shape.  Tiles come in groups of 32
// (a row's tiles 0..31, 32..63, ...).  A tile's fold of the tiles before it in
// its group is a warp scan over their aggregates at fixed lanes, the same
// association whichever tile computes it; a group's fold of the groups before
// it in the row is ((pre[j] + agg[j]) + agg[j+1]) + ... from the nearest group
// j that has published its inclusive fold, which equals the group-by-group
// chain bit for bit whichever j the look-back found.  So every run gives the
// same bits, as ordered operators need and floats show.  One level (a tile folding
// the tiles' aggregates one by one from the nearest published tile) is as exact, but its
// fold grows with the look-back's lag and the lag with the fold; a group's is a 32nd of it.

// A restarting scan folds (head, value) pairs: (fa, a) + (fb, b) is
// (fa | fb, fb ? b : a + b), associative, so the same machinery runs it.

#if RJ_SCAN

struct RjSA {
    Acc a;
#if RJ_SCAN_RESET
    bool f;
#endif
};

// x = x + y, y to the right
__device__ __forceinline__ void rj_sa_combine(RjSA &x, const RjSA &y)
{
#if RJ_SCAN_RESET
    if (y.f) x.a = y.a;
    else acc_combine(x.a, y.a);
    x.f = x.f || y.f;
#else
    acc_combine(x.a, y.a);
#endif
}

__device__ __forceinline__ void rj_sa_init(RjSA &x)
{
    acc_init(x.a);
#if RJ_SCAN_RESET
    x.f = false;
#endif
}

__device__ __forceinline__ RjSA rj_sa_shfl_idx(const RjSA &x, int l)
{
    RjSA r;
    r.a = acc_shfl_idx(x.a, l);
#if RJ_SCAN_RESET
    r.f = __shfl_sync(0xffffffffu, (int)x.f, l) != 0;
#endif
    return r;
}

// A tile's published fold: 16-byte aligned, copied in 16-byte words past L1
// (another SM wrote it; a line of it may sit stale in this SM's L1).
struct __align__(16) RjSlot {
    RjSA s;
};

__device__ __forceinline__ void rj_slot_put(RjSlot *d, const RjSA &v)
{
    RjSlot t;
    t.s = v;
    const int4 *src = (const int4 *)&t;
    int4 *dst = (int4 *)d;
#pragma unroll
    for (int i = 0; i < (int)(sizeof(RjSlot) / 16); i++) __stcg(dst + i, src[i]);
}

__device__ __forceinline__ RjSA rj_slot_get(const RjSlot *s)
{
    RjSlot t;
    int4 *dst = (int4 *)&t;
    const int4 *src = (const int4 *)s;
#pragma unroll
    for (int i = 0; i < (int)(sizeof(RjSlot) / 16); i++) dst[i] = __ldcg(src + i);
    return t.s;
}

enum { RJ_SCAN_TILE = RJ_BLOCK * RJ_SCAN_ITEMS, RJ_SCAN_WARPS = RJ_BLOCK / 32 };

// element i of a tile's shared copy: one slot of padding after every 32
__device__ __forceinline__ int rj_sx(int i) { return i + (i >> 5); }

// The warp's inclusive scan of one value a lane, in lane order (an ordered
// operator's too: a lane's fold takes the lanes below it on its left).
__device__ __forceinline__ RjSA rj_warp_inclusive(RjSA v)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        RjSA y = rj_sa_shfl_idx(v, lane >= d ? lane - d : 0);
        if (lane >= d) {
            rj_sa_combine(y, v);
            v = y;
        }
    }
    return v;
}

// The scratch (RJ_PARTIALS; its ticket and status words zeroed before the
// launch): the ticket, a status word a tile (1: its aggregate is published)
// and a group (1: its aggregate; 2: its inclusive fold in the row too), then
// the tiles' aggregates, the groups' aggregates and the groups' inclusive folds.
struct RjScanScratch {
    unsigned long long *ticket;
    volatile int *status, *gstatus;
    RjSlot *agg, *gagg, *ginc;
};

__device__ __forceinline__ RjScanScratch rj_scan_scratch(const Params &P, long long ntiles, long long ngroups)
{
    RjScanScratch s;
    char *base = (char *)P.v[RJ_PARTIALS];
    s.ticket = (unsigned long long *)base;
    s.status = (volatile int *)(base + 16);
    s.gstatus = s.status + ntiles;
    long long at = (16 + 4 * (ntiles + ngroups) + 15) / 16 * 16;
    s.agg = (RjSlot *)(base + at);
    s.gagg = s.agg + ntiles;
    s.ginc = s.gagg + ngroups;
    return s;
}

// Warp 0: wait until every lane's status word (at st_at; lanes with `need`
// false count as published) is nonzero.
__device__ __forceinline__ int rj_scan_wait(volatile int *st_at, bool need)
{
    int st = need ? *st_at : 1;
    while (__any_sync(0xffffffffu, st == 0))
        if (st == 0) st = *st_at;
    return st;
}

// Warp 0: the fold carried into group g of a row whose first group is g0 (g > g0):
// the nearest group back with its inclusive fold published, then the groups'
// aggregates after it folded forward in order.
__device__ __forceinline__ RjSA rj_scan_group_prefix(const RjScanScratch &S, long long g, long long g0)
{
    int lane = threadIdx.x & 31;
    long long top = g - 1, found = -1;
    while (found < 0) {
        long long j = top - lane;
        int st = rj_scan_wait(S.gstatus + (j >= g0 ? j : g0), j >= g0);
        unsigned m = __ballot_sync(0xffffffffu, st == 2 && j >= g0);
        if (m) found = top - (__ffs(m) - 1);
        else if (top - 31 > g0) top -= 32;
        // else the window holds the row's first group, whose fold is on its way: look again
    }
    __threadfence();
    RjSA acc = rj_slot_get(S.ginc + found);
    for (long long b = found + 1; b < g; b += 32) {
        RjSA x;
        long long q = b + lane;
        if (q < g) x = rj_slot_get(S.gagg + q);
        else rj_sa_init(x);
        int n = (int)min((long long)32, g - b);
        for (int l = 0; l < n; l++) {
            RjSA y = rj_sa_shfl_idx(x, l);
            rj_sa_combine(acc, y);
        }
    }
    return acc;
}

// Warp 0, for tile tt of row o (global id tile; the row's tiles T, its groups
// NG): publishes the tile's aggregate `total`, and returns the fold of every
// element of the row before the tile.
__device__ __forceinline__ RjSA rj_scan_lookback(const RjScanScratch &S, long long tile, long long o, long long tt,
                                                 long long T, long long NG, const RjSA &total)
{
    int lane = threadIdx.x & 31;
    const int p = (int)(tt & 31);
    const long long first = tile - p, gid = o * NG + (tt >> 5);
    const bool last = p == 31 || tt == T - 1;
    if (lane == 0 && !last) {
        rj_slot_put(S.agg + tile, total);
        __threadfence();
        S.status[tile] = 1;
    }
    // level 1: the group's tiles before this one, a warp scan at fixed lanes
    rj_scan_wait(S.status + first + (lane < p ? lane : 0), lane < p);
    __threadfence();
    RjSA v;
    if (lane < p) v = rj_slot_get(S.agg + first + lane);
    else if (lane == p) v = total;
    else rj_sa_init(v);
    v = rj_warp_inclusive(v);
    RjSA within = rj_sa_shfl_idx(v, p > 0 ? p - 1 : 0);
    if (p == 0) rj_sa_init(within);
    const RjSA group_total = rj_sa_shfl_idx(v, p);   // the group's aggregate, where `last`
    if (lane == 0 && last) {
        rj_slot_put(S.gagg + gid, group_total);
        __threadfence();
        S.gstatus[gid] = 1;
    }
    // level 2: the groups before this one in the row
    RjSA pre;
    rj_sa_init(pre);
    if (tt >= 32) pre = rj_scan_group_prefix(S, gid, o * NG);
    if (lane == 0 && last) {
        RjSA inc = pre;
        rj_sa_combine(inc, group_total);
        rj_slot_put(S.ginc + gid, inc);
        __threadfence();
        S.gstatus[gid] = 2;
    }
    rj_sa_combine(pre, within);
    return pre;
}

__device__ __forceinline__ void rj_scan_run(const Params &P)
{
    // a tile's elements, one slot of padding after every 32: a thread's run
    // (blocked) and a warp's elements (striped) both fall in distinct banks
    __shared__ RjSA s_x[RJ_SCAN_TILE + RJ_SCAN_TILE / 32];
    __shared__ RjSA s_warp[RJ_SCAN_WARPS];
    __shared__ RjSA s_pre;
    __shared__ long long s_tile;
    const long long nout = P.v[RJ_NOUT], T = P.v[RJ_NBLK];
    const long long ntiles = nout * T, NG = (T + 31) / 32;
    RjScanScratch S = rj_scan_scratch(P, ntiles, nout * NG);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (tid == 0) s_tile = (long long)atomicAdd(S.ticket, 1ull);
    __syncthreads();
    for (;;) {
        const long long tile = s_tile;
        if (tile >= ntiles) return;
        // the next tile's ticket, taken now: its round trip overlaps this tile's work
        long long next = 0;
        if (tid == 0) next = (long long)atomicAdd(S.ticket, 1ull);
        const long long o = tile / T, tt = tile - o * T;
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        const long long cnt = out_range(P, o, lo, sz);
        const long long base = tt * RJ_SCAN_TILE;

        // the tile's elements, striped
        rj_flt F;
        rj_flt_init(F);
#pragma unroll
        for (int k = 0; k < RJ_SCAN_ITEMS; k++) {
            long long t = base + k * RJ_BLOCK + tid;
            RjSA e;
            rj_sa_init(e);
            if (t < cnt) {
                acc_elem(e.a, F, P, o, lo, sz, t);
#if RJ_SCAN_RESET
                e.f = t > 0 && scan_key(F, P, o, lo, sz, t) != scan_key(F, P, o, lo, sz, t - 1);
#endif
            }
            s_x[rj_sx(k * RJ_BLOCK + tid)] = e;
        }
        rj_flush(P, F);
        __syncthreads();

        // a thread's run, scanned in registers
        RjSA loc[RJ_SCAN_ITEMS];
        loc[0] = s_x[rj_sx(tid * RJ_SCAN_ITEMS)];
#pragma unroll
        for (int k = 1; k < RJ_SCAN_ITEMS; k++) {
            loc[k] = loc[k - 1];
            rj_sa_combine(loc[k], s_x[rj_sx(tid * RJ_SCAN_ITEMS + k)]);
        }
        // the runs' totals scanned across the warp, then the warps'
        RjSA inc = rj_warp_inclusive(loc[RJ_SCAN_ITEMS - 1]);
        RjSA exc = rj_sa_shfl_idx(inc, lane > 0 ? lane - 1 : 0);
        if (lane == 31) s_warp[warp] = inc;
        __syncthreads();
        RjSA wpre;   // the warps before this one
        rj_sa_init(wpre);
        for (int w = 0; w < warp; w++) rj_sa_combine(wpre, s_warp[w]);
        RjSA total;  // the tile's aggregate
        rj_sa_init(total);
        for (int w = 0; w < RJ_SCAN_WARPS; w++) rj_sa_combine(total, s_warp[w]);

        // publish, look back
        if (warp == 0) {
            RjSA pre = rj_scan_lookback(S, tile, o, tt, T, NG, total);
            if (lane == 0) s_pre = pre;
        }
        __syncthreads();

        // each element: the tile's carry, the runs before, its own run so far
        RjSA carry = s_pre;
        rj_sa_combine(carry, wpre);
        if (lane > 0) rj_sa_combine(carry, exc);
        // downwards: an exclusive element reads the run's inclusive fold before it
#pragma unroll
        for (int k = RJ_SCAN_ITEMS - 1; k >= 0; k--) {
            RjSA v = carry;
#if RJ_SCAN_EXCL
            if (k > 0) rj_sa_combine(v, loc[k - 1]);
            // an exclusive element that starts a segment gets the identity
#if RJ_SCAN_RESET
            if (s_x[rj_sx(tid * RJ_SCAN_ITEMS + k)].f) rj_sa_init(v);
#endif
#else
            rj_sa_combine(v, loc[k]);
#endif
            loc[k] = v;
        }
        __syncthreads();   // every thread has read its run of s_x
#pragma unroll
        for (int k = 0; k < RJ_SCAN_ITEMS; k++) s_x[rj_sx(tid * RJ_SCAN_ITEMS + k)] = loc[k];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < RJ_SCAN_ITEMS; k++) {
            long long t = base + k * RJ_BLOCK + tid;
            if (t < cnt) scan_store(P, o, t, s_x[rj_sx(k * RJ_BLOCK + tid)].a);
        }
        if (tid == 0) s_tile = next;
        __syncthreads();   // s_x and s_tile are reused by the next tile
    }
}

#endif // RJ_SCAN
