/*
 * cuda.c -- turns one pass of a plan into CUDA C++ source.  The generated
 * part defines the accumulator `Acc` of the pass's fused reductions and the
 * functions the strategies in rj_reduce.cuh call: acc_init, acc_combine,
 * acc_shfl_down, out_range (per-output domain), acc_elem (evaluate the map
 * expressions at one element and fold), acc_write and key_at.  Expressions
 * are emitted as single-assignment statements, one per IR node, so the
 * hash-consed IR's sharing becomes common subexpressions in the kernel.
 */
#include "cuda.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const tname[CT_COUNT] = {"bool", "int", "long long", "unsigned",
                                            "unsigned long long", "float", "double"};

typedef struct gen {
    const plan *p;
    const plan_pass *ps;
    cg_kernel *k;
    util_buf *o;
    unsigned char *done;    /* by IR id: emitted in the current function */
    int nir;
    int in_user;            /* emitting a combine: params are p<slot>    */
    int pi;                 /* the pass                                  */
    int in_elem;            /* emitting acc_elem: loads are recorded      */
    int deferred;           /* a thread's rj_flt F notes bad subscripts   */
    int hoisted;            /* out_range checks ranged subscripts (below) */
    unsigned char *seen;    /* by IR id: visited by emit_range_checks      */
} gen;

/* ---- layout ----------------------------------------------------------------- */

static int layout(gen *g, util_arena *a, util_diag *diag)
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

static int buf_base(gen *g, int slot)
{
    return slot >= 0 ? g->k->lay.buf_base[slot] : g->k->lay.temp_base[-1 - slot];
}

static red_dtype buf_dtype(gen *g, int slot)
{
    return slot >= 0 ? g->p->bufs[slot].dtype : plan_dtype_of_ct(g->p->temps[-1 - slot].type);
}

/* ---- expressions -------------------------------------------------------------- */

static void literal(util_buf *o, int type, plan_value v)
{
    switch (type) {
    case CT_BOOL: util_buf_puts(o, v.i ? "true" : "false"); break;
    case CT_I32: util_buf_printf(o, "(int)%" PRId64, v.i); break;
    case CT_I64:
        if (v.i == INT64_MIN) util_buf_puts(o, "(long long)0x8000000000000000ull");
        else util_buf_printf(o, "%" PRId64 "ll", v.i);
        break;
    case CT_U32: util_buf_printf(o, "%" PRIu64 "u", v.u); break;
    case CT_U64: util_buf_printf(o, "%" PRIu64 "ull", v.u); break;
    case CT_F32: {
        float f = (float)v.f;
        uint32_t b;
        memcpy(&b, &f, 4);
        util_buf_printf(o, "__int_as_float((int)0x%08" PRIx32 "u)", b);
        break;
    }
    case CT_F64: {
        uint64_t b;
        memcpy(&b, &v.f, 8);
        util_buf_printf(o, "__longlong_as_double((long long)0x%016" PRIx64 "ull)", b);
        break;
    }
    }
}

static void name_of(gen *g, const ir *x, char *buf, size_t n)
{
    if (x->kind == IR_INDEX) snprintf(buf, n, "i%d", x->slot);
    else if (x->kind == IR_PARAM && g->in_user) snprintf(buf, n, "p%d", x->slot);
    else snprintf(buf, n, "v%d", x->id);
}

static void emit(gen *g, const ir *x);

static void ref(gen *g, const ir *x)
{
    if (x->kind == IR_CONST) {
        literal(g->o, x->type, x->c);
        return;
    }
    char nm[32];
    name_of(g, x, nm, sizeof nm);
    util_buf_puts(g->o, nm);
}

static const char *load_expr(red_dtype t)
{
    switch (t) {
    case RED_BOOL: return "(((const rj_u8 *)P.v[%d])[%s] != 0)";
    case RED_I32: return "((const int *)P.v[%d])[%s]";
    case RED_I64: return "((const long long *)P.v[%d])[%s]";
    case RED_U32: return "((const unsigned *)P.v[%d])[%s]";
    case RED_U64: return "((const unsigned long long *)P.v[%d])[%s]";
    case RED_F16: return "rj_f16_to_f32(((const rj_u16 *)P.v[%d])[%s])";
    case RED_BF16: return "rj_bf16_to_f32(((const rj_u16 *)P.v[%d])[%s])";
    case RED_F32: return "((const float *)P.v[%d])[%s]";
    case RED_F64: return "((const double *)P.v[%d])[%s]";
    }
    return "0";
}

static const char *fn_name(int op)
{
    switch (op) {
    case OP_NEG: return "rj_neg";
    case OP_BNOT: return "rj_bnot";
    case OP_ABS: return "rj_abs";
    case OP_SQRT: return "rj_sqrt";
    case OP_EXP: return "rj_exp";
    case OP_LOG: return "rj_log";
    case OP_LOG2: return "rj_log2";
    case OP_LOG10: return "rj_log10";
    case OP_SIN: return "rj_sin";
    case OP_COS: return "rj_cos";
    case OP_TAN: return "rj_tan";
    case OP_TANH: return "rj_tanh";
    case OP_FLOOR: return "rj_floor";
    case OP_CEIL: return "rj_ceil";
    case OP_ROUND: return "rj_round";
    case OP_ISNAN: return "rj_isnan";
    case OP_ISFINITE: return "rj_isfinite";
    case OP_F16ROUND: return "rj_round_f16";
    case OP_BF16ROUND: return "rj_round_bf16";
    case OP_ADD: return "rj_add";
    case OP_SUB: return "rj_sub";
    case OP_MUL: return "rj_mul";
    case OP_DIV: return "rj_div";
    case OP_MOD: return "rj_mod";
    case OP_SHL: return "rj_shl";
    case OP_SHR: return "rj_shr";
    case OP_MIN: return "rj_min";
    case OP_MAX: return "rj_max";
    case OP_POW: return "rj_pow";
    case OP_HYPOT: return "rj_hypot";
    case OP_FMA: return "rj_fma";
    }
    return NULL;
}

static void emit_cast(gen *g, const ir *x)
{
    const ir *a = x->args[0];
    int from = a->type, to = x->type;
    util_buf *o = g->o;
    if (to == CT_BOOL) {
        util_buf_puts(o, "(");
        ref(g, a);
        util_buf_puts(o, " != 0)");
    } else if (CT_IS_FLOAT(from) && !CT_IS_FLOAT(to)) {
        static const char *const f[CT_COUNT] = {NULL, "rj_to_i32", "rj_to_i64", "rj_to_u32", "rj_to_u64"};
        util_buf_printf(o, "%s((double)", f[to]);
        ref(g, a);
        util_buf_puts(o, ")");
    } else {
        util_buf_printf(o, "(%s)(", tname[to]);
        ref(g, a);
        util_buf_puts(o, ")");
    }
}

/* The index of a subscript `v` or `v + c` (c a constant, stored in *c), or
 * NULL for any other subscript. */
static const ir *index_plus_const(const ir *s, int64_t *c)
{
    *c = 0;
    if (s->kind == IR_OP && s->op == OP_ADD && s->args[1]->kind == IR_CONST && s->args[0]->kind == IR_INDEX) {
        *c = s->args[1]->c.i;
        s = s->args[0];
    }
    return s->kind == IR_INDEX ? s : NULL;
}

/* Whether subscript s is `v` or `v + c` for a ranged reduced index v of the
 * pass (v is its position among the reduced ones): over one output's
 * elements it runs over [lo[v] + c, lo[v] + c + sz[v]). */
