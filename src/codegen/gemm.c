/*
 * gemm.c -- is a pass a matrix product (cg_kernel.gemm)?  C[i,j] =
 * sum(A[i,k]*B[k,j]) over k, or a batch of them, C[b,i,j] =
 * sum(A[b,i,k]*B[b,k,j]) over k: one sum of one product of two bound
 * arrays at plain indices proven in range, A, B, the accumulator and the
 * result all f32 or all f64, no keys and no ranges.  The kernels stay as
 * generated (rj_tile2 and the rest); the runtime may run the pass through
 * cuBLASLt instead where the strides allow it (src/gpu/blas.c).  Which array is A and
 * which B, and the order of the indices in each, are free: the record says
 * which dimension each index subscripts.
 */
#include "gen.h"

/* The dimension of load x subscripted by variable v, or -1. */
static int dim_of(const ir *x, int v)
{
    for (int d = 0; d < x->nargs; d++)
        if (x->args[d]->slot == v) return d;
    return -1;
}

/* A load of a bound array of type ct at n plain indices, each in range. */
static int plain(gen *g, const ir *x, int ct, int n)
{
    if (x->kind != IR_LOAD || x->slot < 0 || x->nargs != n || x->type != ct) return 0;
    if (cg_buf_dtype(g, x->slot) != (ct == CT_F32 ? RED_F32 : RED_F64)) return 0;
    for (int d = 0; d < n; d++)
        if (x->args[d]->kind != IR_INDEX || !cg_proven_in_range(g, x, d)) return 0;
    return 1;
}

void cg_find_gemm(gen *g)
{
    const plan_pass *ps = g->ps;
    cg_kernel *k = g->k;
    int nf = ps->nfree;
    if (k->kind != CG_PARTIAL || ps->key || ps->scan || ps->nreds != 1 || ps->nred != 1 || (nf != 2 && nf != 3))
        return;
    const plan_red *rd = &ps->reds[0];
    int ct = rd->acc[0];
    if (rd->rop != ROP_SUM || rd->ncomp != 1 || rd->uname || (ct != CT_F32 && ct != CT_F64)) return;
    const plan_var *kv = &g->p->vars[ps->red[0]];
    if (kv->lo || kv->hi) return;   /* a range, from the data */
    const ir *m = rd->map[0];
    if (m->kind != IR_OP || m->op != OP_MUL || m->type != ct || !plain(g, m->args[0], ct, nf) ||
        !plain(g, m->args[1], ct, nf))
        return;
    const plan_temp *t = &g->p->temps[rd->temp[0]];
    if (t->type != ct || t->ndim != nf) return;
    /* b, i, j, k */
    int v[4] = {nf == 3 ? ps->free[0] : -1, ps->free[nf - 2], ps->free[nf - 1], ps->red[0]};
    const ir *A = NULL, *B = NULL;
    for (int s = 0; s < 2; s++) {
        const ir *x = m->args[s];
        if ((nf == 3 && dim_of(x, v[0]) < 0) || dim_of(x, v[3]) < 0) return;
        if (dim_of(x, v[1]) >= 0 && dim_of(x, v[2]) < 0) A = x;
        else if (dim_of(x, v[2]) >= 0 && dim_of(x, v[1]) < 0) B = x;
    }
    if (!A || !B) return;
    const ir *ops[2] = {A, B};
    for (int s = 0; s < 2; s++) {
        k->gm_base[s] = cg_buf_base(g, ops[s]->slot);
        k->gm_nd[s] = nf;
        for (int q = 0; q < 4; q++) k->gm_dim[s][q] = (signed char)(v[q] < 0 ? -1 : dim_of(ops[s], v[q]));
    }
    k->gm_base[2] = k->lay.temp_base[rd->temp[0]];
    k->gm_nd[2] = nf;
    for (int q = 0; q < 4; q++) {
        k->gm_dim[2][q] = -1;
        for (int d = 0; q < 3 && v[q] >= 0 && d < t->ndim; d++)
            if (t->dims[d] == v[q]) k->gm_dim[2][q] = (signed char)d;
        if (q < 3 && v[q] >= 0 && k->gm_dim[2][q] < 0) return;   /* (a result over other indices) */
        k->gm_sz[q] = v[q] < 0 ? -1 : k->lay.var_sz[v[q]];
        k->gm_lo[q] = v[q] < 0 ? -1 : k->lay.var_lo[v[q]];
    }
    k->gemm = ct + 1;
}
