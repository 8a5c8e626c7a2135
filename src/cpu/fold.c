/*
 * fold.c -- folds of a run of values into an accumulator: the built-in
 * operators (vectorised, in a fixed order), argmin / argmax, user operators
 * through their combine program, and the accumulators that hold the result.
 */
#include "exec_internal.h"

#include <math.h>

/* ---- folds of built-in operators over a run ---------------------------------------- */

#define FOLD_SUM(T, ACC, init, OPX)                                            \
    do {                                                                       \
        const T *restrict x = vals;                                            \
        int j = 0;                                                             \
        if (n < LANES) { /* short runs (keys, ranges): no lanes to set up */   \
            ACC s = init;                                                      \
            for (; j < n; j++) s = OPX(s, x[j]);                               \
            r = s;                                                             \
            break;                                                             \
        }                                                                      \
        ACC l[LANES];                                                          \
        for (int k = 0; k < LANES; k++) l[k] = init;                           \
        for (; j + LANES <= n; j += LANES)                                     \
            for (int k = 0; k < LANES; k++) l[k] = OPX(l[k], x[j + k]);        \
        for (; j < n; j++) l[0] = OPX(l[0], x[j]);                             \
        for (int w = LANES / 2; w > 0; w /= 2)                                 \
            for (int k = 0; k < w; k++) l[k] = OPX(l[k], l[k + w]);            \
        r = l[0];                                                              \
    } while (0)

/* Combine two values of a built-in operator (a then b). */
plan_value cpu_combine_builtin(int rop, int ct, plan_value a, plan_value b)
{
    plan_value r = a;
    int fl = CT_IS_FLOAT(ct), un = ct == CT_U32 || ct == CT_U64;
    switch (rop) {
    case ROP_SUM:
        if (fl) r.f = ct == CT_F32 ? (double)((float)a.f + (float)b.f) : a.f + b.f;
        else r.u = a.u + b.u;
        break;
    case ROP_PROD:
        if (fl) r.f = ct == CT_F32 ? (double)((float)a.f * (float)b.f) : a.f * b.f;
        else r.u = a.u * b.u;
        break;
    case ROP_MIN:
        if (fl) r.f = MINF(a.f, b.f);
        else if (un) r.u = MINI(a.u, b.u);
        else r.i = MINI(a.i, b.i);
        break;
    case ROP_MAX:
        if (fl) r.f = MAXF(a.f, b.f);
        else if (un) r.u = MAXI(a.u, b.u);
        else r.i = MAXI(a.i, b.i);
        break;
    case ROP_BAND: r.u = a.u & b.u; break;
    case ROP_BOR: r.u = a.u | b.u; break;
    case ROP_BXOR: r.u = a.u ^ b.u; break;
    case ROP_LAND: r.i = a.i && b.i; break;
    case ROP_LOR: r.i = a.i || b.i; break;
    }
    if (ct == CT_U32) r.u = (uint32_t)r.u;
    if (ct == CT_I32) r.i = (int32_t)r.i;
    return r;
}

/* The extreme of n floats and whether any of them is NaN, in 16-byte vectors
 * written out with GCC's vector extension (Clang has it too): GCC 12 kept
 * the lane-array form of this loop scalar, a maxss and a setp per element,
 * twice sum's time (bench/TUNING.md).  The lanes keep `v CMP lane ? v :
 * lane`, NaN aside in its own mask. */
typedef float vf32 __attribute__((vector_size(16)));
typedef int32_t vi32 __attribute__((vector_size(16)));
typedef double vf64 __attribute__((vector_size(16)));
typedef int64_t vi64 __attribute__((vector_size(16)));

