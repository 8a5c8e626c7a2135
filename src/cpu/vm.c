/*
 * vm.c -- compiles IR into block instructions and runs them.  Each typed
 * kernel below is a plain loop over a register of VM_B elements.  Integer
 * arithmetic goes through unsigned types so overflow wraps (never UB), and
 * division by zero, shifts and float-to-int casts have defined results as
 * docs/language.md states.
 */
#include "vm.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* ---- typed kernels ---------------------------------------------------------- */

typedef void (*kern_fn)(int n, void *d, const void *a, const void *b, const void *c);

#define T_bool uint8_t
#define T_i32 int32_t
#define T_i64 int64_t
#define T_u32 uint32_t
#define T_u64 uint64_t
#define T_f32 float
#define T_f64 double
#define U_i32 uint32_t
#define U_i64 uint64_t
#define U_u32 uint32_t
#define U_u64 uint64_t
#define BITS_i32 32
#define BITS_i64 64
#define BITS_u32 32
#define BITS_u64 64

#define K1(name, T, R, expr)                                                        \
    static void name(int n, void *d_, const void *a_, const void *b_, const void *c_) \
    {                                                                                \
        R *restrict d = d_;                                                          \
        const T *restrict a = a_;                                                    \
        (void)b_;                                                                    \
        (void)c_;                                                                    \
        for (int j = 0; j < n; j++) d[j] = (expr);                                  \
    }
#define K2(name, T, R, expr)                                                        \
    static void name(int n, void *d_, const void *a_, const void *b_, const void *c_) \
    {                                                                                \
        R *restrict d = d_;                                                          \
        const T *restrict a = a_, *restrict b = b_;                                 \
        (void)c_;                                                                    \
        for (int j = 0; j < n; j++) d[j] = (expr);                                  \
    }