static int ranged_subscript(const gen *g, const ir *s, int *v, int64_t *c)
{
    s = index_plus_const(s, c);
    if (!s) return 0;
    for (int d = 0; d < g->ps->nred; d++)
        if (g->ps->red[d] == s->slot && g->p->vars[s->slot].lo) {
            *v = d;
            return 1;
        }
    return 0;
}

/* Is subscript d of load x always in range?  An inferred index v runs over
 * 0..min(shape - c) of the subscripts `v + c` it was inferred from, so such
 * a subscript of the same array and dimension needs no run-time check.  In
 * the element code of a pass whose out_range checks the ranged subscripts
 * (g->hoisted), those need none either. */
static int proven_in_range(gen *g, const ir *x, int d)
{
    if (x->slot < 0) return 0;
    int64_t c;
    int rv;
    if (g->hoisted && g->in_elem && ranged_subscript(g, x->args[d], &rv, &c)) return 1;
    const ir *s = index_plus_const(x->args[d], &c);
    if (!s) return 0;
    const plan_var *v = &g->p->vars[s->slot];
    if (v->lo || v->key_pass >= 0) return 0;
    for (int k = 0; k < v->nconstraints; k++)
        if (v->constraints[k].buf == x->slot && v->constraints[k].dim == d && v->constraints[k].offset == c && c >= 0)
            return 1;
    return 0;
}

/* What each subscript of a load in the element code is: the runtime's test
 * for a column layout (the fastest-varying dimension of every load indexed
 * by a free index) reads it. */
static void record_load(gen *g, const ir *x)
{
    cg_kernel *k = g->k;
    if (k->nloads == (int)(sizeof k->loads / sizeof k->loads[0])) {
        k->loads_overflow = 1;
        return;
    }
    k->loads[k->nloads].slot = x->slot;
    for (int d = 0; d < x->nargs && d < RED_MAX_DIMS; d++) {
        const ir *s = x->args[d];
        signed char kind = 0;
        if (s->kind == IR_INDEX) {
            for (int f = 0; f < g->ps->nfree; f++)
                if (g->ps->free[f] == s->slot) kind = 1;
            for (int r = 0; r < g->ps->nred; r++)
                if (g->ps->red[r] == s->slot) kind = 2;
        }
        k->loads[k->nloads].dim[d] = kind;
    }
    k->nloads++;
}

static void emit(gen *g, const ir *x)
{
    if (x->kind == IR_CONST || x->kind == IR_INDEX) return;
    if (x->kind == IR_PARAM && g->in_user) return;
    if (g->done[x->id]) return;
    g->done[x->id] = 1;
    util_buf *o = g->o;
    if (x->kind == IR_LOAD) {
        for (int d = 0; d < x->nargs; d++) emit(g, x->args[d]);
        if (g->in_elem && x->slot >= 0) record_load(g, x);
        int base = buf_base(g, x->slot), nd = x->nargs;
        char off[64];
        snprintf(off, sizeof off, "o%d", x->id);
        util_buf_printf(o, "    long long %s = 0;\n", off);
        for (int d = 0; d < nd; d++) {
            util_buf_printf(o, "    { long long s = ");
            ref(g, x->args[d]);
            if (proven_in_range(g, x, d))
                util_buf_printf(o, "; %s += s * P.v[%d]; }\n", off, base + 1 + nd + d);
            else if (g->deferred) {
                util_buf_printf(o, "; s = rj_check(F, s, P.v[%d], %d, %d); %s += s * P.v[%d]; }\n",
                                base + 1 + d, x->id, d, off, base + 1 + nd + d);
                if (g->in_elem) g->k->elem_checks++;
            }
            else
                util_buf_printf(o, "; if ((unsigned long long)s >= (unsigned long long)P.v[%d]) "
                                   "{ rj_fault(P, %d, %d, %d, s); s = 0; } %s += s * P.v[%d]; }\n",
                                base + 1 + d, RED_ERR_INDEX, x->id, d, off, base + 1 + nd + d);
        }
        util_buf_printf(o, "    const %s v%d = ", tname[x->type], x->id);
        util_buf_printf(o, load_expr(buf_dtype(g, x->slot)), base, off);
        util_buf_puts(o, ";\n");
        return;
    }
    for (int i = 0; i < x->nargs; i++) emit(g, x->args[i]);
    util_buf_printf(o, "    const %s v%d = ", tname[x->type], x->id);
    switch (x->kind) {
    case IR_SCALAR: {
        int s = g->k->lay.scalar_slot[x->slot];
        switch (x->type) {
        case CT_BOOL: util_buf_printf(o, "(P.v[%d] != 0)", s); break;
        case CT_F32: util_buf_printf(o, "(float)__longlong_as_double(P.v[%d])", s); break;
        case CT_F64: util_buf_printf(o, "__longlong_as_double(P.v[%d])", s); break;
        default: util_buf_printf(o, "(%s)P.v[%d]", tname[x->type], s);
        }
        break;
    }
    case IR_PARAM: util_buf_printf(o, "p%d", x->slot); break;
    case IR_CAST: emit_cast(g, x); break;
    case IR_OP: {
        const char *f = fn_name(x->op);
        static const char *const infix[OP_COUNT_] = {
            [OP_LT] = "<", [OP_LE] = "<=", [OP_GT] = ">", [OP_GE] = ">=", [OP_EQ] = "==",
            [OP_NE] = "!=", [OP_LAND] = "&&", [OP_LOR] = "||", [OP_BAND] = "&",
            [OP_BOR] = "|", [OP_BXOR] = "^"};
        if (x->op == OP_NOT) {
            util_buf_puts(o, "(!");
            ref(g, x->args[0]);
            util_buf_puts(o, ")");
        } else if (x->op == OP_SELECT) {
            util_buf_puts(o, "(");
            ref(g, x->args[0]);
            util_buf_puts(o, " ? ");
            ref(g, x->args[1]);
            util_buf_puts(o, " : ");
            ref(g, x->args[2]);
            util_buf_puts(o, ")");
        } else if (x->op == OP_BNOT && x->type == CT_BOOL) {
            util_buf_puts(o, "(!");
            ref(g, x->args[0]);
            util_buf_puts(o, ")");
        } else if (infix[x->op]) {
            util_buf_printf(o, "(%s)(", tname[x->type]);
            ref(g, x->args[0]);
            util_buf_printf(o, " %s ", infix[x->op]);
            ref(g, x->args[1]);
            util_buf_puts(o, ")");
        } else {
            util_buf_printf(o, "%s(", f ? f : "rj_unknown");
            for (int i = 0; i < x->nargs; i++) {
                if (i) util_buf_puts(o, ", ");
                ref(g, x->args[i]);
            }
            util_buf_puts(o, ")");
        }
        break;
    }
    default: util_buf_puts(o, "0"); break;
    }
    util_buf_puts(o, ";\n");
}

static void begin_function(gen *g) { memset(g->done, 0, (size_t)g->nir + 1); }

/* Declare index variable values: free ones from `o`, reduced ones from `t`
 * with per-output starts lo[] and extents sz[]. */
static void emit_free_vars(gen *g, const char *o)
{
    const plan_pass *ps = g->ps;
    if (!ps->nfree) return;
    util_buf_printf(g->o, "    long long rem_o = %s;\n", o);
    for (int d = ps->nfree - 1; d >= 0; d--) {
        int v = ps->free[d];
        int lo = g->k->lay.var_lo[v], sz = g->k->lay.var_sz[v];
        if (d > 0)
            util_buf_printf(g->o, "    const long long i%d = P.v[%d] + rem_o %% P.v[%d]; rem_o /= P.v[%d];\n",
                            v, lo, sz, sz);
        else
            util_buf_printf(g->o, "    const long long i%d = P.v[%d] + rem_o;\n", v, lo);
    }
}

