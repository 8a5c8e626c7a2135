/*
 * ops.c -- types and the lowering of operators, conditionals, built-in
 * functions and casts: the common type of operands (docs/language.md,
 * Promotion) and the IR each operation computes in it.
 */
#include "check_internal.h"

#include <stdlib.h>

/* ---- types ---------------------------------------------------------------- */

/* Common type of two typed operands (docs/language.md, Promotion). */
static int promote(int x, int y)
{
    if (x == y) return x == CT_BOOL ? CT_BOOL : x;
    if (x == CT_BOOL) return y;
    if (y == CT_BOOL) return x;
    if (CT_IS_FLOAT(x) || CT_IS_FLOAT(y)) {
        if (x == CT_F64 || y == CT_F64) return CT_F64;
        return CT_F32;
    }
    /* two different integer types */
    int sx = CT_IS_SIGNED(x), sy = CT_IS_SIGNED(y);
    int wx = plan_ct_size(x), wy = plan_ct_size(y);
    if (sx == sy) return wx >= wy ? x : y;
    int w = wx > wy ? wx : wy;
    int uw = sx ? wy : wx;   /* width of the unsigned one */
    if (uw >= w) return CT_I64; /* same width (u32+i32) or u64 with signed */
    return sx ? x : y;          /* the signed one is wider */
}

/* Type both operands of a binary operation compute in, honouring weak
 * (literal) operands, and the weakness of the result. */
static int common(const val *x, const val *y, int *weak)
{
    int tx = x->c[0]->type, ty = y->c[0]->type;
    *weak = 0;
    if (x->weak && y->weak) {
        *weak = (x->weak == 2 || y->weak == 2) ? 2 : 1;
        return *weak == 2 ? CT_F64 : CT_I64;
    }
    if (x->weak || y->weak) {
        int w = x->weak ? x->weak : y->weak;
        int t = x->weak ? ty : tx;
        if (w == 1) return t == CT_BOOL ? CT_I64 : t;
        return CT_IS_FLOAT(t) ? t : CT_F64;
    }
    return promote(tx, ty);
}

int ck_single(ck *c, const ast_node *n, const val *v)
{
    if (v->cplx)
        return ck_err_at(c, n->pos, RED_ERR_TYPE,
                         "a complex value cannot be used here: take real(z), imag(z) or abs(z)");
    if (v->tuple)
        return ck_err_at(c, n->pos, RED_ERR_TYPE,
                         "a tuple of %d values cannot be used here; select a field with .0 .. .%d",
                         v->n, v->n - 1);
    return 0;
}

/* ---- operators -------------------------------------------------------------- */

int ck_lower_unary(ck *c, scope *s, const ast_node *n, val *out)
{
    val x;
    TRY(ck_lower(c, s, n->args[0], &x));
    if (x.cplx) return ck_cplx_unary(c, n, &x, out);
    TRY(ck_single(c, n->args[0], &x));
    int t = x.c[0]->type;
    switch (n->op) {
    case '+':
        *out = x;
        return 0;
    case '-':
        if (t == CT_BOOL) t = CT_I32;
        *out = ck_mk(ck_op1(c, OP_NEG, t, ir_cast(c->b, t, x.c[0])), x.weak);
        if (x.weak && x.c[0]->kind == IR_CONST) {
            /* fold the literal so `-1` stays a weak constant */
            plan_value v = x.c[0]->c;
            if (CT_IS_FLOAT(t)) v.f = -v.f;
            else v.u = 0 - v.u;
            out->c[0] = ir_const(c->b, t, v);
        }
        return 0;
    case '!':
        *out = ck_mk(ck_op1(c, OP_NOT, CT_BOOL, ck_to_bool(c, x.c[0])), 0);
        return 0;
    case '~':
        if (CT_IS_FLOAT(t))
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "'~' needs an integer or bool operand, not %s",
                             plan_ct_name(t));
        if (t == CT_BOOL) *out = ck_mk(ck_op1(c, OP_NOT, CT_BOOL, x.c[0]), 0);
        else *out = ck_mk(ck_op1(c, OP_BNOT, t, x.c[0]), x.weak);
        return 0;
    }
    return ck_err_at(c, n->pos, RED_ERR_INTERNAL, "unknown unary operator");
}

