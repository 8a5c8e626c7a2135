/*
 * jit_compile.c -- NVRTC time per new expression on the runtime's real path: the twelve JIT
 * benchmark expressions (bench/README.md, jit_new), each prepared, bound to host arrays and run
 * once in a fresh context, so the kernel group the automatic strategy picks is compiled exactly
 * as a first run compiles it; red_cache_stats gives the compiles and their NVRTC time.
 *
 *   jit_compile [--reps 5] [--only SUBSTRING]
 *
 * Needs a GPU or, where there is none, the stand-in driver (its results are meaningless, its
 * compiles real), and no disk cache:
 *
 *   LD_LIBRARY_PATH=build/tests/fakecuda REDJIT_CACHE=0 build/bench/jit_compile --reps 5
 *
 * Prints one line per expression (median, min and max NVRTC ms over the repetitions, compiles
 * per run, median wall ms of prepare + bind + run) and the median of the medians.  The driver
 * and NVRTC are initialised first by an expression none of the twelve uses, as in jit_new.
 */
#define _POSIX_C_SOURCE 200809L
#include <redjit.h>

#include "bench_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N (1 << 20)
#define SEG 32             /* CSR rows and key runs of 32 elements */
#define ROWS 1024
#define COLS 1024
#define MAXREPS 64

static float xf[N], bf[N];
static double xd[N];
static int xi[N], ptr[N / SEG + 1], seg[N];

typedef struct bind {
    const char *name;
    const void *data;
    red_dtype dtype;
    int ndim;
    int64_t shape[2];
} bind;

typedef struct jcase {
    const char *label, *text;
    bind b[2];
} jcase;

static const jcase cases[] = {
    {"sum f32", "sum(x)", {{"x", xf, RED_F32, 1, {N}}}},
    {"sum f64", "sum(x)", {{"x", xd, RED_F64, 1, {N}}}},
    {"sum i32", "sum(x)", {{"x", xi, RED_I32, 1, {N}}}},
    {"max", "max(x)", {{"x", xf, RED_F32, 1, {N}}}},
    {"dot", "sum(a*b)", {{"a", xf, RED_F32, 1, {N}}, {"b", bf, RED_F32, 1, {N}}}},
    {"maxabs", "max(abs(a-b))", {{"a", xf, RED_F32, 1, {N}}, {"b", bf, RED_F32, 1, {N}}}},
    {"sum+sumsq", "sum(x), sum(x*x)", {{"x", xf, RED_F32, 1, {N}}}},
    {"argmax", "argmax(x)", {{"x", xf, RED_F32, 1, {N}}}},
    {"csr", "sum(v[k]) over k in ptr[r]..ptr[r+1]", {{"v", xf, RED_F32, 1, {N}}, {"ptr", ptr, RED_I32, 1, {N / SEG + 1}}}},
    {"keys", "sum(v[i]) by seg[i]", {{"v", xf, RED_F32, 1, {N}}, {"seg", seg, RED_I32, 1, {N}}}},
    {"rowsum", "sum(A[i,j]) over j", {{"A", xf, RED_F32, 2, {ROWS, COLS}}}},
    {"colsum", "sum(A[i,j]) over i", {{"A", xf, RED_F32, 2, {ROWS, COLS}}}},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))




/* One fresh context: prepare, bind, run.  Fills NVRTC ms, compiles and wall ms. */
static int run_new(const jcase *c, double *nvrtc_ms, long long *compiles, double *wall_ms)
{
    red_ctx *ctx;
    if (red_open(&ctx)) return -1;
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_GPU);
    int rc = 0;
    if (!red_gpu_available(ctx)) {
        fprintf(stderr, "jit_compile: no GPU (put build/tests/fakecuda on LD_LIBRARY_PATH)\n");
        rc = -1;
    }
    red_expr *e = NULL;
    if (!rc) {   /* the driver and NVRTC first, by an expression of its own */
        static const double w[4] = {1, 2, 3, 4};
        double v;
        red_binding wb = {.name = "w"};
        red_array_init(&wb.array, (void *)w, RED_F64, 1, (const int64_t[]){4}, NULL);
        rc = red_eval_f64(ctx, "any(w > 0.75)", &wb, 1, &v);
        if (rc) fprintf(stderr, "jit_compile: warm-up: %s\n", red_errmsg(ctx));
    }
    red_cache_info a, b;
    red_cache_stats(ctx, &a);
    double t0 = now_ms();
    if (!rc && (rc = red_prepare(ctx, c->text, &e)) != 0) fprintf(stderr, "jit_compile: %s\n", red_errmsg(ctx));
    for (int i = 0; !rc && i < 2 && c->b[i].name; i++) {
        red_array arr;
        red_array_init(&arr, (void *)c->b[i].data, c->b[i].dtype, c->b[i].ndim, c->b[i].shape, NULL);
        rc = red_bind_array(e, c->b[i].name, &arr);
    }
    if (!rc && (rc = red_run(e)) != 0) fprintf(stderr, "jit_compile: %s: %s\n", c->text, red_expr_errmsg(e));
    double t1 = now_ms();
    red_cache_stats(ctx, &b);
    *nvrtc_ms = b.compile_ms - a.compile_ms;
    *compiles = b.compiles - a.compiles;
    *wall_ms = t1 - t0;
    red_finalize(e);
    red_close(ctx);
    return rc;
}

int main(int argc, char **argv)
{
    int reps = 5;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: jit_compile [--reps N] [--only SUBSTRING]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > MAXREPS) reps = reps < 1 ? 1 : MAXREPS;
    const char *cache = getenv("REDJIT_CACHE");
    if (!cache || strcmp(cache, "0")) {
        fprintf(stderr, "jit_compile: set REDJIT_CACHE=0 (a disk-cache hit compiles nothing)\n");
        return 2;
    }
    for (int i = 0; i < N; i++) {
        xf[i] = (float)((i * 37) % 1001) * 0.001f;
        bf[i] = 1.0f - xf[i];
        xd[i] = xf[i];
        xi[i] = i % 1001;
        seg[i] = i / SEG;
    }
    for (int r = 0; r <= N / SEG; r++) ptr[r] = r * SEG;

    double meds[NCASES];
    int nmeds = 0;
    printf("%-10s %-40s %8s %8s %8s %8s %9s\n", "case", "expression", "nvrtc", "min", "max", "compiles", "wall");
    for (int i = 0; i < NCASES; i++) {
        const jcase *c = &cases[i];
        if (only && !strstr(c->label, only)) continue;
        double ms[MAXREPS], wall[MAXREPS];
        long long compiles = 0;
        for (int r = 0; r < reps; r++)
            if (run_new(c, &ms[r], &compiles, &wall[r])) return 1;
        double m = median(ms, reps);   /* sorts ms */
        printf("%-10s %-40s %8.1f %8.1f %8.1f %8lld %9.1f\n", c->label, c->text, m, ms[0], ms[reps - 1], compiles,
               median(wall, reps));
        fflush(stdout);
        meds[nmeds++] = m;
    }
    if (nmeds) printf("median of the medians: %.1f ms NVRTC\n", median(meds, nmeds));
    return 0;
}
