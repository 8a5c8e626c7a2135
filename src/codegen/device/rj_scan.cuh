// rj_scan.cuh -- scan passes (RJ_SCAN): every element's running fold, in one
// pass over the data with decoupled look-back (Merrill and Garland, "Single-pass
// Parallel Prefix Scan with Decoupled Look-back", 2016).  Pasted alone after the
// generated part of a scan pass, which gives Acc, acc_init, acc_combine (a then
// b, in order), acc_shfl_idx, out_range, acc_elem, scan_store and, for a scan
// that restarts where a key changes (RJ_SCAN_RESET), scan_key.
//
// A tile is RJ_BLOCK * RJ_SCAN_ITEMS consecutive elements of one output's row.
// A block is RJ_BLOCK threads of data warps and one look-back warp; it takes
// tiles in order from a ticket, each just before it loads it (so a tile's
// predecessors are all running or done: no deadlock whatever the scheduling,
// and no tile waits on one that has not started).  Each data warp evaluates its
// 32 * RJ_SCAN_ITEMS elements of the tile striped (neighbouring lanes on
// neighbouring elements: the loads coalesce) and folds them in its own shared
// copy, a lane's run of RJ_SCAN_ITEMS at a time; the warps' totals give the
// tile's aggregate, published at once.  While the look-back warp finds the
// fold of the tiles before it, the data warps load and fold the next tile;
// then they fold the carry into this one's elements and write them striped.
// Where rows are many (RJ_PER) a block walks whole rows instead, tile by tile,
// the carry in registers, and nothing is published.  rj_scanw, a kernel of its
// own (its registers are not rj_scan's), has each warp walk whole rows.
//
// Deterministic, in two levels of a fixed shape.  Tiles come in groups of 32
// (a row's tiles 0..31, 32..63, ...).  A tile's fold of the tiles before it in
// its group is a warp scan over their aggregates at fixed lanes, the same
// association whichever tile computes it; a group's fold of the groups before
// it in the row is ((pre[j] + agg[j]) + agg[j+1]) + ... from the nearest group
// j that has published its inclusive fold, which equals the group-by-group
// chain bit for bit whichever j the look-back found (the combine gives the same
// bits wherever it is inlined: RJ_NOCONTRACT).  So every run gives the same
// bits, as ordered operators need and floats show.  One level (a tile folding
// the tiles' aggregates one by one from the nearest published tile) is as
// exact, but its fold grows with the look-back's lag and the lag with the fold;
// a group's is a 32nd of it.

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

// A published fold: RJ_SCAN_NW 64-bit words, each 32 bits of the fold's bytes
// under a 32-bit status (1: a tile's or group's aggregate; 2: a group's
// inclusive fold in its row).  A word is written and read whole, so a reader
// that finds every word of a fold under one nonzero status has that fold: no
// fence between value and flag, one round trip to L2 a look.  (A group's words
// go from status 1 to 2; a reader that catches them half-way looks again.)
enum { RJ_SCAN_NW = (int)((sizeof(RjSA) + 3) / 4) };
static_assert(sizeof(RjSA) == RJ_SCAN_ESIZE, "the runtime sizes the scratch and shared memory by RJ_SCAN_ESIZE");

union RjSAWords {
    RjSA s;
    unsigned w[RJ_SCAN_NW];
};

__device__ __forceinline__ void rj_scan_put(unsigned long long *d, const RjSA &v, unsigned st)
{
    RjSAWords u;
    u.w[RJ_SCAN_NW - 1] = 0;
    u.s = v;
#pragma unroll
    for (int i = 0; i < RJ_SCAN_NW; i++) {
        unsigned long long x = (unsigned long long)st << 32 | u.w[i];
        asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(d + i), "l"(x) : "memory");
    }
}

// The status every word of the fold at d agrees on, and the fold; 0 if a word
// is not yet written or the words disagree.
__device__ __forceinline__ unsigned rj_scan_get(const unsigned long long *d, RjSA &v)
{
    RjSAWords u;
    unsigned st = 0;
#pragma unroll
    for (int i = 0; i < RJ_SCAN_NW; i++) {
        unsigned long long x;
        asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(x) : "l"(d + i) : "memory");
        u.w[i] = (unsigned)x;
        unsigned s = (unsigned)(x >> 32);
        st = i == 0 ? s : (s == st ? st : 0);
    }
    v = u.s;
    return st;
}

enum {
    RJ_SCAN_TILE = RJ_BLOCK * RJ_SCAN_ITEMS,
    RJ_SCAN_WARPS = RJ_BLOCK / 32,
    RJ_SCAN_WT = 32 * RJ_SCAN_ITEMS,       // a warp's elements of a tile
    RJ_SCAN_WS = RJ_SCAN_WT + RJ_SCAN_ITEMS // and their slots, padded (rj_sx)
};

