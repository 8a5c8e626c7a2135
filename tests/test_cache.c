/*
 * test_cache.c -- the context's cache of parsed programs and plans is bounded
 * in bytes (RED_OPT_CACHE_MB) and in entries (256 texts, 16 plans a text), and
 * what it drops stays valid for the expressions still using it: a prepared
 * expression whose program or plan left the cache still runs and gives the
 * right value.  CPU only; run under ASan in the sanitizer build, where a plan
 * freed too early is a use-after-free report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <redjit.h>

#include "check.h"

static double x[100];

static red_binding bind_x(void)
{
    red_binding b = {"x", {0}};
    int64_t n = 100;
    red_array_init(&b.array, x, RED_F64, 1, &n, NULL);
    return b;
}

static red_cache_info stats(red_ctx *ctx)
{
    red_cache_info c;
    if (red_cache_stats(ctx, &c) != RED_OK) memset(&c, 0, sizeof c);
    return c;
}

/* sum(x) + k for 0 <= k < n through red_eval's cache: each text new. */
static int eval_many(red_ctx *ctx, int first, int n)
{
    red_binding b = bind_x();
    int bad = 0;
    for (int k = first; k < first + n; k++) {
        char text[64];
        snprintf(text, sizeof text, "sum(x) + %d", k);
        double v = 0;
        if (red_eval_f64(ctx, text, &b, 1, &v) != RED_OK || v != 4950.0 + k) bad++;
    }
    return bad;
}

static void test_option(void)
{
    red_ctx *ctx;
    red_open(&ctx);
    int v = -1;
    CHECK(red_get_option(ctx, RED_OPT_CACHE_MB, &v) == RED_OK && v == 64, "default RED_OPT_CACHE_MB is %d", v);
    CHECK(red_set_option(ctx, RED_OPT_CACHE_MB, -1) == RED_ERR_ARG, "a negative cache size is refused");
    CHECK(red_set_option(ctx, RED_OPT_CACHE_MB, 65537) == RED_ERR_ARG, "a cache size over 65536 MiB is refused");
    CHECK(red_set_option(ctx, RED_OPT_CACHE_MB, 0) == RED_OK, "a cache of 0 MiB is allowed");
    red_expr *e;
    red_prepare(ctx, "sum(x)", &e);
    CHECK(red_expr_set_option(e, RED_OPT_CACHE_MB, 1) == RED_ERR_ARG, "RED_OPT_CACHE_MB is a context option");
    red_finalize(e);
    red_close(ctx);
}

/* Many texts under the default budget: at most 256 programs kept. */
static void test_count_bound(void)
{
    red_ctx *ctx;
    red_open(&ctx);
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    CHECK(eval_many(ctx, 0, 600) == 0, "600 distinct texts evaluate correctly");
    red_cache_info c = stats(ctx);
    CHECK(c.programs == 256, "the context keeps the 256 newest programs (has %lld)", c.programs);
    CHECK(c.plans == 256, "one plan each (has %lld)", c.plans);
    CHECK(c.program_bytes > 0 && c.program_bytes <= 64ll << 20, "their %lld bytes are within 64 MiB",
          c.program_bytes);
    /* a text evicted long ago is parsed again and still right */
    CHECK(eval_many(ctx, 0, 3) == 0, "evicted texts evaluate again");
    red_close(ctx);
}

