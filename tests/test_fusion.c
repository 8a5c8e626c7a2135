/*
 * test_fusion.c -- the planner's fusion (docs/language.md, "Fusion") as the plan shows it:
 * each composition form below must plan to the number of passes written beside it, through
 * the public API (red_explain_ex), name the online operator where one is made, and mark a
 * map that runs as a reduction's epilogue (or must not: it reads other rows, or an index of
 * another extent).  Values
 * are checked elsewhere (tests/cases/fusion.cases, on every backend and strategy); this test
 * fails when a change to the checker quietly gives a fused form its passes back.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <redjit.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"   /* forms[]: `lacks` mostly NULL */

static double A[4 * 6], B[4 * 6], V[24], W[24];
static int32_t SEG[24];

typedef struct form {
    const char *text;
    int passes;             /* "plan: N pass(es)" */
    const char *shows;      /* a phrase the plan must contain, or NULL */
    const char *lacks;      /* one it must not contain, or NULL */
} form;

#define EPI "the epilogue of pass"

static const form forms[] = {
    /* reductions over equal domains, across results and index names */
    {"sum(A[i,j]) over j, sum(A[i,j]*A[i,j]) over j", 1, NULL},
    {"r[i] = sum(A[i,j]) over j; s[k] = max(A[k,q]) over q", 1, NULL},
    {"sum(A[i,j]) over j, max(A[i,j]) over j, count(A[i,j] > 0) over j, argmin(A[i,j]) over j", 1, NULL},
    {"sum(A[i,j]*B[i,j]) over j, sum(A[i,j]) over j", 1, NULL},
    {"sum(A[i,j]) over j + sum(A[k,j]) over j", 2, NULL},            /* the map over both */
    {"sum(v[i]) by seg[i], max(v[i]) by seg[i], count(true) by seg[i]", 1, NULL},
    {"sum(x), sum(x*x), max(abs(x))", 1, NULL},
    /* dependent reductions rewritten online; the map after them reads results only */
    {"m = max(A[i,j]) over j; log(sum(exp(A[i,j] - m)) over j) + m", 2, "max and online sum of exp"},
    {"sum(exp(A[i,j] - max(A[i,j]) over j)) over j", 2, "max and online sum of exp"},
    {"m = max(A[i,j]) over j; s = sum(exp(A[i,j] - m)) over j; P[i,j] = exp(A[i,j] - m) / s", 2,
     "max and online sum of exp"},
    {"sum((x - mean(x)) * (x - mean(x)))", 2, "Welford"},
    {"sum(pow(A[i,j] - mean(A[i,j]) over j, 2)) over j", 2, "Welford"},
    {"mean(x), sum((x - mean(x)) * (x - mean(x)))", 3, "Welford"},  /* one over x, two maps */
    /* not fused: different domains, or a sum that is not of exp(X - max X) */
    {"sum(x), max(v)", 2, NULL},             /* other arrays: equal lengths are not known */
    {"sum(x), max(y)", 2, NULL},
    {"m = max(A[i,j]) over j; sum(exp(A[i,j] - m))", 2, NULL},      /* the sum is over all of A */
    {"m = max(A[i,j]) over j; sum(exp(B[i,j] - m)) over j", 2, NULL},
    /* maps run as the epilogue of the reduction they read */
    {"m = max(A[i,j]) over j; log(sum(exp(A[i,j] - m)) over j) + m", 2, "pass 1: map, " EPI " 0"},
    {"m = max(A[i,j]) over j; s = sum(exp(A[i,j] - m)) over j; P[i,j] = exp(A[i,j] - m) / s", 2,
     "pass 1: map, " EPI " 0"},
    {"r = max(abs(A[i,j])) over j; N[i,k] = A[i,k] / r", 2, EPI " 0"},
    {"sum(A[i,j]) over j / count(A[i,j] > 0) over j", 2, EPI " 0"},
    {"P[i,j] = A[i,j] + sum(A[i+1,k]) over k", 2, EPI " 0"},
    /* after a full reduction, a map of one element (the first of the two maps here) */
    {"mean(x), sum((x - mean(x)) * (x - mean(x)))", 3, "pass 1: map, " EPI " 0"},
    {"mean(x)", 2, "pass 1: map, " EPI " 0"},
    /* and not: other rows' results, an index of another array's extent, a full
     * reduction's map over its whole domain */
    {"sum(A[i,j]) over j + sum(A[k,j]) over j", 2, NULL, EPI},
    {"r = sum(A[i,j]) over j; P[i,k] = B[i,k] / r", 2, NULL, EPI},
    {"D[i] = x[i] - mean(x)", 2, NULL, EPI},
    {"P[i,j] = A[i,j] / sum(A[i,k]) over k in 0..3", 2, NULL, EPI},
};

