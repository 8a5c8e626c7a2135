/*
 * stress_threads.c -- 8 threads share ONE context; each prepares, binds, runs and finalizes its
 * own expressions (and calls red_eval, whose cache of prepared expressions is shared) 1,000
 * times: full, partial, keyed and multi-result reductions, a user-defined operator, an error
 * case.  Every result is checked against a value computed here in C.  Built twice: normally,
 * and with -fsanitize=thread against a TSan build of the library (stress_threads_tsan), where
 * the CPU executor runs one OpenMP thread (libgomp is not TSan-instrumented and would report
 * false races in its own barriers) while the 8 caller threads still share the context.
 */
#define _POSIX_C_SOURCE 200809L
#include "redjit.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 8
#define NEVALS 1000
#define MAXN 300

#ifndef STRESS_OMP_THREADS
#define STRESS_OMP_THREADS 2
#endif

static red_ctx *ctx;

typedef struct job {
    int id;
    int failures;
    char first[512];
} job;

static void fail(job *j, int it, const char *what, long long got, long long want, const char *msg)
{
    if (!j->failures++)
        snprintf(j->first, sizeof j->first, "thread %d, evaluation %d: %s: got %lld, want %lld (%s)",
                 j->id, it, what, got, want, msg ? msg : "");
}

static red_array vec_i64(int64_t *d, int64_t n)
{
    red_array a;
    red_array_init(&a, d, RED_I64, 1, &n, NULL);
    return a;
}

