/*
 * scan.c -- what a scan pass's kernel (rj_scan.cuh) needs beside the accumulator:
 * scan_store, an element's running fold into the temporaries, and scan_key
 * (cg_emit_key_fn), the key whose change restarts the fold.
 */
#include "gen.h"

int cg_scan_items(int acc_size)
{
    return acc_size <= 4 ? 16 : acc_size <= 8 ? 8 : acc_size <= 16 ? 4 : acc_size <= 48 ? 2 : 1;
}

/* Element t of output o's row: the free indices' offset (the temporaries' first
 * dimensions), then the scanned ones' (their last). */
static void emit_store(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    int t0 = ps->reds[0].temp[0];
    int base = g->k->lay.temp_base[t0], nd = g->p->temps[t0].ndim;
    util_buf_puts(o, "__device__ __forceinline__ void scan_store(const Params &P, long long o, long long t, const Acc &a)\n{\n");
    cg_emit_temp_offset(g, t0, "o");
    util_buf_puts(o, "    { long long r = t;\n");
    for (int d = ps->nred - 1; d >= 0; d--) {
        int sz = g->k->lay.var_sz[ps->red[d]], stride = base + 1 + nd + ps->nfree + d;
        if (d > 0) util_buf_printf(o, "      off += rj_divmod(r, P.v[%d]) * P.v[%d];\n", sz, stride);
        else util_buf_printf(o, "      off += r * P.v[%d];\n", stride);
    }
    util_buf_puts(o, "    }\n");
    cg_emit_acc_stores(g);
    util_buf_puts(o, "}\n");
}

void cg_emit_scan(gen *g)
{
    emit_store(g);
    if (g->ps->reset) cg_emit_key_fn(g, "scan_key", g->ps->reset, 1);   /* its rows are outputs too */
}
