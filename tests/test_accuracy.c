/*
 * test_accuracy.c -- the CPU executor's f32 sums do not stall.  The GPU
 * results are checked against the CPU executor, so its error must stay far
 * below the tolerance of those checks however long the reduction is.  A
 * running f32 total stops growing once half its ulp exceeds the values
 * added: 2^26 + 1 is 2^26 in f32.  The executor sums blocks of at most 1024
 * values in f32 and carries the totals across blocks, chunks and partitions
 * in f64.  Before that, a keyed sum over 2^32 f16 values k/16 by i % 5 came
 * out 5.6% low on the CPU while the GPU was right.
 *
 * Data: one 2^26, the rest ones, so every exact total is an integer below
 * 2^53 and the f64 carry is exact wherever runs are single elements.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "redjit.h"

#define BIG 67108864.0  /* 2^26: its f32 ulp is 8 */

static double eval1(red_ctx *ctx, const char *text, red_binding *b, int nb, double want, double tol)
{
    double got = NAN;
    int rc = red_eval_f64(ctx, text, b, nb, &got);
    CHECK(rc == RED_OK, "%s: %s", text, red_errmsg(ctx));
    CHECK(fabs(got - want) <= tol, "%s: got %.17g, want %.17g (error %g, tolerance %g)", text, got, want,
          fabs(got - want), tol);
    return got;
}

int main(void)
{
    red_ctx *ctx = NULL;
    if (red_open(&ctx) != RED_OK) {
        printf("FAIL: red_open\n");
        return 1;
    }
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    const int64_t n = (int64_t)1 << 22;
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = i == 0 ? (float)BIG : 1.0f;
    red_binding b[2] = {{"x", {0}}, {"A", {0}}};
    int64_t shape[2] = {n / 1024, 1024};
    red_array_init(&b[0].array, x, RED_F32, 1, &n, NULL);
    red_array_init(&b[1].array, x, RED_F32, 2, shape, NULL);

    for (int threads = 1; threads <= 4; threads *= 4) {
        red_set_option(ctx, RED_OPT_THREADS, threads);
        /* keyed, alternating keys: every element is its own run, added to
         * its key's total one at a time.  Key 0 holds 2^26 and 2^21 - 1
         * ones; an f32 total lost all of the ones in 2^26's partition. */
        double key0 = BIG + (double)(n / 2 - 1);
        eval1(ctx, "m = sum(x[i]) by i % 2; max(m)", b, 2, (double)(float)key0, 0);
        eval1(ctx, "m = sum(x[i]) by i % 4; min(m)", b, 2, (double)(n / 4), 0);
        /* the whole array: within a block the f32 lanes may lose up to a
         * block's worth of ones next to 2^26, and no more */
        double all = BIG + (double)(n - 1);
        eval1(ctx, "sum(x)", b, 2, all, 1024.0);
        eval1(ctx, "sum(x[i] * 1) over i", b, 2, all, 1024.0);
        /* column sums: column 0 holds 2^26 and 4095 ones */
        eval1(ctx, "max(sum(A[i,j]) over i)", b, 2, (double)(float)(BIG + (double)(n / 1024 - 1)), 1024.0);
        /* row sums: row 0 holds 2^26 and 1023 ones */
        eval1(ctx, "max(sum(A[i,j]) over j)", b, 2, (double)(float)(BIG + 1023.0), 1024.0);
    }
    free(x);
    red_close(ctx);
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