static const struct {
    int bop, op;
    const char *text;
} binops[] = {
    {BOP_ADD, OP_ADD, "+"},   {BOP_SUB, OP_SUB, "-"},   {BOP_MUL, OP_MUL, "*"},
    {BOP_DIV, OP_DIV, "/"},   {BOP_MOD, OP_MOD, "%"},   {BOP_BAND, OP_BAND, "&"},
    {BOP_BOR, OP_BOR, "|"},   {BOP_BXOR, OP_BXOR, "^"}, {BOP_SHL, OP_SHL, "<<"},
    {BOP_SHR, OP_SHR, ">>"},  {BOP_LT, OP_LT, "<"},     {BOP_LE, OP_LE, "<="},
    {BOP_GT, OP_GT, ">"},     {BOP_GE, OP_GE, ">="},    {BOP_EQ, OP_EQ, "=="},
    {BOP_NE, OP_NE, "!="},    {BOP_LAND, OP_LAND, "&&"}, {BOP_LOR, OP_LOR, "||"},
    {BOP_POW, OP_POW, "**"},
};

/* Float math (sqrt, exp, ..., pow, hypot, fma) in the common type of the
 * arguments; integers go through f64. */
static int float_math(ck *c, int op, int nargs, const val *a, val *out)
{
    val acc = a[0];
    int weak = a[0].weak;
    for (int k = 1; k < nargs; k++) {
        int ft2 = common(&acc, &a[k], &weak);
        acc = ck_mk(ir_const_i(c->b, ft2, 0), weak);
    }
    int ft = acc.c[0]->type;
    if (!CT_IS_FLOAT(ft)) ft = CT_F64;
    ir *args[3];
    for (int k = 0; k < nargs; k++) args[k] = ir_cast(c->b, ft, a[k].c[0]);
    *out = ck_mk(ir_op(c->b, op, ft, nargs, args), weak ? 2 : 0);
    return 0;
}

static int binary(ck *c, const ast_node *n, int op, const char *text, val x, val y, val *out)
{
    if (op == OP_POW) {   /* a ** b is pow(a, b) */
        val a[2] = {x, y};
        return float_math(c, op, 2, a, out);
    }
    if (op == OP_LAND || op == OP_LOR) {
        *out = ck_mk(ck_op2(c, op, CT_BOOL, ck_to_bool(c, x.c[0]), ck_to_bool(c, y.c[0])), 0);
        return 0;
    }
    int weak;
    int t = common(&x, &y, &weak);
    if (op == OP_SHL || op == OP_SHR) {
        int tl = x.c[0]->type, tr = y.c[0]->type;
        if (!CT_IS_INT(tl) || !CT_IS_INT(tr))
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "'%s' needs integer operands, not %s and %s",
                             text, plan_ct_name(tl), plan_ct_name(tr));
        t = x.weak && !y.weak ? CT_I64 : tl;
        ir *cnt = ir_cast(c->b, t, y.c[0]);
        *out = ck_mk(ck_op2(c, op, t, ir_cast(c->b, t, x.c[0]), cnt), x.weak);
        return 0;
    }
    if (op == OP_BAND || op == OP_BOR || op == OP_BXOR) {
        if (CT_IS_FLOAT(x.c[0]->type) || CT_IS_FLOAT(y.c[0]->type) || CT_IS_FLOAT(t))
            return ck_err_at(c, n->pos, RED_ERR_TYPE,
                             "bit operation '%s' on %s: it needs integer or bool operands", text,
                             plan_ct_name(CT_IS_FLOAT(x.c[0]->type) ? x.c[0]->type
                                       : CT_IS_FLOAT(y.c[0]->type) ? y.c[0]->type : t));
    } else if (t == CT_BOOL && op >= OP_ADD && op <= OP_MOD) {
        t = CT_I32;   /* bool arithmetic is int arithmetic */
    }
    ir *a = ir_cast(c->b, t, x.c[0]), *b2 = ir_cast(c->b, t, y.c[0]);
    if (op >= OP_LT && op <= OP_NE) {
        *out = ck_mk(ck_op2(c, op, CT_BOOL, a, b2), 0);
        return 0;
    }
    *out = ck_mk(ck_op2(c, op, t, a, b2), weak);
    return 0;
}

/* x op (the right operand of n): one step of a chain. */
static int binary_step(ck *c, scope *s, const ast_node *n, val x, val *out)
{
    val y;
    TRY(ck_lower(c, s, n->args[1], &y));
    int op = -1;
    const char *text = "?";
    for (size_t i = 0; i < sizeof binops / sizeof binops[0]; i++)
        if (binops[i].bop == n->op) {
            op = binops[i].op;
            text = binops[i].text;
        }
    if (op < 0) return ck_err_at(c, n->pos, RED_ERR_INTERNAL, "unknown binary operator");
    if (x.cplx || y.cplx) {
        TRY(ck_cplx_binary(c, n, op, text, x, y, out));
        return ck_check_chain(c, n->name_pos, out);
    }
    if (x.tuple || y.tuple)
        return ck_err_at(c, (x.tuple ? n->args[0] : n->args[1])->pos, RED_ERR_TYPE,
                         "'%s' cannot be applied to a tuple; select a field with .0, .1, ...", text);
    TRY(binary(c, n, op, text, x, y, out));
    return ck_check_chain(c, n->name_pos, out);
}

