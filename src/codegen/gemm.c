/*
 * gemm.c -- is a pass a matrix product (cg_kernel.gemm)?  C[i,j] =
 * sum(A[i,k]*B[k,j]) over k, or a batch of them, C[b,i,j] =
 * sum(A[b,i,k]*B[b,k,j]) over k (plan_find_product), its subscripts proven in
 * range, the result of the accumulator's type over (b,) i, j.  The kernels stay as
 * generated (rj_tile2 and the rest); the runtime may run the pass through
 * cuBLASLt instead where the strides allow it (src/gpu/blas.c).  Which array is A and
 * which B, and the order of the indices in each, are free: the record says
 * which dimension each index subscripts.
 */
#include "gen.h"

/* Load x's subscripts all proven in range, and its array of x's type. */
static int in_range(gen *g, const ir *x, int ct)
{
    if (cg_buf_dtype(g, x->slot) != (ct == CT_F32 ? RED_F32 : RED_F64)) return 0;
    for (int d = 0; d < x->nargs; d++)
        if (!cg_proven_in_range(g, x, d)) return 0;
    return 1;
}

void cg_find_gemm(gen *g)
{
    const plan_pass *ps = g->ps;
    cg_kernel *k = g->k;
    plan_product m;
    if (k->kind != CG_PARTIAL || !plan_find_product(g->p, ps, &m) || !in_range(g, m.a, m.ct) || !in_range(g, m.b, m.ct))
        return;
    int nf = ps->nfree;
    const plan_red *rd = &ps->reds[0];
    const plan_temp *t = &g->p->temps[rd->temp[0]];
    if (t->type != m.ct || t->ndim != nf) return;
    const ir *ops[2] = {m.a, m.b};
    for (int s = 0; s < 2; s++) {
        k->gm_base[s] = cg_buf_base(g, ops[s]->slot);
        k->gm_nd[s] = nf;
        for (int q = 0; q < 4; q++) k->gm_dim[s][q] = (signed char)(s ? m.bdim[q] : m.adim[q]);
    }
    k->gm_base[2] = k->lay.temp_base[rd->temp[0]];
    k->gm_nd[2] = nf;
    for (int q = 0; q < 4; q++) {
        int v = m.var[q];
        k->gm_dim[2][q] = -1;
        for (int d = 0; q < 3 && v >= 0 && d < t->ndim; d++)
            if (t->dims[d] == v) k->gm_dim[2][q] = (signed char)d;
        if (q < 3 && v >= 0 && k->gm_dim[2][q] < 0) return;   /* (a result over other indices) */
        k->gm_sz[q] = v < 0 ? -1 : k->lay.var_sz[v];
        k->gm_lo[q] = v < 0 ? -1 : k->lay.var_lo[v];
    }
    k->gemm = m.ct + 1;
}