// warp w's slots of buffer b
__device__ __forceinline__ RjSA *rj_scan_sw(RjSA *s_x, int b, int w) { return s_x + (b * RJ_SCAN_WARPS + w) * RJ_SCAN_WS; }

// element i of a warp's shared copy: one slot of padding after every 32
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

// The look-back warp, for tile tt of row o (global id tile; the row's tiles T,
// its groups NG; its aggregate `total`, already published unless it is its
// group's last): the fold of every element of the row before the tile.  Both
// levels' folds are asked for at once (one round trip where they are there):
//   level 1, the group's tiles before this one: lane l reads tile l, a warp
//   scan at fixed lanes folds them;
//   level 2, the groups before this one in the row: lane l reads group g-1-l;
//   the nearest with its inclusive fold published starts the fold, the
//   aggregates after it follow in order.  Where none of the 32 has published
//   one yet, it looks again: each of them will (their tiles all hold tickets).
__device__ __forceinline__ RjSA rj_scan_lookback(unsigned long long *D, unsigned long long *G, long long tile, long long o,
                                                 long long tt, long long T, long long NG, const RjSA &total)
{
    const int lane = threadIdx.x & 31;
    const int p = (int)(tt & 31);
    const long long first = tile - p, gid = o * NG + (tt >> 5), j = gid - 1 - lane;
    const bool last = p == 31 || tt == T - 1;   // its group's last tile: no tile waits for it
    const bool need1 = lane < p, need2 = tt >= 32 && j >= o * NG;
    const unsigned long long *d1 = D + (first + (need1 ? lane : 0)) * RJ_SCAN_NW;
    const unsigned long long *d2 = G + (need2 ? j : o * NG) * RJ_SCAN_NW;
    RjSA v1, v2;
    unsigned s1 = need1 ? rj_scan_get(d1, v1) : 1, s2 = need2 ? rj_scan_get(d2, v2) : 1;
    while (__any_sync(0xffffffffu, s1 == 0)) {
        if (s1 == 0) s1 = rj_scan_get(d1, v1);
        if (s2 == 0) s2 = rj_scan_get(d2, v2);
    }
    // level 1
    if (lane == p) v1 = total;
    else if (lane > p) rj_sa_init(v1);
    v1 = rj_warp_inclusive(v1);
    RjSA within = rj_sa_shfl_idx(v1, p > 0 ? p - 1 : 0);
    if (p == 0) rj_sa_init(within);
    const RjSA group_total = rj_sa_shfl_idx(v1, p);   // the group's aggregate, where `last`
    // level 2
    RjSA pre;
    rj_sa_init(pre);
    if (tt >= 32) {
        if (lane == 0 && last) rj_scan_put(G + gid * RJ_SCAN_NW, group_total, 1);
        unsigned m;
        for (;;) {
            while (__any_sync(0xffffffffu, s2 == 0)) {
                if (s2 == 0) s2 = rj_scan_get(d2, v2);
            }
            m = __ballot_sync(0xffffffffu, need2 && s2 == 2);
            if (m) break;
            if (need2) s2 = rj_scan_get(d2, v2);
        }
        const int k = __ffs(m) - 1;
        pre = rj_sa_shfl_idx(v2, k);
        for (int l = k - 1; l >= 0; l--) {
            RjSA y = rj_sa_shfl_idx(v2, l);
            rj_sa_combine(pre, y);
        }
    }
    if (lane == 0 && last) {
        RjSA inc = pre;
        rj_sa_combine(inc, group_total);
        rj_scan_put(G + gid * RJ_SCAN_NW, inc, 2);
    }
    rj_sa_combine(pre, within);
    return pre;
}


enum { RJ_SCAN_THREADS = RJ_BLOCK + 32 };

// Named barrier `id` (1 to 5) for n threads.  The id is an immediate in each
// instruction, so that ptxas reserves the six barriers in use rather than all
// sixteen (an id in a register could be any).
template <int ID> __device__ __forceinline__ void rj_bar_sync_at(int n)
{
    asm volatile("bar.sync %0, %1;" ::"n"(ID), "r"(n) : "memory");
}
template <int ID> __device__ __forceinline__ void rj_bar_arrive_at(int n)
{
    asm volatile("bar.arrive %0, %1;" ::"n"(ID), "r"(n) : "memory");
}
__device__ __forceinline__ void rj_bar_sync(int id, int n)
{
    switch (id) {
    case 1: rj_bar_sync_at<1>(n); break;
    case 2: rj_bar_sync_at<2>(n); break;
    case 3: rj_bar_sync_at<3>(n); break;
    case 4: rj_bar_sync_at<4>(n); break;
    default: rj_bar_sync_at<5>(n); break;
    }
}
__device__ __forceinline__ void rj_bar_arrive(int id, int n)
{
    switch (id) {
    case 2: rj_bar_arrive_at<2>(n); break;
    case 3: rj_bar_arrive_at<3>(n); break;
    case 4: rj_bar_arrive_at<4>(n); break;
    default: rj_bar_arrive_at<5>(n); break;
    }
}

