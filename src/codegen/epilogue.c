/*
 * epilogue.c -- a map pass run inside the reduction pass before it
 * (plan_pass.epilogue): epi_out evaluates the map for output o of the
 * reduction, right after o's reduction is written, so that a row's softmax
 * reads the row again while it is still in L2 instead of a second launch
 * reading it from memory.  The strategy kernels call it through rj_epilogue
 * (rj_reduce.cuh) when the runtime sets RJ_EPION.
 *
 *   RJ_EPI 1: the map has the reduction's free indices only (log(s[i]) + m[i]):
 *             one element an output, computed by the thread that wrote it.
 *   RJ_EPI 2: the free indices, then the reduced ones (exp(A[i,j] - m[i]) / s[i]):
 *             the output's whole domain, its threads taking elements
 *             from the end, which the reduction read last: cnt-1-first,
 *             cnt-1-first-step, ...
 */
#include "gen.h"

#include <string.h>

/* Does x depend on one of the pass's reduced indices?  By node id in dep:
 * 1 no, 2 yes, 3 yes and walked by emit_invariant (0: not yet known). */
static int varies(gen *g, unsigned char *dep, const ir *x)
{
    if (dep[x->id]) return dep[x->id] >= 2;
    int r = 0;
    if (x->kind == IR_INDEX)
        for (int d = 0; d < g->ps->nred; d++) r |= x->slot == g->ps->red[d];
    for (int i = 0; i < x->nargs && !r; i++) r = varies(g, dep, x->args[i]);
    dep[x->id] = r ? 2 : 1;
    return r;
}

/* The parts of x that are the same for every element of an output (the
 * row's statistics and what is computed from them alone), emitted once; each
 * varying node is walked once (the IR is a graph). */
static void emit_invariant(gen *g, unsigned char *dep, const ir *x)
{
    if (g->done[x->id] || dep[x->id] == 3) return;
    if (!varies(g, dep, x)) {
        cg_emit(g, x);
        return;
    }
    dep[x->id] = 3;
    for (int i = 0; i < x->nargs; i++) emit_invariant(g, dep, x->args[i]);
}

/* May the map run over 16-byte vectors (cg_kernel.epi_vec)?  Every load of x
 * that varies along the row is one of the pass's vector loads (so the
 * runtime's vec_ok covers it), and no temporary varies. */
static int vec_map(gen *g, unsigned char *dep, unsigned char *seen, const ir *x)
{
    if (seen[x->id] || !varies(g, dep, x)) return 1;
    seen[x->id] = 1;
    if (x->kind == IR_LOAD) {
        if (x->slot < 0) return 0;
        for (int i = 0; i < g->k->nvec; i++)
            if (g->vloads[i] == x) return 1;
        return 0;
    }
    for (int i = 0; i < x->nargs; i++)
        if (!vec_map(g, dep, seen, x->args[i])) return 0;
    return 1;
}

/* The parts of the map that vary along the row, for one element (the
 * invariant ones stay done: `keep` is the done[] after them). */
static void emit_element(gen *g, const unsigned char *keep, const ir *map)
{
    memcpy(g->done, keep, (size_t)g->nir + 1);
    cg_emit(g, map);
}

/* epi_out_v: the row's whole vectors, VEC elements of each varying array a
 * 16-byte load (b<id>: the row's start) and of the result a 16-byte store;
 * then what is left past them one element at a time.  staged: epi_out_s,
 * the same with the whole vectors read from the row rj_segbs staged in
 * shared memory (S, the reduction's Vld for each vector of the row). */
