/*
 * tile.c -- operand reuse for pairwise reductions (cg_kernel.tile): where
 * parts of a partial reduction's operand depend on the reduced indices alone,
 * as y[j] in sum(exp(-(x[i]-y[j])^2)) over j or argmin(abs(x[i]-y[j])) over j,
 * each such part is needed by every output.  rj_tile (rj_segment.cuh) gives a
 * block RJ_BLOCK outputs, a thread each; for each tile of RJ_BLOCK positions
 * of the reduced domain its threads evaluate those parts once into shared
 * memory (tile_stage), then every thread folds the whole tile from there
 * (tile_elem), the parts that depend on its output recomputed or kept in
 * registers.  The parts are the largest subtrees that read a bound array or a
 * temporary and no free index: what the generic kernels evaluate per element
 * is evaluated per tile position instead, with the same subscript checks, so
 * the results and the errors are the same.
 *
 *   Stile            one array of RJ_BLOCK values per staged part (s<id>)
 *   tile_stage       part values at reduced position t into slot `slot`
 *   tile_elem        element t folded into `a`, the parts read from slot `slot`
 */
#include "gen.h"

#include <stdio.h>
#include <string.h>

enum { DEP_FREE = 1, DEP_RED = 2, DEP_LOAD = 4, DEP_DONE = 8 };

static int is_red(const plan_pass *ps, int var)
{
    for (int d = 0; d < ps->nred; d++)
        if (ps->red[d] == var) return 1;
    return 0;
}

/* What x depends on (DEP_*), memoised by node id in m. */
static int deps(const gen *g, unsigned char *m, const ir *x)
{
    if (m[x->id] & DEP_DONE) return m[x->id] & 7;
    int r = 0;
    if (x->kind == IR_INDEX) r |= is_red(g->ps, x->slot) ? DEP_RED : DEP_FREE;
    if (x->kind == IR_LOAD) r |= DEP_LOAD;
    for (int i = 0; i < x->nargs; i++) r |= deps(g, m, x->args[i]);
    m[x->id] = (unsigned char)(r | DEP_DONE);
    return r;
}

/* The staged parts under x, into roots[]: 0 where there are more than max. */
static int find_roots(const gen *g, unsigned char *m, unsigned char *seen, const ir *x, const ir **roots, int *n,
                      int max)
{
    if (seen[x->id]) return 1;
    seen[x->id] = 1;
    int d = deps(g, m, x);
    if (!(d & DEP_RED)) return 1;   /* the same for every position: registers */
    if (!(d & DEP_FREE)) {
        if (!(d & DEP_LOAD)) return 1;   /* an index's arithmetic: cheaper than shared memory */
        if (*n == max) return 0;
        roots[(*n)++] = x;
        return 1;
    }
    for (int i = 0; i < x->nargs; i++)
        if (!find_roots(g, m, seen, x->args[i], roots, n, max)) return 0;
    return 1;
}