static int npasses(const char *plan)
{
    const char *p = plan ? strstr(plan, "plan: ") : NULL;
    int n = -1;
    if (p && sscanf(p, "plan: %d", &n) != 1) n = -1;
    return n;
}

static red_array arr(double *data, int nd, int64_t d0, int64_t d1)
{
    int64_t shape[2] = {d0, d1};
    red_array a;
    red_array_init(&a, data, RED_F64, nd, shape, NULL);
    return a;
}

int main(void)
{
    for (int i = 0; i < 24; i++) {
        A[i] = (double)((i * 7) % 11) - 5;
        B[i] = (double)((i * 5) % 13) - 6;
        V[i] = W[i] = (double)i;
        SEG[i] = i / 5;
    }
    red_ctx *ctx;
    CHECK(red_open(&ctx) == RED_OK, "red_open");
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    red_array a = arr(A, 2, 4, 6), b = arr(B, 2, 4, 6), v = arr(V, 1, 24, 0), x = arr(W, 1, 24, 0);
    red_array y = arr(W, 1, 7, 0), seg;
    int64_t ns = 24;
    red_array_init(&seg, SEG, RED_I32, 1, &ns, NULL);
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        red_expr *e = NULL;
        int rc = red_prepare(ctx, forms[f].text, &e);
        CHECK(rc == RED_OK, "prepare `%s`: %s", forms[f].text, red_errmsg(ctx));
        if (rc != RED_OK) continue;
        /* every array, whether the form reads it or not (binding an unused name is allowed) */
        const char *names[] = {"A", "B", "v", "seg", "x", "y"};
        const red_array *arrays[] = {&a, &b, &v, &seg, &x, &y};
        for (int k = 0; k < 6; k++)
            CHECK(red_bind_array(e, names[k], arrays[k]) == RED_OK, "bind %s for `%s`: %s", names[k],
                  forms[f].text, red_expr_errmsg(e));
        const char *plan = NULL;
        rc = red_explain_ex(e, RED_EXPLAIN_PLAN, &plan);
        CHECK(rc == RED_OK, "explain `%s`: %s", forms[f].text, red_expr_errmsg(e));
        int n = npasses(plan);
        CHECK(n == forms[f].passes, "`%s`: %d passes, expected %d\n%s", forms[f].text, n, forms[f].passes,
              plan ? plan : "");
        if (forms[f].shows)
            CHECK(plan && strstr(plan, forms[f].shows), "`%s`: the plan does not show '%s'\n%s",
                  forms[f].text, forms[f].shows, plan ? plan : "");
        if (forms[f].lacks)
            CHECK(plan && !strstr(plan, forms[f].lacks), "`%s`: the plan shows '%s'\n%s", forms[f].text,
                  forms[f].lacks, plan ? plan : "");
        /* and it runs */
        CHECK(red_run(e) == RED_OK, "run `%s`: %s", forms[f].text, red_expr_errmsg(e));
        red_finalize(e);
    }
    red_close(ctx);
    printf("test_fusion: %d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
