/*
 * test_api.c -- promises of include/redjit.h about options, error messages and red_eval_f64,
 * through the public API on the CPU (a GPU, where there is one, changes no outcome):
 *   - an expression keeps the options the context had when it was prepared: a later
 *     red_set_option does not reach it (it used to, and its red_run then failed with
 *     RED_ERR_DEVICE on a machine without a GPU); red_expr_set_option still overrides;
 *     red_eval and expressions prepared later take the new value;
 *   - RED_DEVICE_GPU without a GPU is RED_ERR_DEVICE with a message that says so;
 *   - every failing call sets the message it reports (the expression's for expression
 *     calls, copied to the context; the context's for context calls), and the message
 *     stays until the next failing call on that object (calls that succeed leave it);
 *   - red_eval_f64 on an expression with several results fails with RED_ERR_ARG and says
 *     how many there are, leaving *v alone.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <redjit.h>

#include "check.h"

static double X[6] = {1, 2, 3, 4, 5, 6};
static double Y[4] = {1, 1, 1, 1};

static red_array vec(double *data, int64_t n)
{
    red_array a;
    red_array_init(&a, data, RED_F64, 1, &n, NULL);
    return a;
}

static int has(const char *s, const char *part) { return s && strstr(s, part) != NULL; }

/* "backend: cpu" or "backend: gpu" from red_explain_ex's first lines. */
static int explains(red_expr *e, const char *what)
{
    const char *text = NULL;
    return red_explain_ex(e, RED_EXPLAIN_PLAN, &text) == RED_OK && has(text, what);
}

static void test_options_fixed_at_prepare(void)
{
    red_ctx *ctx;
    red_open(&ctx);
    int gpu = red_gpu_available(ctx);
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    red_set_option(ctx, RED_OPT_THREADS, 1);
    red_expr *e;
    CHECK(red_prepare(ctx, "sum(x)", &e) == RED_OK, "prepare: %s", red_errmsg(ctx));
    red_array x = vec(X, 6);
    red_bind_array(e, "x", &x);
    double v = 0;
    CHECK(red_run(e) == RED_OK && red_result_f64(e, 0, &v) == RED_OK && v == 21, "first run: %s",
          red_expr_errmsg(e));

    /* the context changes; the expression prepared before keeps its options */
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_GPU);
    red_set_option(ctx, RED_OPT_THREADS, 3);
    int rc = red_run(e);
    v = 0;
    CHECK(rc == RED_OK && red_result_f64(e, 0, &v) == RED_OK && v == 21,
          "after the context's RED_OPT_DEVICE changed, the expression prepared before still runs "
          "(status %d: %s)", rc, red_expr_errmsg(e));
    CHECK(explains(e, "backend: cpu (up to 1 thread,"),
          "the expression keeps the device and threads it was prepared with");
    int o = -1;
    CHECK(red_get_option(ctx, RED_OPT_DEVICE, &o) == RED_OK && o == RED_DEVICE_GPU, "the context has its new value");

    /* an expression prepared now takes the new values */
    red_expr *e2;
    red_prepare(ctx, "sum(x)", &e2);
    red_bind_array(e2, "x", &x);
    rc = red_run(e2);
    if (gpu) {
        CHECK(rc == RED_OK, "prepared after the change, it runs on the GPU: %s", red_expr_errmsg(e2));
    } else {
        CHECK(rc == RED_ERR_DEVICE, "RED_DEVICE_GPU without a GPU is RED_ERR_DEVICE (got %d)", rc);
        CHECK(has(red_expr_errmsg(e2), "RED_DEVICE_GPU") && has(red_expr_errmsg(e2), "no GPU"),
              "and the message says why: %s", red_expr_errmsg(e2));
        CHECK(strcmp(red_errmsg(ctx), red_expr_errmsg(e2)) == 0, "the context has the same message: %s",
              red_errmsg(ctx));
    }
    /* red_expr_set_option overrides, both ways */
    CHECK(red_expr_set_option(e2, RED_OPT_DEVICE, RED_DEVICE_CPU) == RED_OK, "set the expression's device");
    CHECK(red_run(e2) == RED_OK && explains(e2, "backend: cpu (up to 3 threads,"),
          "an expression option overrides what it took from the context: %s", red_expr_errmsg(e2));
    red_expr_set_option(e, RED_OPT_DEVICE, RED_DEVICE_GPU);
    rc = red_run(e);
    CHECK(gpu ? rc == RED_OK : rc == RED_ERR_DEVICE && has(red_expr_errmsg(e), "RED_DEVICE_GPU"),
          "RED_DEVICE_GPU set on the expression: status %d (%s)", rc, red_expr_errmsg(e));
    red_expr_set_option(e, RED_OPT_DEVICE, RED_DEVICE_CPU);
    CHECK(red_run(e) == RED_OK, "and back on the CPU it runs again: %s", red_expr_errmsg(e));

    /* red_eval reads the context's options at each call */
    red_binding b[1] = {{"x", x}};
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    CHECK(red_eval_f64(ctx, "sum(x)", b, 1, &v) == RED_OK && v == 21, "red_eval on the CPU: %s", red_errmsg(ctx));
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_GPU);
    rc = red_eval_f64(ctx, "sum(x)", b, 1, &v);
    CHECK(gpu ? rc == RED_OK : rc == RED_ERR_DEVICE, "red_eval follows the context's device now: status %d", rc);
    red_finalize(e);
    red_finalize(e2);
    red_close(ctx);
}