static void emit_vec_out(gen *g, unsigned char *dep, unsigned char *keep, const unsigned char *used,
                         const plan_pass *ep, int staged)
{
    util_buf *o = g->o;
    cg_kernel *k = g->k;
    const plan_temp *t = &g->p->temps[ep->map_temp];
    int base = k->lay.temp_base[ep->map_temp], red = g->ps->red[0], vec = k->vec;
    const char *tn = cg_tname[t->type];
    cg_begin_function(g);
    util_buf_printf(o, "__device__ __forceinline__ void epi_out_%s(const Params &P, long long o, const long long *lo, "
                       "long long cnt, long long first, long long step%s)\n{\n    if (first >= cnt) return;\n",
                    staged ? "s" : "v", staged ? ", const Vld *S" : "");
    cg_emit_free_vars(g, "o");
    /* an earlier walk (epi_out's) left its marks: walk again, so that the
     * row's statistics are loaded once here too, not for every element */
    for (int i = 0; i <= g->nir; i++)
        if (dep[i] == 3) dep[i] = 2;
    emit_invariant(g, dep, ep->map);
    memcpy(keep, g->done, (size_t)g->nir + 1);
    for (int i = 0; i < k->nvec; i++) {
        const ir *x = g->vloads[i];
        if (!varies(g, dep, x) || !used[x->id]) continue;
        int b = cg_buf_base(g, x->slot), nd = x->nargs;
        util_buf_printf(o, "    const %s *b%d = (const %s *)P.v[%d]", cg_tname[x->type], x->id, cg_tname[x->type], b);
        for (int d = 0; d < nd; d++) {
            if (x->args[d]->slot == red) util_buf_puts(o, " + lo[0]");
            else util_buf_printf(o, " + i%d * P.v[%d]", x->args[d]->slot, b + 1 + nd + d);
        }
        util_buf_puts(o, ";\n");
    }
    util_buf_printf(o, "    %s *w = (%s *)P.v[%d]", tn, tn, base);
    for (int d = 0; d < t->ndim; d++) {
        if (t->dims[d] == red) util_buf_puts(o, " + lo[0]");
        else util_buf_printf(o, " + i%d * P.v[%d]", t->dims[d], base + 1 + t->ndim + d);
    }
    util_buf_printf(o, ";\n    const long long nv = cnt / %d;\n", vec);
    /* past the whole vectors (fewer than VEC elements), then the vectors from
     * the last: the row's end was read last, so it is the likeliest still in L2 */
    util_buf_printf(o, "    for (long long t = nv * %d + first; t < cnt; t += step) {\n"
                       "    const long long i%d = lo[0] + t;\n", vec, red);
    emit_element(g, keep, ep->map);
    util_buf_puts(o, "    w[t] = ");
    cg_ref(g, ep->map);
    util_buf_puts(o, ";\n    }\n#pragma unroll 2\n    for (long long u = nv - 1 - first; u >= 0; u -= step) {\n");
    for (int i = 0; i < k->nvec; i++)
        if (varies(g, dep, g->vloads[i]) && used[g->vloads[i]->id] && staged)
            util_buf_printf(o, "    const rj_vec<%s, %d> q%d = S[u].q%d;\n", cg_tname[g->vloads[i]->type], vec,
                            g->vloads[i]->id, g->vloads[i]->id);
        else if (varies(g, dep, g->vloads[i]) && used[g->vloads[i]->id])
            util_buf_printf(o, "    const rj_vec<%s, %d> q%d = rj_ldg_v((const rj_vec<%s, %d> *)b%d + u);\n",
                            cg_tname[g->vloads[i]->type], vec, g->vloads[i]->id, cg_tname[g->vloads[i]->type], vec,
                            g->vloads[i]->id);
    util_buf_printf(o, "    rj_vec<%s, %d> wr;\n", tn, vec);
    for (int c = 0; c < vec; c++) {
        util_buf_printf(o, "    {\n    const long long i%d = lo[0] + u * %d + %d;\n    (void)i%d;\n", red, vec, c, red);
        memcpy(g->done, keep, (size_t)g->nir + 1);
        for (int i = 0; i < k->nvec; i++) {
            const ir *x = g->vloads[i];
            if (!varies(g, dep, x) || !used[x->id]) continue;
            g->done[x->id] = 1;
            util_buf_printf(o, "    const %s v%d = q%d.c[%d];\n", cg_tname[x->type], x->id, x->id, c);
        }
        cg_emit(g, ep->map);
        util_buf_printf(o, "    wr.c[%d] = ", c);
        cg_ref(g, ep->map);
        util_buf_puts(o, ";\n    }\n");
    }
    util_buf_printf(o, "    rj_stcs_v((rj_vec<%s, %d> *)w + u, wr);\n    }\n", tn, vec);
    util_buf_puts(o, "}\n");
}