// A data warp's share of a tile that waits for its carry.
struct RjScanHeld {
    long long tile, o, cnt, wbase;
    long long at;      // where the row's results start: its range's start over ranged rows, else 0
    RjSA exc;          // the lane's runs before it in the warp
    unsigned heads;    // which of the lane's run start a segment (RJ_SCAN_RESET)
};

// A warp's RJ_SCAN_WT elements of tile h.tile, each lane's run already folded
// in place: the carry (the tile's, the warps' before, the lane's runs before)
// folded into each, then written striped.
__device__ __forceinline__ void rj_scan_finish(const Params &P, RjSA *sw, const RjSA *swarp, const RjSA &tpre,
                                               const RjScanHeld &h, int warp, int lane)
{
    RjSA carry = tpre;
    for (int w = 0; w < warp; w++) rj_sa_combine(carry, swarp[w]);
    if (lane > 0) rj_sa_combine(carry, h.exc);
    const int r0 = lane * RJ_SCAN_ITEMS;
#if RJ_SCAN_EXCL
    // downwards: element k takes the run's fold before it, read before it is overwritten
#pragma unroll
    for (int k = RJ_SCAN_ITEMS - 1; k >= 0; k--) {
        RjSA v = carry;
        if (k > 0) rj_sa_combine(v, sw[rj_sx(r0 + k - 1)]);
#if RJ_SCAN_RESET
        if ((h.heads >> k) & 1u) rj_sa_init(v);   // a segment's first element gets the identity
#endif
        sw[rj_sx(r0 + k)] = v;
    }
#else
#pragma unroll
    for (int k = 0; k < RJ_SCAN_ITEMS; k++) {
        RjSA v = carry;
        rj_sa_combine(v, sw[rj_sx(r0 + k)]);
        sw[rj_sx(r0 + k)] = v;
    }
#endif
    __syncwarp();
#pragma unroll
    for (int k = 0; k < RJ_SCAN_ITEMS; k++) {
        long long t = h.wbase + k * 32 + lane;
        if (t < h.cnt) scan_store(P, h.o, h.at + t, sw[rj_sx(k * 32 + lane)].a);
    }
    __syncwarp();
}

// The tile's aggregate from its warps' totals, in warp order: one function for
// every place that needs it (publisher, look-back, a row's carry), so the bits agree.
__device__ __forceinline__ RjSA rj_scan_tile_total(const RjSA *swarp)
{
    RjSA t;
    rj_sa_init(t);
    for (int w = 0; w < RJ_SCAN_WARPS; w++) rj_sa_combine(t, swarp[w]);
    return t;
}

// A data warp's RJ_SCAN_WT elements of tile h (h.o, h.cnt, h.wbase set),
// evaluated striped into its shared copy sw and each lane's run folded there in
// place; sets h.heads, the warp's total in swarp[warp], and in h.exc the fold of
// the lane's runs before its own.
__device__ __forceinline__ void rj_scan_fold(const Params &P, RjSA *sw, RjSA *swarp, RjScanHeld &h, const long long *lo,
                                             const long long *sz, int warp, int lane)
{
    rj_flt F;
    rj_flt_init(F);
#pragma unroll
    for (int k = 0; k < RJ_SCAN_ITEMS; k++) {
        long long t = h.wbase + k * 32 + lane;
        RjSA e;
        rj_sa_init(e);
        if (t < h.cnt) {
            acc_elem(e.a, F, P, h.o, lo, sz, t);
#if RJ_SCAN_RESET
            e.f = t > 0 && scan_key(F, P, h.o, lo, sz, t) != scan_key(F, P, h.o, lo, sz, t - 1);
#endif
        }
        sw[rj_sx(k * 32 + lane)] = e;
    }
    rj_flush(P, F);
    __syncwarp();
    const int r0 = lane * RJ_SCAN_ITEMS;
    RjSA run = sw[rj_sx(r0)];
    h.heads = 0;
#if RJ_SCAN_RESET
    h.heads = run.f ? 1u : 0u;
#endif
#pragma unroll
    for (int k = 1; k < RJ_SCAN_ITEMS; k++) {
        RjSA e = sw[rj_sx(r0 + k)];
#if RJ_SCAN_RESET
        h.heads |= (e.f ? 1u : 0u) << k;
#endif
        rj_sa_combine(run, e);
        sw[rj_sx(r0 + k)] = run;
    }
    RjSA inc = rj_warp_inclusive(run);
    if (lane == 31) swarp[warp] = inc;
    h.exc = rj_sa_shfl_idx(inc, lane > 0 ? lane - 1 : 0);
}

