/*
 * acc.c -- the accumulator `Acc` of a pass's fused reductions and the
 * functions the strategies in the device code call on it: acc_init,
 * acc_combine, the shuffles, acc_elem (one element folded), acc_write and
 * key_at; and a map pass's whole kernel.
 */
#include "gen.h"

#include <stdio.h>

int cg_is_arg(int rop) { return rop == ROP_ARGMIN || rop == ROP_ARGMAX; }
/* Accumulators that need a "has a value" flag: argmin/argmax, and user
 * operators whose identity is only a fill value (not one the planner made
 * and knows to be neutral: those start from it). */
static int has_flag(const plan_red *rd)
{
    return (rd->rop == ROP_USER && !rd->neutral) || cg_is_arg(rd->rop);
}

void cg_emit_acc_struct(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    int size = 0, align = 1;
    util_buf_puts(o, "struct Acc {\n");
    /* 8-byte fields, then 4, then 1: no padding to guess on the host */
    for (int w = 8; w >= 1; w /= 2) {
        for (int q = 0; q < ps->nreds; q++) {
            const plan_red *rd = &ps->reds[q];
            for (int c = 0; c < rd->ncomp; c++)
                if (plan_ct_size(rd->acc[c]) == w) {
                    util_buf_printf(o, "    %s r%d_%d;\n", cg_tname[rd->acc[c]], q, c);
                    size += w;
                }
            if (w == 8 && cg_is_arg(rd->rop)) {
                util_buf_printf(o, "    long long x%d;\n", q);
                size += 8;
            }
            if (w == 1 && has_flag(rd)) {
                util_buf_printf(o, "    bool h%d;\n", q);
                size += 1;
            }
        }
        for (int q = 0; q < ps->nreds; q++) {
            const plan_red *rd = &ps->reds[q];
            for (int c = 0; c < rd->ncomp; c++)
                if (plan_ct_size(rd->acc[c]) == w && w > align) align = w;
            if (cg_is_arg(rd->rop)) align = 8;
        }
    }
    util_buf_puts(o, "};\n");
    g->k->acc_size = (size + align - 1) / align * align;
    if (g->k->acc_size == 0) g->k->acc_size = 1;
    g->k->acc_align = align;
}

void cg_emit_user_ops(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    for (int q = 0; q < ps->nreds; q++) {
        const plan_red *rd = &ps->reds[q];
        if (rd->rop != ROP_USER) continue;
        util_buf_printf(o, "// user operator %s%s\n__device__ __forceinline__ void uop%d(", rd->ordered ? "ordered " : "", rd->uname, q);
        for (int c = 0; c < rd->ncomp; c++) util_buf_printf(o, "%s%s &a%d", c ? ", " : "", cg_tname[rd->acc[c]], c);
        for (int c = 0; c < rd->ncomp; c++) util_buf_printf(o, ", %s b%d", cg_tname[rd->acc[c]], c);
        util_buf_puts(o, ")\n{\n");
        for (int c = 0; c < rd->ncomp; c++) {
            util_buf_printf(o, "    const %s p%d = a%d;\n", cg_tname[rd->acc[c]], 2 * c, c);
            util_buf_printf(o, "    const %s p%d = b%d;\n", cg_tname[rd->acc[c]], 2 * c + 1, c);
        }
        cg_begin_function(g);
        g->in_user = 1;
        for (int c = 0; c < rd->ncomp; c++) cg_emit(g, rd->combine[c]);
        for (int c = 0; c < rd->ncomp; c++) {
            util_buf_printf(o, "    a%d = ", c);
            cg_ref(g, rd->combine[c]);
            util_buf_puts(o, ";\n");
        }
        g->in_user = 0;
        util_buf_puts(o, "}\n");
    }
}

