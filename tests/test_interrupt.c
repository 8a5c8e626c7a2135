/*
 * test_interrupt.c -- red_interrupt stops a running evaluation (here on the
 * CPU executor, between chunks) with RED_ERR_INTERRUPTED, and the context
 * evaluates correctly afterwards.  An interrupt landing anywhere in a run
 * gives RED_ERR_INTERRUPTED or the right result, never another error (an
 * interrupted argmax once reported "argmax of an empty set").
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "redjit.h"

static red_ctx *ctx;
static long delay_us = 2000;

static void *interrupter(void *arg)
{
    (void)arg;
    struct timespec ts = {0, delay_us * 1000};
    nanosleep(&ts, NULL);
    red_interrupt(ctx);
    return NULL;
}

/* Every kind of pass, interrupted after 0.1 to 410 ms: each status must be
 * RED_ERR_INTERRUPTED, or RED_OK with the value of an uninterrupted run. */
static int anywhere(const float *x, int64_t n, int *pass)
{
    static const char *const texts[] = {
        "argmax(x)",
        "argmin(x[i] * 0.5) over i",
        "max(argmax(A[i,j]) over j)",
        "max(argmax(x[i]) by seg[i])",
        "count((sum(x[i]) by seg[i]) > 0)",
        "count(x > 1)",
    };
    int64_t rc2[2] = {n / 1024, 1024};
    int32_t *seg = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) seg[i] = (int32_t)(i / 4096);
    red_binding b[3] = {{"x", {0}}, {"A", {0}}, {"seg", {0}}};
    red_array_init(&b[0].array, (void *)x, RED_F32, 1, &n, NULL);
    red_array_init(&b[1].array, (void *)x, RED_F32, 2, rc2, NULL);
    red_array_init(&b[2].array, seg, RED_I32, 1, &n, NULL);
    int fail = 0;
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        double want = 0;
        int rc = red_eval_f64(ctx, texts[t], b, 3, &want);
        if (rc != RED_OK) {
            printf("FAIL: %s without an interrupt: %s\n", texts[t], red_errmsg(ctx));
            fail++;
            continue;
        }
        int odd = 0, stopped = 0;
        for (delay_us = 100; delay_us <= 409600; delay_us *= 2) {
            pthread_t th;
            pthread_create(&th, NULL, interrupter, NULL);
            double v = -1;
            rc = red_eval_f64(ctx, texts[t], b, 3, &v);
            pthread_join(th, NULL);
            if (rc == RED_ERR_INTERRUPTED) stopped++;
            else if (rc != RED_OK || v != want) {
                printf("FAIL: %s interrupted after %ld us: status %d (%s), value %.17g, want %.17g\n", texts[t],
                       delay_us, rc, rc ? red_errmsg(ctx) : "", v, want);
                odd++;
            }
        }
        if (odd) fail++;
        else (*pass)++;
        printf("%s: %d of 13 runs interrupted, the others right\n", texts[t], stopped);
    }
    free(seg);
    return fail;
}

int main(void)
{
    int pass = 0, fail = 0;
    int64_t n = (int64_t)1 << 26;
    float *x = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 7) - 3.0f;
    red_open(&ctx);
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    red_binding b = {"x", {0}};
    red_array_init(&b.array, x, RED_F32, 1, &n, NULL);
    /* the interrupt may land before or after a run: try a few times */
    int interrupted = 0;
    for (int t = 0; t < 20 && !interrupted; t++) {
        pthread_t th;
        pthread_create(&th, NULL, interrupter, NULL);
        double v;
        int rc = red_eval_f64(ctx, "sum(sqrt(abs(x)) * exp(x * 0.001)), max(x * x)", &b, 1, &v);
        pthread_join(th, NULL);
        if (rc == RED_ERR_INTERRUPTED) interrupted = 1;
        else if (rc != RED_OK) {
            printf("FAIL: unexpected status %d: %s\n", rc, red_errmsg(ctx));
            fail++;
        }
    }
    if (interrupted) pass++;
    else {
        printf("FAIL: no evaluation was interrupted in 20 tries\n");
        fail++;
    }
    fail += anywhere(x, n, &pass);
    /* the context still works, and exactly */
    double s = 0;
    int rc = red_eval_f64(ctx, "sum(f64(x))", &b, 1, &s);
    double want = 0;
    for (int64_t i = 0; i < n; i++) want += x[i];
    if (rc == RED_OK && s == want) pass++;
    else {
        printf("FAIL: after the interrupt: status %d, %.17g (want %.17g)\n", rc, s, want);
        fail++;
    }
    red_close(ctx);
    free(x);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
