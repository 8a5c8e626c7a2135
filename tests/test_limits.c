/*
 * test_limits.c -- the limits a service sets before preparing texts it does not trust
 * (RED_OPT_MAX_TEXT, _NODES, _PASSES, _SOURCE, _COMPILES; docs/reliability.md, "Running
 * untrusted expressions"): the defaults, the ranges, and for each limit set low, RED_ERR_LIMIT
 * with a message naming the limit and its option, also where the program or plan comes from a
 * cache filled under higher limits.  The source and compile limits go through
 * red_precompile(e, "sm_90"), which needs NVRTC but no GPU, and through red_run on the GPU
 * backend, which CTest runs on the stand-in driver (tests/fakecuda, with REDJIT_CACHE=0 so every
 * kernel is compiled); each is skipped with a message where it cannot run.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <redjit.h>

#include "check.h"

static double X[6] = {1, 2, 3, 4, 5, 6};

static int has(const char *s, const char *part) { return s && strstr(s, part) != NULL; }

static red_expr *prepared(red_ctx *ctx, const char *text)
{
    red_expr *e = NULL;
    if (red_prepare(ctx, text, &e) != RED_OK) return NULL;
    int64_t n = 6;
    red_array a;
    red_array_init(&a, X, RED_F64, 1, &n, NULL);
    red_bind_array(e, "x", &a);
    return e;
}

static void defaults_and_ranges(red_ctx *ctx)
{
    static const struct {
        red_option opt;
        int def, hi;
    } d[] = {
        {RED_OPT_MAX_TEXT, 2147483646, 2147483646}, {RED_OPT_MAX_NODES, 1048576, 1048576},
        {RED_OPT_MAX_PASSES, 256, 256},             {RED_OPT_MAX_SOURCE, 16 << 20, 2147483647},
        {RED_OPT_MAX_COMPILES, 0, 2147483647},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        int v = -1;
        CHECK(red_get_option(ctx, d[i].opt, &v) == RED_OK && v == d[i].def, "option %d: default %d, not %d",
              (int)d[i].opt, d[i].def, v);
        CHECK(red_set_option(ctx, d[i].opt, d[i].hi) == RED_OK, "option %d takes %d", (int)d[i].opt, d[i].hi);
        CHECK(red_set_option(ctx, d[i].opt, -1) == RED_ERR_ARG, "option %d refuses -1", (int)d[i].opt);
        CHECK(red_set_option(ctx, d[i].opt, d[i].def) == RED_OK, "option %d back to its default", (int)d[i].opt);
    }
    CHECK(red_set_option(ctx, RED_OPT_MAX_TEXT, 0) == RED_ERR_ARG, "RED_OPT_MAX_TEXT refuses 0");
    CHECK(red_set_option(ctx, RED_OPT_MAX_NODES, 1048577) == RED_ERR_ARG, "RED_OPT_MAX_NODES refuses 2^20+1");
    CHECK(red_set_option(ctx, RED_OPT_MAX_PASSES, 257) == RED_ERR_ARG, "RED_OPT_MAX_PASSES refuses 257");
    red_expr *e = prepared(ctx, "sum(x)");
    CHECK(e && red_expr_set_option(e, RED_OPT_MAX_TEXT, 10) == RED_ERR_ARG &&
              has(red_expr_errmsg(e), "RED_OPT_MAX_TEXT belongs to the context"),
          "RED_OPT_MAX_TEXT is the context's: %s", e ? red_expr_errmsg(e) : "");
    CHECK(e && red_expr_set_option(e, RED_OPT_MAX_NODES, 10) == RED_ERR_ARG, "RED_OPT_MAX_NODES is the context's");
    CHECK(e && red_expr_set_option(e, RED_OPT_MAX_PASSES, 10) == RED_OK, "RED_OPT_MAX_PASSES is the expression's too");
    red_finalize(e);
}

static void text_limit(red_ctx *ctx)
{
    char *s = malloc(70001);
    memset(s, ' ', 70000);
    s[0] = 'x';
    s[70000] = 0;
    const char *want = "expression text is 70000 bytes: the limit is 65536 (RED_OPT_MAX_TEXT)";
    red_expr *e = NULL;
    CHECK(red_prepare(ctx, s, &e) == RED_OK, "70000 bytes under the default: %s", red_errmsg(ctx));
    red_finalize(e);
    e = NULL;
    red_set_option(ctx, RED_OPT_MAX_TEXT, 65536);
    /* the text is in the program cache now: refused all the same */
    CHECK(red_prepare(ctx, s, &e) == RED_ERR_LIMIT && !e && strcmp(red_errmsg(ctx), want) == 0,
          "red_prepare of 70000 bytes: %s", red_errmsg(ctx));
    CHECK(red_check_syntax(ctx, s, NULL) == RED_ERR_LIMIT && strcmp(red_errmsg(ctx), want) == 0,
          "red_check_syntax of 70000 bytes: %s", red_errmsg(ctx));
    double v;
    CHECK(red_eval_f64(ctx, s, NULL, 0, &v) == RED_ERR_LIMIT && strcmp(red_errmsg(ctx), want) == 0,
          "red_eval of 70000 bytes: %s", red_errmsg(ctx));
    s[65536] = 0;
    CHECK(red_check_syntax(ctx, s, NULL) == RED_OK, "65536 bytes are within the limit: %s", red_errmsg(ctx));
    red_set_option(ctx, RED_OPT_MAX_TEXT, 2147483646);
    free(s);
}