static void fold_builtin(util_buf *o, int rop, int ct, const char *dst, const char *src)
{
    switch (rop) {
    case ROP_SUM: util_buf_printf(o, "%s = rj_add(%s, %s);", dst, dst, src); break;
    case ROP_PROD: util_buf_printf(o, "%s = rj_mul(%s, %s);", dst, dst, src); break;
    case ROP_MIN: util_buf_printf(o, "%s = rj_min(%s, %s);", dst, dst, src); break;
    case ROP_MAX: util_buf_printf(o, "%s = rj_max(%s, %s);", dst, dst, src); break;
    case ROP_BAND: util_buf_printf(o, "%s = (%s)(%s & %s);", dst, cg_tname[ct], dst, src); break;
    case ROP_BOR: util_buf_printf(o, "%s = (%s)(%s | %s);", dst, cg_tname[ct], dst, src); break;
    case ROP_BXOR: util_buf_printf(o, "%s = (%s)(%s ^ %s);", dst, cg_tname[ct], dst, src); break;
    case ROP_LAND: util_buf_printf(o, "%s = %s && %s;", dst, dst, src); break;
    case ROP_LOR: util_buf_printf(o, "%s = %s || %s;", dst, dst, src); break;
    }
}

/* An Acc moved across lanes field by field: acc_shfl_down (rj_shfl, by a
 * distance s) and acc_shfl_idx (rj_shfl_idx, from lane l). */
static void emit_acc_shfl(gen *g, const char *name, const char *fn, const char *arg)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    util_buf_printf(o, "__device__ __forceinline__ Acc %s(const Acc &a, int %s)\n{\n    Acc r;\n", name, arg);
    for (int q = 0; q < ps->nreds; q++) {
        const plan_red *rd = &ps->reds[q];
        for (int c = 0; c < rd->ncomp; c++) util_buf_printf(o, "    r.r%d_%d = %s(a.r%d_%d, %s);\n", q, c, fn, q, c, arg);
        if (cg_is_arg(rd->rop)) util_buf_printf(o, "    r.x%d = %s(a.x%d, %s);\n", q, fn, q, arg);
        if (has_flag(rd)) util_buf_printf(o, "    r.h%d = %s(a.h%d, %s);\n", q, fn, q, arg);
    }
    util_buf_puts(o, "    return r;\n}\n");
}

void cg_emit_acc_funcs(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    char d[64], s[64];

    util_buf_puts(o, "__device__ __forceinline__ void acc_init(Acc &a)\n{\n");
    for (int q = 0; q < ps->nreds; q++) {
        const plan_red *rd = &ps->reds[q];
        for (int c = 0; c < rd->ncomp; c++) {
            util_buf_printf(o, "    a.r%d_%d = ", q, c);
            cg_literal(o, rd->acc[c], rd->rop == ROP_USER ? rd->identity[c] : plan_identity(rd->rop, rd->acc[c]));
            util_buf_puts(o, ";\n");
        }
        if (cg_is_arg(rd->rop)) util_buf_printf(o, "    a.x%d = -1;\n", q);
        if (has_flag(rd)) util_buf_printf(o, "    a.h%d = false;\n", q);
    }
    util_buf_puts(o, "}\n");

    util_buf_puts(o, "__device__ __forceinline__ void acc_combine(Acc &a, const Acc &b)\n{\n");
    for (int q = 0; q < ps->nreds; q++) {
        const plan_red *rd = &ps->reds[q];
        if (cg_is_arg(rd->rop)) {
            /* the first index of the extreme: lanes hold interleaved elements,
             * so a tie goes to the smaller index, not to the earlier lane */
            const char *bt = rd->rop == ROP_ARGMAX ? "argmax" : "argmin";
            util_buf_printf(o, "    if (b.h%d && (!a.h%d || rj_%s_better(b.r%d_0, a.r%d_0) || (!rj_%s_better(a.r%d_0, b.r%d_0) "
                               "&& b.x%d < a.x%d))) { a.r%d_0 = b.r%d_0; a.x%d = b.x%d; a.h%d = true; }\n",
                            q, q, bt, q, q, bt, q, q, q, q, q, q, q, q, q);
        } else if (rd->rop == ROP_USER && rd->neutral) {
            util_buf_printf(o, "    uop%d(", q);
            for (int c = 0; c < rd->ncomp; c++) util_buf_printf(o, "%sa.r%d_%d", c ? ", " : "", q, c);
            for (int c = 0; c < rd->ncomp; c++) util_buf_printf(o, ", b.r%d_%d", q, c);
            util_buf_puts(o, ");\n");
        } else if (rd->rop == ROP_USER) {
            util_buf_printf(o, "    if (b.h%d) { if (!a.h%d) { ", q, q);
            for (int c = 0; c < rd->ncomp; c++) util_buf_printf(o, "a.r%d_%d = b.r%d_%d; ", q, c, q, c);
            util_buf_printf(o, "a.h%d = true; } else uop%d(", q, q);
            for (int c = 0; c < rd->ncomp; c++) util_buf_printf(o, "%sa.r%d_%d", c ? ", " : "", q, c);
            for (int c = 0; c < rd->ncomp; c++) util_buf_printf(o, ", b.r%d_%d", q, c);
            util_buf_puts(o, "); }\n");
        } else {
            snprintf(d, sizeof d, "a.r%d_0", q);
            snprintf(s, sizeof s, "b.r%d_0", q);
            util_buf_puts(o, "    ");
            fold_builtin(o, rd->rop, rd->acc[0], d, s);
            util_buf_puts(o, "\n");
        }
    }
    util_buf_puts(o, "}\n");

    emit_acc_shfl(g, "acc_shfl_down", "rj_shfl", "s");
    emit_acc_shfl(g, "acc_shfl_idx", "rj_shfl_idx", "l");
}


