/*
 * complex.c -- complex numbers in the checker.  A complex value is a pair of
 * real values (val.cplx: c[0] the real part, c[1] the imaginary one, both f32
 * for c64 or both f64 for c128), and every operation on it is lowered here
 * into real IR: neither backend knows complex numbers.  A complex array is
 * bound as an array of its parts, one dimension more (expr_inputs), and a
 * complex result is written the same way (check.c, lower_result).
 */
#include "check_internal.h"

int ck_is_cplx_dtype(red_dtype t) { return t == RED_C64 || t == RED_C128; }

val ck_cplx_mk(ir *re, ir *im)
{
    val v = {.n = 2, .cplx = 1};
    v.c[0] = re;
    v.c[1] = im;
    return v;
}

/* The part type of the complex result of x and y (one of them complex): f64
 * where either is c128 or f64, else f32 (an integer, bool or weak literal
 * takes the complex operand's precision, as it takes a float's). */
static int part_type(const val *x, const val *y)
{
    const val *v[2] = {x, y};
    int ft = CT_F32;
    for (int k = 0; k < 2; k++) {
        int t = v[k]->c[0]->type;
        if (t == CT_F64 && (v[k]->cplx || !v[k]->weak)) ft = CT_F64;
    }
    return ft;
}

/* 0 of type ft that still reads x: a part that is 0 for every element keeps
 * x's indices, so that a result of it (imag(x[j] - z[i])) keeps their
 * dimensions, in the order the text gives them (either branch is 0). */
static ir *zero_of(ck *c, ir *x, int ft)
{
    ir *zero = ir_const_f(c->b, ft, 0.0);
    if (x->kind == IR_CONST || x->kind == IR_SCALAR) return zero;   /* no index to keep */
    return ck_sel(c, ck_op2(c, OP_EQ, CT_BOOL, x, x), zero, zero);
}

/* x as a complex value with parts of type ft. */
static val as_cplx(ck *c, const val *x, int ft)
{
    if (x->cplx) return ck_cplx_mk(ir_cast(c->b, ft, x->c[0]), ir_cast(c->b, ft, x->c[1]));
    return ck_cplx_mk(ir_cast(c->b, ft, x->c[0]), zero_of(c, x->c[0], ft));
}

static int nomem_if(ck *c, const val *v)
{
    for (int k = 0; k < v->n; k++)
        if (!v->c[k]) return ck_nomem(c);
    return 0;
}

/* (a + bi) / (c + di) by Smith's method, which divides by the larger of |c|
 * and |d| first so that neither c*c + d*d nor the products overflow or
 * underflow where the quotient does not; by 0 + 0i as by a real 0, (a/c,
 * b/c), infinite as NumPy's.  Every IR here reads the dividend before the
 * divisor: a result's dimensions follow the indices' first appearance in it
 * (x[j] / z[i] is indexed [j, i]).  So the branch test opens with isnan(a),
 * which changes nothing (a NaN dividend makes either branch NaN). */