#define DEF_EXTREME_F(name, T, VT, VI, CMP, init)                                   \
    static T name(const T *restrict x, int n, int *anynan)                          \
    {                                                                               \
        enum { W = 16 / sizeof(T), NV = 4 };                                        \
        T r = init;                                                                 \
        int nn = 0;                                                                 \
        if (n < NV * W) { /* short rows: no lanes to set up and fold */             \
            for (int j = 0; j < n; j++) {                                           \
                r = x[j] CMP r ? x[j] : r;                                          \
                nn |= x[j] != x[j];                                                 \
            }                                                                       \
            *anynan = nn;                                                           \
            return r;                                                               \
        }                                                                           \
        VT l[NV];                                                                   \
        VI nan[NV];                                                                 \
        for (int q = 0; q < NV; q++)                                                \
            for (int k = 0; k < W; k++) {                                           \
                l[q][k] = init;                                                     \
                nan[q][k] = 0;                                                      \
            }                                                                       \
        int j = 0;                                                                  \
        for (; j + NV * W <= n; j += NV * W)                                        \
            for (int q = 0; q < NV; q++) {                                          \
                VT v;                                                               \
                memcpy(&v, x + j + q * W, sizeof v);                                \
                VI m = (VI)(v CMP l[q]);                                            \
                l[q] = (VT)(((VI)v & m) | ((VI)l[q] & ~m));                         \
                nan[q] |= (VI)(v != v);                                             \
            }                                                                       \
        for (int q = 0; q < NV; q++)                                                \
            for (int k = 0; k < W; k++) {                                           \
                r = l[q][k] CMP r ? l[q][k] : r;                                    \
                nn |= nan[q][k] != 0;                                               \
            }                                                                       \
        for (; j < n; j++) {                                                        \
            r = x[j] CMP r ? x[j] : r;                                              \
            nn |= x[j] != x[j];                                                     \
        }                                                                           \
        *anynan = nn;                                                               \
        return r;                                                                   \
    }

DEF_EXTREME_F(max_f32, float, vf32, vi32, >, -INFINITY)
DEF_EXTREME_F(min_f32, float, vf32, vi32, <, INFINITY)
DEF_EXTREME_F(max_f64, double, vf64, vi64, >, -INFINITY)
DEF_EXTREME_F(min_f64, double, vf64, vi64, <, INFINITY)

/* min / max of floats: NaN wins, as in NumPy */
#define FOLD_MINMAX_F(fn)                                                      \
    do {                                                                       \
        int anynan;                                                            \
        double r = fn(vals, n, &anynan);                                       \
        out.f = anynan ? (double)NAN : r;                                      \
    } while (0)