void cg_emit_acc_elem(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    util_buf_puts(o, "__device__ __forceinline__ void acc_elem(Acc &a, rj_flt &F, const Params &P, long long o, "
                     "const long long *lo, const long long *sz, long long t)\n{\n");
    g->deferred = 1;
    cg_begin_function(g);
    if (ps->key) util_buf_puts(o, "    t += lo[RJ_NRED];\n");
    cg_emit_free_vars(g, "o");
    cg_emit_red_vars(g, "t");
    util_buf_puts(o, "    (void)o;\n");
    g->in_elem = 1;
    cg_emit_fold(g);
    g->in_elem = 0;
    util_buf_puts(o, "}\n");
    g->deferred = 0;
}

/* The element's values (cg_emit), then each reduction's fold of them into `a`. */
void cg_emit_fold(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    for (int q = 0; q < ps->nreds; q++)
        for (int c = 0; c < ps->reds[q].ncomp; c++) cg_emit(g, ps->reds[q].map[c]);
    for (int q = 0; q < ps->nreds; q++) {
        const plan_red *rd = &ps->reds[q];
        if (cg_is_arg(rd->rop)) {
            /* selects, not a branch: the loads of the elements a thread
             * folds in a row can all be issued before the first compare */
            util_buf_puts(o, "    { const bool tk = ");
            if (rd->skipnan) {   /* nanargmin / nanargmax: a NaN is not folded */
                cg_ref(g, rd->map[0]);
                util_buf_puts(o, " == ");
                cg_ref(g, rd->map[0]);
                util_buf_puts(o, " && (");
            }
            util_buf_printf(o, "!a.h%d || rj_%s_better(", q, rd->rop == ROP_ARGMAX ? "argmax" : "argmin");
            cg_ref(g, rd->map[0]);
            util_buf_printf(o, ", a.r%d_0)%s; a.r%d_0 = tk ? ", q, rd->skipnan ? ")" : "", q);
            cg_ref(g, rd->map[0]);
            util_buf_printf(o, " : a.r%d_0; ", q);
            const char *h = rd->skipnan ? "a.h%d || tk" : "true";
            char hs[32];
            snprintf(hs, sizeof hs, h, q);
            if (ps->nred == 1) util_buf_printf(o, "a.x%d = tk ? i%d : a.x%d; a.h%d = %s; }\n", q, ps->red[0], q, q, hs);
            else util_buf_printf(o, "a.x%d = tk ? t : a.x%d; a.h%d = %s; }\n", q, q, q, hs);
        } else if (rd->rop == ROP_USER) {
            if (rd->neutral) {
                util_buf_printf(o, "    uop%d(", q);
            } else {
                util_buf_printf(o, "    if (!a.h%d) { ", q);
                for (int c = 0; c < rd->ncomp; c++) {
                    util_buf_printf(o, "a.r%d_%d = ", q, c);
                    cg_ref(g, rd->map[c]);
                    util_buf_puts(o, "; ");
                }
                util_buf_printf(o, "a.h%d = true; } else uop%d(", q, q);
            }
            for (int c = 0; c < rd->ncomp; c++) util_buf_printf(o, "%sa.r%d_%d", c ? ", " : "", q, c);
            for (int c = 0; c < rd->ncomp; c++) {
                util_buf_puts(o, ", ");
                cg_ref(g, rd->map[c]);
            }
            util_buf_puts(o, ");\n");
        } else {
            char dst[32];
            snprintf(dst, sizeof dst, "a.r%d_0", q);
            util_buf tmp;
            util_buf_init(&tmp);
            util_buf *save = g->o;
            g->o = &tmp;
            cg_ref(g, rd->map[0]);
            g->o = save;
            util_buf_puts(o, "    ");
            fold_builtin(o, rd->rop, rd->acc[0], dst, util_buf_str(&tmp));
            util_buf_puts(o, "\n");
            util_buf_free(&tmp);
        }
    }
}


