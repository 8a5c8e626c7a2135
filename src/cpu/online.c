/*
 * online.c -- the planner's online operators (check/fuse.c) folded natively:
 * typed loops over a run of elements instead of the combine program, giving
 * the value the combine would, up to the order of the additions.  The
 * combine program still merges the partial results of threads and chunks
 * (cpu_acc_combine).
 */
#include <math.h>

#include "cpu/exec_internal.h"

/* The language's max: NaN propagates (vm.c's k_max). */
#define LANG_MAX(a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))

/* A run folded as one partial result, then merged into the accumulator by
 * the operator's combine: the run is at most a VM block (in cache), so two
 * plain loops over it (a maximum or a sum, then the sum that depends on it)
 * cost about what the two-pass form does, where a step per element would
 * pay an exp comparison chain or a division for every element. */

/* (M, s): the run's maximum m and the sum of exp(x - m) over it, with the
 * combine's conventions (equal maxima count 1: a run all -inf gives its
 * length; a NaN makes m NaN and s NaN), merged as exp_sum_combine does. */
#define EXP_SUM_RUN(MT, ST, EXP, FABS)                                            \
    do {                                                                         \
        const MT *x = (const MT *)vals[0];                                      \
        /* eight chains: one would wait on each max's and add's latency */    \
        MT mk[8];                                                               \
        for (int k = 0; k < 8; k++) mk[k] = x[0];                               \
        int j8 = n & ~7;                                                        \
        for (int j = 0; j < j8; j += 8)                                         \
            for (int k = 0; k < 8; k++) mk[k] = x[j + k] > mk[k] ? x[j + k] : mk[k]; \
        for (int j = j8; j < n; j++) mk[0] = x[j] > mk[0] ? x[j] : mk[0];       \
        MT mc = mk[0];                                                          \
        for (int k = 1; k < 8; k++) mc = mk[k] > mc ? mk[k] : mc;               \
        ST sc = 0;                                                              \
        if (mc == -(MT)INFINITY) {                                              \
            sc = (ST)n;                                                         \
        } else {                                                                \
            /* the exps into a buffer first: a sum carried across the calls */ \
            ST e[VM_B], sk[8] = {0, 0, 0, 0, 0, 0, 0, 0};                       \
            for (int j = 0; j < n; j++) e[j] = (ST)EXP(x[j] - mc);              \
            for (int j = 0; j < j8; j += 8)                                     \
                for (int k = 0; k < 8; k++) sk[k] += e[j + k];                  \
            for (int j = j8; j < n; j++) sk[0] += e[j];                         \
            for (int k = 0; k < 8; k++) sc += sk[k];                            \
        }                                                                       \
        if (sc != sc || mc == -(MT)INFINITY)                                    \
            for (int j = 0; j < n; j++) /* NaN wins the max, as in LANG_MAX */  \
                if (x[j] != x[j]) mc = x[j], sc = (ST)NAN;                      \
        MT m = (MT)a->v[0].f;                                                   \
        ST s = (ST)a->v[1].f;                                                   \
        int gt = mc > m;                                                        \
        ST f = m == mc ? (ST)1 : (ST)EXP(-FABS(mc - m));                        \
        s = gt ? s * f + sc : s + sc * f;                                       \
        a->v[0].f = LANG_MAX(m, mc);                                            \
        a->v[1].f = s;                                                          \
    } while (0)

/* (n, mean, M2): the run's mean and centred sum of squares (two loops, sums
 * carried in double), merged as welford_combine does (Chan et al.). */
#define WELFORD_RUN(FT, ST)                                                      \
    do {                                                                         \
        const FT *x = (const FT *)vals[1];                                      \
        double sk[8] = {0, 0, 0, 0, 0, 0, 0, 0}, qk[8] = {0, 0, 0, 0, 0, 0, 0, 0}; \
        int j8 = n & ~7;                                                        \
        for (int j = 0; j < j8; j += 8)                                         \
            for (int k = 0; k < 8; k++) sk[k] += x[j + k];                      \
        for (int j = j8; j < n; j++) sk[0] += x[j];                             \
        double sum = 0, sq = 0;                                                 \
        for (int k = 0; k < 8; k++) sum += sk[k];                               \
        FT mc = (FT)(sum / n);                                                  \
        for (int j = 0; j < j8; j += 8)                                         \
            for (int k = 0; k < 8; k++) qk[k] += (double)((x[j + k] - mc) * (x[j + k] - mc)); \
        for (int j = j8; j < n; j++) qk[0] += (double)((x[j] - mc) * (x[j] - mc)); \
        for (int k = 0; k < 8; k++) sq += qk[k];                                \
        ST qc = (ST)sq;                                                         \
        int64_t na = a->v[0].i, nn = na + n;                                    \
        FT ma = (FT)a->v[1].f;                                                  \
        ST qa = (ST)a->v[2].f;                                                  \
        if (na == 0) {                                                          \
            a->v[1].f = mc;                                                     \
            a->v[2].f = qc;                                                     \
        } else {                                                                \
            FT delta = mc - ma, w = (FT)n / (FT)nn;                             \
            FT cross = (delta * delta) * ((FT)na * w);                          \
            a->v[1].f = (FT)(ma + delta * w);                                   \
            a->v[2].f = (ST)((qa + qc) + (ST)cross);                            \
        }                                                                       \
        a->v[0].i = nn;                                                         \
    } while (0)

int cpu_fold_online(const plan_red *rd, void *const *vals, int n, cacc *a)
{
    if (!rd->neutral || !rd->online || !a->has) return 0;   /* fold_user starts a from the identity */
    int t0 = rd->acc[0], t1 = rd->acc[1];
    if (rd->online == PLAN_ONLINE_EXP_SUM) {
        if (t0 == CT_F32 && t1 == CT_F32) EXP_SUM_RUN(float, float, expf, fabsf);
        else if (t0 == CT_F32 && t1 == CT_F64) EXP_SUM_RUN(float, double, expf, fabsf);
        else if (t0 == CT_F64 && t1 == CT_F64) EXP_SUM_RUN(double, double, exp, fabs);
        else if (t0 == CT_F64 && t1 == CT_F32) EXP_SUM_RUN(double, float, exp, fabs);
        else return 0;
        return 1;
    }
    int t2 = rd->acc[2];
    if (rd->online == PLAN_ONLINE_WELFORD && t0 == CT_I64) {
        if (t1 == CT_F32 && t2 == CT_F32) WELFORD_RUN(float, float);
        else if (t1 == CT_F64 && t2 == CT_F64) WELFORD_RUN(double, double);
        else if (t1 == CT_F32 && t2 == CT_F64) WELFORD_RUN(float, double);
        else if (t1 == CT_F64 && t2 == CT_F32) WELFORD_RUN(double, float);
        else return 0;
        return 1;
    }
    return 0;
}
