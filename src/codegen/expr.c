/*
 * expr.c -- IR expressions as CUDA: one single-assignment statement per IR
 * node, so the hash-consed IR's sharing becomes common subexpressions in the
 * kernel; loads carry their subscript checks (or none, where proven).
 */
#include "gen.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char *const cg_tname[CT_COUNT] = {"bool", "int", "long long", "unsigned",
                                        "unsigned long long", "float", "double"};

void cg_literal(util_buf *o, int type, plan_value v)
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


void cg_ref(gen *g, const ir *x)
{
    if (x->kind == IR_CONST) {
        cg_literal(g->o, x->type, x->c);
        return;
    }
    char nm[32];
    name_of(g, x, nm, sizeof nm);
    util_buf_puts(g->o, nm);
}

/* Element `off` of array `base` as the value of its dtype: the element's C type, and what
 * wraps the element (a conversion) before and after.  ro: through the read-only path
 * (__ldg), for arrays nothing writes while the kernel runs. */
static void emit_load_value(util_buf *o, red_dtype t, int base, const char *off, int ro)
{
    const char *ty = "float", *pre = "", *post = "";
    switch (t) {
    case RED_BOOL: ty = "rj_u8", pre = "(", post = " != 0)"; break;
    case RED_I32: ty = "int"; break;
    case RED_I64: ty = "long long"; break;
    case RED_U32: ty = "unsigned"; break;
    case RED_U64: ty = "unsigned long long"; break;
    case RED_I8: ty = "signed char"; break;
    case RED_U8: ty = "unsigned char"; break;
    case RED_I16: ty = "short"; break;
    case RED_U16: ty = "unsigned short"; break;
    case RED_F16: ty = "rj_u16", pre = "rj_f16_to_f32(", post = ")"; break;
    case RED_BF16: ty = "rj_u16", pre = "rj_bf16_to_f32(", post = ")"; break;
    case RED_F32: ty = "float"; break;
    case RED_F64: ty = "double"; break;
    case RED_C64: case RED_C128: break;   /* bound as [..., 2] arrays of their parts */
    }
    if (ro) util_buf_printf(o, "%s__ldg(&((const %s *)P.v[%d])[%s])%s", pre, ty, base, off, post);
    else util_buf_printf(o, "%s((const %s *)P.v[%d])[%s]%s", pre, ty, base, off, post);
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
    case OP_ATAN2: return "rj_atan2";
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
        cg_ref(g, a);
        util_buf_puts(o, " != 0)");
    } else if (CT_IS_FLOAT(from) && !CT_IS_FLOAT(to)) {
        static const char *const f[CT_COUNT] = {NULL, "rj_to_i32", "rj_to_i64", "rj_to_u32", "rj_to_u64"};
        util_buf_printf(o, "%s((double)", f[to]);
        cg_ref(g, a);
        util_buf_puts(o, ")");
    } else {
        util_buf_printf(o, "(%s)(", cg_tname[to]);
        cg_ref(g, a);
        util_buf_puts(o, ")");
    }
}

/* Whether subscript s is `v` or `v + c` for a ranged reduced index v of the
 * pass (v is its position among the reduced ones): over one output's
 * elements it runs over [lo[v] + c, lo[v] + c + sz[v]). */
