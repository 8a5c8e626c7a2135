/*
 * montecarlo_pi.c -- Monte Carlo estimate of pi as a count:
 *     count(x*x + y*y <= 1.0)
 * over points drawn uniformly in the unit square; 4 * count / n approaches pi.
 *
 * The coordinates are multiples of 2^-20, so x*x + y*y needs at most 41 significant bits and
 * is exact in double whatever the evaluation order or contraction into fused multiply-adds.
 * That makes the count itself exact: redjit's must equal the C loop's to the last point.
 */
#include <redjit.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const double PI = 3.14159265358979323846;

/* splitmix64: a small, well-mixed generator; any seed gives a full-period stream. */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* A uniform value in [0, 1) with 20 significant bits. */
static double coord(uint64_t *s)
{
    return (double)(next(s) >> 44) * 0x1p-20;
}

int main(void)
{
    enum { N = 1 << 22 };
    double *x = malloc(N * sizeof *x);
    double *y = malloc(N * sizeof *y);
    if (!x || !y) {
        fprintf(stderr, "montecarlo_pi: out of memory\n");
        return 1;
    }
    uint64_t seed = 20240601;
    for (int i = 0; i < N; i++) {
        x[i] = coord(&seed);
        y[i] = coord(&seed);
    }

    int64_t want = 0;
    for (int i = 0; i < N; i++)
        want += x[i] * x[i] + y[i] * y[i] <= 1.0;

    red_ctx *ctx;
    int rc = red_open(&ctx);
    if (rc != RED_OK) {
        fprintf(stderr, "montecarlo_pi: red_open: %s\n", red_errstr(rc));
        return 1;
    }

    /* The one-call interface: prepare (cached by text), bind, run and fetch the result. */
    red_binding b[2] = {{.name = "x"}, {.name = "y"}};
    const int64_t shape[1] = {N};
    red_array_init(&b[0].array, x, RED_F64, 1, shape, NULL);
    red_array_init(&b[1].array, y, RED_F64, 1, shape, NULL);

    int64_t inside = -1;                    /* count gives i64: ask for it as a 0-d i64 array */
    red_array res;
    red_array_init(&res, &inside, RED_I64, 0, NULL, NULL);
    rc = red_eval(ctx, "count(x*x + y*y <= 1.0)", b, 2, &res, 1, NULL);
    if (rc != RED_OK) {
        fprintf(stderr, "montecarlo_pi: red_eval: %s\n%s\n", red_errstr(rc), red_errmsg(ctx));
        red_close(ctx);
        return 1;
    }
    red_close(ctx);

    /* The estimate's standard error is 4 * sqrt(p (1 - p) / n), p = pi/4: about 0.0008 here. */
    double estimate = 4.0 * (double)inside / N;
    double sigma = 4.0 * sqrt(PI / 4 * (1 - PI / 4) / N);
    printf("montecarlo_pi: %d points, %lld inside (C loop: %lld), pi ~ %.6f (error %.2g, "
           "%.1f standard errors)\n", N, (long long)inside, (long long)want, estimate, estimate - PI,
           fabs(estimate - PI) / sigma);
    free(x);
    free(y);
    if (inside != want) {
        fprintf(stderr, "montecarlo_pi: count MISMATCH\n");
        return 1;
    }
    if (fabs(estimate - PI) > 5 * sigma) {
        fprintf(stderr, "montecarlo_pi: estimate too far from pi\n");
        return 1;
    }
    return 0;
}
