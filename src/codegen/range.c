/*
 * range.c -- out_range, each output's domain: the reduced indices' starts
 * and extents (from the plan or from ranges read from the data), with a
 * partial pass's ranged subscripts checked here once an output.
 */
#include "gen.h"
#include "core/extents.h"

#include <string.h>

/* The subscripts of the element code's loads that a ranged index runs
 * through, checked once an output over the index's whole range instead of
 * at every element (CSR rows spent half their instructions there): a bad
 * range reports its first bad subscript, as the element that reads it
 * would, and empties the output's domain, so that nothing out of range is
 * read.  Every load of the element code is evaluated for every element (no
 * operator skips one), so the range check faults exactly when some element
 * would. */
static void emit_range_checks(gen *g, const ir *x)
{
    if (g->seen[x->id]) return;
    g->seen[x->id] = 1;
    for (int i = 0; i < x->nargs; i++) emit_range_checks(g, x->args[i]);
    if (x->kind != IR_LOAD || x->slot < 0) return;
    int base = cg_buf_base(g, x->slot);
    for (int d = 0; d < x->nargs; d++) {
        int v;
        int64_t c;
        if (!cg_ranged_subscript(g, x->args[d], &v, &c)) continue;
        util_buf_printf(g->o,
                        "    if (cnt > 0) { long long a0 = (long long)((unsigned long long)lo[%d] + %lldull), n = P.v[%d]; "
                        "if (a0 < 0 || a0 > n - sz[%d]) { rj_fault(P, %d, %d, %d, a0 < 0 || a0 >= n ? a0 : n); cnt = 0; } }\n",
                        v, (long long)c, base + 1 + d, v, RED_ERR_INDEX, x->id, d);
    }
}

/* A scan over ranged rows (plan_scan_ranged) writes row o's results at its
 * range: the rows must tile the result's 0..K in order (core_scan_tile_error's
 * rules).  A row that breaks one faults and writes nothing; a row that would
 * write outside 0..K writes nothing either but does not fault, since with CSR
 * bounds some row then breaks a rule (a first start past 0, a range ending
 * before it starts, a last end other than K), so that one bad offset is one
 * fault, the one the CPU reports.  A fault's node word is the pass and the
 * rule (<< 16), its dimension word the row. */
static void emit_tiling_check(gen *g)
{
    int base = g->k->lay.temp_base[g->ps->reds[0].temp[0]];
    util_buf_printf(g->o,
                    "      { const long long K = P.v[%d], last = P.v[RJ_NOUT] - 1, e = lo[0] + sz[0]; int bad = -1; long long val = 0;\n"
                    "        if (o == 0 && lo[0] != 0) { bad = %d; val = lo[0]; }\n"
                    "        else if (o < last && h < lo[0]) { bad = %d; val = h; }\n"
                    "        else if (o == last && e != K) { bad = %d; val = e; }\n"
                    "        if (bad >= 0) rj_fault(P, %d, %d | (unsigned long long)bad << 16, (unsigned long long)o, val);\n"
                    "        if (bad >= 0 || lo[0] < 0 || e > K) sz[0] = 0; }\n",
                    base + 1, CORE_TILE_START, CORE_TILE_BACK, CORE_TILE_END, RED_ERR_SHAPE, g->pi);
}

/* A candidate for rj_segm (rj_segment.cuh, the merge path over CSR rows): one
 * output index r, one reduced index over `ptr[r]..ptr[r+1]` (plan_csr_bounds),
 * no keys, an element code that does not read r (rj_segm evaluates elements
 * before it knows their rows), no epilogue, and an accumulator small enough
 * for a tile of them in shared memory.  The runtime checks that the offsets
 * never decrease and fall back to a thread a row where they do. */
static int merge_pass(const gen *g)
{
    const plan_pass *ps = g->ps;
    if (g->k->kind != CG_PARTIAL || ps->nfree != 1 || ps->nred != 1 || ps->key || g->k->acc_size > 64) return 0;
    const plan_var *pv = &g->p->vars[ps->red[0]];
    return pv->lo && plan_csr_bounds(pv->lo, pv->hi, ps->free[0]) && !cg_fold_reads_free(ps);
}