/* A chain of binary operators down their left operands, ((a+b)+c)+..., is
 * lowered in a loop: its length is not nesting (ast.h) and may be far more
 * than the C stack holds frames of ck_lower().  Its IR is as deep as it is
 * long, which ck_check_chain bounds at each step. */
int ck_lower_binary(ck *c, scope *s, const ast_node *n, val *out)
{
    int len = 0;
    const ast_node *m = n;
    for (; m->kind == AST_BINARY; m = m->args[0]) len++;
    const ast_node **spine = malloc((size_t)len * sizeof *spine);
    if (!spine) return ck_nomem(c);
    m = n;
    for (int k = 0; k < len; k++, m = m->args[0]) spine[k] = m;
    val x;
    int rc = ck_lower(c, s, m, &x);
    for (int k = len - 1; k >= 0 && !rc; k--) rc = binary_step(c, s, spine[k], x, &x);
    free(spine);
    if (!rc) *out = x;
    return rc;
}

int ck_lower_cond(ck *c, scope *s, const ast_node *n, val *out)
{
    val k, x, y;
    TRY(ck_lower(c, s, n->args[0], &k));
    TRY(ck_single(c, n->args[0], &k));
    TRY(ck_lower(c, s, n->args[1], &x));
    TRY(ck_lower(c, s, n->args[2], &y));
    if (x.cplx || y.cplx) {
        if (x.tuple || y.tuple)
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "the branches of '?:' are a tuple and a complex value");
        return ck_cplx_cond(c, k.c[0], x, y, out);
    }
    if (x.tuple || y.tuple) {
        if (x.n != y.n)
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "the branches of '?:' have %d and %d fields", x.n,
                             y.n);
    }
    val r = {.n = x.n, .tuple = x.tuple};
    for (int i = 0; i < x.n; i++) {
        val xi = ck_mk(x.c[i], x.weak), yi = ck_mk(y.c[i], y.weak);
        int weak;
        int t = common(&xi, &yi, &weak);
        ir *a[3] = {ck_to_bool(c, k.c[0]), ir_cast(c->b, t, x.c[i]), ir_cast(c->b, t, y.c[i])};
        r.c[i] = ir_op(c->b, OP_SELECT, t, 3, a);
        r.weak = weak;
    }
    *out = r;
    return 0;
}

/* ---- functions and casts ---------------------------------------------------- */

static const struct {
    const char *name;
    int nargs, op;
    int kind;   /* 0 float math, 1 abs, 2 rounding, 3 predicate, 4 min/max, 5 fma */
} funcs[] = {
    {"abs", 1, OP_ABS, 1},       {"sqrt", 1, OP_SQRT, 0},   {"exp", 1, OP_EXP, 0},
    {"log", 1, OP_LOG, 0},       {"log2", 1, OP_LOG2, 0},   {"log10", 1, OP_LOG10, 0},
    {"sin", 1, OP_SIN, 0},       {"cos", 1, OP_COS, 0},     {"tan", 1, OP_TAN, 0},
    {"tanh", 1, OP_TANH, 0},     {"floor", 1, OP_FLOOR, 2}, {"ceil", 1, OP_CEIL, 2},
    {"round", 1, OP_ROUND, 2},   {"isnan", 1, OP_ISNAN, 3}, {"isfinite", 1, OP_ISFINITE, 3},
    {"pow", 2, OP_POW, 0},       {"hypot", 2, OP_HYPOT, 0}, {"atan2", 2, OP_ATAN2, 0},
    {"fma", 3, OP_FMA, 5},
    {"min", 2, OP_MIN, 4},       {"max", 2, OP_MAX, 4},
};

static const struct {
    const char *name;
    red_dtype dtype;
} casts[] = {{"bool", RED_BOOL}, {"i32", RED_I32}, {"i64", RED_I64}, {"u32", RED_U32},
             {"u64", RED_U64},   {"f16", RED_F16}, {"bf16", RED_BF16}, {"f32", RED_F32},
             {"f64", RED_F64}, {"i8", RED_I8},   {"u8", RED_U8},     {"i16", RED_I16},
             {"u16", RED_U16}};