void cg_emit_acc_write(gen *g)
{
    util_buf_puts(g->o, "__device__ __forceinline__ void acc_write(const Params &P, long long o, const Acc &a)\n{\n");
    cg_emit_temp_offset(g, g->ps->reds[0].temp[0], "o");
    cg_emit_acc_stores(g);
    util_buf_puts(g->o, "}\n");
}

/* Each reduction's result from `a` at element `off` of its temporaries (which
 * share their layout), an argmin or argmax of nothing a fault; a scan skips
 * the fields nothing reads (plan_red.unread: the running products of a linear
 * recurrence whose `.1` is the result, a third of its traffic). */
void cg_emit_acc_stores(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    for (int q = 0; q < ps->nreds; q++) {
        const plan_red *rd = &ps->reds[q];
        for (int c = 0; c < rd->ncomp; c++) {
            int base = g->k->lay.temp_base[rd->temp[c]];
            if (ps->scan && !cg_is_arg(rd->rop) && (rd->unread >> c & 1u)) continue;
            if (cg_is_arg(rd->rop)) {
                util_buf_printf(o, "    ((long long *)P.v[%d])[off] = a.h%d ? a.x%d : -1;\n", base, q, q);
                if (!rd->partial)   /* (a partial's emptiness is judged once the ranks' are combined) */
                    util_buf_printf(o, "    if (!a.h%d) rj_fault(P, %d, %d, 0, 0);\n", q, RED_ERR_EMPTY, (g->pi << 16) | q);
            } else {
                util_buf_printf(o, "    ((%s *)P.v[%d])[off] = a.r%d_%d;\n", cg_tname[rd->acc[c]], base, q, c);
            }
        }
    }
}

void cg_emit_key_fn(gen *g, const char *name, const ir *key, int with_free)
{
    util_buf *o = g->o;
    util_buf_printf(o, "__device__ __forceinline__ long long %s(rj_flt &F, const Params &P, %sconst long long *lo, "
                       "const long long *sz, long long t)\n{\n", name, with_free ? "long long o, " : "");
    cg_begin_function(g);
    if (with_free) cg_emit_free_vars(g, "o");
    cg_emit_red_vars(g, "t");
    if (with_free) util_buf_puts(o, "    (void)o; (void)sz;\n");
    g->deferred = 1;
    cg_emit(g, key);
    g->deferred = 0;
    util_buf_puts(o, "    return ");
    cg_ref(g, key);
    util_buf_puts(o, ";\n}\n");
}