// Whole rows a block (RJ_PER nonzero: many rows of few tiles): the data warps
// take a row from the ticket and walk its tiles in order, the fold of the tiles
// before carried in registers; nothing is published, nothing waited for.
__device__ __forceinline__ void rj_scan_rows(const Params &P, long long nout, long long T, unsigned long long *ticket,
                                             RjSA *s_x, RjSA (*s_warp)[RJ_SCAN_WARPS], long long *s_row)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (;;) {
        if (tid == 0) *s_row = (long long)atomicAdd(ticket, 1ull);
        rj_bar_sync(1, RJ_BLOCK);
        const long long o = *s_row;
        if (o >= nout) return;
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        const long long cnt = out_range(P, o, lo, sz);
        // ranged rows differ in length: each its own count of tiles; an empty one
        // still meets the barrier, so that no warp reads *s_row after thread 0
        // wrote the next row there (every thread has the same cnt)
        const long long Tr = RJ_SCAN_RANGED ? (cnt + RJ_SCAN_TILE - 1) / RJ_SCAN_TILE : T;
        if (RJ_SCAN_RANGED && Tr == 0) rj_bar_sync(1, RJ_BLOCK);
        RjSA carry;
        rj_sa_init(carry);
        for (long long tt = 0; tt < Tr; tt++) {
            const int b = (int)(tt & 1);
            RjScanHeld h;
            h.tile = tt;
            h.o = o;
            h.cnt = cnt;
            h.at = RJ_SCAN_RANGED ? lo[0] : 0;
            h.wbase = tt * RJ_SCAN_TILE + warp * RJ_SCAN_WT;
            rj_scan_fold(P, rj_scan_sw(s_x, b, warp), s_warp[b], h, lo, sz, warp, lane);
            rj_bar_sync(1, RJ_BLOCK);
            rj_scan_finish(P, rj_scan_sw(s_x, b, warp), s_warp[b], carry, h, warp, lane);
            rj_sa_combine(carry, rj_scan_tile_total(s_warp[b]));
        }
    }
}

// rj_scanw: whole rows a warp, for rows many enough that every warp gets
// several.  Each warp takes a row from the ticket and walks it RJ_SCAN_WT
// elements at a time in its own slots, the carry in registers.  Its next
// row's ticket is taken as it starts a row and read when it ends it, so the
// atomic's round trip overlaps the row (rows do not wait on each other;
// RJ_SCANW_PREFETCH=0, an NVRTC option through REDJIT_NVRTC_OPTS, takes it
// after the row instead, for comparing).  No barrier at all, so the warps of
// an SM keep their loads in flight independently; a short row fills a warp's
// share, not a block's tile.
#ifndef RJ_SCANW_PREFETCH
#define RJ_SCANW_PREFETCH 1
#endif
__device__ __forceinline__ void rj_scan_warps(const Params &P)
{
    // all of it dynamic, as cg_scan_smem counts it: a warp's RJ_SCAN_WS slots
    // apiece, then the warps' totals
    extern __shared__ __align__(16) unsigned char rj_scan_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    RjSA *sw = (RjSA *)rj_scan_smem + warp * RJ_SCAN_WS;
    RjSA *stot = (RjSA *)rj_scan_smem + RJ_SCAN_WARPS * RJ_SCAN_WS + warp;
    const long long nout = P.v[RJ_NOUT];
    unsigned long long *ticket = (unsigned long long *)P.v[RJ_PARTIALS];
    long long next = lane == 0 ? (long long)atomicAdd(ticket, 1ull) : 0;
    for (;;) {
        const long long o = __shfl_sync(0xffffffffu, next, 0);
        if (o >= nout) return;
        if (RJ_SCANW_PREFETCH && lane == 0) next = (long long)atomicAdd(ticket, 1ull);
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        const long long cnt = out_range(P, o, lo, sz);
        RjSA carry;
        rj_sa_init(carry);
        for (long long base = 0; base < cnt; base += RJ_SCAN_WT) {
            RjScanHeld h;
            h.tile = base;
            h.o = o;
            h.cnt = cnt;
            h.at = RJ_SCAN_RANGED ? lo[0] : 0;
            h.wbase = base;
            // as warp 0 of a block of one warp: stot[0] is its total
            rj_scan_fold(P, sw, stot, h, lo, sz, 0, lane);
            rj_scan_finish(P, sw, stot, carry, h, 0, lane);   // ends with __syncwarp: stot[0] is there
            rj_sa_combine(carry, stot[0]);
        }
        if (!RJ_SCANW_PREFETCH && lane == 0) next = (long long)atomicAdd(ticket, 1ull);
    }
}

