/*
 * vec.c -- contiguous reductions: the loads of a pass that qualifies for
 * 16-byte vectors (cg_kernel.vec), and the functions that load and fold
 * them (acc_load_v, acc_elem_v, acc_elem_1, acc_one_v, key_v, acc_one_s).
 */
#include <stdio.h>
#include <string.h>

#include "gen.h"

/* Is v one of the pass's free indices? */
static int is_free(const plan_pass *ps, int v)
{
    for (int f = 0; f < ps->nfree; f++)
        if (ps->free[f] == v) return 1;
    return 0;
}

/* Position of v among the pass's reduced indices, or -1. */
static int red_pos(const plan_pass *ps, int v)
{
    for (int d = 0; d < ps->nred; d++)
        if (ps->red[d] == v) return d;
    return -1;
}

/* The loads of a contiguous reduction (see cg_kernel.vec): every load
 * reached from x is a bound array whose subscripts are the pass's reduced
 * indices, each once, in consecutive dimensions in the pass's order, and
 * free indices, all plain and in range by construction (so no check), of a
 * 4- or 8-byte type.  With more than one reduced index, none may be used
 * but as such a subscript (acc_elem_v defines only the flat position).
 * With g->vbc (cg_kernel.vec_bc) a load may also be subscripted by the last
 * reduced index alone among the reduced ones (CG_V_LAST), or not by it at
 * all (CG_V_ONE), each reduced index there any number of times.  Collects
 * the distinct loads into list, and how each is read into g->vkind; 0 where
 * any load is not so. */
static int vec_loads_node(gen *g, const ir *x, const ir **list, int *n, int max);
/* Do x's loads qualify?  Each node once (the IR is a graph: a short text can
 * reach a node by 2^26 paths): g->vmemo[id] is 1 when it does, 2 when not. */
static int vec_loads(gen *g, const ir *x, const ir **list, int *n, int max)
{
    if (g->vmemo[x->id]) return g->vmemo[x->id] == 1;
    int r = vec_loads_node(g, x, list, n, max);
    g->vmemo[x->id] = r ? 1 : 2;
    return r;
}

static int vec_loads_node(gen *g, const ir *x, const ir **list, int *n, int max)
{
    const plan_pass *ps = g->ps;
    if (x->kind == IR_INDEX) return ps->nred == 1 || red_pos(ps, x->slot) < 0;
    if (x->kind == IR_LOAD) {
        int first = -1, seen = 0, contiguous = 1, last = 0;
        if (x->slot < 0 || x->nargs > RED_MAX_DIMS) return 0;
        for (int d = 0; d < x->nargs; d++) {
            const ir *sub = x->args[d];
            if (sub->kind != IR_INDEX || !cg_proven_in_range(g, x, d)) return 0;
            int k = red_pos(ps, sub->slot);
            if (k < 0) {
                if (!is_free(ps, sub->slot)) return 0;
                continue;
            }
            if (k == ps->nred - 1) last++;
            if (k == 0 && first < 0) first = d;
            if (first < 0 || d - first != k) contiguous = 0;   /* out of order, or twice */
            seen++;
        }
        signed char kind = CG_V_FULL;
        if (!contiguous || seen != ps->nred) {
            if (!g->vbc) return 0;
            if (last == 1 && seen == 1) kind = CG_V_LAST;
            else if (last == 0) kind = CG_V_ONE;
            else return 0;
        }
        switch (cg_buf_dtype(g, x->slot)) {
        case RED_I32: case RED_U32: case RED_F32: case RED_I64: case RED_U64: case RED_F64: break;
        default: return 0;
        }
        for (int i = 0; i < *n; i++)
            if (list[i] == x) return 1;
        if (*n == max) return 0;
        g->vkind[*n] = kind;
        list[(*n)++] = x;
        return 1;
    }
    for (int i = 0; i < x->nargs; i++)
        if (!vec_loads(g, x->args[i], list, n, max)) return 0;
    return 1;
}