static void *worker(void *arg)
{
    job *j = arg;
    int64_t x[MAXN], y[MAXN], seg[MAXN], A[MAXN];
    for (int it = 0; it < NEVALS; it++) {
        int64_t n = 1 + (it * 7 + j->id * 13) % MAXN;
        for (int64_t k = 0; k < n; k++) {
            x[k] = (k * 31 + j->id * 7 + it) % 101 - 50;
            y[k] = (k * 17 + it) % 37 - 18;
            seg[k] = k / 7;
            A[k] = k + j->id;
        }
        red_array xa = vec_i64(x, n), ya = vec_i64(y, n), sa = vec_i64(seg, n);
        int kind = (it + j->id) % 7, rc = 0;
        red_expr *e = NULL;
        switch (kind) {
        case 0: {   /* prepare / bind / run / finalize: a full sum */
            int64_t want = 0, got = -1;
            for (int64_t k = 0; k < n; k++) want += x[k] * y[k];
            if ((rc = red_prepare(ctx, "sum(x * y)", &e)) || (rc = red_bind_array(e, "x", &xa)) ||
                (rc = red_bind_array(e, "y", &ya)) || (rc = red_run(e)) ||
                (rc = red_result_i64(e, 0, &got)) || got != want)
                fail(j, it, "sum(x*y)", rc ? -rc : got, want, red_errmsg(ctx));
            break;
        }
        case 1: {   /* red_eval through the shared cache */
            red_binding b[2] = {{"x", xa}, {"y", ya}};
            double got = -1, want = 0;
            for (int64_t k = 0; k < n; k++) {
                double d = (double)llabs(x[k] - y[k]);
                if (d > want) want = d;
            }
            if ((rc = red_eval_f64(ctx, "max(abs(x - y))", b, 2, &got)) || got != want)
                fail(j, it, "max(abs(x-y))", rc ? -rc : (long long)got, (long long)want, red_errmsg(ctx));
            break;
        }
        case 2: {   /* a partial reduction: row sums of an r x c matrix */
            int64_t c = 1 + it % 5, r = n / c, shape[2] = {r, c};
            red_array Aa;
            red_array_init(&Aa, A, RED_I64, 2, shape, NULL);
            if ((rc = red_prepare(ctx, "sum(A[i,j]) over j", &e)) || (rc = red_bind_array(e, "A", &Aa)) ||
                (rc = red_run(e))) {
                fail(j, it, "row sums", -rc, 0, red_expr_errmsg(e));
                break;
            }
            red_array out;
            if ((rc = red_result(e, 0, &out, NULL)) || out.ndim != 1 || out.shape[0] != r ||
                out.dtype != RED_I64) {
                fail(j, it, "row sums shape", rc ? -rc : out.shape[0], r, "");
                break;
            }
            for (int64_t i = 0; i < r; i++) {
                int64_t want = 0;
                for (int64_t k = 0; k < c; k++) want += A[i * c + k];
                if (((int64_t *)out.data)[i] != want) fail(j, it, "row sum", ((int64_t *)out.data)[i], want, "");
            }
            break;
        }
        case 3: {   /* a user-defined ordered operator: the affine fold of the cases */
            const char *text = "ordered op aff(f, g) = ((f.0*g.0) % 1000003, (g.0*f.1 + g.1) % 1000003) identity (1, 0)\n"
                               "reduce(aff, (x[i] + 51, y[i] + 19)) over i";
            int64_t f0 = 1, f1 = 0, g0, g1;
            for (int64_t k = 0; k < n; k++) {
                int64_t a = x[k] + 51, b = y[k] + 19;
                g0 = (f0 * a) % 1000003;
                g1 = (a * f1 + b) % 1000003;
                f0 = g0, f1 = g1;
            }
            int64_t r0 = -1, r1 = -1;
            if ((rc = red_prepare(ctx, text, &e)) || (rc = red_bind_array(e, "x", &xa)) ||
                (rc = red_bind_array(e, "y", &ya)) || (rc = red_run(e)) ||
                (rc = red_result_i64(e, 0, &r0)) || (rc = red_result_i64(e, 1, &r1)) || r0 != f0 || r1 != f1)
                fail(j, it, "affine fold", rc ? -rc : r0 * 10000000 + r1, f0 * 10000000 + f1,
                     e ? red_expr_errmsg(e) : red_errmsg(ctx));
            break;
        }
        case 4: {   /* segments */
            if ((rc = red_prepare(ctx, "sum(x[i]) by seg[i]", &e)) || (rc = red_bind_array(e, "x", &xa)) ||
                (rc = red_bind_array(e, "seg", &sa)) || (rc = red_run(e))) {
                fail(j, it, "segments", -rc, 0, e ? red_expr_errmsg(e) : red_errmsg(ctx));
                break;
            }
            red_array out;
            int64_t nseg = seg[n - 1] + 1;
            if ((rc = red_result(e, 0, &out, NULL)) || out.shape[0] != nseg) {
                fail(j, it, "segment count", rc ? -rc : out.shape[0], nseg, "");
                break;
            }
            for (int64_t s = 0; s < nseg; s++) {
                int64_t want = 0;
                for (int64_t k = 0; k < n; k++) if (seg[k] == s) want += x[k];
                if (((int64_t *)out.data)[s] != want) fail(j, it, "segment sum", ((int64_t *)out.data)[s], want, "");
            }
            break;
        }
        case 5: {   /* several results through red_eval, buffers allocated by the library */
            red_binding b[1] = {{"x", xa}};
            red_array res[3];
            memset(res, 0, sizeof res);
            int count = 0;
            if ((rc = red_eval(ctx, "sum(x), min(x), max(x)", b, 1, res, 3, &count)) || count != 3) {
                fail(j, it, "three results", rc ? -rc : count, 3, red_errmsg(ctx));
                break;
            }
            int64_t want[3] = {0, INT64_MAX, INT64_MIN};
            for (int64_t k = 0; k < n; k++) {
                want[0] += x[k];
                if (x[k] < want[1]) want[1] = x[k];
                if (x[k] > want[2]) want[2] = x[k];
            }
            for (int r = 0; r < 3; r++) {
                if (*(int64_t *)res[r].data != want[r]) fail(j, it, "sum/min/max", *(int64_t *)res[r].data, want[r], "");
                red_free(res[r].data);
            }
            break;
        }
        case 6: {   /* an error on one thread stays with its expression */
            char text[64];
            snprintf(text, sizeof text, "sum(x) + sum(q%d)", j->id);
            if ((rc = red_prepare(ctx, text, &e)) || (rc = red_bind_array(e, "x", &xa))) {
                fail(j, it, "prepare", -rc, 0, red_errmsg(ctx));
                break;
            }
            rc = red_run(e);
            char name[16];
            snprintf(name, sizeof name, "'q%d'", j->id);
            if (rc != RED_ERR_NAME || !strstr(red_expr_errmsg(e), name) || red_result_count(e) != 0)
                fail(j, it, "unknown name", rc, RED_ERR_NAME, red_expr_errmsg(e));
            break;
        }
        }
        red_finalize(e);
    }
    return NULL;
}

int main(void)
{
    if (red_open(&ctx) != RED_OK) return 1;
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    red_set_option(ctx, RED_OPT_THREADS, STRESS_OMP_THREADS);
    pthread_t t[NTHREADS];
    job jobs[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].id = i;
        if (pthread_create(&t[i], NULL, worker, &jobs[i])) return 1;
    }
    int failures = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        if (jobs[i].failures) fprintf(stderr, "FAIL %s (%d failures)\n", jobs[i].first, jobs[i].failures);
        failures += jobs[i].failures;
    }
    red_close(ctx);
    printf("stress_threads: %d threads x %d evaluations on one context, %d failures\n", NTHREADS,
           NEVALS, failures);
    return failures ? 1 : 0;
}
