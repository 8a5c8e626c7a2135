/*
 * cpu_bench.c -- timing driver for bench/cpu_bench.py: loads raw f32 inputs written by the
 * script, runs each case through redjit's CPU executor and prints the times as JSON.
 * Only red_run is timed (clock_gettime, CLOCK_MONOTONIC), median of --reps runs after one
 * warm-up run; preparing, binding and the first run are reported apart.
 *
 *   cpu_bench --dir DIR --n N --rows R --cols C [--reps K] [--threads T] [--cases a,b,...]
 *
 * DIR holds x.f32 and y.f32 (N values each) and A.f32 (R x C, row-major).  Cases:
 *   sum     sum(x)
 *   dot     sum(x*y)
 *   maxabs  max(abs(x-y))
 *   rowsum  sum(A[i,j]) over j       (the R results go to DIR/rowsum.redjit.f64)
 *   colsum  sum(A[i,j]) over i       (the C results go to DIR/colsum.redjit.f64)
 *   argmax  argmax(x)
 *   keysum  sum(x[i]) by k[i]        (DIR/k.i32: N sorted keys; results to DIR/keysum.redjit.f64)
 *   shortrows sum(X[i,j]) over j     (X: x seen as N/8 rows of 8; results to DIR/shortrows.redjit.f64)
 *   csr     sum(x[k]) over k in ptr[r]..ptr[r+1]
 *                                    (DIR/ptr.i32: ceil(N/3) + 1 offsets, ranges of 3, the last
 *                                    what is left; results to DIR/csr.redjit.f64)
 *   lse     log-sum-exp of A's rows  (results to DIR/lse.redjit.f64; one pass over A, docs/language.md
 *                                    "Fusion")
 *   cssq    sum((x - mean(x)) * (x - mean(x)))   (Welford, one pass over x)
 */
#define _POSIX_C_SOURCE 200809L
#include <redjit.h>

#include "bench_time.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bench_case {
    const char *name, *text;
    int uses_x, uses_y, uses_a, uses_k, uses_rows8, uses_ptr;
};

static const struct bench_case CASES[] = {
    {"sum", "sum(x)", 1, 0, 0, 0, 0, 0},
    {"dot", "sum(x*y)", 1, 1, 0, 0, 0, 0},
    {"maxabs", "max(abs(x-y))", 1, 1, 0, 0, 0, 0},
    {"rowsum", "sum(A[i,j]) over j", 0, 0, 1, 0, 0, 0},
    {"colsum", "sum(A[i,j]) over i", 0, 0, 1, 0, 0, 0},
    {"argmax", "argmax(x)", 1, 0, 0, 0, 0, 0},
    {"keysum", "sum(x[i]) by k[i]", 1, 0, 0, 1, 0, 0},
    {"shortrows", "sum(X[i,j]) over j", 0, 0, 0, 0, 1, 0},
    {"csr", "sum(x[k]) over k in ptr[r]..ptr[r+1]", 1, 0, 0, 0, 0, 1},
    {"lse", "m = max(A[i,j]) over j; log(sum(exp(A[i,j] - m)) over j) + m", 0, 0, 1, 0, 0, 0},
    {"cssq", "sum((x - mean(x)) * (x - mean(x)))", 1, 0, 0, 0, 0, 0},
};
enum { NCASES = sizeof CASES / sizeof CASES[0] };

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cpu_bench: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}


/* Read exactly `count` 4-byte values (f32 or i32) from DIR/NAME into fresh
 * 64-byte-aligned memory. */
static void *load(const char *dir, const char *name, size_t count)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open %s: %s", path, strerror(errno));
    size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes ? bytes : 64);
    if (!p)
        die("out of memory for %s", path);
    if (fread(p, sizeof(float), count, f) != count)
        die("%s is shorter than expected", path);
    fclose(f);
    return p;
}