static void nodes_limit(red_ctx *ctx)
{
    red_set_option(ctx, RED_OPT_MAX_NODES, 3);
    red_expr *e = NULL;
    CHECK(red_prepare(ctx, "x + x + x", &e) == RED_ERR_LIMIT && !e &&
              has(red_errmsg(ctx), "expression has more than 3 syntax-tree nodes: the limit is 3 (RED_OPT_MAX_NODES)"),
          "5 nodes under a limit of 3: %s", red_errmsg(ctx));
    CHECK(red_check_syntax(ctx, "x + x + x", NULL) == RED_ERR_LIMIT && has(red_errmsg(ctx), "(RED_OPT_MAX_NODES)"),
          "red_check_syntax, 5 nodes: %s", red_errmsg(ctx));
    CHECK(red_check_syntax(ctx, "x + x", NULL) == RED_OK, "3 nodes are within the limit: %s", red_errmsg(ctx));
    /* parsed under the default, then asked for again under the limit: the cached program is refused */
    red_set_option(ctx, RED_OPT_MAX_NODES, 1048576);
    CHECK(red_prepare(ctx, "x * x * x", &e) == RED_OK, "5 nodes under the default: %s", red_errmsg(ctx));
    red_finalize(e);
    e = NULL;
    red_set_option(ctx, RED_OPT_MAX_NODES, 3);
    CHECK(red_prepare(ctx, "x * x * x", &e) == RED_ERR_LIMIT &&
              strcmp(red_errmsg(ctx), "expression has 5 syntax-tree nodes: the limit is 3 (RED_OPT_MAX_NODES)") == 0,
          "a cached program of 5 nodes under a limit of 3: %s", red_errmsg(ctx));
    red_set_option(ctx, RED_OPT_MAX_NODES, 1048576);
}

static void passes_limit(red_ctx *ctx)
{
    /* the inner sum is a pass, the outer one reads it: two passes */
    const char *text = "sum(x * sum(x))";
    red_set_option(ctx, RED_OPT_MAX_PASSES, 1);
    red_expr *e = prepared(ctx, text);
    CHECK(e && red_run(e) == RED_ERR_LIMIT &&
              has(red_expr_errmsg(e), ": the plan needs more than 1 passes (RED_OPT_MAX_PASSES)"),
          "two passes under a limit of 1: %s", e ? red_expr_errmsg(e) : red_errmsg(ctx));
    CHECK(has(red_errmsg(ctx), "RED_OPT_MAX_PASSES"), "the context has the message too: %s", red_errmsg(ctx));
    CHECK(e && red_expr_set_option(e, RED_OPT_MAX_PASSES, 2) == RED_OK && red_run(e) == RED_OK,
          "two passes under a limit of 2: %s", e ? red_expr_errmsg(e) : "");
    double v = 0;
    CHECK(e && red_result_f64(e, 0, &v) == RED_OK && v == 21 * 21, "sum(x * sum(x)) = %g", v);
    /* the plan is cached now (and this expression's last): lowering the limit still refuses it */
    CHECK(e && red_expr_set_option(e, RED_OPT_MAX_PASSES, 1) == RED_OK && red_run(e) == RED_ERR_LIMIT &&
              strcmp(red_expr_errmsg(e), "the plan has 2 passes: the limit is 1 (RED_OPT_MAX_PASSES)") == 0,
          "a cached plan of two passes under a limit of 1: %s", e ? red_expr_errmsg(e) : "");
    red_finalize(e);
    red_set_option(ctx, RED_OPT_MAX_PASSES, 256);
}