/* i8(x) .. u16(x): computed in i32, the value is x's in the narrow type.  A
 * float truncates and saturates at the type's limits (NaN gives 0, as min and
 * max pass it on and the cast to i32 makes it 0); an integer wraps, kept to
 * its low bits and, for the signed types, sign-extended from the top one. */
static ir *narrow_cast(ck *c, red_dtype t, ir *x)
{
    int bits = t == RED_I8 || t == RED_U8 ? 8 : 16, sign = t == RED_I8 || t == RED_I16;
    int64_t lo = sign ? -((int64_t)1 << (bits - 1)) : 0;
    int64_t hi = sign ? ((int64_t)1 << (bits - 1)) - 1 : ((int64_t)1 << bits) - 1;
    if (x->type == CT_F32 || x->type == CT_F64) {
        x = ck_op2(c, OP_MAX, x->type, x, ir_const_f(c->b, x->type, (double)lo));
        x = ck_op2(c, OP_MIN, x->type, x, ir_const_f(c->b, x->type, (double)hi));
        return ir_cast(c->b, CT_I32, x);
    }
    ir *r = ir_cast(c->b, CT_I32, x);
    if (x->type == CT_BOOL) return r;
    r = ck_op2(c, OP_BAND, CT_I32, r, ir_const_i(c->b, CT_I32, ((int64_t)1 << bits) - 1));
    if (!sign) return r;
    int64_t top = (int64_t)1 << (bits - 1);
    r = ck_op2(c, OP_BXOR, CT_I32, r, ir_const_i(c->b, CT_I32, top));
    return ck_op2(c, OP_SUB, CT_I32, r, ir_const_i(c->b, CT_I32, top));
}

/* complex.c's: real(z) imag(z) conj(z) arg(z), and the complex casts */
static const char *const cplx_fns[] = {"real", "imag", "conj", "arg", "c64", "c128"};

static const char *const red_names[] = {"sum",    "prod",    "min",    "max",    "any",    "all",   "count",
                                        "mean",   "argmin",  "argmax", "nansum", "nanprod", "nanmin",
                                        "nanmax", "nanmean", "nanargmin", "nanargmax"};

/* The scan shorthands, each an inclusive scan of a reduction's form. */
static const struct {
    const char *name, *form;
} scan_names[] = {{"cumsum", "sum"},       {"cumprod", "prod"},       {"cummin", "min"},
                  {"cummax", "max"},       {"cumcount", "count"},     {"nancumsum", "nansum"},
                  {"nancumprod", "nanprod"}};