static int wanted(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *cases = "sum,dot,maxabs,rowsum,colsum,argmax,keysum,shortrows,csr,lse,cssq";
    long long n = 0, rows = 0, cols = 0;
    int reps = 7, threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--dir")) dir = v;
        else if (!strcmp(k, "--n")) n = atoll(v);
        else if (!strcmp(k, "--rows")) rows = atoll(v);
        else if (!strcmp(k, "--cols")) cols = atoll(v);
        else if (!strcmp(k, "--reps")) reps = atoi(v);
        else if (!strcmp(k, "--threads")) threads = atoi(v);
        else if (!strcmp(k, "--cases")) cases = v;
        else die("unknown option %s", k);
    }
    if (!dir || reps < 1)
        die("usage: cpu_bench --dir DIR --n N --rows R --cols C [--reps K] [--threads T] "
            "[--cases sum,dot,maxabs,rowsum,colsum,argmax,keysum,shortrows,csr,lse,cssq]");

    int need_x = 0, need_y = 0, need_a = 0, need_k = 0, need_ptr = 0;
    for (int c = 0; c < NCASES; c++)
        if (wanted(cases, CASES[c].name)) {
            need_x |= CASES[c].uses_x || CASES[c].uses_rows8;
            need_ptr |= CASES[c].uses_ptr;
            need_y |= CASES[c].uses_y;
            need_a |= CASES[c].uses_a;
            need_k |= CASES[c].uses_k;
        }
    /* Load only what the chosen cases read, so that peak RSS under /usr/bin/time is inputs
     * plus whatever redjit itself allocates. */
    float *x = need_x ? load(dir, "x.f32", (size_t)n) : NULL;
    float *y = need_y ? load(dir, "y.f32", (size_t)n) : NULL;
    float *A = need_a ? load(dir, "A.f32", (size_t)(rows * cols)) : NULL;
    int32_t *k = need_k ? load(dir, "k.i32", (size_t)n) : NULL;
    long long nptr = (n + 2) / 3 + 1;
    int32_t *ptr = need_ptr ? load(dir, "ptr.i32", (size_t)nptr) : NULL;

    red_ctx *ctx;
    int rc = red_open(&ctx);
    if (rc != RED_OK)
        die("red_open: %s", red_errstr(rc));
    if ((rc = red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU)) != RED_OK ||
        (rc = red_set_option(ctx, RED_OPT_THREADS, threads)) != RED_OK)
        die("red_set_option: %s\n%s", red_errstr(rc), red_errmsg(ctx));

    red_array xa, ya, Aa, ka, Xa, pa;
    red_array_init(&Xa, x, RED_F32, 2, (const int64_t[]){n / 8, 8}, NULL);
    red_array_init(&pa, ptr, RED_I32, 1, (const int64_t[]){nptr}, NULL);
    red_array_init(&xa, x, RED_F32, 1, (const int64_t[]){n}, NULL);
    red_array_init(&ya, y, RED_F32, 1, (const int64_t[]){n}, NULL);
    red_array_init(&Aa, A, RED_F32, 2, (const int64_t[]){rows, cols}, NULL);
    red_array_init(&ka, k, RED_I32, 1, (const int64_t[]){n}, NULL);

    double *times = malloc(reps * sizeof *times);
    printf("{\"redjit\": \"%s\", \"threads\": %d, \"reps\": %d, \"cases\": [", red_version_string(),
           threads, reps);
    int first = 1;
    for (int c = 0; c < NCASES; c++) {
        const struct bench_case *bc = &CASES[c];
        if (!wanted(cases, bc->name))
            continue;
        red_expr *e;
        double t0 = now_ms();
        if ((rc = red_prepare(ctx, bc->text, &e)) != RED_OK)
            die("red_prepare: %s\n%s", red_errstr(rc), red_errmsg(ctx));
        if ((bc->uses_x && (rc = red_bind_array(e, "x", &xa)) != RED_OK) ||
            (bc->uses_y && (rc = red_bind_array(e, "y", &ya)) != RED_OK) ||
            (bc->uses_a && (rc = red_bind_array(e, "A", &Aa)) != RED_OK) ||
            (bc->uses_k && (rc = red_bind_array(e, "k", &ka)) != RED_OK) ||
            (bc->uses_rows8 && (rc = red_bind_array(e, "X", &Xa)) != RED_OK) ||
            (bc->uses_ptr && (rc = red_bind_array(e, "ptr", &pa)) != RED_OK) ||
            (rc = red_run(e)) != RED_OK)
            die("%s\n%s", red_errstr(rc), red_expr_errmsg(e));
        double first_ms = now_ms() - t0;            /* prepare + bind + first run */
        for (int r = 0; r < reps; r++) {
            double t = now_ms();
            if ((rc = red_run(e)) != RED_OK)
                die("red_run: %s\n%s", red_errstr(rc), red_expr_errmsg(e));
            times[r] = now_ms() - t;
        }
        double med = median(times, reps);

        printf("%s\n  {\"case\": \"%s\", \"expr\": \"%s\", \"first_ms\": %.4f, \"median_ms\": %.4f, "
               "\"min_ms\": %.4f, \"max_ms\": %.4f", first ? "" : ",", bc->name, bc->text, first_ms,
               med, times[0], times[reps - 1]);
        first = 0;
        red_array res;
        if ((rc = red_result(e, 0, &res, NULL)) != RED_OK)
            die("red_result: %s\n%s", red_errstr(rc), red_expr_errmsg(e));
        if (res.ndim > 0) {
            /* An array result: convert to f64 and leave it in a file for the script. */
            int64_t cnt = red_array_size(&res);
            double *out = malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof *out);
            red_array oa;
            red_array_init(&oa, out, RED_F64, 1, &cnt, NULL);
            if (!out || (rc = red_result_copy(e, 0, &oa)) != RED_OK)
                die("red_result_copy: %s\n%s", red_errstr(rc), red_expr_errmsg(e));
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.redjit.f64", dir, bc->name);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(out, sizeof *out, (size_t)cnt, f) != (size_t)cnt || fclose(f) != 0)
                die("cannot write %s", path);
            printf(", \"result_file\": \"%s\"}", path);
            free(out);
        } else {
            double v;
            if ((rc = red_result_f64(e, 0, &v)) != RED_OK)
                die("red_result_f64: %s\n%s", red_errstr(rc), red_expr_errmsg(e));
            if (isfinite(v))
                printf(", \"result\": %.17g}", v);
            else                                    /* JSON has no NaN: the script reads strings */
                printf(", \"result\": \"%g\"}", v);
        }
        red_finalize(e);
        fflush(stdout);
    }
    printf("\n]}\n");
    red_close(ctx);
    free(times);
    free(x);
    free(y);
    free(A);
    free(k);
    return 0;
}