static val divide(ck *c, int ft, const val *x, const val *y)
{
    ir *a = x->c[0], *b = x->c[1], *cr = y->c[0], *ci = y->c[1];
    ir *big = ck_op2(c, OP_LOR, CT_BOOL, ck_op1(c, OP_ISNAN, CT_BOOL, a),
                     ck_op2(c, OP_GE, CT_BOOL, ck_op1(c, OP_ABS, ft, cr), ck_op1(c, OP_ABS, ft, ci)));
    ir *zero = ir_const_f(c->b, ft, 0.0);
    ir *by0 = ck_op2(c, OP_LAND, CT_BOOL, ck_op2(c, OP_EQ, CT_BOOL, cr, zero), ck_op2(c, OP_EQ, CT_BOOL, ci, zero));
    /* |c| >= |d|: r = d/c, den = c + d*r, ((a + b*r) + (b - a*r)i) / den */
    ir *r1 = ck_op2(c, OP_DIV, ft, ci, cr);
    ir *den1 = ck_op2(c, OP_ADD, ft, cr, ck_op2(c, OP_MUL, ft, ci, r1));
    ir *re1 = ck_op2(c, OP_DIV, ft, ck_op2(c, OP_ADD, ft, a, ck_op2(c, OP_MUL, ft, b, r1)), den1);
    ir *im1 = ck_op2(c, OP_DIV, ft, ck_op2(c, OP_SUB, ft, b, ck_op2(c, OP_MUL, ft, a, r1)), den1);
    /* else: r = c/d, den = c*r + d, ((a*r + b) + (b*r - a)i) / den */
    ir *r2 = ck_op2(c, OP_DIV, ft, cr, ci);
    ir *den2 = ck_op2(c, OP_ADD, ft, ck_op2(c, OP_MUL, ft, cr, r2), ci);
    ir *re2 = ck_op2(c, OP_DIV, ft, ck_op2(c, OP_ADD, ft, ck_op2(c, OP_MUL, ft, a, r2), b), den2);
    ir *im2 = ck_op2(c, OP_DIV, ft, ck_op2(c, OP_SUB, ft, ck_op2(c, OP_MUL, ft, b, r2), a), den2);
    ir *re = ck_sel(c, big, re1, re2), *im = ck_sel(c, big, im1, im2);
    ir *acr = ck_op1(c, OP_ABS, ft, cr);   /* +0: by -0 + 0i is inf too, as NumPy's */
    return ck_cplx_mk(ck_sel(c, ck_op2(c, OP_LAND, CT_BOOL, ck_op1(c, OP_NOT, CT_BOOL, ck_op1(c, OP_ISNAN, CT_BOOL, a)), by0),
                          ck_op2(c, OP_DIV, ft, a, acr), re),
                      ck_sel(c, ck_op2(c, OP_LAND, CT_BOOL, ck_op1(c, OP_NOT, CT_BOOL, ck_op1(c, OP_ISNAN, CT_BOOL, b)), by0),
                          ck_op2(c, OP_DIV, ft, b, acr), im));
}

int ck_cplx_binary(ck *c, const ast_node *n, int op, const char *text, val x, val y, val *out)
{
    if (x.tuple || y.tuple)
        return ck_err_at(c, (x.tuple ? n->args[0] : n->args[1])->pos, RED_ERR_TYPE,
                         "'%s' cannot be applied to a tuple; select a field with .0, .1, ...", text);
    int ft = part_type(&x, &y);
    val a = as_cplx(c, &x, ft), b = as_cplx(c, &y, ft);
    switch (op) {
    case OP_ADD:
    case OP_SUB:
        *out = ck_cplx_mk(ck_op2(c, op, ft, a.c[0], b.c[0]), ck_op2(c, op, ft, a.c[1], b.c[1]));
        break;
    case OP_MUL:
        if (!x.cplx) {
            /* a real factor scales both parts (no 0 * inf terms from a zero
             * imaginary part), operands in the written order (see divide) */
            *out = ck_cplx_mk(ck_op2(c, OP_MUL, ft, a.c[0], b.c[0]), ck_op2(c, OP_MUL, ft, a.c[0], b.c[1]));
        } else if (!y.cplx) {
            *out = ck_cplx_mk(ck_op2(c, OP_MUL, ft, a.c[0], b.c[0]), ck_op2(c, OP_MUL, ft, a.c[1], b.c[0]));
        } else {
            ir *re = ck_op2(c, OP_SUB, ft, ck_op2(c, OP_MUL, ft, a.c[0], b.c[0]), ck_op2(c, OP_MUL, ft, a.c[1], b.c[1]));
            ir *im = ck_op2(c, OP_ADD, ft, ck_op2(c, OP_MUL, ft, a.c[0], b.c[1]), ck_op2(c, OP_MUL, ft, a.c[1], b.c[0]));
            *out = ck_cplx_mk(re, im);
        }
        break;
    case OP_DIV:
        if (!y.cplx)
            *out = ck_cplx_mk(ck_op2(c, OP_DIV, ft, a.c[0], b.c[0]), ck_op2(c, OP_DIV, ft, a.c[1], b.c[0]));
        else
            *out = divide(c, ft, &a, &b);
        break;
    case OP_EQ:
    case OP_NE: {
        ir *eq = ck_op2(c, OP_LAND, CT_BOOL, ck_op2(c, OP_EQ, CT_BOOL, a.c[0], b.c[0]),
                        ck_op2(c, OP_EQ, CT_BOOL, a.c[1], b.c[1]));
        *out = ck_mk(op == OP_EQ ? eq : ck_op1(c, OP_NOT, CT_BOOL, eq), 0);
        break;
    }
    case OP_LAND:
    case OP_LOR:
        return ck_err_at(c, n->name_pos, RED_ERR_TYPE,
                         "'%s' of a complex value: compare it first (z != 0)", text);
    case OP_LT: case OP_LE: case OP_GT: case OP_GE:
        return ck_err_at(c, n->name_pos, RED_ERR_TYPE,
                         "'%s' is not defined for complex values (NumPy's order is by the real part, then "
                         "the imaginary one): compare real(z), imag(z) or abs(z)", text);
    default:
        return ck_err_at(c, n->name_pos, RED_ERR_TYPE, "'%s' is not defined for complex values%s", text,
                         op == OP_POW ? " (write z * z for a square)" : "");
    }
    return nomem_if(c, out);
}