/* For acc_load_v and acc_elem_1: the free indices from o, and b<id>, the
 * address of element 0 of output o's domain in each array of a contiguous
 * reduction (recording, for the runtime's vec_ok, where its parameters are
 * and in which dimensions the reduced indices run).  The last reduced
 * dimension has stride 1 there (vec_ok). */
static void emit_vec_bases(gen *g, const ir *const *loads, int n)
{
    const plan_pass *ps = g->ps;
    cg_kernel *k = g->k;
    util_buf *o = g->o;
    cg_emit_free_vars(g, "o");
    util_buf_puts(o, "    (void)o;\n");
    for (int i = 0; i < n; i++) {
        const ir *x = loads[i];
        int base = cg_buf_base(g, x->slot), nd = x->nargs;
        const char *t = cg_tname[x->type];
        k->vec_base[i] = base;
        k->vec_ndim[i] = nd;
        k->vec_rdim[i] = 0;
        if (g->vkind[i] == CG_V_ONE) continue;   /* (bc_load) */
        util_buf_printf(o, "    const %s *b%d = (const %s *)P.v[%d]", t, x->id, t, base);
        for (int d = 0; d < nd; d++) {
            int r = red_pos(ps, x->args[d]->slot);
            if (r == (g->vkind[i] == CG_V_LAST ? ps->nred - 1 : 0)) k->vec_rdim[i] = d;
            if (r == ps->nred - 1) util_buf_printf(o, " + lo[%d]", r);
            else if (r >= 0) util_buf_printf(o, " + lo[%d] * P.v[%d]", r, base + 1 + nd + d);
            else util_buf_printf(o, " + i%d * P.v[%d]", x->args[d]->slot, base + 1 + nd + d);
        }
        util_buf_puts(o, ";\n");
    }
}

/* For cg_kernel.vec_bc: rb<d>, the offset of reduced index d from its
 * start lo[d] at the domain's flat position pos (the last index fastest). */
static void emit_bc_decode(gen *g, const char *pos)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    util_buf_printf(o, "    long long rbt = %s;\n", pos);
    for (int d = ps->nred - 1; d > 0; d--)
        util_buf_printf(o, "    const long long rb%d = rj_divmod(rbt, P.v[%d]);\n    (void)rb%d;\n", d, g->k->vec_sz[d], d);
    util_buf_puts(o, "    const long long rb0 = rbt;\n    (void)rb0;\n");
}

/* The element of load x (CG_V_ONE) at the indices emit_bc_decode and
 * cg_emit_free_vars declared. */
static void emit_bc_load(gen *g, const ir *x, const char *dst)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    int base = cg_buf_base(g, x->slot), nd = x->nargs;
    const char *t = cg_tname[x->type];
    util_buf_printf(o, "    %s = ((const %s *)P.v[%d])[0", dst, t, base);
    for (int d = 0; d < nd; d++) {
        int r = red_pos(ps, x->args[d]->slot);
        if (r >= 0) util_buf_printf(o, " + (lo[%d] + rb%d) * P.v[%d]", r, r, base + 1 + nd + d);
        else util_buf_printf(o, " + i%d * P.v[%d]", x->args[d]->slot, base + 1 + nd + d);
    }
    util_buf_puts(o, "];\n");
}

/* For a keyed pass's rj_kfusedv (rj_reduce.cuh): element c of vector u of
 * its arrays, from Vld L, folded into `a` (acc_one_v) and its key (key_v);
 * one copy each, c a constant once inlined into the kernel's unrolled
 * loops.  For rj_seg1a (a ranged pass, no key) acc_one_v alone. */