static void emit_red_vars(gen *g, const char *t)
{
    const plan_pass *ps = g->ps;
    if (!ps->nred) return;
    util_buf_printf(g->o, "    long long rem_t = %s;\n", t);
    for (int d = ps->nred - 1; d >= 0; d--) {
        int v = ps->red[d];
        if (d > 0)
            util_buf_printf(g->o, "    const long long i%d = lo[%d] + rem_t %% sz[%d]; rem_t /= sz[%d];\n",
                            v, d, d, d);
        else
            util_buf_printf(g->o, "    const long long i%d = lo[0] + rem_t;\n", v);
    }
    (void)g;
}

/* ---- accumulators ----------------------------------------------------------- */

static int is_arg(int rop) { return rop == ROP_ARGMIN || rop == ROP_ARGMAX; }
static int has_flag(int rop) { return rop == ROP_USER || is_arg(rop); }

static void emit_acc_struct(gen *g)
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
                    util_buf_printf(o, "    %s r%d_%d;\n", tname[rd->acc[c]], q, c);
                    size += w;
                }
            if (w == 8 && is_arg(rd->rop)) {
                util_buf_printf(o, "    long long x%d;\n", q);
                size += 8;
            }
            if (w == 1 && has_flag(rd->rop)) {
                util_buf_printf(o, "    bool h%d;\n", q);
                size += 1;
            }
        }
        for (int q = 0; q < ps->nreds; q++) {
            const plan_red *rd = &ps->reds[q];
            for (int c = 0; c < rd->ncomp; c++)
                if (plan_ct_size(rd->acc[c]) == w && w > align) align = w;
            if (is_arg(rd->rop)) align = 8;
        }
    }
    util_buf_puts(o, "};\n");
    g->k->acc_size = (size + align - 1) / align * align;
    if (g->k->acc_size == 0) g->k->acc_size = 1;
}