void cg_emit_tile(gen *g, util_arena *a)
{
    const plan_pass *ps = g->ps;
    cg_kernel *k = g->k;
    util_buf *o = g->o;
    if (k->kind != CG_PARTIAL || ps->key || ps->nred < 1 || ps->nfree < 1) return;
    unsigned char *m = util_arena_alloc(a, (size_t)g->nir + 1), *seen = util_arena_alloc(a, (size_t)g->nir + 1);
    if (!m || !seen) return;
    memset(m, 0, (size_t)g->nir + 1);
    memset(seen, 0, (size_t)g->nir + 1);
    /* every output the same reduced domain: no bound that depends on an index */
    for (int d = 0; d < ps->nred; d++) {
        const plan_var *v = &g->p->vars[ps->red[d]];
        if ((v->lo && deps(g, m, v->lo)) || (v->hi && deps(g, m, v->hi))) return;
    }
    const ir *roots[8];
    int n = 0, reuse = 0;
    for (int q = 0; q < ps->nreds; q++)
        for (int c = 0; c < ps->reds[q].ncomp; c++) {
            if (!find_roots(g, m, seen, ps->reds[q].map[c], roots, &n, 8)) return;
            reuse |= (deps(g, m, ps->reds[q].map[c]) & DEP_FREE) != 0;
        }
    /* nothing read along the reduced indices alone, or nothing that differs
     * between outputs: each output reads alone as well */
    if (n == 0 || !reuse) return;
    int bytes = 0;
    for (int i = 0; i < n; i++) bytes += plan_ct_size(roots[i]->type);
    if (bytes > 32) return;   /* 8 KiB a tile of 256 positions at most */
    k->tile = 1;

    /* parts that fill at most 16 bytes, all of one size (3-D points: 3
     * floats): one position's together (Spos), which a thread reads as one
     * 16-byte load, not one load each; else an array each */
    int size0 = plan_ct_size(roots[0]->type), packed = n > 1 && bytes <= 16;
    for (int i = 1; i < n; i++) packed &= plan_ct_size(roots[i]->type) == size0;
    if (packed) {
        util_buf_puts(o, "struct __align__(16) Spos {\n");
        for (int i = 0; i < n; i++) util_buf_printf(o, "    %s s%d;\n", cg_tname[roots[i]->type], roots[i]->id);
        util_buf_puts(o, "};\nstruct Stile {\n    Spos p[RJ_BLOCK];\n};\n");
    } else {
        util_buf_puts(o, "struct Stile {\n");
        for (int i = 0; i < n; i++) util_buf_printf(o, "    %s s%d[RJ_BLOCK];\n", cg_tname[roots[i]->type], roots[i]->id);
        util_buf_puts(o, "};\n");
    }

    g->deferred = 1;
    util_buf_puts(o, "__device__ __forceinline__ void tile_stage(Stile &S, int slot, rj_flt &F, const Params &P, "
                     "const long long *lo, const long long *sz, long long t)\n{\n");
    cg_begin_function(g);
    cg_emit_red_vars(g, "t");
    for (int i = 0; i < n; i++) {
        cg_emit(g, roots[i]);
        util_buf_printf(o, packed ? "    S.p[slot].s%d = " : "    S.s%d[slot] = ", roots[i]->id);
        cg_ref(g, roots[i]);
        util_buf_puts(o, ";\n");
    }
    util_buf_puts(o, "}\n");

    util_buf_puts(o, "__device__ __forceinline__ void tile_elem(Acc &a, rj_flt &F, const Params &P, const Stile &S, "
                     "int slot, long long o, const long long *lo, const long long *sz, long long t)\n{\n");
    cg_begin_function(g);
    cg_emit_free_vars(g, "o");
    cg_emit_red_vars(g, "t");
    util_buf_puts(o, "    (void)o;\n");
    if (packed) util_buf_puts(o, "    const Spos q = S.p[slot];\n");
    for (int i = 0; i < n; i++) {
        g->done[roots[i]->id] = 1;
        if (packed)
            util_buf_printf(o, "    const %s v%d = q.s%d;\n", cg_tname[roots[i]->type], roots[i]->id, roots[i]->id);
        else
            util_buf_printf(o, "    const %s v%d = S.s%d[slot];\n", cg_tname[roots[i]->type], roots[i]->id, roots[i]->id);
    }
    cg_emit_fold(g);
    util_buf_puts(o, "}\n");
    g->deferred = 0;
}

/* ---- contractions: two sides of operands, tiles of outputs (cg_kernel.tile2) ----
 *
 * Where the operand's parts that vary along the reduced indices each miss one
 * of two free indices, i (the A side) or j (the B side), as A[i,k] and B[k,j]
 * in sum(A[i,k]*B[k,j]) over k (other free indices, a batch, may be in both),
 * rj_tile2 gives a block a tile of RJ_T2BM x RJ_T2BN outputs (i by j) of one
 * batch, each thread RJ_T2M x RJ_T2N of them in registers; for each slice of
 * RJ_T2K reduced positions its threads stage the A parts of the tile's rows
 * and the B parts of its columns in shared memory (t2_stage_a, t2_stage_b),
 * then each thread folds its outputs' elements from there, position by
 * position, in order (t2_step).  The register tile is what makes a matrix
 * product compute-bound: each staged value is used RJ_T2N or RJ_T2M times
 * from registers.
 *
 *   t2_dims    the extents of i and j;  t2_out   the output at (batch, i, j)
 */

/* Free positions (bits of ps->free[]) that x depends on, memoised (bit 15: walked). */
static unsigned fmask(const gen *g, unsigned short *fm, const ir *x)
{
    if (fm[x->id] & 0x8000u) return fm[x->id] & 0x7fffu;
    unsigned r = 0;
    if (x->kind == IR_INDEX)
        for (int d = 0; d < g->ps->nfree; d++)
            if (g->ps->free[d] == x->slot) r |= 1u << d;
    for (int i = 0; i < x->nargs; i++) r |= fmask(g, fm, x->args[i]);
    fm[x->id] = (unsigned short)(r | 0x8000u);
    return r;
}

typedef struct t2_roots {
    const ir *a[4], *b[4];
    int na, nb, reuse_a, reuse_b;
} t2_roots;