/* Fold n values (compute type ct) into r with a built-in operator. */
plan_value cpu_fold_values(int rop, int ct, const void *vals, int n)
{
    plan_value out = plan_identity(rop, ct);
#define CASE_T(CT, T, ACC, init, OPX, SET)   \
    case CT: {                               \
        ACC r;                               \
        FOLD_SUM(T, ACC, init, OPX);         \
        SET;                                 \
        break;                               \
    }
    switch (rop) {
    case ROP_SUM:
        switch (ct) {
            CASE_T(CT_I64, int64_t, uint64_t, 0, ADDU, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, 0, ADDU, out.u = r)
            CASE_T(CT_F32, float, float, 0.0f, ADDF, out.f = r)
            CASE_T(CT_F64, double, double, 0.0, ADDF, out.f = r)
        }
        break;
    case ROP_PROD:
        switch (ct) {
            CASE_T(CT_I64, int64_t, uint64_t, 1, MULU, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, 1, MULU, out.u = r)
            CASE_T(CT_F32, float, float, 1.0f, MULF, out.f = r)
            CASE_T(CT_F64, double, double, 1.0, MULF, out.f = r)
        }
        break;
    case ROP_MIN:
        switch (ct) {
            CASE_T(CT_BOOL, uint8_t, uint8_t, 1, MINI, out.i = r)
            CASE_T(CT_I32, int32_t, int32_t, INT32_MAX, MINI, out.i = r)
            CASE_T(CT_I64, int64_t, int64_t, INT64_MAX, MINI, out.i = r)
            CASE_T(CT_U32, uint32_t, uint32_t, UINT32_MAX, MINI, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, UINT64_MAX, MINI, out.u = r)
        case CT_F32: FOLD_MINMAX_F(min_f32); break;
        case CT_F64: FOLD_MINMAX_F(min_f64); break;
        }
        break;
    case ROP_MAX:
        switch (ct) {
            CASE_T(CT_BOOL, uint8_t, uint8_t, 0, MAXI, out.i = r)
            CASE_T(CT_I32, int32_t, int32_t, INT32_MIN, MAXI, out.i = r)
            CASE_T(CT_I64, int64_t, int64_t, INT64_MIN, MAXI, out.i = r)
            CASE_T(CT_U32, uint32_t, uint32_t, 0, MAXI, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, 0, MAXI, out.u = r)
        case CT_F32: FOLD_MINMAX_F(max_f32); break;
        case CT_F64: FOLD_MINMAX_F(max_f64); break;
        }
        break;
    case ROP_BAND:
    case ROP_LAND:
        switch (ct) {
            CASE_T(CT_BOOL, uint8_t, uint8_t, 1, ANDI, out.i = r)
            CASE_T(CT_I32, int32_t, int32_t, -1, ANDI, out.i = r)
            CASE_T(CT_I64, int64_t, int64_t, -1, ANDI, out.i = r)
            CASE_T(CT_U32, uint32_t, uint32_t, UINT32_MAX, ANDI, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, UINT64_MAX, ANDI, out.u = r)
        }
        break;
    case ROP_BOR:
    case ROP_LOR:
        switch (ct) {
            CASE_T(CT_BOOL, uint8_t, uint8_t, 0, ORI, out.i = r)
            CASE_T(CT_I32, int32_t, int32_t, 0, ORI, out.i = r)
            CASE_T(CT_I64, int64_t, int64_t, 0, ORI, out.i = r)
            CASE_T(CT_U32, uint32_t, uint32_t, 0, ORI, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, 0, ORI, out.u = r)
        }
        break;
    case ROP_BXOR:
        switch (ct) {
            CASE_T(CT_BOOL, uint8_t, uint8_t, 0, XORI, out.i = r)
            CASE_T(CT_I32, int32_t, int32_t, 0, XORI, out.i = r)
            CASE_T(CT_I64, int64_t, int64_t, 0, XORI, out.i = r)
            CASE_T(CT_U32, uint32_t, uint32_t, 0, XORI, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, 0, XORI, out.u = r)
        }
        break;
    }
#undef CASE_T
    return out;
}

/* argmin / argmax: the first extreme; NaN counts as the extreme. */
static int arg_better(int rop, int ct, plan_value cand, plan_value best)
{
    if (CT_IS_FLOAT(ct)) {
        if (cand.f != cand.f) return best.f == best.f;
        return rop == ROP_ARGMAX ? cand.f > best.f : cand.f < best.f;
    }
    if (ct == CT_U32 || ct == CT_U64) return rop == ROP_ARGMAX ? cand.u > best.u : cand.u < best.u;
    return rop == ROP_ARGMAX ? cand.i > best.i : cand.i < best.i;
}

/* A run's candidate for argmin / argmax, in two passes over values that are
 * in L1: the run's min or max (cpu_fold_values, vectorised; NaN where there is
 * one), then, only when it beats the best so far, the first element equal to
 * it (the first NaN).  One pass comparing each element with the best was
 * three to four times max(x)'s time (bench/TUNING.md). */
#define FIRST_OF(T, m)                                                         \
    do {                                                                       \
        const T *x = vals;                                                     \
        if ((m) != (m))                                                        \
            while (x[j] == x[j]) j++;                                          \
        else                                                                   \
            while (x[j] != (m)) j++;                                           \
    } while (0)

/* nanargmin / nanargmax: the run's elements that are not NaN, in order, each
 * taken where it beats the best so far (a later equal one does not). */