static void emit_key_v(gen *g, const ir *const *loads, int n)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    for (int f = 0; f < (ps->key ? 2 : 1); f++) {
        cg_begin_function(g);
        if (f == 0)
            util_buf_puts(o, "__device__ __forceinline__ void acc_one_v(Acc &a, const Params &P, const Vld &L, "
                             "const long long *lo, long long u, int c)\n{\n");
        else
            util_buf_puts(o, "__device__ __forceinline__ long long key_v(const Params &P, const Vld &L, "
                             "const long long *lo, long long u, int c)\n{\n");
        util_buf_puts(o, "    (void)P;\n    (void)lo;\n");
        if (ps->nred == 1)
            util_buf_printf(o, "    const long long i%d = lo[0] + u * %d + c;\n    (void)i%d;\n", ps->red[0], g->k->vec,
                            ps->red[0]);
        else
            util_buf_printf(o, "    const long long t = u * %d + c;\n    (void)t;\n", g->k->vec);
        for (int i = 0; i < n; i++) {
            g->done[loads[i]->id] = 1;
            util_buf_printf(o, "    const %s v%d = L.q%d.c[c];\n    (void)v%d;\n", cg_tname[loads[i]->type], loads[i]->id,
                            loads[i]->id, loads[i]->id);
        }
        if (f == 0) {
            cg_emit_fold(g);
        } else {
            cg_emit(g, ps->key);
            util_buf_puts(o, "    return ");
            cg_ref(g, ps->key);
            util_buf_puts(o, ";\n");
        }
        util_buf_puts(o, "}\n");
    }
}

/* For rj_seg1s (a ranged pass, as rj_seg1a's acc_one_v): element t, an
 * absolute position, of each of its arrays, loaded and folded into `a`.
 * The runtime takes it where every such array has one dimension of stride
 * 1 (ranged_scalar_ok), so the element is at base + t, with no stride to
 * multiply; out_range has checked the row's range against every array. */
static void emit_one_s(gen *g, const ir *const *loads, int n)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    cg_begin_function(g);
    util_buf_puts(o, "__device__ __forceinline__ void acc_one_s(Acc &a, const Params &P, long long t)\n{\n"
                     "    (void)P;\n");
    util_buf_printf(o, "    const long long i%d = t;\n    (void)i%d;\n", ps->red[0], ps->red[0]);
    for (int i = 0; i < n; i++) {
        const char *t = cg_tname[loads[i]->type];
        g->done[loads[i]->id] = 1;
        util_buf_printf(o, "    const %s v%d = ((const %s *)P.v[%d])[t];\n    (void)v%d;\n", t, loads[i]->id, t,
                        g->k->vec_base[i], loads[i]->id);
    }
    cg_emit_fold(g);
    util_buf_puts(o, "}\n");
}

/* Does x use an index other than the pass's reduced ones? */
static int uses_free_index(const plan_pass *ps, const ir *x)
{
    if (x->kind == IR_INDEX && red_pos(ps, x->slot) < 0) return 1;
    for (int i = 0; i < x->nargs; i++)
        if (uses_free_index(ps, x->args[i])) return 1;
    return 0;
}

/* Does any reduction of the pass read an index other than its reduced ones? */
int cg_fold_reads_free(const plan_pass *ps)
{
    for (int q = 0; q < ps->nreds; q++)
        for (int c = 0; c < ps->reds[q].ncomp; c++)
            if (uses_free_index(ps, ps->reds[q].map[c])) return 1;
    return 0;
}

/* A candidate for rj_seg1a (rj_reduce.cuh): one output index, one reduced
 * index over a range (`over k in ptr[r]..ptr[r+1]`), folded with a
 * commutative operator from loads at the reduced index alone
 * (cg_emit_acc_elem_v checks them), the output index itself unused by the
 * fold. */
static int ranged_vec_pass(gen *g)
{
    const plan_pass *ps = g->ps;
    return g->k->kind == CG_PARTIAL && ps->nfree == 1 && ps->nred == 1 && !ps->key && !g->k->ordered &&
           !cg_fold_reads_free(ps);
}

/* The pass's loads for cg_emit_acc_elem_v into loads[] (*n), as contiguous
 * runs (0) or, over several reduced indices and neither keys nor ranges,
 * with rows broadcast (1, cg_kernel.vec_bc); -1 where they do not qualify. */