static void emit_user_ops(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    for (int q = 0; q < ps->nreds; q++) {
        const plan_red *rd = &ps->reds[q];
        if (rd->rop != ROP_USER) continue;
        util_buf_printf(o, "// user operator %s%s\n__device__ __forceinline__ void uop%d(", rd->ordered ? "ordered " : "", rd->uname, q);
        for (int c = 0; c < rd->ncomp; c++) util_buf_printf(o, "%s%s &a%d", c ? ", " : "", tname[rd->acc[c]], c);
        for (int c = 0; c < rd->ncomp; c++) util_buf_printf(o, ", %s b%d", tname[rd->acc[c]], c);
        util_buf_puts(o, ")\n{\n");
        for (int c = 0; c < rd->ncomp; c++) {
            util_buf_printf(o, "    const %s p%d = a%d;\n", tname[rd->acc[c]], 2 * c, c);
            util_buf_printf(o, "    const %s p%d = b%d;\n", tname[rd->acc[c]], 2 * c + 1, c);
        }
        begin_function(g);
        g->in_user = 1;
        for (int c = 0; c < rd->ncomp; c++) emit(g, rd->combine[c]);
        for (int c = 0; c < rd->ncomp; c++) {
            util_buf_printf(o, "    a%d = ", c);
            ref(g, rd->combine[c]);
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
    case ROP_BAND: util_buf_printf(o, "%s = (%s)(%s & %s);", dst, tname[ct], dst, src); break;
    case ROP_BOR: util_buf_printf(o, "%s = (%s)(%s | %s);", dst, tname[ct], dst, src); break;
    case ROP_BXOR: util_buf_printf(o, "%s = (%s)(%s ^ %s);", dst, tname[ct], dst, src); break;
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
        if (is_arg(rd->rop)) util_buf_printf(o, "    r.x%d = %s(a.x%d, %s);\n", q, fn, q, arg);
        if (has_flag(rd->rop)) util_buf_printf(o, "    r.h%d = %s(a.h%d, %s);\n", q, fn, q, arg);
    }
    util_buf_puts(o, "    return r;\n}\n");
}

static void emit_acc_funcs(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    char d[64], s[64];

    util_buf_puts(o, "__device__ __forceinline__ void acc_init(Acc &a)\n{\n");
    for (int q = 0; q < ps->nreds; q++) {
        const plan_red *rd = &ps->reds[q];
        for (int c = 0; c < rd->ncomp; c++) {
            util_buf_printf(o, "    a.r%d_%d = ", q, c);
            literal(o, rd->acc[c], rd->rop == ROP_USER ? rd->identity[c] : plan_identity(rd->rop, rd->acc[c]));
            util_buf_puts(o, ";\n");
        }
        if (is_arg(rd->rop)) util_buf_printf(o, "    a.x%d = -1;\n", q);
        if (has_flag(rd->rop)) util_buf_printf(o, "    a.h%d = false;\n", q);
    }
    util_buf_puts(o, "}\n");

    util_buf_puts(o, "__device__ __forceinline__ void acc_combine(Acc &a, const Acc &b)\n{\n");
    for (int q = 0; q < ps->nreds; q++) {
        const plan_red *rd = &ps->reds[q];
        if (is_arg(rd->rop)) {
            /* the first index of the extreme: lanes hold interleaved elements,
             * so a tie goes to the smaller index, not to the earlier lane */
            const char *bt = rd->rop == ROP_ARGMAX ? "argmax" : "argmin";
            util_buf_printf(o, "    if (b.h%d && (!a.h%d || rj_%s_better(b.r%d_0, a.r%d_0) || (!rj_%s_better(a.r%d_0, b.r%d_0) "
                               "&& b.x%d < a.x%d))) { a.r%d_0 = b.r%d_0; a.x%d = b.x%d; a.h%d = true; }\n",
                            q, q, bt, q, q, bt, q, q, q, q, q, q, q, q, q);
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
    int base = buf_base(g, x->slot);
    for (int d = 0; d < x->nargs; d++) {
        int v;
        int64_t c;
        if (!ranged_subscript(g, x->args[d], &v, &c)) continue;
        util_buf_printf(g->o,
                        "    if (cnt > 0) { long long a0 = (long long)((unsigned long long)lo[%d] + %lldull), n = P.v[%d]; "
                        "if (a0 < 0 || a0 > n - sz[%d]) { rj_fault(P, %d, %d, %d, a0 < 0 || a0 >= n ? a0 : n); cnt = 0; } }\n",
                        v, (long long)c, base + 1 + d, v, RED_ERR_INDEX, x->id, d);
    }
}

/* out_range: the domain of output o; lo[d], sz[d] per reduced index, and for
 * keyed passes lo[RJ_NRED] = the segment's first linear position.  Partial
 * passes check ranged subscripts here (g->hoisted, emit_range_checks). */
static void emit_out_range(gen *g)
{
    const plan *p = g->p;
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    util_buf_puts(o, "__device__ __forceinline__ long long out_range(const Params &P, long long o, long long *lo, "
                     "long long *sz)\n{\n");
    begin_function(g);
    int ranged = 0;
    for (int d = 0; d < ps->nred; d++) ranged |= p->vars[ps->red[d]].lo != NULL;
    /* not full reductions, whose kernels fold the host's count of elements
     * rather than out_range's, nor keyed ones */
    g->hoisted = ranged && g->k->kind == CG_PARTIAL;
    if (ranged) emit_free_vars(g, "o");
    util_buf_puts(o, "    long long cnt = 1;\n");
    for (int d = 0; d < ps->nred; d++) {
        const plan_var *pv = &p->vars[ps->red[d]];
        if (pv->lo) {
            emit(g, pv->lo);
            emit(g, pv->hi);
            util_buf_printf(o, "    lo[%d] = ", d);
            ref(g, pv->lo);
            util_buf_printf(o, ";\n    { long long h = ");
            ref(g, pv->hi);
            /* an extent past 2^40 (a stray bound) is a fault, reported
             * like an index error, rather than a loop for days */
            util_buf_printf(o, "; sz[%d] = h > lo[%d] ? (long long)((unsigned long long)h - (unsigned long long)lo[%d]) : 0; "
                               "if ((unsigned long long)sz[%d] > (1ull << 40)) { rj_fault(P, %d, %d, %d, h); sz[%d] = 0; } }\n",
                            d, d, d, d, RED_ERR_LIMIT, g->pi, d, d);
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

static void emit_fold(gen *g);
static int kvt(void);
static int kdb(void);

static void emit_acc_elem(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    util_buf_puts(o, "__device__ __forceinline__ void acc_elem(Acc &a, rj_flt &F, const Params &P, long long o, "
                     "const long long *lo, const long long *sz, long long t)\n{\n");
    g->deferred = 1;
    begin_function(g);
    if (ps->key) util_buf_puts(o, "    t += lo[RJ_NRED];\n");
    emit_free_vars(g, "o");
    emit_red_vars(g, "t");
    util_buf_puts(o, "    (void)o;\n");
    g->in_elem = 1;
    emit_fold(g);
    g->in_elem = 0;
    util_buf_puts(o, "}\n");
    g->deferred = 0;
}

/* The element's values (emit), then each reduction's fold of them into `a`. */
static void emit_fold(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    for (int q = 0; q < ps->nreds; q++)
        for (int c = 0; c < ps->reds[q].ncomp; c++) emit(g, ps->reds[q].map[c]);
    for (int q = 0; q < ps->nreds; q++) {
        const plan_red *rd = &ps->reds[q];
        if (is_arg(rd->rop)) {
            /* selects, not a branch: the loads of the elements a thread
             * folds in a row can all be issued before the first compare */
            util_buf_printf(o, "    { const bool tk = !a.h%d || rj_%s_better(", q,
                            rd->rop == ROP_ARGMAX ? "argmax" : "argmin");
            ref(g, rd->map[0]);
            util_buf_printf(o, ", a.r%d_0); a.r%d_0 = tk ? ", q, q);
            ref(g, rd->map[0]);
            util_buf_printf(o, " : a.r%d_0; ", q);
            if (ps->nred == 1) util_buf_printf(o, "a.x%d = tk ? i%d : a.x%d; a.h%d = true; }\n", q, ps->red[0], q, q);
            else util_buf_printf(o, "a.x%d = tk ? t : a.x%d; a.h%d = true; }\n", q, q, q);
        } else if (rd->rop == ROP_USER) {
            util_buf_printf(o, "    if (!a.h%d) { ", q);
            for (int c = 0; c < rd->ncomp; c++) {
                util_buf_printf(o, "a.r%d_%d = ", q, c);
                ref(g, rd->map[c]);
                util_buf_puts(o, "; ");
            }
            util_buf_printf(o, "a.h%d = true; } else uop%d(", q, q);
            for (int c = 0; c < rd->ncomp; c++) util_buf_printf(o, "%sa.r%d_%d", c ? ", " : "", q, c);
            for (int c = 0; c < rd->ncomp; c++) {
                util_buf_puts(o, ", ");
                ref(g, rd->map[c]);
            }
            util_buf_puts(o, ");\n");
        } else {
            char dst[32];
            snprintf(dst, sizeof dst, "a.r%d_0", q);
            util_buf tmp;
            util_buf_init(&tmp);
            util_buf *save = g->o;
            g->o = &tmp;
            ref(g, rd->map[0]);
            g->o = save;
            util_buf_puts(o, "    ");
            fold_builtin(o, rd->rop, rd->acc[0], dst, util_buf_str(&tmp));
            util_buf_puts(o, "\n");
            util_buf_free(&tmp);
        }
    }
}

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
 * Collects the distinct loads into list; 0 where any load is not so. */
static int vec_loads(gen *g, const ir *x, const ir **list, int *n, int max)
{
    const plan_pass *ps = g->ps;
    if (x->kind == IR_INDEX) return ps->nred == 1 || red_pos(ps, x->slot) < 0;
    if (x->kind == IR_LOAD) {
        int first = -1, seen = 0;
        if (x->slot < 0 || x->nargs > RED_MAX_DIMS) return 0;
        for (int d = 0; d < x->nargs; d++) {
            const ir *sub = x->args[d];
            if (sub->kind != IR_INDEX || !proven_in_range(g, x, d)) return 0;
            int k = red_pos(ps, sub->slot);
            if (k < 0) {
                if (!is_free(ps, sub->slot)) return 0;
                continue;
            }
            if (k == 0 && first < 0) first = d;
            if (first < 0 || d - first != k) return 0;   /* out of order, or twice */
            seen++;
        }
        if (seen != ps->nred) return 0;   /* one missing */
        switch (buf_dtype(g, x->slot)) {
        case RED_I32: case RED_U32: case RED_F32: case RED_I64: case RED_U64: case RED_F64: break;
        default: return 0;
        }
        for (int i = 0; i < *n; i++)
            if (list[i] == x) return 1;
        if (*n == max) return 0;
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
    emit_free_vars(g, "o");
    util_buf_puts(o, "    (void)o;\n");
    for (int i = 0; i < n; i++) {
        const ir *x = loads[i];
        int base = buf_base(g, x->slot), nd = x->nargs;
        const char *t = tname[x->type];
        k->vec_base[i] = base;
        k->vec_ndim[i] = nd;
        util_buf_printf(o, "    const %s *b%d = (const %s *)P.v[%d]", t, x->id, t, base);
        for (int d = 0; d < nd; d++) {
            int r = red_pos(ps, x->args[d]->slot);
            if (r == 0) k->vec_rdim[i] = d;
            if (r == ps->nred - 1) util_buf_printf(o, " + lo[%d]", r);
            else if (r >= 0) util_buf_printf(o, " + lo[%d] * P.v[%d]", r, base + 1 + nd + d);
            else util_buf_printf(o, " + i%d * P.v[%d]", x->args[d]->slot, base + 1 + nd + d);
        }
        util_buf_puts(o, ";\n");
    }
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
        begin_function(g);
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
            util_buf_printf(o, "    const %s v%d = L.q%d.c[c];\n    (void)v%d;\n", tname[loads[i]->type], loads[i]->id,
                            loads[i]->id, loads[i]->id);
        }
        if (f == 0) {
            emit_fold(g);
        } else {
            emit(g, ps->key);
            util_buf_puts(o, "    return ");
            ref(g, ps->key);
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
    begin_function(g);
    util_buf_puts(o, "__device__ __forceinline__ void acc_one_s(Acc &a, const Params &P, long long t)\n{\n"
                     "    (void)P;\n");
    util_buf_printf(o, "    const long long i%d = t;\n    (void)i%d;\n", ps->red[0], ps->red[0]);
    for (int i = 0; i < n; i++) {
        const char *t = tname[loads[i]->type];
        g->done[loads[i]->id] = 1;
        util_buf_printf(o, "    const %s v%d = ((const %s *)P.v[%d])[t];\n    (void)v%d;\n", t, loads[i]->id, t,
                        g->k->vec_base[i], loads[i]->id);
    }
    emit_fold(g);
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

/* A candidate for rj_seg1a (rj_reduce.cuh): one output index, one reduced
 * index over a range (`over k in ptr[r]..ptr[r+1]`), folded with a
 * commutative operator from loads at the reduced index alone
 * (emit_acc_elem_v checks them), the output index itself unused by the
 * fold. */
static int ranged_vec_pass(gen *g)
{
    const plan_pass *ps = g->ps;
    if (g->k->kind != CG_PARTIAL || ps->nfree != 1 || ps->nred != 1 || ps->key || g->k->ordered) return 0;
    for (int q = 0; q < ps->nreds; q++)
        for (int c = 0; c < ps->reds[q].ncomp; c++)
            if (uses_free_index(ps, ps->reds[q].map[c])) return 0;
    return 1;
}

/* acc_load_v and acc_elem_v: the elements u*RJ_VEC .. u*RJ_VEC + RJ_VEC-1
 * of output o's domain (flat positions, the last reduced index fastest),
 * from one 16-byte load of each array (acc_load_v), folded into `a` in
 * order (acc_elem_v); acc_elem_1 one element; for rj_run_v.  Emitted only
 * where the pass qualifies (no ordered operator, no ranged reduced index,
 * loads as vec_loads takes them, all of one size); the runtime takes them
 * only where, in every such array, the reduced dimensions make one
 * contiguous run ending in stride 1, every other dimension has a stride of
 * a multiple of 16 bytes, and the domain's first element sits on 16 bytes
 * (gpu.c, vec_ok). */
static void emit_acc_elem_v(gen *g)
{
    const plan_pass *ps = g->ps;
    cg_kernel *k = g->k;
    util_buf *o = g->o;
    if ((k->kind != CG_FULL && k->kind != CG_PARTIAL && k->kind != CG_KEYED) || k->ordered || ps->nred < 1)
        return;
    if (ps->key && kvt() < 0) return;
    /* a ranged reduced index: rj_seg1a's candidates only (ranged_vec_pass) */
    int rv = 0;
    for (int d = 0; d < ps->nred; d++)
        if (g->p->vars[ps->red[d]].lo) rv = 1;
    if (rv && !ranged_vec_pass(g)) return;
    const ir *loads[8];
    int n = 0, ok = 1;
    g->in_elem = rv;   /* (out_range checks a ranged subscript, as for acc_elem) */
    for (int q = 0; q < ps->nreds && ok; q++)
        for (int c = 0; c < ps->reds[q].ncomp && ok; c++) ok = vec_loads(g, ps->reds[q].map[c], loads, &n, 8);
    g->in_elem = 0;
    if (!ok) return;
    if (ps->key && !vec_loads(g, ps->key, loads, &n, 8)) return;
    if (n == 0) return;
    for (int i = 0; rv && i < n; i++)
        if (loads[i]->nargs != 1) return;   /* v[k]: one dimension, the ranged index */
    size_t esz = red_dtype_size(buf_dtype(g, loads[0]->slot));
    for (int i = 1; i < n; i++)
        if (red_dtype_size(buf_dtype(g, loads[i]->slot)) != esz) return;
    int vec = (int)(16 / esz);
    k->vec = vec;
    k->vec_esz = (int)esz;
    k->vec_nred = ps->nred;
    for (int d = 0; d < ps->nred; d++) {
        k->vec_lo[d] = k->lay.var_lo[ps->red[d]];
        k->vec_sz[d] = k->lay.var_sz[ps->red[d]];
    }
    k->nvec = n;
    /* the loads apart from the folds (Vld, acc_load_v), so that a batch's
     * loads are all issued before the first fold: with both in one function
     * ptxas interleaved them, one load of each array in flight per thread */
    util_buf_puts(o, "struct Vld {\n");
    for (int i = 0; i < n; i++)
        util_buf_printf(o, "    rj_vec<%s, %d> q%d;\n", tname[loads[i]->type], vec, loads[i]->id);
    /* acc_load_v: vector u of each array; acc_elem_v: its elements folded;
     * acc_elem_1: element t alone, loaded and folded (the domain's last
     * elements past whole batches of vectors).  A plain ld.global: cache
     * operators on it were tried and not kept (H200, 2026-11-25, 2^26
     * elements, us for sum f32 / sum(a*b) / keys one segment / keys 10..50
     * / keys of 3 / keys rows of 1024 / CSR rows of 3 / 2^25 x 8 row sums,
     * best of two runs): plain 69.3 / 127.7 / 140.4 / 158.9 / 187.9 / 146.5
     * / 142.5 / 283.2; ld.global.nc 68.8 / 127.7 / 140.0 / 158.2 / 185.2 /
     * 145.9 / 142.3 / 282.9; ld.global.cs 68.1 / 127.0 / 140.0 / 156.0 /
     * 191.4 / 144.4 / 143.1 / 301.4; ld.global.nc.L1::no_allocate 68.2 /
     * 126.8 / 149.6 / 158.2 / 213.8 / 157.3 / 142.8 / 301.4.  Whole arrays
     * at 2^28 (two runs each, us for sum f32 / f64 / i32, max, sum(a*b),
     * max(abs(a-b)), sum(x) with sum(x*x), argmax): plain 242.1-243.3 /
     * 472.1 / 240.4-241.3 / 242.3-242.7 / 472.9-473.0 / 471.7-472.6 /
     * 242.0 / 255.5-256.4, .cs within 0.3% of those (sum f32 at 2^24 24.6-
     * 24.8 against 25.1-25.7), .lu up to 0.9% slower; CUB 241.3 / 471.5 /
     * 242.3 / 241.1 / 474.2 / 475.7 / 242.8 / 245.0 */
    util_buf_puts(o, "};\n__device__ __forceinline__ void acc_load_v(Vld &L, const Params &P, long long o, "
                     "const long long *lo, long long u)\n{\n");
    begin_function(g);
    emit_vec_bases(g, loads, n);
    for (int i = 0; i < n; i++)
        util_buf_printf(o, "    L.q%d = ((const rj_vec<%s, %d> *)b%d)[u];\n", loads[i]->id, tname[loads[i]->type], vec,
                        loads[i]->id);
    util_buf_puts(o, "}\n");
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
    util_buf_puts(o, "__device__ __forceinline__ void acc_elem_v(Acc &a, const Params &P, const Vld &L, long long o, "
                     "const long long *lo, long long u)\n{\n    (void)P;\n    (void)o;\n");
    for (int c = 0; c < vec; c++) {
        begin_function(g);
        util_buf_puts(o, "    {\n");
        emit_free_vars(g, "o");
        /* one reduced index: its value; several: the flat position (for
         * argmin and argmax), the indices themselves being unused */
        if (ps->nred == 1)
            util_buf_printf(o, "    const long long i%d = lo[0] + u * %d + %d;\n    (void)i%d;\n", ps->red[0], vec, c,
                            ps->red[0]);
        else
            util_buf_printf(o, "    const long long t = u * %d + %d;\n    (void)t;\n", vec, c);
        for (int i = 0; i < n; i++) {
            g->done[loads[i]->id] = 1;
            util_buf_printf(o, "    const %s v%d = L.q%d.c[%d];\n", tname[loads[i]->type], loads[i]->id, loads[i]->id, c);
        }
        emit_fold(g);
        util_buf_puts(o, "    }\n");
    }
    util_buf_puts(o, "}\n__device__ __forceinline__ void acc_elem_1(Acc &a, const Params &P, long long o, "
                     "const long long *lo, long long t)\n{\n");
    begin_function(g);
    emit_vec_bases(g, loads, n);
    if (ps->nred == 1) util_buf_printf(o, "    const long long i%d = lo[0] + t;\n    (void)i%d;\n", ps->red[0], ps->red[0]);
    for (int i = 0; i < n; i++) {
        g->done[loads[i]->id] = 1;
        util_buf_printf(o, "    const %s v%d = b%d[t];\n", tname[loads[i]->type], loads[i]->id, loads[i]->id);
    }
    emit_fold(g);
    util_buf_puts(o, "}\n");
}

static void emit_temp_offset(gen *g, int temp, const char *o_name)
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

static void emit_acc_write(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    util_buf_puts(o, "__device__ __forceinline__ void acc_write(const Params &P, long long o, const Acc &a)\n{\n");
    emit_temp_offset(g, ps->reds[0].temp[0], "o");
    for (int q = 0; q < ps->nreds; q++) {
        const plan_red *rd = &ps->reds[q];
        for (int c = 0; c < rd->ncomp; c++) {
            int base = g->k->lay.temp_base[rd->temp[c]];
            if (is_arg(rd->rop)) {
                util_buf_printf(o, "    ((long long *)P.v[%d])[off] = a.h%d ? a.x%d : -1;\n", base, q, q);
                util_buf_printf(o, "    if (!a.h%d) rj_fault(P, %d, %d, 0, 0);\n", q, RED_ERR_EMPTY, (g->pi << 16) | q);
            } else {
                util_buf_printf(o, "    ((%s *)P.v[%d])[off] = a.r%d_%d;\n", tname[rd->acc[c]], base, q, c);
            }
        }
    }
    util_buf_puts(o, "}\n");
}

static void emit_key_at(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    util_buf_puts(o, "__device__ __forceinline__ long long key_at(rj_flt &F, const Params &P, const long long *lo, "
                     "const long long *sz, long long t)\n{\n");
    begin_function(g);
    emit_red_vars(g, "t");
    g->deferred = 1;
    emit(g, ps->key);
    g->deferred = 0;
    util_buf_puts(o, "    return ");
    ref(g, ps->key);
    util_buf_puts(o, ";\n}\n");
}

static void emit_map_kernel(gen *g)
{
    const plan_pass *ps = g->ps;
    util_buf *o = g->o;
    util_buf_puts(o, "extern \"C\" __global__ void __launch_bounds__(RJ_BLOCK) rj_map(Params P)\n{\n"
                     "    long long nout = P.v[RJ_NOUT];\n"
                     "    for (long long o = (long long)blockIdx.x * RJ_BLOCK + threadIdx.x; o < nout;\n"
                     "         o += (long long)gridDim.x * RJ_BLOCK) {\n");
    begin_function(g);
    emit_free_vars(g, "o");
    emit(g, ps->map);
    emit_temp_offset(g, ps->map_temp, "o");
    util_buf_printf(o, "    ((%s *)P.v[%d])[off] = ", tname[g->p->temps[ps->map_temp].type],
                    g->k->lay.temp_base[ps->map_temp]);
    ref(g, ps->map);
    util_buf_puts(o, ";\n    }\n}\n");
}

/* The entry kernels (the map pass's one is in its body) and their groups (see
 * cuda.h).  rj_final closes both the tree and the sequential strategy, so it
 * is in both groups. */
static const struct {
    const char *name, *src;
} entries[] = {
    {"rj_block", "RJ_ENTRY rj_block(Params P) { rj_full_block_stage(P, blockIdx.x); }\n"},
    {"rj_final", "RJ_ENTRY rj_final(Params P) { rj_full_final(P); }\n"},
    {"rj_seq", "RJ_ENTRY rj_seq(Params P) { rj_full_seq_stage(P); }\n"},
    {"rj_persist", "RJ_ENTRY rj_persist(Params P) { rj_full_persistent(P); }\n"},
    {"rj_persistv", "RJ_ENTRY rj_persistv(Params P) { rj_full_persistent_vec(P); }\n"},
    {"rj_seg1", "RJ_ENTRY rj_seg1(Params P) { rj_segmented(P, 1); }\n"},
    {"rj_seg32", "RJ_ENTRY rj_seg32(Params P) { rj_segmented(P, 32); }\n"},
    {"rj_seg1v", "RJ_ENTRY rj_seg1v(Params P) { rj_segmented_vec(P, 1); }\n"},
    {"rj_seg32v", "RJ_ENTRY rj_seg32v(Params P) { rj_segmented_vec(P, 32); }\n"},
    {"rj_segnv", "RJ_ENTRY rj_segnv(Params P) { rj_segmented_vec_lanes(P); }\n"},
    {"rj_segbv", "RJ_ENTRY rj_segbv(Params P) { rj_segmented_vec_block(P); }\n"},
    {"rj_seg1a", "RJ_ENTRY rj_seg1a(Params P) { rj_segmented_ranged_vec(P); }\n"},
    {"rj_seg1s", "RJ_ENTRY rj_seg1s(Params P) { rj_segmented_ranged_s(P); }\n"},
    {"rj_segb", "RJ_ENTRY rj_segb(Params P) { rj_segmented(P, RJ_BLOCK); }\n"},
    {"rj_count", "RJ_ENTRY rj_count(Params P) { rj_count_all(P); }\n"},
    {"rj_kends", "RJ_ENTRY rj_kends(Params P) { rj_key_ends(P); }\n"},
    {"rj_kscan", "RJ_ENTRY rj_kscan(Params P) { rj_key_scan(P); }\n"},
    {"rj_koffs", "RJ_ENTRY rj_koffs(Params P) { rj_key_offsets(P); }\n"},
    /* at most 64 registers: four blocks an SM, as many as its shared memory holds */
    {"rj_kfused", "extern \"C\" __global__ void __launch_bounds__(RJ_BLOCK, 4) rj_kfused(Params P) { rj_key_fused<false>(P); }\n"},
    /* the same two over 16-byte loads (vec_ok): a group of their own, so
     * that a pass compiles one of the two fused kernels, not both */
    {"rj_kendsv", "RJ_ENTRY rj_kendsv(Params P) { rj_key_ends(P); }\n"},
    {"rj_kfusedv", "extern \"C\" __global__ void __launch_bounds__(RJ_BLOCK, RJ_KMINB) rj_kfusedv(Params P) { rj_key_fused<true>(P); }\n"},
    {"rj_kpriv", "RJ_ENTRY rj_kpriv(Params P) { rj_keyed_private(P); }\n"},
    {"rj_kcomb", "RJ_ENTRY rj_kcomb(Params P) { rj_keyed_combine(P); }\n"},
    {"rj_split1", "RJ_ENTRY rj_split1(Params P) { rj_split_threads(P); }\n"},
    {"rj_splitb", "RJ_ENTRY rj_splitb(Params P) { rj_split_blocks(P); }\n"},
    {"rj_splitf", "RJ_ENTRY rj_splitf(Params P) { rj_split_final(P); }\n"},
};

static const char *const group_entries[CG_NGROUPS] = {   /* names, each NUL-terminated */
    [CG_G_MAP] = "rj_map\0",
    [CG_G_TREE] = "rj_block\0rj_final\0",
    [CG_G_SEQ] = "rj_seq\0rj_final\0",
    [CG_G_PERSIST] = "rj_persist\0",
    [CG_G_PERSISTV] = "rj_persistv\0",
    [CG_G_SEG1] = "rj_seg1\0",
    [CG_G_SEG32] = "rj_seg32\0",
    [CG_G_SEG1V] = "rj_seg1v\0",
    [CG_G_SEG32V] = "rj_seg32v\0",
    [CG_G_SEGB] = "rj_segb\0",
    [CG_G_COUNT] = "rj_count\0",
    [CG_G_KSORTED] = "rj_kends\0rj_kfused\0",
    [CG_G_KOFFS] = "rj_koffs\0",
    [CG_G_KPRIV] = "rj_kscan\0rj_kpriv\0rj_kcomb\0",
    [CG_G_SPLIT1] = "rj_split1\0rj_splitf\0",
    [CG_G_SPLITB] = "rj_splitb\0rj_splitf\0",
    [CG_G_KSORTEDV] = "rj_kendsv\0rj_kfusedv\0",
    [CG_G_SEGBV] = "rj_segbv\0",
    [CG_G_SEG1A] = "rj_seg1a\0",
    [CG_G_SEG1S] = "rj_seg1s\0",
    [CG_G_SEGNV] = "rj_segnv\0",
};

int cg_group_has(int group, const char *entry)
{
    if (group < 0 || group >= CG_NGROUPS) return 0;
    for (const char *n = group_entries[group]; *n; n += strlen(n) + 1)
        if (strcmp(n, entry) == 0) return 1;
    return 0;
}

int cg_group_of(const char *entry)
{
    for (int g = 0; g < CG_NGROUPS; g++)
        if (cg_group_has(g, entry)) return g;
    return -1;
}

int cg_group_usable(int group, const cg_kernel *k)
{
    int kind = k->kind;
    if (group < 0 || group >= CG_NGROUPS) return 0;
    if (kind == CG_MAP) return group == CG_G_MAP;
    if (group == CG_G_MAP) return 0;
    if (group == CG_G_PERSISTV) return k->vec > 0 && kind == CG_FULL;
    if (group == CG_G_SEG1V || group == CG_G_SEG32V || group == CG_G_SEGBV || group == CG_G_SEGNV)
        return k->vec > 0 && kind == CG_PARTIAL && !k->rvec;
    if (group == CG_G_SEG1A || group == CG_G_SEG1S) return k->rvec;
    if (group == CG_G_KSORTEDV) return k->vec > 0 && kind == CG_KEYED;
    if (group == CG_G_KSORTED || group == CG_G_KOFFS || group == CG_G_KPRIV) return kind == CG_KEYED;
    if (group == CG_G_SPLIT1 || group == CG_G_SPLITB) return kind == CG_PARTIAL || kind == CG_KEYED;
    return 1;
}

void cg_add_group(util_buf *o, int group, const cg_kernel *k)
{
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        int mine = 0;
        if (group == CG_ALL_GROUPS) {
            mine = cg_group_usable(cg_group_of(entries[i].name), k);
        } else if (cg_group_usable(group, k)) {
            for (const char *n = group_entries[group]; *n && !mine; n += strlen(n) + 1)
                mine = strcmp(n, entries[i].name) == 0;
        }
        if (mine) util_buf_puts(o, entries[i].src);
    }
}

/* Elements each thread loads before folding any (rj_fold_batch).  Tuned on
 * the H200 (bench/sweep.sh REDJIT_UNROLL, 2026-11-22, 2^28 f32 unless noted; us at
 * 2 / 4 / 8): one load an element and no ranged index gains from 8 (sum
 * 344 / 261 / 246, argmax 497 / 418 / 362, row sums 285 / 284 / 254, column
 * sums 254 / 289 / 252); two loads (a dot product: 491 / 485 / 505) and
 * ranges (one 2^26 segment: 165 / 139 / 163) kept 4 while every element
 * checked its subscript.  Partial passes check ranged subscripts once an
 * output (emit_range_checks), and CSR ranges gain from 8 too (2026-11-23,
 * 2^26 f32, us at 4 / 8: one segment 111.4 / 87.2, lengths 10..50 137.3 /
 * 115.8, rows of 1024 75.2 / 72.5, all of length 3 149.2 / 154.0); full
 * reductions over ranges, and ranged passes whose element code still checks
 * a subscript at every element (x[k-1], x[2*k]: elem_checks), keep 4.  REDJIT_UNROLL (1, 2, 4, 8 or 16)
 * overrides it for sweeps: the source, and so the cache key, changes with
 * it. */
static int unroll(const cg_kernel *k)
{
    const char *u = getenv("REDJIT_UNROLL");
    int v = u ? atoi(u) : 0;
    if (v == 1 || v == 2 || v == 4 || v == 8 || v == 16) return v;
    return k->nloads == 1 && !k->loads_overflow && (!k->ranged || (k->kind == CG_PARTIAL && !k->elem_checks)) ? 8 : 4;
}

/* 16-byte loads of each array a thread has in flight in rj_run_v.  Tuned
 * on the H200 (bench/sweep.sh REDJIT_VUNROLL, 2026-11-23, 2^28 unless noted;
 * us at 2 / 4 / 8): sum f32 242.4 / 241.3 / 240.5 (2^24: 25.3 / 26.1 /
 * 25.3), sum f64 470.9 / 470.2 / 472.9, argmax 258.7 / 256.0 / 266.4, a dot
 * product (two arrays) 470.9 / 471.2 / 470.8: as fast at 2, which costs
 * NVRTC least (sum(x)'s persistent kernel, CPU ms, least of 9 compiles: 174
 * at 2, 196 at 4, 208 at 1, where NVVM unrolls the loop itself; the scalar
 * kernel 166).  REDJIT_VUNROLL (1, 2, 4 or 8) overrides it for sweeps. */
static int vunroll(void)
{
    const char *u = getenv("REDJIT_VUNROLL");
    int v = u ? atoi(u) : 0;
    if (v == 1 || v == 2 || v == 4 || v == 8) return v;
    return 2;
}

/* 16-byte loads of each array a lane of rj_kfusedv takes a tile
 * (rj_reduce.cuh, RJ_KVE): 0, the default, lets the kernel choose from its
 * accumulator's and key's sizes (4, the most, for f32 values and i32 keys:
 * 16 elements a lane).  Measured on the H200 (bench/sweep.sh REDJIT_KVT,
 * 2026-11-24, 2^26 f32 values, i32 keys, us at off / 2 / 4): one segment
 * 157.7 / 147.1 / 152.3, lengths 10..50 289.4 / 205.8 / 179.6, all of
 * length 3 289.7 / 208.6 / 219.9, rows of 1024 191.7 / 152.8 / 161.2;
 * with the keys checked once a lane and 8-byte slots (at 3 blocks an SM,
 * the same day): 161.7 / 146.5 / 148.7, 263.9 / 181.7 / 164.0, 279.3 /
 * 192.8 / 195.4, 189.8 / 153.0 / 154.6.  REDJIT_KVT (1, 2, 4 or 8)
 * overrides it for sweeps, and "off" (-1) keeps keyed passes on rj_kfused's
 * scalar loads. */
static int kvt(void)
{
    const char *u = getenv("REDJIT_KVT");
    if (u && strcmp(u, "off") == 0) return -1;
    int v = u ? atoi(u) : 0;
    return v == 1 || v == 2 || v == 4 || v == 8 ? v : 0;
}

/* rj_kfusedv issues a tile's loads as soon as the tile before it is
 * converted, so that they are in flight while it folds (RJ_KDB, 1 unless
 * REDJIT_KDB=0, for sweeps).  Measured on the H200 (2026-11-24, 2^26 f32
 * values, i32 keys, us for one segment / lengths 10..50 / all of length 3
 * / rows of 1024, two runs each): loaded when it comes, 3 blocks an SM,
 * 147.3-149.0 / 164.8-166.1 / 192.4-198.1 / 152.2-152.8; issued ahead,
 * 2 blocks an SM (kminb()), 143.4-145.9 / 161.9-162.2 / 184.1-186.1 /
 * 144.7-146.8; issued ahead at 3 blocks an SM, 239.2 / 260.1 / 265.3 /
 * 257.7 (80 registers: it spilled); 8 elements a lane, 3 blocks an SM,
 * 143.1-144.3 / 163.4-164.7 / 180.8-182.0 / 144.5-149.1, but that spilled
 * for 8-byte values and for 12-byte accumulators.  Asking L2 for the
 * next tile (prefetch.global.L2, one or two tiles ahead) instead was
 * slower: 187.5 / 198.2 / 219.0 / 191.6 at one.  Tiles staged in dynamic
 * shared memory instead (2026-11-26, the same four cases, same calls,
 * registers 135.1-137.7 / 151.6-153.5 / 178.5-181.1 / 138.7-140.8):
 * cp.async, each lane its own vectors, two or three stages, 278.3-281.1 /
 * 291.8-298.7 / 307.0-314.4 / 288.4-290.8 (.cg fetched every sector
 * twice); cp.async coalesced across the warp (swizzled, no bank
 * conflict), 166.6-170.0 / 186.2-190.6 / 212.4-218.0 / 178.2-180.0 (ncu:
 * one segment 160 us, DRAM 69% busy, issue active 18%); the bulk copy
 * engine, a copy an array a tile on an mbarrier, two stages 137.1-138.5 /
 * 166.3-167.1 / 211.1-211.5 / 146.9-147.4, three (one block an SM)
 * 137.1-137.3 / 225.6-225.9 / 258.2-258.6 / 184.9-185.0.  Delivery was
 * never what held the short runs: their fold, at 16 warps an SM, is. */
static int kdb(void)
{
    const char *u = getenv("REDJIT_KDB");
    return !(u && strcmp(u, "0") == 0);
}

/* Blocks an SM rj_kfusedv is compiled for (__launch_bounds__): 2 allows
 * 128 registers, which its two tiles in flight (kdb()) need: 96 to 119
 * for the kv_* cases' kernels, none spilling, where at 3 (80) they
 * spilled 12 to 238 bytes.  Loading each tile when it came, 3 did best
 * (H200, bench/sweep.sh REDJIT_KMINB, 2026-11-24, 2^26 f32 values, i32
 * keys; us at 3 / 4: one segment 151.0 / 152.1, lengths 10..50 179.5 /
 * 173.2 and 179.5 / 179.6, all of length 3 212.5 / 219.9, rows of 1024
 * 156.9 / 161.2).  REDJIT_KMINB (1 to 8) overrides it for sweeps. */
static int kminb(void)
{
    const char *u = getenv("REDJIT_KMINB");
    int v = u ? atoi(u) : 0;
    return v >= 1 && v <= 8 ? v : 2;
}

/* The prelude's optional groups (rj_prelude.cuh) and the names that need
 * each: a group is compiled only when the generated code calls one of them,
 * which saves NVRTC's front end 5 to 7 ms a compile.  A name is matched with
 * its "(", so rj_to_i32( is not taken for another; calls from rj_reduce.cuh
 * would not be seen, and it makes none. */
static const char *const half_fns[] = {"rj_f16_to_f32(", "rj_bf16_to_f32(", "rj_round_f16(", "rj_round_bf16(", NULL};
static const char *const sat_fns[] = {"rj_to_i32(", "rj_to_i64(", "rj_to_u32(", "rj_to_u64(", NULL};
static const char *const math_fns[] = {"rj_mod(", "rj_sqrt(", "rj_exp(", "rj_log(", "rj_log2(", "rj_log10(",
                                       "rj_sin(", "rj_cos(", "rj_tan(", "rj_tanh(", "rj_floor(", "rj_ceil(",
                                       "rj_round(", "rj_pow(", "rj_hypot(", "rj_fma(", NULL};

static int calls_any(const char *text, const char *const *names)
{
    for (; *names; names++)
        if (strstr(text, *names)) return 1;
    return 0;
}

int cg_generate(const plan *p, int pi, util_arena *a, cg_kernel *out, util_diag *diag)
{
    memset(out, 0, sizeof *out);
    util_buf_init(&out->src);
    gen g = {.p = p, .ps = &p->passes[pi], .k = out, .o = &out->src, .nir = p->nir, .pi = pi};
    g.done = util_arena_alloc(a, (size_t)p->nir + 1);
    g.seen = util_arena_alloc(a, (size_t)p->nir + 1);
    if (!g.done || !g.seen) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    int rc = layout(&g, a, diag);
    if (rc) return rc;
    const plan_pass *ps = g.ps;
    for (int q = 0; q < ps->nreds; q++) out->ordered |= ps->reds[q].rop == ROP_USER && ps->reds[q].ordered;
    out->kind = !ps->nreds ? CG_MAP : ps->key ? CG_KEYED : ps->nfree ? CG_PARTIAL : CG_FULL;

    /* the generated part first, so the prelude's optional groups it calls are known */
    util_buf body;
    util_buf_init(&body);
    g.o = &body;
    if (!ps->nreds) {
        emit_map_kernel(&g);
    } else {
        emit_acc_struct(&g);
        emit_user_ops(&g);
        emit_acc_funcs(&g);
        emit_out_range(&g);
        emit_acc_elem(&g);
        emit_acc_elem_v(&g);
        emit_acc_write(&g);
        if (ps->key) emit_key_at(&g);
    }
    util_buf *o = &out->src;
    const char *b = util_buf_str(&body);
    util_buf_puts(o, "// generated by redjit: one pass of a reduction plan\n");
    util_buf_printf(o, "#define RJ_NPARAMS %d\n#define RJ_NRED %d\n#define RJ_ORDERED %d\n#define RJ_KEYED %d\n"
                       "#define RJ_BLOCK 256\n#define RJ_INNER 1024\n#define RJ_ERR_INDEX %d\n",
                    out->lay.nparams, ps->nred, out->ordered, ps->key != NULL, RED_ERR_INDEX);
    /* int keys: 32-bit in rj_kfused's tiles */
    const ir *kx = ps->key;
    while (kx && kx->kind == IR_CAST && kx->type == CT_I64) kx = kx->args[0];   /* the checker widens keys */
    util_buf_printf(o, "#define RJ_KEY32 %d\n#define RJ_RVEC %d\n", kx && (kx->type == CT_I32 || kx->type == CT_BOOL),
                    out->rvec);
    util_buf_printf(o, "#define RJ_HALF %d\n#define RJ_SAT %d\n#define RJ_MATH %d\n", calls_any(b, half_fns),
                    calls_any(b, sat_fns), calls_any(b, math_fns));
    util_buf_puts(o, rj_prelude_cuh);
    util_buf_puts(o, b);
    int failed = body.failed;
    util_buf_free(&body);
    if (ps->nreds) {
        /* after acc_elem, which records the loads */
        util_buf_printf(o, "#define RJ_UNROLL %d\n", unroll(out));
        /* argmin and argmax alone: elements folded straight into the
         * running accumulator, in order (see rj_fold_batch) */
        int direct = ps->nreds > 0;
        for (int q = 0; q < ps->nreds; q++) direct &= is_arg(ps->reds[q].rop);
        util_buf_printf(o, "#define RJ_FOLD_DIRECT %d\n", direct);
        out->arg = direct;
        out->vec_unroll = vunroll();
        util_buf_printf(o, "#define RJ_VEC %d\n#define RJ_VUNROLL %d\n#define RJ_KVT %d\n#define RJ_KMINB %d\n", out->vec,
                        out->vec_unroll, ps->key && kvt() > 0 ? kvt() : 0, kminb());
        util_buf_printf(o, "#define RJ_KDB %d\n", ps->key && out->vec ? kdb() : 0);
        util_buf_puts(o, rj_reduce_cuh);
        util_buf_puts(o, "#define RJ_ENTRY extern \"C\" __global__ void __launch_bounds__(RJ_BLOCK)\n");
    }
    if (o->failed || failed) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    return 0;
}
