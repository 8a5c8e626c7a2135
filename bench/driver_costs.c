/*
 * driver_costs.c -- host time of each CUDA driver call redjit makes on the hot path of a
 * cached evaluation, next to the library's own per-call time, so that the per-call overhead
 * can be taken apart call by call (the device has no perf or nsys).  Medians over many calls,
 * in microseconds of host time.
 *
 *   driver_costs [--reps N]         (default 20000; prints a Markdown table)
 *
 * Exits 0 without measuring where there is no GPU.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <redjit.h>

#include "gpu/cu_api.h"   /* the library's own declarations of the driver API */

static cu_api cu;

/* an empty kernel with one 8-byte parameter, and one that stores its second
 * parameter at the address in its first (host memory, mapped), as PTX the
 * driver compiles */
static const char ptx[] = ".version 7.8\n.target sm_90\n.address_size 64\n"
                          ".visible .entry k(.param .u64 p)\n{\n ret;\n}\n"
                          ".visible .entry w(.param .u64 p, .param .u64 v)\n{\n .reg .b64 %a, %b;\n"
                          " ld.param.u64 %a, [p];\n ld.param.u64 %b, [v];\n"
                          " st.volatile.u64 [%a], %b;\n ret;\n}\n"
                          /* rj_publish's shape: a payload word, a fence, the sequence number
                           * (wf: membar.sys, which __threadfence_system is; wa: fence.acq_rel.sys;
                           * wr: a release store instead of fence and store; wl: the payload
                           * loaded from device memory first, then as wf) */
                          ".visible .entry wf(.param .u64 p, .param .u64 v)\n{\n .reg .b64 %a, %b;\n"
                          " ld.param.u64 %a, [p];\n ld.param.u64 %b, [v];\n"
                          " st.volatile.u64 [%a+8], %b;\n membar.sys;\n st.volatile.u64 [%a], %b;\n ret;\n}\n"
                          ".visible .entry wa(.param .u64 p, .param .u64 v)\n{\n .reg .b64 %a, %b;\n"
                          " ld.param.u64 %a, [p];\n ld.param.u64 %b, [v];\n"
                          " st.volatile.u64 [%a+8], %b;\n fence.acq_rel.sys;\n st.volatile.u64 [%a], %b;\n ret;\n}\n"
                          ".visible .entry wr(.param .u64 p, .param .u64 v)\n{\n .reg .b64 %a, %b;\n"
                          " ld.param.u64 %a, [p];\n ld.param.u64 %b, [v];\n"
                          " st.volatile.u64 [%a+8], %b;\n st.release.sys.u64 [%a], %b;\n ret;\n}\n"
                          ".visible .entry wl(.param .u64 p, .param .u64 v, .param .u64 q)\n{\n .reg .b64 %a, %b, %c, %d;\n"
                          " ld.param.u64 %a, [p];\n ld.param.u64 %b, [v];\n ld.param.u64 %c, [q];\n"
                          " ld.volatile.u64 %d, [%c];\n st.volatile.u64 [%a+8], %d;\n membar.sys;\n"
                          " st.volatile.u64 [%a], %b;\n ret;\n}\n";

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double *samples;
static int reps = 20000;

static void row(const char *what, double *s, int n)
{
    qsort(s, (size_t)n, sizeof *s, cmp);
    printf("| %-58s | %8.2f | %8.2f |\n", what, s[n / 2], s[n * 9 / 10]);
}

#define MEASURE(what, setup, call)                  \
    do {                                            \
        for (int i_ = 0; i_ < reps; i_++) {         \
            setup;                                  \
            double t0_ = now_us();                  \
            call;                                   \
            samples[i_] = now_us() - t0_;           \
        }                                           \
        row(what, samples, reps);                   \
    } while (0)

/* GPU time between events recorded before and after `call` on stream s (the
 * host's own time to issue it included, as in bench/redjit_bench) */
#define SPAN(what, call)                                                   \
    do {                                                                   \
        for (int i_ = 0; i_ < reps; i_++) {                                \
            cu.EventRecord(ev[0], s);                                      \
            call;                                                          \
            cu.EventRecord(ev[1], s);                                      \
            cu.EventSynchronize(ev[1]);                                    \
            float ms_ = 0;                                                 \
            cu.EventElapsedTime(&ms_, ev[0], ev[1]);                       \
            samples[i_] = ms_ * 1e3;                                       \
        }                                                                  \
        row(what, samples, reps);                                          \
    } while (0)