static void test_messages(void)
{
    red_ctx *ctx;
    red_open(&ctx);
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    CHECK(strcmp(red_errmsg(ctx), "") == 0, "a new context has no message");
    red_expr *e;
    red_prepare(ctx, "sum(x+y)", &e);
    CHECK(strcmp(red_expr_errmsg(e), "") == 0, "a new expression has no message");
    red_array x = vec(X, 6), y = vec(Y, 4);
    red_bind_array(e, "x", &x);
    red_bind_array(e, "y", &y);

    /* a run that fails on shapes, then a failure of another kind */
    CHECK(red_run(e) == RED_ERR_SHAPE && has(red_expr_errmsg(e), "differ"), "shape error: %s", red_expr_errmsg(e));
    double v = 0;
    CHECK(red_result_f64(e, 0, &v) == RED_ERR_ARG, "no result after a failed run");
    CHECK(has(red_expr_errmsg(e), "no result 0") && !has(red_expr_errmsg(e), "differ"),
          "the message is the later failure's, not the run's: %s", red_expr_errmsg(e));
    CHECK(strcmp(red_errmsg(ctx), red_expr_errmsg(e)) == 0, "and the context's too: %s", red_errmsg(ctx));

    /* calls that succeed leave the last failure's message (on both objects) */
    red_bind_array(e, "y", &x);
    CHECK(red_run(e) == RED_OK && red_result_f64(e, 0, &v) == RED_OK && v == 42, "the run works: %s",
          red_expr_errmsg(e));
    CHECK(has(red_expr_errmsg(e), "no result 0"), "a successful red_run leaves the expression's message: '%s'",
          red_expr_errmsg(e));
    CHECK(has(red_errmsg(ctx), "no result 0"), "and the context's: '%s'", red_errmsg(ctx));

    CHECK(red_result_f64(e, 5, &v) == RED_ERR_ARG && has(red_expr_errmsg(e), "no result 5") &&
              has(red_expr_errmsg(e), "1 result"),
          "an index past the results says how many there are: '%s'", red_expr_errmsg(e));
    CHECK(red_result_copy(e, 0, NULL) == RED_ERR_ARG && has(red_expr_errmsg(e), "dst"),
          "red_result_copy to NULL: '%s'", red_expr_errmsg(e));
    CHECK(red_result_detach(e, 0, NULL) == RED_ERR_ARG && has(red_expr_errmsg(e), "out"),
          "red_result_detach to NULL: '%s'", red_expr_errmsg(e));
    const char *text = NULL;
    CHECK(red_explain_ex(e, 7, &text) == RED_ERR_ARG && has(red_expr_errmsg(e), "RED_EXPLAIN"),
          "red_explain_ex with an unknown choice: '%s'", red_expr_errmsg(e));
    CHECK(red_expr_set_option(e, RED_OPT_THREADS, -1) == RED_ERR_ARG && has(red_expr_errmsg(e), "-1"),
          "red_expr_set_option with a bad value: '%s'", red_expr_errmsg(e));
    CHECK(red_expr_set_option(e, RED_OPT_CACHE_MB, 1) == RED_ERR_ARG && has(red_expr_errmsg(e), "context"),
          "red_expr_set_option with a context option: '%s'", red_expr_errmsg(e));
    CHECK(red_last_timings(e, NULL) == RED_ERR_ARG && has(red_expr_errmsg(e), "NULL"),
          "red_last_timings to NULL: '%s'", red_expr_errmsg(e));
    CHECK(red_bind_array(e, "9x", &x) == RED_ERR_BIND && has(red_expr_errmsg(e), "9x"),
          "a bad name: '%s'", red_expr_errmsg(e));

    /* context calls */
    CHECK(red_set_option(ctx, (red_option)99, 0) == RED_ERR_ARG && has(red_errmsg(ctx), "red_set_option") &&
              has(red_errmsg(ctx), "99"),
          "red_set_option with an unknown option: '%s'", red_errmsg(ctx));
    CHECK(red_set_option(ctx, RED_OPT_DEVICE, 7) == RED_ERR_ARG && has(red_errmsg(ctx), "7"),
          "red_set_option with a bad value: '%s'", red_errmsg(ctx));
    CHECK(red_get_option(ctx, RED_OPT_DEVICE, NULL) == RED_ERR_ARG && has(red_errmsg(ctx), "red_get_option"),
          "red_get_option to NULL: '%s'", red_errmsg(ctx));
    red_expr *bad = NULL;
    CHECK(red_prepare(ctx, NULL, &bad) == RED_ERR_ARG && has(red_errmsg(ctx), "red_prepare"),
          "red_prepare of NULL: '%s'", red_errmsg(ctx));
    CHECK(red_prepare(ctx, "sum(", &bad) == RED_ERR_SYNTAX && has(red_errmsg(ctx), "sum("),
          "a syntax error has its caret message: '%s'", red_errmsg(ctx));
    CHECK(red_eval(ctx, NULL, NULL, 0, NULL, 0, NULL) == RED_ERR_ARG && has(red_errmsg(ctx), "red_eval"),
          "red_eval of NULL: '%s'", red_errmsg(ctx));
    CHECK(red_eval(ctx, "sum(x)", NULL, 1, NULL, 0, NULL) == RED_ERR_ARG && has(red_errmsg(ctx), "bindings"),
          "red_eval with NULL bindings: '%s'", red_errmsg(ctx));
    CHECK(red_cache_stats(ctx, NULL) == RED_ERR_ARG && has(red_errmsg(ctx), "red_cache_stats"),
          "red_cache_stats to NULL: '%s'", red_errmsg(ctx));
    CHECK(red_check_syntax(ctx, NULL, NULL) == RED_ERR_ARG && has(red_errmsg(ctx), "red_check_syntax"),
          "red_check_syntax of NULL: '%s'", red_errmsg(ctx));
    CHECK(red_memcpy(ctx, NULL, RED_MEM_HOST, X, RED_MEM_HOST, 8) == RED_ERR_ARG && has(red_errmsg(ctx), "red_memcpy"),
          "red_memcpy to NULL: '%s'", red_errmsg(ctx));
    CHECK(red_memcpy(ctx, Y, (red_memory)9, X, RED_MEM_HOST, 8) == RED_ERR_ARG && has(red_errmsg(ctx), "9"),
          "red_memcpy with an unknown memory kind: '%s'", red_errmsg(ctx));
    CHECK(red_device_alloc(ctx, 8, NULL) == RED_ERR_ARG && has(red_errmsg(ctx), "red_device_alloc"),
          "red_device_alloc to NULL: '%s'", red_errmsg(ctx));
    red_finalize(e);
    red_close(ctx);
}