int cg_epilogue_kind(const plan *p, int pi)
{
    if (pi + 1 >= p->npasses || !p->passes[pi + 1].epilogue) return 0;
    return p->passes[pi + 1].nfree > p->passes[pi].nfree ? 2 : 1;
}

int cg_emit_epilogue(gen *g, util_arena *a)
{
    const plan_pass *ep = &g->p->passes[g->pi + 1];
    util_buf *o = g->o;
    unsigned char *dep = util_arena_alloc(a, (size_t)g->nir + 1);
    if (!dep) return -1;
    memset(dep, 0, (size_t)g->nir + 1);
    g->k->epi = cg_epilogue_kind(g->p, g->pi);
    /* the map's loads of bound arrays go through the read-only path: they
     * are not written while the kernel runs, so the next elements' loads may
     * be issued before this element's store */
    g->ro_loads = 1;
    cg_begin_function(g);
    util_buf_puts(o, "__device__ __forceinline__ void epi_out(const Params &P, long long o, const long long *lo, "
                     "const long long *sz, long long cnt, long long first, long long step)\n{\n"
                     "    (void)lo;\n    (void)sz;\n    if (first >= cnt) return;\n");
    cg_emit_free_vars(g, "o");
    emit_invariant(g, dep, ep->map);
    /* from the row's end, read last by the reduction */
    util_buf_puts(o, "#pragma unroll 4\n    for (long long t = cnt - 1 - first; t >= 0; t -= step) {\n");
    if (g->k->epi == 2) cg_emit_red_vars(g, "t");
    cg_emit(g, ep->map);
    const plan_temp *t = &g->p->temps[ep->map_temp];
    int base = g->k->lay.temp_base[ep->map_temp];
    util_buf_puts(o, "    long long off = 0;\n");
    for (int d = 0; d < t->ndim; d++)
        util_buf_printf(o, "    off += i%d * P.v[%d];\n", t->dims[d], base + 1 + t->ndim + d);
    util_buf_printf(o, "    ((%s *)P.v[%d])[off] = ", cg_tname[t->type], base);
    cg_ref(g, ep->map);
    util_buf_puts(o, ";\n    }\n}\n");
    /* the same over 16-byte vectors where the row's loads and the result allow */
    const plan_temp *t2 = &g->p->temps[ep->map_temp];
    unsigned char *seen = util_arena_alloc(a, (size_t)g->nir + 1), *keep = util_arena_alloc(a, (size_t)g->nir + 1);
    if (!seen || !keep) return -1;
    memset(seen, 0, (size_t)g->nir + 1);
    if (g->k->epi == 2 && g->k->vec && g->ps->nred == 1 && t2->ndim > 0 && t2->dims[t2->ndim - 1] == g->ps->red[0] &&
        plan_ct_size(t2->type) == g->k->vec_esz && vec_map(g, dep, seen, ep->map)) {
        g->k->epi_vec = g->k->vec;
        g->k->epi_base = base;
        g->k->epi_ndim = t2->ndim;
        emit_vec_out(g, dep, keep, seen, ep, 0);   /* seen: the varying nodes the map reaches */
        if (g->k->kind == CG_PARTIAL && !g->k->rvec && !g->ps->key) {
            emit_vec_out(g, dep, keep, seen, ep, 1);
            g->k->epi_staged = 1;
        }
    }
    g->ro_loads = 0;
    return 0;
}