int ck_lower_call(ck *c, scope *s, const ast_node *n, val *out)
{
    const char *name = n->name;
    for (size_t i = 0; i < sizeof scan_names / sizeof scan_names[0]; i++) {
        if (strcmp(name, scan_names[i].name) != 0) continue;
        if (n->nargs != 1)
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "%s() takes 1 argument (the scanned expression), %d given",
                             name, n->nargs);
        return ck_lower_scan(c, s, n, scan_names[i].form, AST_SCAN, out);
    }
    int is_red = 0;
    for (size_t i = 0; i < sizeof red_names / sizeof red_names[0]; i++)
        if (strcmp(name, red_names[i]) == 0) is_red = 1;
    if (is_red && !((strcmp(name, "min") == 0 || strcmp(name, "max") == 0) && n->nargs == 2 &&
                    !n->has_over && !n->by)) {
        if (n->nargs != 1)
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "%s() takes 1 argument (the reduced expression), "
                             "%d given%s", name, n->nargs,
                             strcmp(name, "min") == 0 || strcmp(name, "max") == 0
                              ? "; the elementwise form takes 2" : "");
        return ck_lower_reduce(c, s, n, name, out);
    }
    if (n->has_over || n->by)
        return ck_err_at(c, n->name_pos, RED_ERR_TYPE, "'%s' is not a reduction: it cannot take '%s'",
                         name, n->has_over ? "over" : "by");
    for (size_t i = 0; i < sizeof casts / sizeof casts[0]; i++) {
        if (strcmp(name, casts[i].name) != 0) continue;
        if (n->nargs != 1)
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "cast %s() takes 1 argument, %d given", name,
                             n->nargs);
        val x;
        TRY(ck_lower(c, s, n->args[0], &x));
        if (x.cplx) {
            int done;
            return ck_cplx_call(c, n, name, &x, 1, out, &done);
        }
        TRY(ck_single(c, n->args[0], &x));
        int t = plan_ct_of_dtype(casts[i].dtype);
        red_dtype dt = casts[i].dtype;
        if (dt == RED_I8 || dt == RED_U8 || dt == RED_I16 || dt == RED_U16) {
            *out = ck_mk(narrow_cast(c, casts[i].dtype, x.c[0]), 0);
            return 0;
        }
        ir *r = ir_cast(c->b, t, x.c[0]);
        if (casts[i].dtype == RED_F16) r = ck_op1(c, OP_F16ROUND, CT_F32, r);
        if (casts[i].dtype == RED_BF16) r = ck_op1(c, OP_BF16ROUND, CT_F32, r);
        *out = ck_mk(r, 0);
        return 0;
    }
    for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++) {
        if (strcmp(name, funcs[i].name) != 0) continue;
        if (n->nargs != funcs[i].nargs)
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "%s() takes %d argument%s, %d given", name,
                             funcs[i].nargs, funcs[i].nargs == 1 ? "" : "s", n->nargs);
        val a[3];
        int any = 0, done;
        for (int k = 0; k < n->nargs; k++) {
            TRY(ck_lower(c, s, n->args[k], &a[k]));
            any |= a[k].cplx;
        }
        if (any) return ck_cplx_call(c, n, name, a, n->nargs, out, &done);
        for (int k = 0; k < n->nargs; k++) TRY(ck_single(c, n->args[k], &a[k]));
        int t = a[0].c[0]->type;
        switch (funcs[i].kind) {
        case 1: /* abs */
            if (t == CT_BOOL) t = CT_I32;
            *out = ck_mk(ck_op1(c, OP_ABS, t, ir_cast(c->b, t, a[0].c[0])), a[0].weak);
            return 0;
        case 2: /* rounding: identity on integers */
            if (!CT_IS_FLOAT(t)) {
                *out = a[0];
                return 0;
            }
            *out = ck_mk(ck_op1(c, funcs[i].op, t, a[0].c[0]), a[0].weak);
            return 0;
        case 3: /* predicates */
            if (!CT_IS_FLOAT(t)) {
                /* always false / true, but still one per element: x == x keeps
                 * the operand's indices, so isnan(x[i]) has the shape of x */
                *out = ck_mk(ck_op2(c, funcs[i].op == OP_ISFINITE ? OP_EQ : OP_NE, CT_BOOL, a[0].c[0], a[0].c[0]), 0);
                return 0;
            }
            *out = ck_mk(ck_op1(c, funcs[i].op, CT_BOOL, a[0].c[0]), 0);
            return 0;
        case 4: /* elementwise min / max */
            return binary(c, n, funcs[i].op, name, a[0], a[1], out);
        default: return float_math(c, funcs[i].op, n->nargs, a, out);
        }
    }
    if (ck_find_op(c, name) >= 0)
        return ck_err_at(c, n->name_pos, RED_ERR_NAME,
                         "'%s' is a reduction operator; use it as reduce(%s, ...)", name, name);
    for (size_t i = 0; i < sizeof cplx_fns / sizeof cplx_fns[0]; i++) {
        if (strcmp(name, cplx_fns[i]) != 0) continue;
        if (n->nargs != 1)
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "%s() takes 1 argument, %d given", name, n->nargs);
        val x;
        int done;
        TRY(ck_lower(c, s, n->args[0], &x));
        return ck_cplx_call(c, n, name, &x, 1, out, &done);
    }
    suggest sg = {name, NULL, 0};
    for (size_t i = 0; i < sizeof red_names / sizeof red_names[0]; i++) ck_suggest_offer(&sg, red_names[i]);
    for (size_t i = 0; i < sizeof scan_names / sizeof scan_names[0]; i++) ck_suggest_offer(&sg, scan_names[i].name);
    for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++) ck_suggest_offer(&sg, funcs[i].name);
    for (size_t i = 0; i < sizeof casts / sizeof casts[0]; i++) ck_suggest_offer(&sg, casts[i].name);
    for (size_t i = 0; i < sizeof cplx_fns / sizeof cplx_fns[0]; i++) ck_suggest_offer(&sg, cplx_fns[i]);
    for (int i = 0; i < c->nops; i++) ck_suggest_offer(&sg, c->ops[i]->name);
    if (sg.best)
        return ck_err_at(c, n->name_pos, RED_ERR_NAME, "unknown function '%s': did you mean '%s'?", name,
                         sg.best);
    return ck_err_at(c, n->name_pos, RED_ERR_NAME, "unknown function '%s'", name);
}