void cg_emit_key_at(gen *g) { cg_emit_key_fn(g, "key_at", g->ps->key, 0); }

/* A map over several free indices: each thread splits its first element and
 * the grid's stride into digits (one division each per thread), then steps
 * the digits with carries; a division per element (64-bit, emulated) made
 * a softmax's map pass compute-bound at 1.6 TB/s on the H200. */
static void emit_map_kernel_nd(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    util_buf_puts(o, "extern \"C\" __global__ void __launch_bounds__(RJ_BLOCK) rj_map(Params P)\n{\n"
                     "    const long long nout = P.v[RJ_NOUT];\n"
                     "    const long long first = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x;\n"
                     "    if (first >= nout) return;\n"
                     "    long long rem_o = first, rem_s = (long long)gridDim.x * RJ_BLOCK;\n");
    for (int d = ps->nfree - 1; d >= 0; d--) {
        int sz = g->k->lay.var_sz[ps->free[d]];
        if (d > 0)
            util_buf_printf(o, "    long long dg%d = rem_o %% P.v[%d]; rem_o /= P.v[%d];\n"
                               "    const long long st%d = rem_s %% P.v[%d]; rem_s /= P.v[%d];\n",
                            d, sz, sz, d, sz, sz);
        else
            util_buf_printf(o, "    long long dg0 = rem_o;\n    const long long st0 = rem_s;\n");
    }
    util_buf_puts(o, "    for (long long o = first; o < nout; o += (long long)gridDim.x * RJ_BLOCK) {\n");
    cg_begin_function(g);
    for (int d = 0; d < ps->nfree; d++) {
        int v = ps->free[d];
        util_buf_printf(o, "    const long long i%d = P.v[%d] + dg%d;\n", v, g->k->lay.var_lo[v], d);
    }
    cg_emit(g, ps->map);
    int temp = ps->map_temp, base = g->k->lay.temp_base[temp], nd = g->p->temps[temp].ndim;
    util_buf_puts(o, "    long long off = 0;\n");
    for (int d = 0; d < ps->nfree; d++)
        util_buf_printf(o, "    off += i%d * P.v[%d];\n", ps->free[d], base + 1 + nd + d);
    util_buf_printf(o, "    ((%s *)P.v[%d])[off] = ", cg_tname[g->p->temps[temp].type], base);
    cg_ref(g, ps->map);
    util_buf_puts(o, ";\n    int c = 0;\n");
    for (int d = ps->nfree - 1; d > 0; d--) {
        int sz = g->k->lay.var_sz[ps->free[d]];
        util_buf_printf(o, "    dg%d += st%d + c; c = dg%d >= P.v[%d]; if (c) dg%d -= P.v[%d];\n", d, d, d, sz,
                        d, sz);
    }
    util_buf_puts(o, "    dg0 += st0 + c;\n    }\n}\n");
}

void cg_emit_map_kernel(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    if (ps->nfree >= 2 && g->p->temps[ps->map_temp].ndim == ps->nfree) {
        emit_map_kernel_nd(g);
        return;
    }
    util_buf_puts(o, "extern \"C\" __global__ void __launch_bounds__(RJ_BLOCK) rj_map(Params P)\n{\n"
                     "    long long nout = P.v[RJ_NOUT];\n"
                     "    for (long long o = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x; o < nout;\n"
                     "         o += (long long)gridDim.x * RJ_BLOCK) {\n");
    cg_begin_function(g);
    cg_emit_free_vars(g, "o");
    cg_emit(g, ps->map);
    cg_emit_temp_offset(g, ps->map_temp, "o");
    util_buf_printf(o, "    ((%s *)P.v[%d])[off] = ", cg_tname[g->p->temps[ps->map_temp].type],
                    g->k->lay.temp_base[ps->map_temp]);
    cg_ref(g, ps->map);
    util_buf_puts(o, ";\n    }\n}\n");
}

