/*
 * test_cpuwalk.c -- the CPU executor's walks over short rows, against sums
 * computed here.  A regular pass whose loads all read their arrays at one
 * step a position (A[i,j] over a row-major A) runs its blocks across rows,
 * one index ramping past the end of its row (src/cpu/walk.c, cpu_flat_walk); any other
 * pass walks short rows element by element.  Both must give every output
 * its own elements, with rows that straddle blocks (1024 elements) and
 * chunks (65536), and the flat walk must not be taken where it would read
 * the wrong elements: a view with a row stride, a vector beside the matrix,
 * an index value, a shifted range, a range past the end of the rows (which
 * must still fault, naming the array), CSR ranges that are not end to end.
 * Equal rows must get equal bits wherever they lie.  Results must not depend on the number
 * of threads.  Inputs are fresh random values each run (seed printed).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <redjit.h>

#include "check.h"

static uint64_t rng;
static double uniform(void)   /* [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* Runs `text` on the CPU with the given bindings; returns its first result
 * as f64 values (malloc'ed, *n of them) or NULL, with the status in *st. */
static double *eval_rows(int threads, const char *text, const red_binding *b, int nb, int64_t *n, int *st,
                         char *err, size_t errsz)
{
    red_ctx *ctx;
    *st = red_open(&ctx);
    if (*st) return NULL;
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    red_set_option(ctx, RED_OPT_THREADS, threads);
    red_expr *e = NULL;
    double *v = NULL;
    *st = red_prepare(ctx, text, &e);
    for (int i = 0; !*st && i < nb; i++) *st = red_bind_array(e, b[i].name, &b[i].array);
    if (!*st) *st = red_run(e);
    red_array out;
    if (!*st) *st = red_result(e, 0, &out, NULL);
    if (*st) {
        snprintf(err, errsz, "%s", e ? red_expr_errmsg(e) : red_errmsg(ctx));
    } else {
        *n = red_array_size(&out);
        v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
        for (int64_t k = 0; k < *n; k++) {
            int64_t off = 0, rest = k;   /* k in row-major order, whatever the strides */
            for (int d = out.ndim - 1; d >= 0; d--) {
                off += rest % out.shape[d] * out.strides[d];
                rest /= out.shape[d];
            }
            const char *p = (const char *)out.data + off * (int64_t)red_dtype_size(out.dtype);
            switch (out.dtype) {
            case RED_F32: v[k] = *(const float *)p; break;
            case RED_F64: v[k] = *(const double *)p; break;
            case RED_I32: v[k] = *(const int32_t *)p; break;
            case RED_I64: v[k] = (double)*(const int64_t *)p; break;
            default: v[k] = NAN;
            }
        }
    }
    red_finalize(e);
    red_close(ctx);
    return v;
}

enum { OP_SUM, OP_MAX, OP_ARGMAX, OP_PROD };

/* Reference row folds of the rows x cols matrix at base (row stride rs),
 * columns c0 .. c0+len-1, each element times w[col] when w is given. */
static void reference(int op, const float *base, int64_t rows, int64_t rs, int64_t c0, int64_t len,
                      const float *w, double *ref, double *mag)
{
    for (int64_t r = 0; r < rows; r++) {
        double s = op == OP_PROD ? 1 : 0, m = 0, best = -INFINITY;
        int64_t arg = -1;
        for (int64_t j = 0; j < len; j++) {
            double a = base[r * rs + c0 + j] * (w ? (double)w[c0 + j] : 1.0);
            if (op == OP_PROD) s *= a;
            else s += a;
            m += fabs(a);
            if (a > best) best = a, arg = c0 + j;
        }
        ref[r] = op == OP_SUM || op == OP_PROD ? s : op == OP_MAX ? best : (double)arg;
        mag[r] = op == OP_SUM ? m : op == OP_PROD ? fabs(s) : 0;
    }
}

/* One case: the expression over A (rows x cols, row stride rs) and w, at 1
 * and 2 threads, against the reference; the two must agree bit for bit. */