#define FOLD_SKIPNAN(T)                                                                     \
    do {                                                                                    \
        const T *x = vals;                                                                  \
        int has = a->has;                                                                   \
        T best = has ? (T)a->v[0].f : 0;                                                    \
        int64_t at = has ? a->idx : -1;                                                     \
        for (int j = 0; j < n; j++) {                                                       \
            T v = x[j];                                                                     \
            if (v == v && (!has || (rop == ROP_ARGMAX ? v > best : v < best))) {            \
                best = v;                                                                   \
                at = idx0 + j;                                                              \
                has = 1;                                                                    \
            }                                                                               \
        }                                                                                   \
        if (has) {                                                                          \
            a->v[0].f = best;                                                               \
            a->idx = at;                                                                    \
            a->has = 1;                                                                     \
        }                                                                                   \
    } while (0)

void cpu_fold_arg(int rop, int skipnan, int ct, const void *vals, int n, int64_t idx0, cacc *a)
{
    if (n <= 0) return;
    if (skipnan && ct == CT_F32) {
        FOLD_SKIPNAN(float);
        return;
    }
    if (skipnan && ct == CT_F64) {
        FOLD_SKIPNAN(double);
        return;
    }
    plan_value m = cpu_fold_values(rop == ROP_ARGMAX ? ROP_MAX : ROP_MIN, ct, vals, n);
    if (a->has && !arg_better(rop, ct, m, a->v[0])) return;
    int j = 0;
    switch (ct) {
    case CT_BOOL: FIRST_OF(uint8_t, (uint8_t)m.i); break;
    case CT_I32: FIRST_OF(int32_t, (int32_t)m.i); break;
    case CT_I64: FIRST_OF(int64_t, m.i); break;
    case CT_U32: FIRST_OF(uint32_t, (uint32_t)m.u); break;
    case CT_U64: FIRST_OF(uint64_t, m.u); break;
    case CT_F32: FIRST_OF(float, (float)m.f); break;
    case CT_F64: FIRST_OF(double, m.f); break;
    }
    a->v[0] = core_read_ct(vals, ct, j);
    a->idx = idx0 + j;
    a->has = 1;
}

/* ---- user-defined operators ----------------------------------------------------------- */

static void deinterleave(int size, const unsigned char *src, unsigned char *a, unsigned char *b, int h)
{
    for (int j = 0; j < h; j++) {
        memcpy(a + (size_t)j * size, src + (size_t)(2 * j) * size, (size_t)size);
        memcpy(b + (size_t)j * size, src + (size_t)(2 * j + 1) * size, (size_t)size);
    }
}

/* combine(acc, x) for one element pair, through the combine program */
static void user_combine1(const plan_red *rd, ustate *u, plan_value *acc, const plan_value *x)
{
    for (int c = 0; c < rd->ncomp; c++) {
        int sz = plan_ct_size(rd->acc[c]);
        void *pa = vm_param_reg(&u->st, 2 * c), *pb = vm_param_reg(&u->st, 2 * c + 1);
        plan_value va = acc[c], vb = x[c];
        unsigned char ta[8], tb[8];
        /* plan_value holds i32/u32/f32 widened: narrow through the cast path */
        core_write_ct(ta, rd->acc[c], 0, va);
        core_write_ct(tb, rd->acc[c], 0, vb);
        if (pa) memcpy(pa, ta, (size_t)sz);
        if (pb) memcpy(pb, tb, (size_t)sz);
    }
    vm_run(&u->st, 1);
    for (int c = 0; c < rd->ncomp; c++) acc[c] = core_read_ct(vm_reg(&u->st, u->st.prog->out[c]), rd->acc[c], 0);
}

/* Fold n elements (component registers vals[c]) in order into acc by a
 * pairwise tree over adjacent elements: order preserved, vectorised. */