/* The A and B parts under x for free positions pi, pj: 0 where a part needs
 * both, or there are too many. */
static int t2_find(const gen *g, unsigned char *m, unsigned short *fm, unsigned char *seen, const ir *x, int pi,
                   int pj, t2_roots *r)
{
    if (seen[x->id]) return 1;
    seen[x->id] = 1;
    int d = deps(g, m, x);
    if (!(d & DEP_RED) || !(d & DEP_LOAD)) return 1;   /* registers, or index arithmetic */
    unsigned f = fmask(g, fm, x);
    if (!(f & (1u << pj))) {
        if (r->na == 4) return 0;
        r->a[r->na++] = x;
        r->reuse_a |= (f & (1u << pi)) != 0;
        return 1;
    }
    if (!(f & (1u << pi))) {
        if (r->nb == 4) return 0;
        r->b[r->nb++] = x;
        r->reuse_b |= 1;
        return 1;
    }
    if (x->kind == IR_LOAD) return 0;   /* a load along i, j and the reduced indices */
    for (int i = 0; i < x->nargs; i++)
        if (!t2_find(g, m, fm, seen, x->args[i], pi, pj, r)) return 0;
    return 1;
}

/* The outermost free position that is neither i nor j (the batch number's
 * last digit, what is left of it: no division), or -1. */
static int t2_outer_batch(const plan_pass *ps, int pi, int pj)
{
    for (int d = 0; d < ps->nfree; d++)
        if (d != pi && d != pj) return d;
    return -1;
}

/* The free variables of output (bt, ii, jj): i and j from the tile, the others
 * digits of the batch number bt (the last free index fastest). */
static void t2_free_vars(gen *g, int pi, int pj)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    util_buf_puts(o, "    long long rem_b = bt;\n    (void)rem_b;\n");
    int outer = t2_outer_batch(ps, pi, pj);
    for (int d = ps->nfree - 1; d >= 0; d--) {
        int v = ps->free[d], lo = g->k->lay.var_lo[v], sz = g->k->lay.var_sz[v];
        if (d == pi) util_buf_printf(o, "    const long long i%d = P.v[%d] + ii;\n", v, lo);
        else if (d == pj) util_buf_printf(o, "    const long long i%d = P.v[%d] + jj;\n", v, lo);
        else if (d == outer) util_buf_printf(o, "    const long long i%d = P.v[%d] + rem_b;\n", v, lo);
        else util_buf_printf(o, "    const long long i%d = P.v[%d] + rj_divmod(rem_b, P.v[%d]);\n", v, lo, sz);
    }
}

/* t2_stage_<side>: the side's parts at (bt, ii, jj) and reduced position t
 * into slot (kk, q) of slice buffer S: a part that is a plain load copied
 * from memory without passing through registers (cp.async: the block's loads
 * all in flight at once, and the next slice's while the current one folds;
 * rj_cp_async_wait_all before reading), any other computed and stored. */
static void t2_stage(gen *g, const char *side, const ir *const *roots, int n, int pi, int pj)
{
    util_buf *o = g->o;
    util_buf_printf(o, "__device__ __forceinline__ void t2_stage_%s(Stile2 &S, int kk, int q, rj_flt &F, const Params &P, "
                       "long long bt, long long ii, long long jj, const long long *lo, const long long *sz, long long t)\n{\n",
                    side);
    cg_begin_function(g);
    t2_free_vars(g, pi, pj);
    cg_emit_red_vars(g, "t");
    /* the computed parts first: a plain load that one of them reads as well
     * (A[i,k] beside exp(A[i,k])) is then a value already, stored as such */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            const ir *x = roots[i];
            int plain = cg_load_is_plain(g, x);
            if (plain != pass) continue;
            if (plain && !g->done[x->id]) {
                char dst[48];
                snprintf(dst, sizeof dst, "&S.%s%d[kk][q]", side, x->id);
                cg_emit_load_async(g, x, dst);
                g->done[x->id] = 1;   /* (no later part reads it: none is left) */
                continue;
            }
            cg_emit(g, x);
            util_buf_printf(o, "    S.%s%d[kk][q] = ", side, x->id);
            cg_ref(g, x);
            util_buf_puts(o, ";\n");
        }
    util_buf_puts(o, "}\n");
}