#if RJ_VEC
// rj_scanwv: whole rows a warp, as rj_scanw, where every array the pass loads
// is read 16 bytes at a time (the runtime's gpu_vec_ok: the scanned index
// contiguous, each row on 16 bytes).  A lane takes vectors of RJ_VEC
// consecutive elements, a warp 32 neighbouring vectors a stripe and
// RJ_SCANV_M stripes a chunk, their loads all issued first; everything is in
// registers: the lane's elements folded in order, a warp scan of the lanes'
// folds, the carry of the stripes before.  A row's last elements past whole
// vectors go a lane each.  No shared memory, no barrier.  Warp w of the grid's
// W takes rows w, w + W, ...: the runtime's grid is what fits on the device at
// once, and short rows are not held back by a ticket (one atomic on one word
// a row; 2^20 rows of 256 f32 took 1.39 ms with it, 0.56 without).
// about four vectors of loads a lane in flight
enum { RJ_SCANV_M = RJ_SCANV_NV >= 4 ? 1 : 4 / RJ_SCANV_NV };

// The elements of a stripe that a lane holds (e, each its own fold), folded
// in place (each with those before it in the lane's vector); returns the warp's
// inclusive scan of the lanes' folds (lane l: lanes 0..l).
__device__ __forceinline__ RjSA rj_scanv_lanes(Acc *e)
{
#pragma unroll
    for (int c = 1; c < RJ_VEC; c++) {
        Acc x = e[c - 1];
        acc_combine(x, e[c]);
        e[c] = x;
    }
    RjSA run;
    run.a = e[RJ_VEC - 1];
    return rj_warp_inclusive(run);
}

// The results of a lane's vector (e as rj_scanv_lanes leaves it), given the
// fold of everything before it (pre).
__device__ __forceinline__ void rj_scanv_out(const Acc *e, const RjSA &pre, Acc *out)
{
#pragma unroll
    for (int c = 0; c < RJ_VEC; c++) {
        Acc x = pre.a;
#if RJ_SCAN_EXCL
        if (c > 0) acc_combine(x, e[c - 1]);
#else
        acc_combine(x, e[c]);
#endif
        out[c] = x;
    }
}

// A stripe's results into out, given the fold of everything before the
// stripe (carry), which moves past it.
__device__ __forceinline__ void rj_scanv_stripe(Acc *e, Acc *out, RjSA &carry, int lane)
{
    const RjSA inc = rj_scanv_lanes(e);
    const RjSA exc = rj_sa_shfl_idx(inc, lane > 0 ? lane - 1 : 0);
    const RjSA tot = rj_sa_shfl_idx(inc, 31);
    RjSA pre = carry;
    if (lane > 0) rj_sa_combine(pre, exc);
    rj_scanv_out(e, pre, out);
    rj_sa_combine(carry, tot);
}

__device__ __forceinline__ void rj_scan_warps_v(const Params &P)
{
    const int lane = threadIdx.x & 31;
    const long long nout = P.v[RJ_NOUT], step = (long long)gridDim.x * RJ_SCAN_WARPS;
    for (long long o = (long long)blockIdx.x * RJ_SCAN_WARPS + (threadIdx.x >> 5); o < nout; o += step) {
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        const long long cnt = out_range(P, o, lo, sz), nv = cnt / RJ_VEC;
        RjSA carry;
        rj_sa_init(carry);
        for (long long u0 = 0; u0 < nv; u0 += 32 * RJ_SCANV_M) {
            Vld L[RJ_SCANV_M];
#pragma unroll
            for (int m = 0; m < RJ_SCANV_M; m++) {
                const long long u = u0 + m * 32 + lane;
                if (u < nv) acc_load_v(L[m], P, o, lo, u);
            }
#pragma unroll
            for (int m = 0; m < RJ_SCANV_M; m++) {
                if (u0 + m * 32 >= nv) break;   // (the same for every lane)
                const long long u = u0 + m * 32 + lane;
                Acc e[RJ_VEC], out[RJ_VEC];
                if (u < nv) {
                    acc_elems_v(e, P, L[m], o, lo, u);
                } else {
#pragma unroll
                    for (int c = 0; c < RJ_VEC; c++) acc_init(e[c]);
                }
                rj_scanv_stripe(e, out, carry, lane);
                if (u < nv) scan_store_v(P, o, u * RJ_VEC, out);
            }
        }
        const long long rem = cnt - nv * RJ_VEC;   // fewer than RJ_VEC: a lane each
        if (rem > 0) {
            const long long t = nv * RJ_VEC + lane;
            rj_flt F;
            rj_flt_init(F);
            RjSA x;
            rj_sa_init(x);
            if (lane < rem) acc_elem(x.a, F, P, o, lo, sz, t);
            rj_flush(P, F);
            const RjSA inc = rj_warp_inclusive(x);
            const RjSA exc = rj_sa_shfl_idx(inc, lane > 0 ? lane - 1 : 0);
            RjSA v = carry;
#if RJ_SCAN_EXCL
            if (lane > 0) rj_sa_combine(v, exc);
#else
            (void)exc;
            rj_sa_combine(v, inc);
#endif
            if (lane < rem) scan_store(P, o, t, v.a);
        }
    }
}
#endif // RJ_VEC