int ck_cplx_unary(ck *c, const ast_node *n, const val *x, val *out)
{
    int ft = x->c[0]->type;
    switch (n->op) {
    case '+': *out = *x; return 0;
    case '-': *out = ck_cplx_mk(ck_op1(c, OP_NEG, ft, x->c[0]), ck_op1(c, OP_NEG, ft, x->c[1])); break;
    case '!': {
        ir *zero = ir_const_f(c->b, ft, 0.0);
        *out = ck_mk(ck_op2(c, OP_LAND, CT_BOOL, ck_op2(c, OP_EQ, CT_BOOL, x->c[0], zero),
                            ck_op2(c, OP_EQ, CT_BOOL, x->c[1], zero)), 0);
        break;
    }
    default:
        return ck_err_at(c, n->pos, RED_ERR_TYPE, "'%c' is not defined for complex values", n->op);
    }
    return nomem_if(c, out);
}

/* z != 0, the truth of a complex value (bool(z), count(z), any(z), ?:). */
ir *ck_cplx_truth(ck *c, const val *x)
{
    int ft = x->c[0]->type;
    ir *zero = ir_const_f(c->b, ft, 0.0);
    return ck_op2(c, OP_LOR, CT_BOOL, ck_op2(c, OP_NE, CT_BOOL, x->c[0], zero),
                  ck_op2(c, OP_NE, CT_BOOL, x->c[1], zero));
}

int ck_cplx_cond(ck *c, const ir *k, val x, val y, val *out)
{
    int ft = part_type(&x, &y);
    val a = as_cplx(c, &x, ft), b = as_cplx(c, &y, ft);
    ir *kb = ck_to_bool(c, (ir *)k);
    *out = ck_cplx_mk(ck_sel(c, kb, a.c[0], b.c[0]), ck_sel(c, kb, a.c[1], b.c[1]));
    return nomem_if(c, out);
}

/* The functions that take complex values, and the ones that make them:
 * real imag conj arg abs exp isnan isfinite c64 c128 bool.  *done: `name` was
 * one of them (or a function refusing a complex argument, with the error). */