static void check_case(const char *what, const char *text, int op, float *A, int64_t rows, int64_t cols, int64_t rs,
                       int64_t c0, int64_t len, float *w)
{
    red_binding b[2] = {{.name = "A"}, {.name = "w"}};
    int64_t sh[2] = {rows, cols}, st[2] = {rs, 1}, wsh[1] = {cols};
    red_array_init(&b[0].array, A, RED_F32, 2, sh, st);
    red_array_init(&b[1].array, w, RED_F32, 1, wsh, NULL);
    double *ref = malloc((size_t)rows * sizeof *ref), *mag = malloc((size_t)rows * sizeof *mag);
    reference(op, A, rows, rs, c0, len, strstr(text, "w[") ? w : NULL, ref, mag);
    double *got[2] = {NULL, NULL};
    for (int t = 0; t < 2; t++) {
        int64_t n = 0;
        int status;
        char err[512] = "";
        got[t] = eval_rows(t + 1, text, b, strstr(text, "w[") ? 2 : 1, &n, &status, err, sizeof err);
        CHECK(got[t] && n == rows, "%s: %s at %d thread(s): status %d (%s), %lld results for %lld rows", what,
              text, t + 1, status, err, (long long)n, (long long)rows);
        if (!got[t] || n != rows) continue;
        int64_t bad = -1;
        for (int64_t r = 0; r < rows && bad < 0; r++) {
            double tol = op == OP_SUM ? 1e-5 * mag[r] + 1e-30 : op == OP_PROD ? 1e-5 * mag[r] + 1e-30 : 0;
            if (!(fabs(got[t][r] - ref[r]) <= tol)) bad = r;
        }
        CHECK(bad < 0, "%s: %s, %lld x %lld, %d thread(s): row %lld is %.9g, should be %.9g", what, text,
              (long long)rows, (long long)len, t + 1, (long long)bad, bad < 0 ? 0 : got[t][bad],
              bad < 0 ? 0 : ref[bad]);
    }
    if (got[0] && got[1])
        CHECK(memcmp(got[0], got[1], (size_t)rows * sizeof(double)) == 0, "%s: %s: 1 and 2 threads differ", what,
              text);
    free(got[0]);
    free(got[1]);
    free(ref);
    free(mag);
}

