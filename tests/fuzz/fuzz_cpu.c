/*
 * fuzz_cpu.c -- libFuzzer target over the CPU executor.  The input is expression text, then
 * optionally a NUL and seed bytes that choose the dtypes, shapes (0..9 elements, 2-D up to
 * 4x4), reversed strides and values (with NaN, inf and extreme integers) of the bound family
 * (fuzz_common.h).  The expression runs on two contexts, one CPU thread and two.  Findings:
 * a crash, a leak, UB, an undocumented status, an error without a message or with results
 * left behind, the two runs disagreeing (status, dtype, shape or any bit but a NaN's payload),
 * an input array written.  A watchdog interrupts a run after 500 ms (a range of 10^12
 * elements is valid), so RED_ERR_INTERRUPTED is an accepted outcome.
 */
#include "fuzz_common.h"

#include <pthread.h>
#include <time.h>

static red_ctx *ctx1, *ctx2;
static fz_store store;
static long long deadline_ms;           /* 0: nothing being timed; atomics below */
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;  /* the watchdog against reopen */
static unsigned long long inputs;
static unsigned long long runs_ok, runs_err, interrupted;

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1:max_allocation_size_mb=256:quarantine_size_mb=64";
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void *watchdog(void *arg)
{
    for (;;) {
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&ctx_lock);
        long long d = __atomic_load_n(&deadline_ms, __ATOMIC_ACQUIRE);
        if (d && now_ms() > d) {
            red_interrupt(ctx1);
            red_interrupt(ctx2);
        }
        pthread_mutex_unlock(&ctx_lock);
    }
    return NULL;
}

static void stats(void)
{
    fprintf(stderr, "fuzz_cpu: %llu runs ok, %llu errors, %llu interrupted\n", runs_ok, runs_err,
            interrupted);
}

static void open_contexts(void)
{
    if (red_open(&ctx1) != RED_OK || red_open(&ctx2) != RED_OK) abort();
    red_set_option(ctx1, RED_OPT_DEVICE, RED_DEVICE_CPU);
    red_set_option(ctx2, RED_OPT_DEVICE, RED_DEVICE_CPU);
    red_set_option(ctx1, RED_OPT_THREADS, 1);
    red_set_option(ctx2, RED_OPT_THREADS, 2);
}

/* A context keeps up to 256 programs with 16 plans each, about half a megabyte a plan: with
 * every input a new text and new signatures that is gigabytes (docs/reliability.md, "A
 * context's memory bounded only by entry counts"), so the contexts are renewed every 64 inputs to keep the fuzzer under its RSS limit. */
static void renew_contexts(void)
{
    if (++inputs % 64) return;
    pthread_mutex_lock(&ctx_lock);
    red_close(ctx1);
    red_close(ctx2);
    open_contexts();
    pthread_mutex_unlock(&ctx_lock);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    open_contexts();
    fz_store_init(&store);
    pthread_t t;
    if (pthread_create(&t, NULL, watchdog, NULL) != 0) abort();
    pthread_detach(t);
    atexit(stats);
    return 0;
}

static int timed_run(red_expr *e)
{
    __atomic_store_n(&deadline_ms, now_ms() + 500, __ATOMIC_RELEASE);
    int rc = red_run(e);
    __atomic_store_n(&deadline_ms, 0, __ATOMIC_RELEASE);
    return rc;
}

static int is_float(red_dtype t) { return t == RED_F32 || t == RED_F64 || t == RED_F16 || t == RED_BF16; }

/* Same bits, except that any NaN equals any NaN. */
static int same_values(const red_array *a, const red_array *b, int64_t n)
{
    size_t es = red_dtype_size(a->dtype);
    if (!n || !memcmp(a->data, b->data, (size_t)n * es)) return 1;
    if (!is_float(a->dtype)) return 0;
    for (int64_t k = 0; k < n; k++) {
        const unsigned char *p = (const unsigned char *)a->data + k * es;
        const unsigned char *q = (const unsigned char *)b->data + k * es;
        if (!memcmp(p, q, es)) continue;
        double x, y;
        if (a->dtype == RED_F64) { memcpy(&x, p, 8); memcpy(&y, q, 8); }
        else if (a->dtype == RED_F32) { float f, g; memcpy(&f, p, 4); memcpy(&g, q, 4); x = f; y = g; }
        else return 0;
        if (!(x != x && y != y)) return 0;
    }
    return 1;
}

