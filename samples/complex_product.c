/*
 * complex_product.c -- a user-defined reduction operator: the product of many complex numbers,
 * each given as a (re, im) pair of arrays:
 *     op cmul(a, b) = (a.0*b.0 - a.1*b.1, a.0*b.1 + a.1*b.0) identity (1, 0);
 *     reduce(cmul, (re[i], im[i])) over i
 * The reduction is tuple-valued, so it gives two results: the real and imaginary parts.
 * The factors lie close to the unit circle so that the product neither overflows nor
 * underflows.  Checked against a left-to-right C loop.
 */
#include <redjit.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const char *EXPR =
    "op cmul(a, b) = (a.0*b.0 - a.1*b.1, a.0*b.1 + a.1*b.0) identity (1, 0)\n"
    "reduce(cmul, (re[i], im[i])) over i\n";

int main(void)
{
    enum { N = 100000 };
    double *re = malloc(N * sizeof *re);
    double *im = malloc(N * sizeof *im);
    if (!re || !im) {
        fprintf(stderr, "complex_product: out of memory\n");
        return 1;
    }
    /* z_i = r_i * exp(i * theta_i), r_i within 0.1% of 1. */
    uint64_t s = 99;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        double u1 = (double)(s >> 11) * 0x1p-53;
        s = s * 6364136223846793005u + 1442695040888963407u;
        double u2 = (double)(s >> 11) * 0x1p-53;
        double r = 1.0 + 1e-3 * (u1 - 0.5), theta = 6.283185307179586 * u2;
        re[i] = r * cos(theta);
        im[i] = r * sin(theta);
    }

    double wre = 1, wim = 0;                        /* the reference product */
    for (int i = 0; i < N; i++) {
        double t = wre * re[i] - wim * im[i];
        wim = wre * im[i] + wim * re[i];
        wre = t;
    }

    red_ctx *ctx = NULL;
    red_expr *e = NULL;
    int status = 1;
    int rc = red_open(&ctx);
    if (rc != RED_OK) {
        fprintf(stderr, "complex_product: red_open: %s\n", red_errstr(rc));
        return 1;
    }
    rc = red_prepare(ctx, EXPR, &e);
    if (rc != RED_OK) {
        fprintf(stderr, "complex_product: red_prepare: %s\n%s\n", red_errstr(rc),
                red_errmsg(ctx));
        goto out;
    }
    red_array ra, ia;
    red_array_init(&ra, re, RED_F64, 1, (const int64_t[]){N}, NULL);
    red_array_init(&ia, im, RED_F64, 1, (const int64_t[]){N}, NULL);
    double gre, gim;
    if ((rc = red_bind_array(e, "re", &ra)) != RED_OK ||
        (rc = red_bind_array(e, "im", &ia)) != RED_OK || (rc = red_run(e)) != RED_OK ||
        (rc = red_result_f64(e, 0, &gre)) != RED_OK || (rc = red_result_f64(e, 1, &gim)) != RED_OK) {
        fprintf(stderr, "complex_product: %s\n%s\n", red_errstr(rc), red_expr_errmsg(e));
        goto out;
    }
    if (red_result_count(e) != 2) {
        fprintf(stderr, "complex_product: %d results, want 2 (re, im)\n", red_result_count(e));
        goto out;
    }

    /* Each multiplication adds a relative error of a few ulps to the product; over N factors
     * and any grouping that stays far below 1e-9 of its modulus. */
    double modulus = hypot(wre, wim);
    double err = hypot(gre - wre, gim - wim);
    printf("complex_product: %d factors: redjit (%.12f, %.12f), C loop (%.12f, %.12f), "
           "|difference| %.2g of |product| %.6f\n", N, gre, gim, wre, wim, err / modulus, modulus);
    if (!(err <= 1e-9 * modulus)) {
        fprintf(stderr, "complex_product: MISMATCH\n");
        goto out;
    }
    status = 0;

out:
    red_finalize(e);
    red_close(ctx);
    free(re);
    free(im);
    return status;
}