int ck_cplx_call(ck *c, const ast_node *n, const char *name, const val *a, int nargs, val *out, int *done)
{
    static const char *const names[] = {"real", "imag", "conj", "arg", "c64", "c128"};
    int mine = 0, any = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) mine |= strcmp(name, names[i]) == 0;
    for (int k = 0; k < nargs; k++) any |= a[k].cplx;
    *done = 0;
    if (!mine && !any) return 0;
    *done = 1;
    if (mine && nargs != 1)
        return ck_err_at(c, n->pos, RED_ERR_TYPE, "%s() takes 1 argument, %d given", name, nargs);
    if (a[0].tuple) TRY(ck_single(c, n->args[0], &a[0]));
    const val *x = &a[0];
    int t = x->c[0]->type, ft = x->cplx ? t : t == CT_F64 ? CT_F64 : CT_F32;
    if (!x->cplx && (strcmp(name, "real") == 0 || strcmp(name, "imag") == 0 || strcmp(name, "conj") == 0 ||
                     strcmp(name, "arg") == 0)) {
        /* of a real value: itself, 0, itself, 0 or pi (the sign's angle) */
        int rt = CT_IS_FLOAT(t) ? t : CT_F64;
        ir *v = ir_cast(c->b, rt, x->c[0]);
        if (name[0] == 'r' || name[0] == 'c') *out = ck_mk(name[0] == 'r' ? v : x->c[0], x->weak);
        else if (name[0] == 'i') *out = ck_mk(zero_of(c, v, rt), 0);   /* still indexed as x, as NumPy's imag(x) */
        else *out = ck_mk(ck_op2(c, OP_ATAN2, rt, ir_const_f(c->b, rt, 0.0), v), 0);
        return nomem_if(c, out);
    }
    if (strcmp(name, "c64") == 0 || strcmp(name, "c128") == 0) {
        *out = as_cplx(c, x, name[1] == '6' ? CT_F32 : CT_F64);
        return nomem_if(c, out);
    }
    if (nargs != 1 || !x->cplx) {
        for (int k = 0; k < nargs; k++)
            if (a[k].cplx)
                return ck_err_at(c, n->args[k]->pos, RED_ERR_TYPE,
                                 "%s() of a complex value is not supported: take real(z), imag(z) or abs(z)", name);
    }
    ir *re = x->c[0], *im = x->c[1];
    if (strcmp(name, "real") == 0) *out = ck_mk(re, 0);
    else if (strcmp(name, "imag") == 0) *out = ck_mk(im, 0);
    else if (strcmp(name, "conj") == 0) *out = ck_cplx_mk(re, ck_op1(c, OP_NEG, ft, im));
    else if (strcmp(name, "arg") == 0) *out = ck_mk(ck_op2(c, OP_ATAN2, ft, im, re), 0);
    else if (strcmp(name, "abs") == 0) *out = ck_mk(ck_op2(c, OP_HYPOT, ft, re, im), 0);
    else if (strcmp(name, "bool") == 0) *out = ck_mk(ck_cplx_truth(c, x), 0);
    else if (strcmp(name, "isnan") == 0 || strcmp(name, "isfinite") == 0) {
        int op = name[2] == 'n' ? OP_ISNAN : OP_ISFINITE;
        ir *pr = ck_op1(c, op, CT_BOOL, re), *pi = ck_op1(c, op, CT_BOOL, im);
        *out = ck_mk(ck_op2(c, op == OP_ISNAN ? OP_LOR : OP_LAND, CT_BOOL, pr, pi), 0);
    } else if (strcmp(name, "exp") == 0) {
        /* e^re (cos im + i sin im); a real argument stays real (exp(100 + 0i)
         * is inf + 0i, not inf * sin(0) = NaN), and e^re = 0 gives 0 whatever
         * im is, as NumPy's */
        ir *m = ck_op1(c, OP_EXP, ft, re), *zero = ir_const_f(c->b, ft, 0.0);
        ir *m0 = ck_op2(c, OP_EQ, CT_BOOL, m, zero), *im0 = ck_op2(c, OP_EQ, CT_BOOL, im, zero);
        *out = ck_cplx_mk(ck_sel(c, ck_op2(c, OP_LOR, CT_BOOL, m0, im0), ck_sel(c, m0, zero, m), ck_op2(c, OP_MUL, ft, m, ck_op1(c, OP_COS, ft, im))),
                          ck_sel(c, im0, im, ck_sel(c, m0, zero, ck_op2(c, OP_MUL, ft, m, ck_op1(c, OP_SIN, ft, im)))));
    } else {
        return ck_err_at(c, n->args[0]->pos, RED_ERR_TYPE,
                         "%s() of a complex value is not supported%s", name,
                         strcmp(name, "min") == 0 || strcmp(name, "max") == 0
                             ? " (complex values have no order): compare real(z), imag(z) or abs(z)"
                             : ": take real(z), imag(z) or abs(z)");
    }
    return nomem_if(c, out);
}
