/*
 * test_faults.c -- faults injected into the GPU backend (gpu_inject_fault in
 * src/gpu/gpu.h): NVRTC rejecting a kernel, a module that does not load,
 * device memory exhausted, a launch refused.  Each must return its status
 * with a message, leave no results and no device memory in use (the pool's
 * statistics before and after), and leave the context working: the same
 * expression runs correctly right after, and so does another one.
 *
 * The NVRTC part runs wherever NVRTC is (red_precompile, no GPU needed); the
 * rest on a GPU.  Exit 77 (skipped) when neither is there.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <redjit.h>

#include "gpu/gpu.h"

#include "check.h"

enum { N = 3 << 20, ROWS = 1024, COLS = 3072 };
static double *x;
static int32_t *seg;

static red_binding bindings[3];

static void make_inputs(void)
{
    x = malloc((size_t)N * sizeof *x);
    seg = malloc((size_t)N * sizeof *seg);
    for (int i = 0; i < N; i++) {
        x[i] = (double)(i % 13) * 0.25 - 1.0;
        seg[i] = i / 1000;   /* sorted keys */
    }
    int64_t n = N, rc[2] = {ROWS, COLS};
    bindings[0].name = "x";
    red_array_init(&bindings[0].array, x, RED_F64, 1, &n, NULL);
    bindings[1].name = "A";   /* the same data seen as a matrix */
    red_array_init(&bindings[1].array, x, RED_F64, 2, rc, NULL);
    bindings[2].name = "seg";
    red_array_init(&bindings[2].array, seg, RED_I32, 1, &n, NULL);
}

/* Evaluate on `ctx`; the first result, detached, in *out (caller frees). */
static int eval(red_ctx *ctx, const char *text, red_array *out)
{
    memset(out, 0, sizeof *out);
    int count = 0;
    return red_eval(ctx, text, bindings, 3, out, 1, &count);
}

static int same(const red_array *a, const red_array *b)
{
    if (a->dtype != RED_F64 || b->dtype != RED_F64 || a->ndim != b->ndim) return 0;
    int64_t n = red_array_size(a);
    if (n != red_array_size(b)) return 0;
    const double *p = a->data, *q = b->data;
    for (int64_t i = 0; i < n; i++)
        if (fabs(p[i] - q[i]) > 1e-9 * (fabs(q[i]) + 1e3)) return 0;
    return 1;
}

/* Device memory the context's pool has handed out and not had back. */
static long long pool_in_use(red_ctx *ctx)
{
    red_cache_info c;
    red_cache_stats(ctx, &c);
    return c.pool_in_use;
}

/* NVRTC through red_precompile: no GPU needed.  0 when NVRTC is missing. */
static int test_nvrtc_precompile(void)
{
    red_ctx *ctx;
    red_open(&ctx);
    red_expr *e;
    red_prepare(ctx, "sum(x * 1.5)", &e);
    red_bind_array(e, "x", &bindings[0].array);
    int rc = red_precompile(e, "sm_90");
    if (rc == RED_ERR_DEVICE) {   /* no NVRTC here */
        printf("skip: %s\n", red_expr_errmsg(e));
        red_finalize(e);
        red_close(ctx);
        return 0;
    }
    CHECK(rc == RED_OK, "precompile before any fault: %s", red_expr_errmsg(e));
    gpu_inject_fault(GPU_FAULT_NVRTC, 1);
    rc = red_precompile(e, "sm_90");
    CHECK(rc == RED_ERR_COMPILE && strstr(red_expr_errmsg(e), "injected"),
          "an NVRTC failure is RED_ERR_COMPILE with its message: %d %s", rc, red_expr_errmsg(e));
    rc = red_precompile(e, "sm_90");
    CHECK(rc == RED_OK, "the next compile works: %d %s", rc, red_expr_errmsg(e));
    /* the second compile from now fails, not the first */
    gpu_inject_fault(GPU_FAULT_NVRTC, 2);
    CHECK(red_precompile(e, "sm_90") == RED_OK, "nth = 2: the first compile works");
    CHECK(red_precompile(e, "sm_90") == RED_ERR_COMPILE, "nth = 2: the second fails");
    CHECK(red_precompile(e, "sm_90") == RED_OK, "nth = 2: the third works");
    red_finalize(e);
    red_close(ctx);
    return 1;
}

