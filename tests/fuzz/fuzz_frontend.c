/*
 * fuzz_frontend.c -- libFuzzer target over the front of the pipeline: lexer, parser, checker,
 * plan and CUDA code generation (red_explain returns the generated source), with no launch.
 * The input is expression text; it is prepared, bound to three fixed families of arrays and
 * explained.  Findings: a crash, a leak, UB, a status the header does not document for the
 * call, an error without a message (or, from the parser, without line:col and a caret), a
 * disagreement between red_check_syntax and red_prepare, and -- the two directions of "NVRTC
 * compiles exactly what the checker accepts" -- red_precompile succeeding where the checker
 * failed, or NVRTC rejecting the source of a plan the checker accepted (every Nth accepted
 * input, N = $REDJIT_FUZZ_NVRTC_EVERY, default 64, 0 = never; at most one of an input's three
 * bindings; skipped when NVRTC is absent).
 */
#include "fuzz_common.h"

#include <time.h>

static red_ctx *ctx;
static fz_store store;
static unsigned nvrtc_every = 64;
static int nvrtc_absent;
static unsigned long long accepted, compiled;
static int compiled_this_input;  /* one NVRTC compile an input at most: libFuzzer's limit is per input */
static double slowest_ms;        /* the slowest red_precompile, printed at exit */
static char slowest_text[160];

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    /* A huge request (an array result over a big range) must come back as RED_ERR_NOMEM. */
    return "allocator_may_return_null=1:max_allocation_size_mb=256:quarantine_size_mb=64";
}

static void stats(void)
{
    fprintf(stderr, "nvrtc: %llu sampled, %llu compiled%s; slowest %.0f ms: %s\n", accepted, compiled,
            nvrtc_absent ? " (NVRTC absent)" : "", slowest_ms, slowest_text);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    if (red_open(&ctx) != RED_OK) abort();
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    red_set_option(ctx, RED_OPT_THREADS, 1);
    const char *s = getenv("REDJIT_FUZZ_NVRTC_EVERY");
    if (s) nvrtc_every = (unsigned)strtoul(s, NULL, 10);
    setenv("REDJIT_CACHE", "0", 1);
    fz_store_init(&store);
    atexit(stats);
    return 0;
}

/* A parser error message: "LINE:COL: ...", then the line and a caret. */
static void caret_message(const char *msg, const char *text)
{
    int line, col;
    if (sscanf(msg, "%d:%d: ", &line, &col) != 2 || line < 1 || col < 1)
        FZ_FAIL("syntax message without line:col: '%s' for %s", msg, text);
    if (!strchr(msg, '^')) FZ_FAIL("syntax message without a caret: '%s' for %s", msg, text);
}

static uint64_t fnv(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static void check_plan(red_expr *e, const char *text, unsigned sig)
{
    fz_rng rng = fz_seed((const uint8_t *)&sig, sizeof sig);
    fz_bind_all(e, &store, &rng, sig);
    const char *ex = NULL;
    int rc = red_explain(e, &ex);
    fz_expect(rc, FZ_CHECK_OK, "red_explain", text, red_expr_errmsg(e));
    if (rc == RED_OK && (!ex || !strstr(ex, "generated CUDA")))
        FZ_FAIL("red_explain succeeded without the generated source, for %s", text);
    if (rc != RED_OK) {
        /* Rejected by the checker: nothing may reach NVRTC. */
        int pc = red_precompile(e, "sm_90");
        if (pc != rc) FZ_FAIL("checker said %d but red_precompile %d, for %s", rc, pc, text);
    } else if (nvrtc_every && !nvrtc_absent && !compiled_this_input &&
               (fnv(text) + sig) % nvrtc_every == 0) {
        accepted++;
        compiled_this_input = 1;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int pc = red_precompile(e, "sm_90");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (pc == RED_OK && ms > slowest_ms) {
            slowest_ms = ms;
            snprintf(slowest_text, sizeof slowest_text, "%s", text);
            for (char *c = slowest_text; *c; c++)
                if (*c == '\n') *c = ' ';
        }
        if (pc == RED_ERR_DEVICE) nvrtc_absent = 1;
        else if (pc == RED_OK) compiled++;
        else FZ_FAIL("the checker accepted but red_precompile gave %d (%s) for %s\n%s\n%s", pc,
                     red_errstr(pc), text, red_expr_errmsg(e), ex);
    }
    fz_inputs_unchanged(&store, text);
    red_clear_bindings(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *rest;
    size_t nrest;
    char *text = fz_text(data, size, &rest, &nrest);
    if (!text) return 0;
    /* a context's caches grow to gigabytes over many texts (fuzz_cpu.c, renew_contexts) */
    static unsigned long long inputs;
    if (++inputs % 64 == 0) {
        red_close(ctx);
        if (red_open(&ctx) != RED_OK) abort();
        red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
        red_set_option(ctx, RED_OPT_THREADS, 1);
    }

    int incomplete = -1;
    int sc = red_check_syntax(ctx, text, &incomplete);
    fz_expect(sc, FZ_PREPARE_OK, "red_check_syntax", text, red_errmsg(ctx));
    if (incomplete != 0 && incomplete != 1) FZ_FAIL("incomplete = %d for %s", incomplete, text);
    if (sc == RED_OK && incomplete) FZ_FAIL("valid and incomplete: %s", text);

    red_expr *e = NULL;
    int rc = red_prepare(ctx, text, &e);
    fz_expect(rc, FZ_PREPARE_OK, "red_prepare", text, red_errmsg(ctx));
    if (rc != sc) FZ_FAIL("red_check_syntax gave %d, red_prepare %d, for %s", sc, rc, text);
    if (rc != RED_OK) {
        if (e) FZ_FAIL("red_prepare failed but returned an expression");
        caret_message(red_errmsg(ctx), text);
    } else {
        compiled_this_input = 0;
        /* Floats of both widths; mixed integer types; empty, reversed, wild values. */
        check_plan(e, text, 16u | (8u << 10) | (3u << 14) | (4u << 17));
        check_plan(e, text, 1u | (2u << 4) | 48u | (5u << 10) | (4u << 14) | (4u << 17));
        fz_rng r = fz_seed(rest, nrest);
        check_plan(e, text, (unsigned)fz_next(&r) ^ (unsigned)fnv(text));
        red_finalize(e);
    }
    free(text);
    return 0;
}