static int find_loads(gen *g, int rv, const ir **loads, int *n)
{
    const plan_pass *ps = g->ps;
    for (int bc = 0; bc < 2; bc++) {
        if (bc && (ps->nred < 2 || ps->key || rv)) break;
        memset(g->vmemo, 0, (size_t)g->nir + 1);
        *n = 0;
        int ok = 1;
        g->vbc = bc;
        g->in_elem = rv;   /* (out_range checks a ranged subscript, as for acc_elem) */
        for (int q = 0; q < ps->nreds && ok; q++)
            for (int c = 0; c < ps->reds[q].ncomp && ok; c++) ok = vec_loads(g, ps->reds[q].map[c], loads, n, 8);
        g->in_elem = 0;
        g->vbc = 0;
        if (ok && ps->key && !vec_loads(g, ps->key, loads, n, 8)) return -1;
        if (ok) return *n ? bc : -1;
    }
    return -1;
}

/* The size of the elements of the 16-byte loads, all one (CG_V_ONE's any);
 * 0 where they differ or there are none, or a ranged pass reads an array
 * of more than one dimension (v[k]: the ranged index alone). */
static size_t vec_size(gen *g, const ir *const *loads, int n, int rv)
{
    size_t esz = 0;
    for (int i = 0; i < n; i++) {
        if (rv && loads[i]->nargs != 1) return 0;
        if (g->vkind[i] == CG_V_ONE) continue;
        size_t z = red_dtype_size(cg_buf_dtype(g, loads[i]->slot));
        if (esz && z != esz) return 0;
        esz = z;
    }
    return esz;
}

/* acc_elem_v: vector u's elements folded into `a`, in order, and acc_elem_1,
 * element t alone, loaded and folded (the domain's last elements past whole
 * batches of vectors); for a scan, acc_elems_v: each element on its own, e[c]
 * the fold of element c alone (rj_scan_warps_v). */
static void emit_elem_v(gen *g, const ir *const *loads, int n, int bc, int vec, int scan)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    if (scan)
        util_buf_puts(o, "__device__ __forceinline__ void acc_elems_v(Acc *e, const Params &P, const Vld &L, long long o, "
                         "const long long *lo, long long u)\n{\n    (void)P;\n    (void)o;\n");
    else
        util_buf_puts(o, "__device__ __forceinline__ void acc_elem_v(Acc &a, const Params &P, const Vld &L, long long o, "
                         "const long long *lo, long long u)\n{\n    (void)P;\n    (void)o;\n");
    for (int c = 0; c < vec; c++) {
        cg_begin_function(g);
        util_buf_puts(o, "    {\n");
        if (scan) util_buf_printf(o, "    Acc &a = e[%d];\n    acc_init(a);\n", c);
        cg_emit_free_vars(g, "o");
        /* one reduced index: its value; several: the flat position (for
         * argmin and argmax), the indices themselves being unused */
        if (ps->nred == 1)
            util_buf_printf(o, "    const long long i%d = lo[0] + u * %d + %d;\n    (void)i%d;\n", ps->red[0], vec, c,
                            ps->red[0]);
        else
            util_buf_printf(o, "    const long long t = u * %d + %d;\n    (void)t;\n", vec, c);
        for (int i = 0; i < n; i++) {
            g->done[loads[i]->id] = 1;
            if (g->vkind[i] == CG_V_ONE)
                util_buf_printf(o, "    const %s v%d = L.s%d;\n", cg_tname[loads[i]->type], loads[i]->id, loads[i]->id);
            else
                util_buf_printf(o, "    const %s v%d = L.q%d.c[%d];\n", cg_tname[loads[i]->type], loads[i]->id,
                                loads[i]->id, c);
        }
        cg_emit_fold(g);
        util_buf_puts(o, "    }\n");
    }
    if (scan) {
        util_buf_puts(o, "}\n");
        return;
    }
    util_buf_puts(o, "}\n__device__ __forceinline__ void acc_elem_1(Acc &a, const Params &P, long long o, "
                     "const long long *lo, long long t)\n{\n");
    cg_begin_function(g);
    emit_vec_bases(g, loads, n);
    if (ps->nred == 1) util_buf_printf(o, "    const long long i%d = lo[0] + t;\n    (void)i%d;\n", ps->red[0], ps->red[0]);
    if (bc) emit_bc_decode(g, "t");
    for (int i = 0; i < n; i++) {
        char dst[64];
        g->done[loads[i]->id] = 1;
        snprintf(dst, sizeof dst, "const %s v%d", cg_tname[loads[i]->type], loads[i]->id);
        if (g->vkind[i] == CG_V_ONE)
            emit_bc_load(g, loads[i], dst);
        else if (g->vkind[i] == CG_V_LAST)
            util_buf_printf(o, "    %s = b%d[rb%d];\n", dst, loads[i]->id, ps->nred - 1);
        else
            util_buf_printf(o, "    %s = b%d[t];\n", dst, loads[i]->id);
    }
    cg_emit_fold(g);
    util_buf_puts(o, "}\n");
}