/* integer kernels (wrapping through the unsigned type) */
#define INT_KERNELS(t)                                                                        \
    K1(k_bnot_##t, T_##t, T_##t, (T_##t)~(U_##t)a[j])                                        \
    K2(k_add_##t, T_##t, T_##t, (T_##t)((U_##t)a[j] + (U_##t)b[j]))                          \
    K2(k_sub_##t, T_##t, T_##t, (T_##t)((U_##t)a[j] - (U_##t)b[j]))                          \
    K2(k_mul_##t, T_##t, T_##t, (T_##t)((U_##t)a[j] * (U_##t)b[j]))                          \
    K2(k_band_##t, T_##t, T_##t, a[j] & b[j])                                                 \
    K2(k_bor_##t, T_##t, T_##t, a[j] | b[j])                                                  \
    K2(k_bxor_##t, T_##t, T_##t, a[j] ^ b[j])                                                 \
    K2(k_shl_##t, T_##t, T_##t, (T_##t)((U_##t)a[j] << ((U_##t)b[j] & (BITS_##t - 1))))      \
    K2(k_min_##t, T_##t, T_##t, a[j] < b[j] ? a[j] : b[j])                                   \
    K2(k_max_##t, T_##t, T_##t, a[j] > b[j] ? a[j] : b[j])                                   \
    K1(k_neg_##t, T_##t, T_##t, (T_##t)(0 - (U_##t)a[j]))

/* signed only: abs, arithmetic shift, division without traps */
#define SINT_KERNELS(t)                                                                       \
    K1(k_abs_##t, T_##t, T_##t, a[j] < 0 ? (T_##t)(0 - (U_##t)a[j]) : a[j])                  \
    K2(k_shr_##t, T_##t, T_##t,                                                               \
       a[j] < 0 ? (T_##t) ~(~(U_##t)a[j] >> ((U_##t)b[j] & (BITS_##t - 1)))                  \
                : (T_##t)((U_##t)a[j] >> ((U_##t)b[j] & (BITS_##t - 1))))                    \
    /* y == -1 is negation: MIN / -1 wraps instead of trapping; x / 0 is 0 */               \
    K2(k_div_##t, T_##t, T_##t,                                                               \
       b[j] == 0 ? 0 : b[j] == -1 ? (T_##t)(0 - (U_##t)a[j]) : a[j] / b[j])                  \
    K2(k_mod_##t, T_##t, T_##t, b[j] == 0 || b[j] == -1 ? 0 : a[j] % b[j])

#define UINT_KERNELS(t)                                                                       \
    K1(k_abs_##t, T_##t, T_##t, a[j])                                                         \
    K2(k_shr_##t, T_##t, T_##t, (T_##t)(a[j] >> (b[j] & (BITS_##t - 1))))                    \
    K2(k_div_##t, T_##t, T_##t, b[j] == 0 ? 0 : a[j] / b[j])                                 \
    K2(k_mod_##t, T_##t, T_##t, b[j] == 0 ? 0 : a[j] % b[j])

#define FLT_KERNELS(t, sfx)                                                              \
    K1(k_neg_##t, T_##t, T_##t, -a[j])                                                   \
    K1(k_abs_##t, T_##t, T_##t, fabs##sfx(a[j]))                                         \
    K1(k_sqrt_##t, T_##t, T_##t, sqrt##sfx(a[j]))                                        \
    K1(k_exp_##t, T_##t, T_##t, exp##sfx(a[j]))                                          \
    K1(k_log_##t, T_##t, T_##t, log##sfx(a[j]))                                          \
    K1(k_log2_##t, T_##t, T_##t, log2##sfx(a[j]))                                        \
    K1(k_log10_##t, T_##t, T_##t, log10##sfx(a[j]))                                      \
    K1(k_sin_##t, T_##t, T_##t, sin##sfx(a[j]))                                          \
    K1(k_cos_##t, T_##t, T_##t, cos##sfx(a[j]))                                          \
    K1(k_tan_##t, T_##t, T_##t, tan##sfx(a[j]))                                          \
    K1(k_tanh_##t, T_##t, T_##t, tanh##sfx(a[j]))                                        \
    K1(k_floor_##t, T_##t, T_##t, floor##sfx(a[j]))                                      \
    K1(k_ceil_##t, T_##t, T_##t, ceil##sfx(a[j]))                                        \
    K1(k_round_##t, T_##t, T_##t, round##sfx(a[j]))                                      \
    K1(k_isnan_##t, T_##t, uint8_t, a[j] != a[j])                                        \
    K1(k_isfinite_##t, T_##t, uint8_t, (a[j] - a[j]) == 0)                               \
    K2(k_add_##t, T_##t, T_##t, a[j] + b[j])                                             \
    K2(k_sub_##t, T_##t, T_##t, a[j] - b[j])                                             \
    K2(k_mul_##t, T_##t, T_##t, a[j] * b[j])                                             \
    K2(k_div_##t, T_##t, T_##t, a[j] / b[j])                                             \
    K2(k_mod_##t, T_##t, T_##t, fmod##sfx(a[j], b[j]))                                   \
    K2(k_min_##t, T_##t, T_##t, (a[j] < b[j] || a[j] != a[j]) ? a[j] : b[j])             \
    K2(k_max_##t, T_##t, T_##t, (a[j] > b[j] || a[j] != a[j]) ? a[j] : b[j])             \
    K2(k_pow_##t, T_##t, T_##t, pow##sfx(a[j], b[j]))                                    \
    K2(k_hypot_##t, T_##t, T_##t, hypot##sfx(a[j], b[j]))                                \
    K2(k_atan2_##t, T_##t, T_##t, atan2##sfx(a[j], b[j]))                                \
    static void k_fma_##t(int n, void *d_, const void *a_, const void *b_, const void *c_) \
    {                                                                                      \
        T_##t *d = d_;                                                                     \
        const T_##t *a = a_, *b = b_, *c = c_;                                             \
        for (int j = 0; j < n; j++) d[j] = fma##sfx(a[j], b[j], c[j]);                     \
    }

#define CMP_KERNELS(t)                                     \
    K2(k_lt_##t, T_##t, uint8_t, a[j] < b[j])              \
    K2(k_le_##t, T_##t, uint8_t, a[j] <= b[j])             \
    K2(k_gt_##t, T_##t, uint8_t, a[j] > b[j])              \
    K2(k_ge_##t, T_##t, uint8_t, a[j] >= b[j])             \
    K2(k_eq_##t, T_##t, uint8_t, a[j] == b[j])             \
    K2(k_ne_##t, T_##t, uint8_t, a[j] != b[j])             \
    static void k_sel_##t(int n, void *d_, const void *a_, const void *b_, const void *c_) \
    {                                                                                      \
        T_##t *d = d_;                                                                     \
        const uint8_t *k = a_;                                                             \
        const T_##t *x = b_, *y = c_;                                                      \
        for (int j = 0; j < n; j++) d[j] = k[j] ? x[j] : y[j];                             \
    }

INT_KERNELS(i32)
INT_KERNELS(i64)
INT_KERNELS(u32)
INT_KERNELS(u64)
SINT_KERNELS(i32)
SINT_KERNELS(i64)
UINT_KERNELS(u32)
UINT_KERNELS(u64)
FLT_KERNELS(f32, f)
FLT_KERNELS(f64, )
CMP_KERNELS(bool)
CMP_KERNELS(i32)
CMP_KERNELS(i64)
CMP_KERNELS(u32)
CMP_KERNELS(u64)
CMP_KERNELS(f32)
CMP_KERNELS(f64)

K1(k_not_bool, uint8_t, uint8_t, !a[j])
K2(k_land_bool, uint8_t, uint8_t, a[j] & b[j])
K2(k_lor_bool, uint8_t, uint8_t, a[j] | b[j])
K2(k_band_bool, uint8_t, uint8_t, a[j] & b[j])
K2(k_bor_bool, uint8_t, uint8_t, a[j] | b[j])
K2(k_bxor_bool, uint8_t, uint8_t, a[j] ^ b[j])
K2(k_min_bool, uint8_t, uint8_t, a[j] & b[j])
K2(k_max_bool, uint8_t, uint8_t, a[j] | b[j])
K1(k_f16round_f32, float, float, core_round_f16(a[j]))
K1(k_bf16round_f32, float, float, core_round_bf16(a[j]))

static kern_fn kern[OP_COUNT_][CT_COUNT];

#define SET_INT(op, name)                     \
    kern[op][CT_I32] = k_##name##_i32;        \
    kern[op][CT_I64] = k_##name##_i64;        \
    kern[op][CT_U32] = k_##name##_u32;        \
    kern[op][CT_U64] = k_##name##_u64;
#define SET_FLT(op, name)                     \
    kern[op][CT_F32] = k_##name##_f32;        \
    kern[op][CT_F64] = k_##name##_f64;
#define SET_NUM(op, name) SET_INT(op, name) SET_FLT(op, name)
#define SET_ALL(op, name) SET_NUM(op, name) kern[op][CT_BOOL] = k_##name##_bool;

static void init_kernels(void)
{
    SET_NUM(OP_NEG, neg) SET_NUM(OP_ABS, abs) SET_INT(OP_BNOT, bnot)
    SET_NUM(OP_ADD, add) SET_NUM(OP_SUB, sub) SET_NUM(OP_MUL, mul)
    SET_NUM(OP_DIV, div) SET_NUM(OP_MOD, mod)
    SET_INT(OP_BAND, band) SET_INT(OP_BOR, bor) SET_INT(OP_BXOR, bxor)
    SET_INT(OP_SHL, shl) SET_INT(OP_SHR, shr)
    SET_NUM(OP_MIN, min) SET_NUM(OP_MAX, max)
    SET_ALL(OP_LT, lt) SET_ALL(OP_LE, le) SET_ALL(OP_GT, gt) SET_ALL(OP_GE, ge)
    SET_ALL(OP_EQ, eq) SET_ALL(OP_NE, ne) SET_ALL(OP_SELECT, sel)
    SET_FLT(OP_SQRT, sqrt) SET_FLT(OP_EXP, exp) SET_FLT(OP_LOG, log) SET_FLT(OP_LOG2, log2)
    SET_FLT(OP_LOG10, log10) SET_FLT(OP_SIN, sin) SET_FLT(OP_COS, cos) SET_FLT(OP_TAN, tan)
    SET_FLT(OP_TANH, tanh) SET_FLT(OP_FLOOR, floor) SET_FLT(OP_CEIL, ceil)
    SET_FLT(OP_ROUND, round) SET_FLT(OP_ISNAN, isnan) SET_FLT(OP_ISFINITE, isfinite)
    SET_FLT(OP_POW, pow) SET_FLT(OP_HYPOT, hypot) SET_FLT(OP_ATAN2, atan2) SET_FLT(OP_FMA, fma)
    kern[OP_NOT][CT_BOOL] = k_not_bool;
    kern[OP_LAND][CT_BOOL] = k_land_bool;
    kern[OP_LOR][CT_BOOL] = k_lor_bool;
    kern[OP_BAND][CT_BOOL] = k_band_bool;
    kern[OP_BOR][CT_BOOL] = k_bor_bool;
    kern[OP_BXOR][CT_BOOL] = k_bxor_bool;
    kern[OP_MIN][CT_BOOL] = k_min_bool;
    kern[OP_MAX][CT_BOOL] = k_max_bool;
    kern[OP_F16ROUND][CT_F32] = k_f16round_f32;
    kern[OP_BF16ROUND][CT_F32] = k_bf16round_f32;
}

/* ---- loads ------------------------------------------------------------------------ */

#define LOAD_STRIDED(TS, TD, conv)                                            \
    do {                                                                      \
        const TS *restrict s = (const TS *)base + start;                      \
        TD *restrict d = dst;                                                 \
        if (step == 1)                                                        \
            for (int j = 0; j < n; j++) d[j] = conv(s[j]);                    \
        else if (step == 0) { /* x[i] along j: one value, broadcast */        \
            const TD v = conv(s[0]);                                          \
            for (int j = 0; j < n; j++) d[j] = v;                             \
        } else                                                                \
            for (int j = 0; j < n; j++) d[j] = conv(s[(int64_t)j * step]);    \
    } while (0)
#define LOAD_GATHER(TS, TD, conv)                                             \
    do {                                                                      \
        const TS *restrict s = (const TS *)base;                              \
        TD *restrict d = dst;                                                 \
        for (int j = 0; j < n; j++) d[j] = conv(s[off[j]]);                   \
    } while (0)
#define ID(x) (x)
#define BOOLV(x) ((uint8_t)((x) != 0))

static void load_strided(red_dtype t, const void *base, int64_t start, int64_t step, int n, void *dst)
{
    switch (t) {
    case RED_BOOL: LOAD_STRIDED(uint8_t, uint8_t, BOOLV); break;
    case RED_I32: LOAD_STRIDED(int32_t, int32_t, ID); break;
    case RED_I64: LOAD_STRIDED(int64_t, int64_t, ID); break;
    case RED_U32: LOAD_STRIDED(uint32_t, uint32_t, ID); break;
    case RED_U64: LOAD_STRIDED(uint64_t, uint64_t, ID); break;
    case RED_I8: LOAD_STRIDED(int8_t, int32_t, ID); break;
    case RED_U8: LOAD_STRIDED(uint8_t, int32_t, ID); break;
    case RED_I16: LOAD_STRIDED(int16_t, int32_t, ID); break;
    case RED_U16: LOAD_STRIDED(uint16_t, int32_t, ID); break;
    case RED_F16: LOAD_STRIDED(uint16_t, float, core_f16_to_f32); break;
    case RED_BF16: LOAD_STRIDED(uint16_t, float, core_bf16_to_f32); break;
    case RED_F32: LOAD_STRIDED(float, float, ID); break;
    case RED_F64: LOAD_STRIDED(double, double, ID); break;
    case RED_C64: case RED_C128: break;   /* bound as [..., 2] arrays of their parts */
    }
}

static void load_gather(red_dtype t, const void *base, const int64_t *restrict off, int n, void *dst)
{
    switch (t) {
    case RED_BOOL: LOAD_GATHER(uint8_t, uint8_t, BOOLV); break;
    case RED_I32: LOAD_GATHER(int32_t, int32_t, ID); break;
    case RED_I64: LOAD_GATHER(int64_t, int64_t, ID); break;
    case RED_U32: LOAD_GATHER(uint32_t, uint32_t, ID); break;
    case RED_U64: LOAD_GATHER(uint64_t, uint64_t, ID); break;
    case RED_I8: LOAD_GATHER(int8_t, int32_t, ID); break;
    case RED_U8: LOAD_GATHER(uint8_t, int32_t, ID); break;
    case RED_I16: LOAD_GATHER(int16_t, int32_t, ID); break;
    case RED_U16: LOAD_GATHER(uint16_t, int32_t, ID); break;
    case RED_F16: LOAD_GATHER(uint16_t, float, core_f16_to_f32); break;
    case RED_BF16: LOAD_GATHER(uint16_t, float, core_bf16_to_f32); break;
    case RED_F32: LOAD_GATHER(float, float, ID); break;
    case RED_F64: LOAD_GATHER(double, double, ID); break;
    case RED_C64: case RED_C128: break;   /* bound as [..., 2] arrays of their parts */
    }
}

static int fault(vm_state *s, const vm_instr *in, int dim, int64_t value, int64_t extent)
{
    if (!s->fault.code) {
        s->fault.code = RED_ERR_INDEX;
        s->fault.node = in->node;
        s->fault.dim = dim;
        s->fault.value = value;
        s->fault.extent = extent;
        s->fault.buf = in->slot;
    }
    return RED_ERR_INDEX;
}

static const core_buf *buf_of(const vm_state *s, int slot)
{
    return slot >= 0 ? &s->bufs[slot] : &s->temps[-1 - slot];
}

static int run_load(vm_state *s, const vm_instr *in, int n, void *dst)
{
    const core_buf *b = buf_of(s, in->slot);
    if (in->affine) {
        int simple = 1;
        for (int d = 0; d < in->nsub && simple; d++)
            for (int t = 0; t < in->aff[d].nterm; t++)
                simple &= s->vars[in->aff[d].var[t]].mode != VAR_VEC;
        /* the subscripts are linear along the block, so its two ends bound
         * them, unless the arithmetic wraps (i64 wraps by the language's
         * rules): then every element is checked on the general path */
        int64_t start = 0, step = 0;
        for (int d = 0; d < in->nsub && simple; d++) {
            const vm_affine *af = &in->aff[d];
            int64_t v0 = af->c0, dv = 0, v1, span, prod;
            for (int t = 0; t < af->nterm && simple; t++) {
                const vm_var *v = &s->vars[af->var[t]];
                simple = !__builtin_mul_overflow(af->coef[t], v->base, &prod) &&
                         !__builtin_add_overflow(v0, prod, &v0) &&
                         !(v->mode == VAR_RAMP && __builtin_add_overflow(dv, af->coef[t], &dv));
            }
            simple = simple && !__builtin_mul_overflow(dv, (int64_t)(n - 1), &span) &&
                     !__builtin_add_overflow(v0, span, &v1);
            if (simple) {
                if (!s->flat) {   /* flat: checked for the whole box beforehand */
                    if ((uint64_t)v0 >= (uint64_t)b->shape[d]) return fault(s, in, d, v0, b->shape[d]);
                    if ((uint64_t)v1 >= (uint64_t)b->shape[d]) return fault(s, in, d, v1, b->shape[d]);
                }
                start += v0 * b->strides[d];
                step += dv * b->strides[d];
            }
        }
        if (simple) {
            if (step == 1 && plan_dtype_of_ct(in->type) == b->dtype && b->dtype != RED_BOOL) {
                /* contiguous and already in the compute type: read in place */
                s->rp[in->dst] = (char *)b->data + start * (int64_t)red_dtype_size(b->dtype);
                return 0;
            }
            load_strided(b->dtype, b->data, start, step, n, dst);
            return 0;
        }
    }
    int64_t *restrict off = s->scratch2, *restrict sub = s->scratch;
    for (int j = 0; j < n; j++) off[j] = 0;
    for (int d = 0; d < in->nsub; d++) {
        const int64_t *sv;
        if (in->affine) {
            const vm_affine *af = &in->aff[d];
            /* wrapping i64 arithmetic, through uint64 (no UB) */
            uint64_t *us = (uint64_t *)sub;
            for (int j = 0; j < n; j++) us[j] = (uint64_t)af->c0;
            for (int t = 0; t < af->nterm; t++) {
                const vm_var *v = &s->vars[af->var[t]];
                uint64_t k = (uint64_t)af->coef[t];
                if (v->mode == VAR_CONST)
                    for (int j = 0; j < n; j++) us[j] += k * (uint64_t)v->base;
                else if (v->mode == VAR_RAMP)
                    for (int j = 0; j < n; j++) us[j] += k * ((uint64_t)v->base + (uint64_t)j);
                else
                    for (int j = 0; j < n; j++) us[j] += k * (uint64_t)v->vec[j];
            }
            sv = sub;
        } else {
            sv = vm_reg(s, in->sub[d]);
        }
        uint64_t ext = (uint64_t)b->shape[d];
        int bad = 0;
        for (int j = 0; j < n; j++) bad |= (uint64_t)sv[j] >= ext;
        if (bad)
            for (int j = 0; j < n; j++)
                if ((uint64_t)sv[j] >= ext) return fault(s, in, d, sv[j], b->shape[d]);
        int64_t st = b->strides[d];
        for (int j = 0; j < n; j++) off[j] += sv[j] * st;
    }
    load_gather(b->dtype, b->data, off, n, dst);
    return 0;
}

/* ---- compile ---------------------------------------------------------------------- */

typedef struct cstate {
    util_arena *a;
    const plan *p;
    int *reg_of;        /* by ir id: instruction index, -1 if none */
    vm_instr *instr;
    int n, cap;
    int maxvar;
} cstate;

static int affine_of(const ir *x, vm_affine *af, int64_t scale, int *maxvar)
{
    switch (x->kind) {
    case IR_CONST:
        if (CT_IS_FLOAT(x->type)) return 0;
        af->c0 = (int64_t)((uint64_t)af->c0 + (uint64_t)scale * (uint64_t)x->c.i);
        return 1;
    case IR_INDEX:
        for (int t = 0; t < af->nterm; t++)
            if (af->var[t] == x->slot) {
                af->coef[t] = (int64_t)((uint64_t)af->coef[t] + (uint64_t)scale);
                return 1;
            }
        if (af->nterm == VM_MAX_TERMS) return 0;
        af->var[af->nterm] = x->slot;
        af->coef[af->nterm++] = scale;
        if (x->slot + 1 > *maxvar) *maxvar = x->slot + 1;
        return 1;
    case IR_OP:
        if (x->type != CT_I64) return 0;
        if (x->op == OP_ADD) return affine_of(x->args[0], af, scale, maxvar) && affine_of(x->args[1], af, scale, maxvar);
        if (x->op == OP_SUB)
            return affine_of(x->args[0], af, scale, maxvar) &&
                   affine_of(x->args[1], af, (int64_t)(0 - (uint64_t)scale), maxvar);
        if (x->op == OP_NEG) return affine_of(x->args[0], af, (int64_t)(0 - (uint64_t)scale), maxvar);
        if (x->op == OP_MUL) {
            if (x->args[1]->kind == IR_CONST)
                return affine_of(x->args[0], af, (int64_t)((uint64_t)scale * (uint64_t)x->args[1]->c.i), maxvar);
            if (x->args[0]->kind == IR_CONST)
                return affine_of(x->args[1], af, (int64_t)((uint64_t)scale * (uint64_t)x->args[0]->c.i), maxvar);
        }
        return 0;
    default:
        return 0;
    }
}

static int emit(cstate *c, const ir *x);

static int push(cstate *c, vm_instr *in)
{
    if (c->n == c->cap) {
        int ncap = c->cap ? c->cap * 2 : 8;   /* an instruction is ~600 bytes */
        vm_instr *ni = util_arena_alloc(c->a, ncap * sizeof *ni);
        if (!ni) return -1;
        if (c->n) memcpy(ni, c->instr, c->n * sizeof *ni);
        c->instr = ni;
        c->cap = ncap;
    }
    c->instr[c->n] = *in;
    return c->n++;
}

static int emit(cstate *c, const ir *x)
{
    if (c->reg_of[x->id] >= 0) return c->reg_of[x->id];
    vm_instr in;
    memset(&in, 0, sizeof in);
    in.type = x->type;
    in.node = x;
    in.a = in.b = in.c = -1;
    switch (x->kind) {
    case IR_CONST:
        in.kind = VI_CONST;
        in.value = x->c;
        in.invariant = 1;
        break;
    case IR_SCALAR:
        in.kind = VI_SCALAR;
        in.slot = x->slot;
        in.invariant = 1;
        break;
    case IR_INDEX:
        in.kind = VI_INDEX;
        in.slot = x->slot;
        if (x->slot + 1 > c->maxvar) c->maxvar = x->slot + 1;
        break;
    case IR_PARAM:
        in.kind = VI_PARAM;
        in.slot = x->slot;
        break;
    case IR_LOAD: {
        in.kind = VI_LOAD;
        in.slot = x->slot;
        in.nsub = x->nargs;
        in.affine = 1;
        for (int d = 0; d < x->nargs && in.affine; d++) {
            memset(&in.aff[d], 0, sizeof in.aff[d]);
            in.affine = affine_of(x->args[d], &in.aff[d], 1, &c->maxvar);
        }
        if (!in.affine)
            for (int d = 0; d < x->nargs; d++) {
                int r = emit(c, x->args[d]);
                if (r < 0) return -1;
                in.sub[d] = r;
            }
        in.invariant = x->nargs == 0;
        break;
    }
    case IR_CAST:
    case IR_OP: {
        int inv = 1;
        int r[3] = {-1, -1, -1};
        for (int i = 0; i < x->nargs; i++) {
            r[i] = emit(c, x->args[i]);
            if (r[i] < 0) return -1;
            inv &= c->instr[r[i]].invariant;
        }
        in.kind = x->kind == IR_CAST ? VI_CAST : VI_OP;
        in.op = x->op;
        in.a = r[0];
        in.b = r[1];
        in.c = r[2];
        /* the operand type that selects the kernel */
        in.atype = x->nargs ? x->args[x->kind == IR_OP && x->op == OP_SELECT ? 1 : 0]->type : x->type;
        in.invariant = inv;
        if (in.kind == VI_OP && !kern[in.op][in.atype]) return -2;
        break;
    }
    }
    int idx = push(c, &in);
    if (idx < 0) return -1;
    c->reg_of[x->id] = idx;
    return idx;
}

static pthread_once_t kern_once = PTHREAD_ONCE_INIT;

int vm_compile(util_arena *a, const plan *p, int nroots, ir *const *roots, vm_prog **out)
{
    pthread_once(&kern_once, init_kernels);
    cstate c = {.a = a, .p = p};
    c.reg_of = malloc((size_t)(p->nir + 1) * sizeof *c.reg_of);
    if (!c.reg_of) return RED_ERR_NOMEM;
    for (int i = 0; i <= p->nir; i++) c.reg_of[i] = -1;
    vm_prog *prog = util_arena_alloc(a, sizeof *prog);
    int rc = 0;
    if (!prog || nroots > (int)(sizeof prog->out / sizeof prog->out[0])) rc = RED_ERR_NOMEM;
    int root_instr[sizeof prog->out / sizeof prog->out[0]];
    for (int r = 0; r < nroots && !rc; r++) {
        int k = emit(&c, roots[r]);
        if (k == -2) rc = RED_ERR_INTERNAL;
        else if (k < 0) rc = RED_ERR_NOMEM;
        else root_instr[r] = k;
    }
    free(c.reg_of);
    if (rc) return rc;

    /* registers by liveness: an instruction's register is freed after its
     * last use; invariants and roots keep theirs to the end */
    int n = c.n;
    int *last = malloc((size_t)(n + 1) * sizeof *last), *reg = malloc((size_t)(n + 1) * sizeof *reg);
    int *freel = malloc((size_t)(n + 1) * sizeof *freel);
    if (!last || !reg || !freel) {
        free(last);
        free(reg);
        free(freel);
        return RED_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++) last[i] = c.instr[i].invariant || c.instr[i].kind == VI_PARAM ? n : i;
    for (int r = 0; r < nroots; r++) last[root_instr[r]] = n;
    for (int i = 0; i < n; i++) {
        vm_instr *in = &c.instr[i];
        int ops[3 + RED_MAX_DIMS], no = 0;
        if (in->a >= 0) ops[no++] = in->a;
        if (in->b >= 0) ops[no++] = in->b;
        if (in->c >= 0) ops[no++] = in->c;
        if (in->kind == VI_LOAD && !in->affine)
            for (int d = 0; d < in->nsub; d++) ops[no++] = in->sub[d];
        for (int k = 0; k < no; k++)
            if (last[ops[k]] < n && last[ops[k]] < i) last[ops[k]] = i;
    }
    int nfree = 0, nregs = 0;
    for (int i = 0; i < n; i++) {
        vm_instr *in = &c.instr[i];
        /* invariants (computed once, before the blocks) and parameters
         * (written by the caller before vm_run) need registers no earlier
         * instruction of the block reuses */
        int own = in->invariant || in->kind == VI_PARAM;
        in->dst = reg[i] = !own && nfree ? freel[--nfree] : nregs++;
        if (in->a >= 0) in->a = reg[in->a];
        if (in->b >= 0) in->b = reg[in->b];
        if (in->c >= 0) in->c = reg[in->c];
        if (in->kind == VI_LOAD && !in->affine)
            for (int d = 0; d < in->nsub; d++) in->sub[d] = reg[in->sub[d]];
        /* free the registers whose last use is this instruction (after the
         * destination was taken: kernels never write over their inputs) */
        for (int j = 0; j < i; j++)
            if (last[j] == i) freel[nfree++] = reg[j];
    }
    prog->ninstr = n;
    prog->instr = c.instr;
    prog->nregs = nregs;
    prog->nout = nroots;
    for (int r = 0; r < nroots; r++) prog->out[r] = reg[root_instr[r]];
    prog->maxvar = c.maxvar;
    free(last);
    free(reg);
    free(freel);
    *out = prog;
    return 0;
}

int vm_state_init(vm_state *s, const vm_prog *prog, int nvars)
{
    memset(s, 0, sizeof *s);
    s->prog = prog;
    size_t regbytes = (size_t)(prog->nregs ? prog->nregs : 1) * VM_B * 8;
    s->regs = aligned_alloc(64, regbytes + 2 * VM_B * 8);
    s->vars = calloc((size_t)(nvars > 0 ? nvars : 1), sizeof *s->vars);
    s->rp = calloc((size_t)(prog->nregs ? prog->nregs : 1), sizeof *s->rp);
    if (!s->regs || !s->vars || !s->rp) {
        vm_state_free(s);
        return RED_ERR_NOMEM;
    }
    for (int r = 0; r < prog->nregs; r++) s->rp[r] = s->regs + (size_t)r * VM_B * 8;
    s->scratch = (int64_t *)(s->regs + regbytes);
    s->scratch2 = s->scratch + VM_B;
    s->check_bounds = 1;
    return 0;
}

void vm_state_free(vm_state *s)
{
    free(s->regs);
    free(s->vars);
    free(s->rp);
    s->regs = NULL;
    s->vars = NULL;
    s->rp = NULL;
}

static void fill(void *d, int type, plan_value v, int n)
{
    switch (type) {
    case CT_BOOL: memset(d, v.i != 0, (size_t)n); break;
    case CT_I32: for (int j = 0; j < n; j++) ((int32_t *)d)[j] = (int32_t)v.i; break;
    case CT_I64: for (int j = 0; j < n; j++) ((int64_t *)d)[j] = v.i; break;
    case CT_U32: for (int j = 0; j < n; j++) ((uint32_t *)d)[j] = (uint32_t)v.u; break;
    case CT_U64: for (int j = 0; j < n; j++) ((uint64_t *)d)[j] = v.u; break;
    case CT_F32: for (int j = 0; j < n; j++) ((float *)d)[j] = (float)v.f; break;
    case CT_F64: for (int j = 0; j < n; j++) ((double *)d)[j] = v.f; break;
    }
}

static int exec_one(vm_state *s, const vm_instr *in, int n)
{
    void *d = s->rp[in->dst] = vm_own(s, in->dst);
    switch (in->kind) {
    case VI_CONST: fill(d, in->type, in->value, n); return 0;
    case VI_SCALAR: {
        /* scalars are stored in their bound type; convert to the use type */
        int from = s->scalar_info[in->slot].type;
        plan_value v = s->scalars[in->slot];
        unsigned char tmp[8];
        memcpy(tmp, &v, 8);
        if (from == CT_BOOL || from == CT_I32) {
            int64_t i = v.i;
            if (from == CT_BOOL) {
                uint8_t b = i != 0;
                memcpy(tmp, &b, 1);
            } else {
                int32_t i32 = (int32_t)i;
                memcpy(tmp, &i32, 4);
            }
        } else if (from == CT_U32) {
            uint32_t u = (uint32_t)v.u;
            memcpy(tmp, &u, 4);
        } else if (from == CT_F32) {
            float f = (float)v.f;
            memcpy(tmp, &f, 4);
        }
        core_convert(in->type, d, from, tmp, 1);
        /* broadcast element 0 */
        int sz = plan_ct_size(in->type);
        for (int j = 1; j < n; j++) memcpy((char *)d + (size_t)j * sz, d, (size_t)sz);
        return 0;
    }
    case VI_INDEX: {
        const vm_var *v = &s->vars[in->slot];
        int64_t *o = d;
        if (v->mode == VAR_CONST)
            for (int j = 0; j < n; j++) o[j] = v->base;
        else if (v->mode == VAR_RAMP)
            for (int j = 0; j < n; j++) o[j] = v->base + j;
        else
            memcpy(o, v->vec, (size_t)n * 8);
        return 0;
    }
    case VI_PARAM: return 0; /* the caller wrote the register */
    case VI_LOAD:
        if (in->nsub == 0) {
            const core_buf *b = buf_of(s, in->slot);
            load_strided(b->dtype, b->data, 0, 0, n, d);
            return 0;
        }
        return run_load(s, in, n, d);
    case VI_CAST: core_convert(in->type, d, in->atype, vm_reg(s, in->a), n); return 0;
    case VI_OP:
        kern[in->op][in->atype](n, d, vm_reg(s, in->a), in->b >= 0 ? vm_reg(s, in->b) : NULL,
                                in->c >= 0 ? vm_reg(s, in->c) : NULL);
        return 0;
    }
    return RED_ERR_INTERNAL;
}

void vm_prologue(vm_state *s)
{
    for (int i = 0; i < s->prog->ninstr; i++)
        if (s->prog->instr[i].invariant) exec_one(s, &s->prog->instr[i], VM_B);
}

int vm_run(vm_state *s, int n)
{
    const vm_prog *p = s->prog;
    for (int i = 0; i < p->ninstr; i++) {
        const vm_instr *in = &p->instr[i];
        if (in->invariant) continue;
        int rc = exec_one(s, in, n);
        if (rc) return rc;
    }
    return 0;
}

void *vm_param_reg(const vm_state *s, int param)
{
    for (int i = 0; i < s->prog->ninstr; i++) {
        const vm_instr *in = &s->prog->instr[i];
        if (in->kind == VI_PARAM && in->slot == param) return vm_reg(s, in->dst);
    }
    return NULL;
}