/* RED_OPT_MAX_SOURCE and RED_OPT_MAX_COMPILES through red_precompile; 0 when skipped. */
static int nvrtc_limits(red_ctx *ctx)
{
    red_expr *e = prepared(ctx, "sum(x)");
    int rc = e ? red_precompile(e, "sm_90") : RED_ERR_ARG;
    if (rc == RED_ERR_DEVICE) {
        printf("skipped: the source and compile limits need NVRTC (%s)\n", red_expr_errmsg(e));
        red_finalize(e);
        return 0;
    }
    CHECK(rc == RED_OK, "red_precompile under the defaults: %s", e ? red_expr_errmsg(e) : "");
    red_finalize(e);

    red_set_option(ctx, RED_OPT_MAX_SOURCE, 1000);
    e = prepared(ctx, "sum(x)");
    CHECK(e && red_precompile(e, "sm_90") == RED_ERR_LIMIT &&
              has(red_expr_errmsg(e), "generated CUDA source of pass 0 is ") &&
              has(red_expr_errmsg(e), " bytes: the limit is 1000 (RED_OPT_MAX_SOURCE)"),
          "source over 1000 bytes: %s", e ? red_expr_errmsg(e) : "");
    printf("source limit: %s\n", e ? red_expr_errmsg(e) : "");
    CHECK(e && red_expr_set_option(e, RED_OPT_MAX_SOURCE, 0) == RED_OK && red_precompile(e, "sm_90") == RED_OK,
          "RED_OPT_MAX_SOURCE 0 is no limit: %s", e ? red_expr_errmsg(e) : "");
    red_finalize(e);
    red_set_option(ctx, RED_OPT_MAX_SOURCE, 16 << 20);

    /* two passes, two compiles per red_precompile; the count is the expression's, across calls */
    red_set_option(ctx, RED_OPT_MAX_COMPILES, 3);
    e = prepared(ctx, "sum(x * sum(x))");
    CHECK(e && red_precompile(e, "sm_90") == RED_OK, "2 compiles under a limit of 3: %s", e ? red_expr_errmsg(e) : "");
    CHECK(e && red_precompile(e, "sm_90") == RED_ERR_LIMIT &&
              strcmp(red_expr_errmsg(e),
                     "expression needs more than 3 NVRTC compiles: the limit is 3 (RED_OPT_MAX_COMPILES)") == 0,
          "compiles 3 and 4 under a limit of 3: %s", e ? red_expr_errmsg(e) : "");
    red_finalize(e);
    e = prepared(ctx, "sum(x * sum(x))");
    CHECK(e && red_precompile(e, "sm_90") == RED_OK, "a new expression starts counting at 0: %s",
          e ? red_expr_errmsg(e) : "");
    red_finalize(e);
    red_set_option(ctx, RED_OPT_MAX_COMPILES, 0);
    return 1;
}

/* The same two limits inside a run on the GPU backend (where kernels are compiled on first
 * use, one module per kernel group a run needs); 0 when skipped. */
static int gpu_run_limits(void)
{
    red_ctx *ctx = NULL;
    if (red_open(&ctx) != RED_OK || !red_gpu_available(ctx)) {
        printf("skipped: the limits in a GPU run need a GPU or the stand-in driver, and NVRTC (%s)\n",
               ctx ? red_errmsg(ctx) : "red_open failed");
        red_close(ctx);
        return 0;
    }
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_GPU);
    red_set_option(ctx, RED_OPT_MAX_SOURCE, 1000);
    red_expr *e = prepared(ctx, "sum(x)");
    CHECK(e && red_run(e) == RED_ERR_LIMIT && has(red_expr_errmsg(e), "(RED_OPT_MAX_SOURCE)") &&
              red_result_count(e) == 0,
          "a GPU run whose source is over 1000 bytes: %s", e ? red_expr_errmsg(e) : "");
    red_finalize(e);
    red_set_option(ctx, RED_OPT_MAX_SOURCE, 16 << 20);

    /* two passes: each compiles on the first run; the second pass's compile is over a limit of 1 */
    red_set_option(ctx, RED_OPT_MAX_COMPILES, 1);
    e = prepared(ctx, "sum(x * sum(x))");
    CHECK(e && red_run(e) == RED_ERR_LIMIT && has(red_expr_errmsg(e), "(RED_OPT_MAX_COMPILES)") &&
              red_result_count(e) == 0,
          "a GPU run needing 2 compiles under a limit of 1: %s", e ? red_expr_errmsg(e) : "");
    red_finalize(e);
    red_set_option(ctx, RED_OPT_MAX_COMPILES, 2);
    e = prepared(ctx, "sum(x * sum(x))");
    int rc = e ? red_run(e) : RED_ERR_ARG;
    CHECK(rc == RED_OK, "the same run under a limit of 2: %s", e ? red_expr_errmsg(e) : "");
    /* warm: the kernels are loaded, so a second run compiles nothing and passes the limit */
    CHECK(e && red_run(e) == RED_OK, "a warm run compiles nothing: %s", e ? red_expr_errmsg(e) : "");
    red_finalize(e);
    red_close(ctx);
    return 1;
}

int main(void)
{
    red_ctx *ctx = NULL;
    if (red_open(&ctx) != RED_OK) {
        printf("FAIL: red_open\n");
        return 1;
    }
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    defaults_and_ranges(ctx);
    text_limit(ctx);
    nodes_limit(ctx);
    passes_limit(ctx);
    nvrtc_limits(ctx);
    red_close(ctx);
    gpu_run_limits();
    printf("test_limits: %d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