/* A 1 MiB budget: the bytes stay under it, whatever the number of texts. */
static void test_byte_bound(void)
{
    red_ctx *ctx;
    red_open(&ctx);
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    red_set_option(ctx, RED_OPT_CACHE_MB, 1);
    long long most = 0;
    for (int round = 0; round < 10; round++) {
        CHECK(eval_many(ctx, round * 50, 50) == 0, "round %d evaluates correctly", round);
        red_cache_info c = stats(ctx);
        if (c.program_bytes > most) most = c.program_bytes;
    }
    CHECK(most > 0 && most <= 1 << 20, "cache bytes stay within 1 MiB (peak %lld)", most);
    red_cache_info c = stats(ctx);
    CHECK(c.programs > 0 && c.programs < 256, "the byte budget binds before the count (%lld programs)", c.programs);
    /* 0: nothing is kept beyond what expressions use */
    red_set_option(ctx, RED_OPT_CACHE_MB, 0);
    CHECK(eval_many(ctx, 1000, 5) == 0, "a 0 MiB cache still evaluates");
    c = stats(ctx);
    CHECK(c.programs == 0 && c.program_bytes == 0, "a 0 MiB cache keeps nothing (%lld programs, %lld bytes)",
          c.programs, c.program_bytes);
    red_close(ctx);
}

/* An expression keeps its program and plan alive after the cache drops them. */
static void test_survivors(void)
{
    red_ctx *ctx;
    red_open(&ctx);
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    red_expr *keep;
    CHECK(red_prepare(ctx, "sum(x) * 2", &keep) == RED_OK, "prepare");
    red_binding b = bind_x();
    red_bind_array(keep, "x", &b.array);
    double v = 0;
    CHECK(red_run(keep) == RED_OK && red_result_f64(keep, 0, &v) == RED_OK && v == 9900.0, "first run: %g", v);
    /* push its text out of the cache */
    CHECK(eval_many(ctx, 0, 300) == 0, "300 other texts");
    CHECK(red_run(keep) == RED_OK && red_result_f64(keep, 0, &v) == RED_OK && v == 9900.0,
          "run after its program left the cache: %g", v);

    /* one text, 20 binding signatures from 20 expressions: the program keeps
     * 16 plans; the expressions whose plans were dropped still run */
    static const red_dtype types[] = {RED_F64, RED_F32, RED_I32, RED_I64, RED_U32};
    static float xf[100];
    static int32_t xi[100];
    static int64_t xl[100];
    static uint32_t xu[100];
    void *data[] = {x, xf, xi, xl, xu};
    for (int i = 0; i < 100; i++) {
        xf[i] = (float)i;
        xi[i] = i;
        xl[i] = i;
        xu[i] = (uint32_t)i;
    }
    red_expr *es[20];
    int ok = 1;
    for (int k = 0; k < 20; k++) {
        /* signatures: the dtype of x and y, and whether y is a scalar */
        red_prepare(ctx, "sum(x * y)", &es[k]);
        red_array a;
        int64_t n = 100;
        red_array_init(&a, data[k % 5], types[k % 5], 1, &n, NULL);
        red_bind_array(es[k], "x", &a);
        if (k / 5 == 0) red_bind_i64(es[k], "y", 1);
        else if (k / 5 == 1) red_bind_f64(es[k], "y", 1);
        else {
            red_array_init(&a, data[(k / 5 + k) % 5], types[(k / 5 + k) % 5], 1, &n, NULL);
            if (k / 5 == 3) a.ndim = 0;   /* a 0-d array: a scalar of that type */
            red_bind_array(es[k], "y", &a);
        }
        ok &= red_run(es[k]) == RED_OK;
    }
    CHECK(ok, "20 signatures of one text run");
    red_cache_info c = stats(ctx);
    CHECK(c.plans <= 256 + 15, "plans of one text are bounded (%lld plans in all)", c.plans);
    for (int k = 0; k < 20; k++) {
        double want = k < 10 ? 4950.0 : k < 15 ? 328350.0 : 0.0;
        v = -1;
        int rc = red_run(es[k]);
        if (rc == RED_OK) red_result_f64(es[k], 0, &v);
        CHECK(rc == RED_OK && v == want, "signature %d runs again after the cache moved on: %g, want %g", k, v, want);
        red_finalize(es[k]);
    }
    red_finalize(keep);
    red_close(ctx);
}

int main(void)
{
    for (int i = 0; i < 100; i++) x[i] = i;
    test_option();
    test_count_bound();
    test_byte_bound();
    test_survivors();
    printf("test_cache: %d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