/* out_range: the domain of output o; lo[d], sz[d] per reduced index, and for
 * keyed passes lo[RJ_NRED] = the segment's first linear position.  Partial
 * passes check ranged subscripts here (g->hoisted, emit_range_checks). */
void cg_emit_out_range(gen *g)
{
    const plan *p = g->p;
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    util_buf_puts(o, "__device__ __forceinline__ long long out_range(const Params &P, long long o, long long *lo, "
                     "long long *sz)\n{\n");
    cg_begin_function(g);
    int ranged = 0;
    for (int d = 0; d < ps->nred; d++) ranged |= p->vars[ps->red[d]].lo != NULL;
    /* not full reductions, whose kernels fold the host's count of elements
     * rather than out_range's, nor keyed ones */
    g->hoisted = ranged && g->k->kind == CG_PARTIAL;
    if (ranged) cg_emit_free_vars(g, "o");
    g->k->merge = merge_pass(g) && !cg_epilogue_kind(p, g->pi);
    util_buf_puts(o, "    long long cnt = 1;\n");
    for (int d = 0; d < ps->nred; d++) {
        const plan_var *pv = &p->vars[ps->red[d]];
        if (pv->lo) {
            cg_emit(g, pv->lo);
            cg_emit(g, pv->hi);
            util_buf_printf(o, "    lo[%d] = ", d);
            cg_ref(g, pv->lo);
            util_buf_printf(o, ";\n    { long long h = ");
            cg_ref(g, pv->hi);
            /* an extent past 2^40 (a stray bound) is a fault, reported
             * like an index error, rather than a loop for days */
            util_buf_printf(o, "; sz[%d] = h > lo[%d] ? (long long)((unsigned long long)h - (unsigned long long)lo[%d]) : 0;", d, d, d);
            if (plan_scan_ranged(p, ps))   /* (the tiling check holds the row to 0..K instead) */
                emit_tiling_check(g);
            else
                util_buf_printf(o, " if ((unsigned long long)sz[%d] > (1ull << 40)) { rj_fault(P, %d, %d, %d, h); sz[%d] = 0; }%s\n",
                                d, RED_ERR_LIMIT, g->pi, d, d,
                                /* rj_segm's test of the offsets: the raw end */
                                g->k->merge ? " sz[RJ_NRED] = h;" : "");
            util_buf_puts(o, "    }\n");
        } else {
            util_buf_printf(o, "    lo[%d] = P.v[%d]; sz[%d] = P.v[%d];\n", d, g->k->lay.var_lo[ps->red[d]], d,
                            g->k->lay.var_sz[ps->red[d]]);
        }
        if (ranged && d > 0)
            /* the domain, a product of extents of at most 2^40 each, is
             * held to 2^40 too: wrapped, it could come out small and the
             * output silently wrong */
            util_buf_printf(o, "    if (sz[%d] && cnt > (1ll << 40) / sz[%d]) { rj_fault(P, %d, %d, ~0ull, 0); cnt = 0; }\n"
                               "    else cnt *= sz[%d];\n",
                            d, d, RED_ERR_LIMIT, g->pi, d);
        else
            util_buf_printf(o, "    cnt *= sz[%d];\n", d);
    }
    if (g->hoisted) {
        memset(g->seen, 0, (size_t)g->nir + 1);
        for (int q = 0; q < ps->nreds; q++)
            for (int c = 0; c < ps->reds[q].ncomp; c++) emit_range_checks(g, ps->reds[q].map[c]);
    }
    if (ps->key) {
        util_buf_puts(o, "    lo[RJ_NRED] = 0;\n    if (P.v[RJ_KEYMODE]) {\n"
                         "        const long long *offs = (const long long *)P.v[RJ_OFFS];\n"
                         "        lo[RJ_NRED] = offs[o];\n        cnt = offs[o + 1] - offs[o];\n    }\n");
    } else {
        util_buf_puts(o, "    lo[RJ_NRED] = 0;\n");
    }
    util_buf_puts(o, "    return cnt;\n}\n");
    g->k->ranged = ranged;
}