static void compare(red_expr *e1, red_expr *e2, const char *text)
{
    int n1 = red_result_count(e1), n2 = red_result_count(e2);
    if (n1 != n2 || n1 < 1) FZ_FAIL("result counts %d (1 thread) and %d (2) for %s", n1, n2, text);
    for (int i = 0; i < n1; i++) {
        red_array a, b;
        const char *na = NULL, *nb = NULL;
        if (red_result(e1, i, &a, &na) != RED_OK || red_result(e2, i, &b, &nb) != RED_OK)
            FZ_FAIL("red_result %d failed for %s", i, text);
        if (a.dtype != b.dtype || a.ndim != b.ndim || strcmp(na, nb))
            FZ_FAIL("result %d differs in dtype/rank/name between 1 and 2 threads: %s", i, text);
        for (int d = 0; d < a.ndim; d++)
            if (a.shape[d] != b.shape[d]) FZ_FAIL("result %d shape differs: %s", i, text);
        int64_t cnt = red_array_size(&a);
        if (cnt && (!a.data || !b.data)) FZ_FAIL("result %d has no data: %s", i, text);
        if (!same_values(&a, &b, cnt))
            FZ_FAIL("result %d differs between 1 and 2 threads (nondeterminism): %s", i, text);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *rest;
    size_t nrest;
    char *text = fz_text(data, size, &rest, &nrest);
    if (!text) return 0;
    renew_contexts();
    red_expr *e1 = NULL, *e2 = NULL;
    int rc = red_prepare(ctx1, text, &e1);
    fz_expect(rc, FZ_PREPARE_OK, "red_prepare", text, red_errmsg(ctx1));
    if (rc != RED_OK) { free(text); return 0; }
    if (red_prepare(ctx2, text, &e2) != RED_OK) FZ_FAIL("second prepare failed: %s", text);

    fz_rng r = fz_seed(rest, nrest);
    unsigned sig = nrest ? (unsigned)fz_next(&r) : 16u | (8u << 10) | (3u << 14) | (4u << 17);
    fz_rng r1 = r, r2 = r;
    fz_bind_all(e1, &store, &r1, sig);
    fz_bind_all(e2, &store, &r2, sig);           /* the same arrays, rebuilt identically */

    int s1 = timed_run(e1);
    fz_expect(s1, FZ_RUN_OK, "red_run (1 thread)", text, red_expr_errmsg(e1));
    int s2 = timed_run(e2);
    fz_expect(s2, FZ_RUN_OK, "red_run (2 threads)", text, red_expr_errmsg(e2));
    fz_inputs_unchanged(&store, text);
    if (getenv("REDJIT_FUZZ_VERBOSE"))      /* reproducing one input: what each run said */
        fprintf(stderr, "1 thread: %d %s\n2 threads: %d %s\n", s1, red_expr_errmsg(e1), s2,
                red_expr_errmsg(e2));
    if (s1 == RED_ERR_INTERRUPTED || s2 == RED_ERR_INTERRUPTED) {
        interrupted++;
    } else if (s1 != s2) {
        FZ_FAIL("1 thread gave %d (%s), 2 threads %d (%s) for %s", s1, red_expr_errmsg(e1), s2,
                red_expr_errmsg(e2), text);
    } else if (s1 == RED_OK) {
        runs_ok++;
        compare(e1, e2, text);
    } else {
        runs_err++;
        if (red_result_count(e1) != 0) FZ_FAIL("a failed run left results: %s", text);
        /* the context is still usable after the error */
        int again = timed_run(e1);
        if (again != s1 && again != RED_ERR_INTERRUPTED)
            FZ_FAIL("a failed run gave %d, then %d: %s", s1, again, text);
    }
    red_finalize(e1);
    red_finalize(e2);
    free(text);
    return 0;
}