static void test_eval_f64(void)
{
    red_ctx *ctx;
    red_open(&ctx);
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    red_array x = vec(X, 6);
    red_binding b[1] = {{"x", x}};
    double v = -1;
    CHECK(red_eval_f64(ctx, "max(x)", b, 1, &v) == RED_OK && v == 6, "one result: %g", v);
    v = -1;
    int rc = red_eval_f64(ctx, "sum(x), max(x)", b, 1, &v);
    CHECK(rc == RED_ERR_ARG, "two results are RED_ERR_ARG, not the first (status %d, v %g)", rc, v);
    CHECK(v == -1, "*v is left alone (%g)", v);
    CHECK(has(red_errmsg(ctx), "2 results") && has(red_errmsg(ctx), "red_eval"),
          "the message says how many and what to use: '%s'", red_errmsg(ctx));
    CHECK(red_eval_f64(ctx, "sum(x)", b, 1, NULL) == RED_ERR_ARG && has(red_errmsg(ctx), "red_eval_f64"),
          "red_eval_f64 to NULL: '%s'", red_errmsg(ctx));
    red_close(ctx);
}

/* red_result_copy converts as a cast does: into 8- and 16-bit integers floats
 * saturate and integers wrap; a source array of them reads as their values. */
static void test_result_copy_small_integers(void)
{
    red_ctx *ctx;
    red_open(&ctx);
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    double f[6] = {-1e9, -128.7, 3.9, 127.5, 300, 0.0 / 0.0};
    int8_t s8[6] = {-128, 127, -1, 0, 5, 100};
    int64_t n = 6;
    red_array fa, sa, d8, du16;
    red_array_init(&fa, f, RED_F64, 1, &n, NULL);
    red_array_init(&sa, s8, RED_I8, 1, &n, NULL);
    red_expr *e = NULL;
    CHECK(red_prepare(ctx, "f[i] * 1, s[i] * 1000", &e) == RED_OK, "prepare: %s", red_errmsg(ctx));
    red_bind_array(e, "f", &fa);
    red_bind_array(e, "s", &sa);
    CHECK(red_run(e) == RED_OK, "run: %s", red_expr_errmsg(e));
    int8_t o8[6];
    uint16_t o16[6];
    red_array_init(&d8, o8, RED_I8, 1, &n, NULL);
    red_array_init(&du16, o16, RED_U16, 1, &n, NULL);
    CHECK(red_result_copy(e, 0, &d8) == RED_OK, "f64 -> i8: %s", red_expr_errmsg(e));
    const int8_t w8[6] = {-128, -128, 3, 127, 127, 0};
    CHECK(memcmp(o8, w8, sizeof w8) == 0, "f64 -> i8 saturates: %d %d %d %d %d %d", o8[0], o8[1], o8[2], o8[3],
          o8[4], o8[5]);
    CHECK(red_result_copy(e, 1, &du16) == RED_OK, "i32 -> u16: %s", red_expr_errmsg(e));
    const uint16_t w16[6] = {3072, 61464, 64536, 0, 5000, 34464};   /* mod 65536 */
    CHECK(memcmp(o16, w16, sizeof w16) == 0, "i32 -> u16 wraps: %u %u %u", o16[0], o16[1], o16[5]);
    CHECK(red_dtype_size(RED_I8) == 1 && red_dtype_size(RED_U16) == 2 && strcmp(red_dtype_name(RED_U8), "u8") == 0,
          "sizes and names of the small types");
    red_finalize(e);
    red_close(ctx);
}

int main(void)
{
    test_options_fixed_at_prepare();
    test_messages();
    test_eval_f64();
    test_result_copy_small_integers();
    printf("test_api: %d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
