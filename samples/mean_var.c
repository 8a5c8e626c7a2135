/*
 * mean_var.c -- mean and variance in one pass over the data:
 *     mean(x), mean(x*x)
 * is one expression with two results; both reductions walk the same elements, so redjit
 * computes them together.  var = E[x^2] - E[x]^2, checked against a two-pass C computation.
 * (E[x^2] - E[x]^2 cancels badly when the mean is large against the spread; this data keeps
 * them comparable.  For hard cases, centre the data first: mean((x - m)*(x - m)).)
 */
#include <redjit.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    enum { N = 500000 };
    double *x = malloc(N * sizeof *x);
    if (!x) {
        fprintf(stderr, "mean_var: out of memory\n");
        return 1;
    }
    /* Roughly normal values around 3 with standard deviation 2: a sum of 12 uniforms. */
    uint64_t s = 7;
    for (int i = 0; i < N; i++) {
        double u = 0;
        for (int t = 0; t < 12; t++) {
            s = s * 6364136223846793005u + 1442695040888963407u;  /* LCG, top bits used */
            u += (double)(s >> 11) * 0x1p-53;
        }
        x[i] = 3.0 + 2.0 * (u - 6.0);
    }

    /* Reference: two passes, the textbook way. */
    double sum = 0;
    for (int i = 0; i < N; i++)
        sum += x[i];
    double want_mean = sum / N, ss = 0;
    for (int i = 0; i < N; i++)
        ss += (x[i] - want_mean) * (x[i] - want_mean);
    double want_var = ss / N;

    red_ctx *ctx;
    int rc = red_open(&ctx);
    if (rc != RED_OK) {
        fprintf(stderr, "mean_var: red_open: %s\n", red_errstr(rc));
        return 1;
    }
    red_binding b = {.name = "x"};
    red_array_init(&b.array, x, RED_F64, 1, (const int64_t[]){N}, NULL);

    /* Results written straight into two doubles, described as 0-d arrays. */
    double m1, m2;
    red_array res[2];
    red_array_init(&res[0], &m1, RED_F64, 0, NULL, NULL);
    red_array_init(&res[1], &m2, RED_F64, 0, NULL, NULL);
    int count = 0;
    rc = red_eval(ctx, "mean(x), mean(x*x)", &b, 1, res, 2, &count);
    if (rc != RED_OK) {
        fprintf(stderr, "mean_var: red_eval: %s\n%s\n", red_errstr(rc), red_errmsg(ctx));
        red_close(ctx);
        return 1;
    }
    red_close(ctx);
    free(x);

    double var = m2 - m1 * m1;
    printf("mean_var: n = %d, %d results: mean %.12f (C %.12f), variance %.12f (C %.12f)\n", N,
           count, m1, want_mean, var, want_var);
    /* Relative errors: the sums are good to ~1e-15; the subtraction loses a factor
     * E[x^2]/var (about 3 here), so 1e-10 is generous. */
    if (count != 2 || !(fabs(m1 - want_mean) <= 1e-12 * fabs(want_mean)) ||
        !(fabs(var - want_var) <= 1e-10 * want_var)) {
        fprintf(stderr, "mean_var: MISMATCH\n");
        return 1;
    }
    return 0;
}
