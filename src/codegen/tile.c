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

    util_buf_puts(o, "struct Stile {\n");
    for (int i = 0; i < n; i++) util_buf_printf(o, "    %s s%d[RJ_BLOCK];\n", cg_tname[roots[i]->type], roots[i]->id);
    util_buf_puts(o, "};\n");

    g->deferred = 1;
    util_buf_puts(o, "__device__ __forceinline__ void tile_stage(Stile &S, int slot, rj_flt &F, const Params &P, "
                     "const long long *lo, const long long *sz, long long t)\n{\n");
    cg_begin_function(g);
    cg_emit_red_vars(g, "t");
    for (int i = 0; i < n; i++) {
        cg_emit(g, roots[i]);
        util_buf_printf(o, "    S.s%d[slot] = ", roots[i]->id);
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
    for (int i = 0; i < n; i++) {
        g->done[roots[i]->id] = 1;
        util_buf_printf(o, "    const %s v%d = S.s%d[slot];\n", cg_tname[roots[i]->type], roots[i]->id, roots[i]->id);
    }
    cg_emit_fold(g);
    util_buf_puts(o, "}\n");
    g->deferred = 0;
}
