/*
 * dot.c -- dot product of two vectors with the prepare / bind / run interface:
 *     reduce(+, a[i]*b[i]) over i
 * and a check against a plain C loop.
 */
#include <redjit.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Report a failed redjit call with the library's detailed message and return 1. */
static int report(const char *what, int rc, const char *msg)
{
    fprintf(stderr, "dot: %s failed: %s\n%s\n", what, red_errstr(rc), msg);
    return 1;
}

int main(void)
{
    enum { N = 1000003 };                     /* not a power of two on purpose */
    double *a = malloc(N * sizeof *a);
    double *b = malloc(N * sizeof *b);
    if (!a || !b) {
        fprintf(stderr, "dot: out of memory\n");
        return 1;
    }
    for (int i = 0; i < N; i++) {
        a[i] = sin(0.001 * i);
        b[i] = 1.0 / (1.0 + 0.0001 * i);
    }

    /* The reference: a left-to-right loop in double, and the sum of |terms| that bounds how
     * far any other summation order may land from it. */
    double want = 0, mag = 0;
    for (int i = 0; i < N; i++) {
        want += a[i] * b[i];
        mag += fabs(a[i] * b[i]);
    }

    red_ctx *ctx = NULL;
    red_expr *e = NULL;
    int rc = red_open(&ctx);
    if (rc != RED_OK)
        return report("red_open", rc, "");

    /* Parse once; the expression can then be run any number of times with new bindings. */
    rc = red_prepare(ctx, "reduce(+, a[i]*b[i]) over i", &e);
    if (rc != RED_OK) {
        report("red_prepare", rc, red_errmsg(ctx));
        goto out;
    }

    /* Descriptors are copied, data is borrowed: a and b must stay alive until red_run returns. */
    red_array aa, ba;
    const int64_t shape[1] = {N};
    red_array_init(&aa, a, RED_F64, 1, shape, NULL);
    red_array_init(&ba, b, RED_F64, 1, shape, NULL);
    if ((rc = red_bind_array(e, "a", &aa)) != RED_OK ||
        (rc = red_bind_array(e, "b", &ba)) != RED_OK) {
        report("red_bind_array", rc, red_expr_errmsg(e));
        goto out;
    }

    rc = red_run(e);
    if (rc != RED_OK) {
        report("red_run", rc, red_expr_errmsg(e));
        goto out;
    }
    double got;
    rc = red_result_f64(e, 0, &got);
    if (rc != RED_OK) {
        report("red_result_f64", rc, red_expr_errmsg(e));
        goto out;
    }

    /* Sums in a different order differ by at most about n * eps * sum|terms|; in practice far
     * less.  1e-12 relative to the magnitude leaves room for any order. */
    double err = fabs(got - want);
    printf("dot: n = %d, redjit %.15g, C loop %.15g, |difference| = %.3g (%.3g of sum|a*b|)\n",
           N, got, want, err, err / mag);
    if (!(err <= 1e-12 * mag)) {
        fprintf(stderr, "dot: MISMATCH\n");
        rc = -1;
    }

out:
    red_finalize(e);
    red_close(ctx);
    free(a);
    free(b);
    return rc == RED_OK ? 0 : 1;
}
