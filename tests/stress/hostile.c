/*
 * hostile.c -- inputs built to break a parser or an executor: 100,000 nested parentheses (and
 * unary operators, and calls), a 10 MB expression, huge literals, index arithmetic that
 * overflows 64 bits, ranges and broadcast arrays of more than 2^31 elements.  Each must give
 * a clear error (status + message) or the correct result, within a time bound, and the whole
 * run within a memory bound (peak RSS); nothing may overflow the stack.
 */
#define _POSIX_C_SOURCE 200809L
#include "redjit.h"

#include <dlpack/dlpack.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static red_ctx *ctx;
static int failures, sanitized;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

static char *repeat(const char *pre, const char *unit, size_t times, const char *mid, const char *unit2,
                    size_t times2, const char *post)
{
    size_t lu = strlen(unit), lu2 = strlen(unit2);
    size_t n = strlen(pre) + lu * times + strlen(mid) + lu2 * times2 + strlen(post) + 1;
    char *s = malloc(n), *p = s;
    if (!s) { perror("malloc"); exit(1); }
    p += sprintf(p, "%s", pre);
    for (size_t i = 0; i < times; i++, p += lu) memcpy(p, unit, lu);
    p += sprintf(p, "%s", mid);
    for (size_t i = 0; i < times2; i++, p += lu2) memcpy(p, unit2, lu2);
    sprintf(p, "%s", post);
    return s;
}

/* Run `text` with bindings; the status must be one of `ok` (a mask of statuses), a failure must
 * carry a message; on success *v gets result 0 as f64 and *iv as i64.  Returns the status. */
static int eval(const char *what, const char *text, const red_binding *b, int nb, unsigned ok,
                double limit_s, double *v, int64_t *iv)
{
    double t0 = now();
    red_expr *e = NULL;
    int rc = red_prepare(ctx, text, &e);
    const char *msg = red_errmsg(ctx);
    char msgcopy[200] = "";
    if (rc == RED_OK) {
        for (int i = 0; i < nb; i++) red_bind_array(e, b[i].name, &b[i].array);
        rc = red_run(e);
        msg = red_expr_errmsg(e);
        if (rc == RED_OK) {
            if (v) red_result_f64(e, 0, v);
            if (iv) red_result_i64(e, 0, iv);
        }
    }
    snprintf(msgcopy, sizeof msgcopy, "%s", msg ? msg : "");
    for (char *c = msgcopy; *c; c++) if (*c == '\n') *c = '|';
    red_finalize(e);
    double dt = now() - t0;
    int bad = !(ok & (1u << rc)) || (rc && !msgcopy[0]) || dt > limit_s;
    printf("%-4s %-34s %-14s %7.2f s  %.90s\n", bad ? "FAIL" : "ok", what, rc ? red_errstr(rc) : "result", dt,
           msgcopy);
    failures += bad;
    return rc;
}

#define S(x) (1u << (x))

