/*
 * scan.c -- what a scan pass's kernel (rj_scan.cuh) needs beside the accumulator:
 * scan_store, an element's running fold into the temporaries, and scan_key
 * (cg_emit_key_fn), the key whose change restarts the fold.
 */
#include "gen.h"

/* A scan pass's element state (RjSA): its Acc, and for a scan that restarts
 * where a key changes a flag after it; elements a thread takes a tile, so that
 * the two tiles a block holds take about 42 KiB (20 4-byte elements, 10 8-byte,
 * 7 12-byte: larger tiles ran faster up to those on the H100, bench/TUNING.md),
 * at least one. */
static void scan_sizes(cg_kernel *k, int reset)
{
    int a = k->acc_align > 0 ? k->acc_align : 1;
    k->scan_esize = reset ? (k->acc_size + 1 + a - 1) / a * a : k->acc_size;
    int items = 84 / k->scan_esize;
    k->scan_items = items < 1 ? 1 : items > 20 ? 20 : items;
}

long long cg_scan_smem(const cg_kernel *k, int warps)
{
    /* rj_scan_run's layout: two tiles' states, per warp 32 * items and one slot of
     * padding every 32 (rj_sx); the warps' totals and the carries of two tiles;
     * two tickets.  rj_scan_warps': one tile's states and the warps' totals. */
    long long w = CG_BLOCK / 32, states = warps ? w * 33 * k->scan_items + w : 2 * w * 33 * k->scan_items + 2 * w + 2;
    return (states * k->scan_esize + 7) / 8 * 8 + 16;
}

long long cg_scanlv_tile(const cg_kernel *k)
{
    /* RJ_SCANLV_TILE: RJ_SCAN_WARPS * 32 * RJ_SCANLV_M vectors of RJ_VEC elements */
    if (!k->vec) return 0;
    int m = k->nvec >= 4 ? 1 : 4 / k->nvec;
    return (long long)CG_BLOCK * m * k->vec;
}

long long cg_scan_scratch(const cg_kernel *k, long long ntiles, long long ngroups)
{
    /* a published fold: 32 bits of the state a 64-bit word (RJ_SCAN_NW) */
    return 16 + 8 * (ntiles + ngroups) * ((k->scan_esize + 3) / 4);
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
    if (plan_scan_ranged(g->p, ps)) {
        /* over ranged rows t is the element's place in the result (the
         * kernels add the row's start), which is indexed by k alone */
        util_buf_printf(o, "    (void)o;\n    long long off = t * P.v[%d];\n", base + 2);
        cg_emit_acc_stores(g);
        util_buf_puts(o, "}\n");
        return;
    }
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

/* scan_store_v (rj_scan_warps_v): elements t .. t + RJ_VEC - 1 of output o's
 * row, e[c] element t + c's running fold.  Over one scanned index, a field's
 * RJ_VEC elements go out as whole 16-byte stores where the index has stride 1
 * in the result and they sit on 16 bytes, else one store an element; over
 * several, scan_store an element at a time (argmin and argmax scans take no
 * 16-byte loads: cg_emit_acc_elem_v). */
static void emit_store_v(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    int vec = g->k->vec, plain = ps->nred == 1;
    util_buf_puts(o, "__device__ __forceinline__ void scan_store_v(const Params &P, long long o, long long t, const Acc *e)\n{\n");
    if (!plain) {
        util_buf_printf(o, "    for (int c = 0; c < %d; c++) scan_store(P, o, t + c, e[c]);\n}\n", vec);
        return;
    }
    int t0 = ps->reds[0].temp[0];
    int base0 = g->k->lay.temp_base[t0], nd = g->p->temps[t0].ndim;
    int stride = base0 + 1 + nd + ps->nfree;
    cg_emit_temp_offset(g, t0, "o");
    util_buf_printf(o, "    const long long st = P.v[%d];\n    off += t * st;\n", stride);
    for (int q = 0; q < ps->nreds; q++) {
        const plan_red *rd = &ps->reds[q];
        for (int c = 0; c < rd->ncomp; c++) {
            if (rd->unread >> c & 1u) continue;
            const char *tn = cg_tname[rd->acc[c]];
            util_buf_printf(o, "    {\n        %s *p = (%s *)P.v[%d] + off;\n", tn, tn, g->k->lay.temp_base[rd->temp[c]]);
            util_buf_printf(o, "        if (sizeof(%s) * %d %% 16 == 0 && st == 1 && ((unsigned long long)p & 15) == 0) {\n"
                               "            rj_vec<%s, %d> w;\n", tn, vec, tn, vec);
            for (int v = 0; v < vec; v++) util_buf_printf(o, "            w.c[%d] = e[%d].r%d_%d;\n", v, v, q, c);
            util_buf_printf(o, "            *(rj_vec<%s, %d> *)p = w;\n        } else {\n", tn, vec);
            for (int v = 0; v < vec; v++) util_buf_printf(o, "            p[%d * st] = e[%d].r%d_%d;\n", v, v, q, c);
            util_buf_puts(o, "        }\n    }\n");
        }
    }
    util_buf_puts(o, "}\n");
}

void cg_emit_scan(gen *g)
{
    scan_sizes(g->k, g->ps->reset != NULL);
    emit_store(g);
    if (g->k->vec) emit_store_v(g);
    if (g->ps->reset) cg_emit_key_fn(g, "scan_key", g->ps->reset, 1);   /* its rows are outputs too */
}
