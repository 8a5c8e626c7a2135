/*
 * layout.c -- the parameter block of a pass's kernels: where each bound
 * array, temporary, scalar and index extent sits, and the index variables
 * and output offsets the generated code computes from it.
 */
#include "gen.h"

int cg_layout_params(gen *g, util_arena *a, util_diag *diag)
{
    const plan *p = g->p;
    cg_layout *L = &g->k->lay;
    L->buf_base = util_arena_alloc(a, (size_t)(p->nbufs + 1) * sizeof(int));
    L->temp_base = util_arena_alloc(a, (size_t)(p->ntemps + 1) * sizeof(int));
    L->scalar_slot = util_arena_alloc(a, (size_t)(p->nscalars + 1) * sizeof(int));
    L->var_lo = util_arena_alloc(a, (size_t)(p->nvars + 1) * sizeof(int));
    L->var_sz = util_arena_alloc(a, (size_t)(p->nvars + 1) * sizeof(int));
    if (!L->buf_base || !L->temp_base || !L->scalar_slot || !L->var_lo || !L->var_sz)
        return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    int n = CG_RESERVED;
    for (int i = 0; i < p->nbufs; i++) {
        L->buf_base[i] = n;
        n += 1 + 2 * p->bufs[i].ndim;
    }
    for (int i = 0; i < p->ntemps; i++) {
        L->temp_base[i] = n;
        n += 1 + 2 * p->temps[i].ndim;
    }
    for (int i = 0; i < p->nscalars; i++) L->scalar_slot[i] = n++;
    for (int i = 0; i < p->nvars; i++) {
        L->var_lo[i] = n++;
        L->var_sz[i] = n++;
    }
    L->nparams = n;
    if (n > CG_MAX_PARAMS)
        return util_diag_set(diag, RED_ERR_LIMIT, "the expression needs %d kernel parameters (%d at most)",
                             n, CG_MAX_PARAMS);
    return 0;
}

int cg_buf_base(gen *g, int slot)
{
    return slot >= 0 ? g->k->lay.buf_base[slot] : g->k->lay.temp_base[-1 - slot];
}

red_dtype cg_buf_dtype(gen *g, int slot)
{
    return slot >= 0 ? g->p->bufs[slot].dtype : plan_dtype_of_ct(g->p->temps[-1 - slot].type);
}


/* Declare index variable values: free ones from `o`, reduced ones from `t`
 * with per-output starts lo[] and extents sz[]. */
void cg_emit_free_vars(gen *g, const char *o)
{
    const plan_pass *ps = g->ps;
    if (!ps->nfree) return;
    util_buf_printf(g->o, "    long long rem_o = %s;\n", o);
    for (int d = ps->nfree - 1; d >= 0; d--) {
        int v = ps->free[d];
        int lo = g->k->lay.var_lo[v], sz = g->k->lay.var_sz[v];
        if (d > 0)
            util_buf_printf(g->o, "    const long long i%d = P.v[%d] + rj_divmod(rem_o, P.v[%d]);\n", v, lo, sz);
        else
            util_buf_printf(g->o, "    const long long i%d = P.v[%d] + rem_o;\n", v, lo);
    }
}

void cg_emit_red_vars(gen *g, const char *t)
{
    const plan_pass *ps = g->ps;
    if (!ps->nred) return;
    util_buf_printf(g->o, "    long long rem_t = %s;\n", t);
    for (int d = ps->nred - 1; d >= 0; d--) {
        int v = ps->red[d];
        if (d > 0)
            util_buf_printf(g->o, "    const long long i%d = lo[%d] + rj_divmod(rem_t, sz[%d]);\n", v, d, d);
        else
            util_buf_printf(g->o, "    const long long i%d = lo[0] + rem_t;\n", v);
    }
    (void)g;
}


void cg_emit_temp_offset(gen *g, int temp, const char *o_name)
{
    const plan_pass *ps = g->ps;
    int base = g->k->lay.temp_base[temp];
    int nd = g->p->temps[temp].ndim;
    util_buf *o = g->o;
    util_buf_puts(o, "    long long off = 0;\n");
    if (ps->key && nd == 1) {
        /* a keyed pass's outputs are its own, contiguous: stride 1 */
        util_buf_printf(o, "    off = %s;\n", o_name);
        return;
    }
    if (ps->key) {
        util_buf_printf(o, "    off = %s * P.v[%d];\n", o_name, base + 1 + nd);
        return;
    }
    if (!ps->nfree) return;
    util_buf_printf(o, "    { long long r = %s;\n", o_name);
    for (int d = ps->nfree - 1; d >= 0; d--) {
        int v = ps->free[d];
        int lo = g->k->lay.var_lo[v], sz = g->k->lay.var_sz[v];
        if (d > 0)
            util_buf_printf(o, "      off += (P.v[%d] + r %% P.v[%d]) * P.v[%d]; r /= P.v[%d];\n", lo, sz,
                            base + 1 + nd + d, sz);
        else
            util_buf_printf(o, "      off += (P.v[%d] + r) * P.v[%d];\n", lo, base + 1 + nd + d);
    }
    util_buf_puts(o, "    }\n");
}