void cg_emit_tile2(gen *g, util_arena *a)
{
    const plan_pass *ps = g->ps;
    cg_kernel *k = g->k;
    util_buf *o = g->o;
    if (k->kind != CG_PARTIAL || ps->key || ps->nred < 1 || ps->nfree < 2 || ps->nfree > 15) return;
    size_t nb = (size_t)g->nir + 1;
    unsigned char *m = util_arena_alloc(a, nb), *seen = util_arena_alloc(a, nb);
    unsigned short *fm = util_arena_alloc(a, nb * sizeof *fm);
    if (!m || !seen || !fm) return;
    memset(m, 0, nb);
    memset(fm, 0, nb * sizeof *fm);
    for (int d = 0; d < ps->nred; d++) {
        const plan_var *v = &g->p->vars[ps->red[d]];
        if ((v->lo && deps(g, m, v->lo)) || (v->hi && deps(g, m, v->hi))) return;
    }
    /* the pair of free indices: j the innermost that works (so that a warp's
     * outputs are neighbours in j), i the innermost other */
    t2_roots r = {0};
    int pi = -1, pj = -1;
    for (int j = ps->nfree - 1; j >= 0 && pj < 0; j--)
        for (int i = ps->nfree - 1; i >= 0 && pj < 0; i--) {
            if (i == j) continue;
            memset(seen, 0, nb);
            memset(&r, 0, sizeof r);
            int ok = 1;
            for (int q = 0; q < ps->nreds && ok; q++)
                for (int c = 0; c < ps->reds[q].ncomp && ok; c++)
                    ok = t2_find(g, m, fm, seen, ps->reds[q].map[c], i, j, &r);
            if (ok && r.reuse_a && r.reuse_b) pi = i, pj = j;
        }
    if (pj < 0) return;
    int ba = 0, bb = 0;
    for (int i = 0; i < r.na; i++) ba += plan_ct_size(r.a[i]->type);
    for (int i = 0; i < r.nb; i++) bb += plan_ct_size(r.b[i]->type);
    /* an 8 x 8 register tile for one 4-byte accumulator, 4 x 4 otherwise; a
     * slice (Stile2) in the 48 KiB of static shared memory */
    int t = k->acc_size <= 4 ? 8 : 4;
    if (16 * ((16 * t + 4) * ba + 16 * t * bb) > 48 * 1024) return;
    k->tile2 = t;
    k->t2_ni = k->lay.var_sz[ps->free[pi]];
    k->t2_nj = k->lay.var_sz[ps->free[pj]];

    util_buf_printf(o, "#define RJ_T2M %d\n#define RJ_T2N %d\n#define RJ_T2K 16\n#define RJ_T2BM (16 * RJ_T2M)\n"
                       "#define RJ_T2BN (16 * RJ_T2N)\n#define RJ_T2POS(t, u) (((u) >> 2) * 64 + (t) * 4 + ((u) & 3))\n"
                       "struct Stile2 {\n", t, t);
    /* A's rows padded by 4: the slice's positions, staged by neighbouring
     * threads, fall in different banks */
    for (int i = 0; i < r.na; i++)
        util_buf_printf(o, "    %s a%d[RJ_T2K][RJ_T2BM + 4];\n", cg_tname[r.a[i]->type], r.a[i]->id);
    for (int i = 0; i < r.nb; i++) util_buf_printf(o, "    %s b%d[RJ_T2K][RJ_T2BN];\n", cg_tname[r.b[i]->type], r.b[i]->id);
    /* two slice buffers where they fit in 48 KiB (the next slice loads
     * while the current one folds), else one */
    util_buf_printf(o, "};\n#define RJ_T2BUF (2 * sizeof(Stile2) <= 48 * 1024 ? 2 : 1)\n");
    int vi = ps->free[pi], vj = ps->free[pj];
    util_buf_printf(o, "__device__ __forceinline__ void t2_dims(const Params &P, long long *ni, long long *nj)\n{\n"
                       "    *ni = P.v[%d];\n    *nj = P.v[%d];\n}\n",
                    k->lay.var_sz[vi], k->lay.var_sz[vj]);
    /* the output's number: its free positions' digits, the first outermost */
    util_buf_puts(o, "__device__ __forceinline__ long long t2_out(const Params &P, long long bt, long long ii, long long jj)\n"
                     "{\n    long long o = 0, mul = 1;\n    (void)P;\n");
    int outer = t2_outer_batch(ps, pi, pj);
    for (int d = ps->nfree - 1; d >= 0; d--) {
        int sz = k->lay.var_sz[ps->free[d]];
        if (d == pi) util_buf_printf(o, "    o += ii * mul;\n    mul *= P.v[%d];\n", sz);
        else if (d == pj) util_buf_printf(o, "    o += jj * mul;\n    mul *= P.v[%d];\n", sz);
        else if (d == outer) util_buf_printf(o, "    o += bt * mul;\n    mul *= P.v[%d];\n", sz);
        else util_buf_printf(o, "    o += rj_divmod(bt, P.v[%d]) * mul;\n    mul *= P.v[%d];\n", sz, sz);
    }
    util_buf_puts(o, "    return o;\n}\n");

    /* output (bt, ii, jj)'s results: the temporaries' offset from the free
     * variables (acc_write's from o divides by every extent) */
    util_buf_puts(o, "__device__ __forceinline__ void t2_write(const Params &P, long long bt, long long ii, long long jj, "
                     "const Acc &a)\n{\n");
    t2_free_vars(g, pi, pj);
    {
        int tb = k->lay.temp_base[ps->reds[0].temp[0]], nd = g->p->temps[ps->reds[0].temp[0]].ndim;
        util_buf_puts(o, "    long long off = 0;\n");
        for (int d = 0; d < ps->nfree; d++) util_buf_printf(o, "    off += i%d * P.v[%d];\n", ps->free[d], tb + 1 + nd + d);
    }
    cg_emit_acc_stores(g);
    util_buf_puts(o, "}\n");

    g->deferred = 1;
    t2_stage(g, "a", r.a, r.na, pi, pj);
    t2_stage(g, "b", r.b, r.nb, pi, pj);

    /* one element: the parts from registers, the rest computed, folded */
    util_buf_puts(o, "__device__ __forceinline__ void t2_elem(Acc &a, rj_flt &F, const Params &P, long long bt, long long ii, "
                     "long long jj, const long long *lo, const long long *sz, long long t");
    for (int i = 0; i < r.na; i++) util_buf_printf(o, ", const %s v%d", cg_tname[r.a[i]->type], r.a[i]->id);
    for (int i = 0; i < r.nb; i++) util_buf_printf(o, ", const %s v%d", cg_tname[r.b[i]->type], r.b[i]->id);
    util_buf_puts(o, ")\n{\n");
    cg_begin_function(g);
    t2_free_vars(g, pi, pj);
    cg_emit_red_vars(g, "t");
    for (int i = 0; i < r.na; i++) g->done[r.a[i]->id] = 1;
    for (int i = 0; i < r.nb; i++) g->done[r.b[i]->id] = 1;
    cg_emit_fold(g);
    util_buf_puts(o, "}\n");
    g->deferred = 0;

    /* slice position kk for the thread's outputs: its rows' A parts and its
     * columns' B parts into registers, then every pair */
    /* rows and columns past the extents (their outputs are not written)
     * evaluate the element at the last row or column: what is not staged,
     * w[i] or a temporary r[i], is then read in range */
    util_buf_puts(o, "__device__ __forceinline__ void t2_step(Acc (&acc)[RJ_T2M][RJ_T2N], rj_flt &F, const Params &P, "
                     "const Stile2 &S, int kk, int ty, int tx, long long bt, long long i0, long long j0, long long ni, "
                     "long long nj, const long long *lo, const long long *sz, long long t)\n{\n");
    for (int i = 0; i < r.na; i++)
        util_buf_printf(o, "    %s a%d[RJ_T2M];\n#pragma unroll\n    for (int u = 0; u < RJ_T2M; u++) a%d[u] = "
                           "S.a%d[kk][RJ_T2POS(ty, u)];\n",
                        cg_tname[r.a[i]->type], r.a[i]->id, r.a[i]->id, r.a[i]->id);
    for (int i = 0; i < r.nb; i++)
        util_buf_printf(o, "    %s b%d[RJ_T2N];\n#pragma unroll\n    for (int u = 0; u < RJ_T2N; u++) b%d[u] = "
                           "S.b%d[kk][RJ_T2POS(tx, u)];\n",
                        cg_tname[r.b[i]->type], r.b[i]->id, r.b[i]->id, r.b[i]->id);
    util_buf_puts(o, "#pragma unroll\n    for (int u = 0; u < RJ_T2M; u++)\n#pragma unroll\n"
                     "        for (int w = 0; w < RJ_T2N; w++)\n"
                     "            t2_elem(acc[u][w], F, P, bt, rj_min_ll(i0 + RJ_T2POS(ty, u), ni - 1), "
                     "rj_min_ll(j0 + RJ_T2POS(tx, w), nj - 1), lo, sz, t");
    for (int i = 0; i < r.na; i++) util_buf_printf(o, ", a%d[u]", r.a[i]->id);
    for (int i = 0; i < r.nb; i++) util_buf_printf(o, ", b%d[w]", r.b[i]->id);
    util_buf_puts(o, ");\n}\n");
}