// The look-back warp of a block with two tiles in flight: for each tile the data
// warps have folded (barrier 2 + b), the fold of the elements before it into
// s_pre[b] (barrier 4 + b), until the tickets run out.
__device__ __forceinline__ void rj_scan_lookback_warp(unsigned long long *D, unsigned long long *G, long long T, long long NG,
                                                      long long ntiles, const long long *s_tile,
                                                      RjSA (*s_warp)[RJ_SCAN_WARPS], RjSA *s_pre, int lane)
{
    for (int b = 0;; b ^= 1) {
        rj_bar_sync(2 + b, RJ_SCAN_THREADS);
        const long long tile = s_tile[b];
        if (tile >= ntiles) return;
        const long long o = tile / T, tt = tile - o * T;
        RjSA pre = rj_scan_lookback(D, G, tile, o, tt, T, NG, rj_scan_tile_total(s_warp[b]));
        if (lane == 0) s_pre[b] = pre;
        rj_bar_arrive(4 + b, RJ_SCAN_THREADS);
    }
}

// Two tiles in flight a block: RJ_BLOCK threads of data warps load and fold
// tile n+1 while the block's last warp looks back for tile n's carry; then they
// finish tile n.  Named barriers: 1 among the data warps, 2 + b "tile of buffer
// b folded" (data warps arrive, the look-back warp waits), 4 + b "its carry is
// there" (the other way).  A tile's ticket is taken just before its loads, and
// its aggregate published as soon as it is folded, so a tile waits only for
// tiles that started before it.
__device__ __forceinline__ void rj_scan_run(const Params &P)
{
    // all of it dynamic, as cg_scan_smem counts it: two tiles' element states (a
    // warp's RJ_SCAN_WS apiece), the warps' totals and the carries of two tiles,
    // two tickets
    extern __shared__ __align__(16) unsigned char rj_scan_smem[];
    RjSA *s_x = (RjSA *)rj_scan_smem;
    RjSA(*s_warp)[RJ_SCAN_WARPS] = (RjSA(*)[RJ_SCAN_WARPS])(s_x + 2 * RJ_SCAN_WARPS * RJ_SCAN_WS);
    RjSA *s_pre = s_warp[2];
    long long *s_tile =
        (long long *)(rj_scan_smem + ((2 * RJ_SCAN_WARPS * RJ_SCAN_WS + 2 * RJ_SCAN_WARPS + 2) * sizeof(RjSA) + 7) / 8 * 8);
    const long long nout = P.v[RJ_NOUT], T = P.v[RJ_NBLK];
    const long long ntiles = nout * T, NG = (T + 31) / 32;
    unsigned long long *ticket = (unsigned long long *)P.v[RJ_PARTIALS];
    unsigned long long *D = ticket + 2, *G = D + ntiles * RJ_SCAN_NW;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (P.v[RJ_PER]) {
        if (warp < RJ_SCAN_WARPS) rj_scan_rows(P, nout, T, ticket, s_x, s_warp, &s_tile[0]);
        return;
    }
    if (warp == RJ_SCAN_WARPS) {   // the look-back warp
        rj_scan_lookback_warp(D, G, T, NG, ntiles, s_tile, s_warp, s_pre, lane);
        return;
    }
    RjScanHeld held;
    held.tile = -1;
    for (int b = 0;; b ^= 1) {
        RjSA *sw = rj_scan_sw(s_x, b, warp);
        if (tid == 0) s_tile[b] = (long long)atomicAdd(ticket, 1ull);
        rj_bar_sync(1, RJ_BLOCK);
        const long long tile = s_tile[b];
        if (tile >= ntiles) {
            rj_bar_arrive(2 + b, RJ_SCAN_THREADS);   // the look-back warp stops
            if (held.tile >= 0) {
                rj_bar_sync(4 + (b ^ 1), RJ_SCAN_THREADS);
                rj_scan_finish(P, rj_scan_sw(s_x, b ^ 1, warp), s_warp[b ^ 1], s_pre[b ^ 1], held, warp, lane);
            }
            return;
        }
        RjScanHeld h;
        h.tile = tile;
        h.o = tile / T;
        const long long tt = tile - h.o * T;
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        h.cnt = out_range(P, h.o, lo, sz);
        h.at = 0;   // (ranged rows never take the look-back: their tiles are not uniform)
        h.wbase = tt * RJ_SCAN_TILE + warp * RJ_SCAN_WT;

        rj_scan_fold(P, sw, s_warp[b], h, lo, sz, warp, lane);
        rj_bar_sync(1, RJ_BLOCK);
        // the tile's aggregate, published at once (a group's last tile publishes none)
        if (tid == 0 && (tt & 31) != 31 && tt != T - 1) rj_scan_put(D + tile * RJ_SCAN_NW, rj_scan_tile_total(s_warp[b]), 1);
        rj_bar_arrive(2 + b, RJ_SCAN_THREADS);
        if (held.tile >= 0) {
            rj_bar_sync(4 + (b ^ 1), RJ_SCAN_THREADS);
            rj_scan_finish(P, rj_scan_sw(s_x, b ^ 1, warp), s_warp[b ^ 1], s_pre[b ^ 1], held, warp, lane);
        }
        held = h;
    }
}