static void check_value(const char *what, int ok, const char *detail)
{
    if (!ok) { printf("FAIL %s: %s\n", what, detail); failures++; }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);     /* lines before a crash still show */
    sanitized = getenv("REDJIT_HOSTILE_SANITIZED") != NULL;
    if (red_open(&ctx) != RED_OK) return 1;
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    double xs[4] = {1, 2, 3, 4};
    int64_t four = 4;
    red_binding b[2];
    b[0].name = "x";
    red_array_init(&b[0].array, xs, RED_F64, 1, &four, NULL);
    int nb = 1;
    double v = 0;
    int64_t iv = 0;

    /* ---- nesting: the parser's bracket limit (256), not the C stack, must stop these ---- */
    char *t = repeat("", "(", 100000, "x", ")", 100000, "");
    eval("100,000 nested parentheses", t, b, nb, S(RED_ERR_LIMIT), 5, NULL, NULL);
    free(t);
    t = repeat("", "sum(", 100000, "x", ")", 100000, "");
    eval("100,000 nested calls", t, b, nb, S(RED_ERR_LIMIT), 5, NULL, NULL);
    free(t);
    t = repeat("", "x[", 100000, "0", "]", 100000, "");
    eval("100,000 nested subscripts", t, b, nb, S(RED_ERR_LIMIT), 5, NULL, NULL);
    free(t);
    t = repeat("", "(", 100000, "", "", 0, "");
    eval("100,000 unclosed parentheses", t, b, nb, S(RED_ERR_LIMIT) | S(RED_ERR_SYNTAX), 5, NULL, NULL);
    free(t);
    /* unary operators nest without brackets: a correct result or a limit */
    t = repeat("sum(", "-", 100000, "x)", "", 0, "");
    if (eval("100,000 unary minus", t, b, nb, S(RED_OK) | S(RED_ERR_LIMIT), 5, &v, NULL) == RED_OK)
        check_value("100,000 unary minus", v == 10, "sum(--...x) != 10");
    free(t);
    t = repeat("sum(", "!", 100001, "x)", "", 0, "");
    if (eval("100,001 logical not", t, b, nb, S(RED_OK) | S(RED_ERR_LIMIT) | S(RED_ERR_TYPE), 5, &v, NULL) == RED_OK)
        check_value("100,001 logical not", v == 0, "sum(!!...!x) != 0");
    free(t);
    /* a long flat chain: left-deep, 100,000 operators */
    t = repeat("sum(x", "+x", 100000, ")", "", 0, "");
    if (eval("x+x+... (100,001 terms)", t, b, nb, S(RED_OK) | S(RED_ERR_LIMIT), 20, &v, NULL) == RED_OK)
        check_value("x+x+... (100,001 terms)", v == 100001.0 * 10, "wrong sum");
    free(t);
    /* a ternary chain nests on the right */
    t = repeat("sum(", "x>0?", 100000, "x", ":x", 100000, ")");
    if (eval("100,000 nested ?:", t, b, nb, S(RED_OK) | S(RED_ERR_LIMIT), 10, &v, NULL) == RED_OK)
        check_value("100,000 nested ?:", v == 10, "wrong sum");
    free(t);

    /* ---- 10 MB of text ---- */
    size_t terms = 10u * 1024 * 1024 / 2;
    t = repeat("sum(x", "+x", terms, ")", "", 0, "");
    if (eval("10 MB: sum(x+x+...+x)", t, b, nb, S(RED_OK) | S(RED_ERR_LIMIT), 60, &v, NULL) == RED_OK)
        check_value("10 MB expression", v == (double)(terms + 1) * 10, "wrong sum");
    free(t);
    t = repeat("", "1", 10u * 1024 * 1024, "", "", 0, "");
    eval("10 MB integer literal", t, b, nb, S(RED_ERR_SYNTAX) | S(RED_ERR_LIMIT), 10, NULL, NULL);
    free(t);
    t = repeat("", " ", 10u * 1024 * 1024, "sum(x)", "", 0, "");
    if (eval("10 MB of blanks, then sum(x)", t, b, nb, S(RED_OK) | S(RED_ERR_LIMIT), 10, &v, NULL) == RED_OK)
        check_value("10 MB of blanks", v == 10, "wrong sum");
    free(t);
    t = repeat("sum(x) #", "#", 10u * 1024 * 1024, "", "", 0, "");
    if (eval("10 MB comment", t, b, nb, S(RED_OK) | S(RED_ERR_LIMIT), 10, &v, NULL) == RED_OK)
        check_value("10 MB comment", v == 10, "wrong sum");
    free(t);

    /* ---- literals ---- */
    if (eval("1e999", "1e999", b, nb, S(RED_OK) | S(RED_ERR_SYNTAX), 1, &v, NULL) == RED_OK)
        check_value("1e999", v > 1e308, "1e999 is not +inf");
    eval("99999999999999999999999", "99999999999999999999999", b, nb, S(RED_ERR_SYNTAX) | S(RED_ERR_LIMIT), 1, NULL, NULL);
    eval("0x1ffffffffffffffff", "0x1ffffffffffffffff", b, nb, S(RED_ERR_SYNTAX) | S(RED_ERR_LIMIT), 1, NULL, NULL);
    if (eval("18446744073709551615 (2^64-1)", "18446744073709551615", b, nb, S(RED_OK), 1, &v, NULL) == RED_OK)
        check_value("2^64-1", v == 18446744073709551615.0, "wrong value");
    t = repeat("0.", "0", 100000, "1e-99999", "", 0, "");
    if (eval("100,000-digit decimal", t, b, nb, S(RED_OK) | S(RED_ERR_SYNTAX) | S(RED_ERR_LIMIT), 2, &v, NULL) == RED_OK)
        check_value("100,000-digit decimal", v == 0, "not 0");
    free(t);

    /* ---- index arithmetic that overflows 64 bits: caught by the bounds check ---- */
    eval("x[i*9223372036854775807]", "sum(x[i*9223372036854775807]) over i in 0..3", b, nb,
         S(RED_ERR_INDEX), 1, NULL, NULL);
    eval("x[i+9223372036854775807]", "sum(x[i+9223372036854775807]) over i in 0..3", b, nb,
         S(RED_ERR_INDEX), 1, NULL, NULL);
    eval("x[i-9223372036854775807-2]", "sum(x[i-9223372036854775807-2]) over i in 0..3", b, nb,
         S(RED_ERR_INDEX), 1, NULL, NULL);
    eval("x[i << 63]", "sum(x[i << 63]) over i in 0..3", b, nb, S(RED_ERR_INDEX), 1, NULL, NULL);
    if (eval("x[i+c] inferred, c huge", "sum(x[i+9223372036854775807])", b, nb,
             S(RED_OK) | S(RED_ERR_SHAPE) | S(RED_ERR_INDEX), 1, &v, NULL) == RED_OK)
        check_value("x[i+c] inferred", v == 0, "an empty extent must sum to 0");

    /* ---- more than 2^31 elements ---- */
    if (!sanitized) {
        int64_t big = 2147483653LL;             /* 2^31 + 5 */
        if (eval("count(true) over 2^31+5", "count(true) over i in 0..2147483653", b, nb, S(RED_OK), 60,
                 NULL, &iv) == RED_OK)
            check_value("count over 2^31+5", iv == big, "wrong count");
        if (eval("sum(i) over 3e9", "sum(i) over i in 0..3000000000", b, nb, S(RED_OK), 60, NULL, &iv) == RED_OK)
            check_value("sum(i) over 3e9", iv == 4499999998500000000LL, "wrong sum");
        /* a broadcast array of 2^31+5 elements (stride 0): one int32 in memory */
        int32_t one = 1;
        int64_t stride0 = 0;
        red_binding bb = {"w", {0}};
        red_array_init(&bb.array, &one, RED_I32, 1, &big, &stride0);
        if (eval("sum(w), w: 2^31+5 broadcast i32", "sum(w)", &bb, 1, S(RED_OK), 60, NULL, &iv) == RED_OK)
            check_value("broadcast sum", iv == big, "wrong sum");
    }
    /* extents whose product overflows 64 bits must be refused, not wrapped */
    eval("count over 2^62 x 2^62", "count(true) over i in 0..4611686018427387904, j in 0..4611686018427387904",
         b, nb, S(RED_ERR_LIMIT) | S(RED_ERR_SHAPE) | S(RED_ERR_NOMEM), 5, NULL, NULL);
    eval("array result of 2^40 elements", "sum(x[j] + i) over j, i in 0..1099511627776",
         b, nb, S(RED_OK) | S(RED_ERR_LIMIT) | S(RED_ERR_NOMEM) | S(RED_ERR_SHAPE), 5, NULL, NULL);

    /* a wrapping affine subscript whose two ends are in range and whose middle is not: every
     * element must be checked, not the ends of the run (4-byte elements, so the byte offset
     * of the middle ones does not wrap back into the array either) */
    float fs[4] = {1, 2, 3, 4};
    red_binding bf = {"f", {0}};
    red_array_init(&bf.array, fs, RED_F32, 1, &four, NULL);
    eval("f[i*2^61] over 0..9, f32", "sum(f[i*2305843009213693952]) over i in 0..9", &bf, 1,
         S(RED_ERR_INDEX), 1, NULL, NULL);
    eval("x[i*2^62] over 0..5, f64", "sum(x[i*4611686018427387904]) over i in 0..5", b, nb,
         S(RED_ERR_INDEX), 1, NULL, NULL);

    /* descriptors whose numbers overflow (a review of the C API, 2026-11-23): refused, not
     * wrapped.  Strides of 2^62 elements made every x[i] read x[0] (sum 4 instead of 10). */
    {
        red_expr *e = NULL;
        int rc = red_prepare(ctx, "sum(x)", &e);
        red_array a;
        red_array_init(&a, xs, RED_F64, 1, &four, (const int64_t[]){(int64_t)1 << 62});
        rc = rc ? rc : red_bind_array(e, "x", &a);
        check_value("strides spanning past int64", rc == RED_ERR_BIND && strstr(red_expr_errmsg(e), "'x'") &&
                    strstr(red_expr_errmsg(e), "strides"), red_expr_errmsg(e));
        red_array_init(&a, xs, RED_F64, 1, &four, (const int64_t[]){INT64_MIN});
        check_value("stride INT64_MIN", red_bind_array(e, "x", &a) == RED_ERR_BIND, red_expr_errmsg(e));
        red_array_init(&a, xs + 3, RED_F64, 1, &four, (const int64_t[]){-1});   /* x reversed: fine */
        double r = 0;
        rc = red_bind_array(e, "x", &a);
        rc = rc ? rc : red_run(e);
        rc = rc ? rc : red_result_f64(e, 0, &r);
        check_value("negative stride", rc == RED_OK && r == 10, red_expr_errmsg(e));
        red_finalize(e);
        int64_t huge[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 4};
        check_value("red_array_init, 2^82 elements", red_array_init(&a, xs, RED_F64, 3, huge, NULL) == RED_ERR_ARG,
                    "accepted");
        a.ndim = 3;
        memcpy(a.shape, huge, sizeof huge);
        check_value("red_array_size, 2^82 elements", red_array_size(&a) == INT64_MAX, "wrapped");
        /* DLPack tensors with no shape, a negative extent, or no data behind an offset */
        int64_t shape[1] = {4}, neg[1] = {-4};
        DLTensor dt = {.data = xs, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 64, 1}, .shape = NULL};
        check_value("dlpack, NULL shape", red_array_from_dlpack(&a, &dt) == RED_ERR_BIND, "accepted");
        dt.shape = neg;
        check_value("dlpack, negative extent", red_array_from_dlpack(&a, &dt) == RED_ERR_BIND, "accepted");
        dt.shape = shape;
        dt.data = NULL;
        dt.byte_offset = 64;
        check_value("dlpack, NULL data + offset", red_array_from_dlpack(&a, &dt) == RED_ERR_BIND, "accepted");
        check_value("dlpack, NULL arguments", red_array_from_dlpack(NULL, &dt) == RED_ERR_ARG &&
                    red_array_from_dlpack(&a, NULL) == RED_ERR_ARG, "not RED_ERR_ARG");
        /* red_eval whose second result does not fit: the first one's buffer, detached for the
         * caller, must not be left allocated (LeakSanitizer would see it) */
        double two[2];
        red_binding bx = {"x", {0}};
        red_array_init(&bx.array, xs, RED_F64, 1, &four, NULL);
        red_array res[2];
        memset(res, 0, sizeof res);
        red_array_init(&res[1], two, RED_F64, 1, (const int64_t[]){2}, NULL);
        rc = red_eval(ctx, "sum(x), x*2", &bx, 1, res, 2, NULL);
        check_value("red_eval failing on its second result", rc == RED_ERR_BIND && res[0].data == NULL,
                    red_errmsg(ctx));
        /* a result copied into device memory: refused for what it is, not for its rank */
        red_expr *e2 = NULL;
        rc = red_prepare(ctx, "x*2", &e2);
        rc = rc ? rc : red_bind_array(e2, "x", &bx.array);
        rc = rc ? rc : red_run(e2);
        double out[4];
        red_array_init(&a, out, RED_F64, 1, &four, NULL);
        a.memory = RED_MEM_CUDA;
        rc = rc ? rc : red_result_copy(e2, 0, &a);
        check_value("result copied into device memory after a CPU run",
                    rc == RED_ERR_UNSUPPORTED && strstr(red_expr_errmsg(e2), "device memory"), red_expr_errmsg(e2));
        red_finalize(e2);
        double dst[4];
        check_value("red_memcpy, unknown memory kinds",
                    red_memcpy(ctx, dst, (red_memory)7, xs, (red_memory)9, sizeof dst) == RED_ERR_ARG, "copied");
    }

    /* the context still works */
    if (eval("afterwards: sum(x)", "sum(x)", b, nb, S(RED_OK), 1, &v, NULL) == RED_OK)
        check_value("afterwards", v == 10, "wrong sum");

    long rss = peak_rss_mb(), limit = sanitized ? 6144 : 2048;
    printf("%-4s peak RSS %ld MB (limit %ld MB)\n", rss > limit ? "FAIL" : "ok", rss, limit);
    failures += rss > limit;
    red_close(ctx);
    printf("hostile: %d failures\n", failures);
    return failures ? 1 : 0;
}
