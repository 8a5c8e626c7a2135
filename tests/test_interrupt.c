/*
 * test_interrupt.c -- red_interrupt stops a running evaluation (here on the
 * CPU executor, between chunks) with RED_ERR_INTERRUPTED, and the context
 * evaluates correctly afterwards.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "redjit.h"

static red_ctx *ctx;

static void *interrupter(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
    red_interrupt(ctx);
    return NULL;
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