#if RJ_VEC
// rj_scanlv: rj_scan_run's look-back over 16-byte loads, a tile's elements in
// registers rather than in shared memory, where every array the pass loads
// allows them (as for rj_scanwv).  A data warp's share of a tile is
// RJ_SCANLV_M stripes of 32 vectors of RJ_VEC consecutive elements, loaded
// first; each lane folds its vector's elements in place, a warp scan of the
// lanes' folds and the stripes' carry give the fold before each of the
// lane's vectors (pre), and the warp's total goes to shared memory, as in
// rj_scan_fold.  The tile's aggregate, the look-back warp and the two tiles in
// flight are rj_scan_run's; finishing a tile folds the carry (the tiles
// before, the warps before) into pre and the elements, and stores them 16
// bytes at a time.  A row's last elements past whole vectors are the first
// vector past them, element by element.
// two blocks an SM: 96 registers, where four spilled 164 bytes (f32 cumsum)
#ifndef RJ_SCANLV_MINB
#define RJ_SCANLV_MINB 2
#endif
enum {
    RJ_SCANLV_M = RJ_SCANV_M,                              // stripes a warp a tile (cg_scanlv_tile)
    RJ_SCANLV_WV = 32 * RJ_SCANLV_M,                       // a warp's vectors of a tile
    RJ_SCANLV_TILE = RJ_SCAN_WARPS * RJ_SCANLV_WV * RJ_VEC
};

struct RjScanHeldV {
    long long tile, o, cnt, u0;        // u0: the warp's first vector of the tile in its row
    Acc e[RJ_SCANLV_M][RJ_VEC];        // the lane's elements, each folded with those before it in its vector
    RjSA pre[RJ_SCANLV_M];             // the fold of the warp's share before each of the lane's vectors
};

// A data warp's share of tile h (h.o, h.cnt, h.u0 set), into h.e and h.pre;
// the warp's total into *swarp.
__device__ __forceinline__ void rj_scanlv_fold(const Params &P, RjScanHeldV &h, const long long *lo, const long long *sz,
                                               RjSA *swarp, int lane)
{
    const long long nv = h.cnt / RJ_VEC, rem = h.cnt - nv * RJ_VEC;
    Vld L[RJ_SCANLV_M];
#pragma unroll
    for (int m = 0; m < RJ_SCANLV_M; m++) {
        const long long u = h.u0 + m * 32 + lane;
        if (u < nv) acc_load_v(L[m], P, h.o, lo, u);
    }
    RjSA sc;   // the stripes before, folded
    rj_sa_init(sc);
#pragma unroll
    for (int m = 0; m < RJ_SCANLV_M; m++) {
        const long long u = h.u0 + m * 32 + lane;
        Acc *e = h.e[m];
        if (u < nv) {
            acc_elems_v(e, P, L[m], h.o, lo, u);
        } else {   // past whole vectors: the row's last elements, one by one
            rj_flt F;
            rj_flt_init(F);
#pragma unroll
            for (int c = 0; c < RJ_VEC; c++) {
                acc_init(e[c]);
                if (u == nv && c < rem) acc_elem(e[c], F, P, h.o, lo, sz, nv * RJ_VEC + c);
            }
            rj_flush(P, F);
        }
        const RjSA inc = rj_scanv_lanes(e);
        const RjSA exc = rj_sa_shfl_idx(inc, lane > 0 ? lane - 1 : 0);
        h.pre[m] = sc;
        if (lane > 0) rj_sa_combine(h.pre[m], exc);
        rj_sa_combine(sc, rj_sa_shfl_idx(inc, 31));
    }
    if (lane == 0) *swarp = sc;
}