static void fold_user(const plan_red *rd, ustate *u, void *const *vals, int n, cacc *a)
{
    if (n <= 0) return;
    int k = rd->ncomp;
    if (!a->has && rd->neutral) {
        /* a neutral identity is where folds start (as on the GPU): for the
         * planner's online sum of exp, identity + (-inf, 1) is NaN, as
         * exp(-inf - -inf) is in the expression */
        memcpy(a->v, rd->identity, sizeof(plan_value) * k);
        a->has = 1;
    }
    if (cpu_fold_online(rd, vals, n, a)) return;
    unsigned char *w[PLAN_MAX_COMP];
    for (int c = 0; c < k; c++) {
        w[c] = u->work + (size_t)c * VM_B * 8;
        memcpy(w[c], vals[c], (size_t)n * plan_ct_size(rd->acc[c]));
    }
    int m = n;
    while (m > 1) {
        int h = m / 2;
        for (int c = 0; c < k; c++) {
            int sz = plan_ct_size(rd->acc[c]);
            void *pa = vm_param_reg(&u->st, 2 * c), *pb = vm_param_reg(&u->st, 2 * c + 1);
            /* parameters not used by the combine have no register: use a
             * scratch so the layout stays the same */
            unsigned char *da = pa ? pa : (unsigned char *)u->st.scratch;
            unsigned char *db = pb ? pb : (unsigned char *)u->st.scratch2;
            deinterleave(sz, w[c], da, db, h);
        }
        vm_run(&u->st, h);
        for (int c = 0; c < k; c++) {
            int sz = plan_ct_size(rd->acc[c]);
            if (m & 1) memcpy(w[c] + (size_t)h * sz, w[c] + (size_t)(m - 1) * sz, (size_t)sz);
            memcpy(w[c], vm_reg(&u->st, u->st.prog->out[c]), (size_t)h * sz);
        }
        m = h + (m & 1);
    }
    plan_value x[PLAN_MAX_COMP];
    for (int c = 0; c < k; c++) x[c] = core_read_ct(w[c], rd->acc[c], 0);
    if (!a->has) {
        memcpy(a->v, x, sizeof(plan_value) * k);
        a->has = 1;
        return;
    }
    user_combine1(rd, u, a->v, x);
}

/* ---- accumulators ------------------------------------------------------------------- */

void cpu_acc_fold_run(const plan_red *rd, ustate *u, vm_state *st, int root, const run *r,
                         int64_t idx0, cacc *a)
{
    int start = r->start, n = r->len;
    if (rd->rop == ROP_USER) {
        void *vals[PLAN_MAX_COMP];
        for (int c = 0; c < rd->ncomp; c++)
            vals[c] = (unsigned char *)vm_reg(st, st->prog->out[root + c]) + (size_t)start * plan_ct_size(rd->acc[c]);
        fold_user(rd, u, vals, n, a);
        return;
    }
    const unsigned char *v = (const unsigned char *)vm_reg(st, st->prog->out[root]) + (size_t)start * plan_ct_size(rd->acc[0]);
    if (rd->rop == ROP_ARGMIN || rd->rop == ROP_ARGMAX) {
        cpu_fold_arg(rd->rop, rd->skipnan, rd->acc[0], v, n, idx0, a);
        return;
    }
    plan_value x = cpu_fold_values(rd->rop, rd->acc[0], v, n);
    a->v[0] = a->has ? cpu_combine_builtin(rd->rop, acc_ct(rd), a->v[0], x) : x;
    a->has = 1;
}

void cpu_acc_combine(const plan_red *rd, ustate *u, cacc *a, const cacc *b)
{
    if (!b->has) return;
    if (!a->has) {
        *a = *b;
        return;
    }
    if (rd->rop == ROP_USER) {
        user_combine1(rd, u, a->v, b->v);
    } else if (rd->rop == ROP_ARGMIN || rd->rop == ROP_ARGMAX) {
        if (arg_better(rd->rop, rd->acc[0], b->v[0], a->v[0]) ||
            (!arg_better(rd->rop, rd->acc[0], a->v[0], b->v[0]) && b->idx < a->idx))
            *a = *b;
    } else {
        a->v[0] = cpu_combine_builtin(rd->rop, acc_ct(rd), a->v[0], b->v[0]);
    }
}