/* acc_load_v and acc_elem_v: the elements u*RJ_VEC .. u*RJ_VEC + RJ_VEC-1
 * of output o's domain (flat positions, the last reduced index fastest),
 * from one 16-byte load of each array (acc_load_v), folded into `a` in
 * order (acc_elem_v); acc_elem_1 one element; for rj_run_v; a scan's
 * acc_elems_v each element on its own.  Emitted only where the pass
 * qualifies (no ordered operator but in a scan, no ranged reduced index,
 * loads as vec_loads takes them, all of one size); the runtime takes them
 * only where, in every such array, the reduced dimensions make one
 * contiguous run ending in stride 1, every other dimension has a stride of
 * a multiple of 16 bytes, and the domain's first element sits on 16 bytes
 * (src/gpu/strategy.c, gpu_vec_ok). */
void cg_emit_acc_elem_v(gen *g)
{
    const plan_pass *ps = g->ps;
    cg_kernel *k = g->k;
    util_buf *o = g->o;
    /* a scan keeps every element on its own (acc_elems_v), in order, so an
     * ordered operator is no obstacle; a restarting one is not taken, nor a
     * state over 24 bytes (a lane holds 2 x RJ_VEC of them: the 96-byte state
     * of twelve fused scans spilled 4.6 KB; a user operator's pair of 8-byte
     * values and its flag, 8 bytes), nor argmin or argmax (236 bytes spilled,
     * and their results stored an element at a time), nor ranged rows (their
     * starts anywhere) */
    int scan = k->kind == CG_SCAN, arg = 0;
    for (int q = 0; q < ps->nreds; q++) arg |= cg_is_arg(ps->reds[q].rop);
    if ((k->kind != CG_FULL && k->kind != CG_PARTIAL && k->kind != CG_KEYED && !scan) || (k->ordered && !scan) ||
        ps->nred < 1 || (scan && (ps->reset || k->acc_size > 24 || arg || plan_scan_ranged(g->p, ps))))
        return;
    if (ps->key && g->tun->kvt < 0) return;
    /* a ranged reduced index: rj_seg1a's candidates only (ranged_vec_pass) */
    int rv = 0;
    for (int d = 0; d < ps->nred; d++)
        if (g->p->vars[ps->red[d]].lo) rv = 1;
    if (rv && !ranged_vec_pass(g)) return;
    const ir *loads[8];
    int n = 0, bc = find_loads(g, rv, loads, &n);
    if (bc < 0) return;
    size_t esz = vec_size(g, loads, n, rv);
    if (!esz) return;
    int vec = (int)(16 / esz);
    k->vec = vec;
    k->vec_bc = bc;
    for (int i = 0; i < n; i++) k->vec_kind[i] = g->vkind[i];
    k->vec_esz = (int)esz;
    k->vec_nred = ps->nred;
    for (int d = 0; d < ps->nred; d++) {
        k->vec_lo[d] = k->lay.var_lo[ps->red[d]];
        k->vec_sz[d] = k->lay.var_sz[ps->red[d]];
    }
    k->nvec = n;
    memcpy(g->vloads, loads, (size_t)n * sizeof *loads);
    /* the loads apart from the folds (Vld, acc_load_v), so that a batch's
     * loads are all issued before the first fold: with both in one function
     * ptxas interleaved them, one load of each array in flight per thread */
    util_buf_puts(o, "struct Vld {\n");
    for (int i = 0; i < n; i++)
        if (g->vkind[i] == CG_V_ONE)
            util_buf_printf(o, "    %s s%d;\n", cg_tname[loads[i]->type], loads[i]->id);
        else
            util_buf_printf(o, "    rj_vec<%s, %d> q%d;\n", cg_tname[loads[i]->type], vec, loads[i]->id);
    /* acc_load_v: vector u of each array; acc_elem_v: its elements folded;
     * acc_elem_1: element t alone, loaded and folded (the domain's last
     * elements past whole batches of vectors).  A plain ld.global: no cache
     * operator was faster (bench/TUNING.md) */
    util_buf_puts(o, "};\n__device__ __forceinline__ void acc_load_v(Vld &L, const Params &P, long long o, "
                     "const long long *lo, long long u)\n{\n");
    cg_begin_function(g);
    emit_vec_bases(g, loads, n);
    if (bc) {
        /* the vector's first element; its others differ in the last index */
        util_buf_printf(o, "    const long long pos = u * %d;\n", vec);
        emit_bc_decode(g, "pos");
    }
    for (int i = 0; i < n; i++) {
        char dst[32];
        switch (g->vkind[i]) {
        case CG_V_ONE:
            snprintf(dst, sizeof dst, "L.s%d", loads[i]->id);
            emit_bc_load(g, loads[i], dst);
            break;
        case CG_V_LAST:
            util_buf_printf(o, "    L.q%d = *(const rj_vec<%s, %d> *)(b%d + rb%d);\n", loads[i]->id,
                            cg_tname[loads[i]->type], vec, loads[i]->id, ps->nred - 1);
            break;
        default:
            util_buf_printf(o, "    L.q%d = ((const rj_vec<%s, %d> *)b%d)[u];\n", loads[i]->id, cg_tname[loads[i]->type],
                            vec, loads[i]->id);
        }
    }
    util_buf_puts(o, "}\n");
    if (!ps->key && !rv && k->kind == CG_PARTIAL && ps->nred == 1) {
        /* acc_stage_v: vector u of each array copied into shared memory
         * without passing through registers (cp.async, 16 bytes each), for
         * rj_segbs, which reduces a row from there and runs its epilogue
         * over it again */
        util_buf_puts(o, "__device__ __forceinline__ void acc_stage_v(Vld *S, const Params &P, long long o, "
                         "const long long *lo, long long u)\n{\n");
        cg_begin_function(g);
        emit_vec_bases(g, loads, n);
        for (int i = 0; i < n; i++)
            util_buf_printf(o, "    rj_cp_async16(&S->q%d, (const rj_vec<%s, %d> *)b%d + u);\n", loads[i]->id,
                            cg_tname[loads[i]->type], vec, loads[i]->id);
        util_buf_puts(o, "}\n");
    }
    if (ps->key) {
        emit_key_v(g, loads, n);
        return;
    }
    if (rv) {
        /* rj_seg1a: acc_one_v as for keys, at absolute positions (lo[0] 0);
         * rvec_extent, the fewest elements of its arrays; rj_seg1s:
         * acc_one_s */
        emit_key_v(g, loads, n);
        emit_one_s(g, loads, n);
        util_buf_printf(o, "__device__ __forceinline__ long long rvec_extent(const Params &P)\n{\n"
                           "    long long n = P.v[%d];\n", k->vec_base[0] + 1);
        for (int i = 1; i < n; i++)
            util_buf_printf(o, "    if (P.v[%d] < n) n = P.v[%d];\n", k->vec_base[i] + 1, k->vec_base[i] + 1);
        util_buf_puts(o, "    return n;\n}\n");
        k->rvec = 1;
        return;
    }
    emit_elem_v(g, loads, n, bc, vec, scan);
}