int main(void)
{
    rng = (uint64_t)time(NULL) * 2654435761u | 1;
    printf("test_cpuwalk: seed %llu\n", (unsigned long long)rng);
    const int64_t total = (int64_t)1 << 20;
    float *A = malloc((size_t)(2 * total) * sizeof *A), *w = malloc(4096 * sizeof *w);
    for (int64_t k = 0; k < 2 * total; k++) A[k] = (float)uniform();
    for (int k = 0; k < 4096; k++) w[k] = (float)uniform();

    /* row lengths: 1, short (walked element by element before), rows that
     * straddle the 1024-element blocks and the 65536-element chunks, and
     * 1024 (a block a row, not flat) */
    static const int64_t lens[] = {1, 2, 3, 4, 7, 16, 31, 32, 33, 100, 1000, 1023, 1024, 3000};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        int64_t C = lens[k], R = total / C;
        if (R > 100000) R = 100000 + k;   /* odd counts: the last block is partial */
        char what[64];
        snprintf(what, sizeof what, "rows of %lld", (long long)C);
        check_case(what, "sum(A[i,j]) over j", OP_SUM, A, R, C, C, 0, C, w);
        check_case(what, "max(A[i,j]) over j", OP_MAX, A, R, C, C, 0, C, w);
        check_case(what, "argmax(A[i,j]) over j", OP_ARGMAX, A, R, C, C, 0, C, w);
        /* not flat: a vector beside the matrix; a row stride past the row */
        check_case(what, "sum(A[i,j]*w[j]) over j", OP_SUM, A, R, C, C, 0, C, w);
        check_case(what, "sum(A[i,j]) over j", OP_SUM, A, R, C, C + 3, 0, C, w);
        if (C >= 3) {
            char t[64];
            snprintf(t, sizeof t, "sum(A[i,j]) over j in 1..%lld", (long long)C - 1);
            check_case(what, t, OP_SUM, A, R, C, C, 1, C - 2, w);
        }
    }
    /* products of values near 1, whole rows and pieces */
    {
        float *B = malloc((size_t)total * sizeof *B);
        for (int64_t k = 0; k < total; k++) B[k] = 1.0f + 0.01f * (float)uniform();
        check_case("products", "prod(A[i,j]) over j", OP_PROD, B, total / 5, 5, 5, 0, 5, w);
        check_case("products", "prod(A[i,j]) over j", OP_PROD, B, total / 700, 700, 700, 0, 700, w);
        free(B);
    }

    /* column folds (run_columns): chunks of 256 reduced positions folded
     * apart and combined in order, two positions at a time where the
     * values are read in place; odd counts, one chunk or several, a
     * computed operand (not in place), max, a batch of matrices */
    {
        static const int64_t shapes[][3] = {{1, 7, 40},    {1, 257, 300}, {1, 1001, 1500}, {1, 4099, 33},
                                            {3, 513, 64},  {1, 600, 2000}, {1, 100, 17000}};
        static const char *texts[] = {"sum(T[b,i,j]) over i", "sum(T[b,i,j]*2) over i", "max(T[b,i,j]) over i",
                                      "min(T[b,i,j]) over i"};
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
            for (int e = 0; e < 4; e++) {
                int64_t B = shapes[k][0], R = shapes[k][1], C = shapes[k][2];
                red_binding b = {.name = "T"};
                red_array_init(&b.array, A, RED_F32, 3, (const int64_t[]){B, R, C}, NULL);
                double *v[2] = {NULL, NULL};
                int64_t n = 0;
                int st;
                char err[512] = "";
                for (int t = 0; t < 2; t++) v[t] = eval_rows(t + 1, texts[e], &b, 1, &n, &st, err, sizeof err);
                int64_t bad = -1;
                for (int64_t o = 0; v[0] && n == B * C && o < B * C && bad < 0; o++) {
                    double s = 0, m = 0, mx = -INFINITY, mn = INFINITY;
                    for (int64_t i = 0; i < R; i++) {
                        double a = A[(o / C) * R * C + i * C + o % C] * (e == 1 ? 2.0 : 1.0);
                        s += a, m += fabs(a), mx = a > mx ? a : mx, mn = a < mn ? a : mn;
                    }
                    double want = e == 2 ? mx : e == 3 ? mn : s, tol = e >= 2 ? 0 : 1e-5 * m + 1e-30;
                    if (!(fabs(v[0][o] - want) <= tol)) bad = o;
                }
                CHECK(v[0] && n == B * C && bad < 0, "%s over %lld x %lld x %lld: status %d (%s), output %lld wrong",
                      texts[e], (long long)B, (long long)R, (long long)C, st, err, (long long)bad);
                CHECK(v[0] && v[1] && memcmp(v[0], v[1], (size_t)(B * C) * sizeof(double)) == 0,
                      "%s over %lld x %lld x %lld: 1 and 2 threads differ", texts[e], (long long)B, (long long)R,
                      (long long)C);
                free(v[0]);
                free(v[1]);
            }
    }
    /* integer column sums over several chunks, exact (i32 summed in i64) */
    {
        int64_t R = 700, C = 40;
        int32_t *I = malloc((size_t)(R * C) * sizeof *I);
        for (int64_t k = 0; k < R * C; k++) I[k] = (int32_t)(uniform() * 2e9);
        red_binding b = {.name = "I"};
        red_array_init(&b.array, I, RED_I32, 2, (const int64_t[]){R, C}, NULL);
        int64_t n = 0;
        int st;
        char err[512];
        double *v = eval_rows(2, "sum(I[i,j]) over i", &b, 1, &n, &st, err, sizeof err);
        int64_t bad = -1;
        for (int64_t j = 0; v && n == C && j < C && bad < 0; j++) {
            int64_t t = 0;
            for (int64_t i = 0; i < R; i++) t += I[i * C + j];
            if (v[j] != (double)t) bad = j;
        }
        CHECK(v && n == C && bad < 0, "sum(I[i,j]) over i (i32, 700 x 40): status %d, column %lld wrong", st,
              (long long)bad);
        free(v);
        free(I);
    }
    /* integer folds over short rows, exact: a count, and sums of i32 in i64 */
    {
        int64_t R = 70001, C = 5;
        int32_t *I = malloc((size_t)(R * C) * sizeof *I);
        for (int64_t k = 0; k < R * C; k++) I[k] = (int32_t)(uniform() * 2e9);
        red_binding b[2] = {{.name = "A"}, {.name = "I"}};
        red_array_init(&b[0].array, A, RED_F32, 2, (const int64_t[]){R, C}, NULL);
        red_array_init(&b[1].array, I, RED_I32, 2, (const int64_t[]){R, C}, NULL);
        int64_t n = 0;
        int st;
        char err[512];
        double *v = eval_rows(2, "count(A[i,j] > 0) over j", b, 1, &n, &st, err, sizeof err);
        int64_t bad = -1;
        for (int64_t r = 0; v && r < R && bad < 0; r++) {
            int c = 0;
            for (int64_t j = 0; j < C; j++) c += A[r * C + j] > 0;
            if (v[r] != c) bad = r;
        }
        CHECK(v && n == R && bad < 0, "count(A[i,j] > 0) over j: status %d, row %lld wrong", st, (long long)bad);
        free(v);
        v = eval_rows(2, "sum(I[i,j]) over j", b + 1, 1, &n, &st, err, sizeof err);
        bad = -1;
        for (int64_t r = 0; v && r < R && bad < 0; r++) {
            int64_t t = 0;
            for (int64_t j = 0; j < C; j++) t += I[r * C + j];
            if (v[r] != (double)t) bad = r;
        }
        CHECK(v && n == R && bad < 0, "sum(I[i,j]) over j (i32): status %d, row %lld wrong", st, (long long)bad);
        free(v);
        free(I);
    }
    /* an index value in the operand (not flat): sum of A[i,j] * j */
    {
        int64_t R = 50001, C = 6;
        red_binding b = {.name = "A"};
        red_array_init(&b.array, A, RED_F32, 2, (const int64_t[]){R, C}, NULL);
        int64_t n = 0;
        int st;
        char err[512];
        double *v = eval_rows(2, "sum(A[i,j]*j) over j", &b, 1, &n, &st, err, sizeof err);
        int64_t bad = -1;
        for (int64_t r = 0; v && r < R && bad < 0; r++) {
            double s = 0, m = 0;
            for (int64_t j = 0; j < C; j++) s += A[r * C + j] * (double)j, m += fabs(A[r * C + j] * (double)j);
            if (!(fabs(v[r] - s) <= 1e-5 * m + 1e-30)) bad = r;
        }
        CHECK(v && n == R && bad < 0, "sum(A[i,j]*j) over j: status %d, row %lld wrong", st, (long long)bad);
        free(v);
    }
    /* a 3-d array reduced over its two inner dimensions, and the whole of it */
    {
        int64_t P = 30001, Q = 3, S = 5;
        red_binding b = {.name = "T"};
        red_array_init(&b.array, A, RED_F32, 3, (const int64_t[]){P, Q, S}, NULL);
        int64_t n = 0;
        int st;
        char err[512];
        double *v = eval_rows(2, "sum(T[i,j,k]) over j, k", &b, 1, &n, &st, err, sizeof err);
        int64_t bad = -1;
        for (int64_t r = 0; v && r < P && bad < 0; r++) {
            double s = 0, m = 0;
            for (int64_t j = 0; j < Q * S; j++) s += A[r * Q * S + j], m += fabs(A[r * Q * S + j]);
            if (!(fabs(v[r] - s) <= 1e-5 * m + 1e-30)) bad = r;
        }
        CHECK(v && n == P && bad < 0, "sum(T[i,j,k]) over j, k: status %d, row %lld wrong", st, (long long)bad);
        free(v);
        v = eval_rows(2, "sum(T)", &b, 1, &n, &st, err, sizeof err);
        double s = 0, m = 0;
        for (int64_t k = 0; k < P * Q * S; k++) s += A[k], m += fabs(A[k]);
        CHECK(v && n == 1 && fabs(v[0] - s) <= 1e-5 * m, "sum(T): status %d, %.9g against %.9g", st,
              v ? v[0] : NAN, s);
        free(v);
    }
    /* a subscript past the end still faults, naming the array, and the
     * caller's array is untouched */
    {
        int64_t R = 70000, C = 4;
        float *keep = malloc((size_t)(R * C) * sizeof *keep);
        memcpy(keep, A, (size_t)(R * C) * sizeof *keep);
        red_binding b = {.name = "A"};
        red_array_init(&b.array, A, RED_F32, 2, (const int64_t[]){R, C}, NULL);
        int64_t n = 0;
        int st;
        char err[512] = "";
        double *v = eval_rows(2, "sum(A[i,j]) over j in 0..5", &b, 1, &n, &st, err, sizeof err);
        CHECK(!v && st == RED_ERR_INDEX && strstr(err, "A") && strstr(err, "4"),
              "sum(A[i,j]) over j in 0..5: status %d, message '%s'", st, err);
        printf("test_cpuwalk: the fault reads: %s\n", err);
        /* a row past the last of a 2 x 4 A, in a domain short enough to
         * walk flat: every load steps evenly, so only the bounds keep it
         * off the flat walk (which checks no subscript) */
        free(v);
        red_array_init(&b.array, A, RED_F32, 2, (const int64_t[]){2, C}, NULL);
        v = eval_rows(2, "sum(A[i,j]) over i in 0..3, j", &b, 1, &n, &st, err, sizeof err);
        CHECK(!v && st == RED_ERR_INDEX && strstr(err, "'A' is 2"),
              "sum(A[i,j]) over i in 0..3, j: status %d, message '%s'", st, err);
        CHECK(memcmp(keep, A, (size_t)(R * C) * sizeof *keep) == 0, "the input changed");
        free(v);
        free(keep);
    }
    /* equal rows, equal bits: a row that fits in a block is folded in one
     * piece wherever it lies (rows of 1000 straddle the 1024-element
     * blocks unless blocks end where rows do) */
    for (int64_t C = 100; C <= 1000; C += 450) {
        int64_t R = 50;
        for (int64_t r = 1; r < R; r++) memcpy(A + r * C, A, (size_t)C * sizeof *A);
        red_binding b = {.name = "A"};
        red_array_init(&b.array, A, RED_F32, 2, (const int64_t[]){R, C}, NULL);
        int64_t n = 0;
        int st;
        char err[512];
        double *v = eval_rows(2, "sum(A[i,j]) over j", &b, 1, &n, &st, err, sizeof err);
        int64_t bad = -1;
        for (int64_t r = 1; v && r < R && bad < 0; r++)
            if (memcmp(&v[r], &v[0], sizeof v[0])) bad = r;
        CHECK(v && n == R && bad < 0, "equal rows of %lld: row %lld's sum %.9g differs from row 0's %.9g",
              (long long)C, (long long)bad, v && bad > 0 ? v[bad] : 0, v ? v[0] : 0);
        free(v);
    }
    /* CSR ranges: end to end but starting below zero, shifted back in by
     * the subscript (flat is right as long as the box is); not end to end
     * after a first range ending below zero (the walk must not go flat);
     * one starting below zero (a fault) */
    {
        float xs[16];
        for (int k = 0; k < 16; k++) xs[k] = (float)k;
        int64_t lo1[2] = {-10, 0}, hi1[2] = {-7, 3}, lo2[2] = {-3, 0}, hi2[2] = {-1, 4};
        red_binding b[3] = {{.name = "x"}, {.name = "lo"}, {.name = "hi"}};
        red_array_init(&b[0].array, xs, RED_F32, 1, (const int64_t[]){16}, NULL);
        red_array_init(&b[1].array, lo1, RED_I64, 1, (const int64_t[]){2}, NULL);
        red_array_init(&b[2].array, hi1, RED_I64, 1, (const int64_t[]){2}, NULL);
        int64_t n = 0;
        int st;
        char err[512] = "";
        double *v = eval_rows(2, "sum(x[k+10]) over k in lo[r]..hi[r]", b, 3, &n, &st, err, sizeof err);
        CHECK(v && n == 2 && v[0] == 0 + 1 + 2 && v[1] == 10 + 11 + 12,
              "ranges [-10,-7) and [0,3) of x[k+10]: status %d (%s), %g %g (should be 3 33)", st, err,
              v && n > 0 ? v[0] : NAN, v && n > 1 ? v[1] : NAN);
        free(v);
        red_array_init(&b[0].array, xs, RED_F32, 1, (const int64_t[]){6}, NULL);
        red_array_init(&b[1].array, lo2, RED_I64, 1, (const int64_t[]){2}, NULL);
        red_array_init(&b[2].array, hi2, RED_I64, 1, (const int64_t[]){2}, NULL);
        v = eval_rows(2, "sum(x[k]) over k in lo[r]..hi[r]", b, 3, &n, &st, err, sizeof err);
        CHECK(!v && st == RED_ERR_INDEX && strstr(err, "'x' is -3"),
              "ranges [-3,-1) and [0,4) over x of 6: status %d, message '%s'", st, err);
        free(v);
    }
    free(A);
    free(w);
    printf("test_cpuwalk: %d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
