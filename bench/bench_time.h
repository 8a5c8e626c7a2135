/* bench_time.h -- the clock and the median the benchmark programs share (header-only). */
#ifndef REDJIT_BENCH_TIME_H
#define REDJIT_BENCH_TIME_H

#include <stdlib.h>
#include <time.h>

/* Monotonic wall clock in milliseconds. */
static inline double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n), n > 0; sorts v in place (v[0] is then the smallest). */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