#define CHECK(call)                                                        \
    do {                                                                   \
        CUresult r_ = (call);                                              \
        if (r_) {                                                          \
            fprintf(stderr, "driver_costs: %s failed (%d)\n", #call, r_); \
            return 1;                                                      \
        }                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    if (reps < 10) reps = 10;
    if (cu_api_load(&cu)) {
        printf("driver_costs: no CUDA driver (or one without a needed function): nothing to measure\n");
        return 0;
    }
    CUdevice dev;
    CUcontext ctx;
    if (cu.Init(0) || cu.DeviceGet(&dev, 0)) {
        printf("driver_costs: no usable GPU: nothing to measure\n");
        return 0;
    }
    CHECK(cu.DevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cu.CtxSetCurrent(ctx));
    CUmodule mod;
    CUfunction fn, fw;
    CHECK(cu.ModuleLoadData(&mod, ptx));
    CHECK(cu.ModuleGetFunction(&fn, mod, "k"));
    CHECK(cu.ModuleGetFunction(&fw, mod, "w"));
    CUdeviceptr d;
    void *pinned;
    CHECK(cu.MemAlloc(&d, 1 << 20));
    CHECK(cu.MemHostAlloc(&pinned, 4096, 0));
    CUevent ev[2];
    CHECK(cu.EventCreate(&ev[0], 0));
    CHECK(cu.EventCreate(&ev[1], 0));
    samples = malloc((size_t)reps * sizeof *samples);
    CUstream s = NULL;
    unsigned long long arg = d, pinned_seq = 0, darg = d;
    void *args[] = {&arg};
    void *wargs2[] = {&darg, &pinned_seq};   /* kernel w storing into device memory */
    float ms;
    int nb;
    unsigned mt;
    CUevent e1;

    printf("| call | median us | p90 us |\n|---|---|---|\n");
    MEASURE("cuCtxSetCurrent", (void)0, cu.CtxSetCurrent(ctx));
    MEASURE("cuEventCreate", if (i_) cu.EventDestroy(e1), cu.EventCreate(&e1, 0));
    cu.EventDestroy(e1);
    MEASURE("cuEventDestroy", cu.EventCreate(&e1, 0), cu.EventDestroy(e1));
    MEASURE("cuEventRecord (idle stream)", (void)0, cu.EventRecord(ev[0], s));
    cu.EventRecord(ev[1], s);
    cu.StreamSynchronize(s);
    MEASURE("cuEventElapsedTime (both done)", (void)0, cu.EventElapsedTime(&ms, ev[0], ev[1]));
    MEASURE("cuMemsetD8Async 128 B", cu.StreamSynchronize(s), cu.MemsetD8Async(d, 0, 128, s));
    MEASURE("cuStreamSynchronize (idle)", (void)0, cu.StreamSynchronize(s));
    MEASURE("cuLaunchKernel, empty kernel, 1 block (queueing only)", cu.StreamSynchronize(s),
            cu.LaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, s, args, NULL));
    MEASURE("cuLaunchKernel 1056 blocks (queueing only)", cu.StreamSynchronize(s),
            cu.LaunchKernel(fn, 1056, 1, 1, 256, 1, 1, 0, s, args, NULL));
    MEASURE("launch + cuStreamSynchronize", (void)0,
            cu.LaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, s, args, NULL); cu.StreamSynchronize(s));
    MEASURE("cuMemcpyDtoHAsync 8 B to pinned + sync", (void)0,
            cu.MemcpyDtoHAsync(pinned, d, 8, s); cu.StreamSynchronize(s));
    MEASURE("launch + DtoH 8 B + sync (a minimal reduction call)", (void)0,
            cu.LaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, s, args, NULL); cu.MemcpyDtoHAsync(pinned, d, 8, s);
            cu.StreamSynchronize(s));
    MEASURE("launch + 2 DtoH + sync (result and fault record apart)", (void)0,
            cu.LaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, s, args, NULL); cu.MemcpyDtoHAsync(pinned, d, 8, s);
            cu.MemcpyDtoHAsync((char *)pinned + 64, d + 64, 32, s); cu.StreamSynchronize(s));
    MEASURE("launch + spin on cuStreamQuery", (void)0,
            cu.LaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, s, args, NULL);
            while (cu.StreamQuery(s) == 600 /* CUDA_ERROR_NOT_READY */) {});
    /* the kernel stores a sequence number into pinned host memory, which the
     * host watches: no copy, no synchronisation call */
    volatile unsigned long long *flag = (volatile unsigned long long *)pinned + 64;
    unsigned long long seq = 0, fp = (unsigned long long)(uintptr_t)flag;
    void *wargs[] = {&fp, &seq};
    long long spins_max = 0;
    MEASURE("launch storing 8 B to mapped pinned memory + spin on it", seq++,
            long long sp_ = 0; cu.LaunchKernel(fw, 1, 1, 1, 32, 1, 1, 0, s, wargs, NULL);
            while (*flag != seq && ++sp_ < 100000000) {} if (sp_ > spins_max) spins_max = sp_);
    if (*flag != seq) printf("| (the mapped store never arrived) | | |\n");
    fprintf(stderr, "driver_costs: most spins waiting for a mapped store: %lld\n", spins_max);
    /* the same with rj_publish's fences: what each costs a call */
    static const struct {
        const char *fn, *what;
    } pub[] = {
        {"wf", "the same, payload word + membar.sys + sequence number"},
        {"wa", "the same, payload word + fence.acq_rel.sys + sequence number"},
        {"wr", "the same, payload word + st.release.sys sequence number"},
        {"wl", "the same, payload loaded from device memory + membar.sys"},
    };
    for (size_t k = 0; k < sizeof pub / sizeof pub[0]; k++) {
        CUfunction f;
        CHECK(cu.ModuleGetFunction(&f, mod, pub[k].fn));
        void *pargs[] = {&fp, &seq, &darg};
        MEASURE(pub[k].what, seq++,
                long long sp_ = 0; cu.LaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, pargs, NULL);
                while (*flag != seq && ++sp_ < 100000000) {});
        if (*flag != seq) printf("| (the mapped store never arrived) | | |\n");
    }
    MEASURE("launch + DtoH 8 B to pinned + spin on it (no sync)", seq++,
            long long sp_ = 0; *(volatile unsigned long long *)pinned = 0; pinned_seq = seq;
            cu.LaunchKernel(fw, 1, 1, 1, 32, 1, 1, 0, s, wargs2, NULL);
            cu.MemcpyDtoHAsync(pinned, d, 8, s);
            while (*(volatile unsigned long long *)pinned != seq && ++sp_ < 100000000) {});
    cu.StreamSynchronize(s);
    SPAN("event span: empty kernel", cu.LaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, s, args, NULL));
    SPAN("event span: two empty kernels", cu.LaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, s, args, NULL);
         cu.LaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, s, args, NULL));
    MEASURE("cuPointerGetAttribute (memory type)", (void)0, cu.PointerGetAttribute(&mt, 2, d));
    MEASURE("cuOccupancyMaxActiveBlocksPerMultiprocessor", (void)0, cu.OccupancyMaxActiveBlocksPerMultiprocessor(&nb, fn, 256, 0));

    /* the library, same shape of call: sum over 1024 f32 already on the device */
    red_ctx *rc;
    red_open(&rc);
    red_set_option(rc, RED_OPT_DEVICE, RED_DEVICE_GPU);
    red_expr *e = NULL;
    int64_t n = 1024;
    red_array a;
    red_array_init(&a, (void *)(uintptr_t)d, RED_F32, 1, &n, NULL);
    a.memory = RED_MEM_CUDA;
    double v = 0;
    if (red_prepare(rc, "sum(x)", &e) || red_bind_array(e, "x", &a) || red_run(e)) {
        fprintf(stderr, "driver_costs: redjit: %s\n", e ? red_expr_errmsg(e) : red_errmsg(rc));
        return 1;
    }
    MEASURE("redjit: red_run + red_result_f64, sum(x), 1024 f32 on the device", (void)0,
            red_run(e); red_result_f64(e, 0, &v));
    static const char *const sname[] = {"auto", "tree", "sequential", "persistent", "segmented"};
    char what[96];
    for (int st = 1; st <= 4; st++) {
        red_expr_set_option(e, RED_OPT_STRATEGY, st);
        snprintf(what, sizeof what, "redjit: the same, %s", sname[st]);
        MEASURE(what, (void)0, red_run(e); red_result_f64(e, 0, &v));
    }
    red_expr_set_option(e, RED_OPT_STRATEGY, RED_STRATEGY_AUTO);
    CHECK(cu.StreamCreate(&s, 0));   /* a queued run needs a stream of the caller's */
    red_expr_set_option(e, RED_OPT_RESULTS, RED_RESULTS_DEVICE);
    red_expr_set_stream(e, s);
    MEASURE("redjit: red_run queued on a stream + cuStreamSynchronize", (void)0, red_run(e); cu.StreamSynchronize(s));
    for (int st = 0; st <= 4; st++) {
        red_expr_set_option(e, RED_OPT_STRATEGY, st);
        snprintf(what, sizeof what, "event span: redjit red_run queued, %s", sname[st]);
        SPAN(what, red_run(e));
    }
    red_sync(e);
    red_expr_set_option(e, RED_OPT_STRATEGY, RED_STRATEGY_AUTO);
    red_expr_set_option(e, RED_OPT_RESULTS, RED_RESULTS_HOST);
    red_expr_set_stream(e, NULL);
    red_binding b = {"x", a};
    MEASURE("redjit: red_eval_f64, the same", (void)0, red_eval_f64(rc, "sum(x)", &b, 1, &v));
    red_finalize(e);
    red_close(rc);
    return 0;
}