// Tile h's results, given the fold of the tiles before it (tpre) and its warps' totals.
__device__ __forceinline__ void rj_scanlv_finish(const Params &P, const RjScanHeldV &h, const RjSA *swarp, const RjSA &tpre,
                                                 int warp, int lane)
{
    const long long nv = h.cnt / RJ_VEC, rem = h.cnt - nv * RJ_VEC;
    RjSA carry = tpre;
    for (int w = 0; w < warp; w++) rj_sa_combine(carry, swarp[w]);
#pragma unroll
    for (int m = 0; m < RJ_SCANLV_M; m++) {
        const long long u = h.u0 + m * 32 + lane;
        RjSA base = carry;
        rj_sa_combine(base, h.pre[m]);
        Acc out[RJ_VEC];
        rj_scanv_out(h.e[m], base, out);
        if (u < nv) {
            scan_store_v(P, h.o, u * RJ_VEC, out);
        } else if (u == nv) {
#pragma unroll
            for (int c = 0; c < RJ_VEC; c++)
                if (c < rem) scan_store(P, h.o, nv * RJ_VEC + c, out[c]);
        }
    }
}

// rj_scan_run with rj_scanlv's tiles (RJ_NBLK counts tiles of RJ_SCANLV_TILE).
__device__ __forceinline__ void rj_scan_run_v(const Params &P)
{
    __shared__ RjSA s_warp[2][RJ_SCAN_WARPS];
    __shared__ RjSA s_pre[2];
    __shared__ long long s_tile[2];
    const long long nout = P.v[RJ_NOUT], T = P.v[RJ_NBLK];
    const long long ntiles = nout * T, NG = (T + 31) / 32;
    unsigned long long *ticket = (unsigned long long *)P.v[RJ_PARTIALS];
    unsigned long long *D = ticket + 2, *G = D + ntiles * RJ_SCAN_NW;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (warp == RJ_SCAN_WARPS) {
        rj_scan_lookback_warp(D, G, T, NG, ntiles, s_tile, s_warp, s_pre, lane);
        return;
    }
    RjScanHeldV held;
    held.tile = -1;
    for (int b = 0;; b ^= 1) {
        if (tid == 0) s_tile[b] = (long long)atomicAdd(ticket, 1ull);
        rj_bar_sync(1, RJ_BLOCK);
        const long long tile = s_tile[b];
        if (tile >= ntiles) {
            rj_bar_arrive(2 + b, RJ_SCAN_THREADS);   // the look-back warp stops
            if (held.tile >= 0) {
                rj_bar_sync(4 + (b ^ 1), RJ_SCAN_THREADS);
                rj_scanlv_finish(P, held, s_warp[b ^ 1], s_pre[b ^ 1], warp, lane);
            }
            return;
        }
        RjScanHeldV h;
        h.tile = tile;
        h.o = tile / T;
        const long long tt = tile - h.o * T;
        long long lo[RJ_NRED + 1], sz[RJ_NRED + 1];
        h.cnt = out_range(P, h.o, lo, sz);
        h.u0 = tt * (RJ_SCANLV_TILE / RJ_VEC) + warp * RJ_SCANLV_WV;
        rj_scanlv_fold(P, h, lo, sz, &s_warp[b][warp], lane);
        rj_bar_sync(1, RJ_BLOCK);
        // the tile's aggregate, published at once (a group's last tile publishes none)
        if (tid == 0 && (tt & 31) != 31 && tt != T - 1) rj_scan_put(D + tile * RJ_SCAN_NW, rj_scan_tile_total(s_warp[b]), 1);
        rj_bar_arrive(2 + b, RJ_SCAN_THREADS);
        if (held.tile >= 0) {
            rj_bar_sync(4 + (b ^ 1), RJ_SCAN_THREADS);
            rj_scanlv_finish(P, held, s_warp[b ^ 1], s_pre[b ^ 1], warp, lane);
        }
        held = h;
    }
}
#endif // RJ_VEC

#endif // RJ_SCAN