int cg_ranged_subscript(const gen *g, const ir *s, int *v, int64_t *c)
{
    s = plan_index_plus(s, c);
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
int cg_proven_in_range(gen *g, const ir *x, int d)
{
    if (x->slot < 0) return 0;
    int64_t c;
    int rv;
    if (g->hoisted && g->in_elem && cg_ranged_subscript(g, x->args[d], &rv, &c)) return 1;
    const ir *s = plan_index_plus(x->args[d], &c);
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

/* A load's subscripts, checked, into its element offset o<id> (elements of
 * the array, not bytes). */
static void emit_load_offset(gen *g, const ir *x)
{
    util_buf *o = g->o;
    for (int d = 0; d < x->nargs; d++) cg_emit(g, x->args[d]);
    if (g->in_elem && x->slot >= 0) record_load(g, x);
    int base = cg_buf_base(g, x->slot), nd = x->nargs;
    char off[64];
    snprintf(off, sizeof off, "o%d", x->id);
    util_buf_printf(o, "    long long %s = 0;\n", off);
    for (int d = 0; d < nd; d++) {
        util_buf_printf(o, "    { long long s = ");
        cg_ref(g, x->args[d]);
        if (cg_proven_in_range(g, x, d))
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
}

int cg_load_is_plain(gen *g, const ir *x)
{
    if (x->kind != IR_LOAD) return 0;
    red_dtype t = cg_buf_dtype(g, x->slot);
    return plan_ct_of_dtype(t) == x->type && (int)red_dtype_size(t) == plan_ct_size(x->type) &&
           (plan_ct_size(x->type) == 4 || plan_ct_size(x->type) == 8);
}

void cg_emit_load_async(gen *g, const ir *x, const char *dst)
{
    emit_load_offset(g, x);
    util_buf_printf(g->o, "    rj_cp_async(%s, (const %s *)P.v[%d] + o%d);\n", dst, cg_tname[x->type],
                    cg_buf_base(g, x->slot), x->id);
}

void cg_emit(gen *g, const ir *x)
{
    if (x->kind == IR_CONST || x->kind == IR_INDEX) return;
    if (x->kind == IR_PARAM && g->in_user) return;
    if (g->done[x->id]) return;
    g->done[x->id] = 1;
    util_buf *o = g->o;
    if (x->kind == IR_LOAD) {
        emit_load_offset(g, x);
        int base = cg_buf_base(g, x->slot);
        char off[64];
        snprintf(off, sizeof off, "o%d", x->id);
        util_buf_printf(o, "    const %s v%d = ", cg_tname[x->type], x->id);
        emit_load_value(o, cg_buf_dtype(g, x->slot), base, off, g->ro_loads && x->slot >= 0);
        util_buf_puts(o, ";\n");
        return;
    }
    for (int i = 0; i < x->nargs; i++) cg_emit(g, x->args[i]);
    util_buf_printf(o, "    const %s v%d = ", cg_tname[x->type], x->id);
    switch (x->kind) {
    case IR_SCALAR: {
        int s = g->k->lay.scalar_slot[x->slot];
        switch (x->type) {
        case CT_BOOL: util_buf_printf(o, "(P.v[%d] != 0)", s); break;
        case CT_F32: util_buf_printf(o, "(float)__longlong_as_double(P.v[%d])", s); break;
        case CT_F64: util_buf_printf(o, "__longlong_as_double(P.v[%d])", s); break;
        default: util_buf_printf(o, "(%s)P.v[%d]", cg_tname[x->type], s);
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
            cg_ref(g, x->args[0]);
            util_buf_puts(o, ")");
        } else if (x->op == OP_SELECT) {
            util_buf_puts(o, "(");
            cg_ref(g, x->args[0]);
            util_buf_puts(o, " ? ");
            cg_ref(g, x->args[1]);
            util_buf_puts(o, " : ");
            cg_ref(g, x->args[2]);
            util_buf_puts(o, ")");
        } else if (x->op == OP_BNOT && x->type == CT_BOOL) {
            util_buf_puts(o, "(!");
            cg_ref(g, x->args[0]);
            util_buf_puts(o, ")");
        } else if (infix[x->op]) {
            util_buf_printf(o, "(%s)(", cg_tname[x->type]);
            cg_ref(g, x->args[0]);
            util_buf_printf(o, " %s ", infix[x->op]);
            cg_ref(g, x->args[1]);
            util_buf_puts(o, ")");
        } else {
            util_buf_printf(o, "%s(", f ? f : "rj_unknown");
            for (int i = 0; i < x->nargs; i++) {
                if (i) util_buf_puts(o, ", ");
                cg_ref(g, x->args[i]);
            }
            util_buf_puts(o, ")");
        }
        break;
    }
    default: util_buf_puts(o, "0"); break;
    }
    util_buf_puts(o, ";\n");
}

void cg_begin_function(gen *g) { memset(g->done, 0, (size_t)g->nir + 1); }