static const struct {
    int kind;
    const char *name;
    int status;
    const char *says;   /* in the message */
} faults[] = {
    {GPU_FAULT_NVRTC, "NVRTC failure", RED_ERR_COMPILE, "injected"},
    {GPU_FAULT_MODULE_LOAD, "module load failure", RED_ERR_DEVICE, "cuModuleLoadData"},
    {GPU_FAULT_ALLOC, "device out of memory", RED_ERR_NOMEM, "cuMemAlloc"},
    {GPU_FAULT_LAUNCH, "launch failure", RED_ERR_DEVICE, "LAUNCH_OUT_OF_RESOURCES"},
};

/* Full, partial (row sums then their maximum) and keyed passes; `%d` makes
 * each text new, so that it is compiled (REDJIT_CACHE=0: no disk cache). */
static const char *const shapes[] = {
    "sum(x * %d)",
    "max(sum(A[i,j] * %d) over j)",
    "sum(x[i] * %d) by seg[i]",
};

/* Each case on a new context, whose buffer pool starts empty: the injected
 * allocation failure then meets the run's first cuMemAlloc. */
static void test_gpu_faults(red_ctx *cpu)
{
    int k = 2;
    for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            char text[128];
            snprintf(text, sizeof text, shapes[s], k++);
            red_array want, got;
            int rc = eval(cpu, text, &want);
            CHECK(rc == RED_OK, "CPU reference for %s: %s", text, red_errmsg(cpu));
            if (rc) continue;
            red_ctx *gpu;
            red_open(&gpu);
            red_set_option(gpu, RED_OPT_DEVICE, RED_DEVICE_GPU);
            gpu_inject_fault(faults[f].kind, 1);
            rc = eval(gpu, text, &got);
            gpu_inject_fault(faults[f].kind, 0);
            const char *msg = red_errmsg(gpu);
            CHECK(rc == faults[f].status && strstr(msg, faults[f].says),
                  "%s in %s: status %d (want %d), message \"%s\"", faults[f].name, text, rc, faults[f].status, msg);
            if (rc == RED_OK) red_free(got.data);
            long long live = pool_in_use(gpu);
            CHECK(live == 0, "%s in %s: %lld bytes of device memory still in use after the failure",
                  faults[f].name, text, live);
            /* the same text again, then another */
            rc = eval(gpu, text, &got);
            CHECK(rc == RED_OK && same(&got, &want), "%s: %s after the fault: %d %s", faults[f].name, text, rc,
                  rc ? red_errmsg(gpu) : "wrong values");
            if (rc == RED_OK) red_free(got.data);
            red_free(want.data);
            rc = eval(gpu, "max(abs(x))", &got);
            CHECK(rc == RED_OK && *(double *)got.data == 2.0, "%s: another expression after it: %d %s",
                  faults[f].name, rc, red_errmsg(gpu));
            if (rc == RED_OK) red_free(got.data);
            live = pool_in_use(gpu);
            CHECK(live == 0, "%s: %lld bytes of device memory in use after the good runs", faults[f].name, live);
            red_close(gpu);
        }
}

int main(void)
{
    setenv("REDJIT_CACHE", "0", 1);   /* every new text is compiled, never read from disk */
    make_inputs();
    int ran = test_nvrtc_precompile();

    red_ctx *probe, *cpu;
    red_open(&probe);
    red_open(&cpu);
    red_set_option(cpu, RED_OPT_DEVICE, RED_DEVICE_CPU);
    if (red_gpu_available(probe)) {
        test_gpu_faults(cpu);
        ran = 1;
    } else {
        printf("skip the GPU part: %s\n", red_errmsg(probe));
    }
    red_close(probe);
    red_close(cpu);
    free(x);
    free(seg);
    printf("test_faults: %d passed, %d failed\n", npass, nfail);
    if (!ran) return 77;
    return nfail ? 1 : 0;
}
