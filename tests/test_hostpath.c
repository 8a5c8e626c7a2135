/*
 * test_hostpath.c -- the GPU backend's host side against the stand-in driver
 * (tests/fakecuda: libcuda.so.1 on LD_LIBRARY_PATH, no kernel runs), so that
 * it runs, under the sanitizers too, where there is no GPU.
 *
 * Results are meaningless here (nothing computes them); what is checked is
 * the traffic with the driver:
 *   - a cached expression's run makes a fixed, small set of driver calls:
 *     no allocation, module load, function lookup, event or memset once warm,
 *     exactly the launches its strategy needs, one stream synchronisation
 *     for a result on the host and none for a queued run with device results,
 *     and one copy back for the fault record and every small result (they
 *     share the run's workspace), a second one for a larger result;
 *   - RED_RESULTS_DEVICE_ARRAYS: scalars on the host, in that one copy,
 *     arrays on the device;
 *   - a device fault (the stand-in writes the fault record a kernel's
 *     rj_fault would) is the record's status with a message, no results,
 *     and a fresh workspace for the next run; red_sync reports it for a
 *     queued run;
 *   - everything is given back: after red_close no device memory, pinned
 *     memory, module, event or context reference is left with the driver,
 *     after faults injected at allocation, module load and launch included.
 * The table of calls per run is printed.  `--bench N` times N calls of
 * red_run + red_result_f64, red_eval_f64, and the paths that leave the
 * result on the device: redjit's own host time per call when every driver
 * call costs nothing.
 *
 * Exit 77 (skipped) when the library does not find the stand-in driver.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <redjit.h>

#include "codegen/device/rj_abi.h"
#include "gpu/gpu.h"

#include "check.h"

static long long (*fc_count)(const char *);
static long long (*fc_total)(void);
static void (*fc_reset)(void);
static const char *(*fc_name)(int);
static long long (*fc_live)(int);
static const char *(*fc_last_launch)(unsigned *, unsigned *);
static unsigned (*fc_last_smem)(void);
static long long (*fc_last_param)(int);
static void (*fc_launch_log)(char *, size_t, int);
static void (*fc_fault)(unsigned long long, unsigned long long, unsigned long long, long long);
static void (*fc_store)(size_t, const void *, size_t);
static long long (*fc_drop_publish)(int);
static void (*fc_busy)(int);

enum { N = 4096, ROWS = 64, COLS = 64, RUNS = 20 };

static int find_fake(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 0;
    *(void **)&fc_count = dlsym(h, "fakecuda_count");
    *(void **)&fc_total = dlsym(h, "fakecuda_total");
    *(void **)&fc_reset = dlsym(h, "fakecuda_reset");
    *(void **)&fc_name = dlsym(h, "fakecuda_name");
    *(void **)&fc_live = dlsym(h, "fakecuda_live");
    *(void **)&fc_last_launch = dlsym(h, "fakecuda_last_launch");
    *(void **)&fc_launch_log = dlsym(h, "fakecuda_launch_log");
    *(void **)&fc_fault = dlsym(h, "fakecuda_fault_next_launch");
    *(void **)&fc_store = dlsym(h, "fakecuda_store_next_launch");
    *(void **)&fc_drop_publish = dlsym(h, "fakecuda_drop_publish");
    *(void **)&fc_busy = dlsym(h, "fakecuda_busy");
    *(void **)&fc_last_smem = dlsym(h, "fakecuda_last_smem");
    *(void **)&fc_last_param = dlsym(h, "fakecuda_last_param");
    return fc_count && fc_total && fc_reset && fc_name && fc_live && fc_last_launch && fc_fault && fc_store &&
           fc_drop_publish && fc_busy && fc_last_smem && fc_last_param;
}

/* Inputs, on the "device" and on the host. */
static float hx[N], hA[ROWS * COLS];
static int64_t hptr[ROWS + 1];
static int32_t hseg[N];
static void *dx, *dA, *dptr, *dseg;
static red_binding dev_binds[4], host_binds[4];

static void *to_device(red_ctx *ctx, const void *src, size_t bytes)
{
    void *p = NULL;
    int rc = red_device_alloc(ctx, bytes, &p);
    CHECK(rc == RED_OK && p, "red_device_alloc(%zu): %s", bytes, red_errmsg(ctx));
    if (p) CHECK(red_memcpy(ctx, p, RED_MEM_CUDA, src, RED_MEM_HOST, bytes) == RED_OK, "red_memcpy to the device");
    return p;
}

static void bind_all(red_binding *b, void *x, void *A, void *ptr, void *seg, red_memory mem)
{
    int64_t n = N, rc[2] = {ROWS, COLS}, np = ROWS + 1;
    b[0].name = "x";
    red_array_init(&b[0].array, x, RED_F32, 1, &n, NULL);
    b[1].name = "A";
    red_array_init(&b[1].array, A, RED_F32, 2, rc, NULL);
    b[2].name = "ptr";
    red_array_init(&b[2].array, ptr, RED_I64, 1, &np, NULL);
    b[3].name = "seg";
    red_array_init(&b[3].array, seg, RED_I32, 1, &n, NULL);
    for (int i = 0; i < 4; i++) b[i].array.memory = mem;
}

static void make_inputs(red_ctx *ctx)
{
    for (int i = 0; i < N; i++) {
        hx[i] = (float)(i % 17) * 0.5f - 3.0f;
        hseg[i] = i / 100;
    }
    for (int i = 0; i < ROWS * COLS; i++) hA[i] = (float)(i % 7);
    for (int r = 0; r <= ROWS; r++) hptr[r] = (int64_t)r * N / ROWS;
    dx = to_device(ctx, hx, sizeof hx);
    dA = to_device(ctx, hA, sizeof hA);
    dptr = to_device(ctx, hptr, sizeof hptr);
    dseg = to_device(ctx, hseg, sizeof hseg);
    bind_all(dev_binds, dx, dA, dptr, dseg, RED_MEM_CUDA);
    bind_all(host_binds, hx, hA, hptr, hseg, RED_MEM_HOST);
}

static int bind(red_expr *e, const red_binding *b, int nb)
{
    for (int i = 0; i < nb; i++) {
        int rc = red_bind_array(e, b[i].name, &b[i].array);
        if (rc) return rc;
    }
    return 0;
}

/* One run and its results read as a caller would. */
static int run_once(red_expr *e)
{
    int rc = red_run(e);
    if (rc) return rc;
    int n = red_result_count(e);
    for (int i = 0; i < n; i++) {
        red_array a;
        rc = red_result(e, i, &a, NULL);
        if (rc) return rc;
    }
    return 0;
}

/* Calls per run of every driver function over RUNS warm runs of `text`
 * (bindings `b`), into per[] (indexed as fakecuda_name); printed as a row. */
static int measure(red_ctx *ctx, const char *label, const char *text, const red_binding *b, int nb, double per[64])
{
    red_expr *e = NULL;
    int rc = red_prepare(ctx, text, &e);
    CHECK(rc == RED_OK, "%s: prepare: %s", label, red_errmsg(ctx));
    if (rc) return rc;
    rc = bind(e, b, nb);
    for (int w = 0; !rc && w < 3; w++) rc = run_once(e);   /* compile, allocate, warm */
    CHECK(rc == RED_OK, "%s: warm-up runs: %s", label, red_expr_errmsg(e));
    if (rc) {
        red_finalize(e);
        return rc;
    }
    fc_reset();
    for (int k = 0; !rc && k < RUNS; k++) rc = run_once(e);
    CHECK(rc == RED_OK, "%s: runs: %s", label, red_expr_errmsg(e));
    printf("%-34s", label);
    for (int i = 0; fc_name(i); i++) {
        per[i] = (double)fc_count(fc_name(i)) / RUNS;
        if (per[i] > 0) printf(" %s %.4g", fc_name(i) + 2, per[i]);
    }
    unsigned grid = 0, block = 0;
    const char *k = fc_last_launch(&grid, &block);
    printf("  | last: %s<<<%u, %u>>>\n", k, grid, block);
    red_finalize(e);
    return rc;
}

static double get(const double per[64], const char *name)
{
    for (int i = 0; fc_name(i); i++)
        if (strcmp(fc_name(i), name) == 0) return per[i];
    return -1;
}

/* What no warm run may do, whatever the expression. */
static void steady(const char *label, const double per[64])
{
    static const char *const never[] = {"cuMemAlloc", "cuMemFree", "cuModuleLoadData", "cuModuleGetFunction",
                                        "cuMemHostAlloc", "cuEventCreate", "cuEventRecord",
                                        "cuOccupancyMaxActiveBlocksPerMultiprocessor", "cuMemcpyDtoH",
                                        "cuMemcpyHtoD", "cuCtxSynchronize"};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        CHECK(get(per, never[i]) == 0, "%s: a warm run calls %s (%.3g per run)", label, never[i], get(per, never[i]));
}

static void test_calls(red_ctx *ctx)
{
    double per[64];
    printf("driver calls per warm run (%d runs each):\n", RUNS);

    if (!measure(ctx, "sum(x), device x", "sum(x)", dev_binds, 4, per)) {
        steady("sum(x)", per);
        CHECK(get(per, "cuLaunchKernel") == 1, "sum(x): one launch per run, not %.3g", get(per, "cuLaunchKernel"));
        /* the kernel publishes the workspace into pinned memory (rj_publish),
         * which the host watches: no stream synchronisation */
        CHECK(get(per, "cuStreamSynchronize") == 0, "sum(x): no synchronisation, not %.3g a run",
              get(per, "cuStreamSynchronize"));
        CHECK(get(per, "cuMemsetD8Async") == 0, "sum(x): the workspace is reused clean, no memset");
        CHECK(get(per, "cuMemcpyHtoDAsync") == 0, "sum(x) of a device array uploads nothing");
        CHECK(get(per, "cuMemcpyDtoHAsync") == 0, "sum(x): no copy back (the kernel publishes), not %.3g",
              get(per, "cuMemcpyDtoHAsync"));
    }
    if (!measure(ctx, "sum(x), host x", "sum(x)", host_binds, 1, per)) {
        steady("sum(x) host", per);
        CHECK(get(per, "cuMemcpyHtoDAsync") == 1, "sum(x) of a host array: one upload per run, not %.3g",
              get(per, "cuMemcpyHtoDAsync"));
        CHECK(get(per, "cuStreamSynchronize") == 0, "sum(x) host: no synchronisation");
        CHECK(get(per, "cuMemcpyDtoHAsync") == 0, "sum(x) host: no copy back, not %.3g", get(per, "cuMemcpyDtoHAsync"));
    }
    if (!measure(ctx, "sum(x), sum(x*x), device x", "sum(x), sum(x*x)", dev_binds, 4, per)) {
        steady("sum(x), sum(x*x)", per);
        CHECK(get(per, "cuLaunchKernel") == 1, "sum(x), sum(x*x): fused, one launch per run, not %.3g",
              get(per, "cuLaunchKernel"));
        CHECK(get(per, "cuMemcpyDtoHAsync") == 0, "sum(x), sum(x*x): both results and the fault record published, "
              "not copied (%.3g copies)", get(per, "cuMemcpyDtoHAsync"));
    }
    if (!measure(ctx, "row sums, device A", "sum(A[i,j]) over j", dev_binds, 4, per)) {
        steady("row sums", per);
        CHECK(get(per, "cuStreamSynchronize") == 1, "row sums: one synchronisation per run");
        CHECK(get(per, "cuMemcpyDtoHAsync") == 1, "row sums (256 bytes): one copy back, not %.3g",
              get(per, "cuMemcpyDtoHAsync"));
    }
    if (!measure(ctx, "x*2, device x (16 KiB result)", "x[i] * 2", dev_binds, 4, per)) {
        steady("x*2", per);
        CHECK(get(per, "cuMemcpyDtoHAsync") == 2, "x*2: a result too large for the workspace comes back in a "
              "copy of its own, beside the fault record's: %.3g copies", get(per, "cuMemcpyDtoHAsync"));
        CHECK(get(per, "cuStreamSynchronize") == 1, "x*2: one synchronisation per run");
    }
    if (!measure(ctx, "ranges, device ptr", "sum(x[k]) over k in ptr[r]..ptr[r+1]", dev_binds, 4, per)) {
        steady("ranges", per);
        /* the lengths that choose the kernel are counted once for these arrays */
        CHECK(get(per, "cuLaunchKernel") == 1 && get(per, "cuStreamSynchronize") == 1,
              "ranges: a warm run launches once and synchronises once (%.3g, %.3g): the segment count is kept",
              get(per, "cuLaunchKernel"), get(per, "cuStreamSynchronize"));
    }
    if (!measure(ctx, "keys, device seg", "sum(x[i]) by seg[i]", dev_binds, 4, per)) {
        steady("keys", per);
        /* sorted keys (the stand-in leaves the workspace's key statistics
         * zero: one key): the count is taken from the run before and checked
         * by the one kernel, which publishes its flag with the results */
        CHECK(get(per, "cuLaunchKernel") == 1 && get(per, "cuStreamSynchronize") == 0 &&
                  get(per, "cuMemcpyDtoHAsync") == 0,
              "keys: a warm run launches once, with no synchronisation or copy (%.3g, %.3g, %.3g): the key "
              "count is kept and the flag published",
              get(per, "cuLaunchKernel"), get(per, "cuStreamSynchronize"), get(per, "cuMemcpyDtoHAsync"));
    }
    if (!measure(ctx, "argmax(x), device x", "argmax(x)", dev_binds, 4, per)) steady("argmax", per);
}

/* The kernel a run of `text` launches last with the nb bindings b on the
 * device; "" when the run fails. */
/* The kernels the last last_kernel() launched, each followed by a space. */
static char run_kernels[1024];

/* Did that run launch kernel `k` (at any step)? */
static int ran_kernel(const char *k)
{
    char w[80];
    snprintf(w, sizeof w, "%s ", k);
    for (const char *s = run_kernels; (s = strstr(s, w)) != NULL; s++)
        if (s == run_kernels || s[-1] == ' ') return 1;
    return 0;
}

static const char *last_kernel(red_ctx *ctx, const char *text, red_binding *b, int nb)
{
    static char name[64];
    name[0] = 0;
    run_kernels[0] = 0;
    red_expr *e = NULL;
    if (red_prepare(ctx, text, &e)) return name;
    int rc = 0;
    for (int i = 0; i < nb && !rc; i++) {
        b[i].array.memory = RED_MEM_CUDA;
        rc = red_bind_array(e, b[i].name, &b[i].array);
    }
    if (fc_launch_log) fc_launch_log(NULL, 0, 1);
    if (!rc) rc = red_run(e);
    CHECK(rc == RED_OK, "%s: %s", text, red_expr_errmsg(e));
    if (!rc) snprintf(name, sizeof name, "%s", fc_last_launch(NULL, NULL));
    if (!rc && fc_launch_log) fc_launch_log(run_kernels, sizeof run_kernels, 1);
    red_finalize(e);
    return name;
}

/* The same with A the 64 x 64 device matrix seen through `nd` extents and
 * strides (elements) from element `off` on. */
static const char *kernel_for(red_ctx *ctx, const char *text, int nd, const int64_t *shape, const int64_t *strides,
                              int off)
{
    red_binding a = {"A", {0}};
    red_array_init(&a.array, (float *)dA + off, RED_F32, nd, shape, strides);
    return last_kernel(ctx, text, &a, 1);
}

/* Reductions over several dimensions take the 16-byte-load kernels where
 * those dimensions make one contiguous run in every array (src/gpu/strategy.c, gpu_vec_ok),
 * and the others where they do not. */
static void test_vec_choice(red_ctx *ctx)
{
    const int64_t sq[2] = {ROWS, COLS}, rm[2] = {COLS, 1}, tr[2] = {1, COLS};
    const int64_t s3[3] = {4, 16, COLS}, r3[3] = {16 * COLS, COLS, 1};
    const int64_t s3g[3] = {4, 8, COLS}, r3g[3] = {16 * COLS, 2 * COLS, 1};   /* every other row */
    const int64_t one[2] = {1, 4000}, odd[2] = {7, 1};                        /* an extent-1 dimension */
    const int64_t cnt[2] = {60, 65}, crm[2] = {65, 1};                        /* rows off 16 bytes */
    const int64_t l1[2] = {1, 4096}, lr1[2] = {4096, 1}, l2[2] = {2, 2048}, lr2[2] = {2048, 1};   /* long rows */
    const int64_t ls2[2] = {1, 2};                                            /* and interleaved */
    const int64_t h8[2] = {128, 32}, hr8[2] = {32, 1};                        /* short rows */
    const int64_t f3[3] = {4, 8, 4096}, fr3[3] = {8 * 4096, 4096, 1};        /* few long rows */
    const int64_t f3g[3] = {4, 8, 4096}, fr3g[3] = {16 * 4096, 2 * 4096, 1}; /* with gaps */
    const struct {
        const char *text;
        int nd;
        const int64_t *shape, *strides;
        int off;
        const char *want;
    } t[] = {
        {"sum(A)", 2, sq, rm, 0, "rj_persistv"},
        {"max(abs(A - 1)), argmax(A)", 2, sq, rm, 0, "rj_persistv"},
        {"sum(A)", 2, cnt, crm, 4, "rj_persistv"},
        {"sum(A)", 2, one, odd, 0, "rj_persistv"},
        {"sum(A)", 3, s3, r3, 0, "rj_persistv"},
        {"sum(A)", 2, sq, tr, 0, "rj_persist"},     /* transposed */
        {"sum(A)", 2, sq, rm, 1, "rj_persist"},     /* off 16 bytes */
        {"sum(A)", 3, s3g, r3g, 0, "rj_persist"},   /* a gap between rows */
        {"sum(A[i,j] * j)", 2, sq, rm, 0, "rj_persist"},   /* an index used as a value */
        {"sum(A[i,j] * A[j,i]) over i, j", 2, sq, rm, 0, "rj_persist"},
        {"sum(A[i,j]) over j", 2, l1, lr1, 0, "rj_segbv"},    /* rows of 4096: a block each */
        {"sum(A[i,j]) over j", 2, l2, lr2, 0, "rj_seg32v"},   /* of 2048: a warp */
        {"sum(A[i,j]) over j", 2, l2, ls2, 0, "rj_seg32"},    /* interleaved: no 16-byte loads */
        {"sum(A[i,j]) over j", 2, sq, rm, 0, "rj_segnv"},     /* of 64: 4 lanes a row */
        {"argmax(A[i,j]) over j", 2, h8, hr8, 0, "rj_seg1v"}, /* of 32: a thread a row */
        /* few rows of 32768 over j,k: chunks of each, a block a chunk */
        {"sum(A[i,j,k]) over j,k", 3, f3, fr3, 0, "rj_splitbv"},
        {"sum(A[i,j,k]) over j,k", 3, f3g, fr3g, 0, "rj_splitb"},   /* not one run: scalar loads */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *k = kernel_for(ctx, t[i].text, t[i].nd, t[i].shape, t[i].strides, t[i].off);
        CHECK(strcmp(k, t[i].want) == 0 || ran_kernel(t[i].want), "%s over a %dd view (case %zu): launched %s, expected %s",
              t[i].text, t[i].nd, i, run_kernels, t[i].want);
    }
}

/* A full reduction over i, j whose arrays broadcast along one of them
 * (x[i]*A[i,j]*y[j]) takes the 16-byte-load kernel where the last index's
 * extent is a multiple of a vector and A and y run along it with stride 1
 * from 16 bytes (gpu_vec_ok, cg_kernel.vec_bc); x may be laid out any way. */
static void test_vec_rows(red_ctx *ctx)
{
    const char *text = "sum(x[i]*A[i,j]*y[j]) over i, j";
    const int64_t sq[2] = {ROWS, COLS}, rm[2] = {COLS, 1}, tr[2] = {1, COLS};
    const int64_t n62[2] = {ROWS, COLS - 2};
    const struct {
        const int64_t *ashape, *astrides;
        int64_t xstride, ystride, yoff;
        const char *want;
    } t[] = {
        {sq, rm, 1, 1, 0, "rj_persistv"},
        {sq, rm, 3, 1, 0, "rj_persistv"},   /* x read one element a vector: any stride */
        {sq, rm, 1, 1, 1, "rj_persist"},    /* y off 16 bytes */
        {sq, rm, 1, 2, 0, "rj_persist"},    /* y not stride 1 */
        {n62, rm, 1, 1, 0, "rj_persist"},   /* rows of 62: vectors would straddle two */
        {sq, tr, 1, 1, 0, "rj_persist"},    /* A transposed */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        red_binding b[3] = {{"A", {0}}, {"x", {0}}, {"y", {0}}};
        const int64_t xs[1] = {t[i].ashape[0]}, ys[1] = {t[i].ashape[1]};
        const int64_t xst[1] = {t[i].xstride}, yst[1] = {t[i].ystride};
        red_array_init(&b[0].array, dA, RED_F32, 2, t[i].ashape, t[i].astrides);
        red_array_init(&b[1].array, dA, RED_F32, 1, xs, xst);
        red_array_init(&b[2].array, (float *)dA + t[i].yoff, RED_F32, 1, ys, yst);
        const char *k = last_kernel(ctx, text, b, 3);
        CHECK(strcmp(k, t[i].want) == 0, "%s (case %zu): launched %s, expected %s", text, i, run_kernels, t[i].want);
    }
}

/* Matrix products through cuBLASLt (src/gpu/blas.c), here the stand-in
 * beside the stand-in driver (tests/fakecuda/fakeblas.c), which computes
 * the product on the host from the operands, transpositions, leading
 * dimensions and batch strides it is handed: each layout's result is checked
 * against the sum written out here.  Layouts cuBLASLt cannot take, and
 * RED_OPT_BLAS 0, run the generated kernels (which the stand-in driver does
 * not run: those cases check only that no product was handed over). */
typedef struct blas_case {
    const char *text;   /* over A and B, the result C */
    int nb, M, N, K;    /* the batch (0: none) and the product's extents */
    int a_km, b_nk;     /* A stored [k,i] (text reads A[k,i]); B stored [j,k] */
    int a_tr, b_tr;     /* a transposed view of A's storage, of B's */
    int f64, blas_off, step;   /* f64 operands; RED_OPT_BLAS 0; A read every other element */
    int want;           /* products handed to cuBLASLt */
    int a_off;          /* A's data this many elements into its allocation (4 bytes: not on 16) */
} blas_case;

static void run_blas_case(red_ctx *ctx, const blas_case *c, int (*calls)(void))
{
    int nb = c->nb ? c->nb : 1, M = c->M, NN = c->N, K = c->K, st = c->step ? 2 : 1;
    size_t es = c->f64 ? 8 : 4, na = (size_t)nb * M * K * st * st, nbb = (size_t)nb * K * NN;
    double *ha = malloc(na * sizeof *ha), *hb = malloc(nbb * sizeof *hb);
    unsigned char *ra = malloc(na * es), *rb = malloc(nbb * es);
    if (!ha || !hb || !ra || !rb) abort();
    for (size_t i = 0; i < na; i++) ha[i] = (double)((i * 7 + 3) % 13) - 6.0;
    for (size_t i = 0; i < nbb; i++) hb[i] = (double)((i * 5 + 1) % 11) * 0.25 - 1.0;
    for (size_t i = 0; i < na; i++) {
        if (c->f64) memcpy(ra + i * es, &ha[i], es);
        else { float f = (float)ha[i]; memcpy(ra + i * es, &f, es); }
    }
    for (size_t i = 0; i < nbb; i++) {
        if (c->f64) memcpy(rb + i * es, &hb[i], es);
        else { float f = (float)hb[i]; memcpy(rb + i * es, &f, es); }
    }
    unsigned char *ra_off = calloc(na + (size_t)c->a_off, es);
    if (!ra_off) abort();
    memcpy(ra_off + (size_t)c->a_off * es, ra, na * es);
    void *da0 = to_device(ctx, ra_off, (na + (size_t)c->a_off) * es), *db = to_device(ctx, rb, nbb * es);
    void *da = (unsigned char *)da0 + (size_t)c->a_off * es;
    free(ra_off);
    /* the arrays as the text reads them: A[b?, r0, r1] over storage [b][s0][s1] */
    int a0 = c->a_km ? K : M, a1 = c->a_km ? M : K, b0 = c->b_nk ? NN : K, b1 = c->b_nk ? K : NN;
    int64_t ash[3], ast[3], bsh[3], bst[3];
    int nd = c->nb ? 3 : 2, o = c->nb ? 1 : 0;
    /* storage: [b][x][y] with x, y the text's order, or swapped (a transposed view) */
    int64_t sx = c->a_tr ? 1 : a1, sy = c->a_tr ? a0 : 1;
    ash[o] = a0, ash[o + 1] = a1, ast[o] = sx * st * st, ast[o + 1] = sy * st;   /* step: every other row and element */
    bsh[o] = b0, bsh[o + 1] = b1, bst[o] = c->b_tr ? 1 : b1, bst[o + 1] = c->b_tr ? b0 : 1;
    if (c->nb) ash[0] = bsh[0] = nb, ast[0] = (int64_t)a0 * a1 * st * st, bst[0] = (int64_t)b0 * b1;
    red_binding bind[2] = {{"A", {0}}, {"B", {0}}};
    red_array_init(&bind[0].array, da, c->f64 ? RED_F64 : RED_F32, nd, ash, ast);
    red_array_init(&bind[1].array, db, c->f64 ? RED_F64 : RED_F32, nd, bsh, bst);
    red_set_option(ctx, RED_OPT_BLAS, !c->blas_off);
    int before = calls();
    red_expr *e = NULL;
    int rc = red_prepare(ctx, c->text, &e);
    for (int i = 0; i < 2 && !rc; i++) {
        bind[i].array.memory = RED_MEM_CUDA;
        rc = red_bind_array(e, bind[i].name, &bind[i].array);
    }
    if (!rc) rc = red_run(e);
    red_array out;
    if (!rc) rc = red_result(e, 0, &out, NULL);
    CHECK(rc == RED_OK, "%s: %s", c->text, red_expr_errmsg(e));
    CHECK(calls() - before == c->want, "%s (%s%s%s%s): %d products through cuBLASLt, expected %d", c->text,
          c->f64 ? "f64" : "f32", c->a_tr ? ", A transposed" : "", c->b_tr ? ", B transposed" : "",
          c->nb ? ", batched" : "", calls() - before, c->want);
    if (!rc && c->want) {
        double worst = 0;
        for (int b = 0; b < nb; b++)
            for (int i = 0; i < M; i++)
                for (int j = 0; j < NN; j++) {
                    double s = 0, mag = 0;
                    for (int k = 0; k < K; k++) {
                        int ar = c->a_km ? k : i, ac = c->a_km ? i : k, br = c->b_nk ? j : k, bc = c->b_nk ? k : j;
                        double x = ha[(size_t)b * a0 * a1 * st * st + (size_t)ar * ast[o] + (size_t)ac * ast[o + 1]];
                        double y = hb[(size_t)b * b0 * b1 + (size_t)br * bst[o] + (size_t)bc * bst[o + 1]];
                        if (!c->f64) x = (float)x, y = (float)y;
                        s += x * y;
                        mag += fabs(x * y);
                    }
                    size_t at = ((size_t)b * M + i) * NN + j;   /* the result: row-major, C[b,i,j] */
                    double got = c->f64 ? ((const double *)out.data)[at] : ((const float *)out.data)[at];
                    double err = fabs(got - s) / (mag > 0 ? mag : 1);
                    if (err > worst) worst = err;
                }
        CHECK(worst <= (c->f64 ? 1e-13 : 1e-5), "%s: off by %g of the magnitudes", c->text, worst);
    }
    red_finalize(e);
    red_set_option(ctx, RED_OPT_BLAS, 1);
    red_device_free(ctx, da0);
    red_device_free(ctx, db);
    free(ha), free(hb), free(ra), free(rb);
}

static void test_blas(red_ctx *ctx)
{
    const char *ab = "C[i,j] = sum(A[i,k]*B[k,j]) over k";
    const blas_case t[] = {
        {ab, 0, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0},
        {ab, 0, 5, 6, 7, 0, 0, 1, 0, 0, 0, 0, 1, 0},   /* A transposed */
        {ab, 0, 5, 6, 7, 0, 0, 0, 1, 0, 0, 0, 1, 0},   /* B transposed */
        {ab, 0, 5, 6, 7, 0, 0, 1, 1, 1, 0, 0, 1, 0},   /* both, f64 */
        {ab, 0, 1, 6, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0},   /* one row: C column-major too */
        {ab, 0, 5, 1, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0},   /* one column */
        {"C[i,j] = sum(A[k,i]*B[j,k]) over k", 0, 4, 3, 9, 1, 1, 0, 0, 0, 0, 0, 1, 0},   /* indices swapped */
        {"C[b,i,j] = sum(A[b,i,k]*B[b,k,j]) over k", 3, 4, 5, 6, 0, 0, 0, 0, 0, 0, 0, 1, 0},
        {"C[b,i,j] = sum(A[b,i,k]*B[b,k,j]) over k", 3, 4, 5, 6, 0, 0, 1, 1, 1, 0, 0, 1, 0},
        {ab, 0, 5, 6, 7, 0, 0, 0, 0, 0, 1, 0, 0, 0},   /* RED_OPT_BLAS 0 */
        {ab, 0, 5, 6, 7, 0, 0, 0, 0, 0, 0, 1, 0, 0},   /* A stepped: no unit stride */
        /* A 4 bytes into its allocation: cuBLASLt told so (else it refuses) */
        {ab, 0, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 1, 1},
        {"C[b,i,j] = sum(A[b,i,k]*B[b,k,j]) over k", 3, 4, 5, 6, 0, 0, 1, 0, 0, 0, 0, 1, 1},
    };
    /* the stand-in, found on LD_LIBRARY_PATH as blas.c will find it (the same handle) */
    void *h = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    int (*calls)(void) = NULL;
    if (h) *(void **)&calls = dlsym(h, "fakeblas_calls");
    CHECK(calls != NULL, "the stand-in cuBLASLt (libcublasLt.so.13 beside the stand-in driver) is missing");
    if (!calls) return;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        run_blas_case(ctx, &t[i], calls);
}

/* A 2-d run under a strategy and the launches it makes, in order. */
typedef struct launch_case {
    const char *text;
    int strategy;
    const int64_t *shape, *strides;
    const char *want;   /* every launch of the run */
} launch_case;

static void check_launches(red_ctx *ctx, const launch_case *t, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        red_set_option(ctx, RED_OPT_STRATEGY, t[i].strategy);
        kernel_for(ctx, t[i].text, 2, t[i].shape, t[i].strides, 0);
        CHECK(strcmp(run_kernels, t[i].want) == 0, "%s case %zu: launched '%s', expected '%s'", what, i, run_kernels,
              t[i].want);
    }
    red_set_option(ctx, RED_OPT_STRATEGY, RED_STRATEGY_AUTO);
}
/* A map over a row reduction's results runs inside the reduction's kernel
 * (rj_epilogue): the row's softmax where a block or a warp's lanes take a row,
 * a map of the results alone under every segment kernel; a thread a row
 * (sequential) runs the softmax's map as a launch of its own. */
/* Scans (src/gpu/scan.c): rj_scan in blocks of 256 data threads and a look-back
 * warp; whole rows a warp (RJ_PER 2) under sequential and where every resident
 * warp (4 blocks of 8 on each of the stand-in's 132 SMs) gets two rows (half a
 * row over 16-byte loads): in rj_scanwv (blocks of 8 warps, in registers over
 * 16-byte loads) where every row sits on 16 bytes with stride 1, whatever its
 * length, in a grid of what fits at once (the stand-in: 8 blocks an SM) or a
 * block for every 8 rows where that is fewer, else rj_scanw (the same through
 * shared memory, rows from a ticket, a grid of 8 blocks an SM or fewer the
 * same way); whole rows a block (RJ_PER 1) under persistent, where a row is one
 * tile, or from 1.5 rows an SM; tiles through the look-back (RJ_PER 0) under
 * tree and for a few long rows; a state too large for 48 KiB of shared memory
 * asks for more first (the stand-in refuses it otherwise). */
static void test_scan_ways(red_ctx *ctx)
{
    const int64_t sq[2] = {ROWS, COLS}, rm[2] = {COLS, 1};
    const int64_t lg[2] = {2, 100000}, bc[2] = {0, 0};   /* two long rows, every element the first */
    const int64_t many[2] = {100000, 64}, mbc[2] = {0, 1};   /* many short rows, the same row */
    const int64_t mid[2] = {4300, 5200};                     /* between: a block's row of two tiles */
    const int64_t few[2] = {198, 5200}, fewer[2] = {197, 5200};   /* 1.5 rows an SM, and one fewer */
    const int64_t odd[2] = {60, 65}, orm[2] = {65, 1};              /* rows of 65 f32: off 16 bytes */
    const int64_t s2[2] = {0, 2};                                   /* every other element */
    const int64_t wide[2] = {3000, 512}, tiny[2] = {3000, 3};   /* 16-byte loads whatever the length */
    const int64_t one[2] = {1, 100000};                        /* one long row */
    const char *rows = "cumsum(A[i,j]) over j";
    const struct {
        const int64_t *shape, *strides;
        int strategy;
        long long want_rows;
        unsigned want_grid;
        int want_vec;   /* 16-byte loads (rows on 16 bytes, stride 1): a warp a row in rj_scanwv, the look-back in rj_scanlv */
        int off;        /* the first element's offset in A, in elements */
    } t[] = {
        {sq, rm, RED_STRATEGY_AUTO, 1, ROWS, 0, 0},   /* a row is one tile */
        {sq, rm, RED_STRATEGY_TREE, 0, ROWS, 1, 0},   /* several rows: rj_scanlv */
        {one, mbc, RED_STRATEGY_AUTO, 0, 20, 0, 0},   /* one row of a 4-byte state: rj_scan */
        {one, mbc, RED_STRATEGY_TREE, 0, 20, 0, 0},
        {sq, rm, RED_STRATEGY_SEQUENTIAL, 2, ROWS / 8, 1, 0},
        {sq, rm, RED_STRATEGY_SEQUENTIAL, 2, ROWS / 8, 0, 1},   /* one element off 16 bytes: rj_scanw */
        {lg, bc, RED_STRATEGY_AUTO, 0, 40, 0, 0},   /* long rows: the look-back, a block a tile */
        {lg, bc, RED_STRATEGY_SEQUENTIAL, 2, 1, 0, 0},   /* stride 0: no 16-byte loads */
        {lg, bc, RED_STRATEGY_PERSISTENT, 1, 2, 0, 0},
        {many, mbc, RED_STRATEGY_SEGMENTED, 2, 8 * 132, 1, 0},
        {many, mbc, RED_STRATEGY_SEGMENTED, 2, 8 * 132, 0, 1},
        {wide, mbc, RED_STRATEGY_SEGMENTED, 2, 375, 1, 0},   /* from 2112 rows */
        {tiny, mbc, RED_STRATEGY_SEGMENTED, 2, 375, 1, 0},   /* rows shorter than a vector */
        {wide, mbc, RED_STRATEGY_SEGMENTED, 1, 8 * 132, 0, 1},   /* none: from 8448 rows */
        {many, mbc, RED_STRATEGY_AUTO, 2, 8 * 132, 1, 0},
        {many, mbc, RED_STRATEGY_AUTO, 2, 8 * 132, 0, 1},
        {many, mbc, RED_STRATEGY_PERSISTENT, 1, 8 * 132, 0, 0},
        {many, mbc, RED_STRATEGY_TREE, 0, 8 * 132, 1, 0},
        {mid, mbc, RED_STRATEGY_AUTO, 2, (4300 + 7) / 8, 1, 0},   /* 16-byte loads: a warp a row from half a row a warp */
        {mid, s2, RED_STRATEGY_AUTO, 1, 8 * 132, 0, 0},    /* none: from two rows a warp */
        {few, mbc, RED_STRATEGY_AUTO, 1, 198, 0, 0},
        {fewer, mbc, RED_STRATEGY_AUTO, 0, 197 * 2, 1, 0},   /* tiles of 4096: two a row */
        {fewer, s2, RED_STRATEGY_AUTO, 0, 197 * 2, 0, 0},     /* every other element: rj_scan */
        {odd, orm, RED_STRATEGY_SEQUENTIAL, 2, 8, 0, 0},   /* rows off 16 bytes: rj_scanw */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        red_set_option(ctx, RED_OPT_STRATEGY, t[i].strategy);
        unsigned grid = 0, block = 0;
        const char *k = kernel_for(ctx, rows, 2, t[i].shape, t[i].strides, t[i].off);
        fc_last_launch(&grid, &block);
        /* rj_scanw: 8 warps of 20 f32 elements a lane and a slot of padding every 32, their totals; 16 bytes of tickets */
        const int warps = t[i].want_rows == 2;
        const char *want = t[i].want_vec ? (warps ? "rj_scanwv" : "rj_scanlv") : warps ? "rj_scanw" : "rj_scan";
        unsigned want_block = warps ? 256 : 288;
        unsigned want_smem = t[i].want_vec ? 0 : warps ? (8 * 33 * 20 + 8) * 4 + 16 : fc_last_smem();
        CHECK(strcmp(k, want) == 0 && block == want_block && fc_last_param(RJ_PER) == t[i].want_rows &&
                  grid == t[i].want_grid && fc_last_smem() == want_smem,
              "scan case %zu: launched %s, %u x %u threads, %u bytes of shared memory, RJ_PER %lld; expected %s, %u x %u, "
              "%u bytes, %lld",
              i, k, grid, block, fc_last_smem(), fc_last_param(RJ_PER), want, t[i].want_grid, want_block, want_smem,
              t[i].want_rows);
        /* the rows: the scanned output's; the tiles: 256 threads of 20 f32 elements, or
         * rj_scanlv's of 8 warps of 4 stripes of 32 vectors of 4 */
        long long tile = !warps && t[i].want_vec ? 4096 : 5120, tiles = (t[i].shape[1] + tile - 1) / tile;
        CHECK(fc_last_param(RJ_NOUT) == t[i].shape[0] && fc_last_param(RJ_NBLK) == tiles,
              "scan case %zu: RJ_NOUT %lld, RJ_NBLK %lld; expected %lld, %lld", i, fc_last_param(RJ_NOUT),
              fc_last_param(RJ_NBLK), (long long)t[i].shape[0], tiles);
    }
    /* within CSR rows (64 rows of 64 of x, on 16 bytes): rows of their own lengths,
     * so never the look-back (uniform tiles) nor 16-byte loads (rows start anywhere) */
    red_binding rb[2] = {dev_binds[0], dev_binds[2]};
    const struct {
        int strategy;
        const char *want;
        long long per;
    } rt[] = {{RED_STRATEGY_AUTO, "rj_scan", 1},       {RED_STRATEGY_TREE, "rj_scan", 1},
              {RED_STRATEGY_PERSISTENT, "rj_scan", 1}, {RED_STRATEGY_SEGMENTED, "rj_scan", 1},
              {RED_STRATEGY_SEQUENTIAL, "rj_scanw", 2}};
    for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++) {
        red_set_option(ctx, RED_OPT_STRATEGY, rt[i].strategy);
        const char *k = last_kernel(ctx, "cumsum(x[k]) over k in ptr[r]..ptr[r+1]", rb, 2);
        CHECK(strcmp(k, rt[i].want) == 0 && fc_last_param(RJ_PER) == rt[i].per && fc_last_param(RJ_NOUT) == ROWS,
              "CSR scan case %zu: launched %s, RJ_PER %lld, RJ_NOUT %lld; expected %s, %lld, %d", i, k,
              fc_last_param(RJ_PER), fc_last_param(RJ_NOUT), rt[i].want, rt[i].per, ROWS);
    }
    red_set_option(ctx, RED_OPT_STRATEGY, RED_STRATEGY_AUTO);
    /* 12 f64 scans of one array in one pass: a 96-byte state, one element a thread; two
     * tiles of 256 + 8 padding slots, 16 warps' totals, 2 carries, 2 tickets: 52432 bytes */
    char text[2048];
    size_t at = 0;
    for (int q = 0; q < 12; q++)
        at += (size_t)snprintf(text + at, sizeof text - at, "%sscan(+, f64(A[i]) * %d) over i", q ? ", " : "", q + 1);
    const int64_t n1[1] = {ROWS * COLS}, s1[1] = {1};
    const char *k = kernel_for(ctx, text, 1, n1, s1, 0);
    CHECK(strcmp(k, "rj_scan") == 0 && fc_last_smem() == 52432, "12 f64 scans: launched %s with %u bytes of shared memory",
          k, fc_last_smem());
}

static void test_epilogue_launches(red_ctx *ctx)
{
    const int64_t sq[2] = {ROWS, COLS}, rm[2] = {COLS, 1}, l1[2] = {1, 4096}, lr1[2] = {4096, 1};
    const int64_t s8[2] = {ROWS * COLS / 8, 8}, r8[2] = {8, 1};   /* rows shorter than a warp */
    const char *softmax = "m = max(A[i,j]) over j; s = sum(exp(A[i,j] - m)) over j; P[i,j] = exp(A[i,j] - m) / s";
    const char *lse = "m = max(A[i,j]) over j; log(sum(exp(A[i,j] - m)) over j) + m";
    const launch_case t[] = {
        {softmax, RED_STRATEGY_AUTO, sq, rm, "rj_segnv "},
        /* a long row staged in shared memory, the map reading it from there */
        {softmax, RED_STRATEGY_AUTO, l1, lr1, "rj_segbs "},
        {"sum(A[i,j]) over j", RED_STRATEGY_AUTO, l1, lr1, "rj_segbv "},   /* no map: not staged */
        /* tree: a warp's tree for rows shorter than a block, a block's for longer ones */
        {softmax, RED_STRATEGY_TREE, sq, rm, "rj_seg32 "},
        {softmax, RED_STRATEGY_TREE, l1, lr1, "rj_segb "},
        {softmax, RED_STRATEGY_PERSISTENT, sq, rm, "rj_seg32 "},
        {softmax, RED_STRATEGY_PERSISTENT, l1, lr1, "rj_seg32 "},
        {softmax, RED_STRATEGY_SEQUENTIAL, sq, rm, "rj_seg1 rj_map "},
        {lse, RED_STRATEGY_AUTO, sq, rm, "rj_segnv "},
        {lse, RED_STRATEGY_SEQUENTIAL, sq, rm, "rj_seg1 "},
        {lse, RED_STRATEGY_TREE, s8, r8, "rj_seg1 "},
        {lse, RED_STRATEGY_PERSISTENT, s8, r8, "rj_seg1 "},
        /* a full reduction's map of one element: inside the launch that writes the result */
        {"mean(A)", RED_STRATEGY_AUTO, sq, rm, "rj_persistv "},
        {"mean(A)", RED_STRATEGY_TREE, sq, rm, "rj_block rj_final "},
        {"sqrt(sum(A*A)) / max(abs(A))", RED_STRATEGY_SEQUENTIAL, sq, rm, "rj_seq rj_final "},
        /* the map reads other rows' results: a launch of its own */
        {"sum(A[i,j]) over j + sum(A[k,j]) over j", RED_STRATEGY_AUTO, sq, rm, "rj_segnv rj_map "},
    };
    check_launches(ctx, t, sizeof t / sizeof t[0], "epilogue");
}

/* Pairwise reductions take rj_tile under auto from 256 reduced elements an
 * output (one chunk of the reduced domain, or several folded by rj_splitf);
 * the forced strategies and short domains keep their kernels. */
static void test_tile_launches(red_ctx *ctx)
{
    const int64_t l1[2] = {1, 4096}, lr1[2] = {4096, 1}, sq[2] = {ROWS, COLS}, rm[2] = {COLS, 1};
    const launch_case t[] = {
        /* 4096 outputs of 4096: 16 blocks, 8 chunks each */
        {"sum(exp(-(A[0,i]-A[0,j])*(A[0,i]-A[0,j]))) over j", RED_STRATEGY_AUTO, l1, lr1, "rj_tile rj_splitf "},
        {"argmin(abs(A[0,i]-A[0,j])) over j", RED_STRATEGY_AUTO, l1, lr1, "rj_tile rj_splitf "},
        {"argmin(abs(A[0,i]-A[0,j])) over j", RED_STRATEGY_TREE, l1, lr1, "rj_segb "},
        /* rows of 64: too short to stage */
        {"sum(A[i,0]*A[j,1]) over j", RED_STRATEGY_AUTO, sq, rm, "rj_seg1 "},
        /* the output's index as a value; the reduced index the outer one */
        {"sum(A[0,i]*A[0,j]*i) over j", RED_STRATEGY_AUTO, l1, lr1, "rj_tile rj_splitf "},
        {"sum(A[0,i]*A[0,j]) over i", RED_STRATEGY_AUTO, l1, lr1, "rj_tile rj_splitf "},
        /* a contraction: both sides staged, a register tile a thread */
        {"C[i,j] = sum(A[i,k]*A[k,j]) over k", RED_STRATEGY_AUTO, sq, rm, "rj_tile2 "},
        {"C[i,j] = sum(A[i,k]*A[k,j]) over k", RED_STRATEGY_SEQUENTIAL, sq, rm, "rj_seg1 "},
        /* and a map after it, a launch of its own */
        {"C[i,j] = sqrt(sum(A[i,k]*A[k,j]) over k)", RED_STRATEGY_AUTO, sq, rm, "rj_tile2 rj_map "},
    };
    /* the generated kernels: matrix products go to cuBLASLt otherwise (test_blas) */
    red_set_option(ctx, RED_OPT_BLAS, 0);
    check_launches(ctx, t, sizeof t / sizeof t[0], "tile");
    red_set_option(ctx, RED_OPT_BLAS, 1);
    const launch_case b[] = {
        {"C[i,j] = sum(A[i,k]*A[k,j]) over k", RED_STRATEGY_AUTO, sq, rm, ""},
        {"C[i,j] = sqrt(sum(A[i,k]*A[k,j]) over k)", RED_STRATEGY_AUTO, sq, rm, "rj_map "},
        /* a forced strategy keeps its kernels */
        {"C[i,j] = sum(A[i,k]*A[k,j]) over k", RED_STRATEGY_TREE, sq, rm, "rj_seg32 "},
    };
    check_launches(ctx, b, sizeof b / sizeof b[0], "tile, cuBLASLt");
}

/* The same for a keyed expression, with x a view of dx (type xt, xoff bytes
 * in, n elements xstride apart) and seg n keys from dseg, soff of them in. */
static const char *key_kernel_for(red_ctx *ctx, const char *text, red_dtype xt, int xoff, int64_t n, int64_t xstride,
                                  int soff)
{
    red_binding b[2] = {{"x", {0}}, {"seg", {0}}};
    red_array_init(&b[0].array, (char *)dx + xoff, xt, 1, &n, &xstride);
    red_array_init(&b[1].array, (int32_t *)dseg + soff, RED_I32, 1, &n, NULL);
    return last_kernel(ctx, text, b, 2);
}

/* Sorted keys take rj_kfusedv where the keys and the values are contiguous,
 * of one element size, and start on 16 bytes; rj_kfused otherwise. */
static void test_key_vec_choice(red_ctx *ctx)
{
    const struct {
        const char *text;
        red_dtype xt;
        int xoff;
        int64_t n, xstride;
        int soff;
        const char *want;
    } t[] = {
        {"sum(x[i]) by seg[i]", RED_F32, 0, N, 1, 0, "rj_kfusedv"},
        {"sum(x[i]) by seg[i]", RED_F32, 16, N - 8, 1, 4, "rj_kfusedv"},      /* both 16 bytes in */
        {"sum(x[i] * i) by seg[i]", RED_F32, 0, N, 1, 0, "rj_kfusedv"},       /* the index as a value */
        {"max(abs(x[i])) by seg[i] / 3", RED_F32, 0, N, 1, 0, "rj_kfusedv"},  /* a computed key */
        {"sum(x[i]) by seg[i]", RED_I32, 0, N, 1, 0, "rj_kfusedv"},           /* an 8-byte accumulator */
        {"sum(x[i]) by seg[i]", RED_F32, 4, N - 8, 1, 0, "rj_kfused"},        /* values off 16 bytes */
        {"sum(x[i]) by seg[i]", RED_F32, 0, N - 8, 1, 1, "rj_kfused"},        /* keys off 16 bytes */
        {"sum(x[i]) by seg[i]", RED_F32, 0, N / 2, 2, 0, "rj_kfused"},        /* strided values */
        {"sum(x[i]) by seg[i]", RED_F64, 0, N / 2, 1, 0, "rj_kfused"},        /* 8-byte values, 4-byte keys */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *k = key_kernel_for(ctx, t[i].text, t[i].xt, t[i].xoff, t[i].n, t[i].xstride, t[i].soff);
        CHECK(strcmp(k, t[i].want) == 0, "%s (case %zu): launched %s, expected %s", t[i].text, i, k, t[i].want);
    }
}

/* CSR rows take rj_seg1a where they average 8 elements or more and every
 * array the fold loads at the ranged index has stride 1 and starts on 16
 * bytes; rj_seg1s where those arrays have stride 1 otherwise; else the merge
 * path (rj_segm, rj_segmf) from an average of 8 where the fold does not read
 * the row index, and rj_seg1 where it does or the rows are shorter.  The average is the element count the stand-in's rj_count "writes"
 * (0 where it writes none). */
static void test_csr_choice(red_ctx *ctx)
{
    const struct {
        const char *text;
        int xoff;
        int64_t xstride;
        long long avg;
        const char *want;
    } t[] = {
        {"sum(x[k]) over k in ptr[r]..ptr[r+1]", 0, 1, 0, "rj_seg1s"},
        {"max(abs(x[k])), argmin(x[k]) over k in ptr[r]..ptr[r+1]", 0, 1, 0, "rj_seg1s"},
        {"sum(x[k]) over k in ptr[r]..ptr[r+1]", 1, 1, 0, "rj_seg1s"},        /* off 16 bytes */
        {"sum(x[k]) over k in ptr[r]..ptr[r+1]", 0, 2, 0, "rj_seg1"},         /* strided */
        {"sum(x[k] * r) over k in ptr[r]..ptr[r+1]", 0, 1, 0, "rj_seg1"},     /* the row index in the fold */
        {"sum(x[k] * x[k+1]) over k in ptr[r]..ptr[r+1]", 0, 1, 0, "rj_seg1"}, /* a load not at k alone */
        {"sum(x[k]) over k in ptr[r]..ptr[r+1]", 0, 1, 10, "rj_seg1a"},       /* longer rows */
        {"max(x[k]) over k in ptr[r]..ptr[r+1]", 0, 1, 7, "rj_seg1s"},        /* (another plan: counted anew) */
        {"sum(x[k]) over k in ptr[r]..ptr[r+1]", 1, 1, 10, "rj_seg1s"},       /* off 16 bytes */
        {"sum(x[k]) over k in ptr[r]..ptr[r+1]", 0, 2, 10, "rj_segmf"},       /* strided: the merge path */
        /* (strided, so that each is counted anew: the plans of cases 4 and 5 with other arrays) */
        {"sum(x[k] * x[k+1]) over k in ptr[r]..ptr[r+1]", 0, 2, 10, "rj_segmf"}, /* (its fix-up kernel last) */
        {"sum(x[k] * r) over k in ptr[r]..ptr[r+1]", 0, 2, 10, "rj_seg1"},     /* the row index: no merge path */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        red_binding b[2] = {{"x", {0}}, {"ptr", {0}}};
        /* the first half of the rows: inside every view */
        int64_t n = (N - 1) / t[i].xstride, np = ROWS / 2;
        red_array_init(&b[0].array, (float *)dx + t[i].xoff, RED_F32, 1, &n, &t[i].xstride);
        red_array_init(&b[1].array, dptr, RED_I64, 1, &np, NULL);
        long long total = t[i].avg * (np - 1);
        if (total) fc_store(64, &total, sizeof total);   /* rj_count's slot in the workspace */
        const char *k = last_kernel(ctx, t[i].text, b, 2);
        CHECK(strcmp(k, t[i].want) == 0, "%s (case %zu): launched %s, expected %s", t[i].text, i, k, t[i].want);
    }
}

/* Forced strategies on CSR rows keep their meaning with a mapping that fits
 * the rows: tree a lane, a warp's tree or a block's by the rows' average
 * length (a warp a row leaving rows of more than 4096 elements to rj_segl,
 * a block's tree each, which runs last); sequential, persistent and
 * segmented the merge path (each thread folding its run of the rows'
 * elements in order, equal shares for the blocks of an occupancy-sized
 * grid). */
static void test_csr_forced(red_ctx *ctx)
{
    const struct {
        int strategy;
        long long avg;
        const char *want;
    } t[] = {
        {RED_STRATEGY_TREE, 2, "rj_seg1"},        {RED_STRATEGY_TREE, 5, "rj_segl"},
        {RED_STRATEGY_TREE, 300, "rj_segb"},      {RED_STRATEGY_SEQUENTIAL, 5, "rj_segmf"},
        {RED_STRATEGY_PERSISTENT, 5, "rj_segmf"}, {RED_STRATEGY_SEGMENTED, 5, "rj_segmf"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        red_binding b[2] = {{"x", {0}}, {"ptr", {0}}};
        int64_t n = N - 1, np = ROWS / 2, one = 1;
        red_array_init(&b[0].array, (float *)dx, RED_F32, 1, &n, &one);
        red_array_init(&b[1].array, dptr, RED_I64, 1, &np, NULL);
        long long total = t[i].avg * (np - 1);
        fc_store(64, &total, sizeof total);   /* rj_count's slot in the workspace */
        red_set_option(ctx, RED_OPT_STRATEGY, t[i].strategy);
        /* a text of its own each, so that each is counted anew */
        char text[96];
        snprintf(text, sizeof text, "sum(x[k] * %zu) over k in ptr[r]..ptr[r+1]", i + 2);
        const char *k = last_kernel(ctx, text, b, 2);
        CHECK(strcmp(k, t[i].want) == 0, "forced strategy %d on CSR rows of %lld (case %zu): launched %s, expected %s",
              t[i].strategy, t[i].avg, i, k, t[i].want);
    }
    red_set_option(ctx, RED_OPT_STRATEGY, RED_STRATEGY_AUTO);
}

/* The segment count of a ranged pass under auto is taken again when the
 * arrays change (another offsets array, another length), not otherwise. */
static void test_count_key(red_ctx *ctx)
{
    red_expr *e = NULL;
    int rc = red_prepare(ctx, "sum(x[k]) over k in ptr[r]..ptr[r+1]", &e);
    CHECK(rc == RED_OK, "count key: prepare");
    if (rc) return;
    void *dptr2 = to_device(ctx, hptr, sizeof hptr);
    red_array p2, p3;
    int64_t np = ROWS + 1, np3 = ROWS;
    red_array_init(&p2, dptr2, RED_I64, 1, &np, NULL);
    red_array_init(&p3, dptr2, RED_I64, 1, &np3, NULL);
    p2.memory = p3.memory = RED_MEM_CUDA;
    struct {
        const red_array *ptr;
        long long launches;
        const char *what;
    } steps[] = {
        {&dev_binds[2].array, 1, "counted by test_calls for the same plan and arrays: kept"},
        {&dev_binds[2].array, 1, "the same arrays: no count"},
        {&p2, 2, "another offsets array: counted again"},
        {&p2, 1, "then kept"},
        {&p3, 2, "a shorter offsets array (fewer outputs): counted again"},
        {&dev_binds[2].array, 2, "back to the first: counted again (one count is kept)"},
    };
    CHECK(bind(e, dev_binds, 4) == RED_OK, "count key: bind");
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        CHECK(red_bind_array(e, "ptr", steps[i].ptr) == RED_OK, "count key: bind ptr");
        fc_reset();
        rc = run_once(e);
        CHECK(rc == RED_OK, "count key, step %zu: %s", i, red_expr_errmsg(e));
        CHECK(fc_count("cuLaunchKernel") == steps[i].launches, "count key, step %zu (%s): %lld launches, not %lld", i,
              steps[i].what, fc_count("cuLaunchKernel"), steps[i].launches);
    }
    red_finalize(e);
    red_device_free(ctx, dptr2);
}

/* A refused binding changes nothing: rebinding a bound name (not the last
 * bound) to a 0-d array in device memory once dropped another binding and
 * freed a name still in use (found in review; ASan saw it at the next run). */
static void test_refused_rebind(void)
{
    red_ctx *cpu = NULL;
    red_expr *e = NULL;
    CHECK(red_open(&cpu) == RED_OK, "refused rebind: red_open");
    red_set_option(cpu, RED_OPT_DEVICE, RED_DEVICE_CPU);
    int rc = red_prepare(cpu, "sum(x) + y", &e);
    CHECK(rc == RED_OK, "refused rebind: prepare");
    if (!rc) {
        float y = 2.0f, d = 0.0f;
        int64_t n = N;
        red_array xa, ya, dev0;
        red_array_init(&xa, hx, RED_F32, 1, &n, NULL);
        red_array_init(&ya, &y, RED_F32, 0, NULL, NULL);
        red_array_init(&dev0, &d, RED_F32, 0, NULL, NULL);
        dev0.memory = RED_MEM_CUDA;
        CHECK(red_bind_array(e, "x", &xa) == RED_OK && red_bind_array(e, "y", &ya) == RED_OK, "refused rebind: bind");
        CHECK(red_bind_array(e, "x", &dev0) == RED_ERR_UNSUPPORTED, "refused rebind: x as a 0-d device array");
        CHECK(red_bind_array(e, "y", &dev0) == RED_ERR_UNSUPPORTED, "refused rebind: y as a 0-d device array");
        double want = 2.0, got = 0;
        for (int i = 0; i < N; i++) want += hx[i];
        rc = red_run(e);
        CHECK(rc == RED_OK && red_result_f64(e, 0, &got) == RED_OK && fabs(got - want) <= 1e-3 * (1 + fabs(want)),
              "refused rebind: the old bindings still hold: %d %s, %g (want %g)", rc, red_expr_errmsg(e), got, want);
        red_finalize(e);
    }
    red_close(cpu);
}

/* A queued run: a stream and device results.  red_run must not wait;
 * red_sync does. */
/* A prepared expression bound to the device arrays and run twice, so that
 * what follows sees warm runs; `results` sets RED_OPT_RESULTS when >= 0, and
 * a non-NULL `stream` is the expression's stream.  NULL, after a failed
 * check, when a step fails. */
static red_expr *warm_expr(red_ctx *ctx, const char *text, int results, void *stream, const char *what)
{
    red_expr *e = NULL;
    int rc = red_prepare(ctx, text, &e);
    CHECK(rc == RED_OK, "%s: prepare", what);
    if (rc) return NULL;
    if (results >= 0) {
        rc = red_expr_set_option(e, RED_OPT_RESULTS, results);
        CHECK(rc == RED_OK, "%s: results option %d", what, results);
    }
    if (!rc && stream) {
        rc = red_expr_set_stream(e, stream);
        CHECK(rc == RED_OK, "%s: a stream", what);
    }
    if (!rc) rc = bind(e, dev_binds, 4);
    for (int w = 0; !rc && w < 2; w++) {
        rc = run_once(e);
        if (!rc) rc = red_sync(e);
    }
    CHECK(rc == RED_OK, "%s: warm-up: %s", what, red_expr_errmsg(e));
    if (rc) {
        red_finalize(e);
        return NULL;
    }
    return e;
}

/* The last pass's keys, taken as sorted with the count of the run before,
 * turn out not to be (the stand-in raises rj_kfused's flag word at byte 80
 * of the workspace, as the kernel would): the run's first try is thrown
 * away and the plan runs again, scanning the keys.  The call must succeed,
 * keep nothing of the first try, and leave the expression working; the
 * pass stops guessing the count afterwards (rj_kends and its wait again). */
static void test_keys_retry(red_ctx *ctx)
{
    red_expr *e = warm_expr(ctx, "sum(x[i]) by seg[i]", -1, NULL, "keys retry");
    if (!e) return;
    fc_reset();
    unsigned long long raised = 1;
    fc_store(64 + 16, &raised, sizeof raised);
    int rc = run_once(e);
    /* rj_kfused (its published flag raised), then the rerun's rj_kscan;
     * the stand-in's scan finds no keys, so the rerun's result is empty */
    CHECK(rc == RED_OK && fc_count("cuLaunchKernel") == 2 && fc_count("cuStreamSynchronize") == 2,
          "keys retry: the run is redone with the keys scanned (%lld launches, %lld waits): %s",
          fc_count("cuLaunchKernel"), fc_count("cuStreamSynchronize"), red_expr_errmsg(e));
    long long live = -1;
    for (int k = 0; !rc && k < 4; k++) {
        fc_reset();
        rc = run_once(e);
        red_array a;
        CHECK(rc == RED_OK && red_result(e, 0, &a, NULL) == RED_OK && a.ndim == 1 && a.shape[0] == 1,
              "keys retry: run %d after it: %s", k, red_expr_errmsg(e));
        CHECK(fc_count("cuLaunchKernel") == 2 && fc_count("cuStreamSynchronize") == 1,
              "keys retry: afterwards rj_kends (read back) and rj_kfused (published), one wait (%lld, %lld)",
              fc_count("cuLaunchKernel"),
              fc_count("cuStreamSynchronize"));
        if (k == 1) live = fc_live(0);
        if (k == 3) CHECK(fc_live(0) == live, "keys retry: device allocations grow run by run (%lld, then %lld)",
                          live, fc_live(0));
    }
    red_finalize(e);
}

/* A keyed last pass on a stream with its results on the device: the run
 * waits for its keys either way, so it ends with the read that checks them
 * and is not left queued; red_sync then has nothing to wait for. */
static void test_async_keys(red_ctx *ctx)
{
    static char stream_stand_in;
    red_expr *e = warm_expr(ctx, "sum(x[i]) by seg[i]", RED_RESULTS_DEVICE, &stream_stand_in, "async keys");
    if (!e) return;
    fc_reset();
    int rc = red_run(e);
    /* the run waits for its key flag, so rj_kfusedv publishes it */
    CHECK(rc == RED_OK && fc_count("cuStreamSynchronize") == 0 && fc_count("cuLaunchKernel") == 1 &&
              fc_count("cuMemcpyDtoHAsync") == 0,
          "async keys: one launch, no copy and no wait a run (%lld, %lld, %lld): %s",
          fc_count("cuLaunchKernel"), fc_count("cuMemcpyDtoHAsync"), fc_count("cuStreamSynchronize"),
          red_expr_errmsg(e));
    fc_reset();
    CHECK(red_sync(e) == RED_OK && fc_count("cuStreamSynchronize") == 0, "async keys: red_sync waited again");
    /* a kernel that ends without publishing: the stream is seen done, and
     * the workspace is copied back as before */
    long long pub0 = fc_drop_publish(1);
    fc_reset();
    rc = red_run(e);
    CHECK(rc == RED_OK && fc_count("cuLaunchKernel") == 1 && fc_count("cuMemcpyDtoHAsync") == 1 &&
              fc_count("cuStreamSynchronize") == 1 && fc_drop_publish(0) == pub0,
          "async keys, publish dropped: one launch, one copy, one wait (%lld, %lld, %lld): %s",
          fc_count("cuLaunchKernel"), fc_count("cuMemcpyDtoHAsync"), fc_count("cuStreamSynchronize"),
          red_expr_errmsg(e));
    fc_reset();
    rc = red_run(e);
    CHECK(rc == RED_OK && fc_count("cuMemcpyDtoHAsync") == 0 && fc_drop_publish(0) == pub0 + 1,
          "async keys: the next run publishes again (%lld copies): %s", fc_count("cuMemcpyDtoHAsync"),
          red_expr_errmsg(e));
    red_array a;
    CHECK(red_result(e, 0, &a, NULL) == RED_OK && a.memory == RED_MEM_CUDA && a.ndim == 1,
          "async keys: the result is a 1-d device array");
    red_finalize(e);
}

static void test_async(red_ctx *ctx)
{
    static char stream_stand_in;
    red_expr *e = warm_expr(ctx, "sum(x), max(x)", RED_RESULTS_DEVICE, &stream_stand_in, "async");
    if (!e) return;
    fc_reset();
    int rc = red_run(e);
    CHECK(rc == RED_OK, "async: red_run: %s", red_expr_errmsg(e));
    CHECK(fc_count("cuStreamSynchronize") == 0, "async: red_run waited for the device (%lld syncs)",
          fc_count("cuStreamSynchronize"));
    CHECK(fc_count("cuMemcpyDtoHAsync") == 0, "async: red_run copied something back");
    CHECK(fc_count("cuLaunchKernel") == 1, "async: one launch for the two fused sums");
    fc_reset();
    CHECK(red_sync(e) == RED_OK, "async: red_sync");
    CHECK(fc_count("cuStreamSynchronize") == 1 && fc_count("cuMemcpyDtoHAsync") == 1,
          "async: red_sync waits for the stream once, the fault record's copy queued before (%lld syncs, %lld copies)",
          fc_count("cuStreamSynchronize"), fc_count("cuMemcpyDtoHAsync"));
    red_array a;
    rc = red_result(e, 0, &a, NULL);
    CHECK(rc == RED_OK && a.memory == RED_MEM_CUDA && a.ndim == 0, "async: result 0 is a 0-d device array");
    unsigned type = 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*pga)(void *, int, unsigned long long) = NULL;
    if (h) *(void **)&pga = dlsym(h, "cuPointerGetAttribute");
    CHECK(rc == RED_OK && pga && pga(&type, 2, (unsigned long long)(uintptr_t)a.data) == 0 && type == 2,
          "async: the result lies in device memory the driver gave out");
    red_array d;
    rc = red_result_detach(e, 1, &d);
    CHECK(rc == RED_OK && d.memory == RED_MEM_CUDA, "async: result 1 detached");
    if (rc == RED_OK) red_device_free(ctx, d.data);
    red_finalize(e);
}

/* red_result_take hands over a device result's own buffer (no device-to-device
 * copy, where red_result_detach makes one), after which the result reads
 * RED_ERR_MISUSE; the next run writes a new buffer, and the one handed over goes
 * back with red_device_free. */
static void test_take(red_ctx *ctx)
{
    red_expr *e = warm_expr(ctx, "x * 2", RED_RESULTS_DEVICE, NULL, "take");
    if (!e) return;
    red_array a, t, d;
    int rc = red_run(e);
    if (!rc) rc = red_result(e, 0, &a, NULL);
    CHECK(rc == RED_OK && a.memory == RED_MEM_CUDA && a.ndim == 1, "take: a device array result");
    if (rc) {
        red_finalize(e);
        return;
    }
    fc_reset();
    rc = red_result_detach(e, 0, &d);
    CHECK(rc == RED_OK && d.data != a.data && fc_count("cuMemcpyDtoD") == 1, "take: red_result_detach copies (%lld copies)",
          fc_count("cuMemcpyDtoD"));
    if (!rc) red_device_free(ctx, d.data);
    fc_reset();
    rc = red_result_take(e, 0, &t);
    CHECK(rc == RED_OK && t.data == a.data && t.memory == RED_MEM_CUDA && t.shape[0] == a.shape[0] &&
              fc_count("cuMemcpyDtoD") == 0,
          "take: the result's own buffer, no copy (%lld copies)", fc_count("cuMemcpyDtoD"));
    red_array again;
    CHECK(red_result(e, 0, &again, NULL) == RED_ERR_MISUSE && strstr(red_expr_errmsg(e), "handed over"),
          "take: the result reads RED_ERR_MISUSE afterwards: '%s'", red_expr_errmsg(e));
    rc = red_run(e);
    if (!rc) rc = red_result(e, 0, &again, NULL);
    CHECK(rc == RED_OK && again.data != t.data, "take: the next run writes a new buffer: %s", red_expr_errmsg(e));
    if (t.data) red_device_free(ctx, t.data);
    red_finalize(e);
}

/* Runs on a stream whose results stay on the device are queued one behind
 * the other: no wait and no copy between them, and no new device memory
 * after the first (each reuses the buffers of the one before, in stream
 * order).  A fault in an earlier run of the chain (the stand-in writes the
 * fault record at that run's launch) is reported by the red_sync after the
 * last, and the expression works afterwards. */
static void test_async_chain(red_ctx *ctx)
{
    static char stream_stand_in;
    red_expr *e = warm_expr(ctx, "sum(x), max(x)", RED_RESULTS_DEVICE, &stream_stand_in, "async chain");
    if (!e) return;
    int rc = red_run(e);
    long long live = fc_live(0);
    fc_reset();
    for (int k = 0; k < 100 && !rc; k++) rc = red_run(e);
    CHECK(rc == RED_OK && fc_count("cuLaunchKernel") == 100 && fc_count("cuStreamSynchronize") == 0 &&
              fc_count("cuMemcpyDtoHAsync") == 0 && fc_count("cuMemsetD8Async") == 0,
          "async chain: 100 runs queued, one launch each and no wait, copy or memset (%lld launches, %lld waits, "
          "%lld copies, %lld memsets): %s", fc_count("cuLaunchKernel"), fc_count("cuStreamSynchronize"),
          fc_count("cuMemcpyDtoHAsync"), fc_count("cuMemsetD8Async"), red_expr_errmsg(e));
    CHECK(fc_live(0) == live, "async chain: device allocations grow run by run (%lld, then %lld)", live, fc_live(0));
    fc_reset();
    CHECK(red_sync(e) == RED_OK && fc_count("cuStreamSynchronize") == 1, "async chain: red_sync waits once (%lld)",
          fc_count("cuStreamSynchronize"));
    red_array a;
    CHECK(red_result(e, 0, &a, NULL) == RED_OK && a.memory == RED_MEM_CUDA, "async chain: result 0 on the device");

    /* a fault in the first of three chained runs */
    unsigned long long err[4] = {RED_ERR_INDEX, 99999, 0, 7};
    fc_store(0, err, sizeof err);
    rc = red_run(e);
    if (!rc) rc = red_run(e);
    if (!rc) rc = red_run(e);
    CHECK(rc == RED_OK, "async chain: runs queued behind a faulting one return at once: %s", red_expr_errmsg(e));
    rc = red_sync(e);
    CHECK(rc == RED_ERR_INDEX && strstr(red_expr_errmsg(e), "out of range"),
          "async chain: red_sync reports the earlier run's fault (%d: %s)", rc, red_expr_errmsg(e));
    CHECK(red_result(e, 0, &a, NULL) != RED_OK, "async chain: no results after a fault");
    rc = red_run(e);
    if (!rc) rc = red_sync(e);
    CHECK(rc == RED_OK && red_result(e, 0, &a, NULL) == RED_OK, "async chain: the next run after the fault works: %s",
          red_expr_errmsg(e));
    red_finalize(e);
}

/* Small results lie in the run's workspace and reach the host in the copy
 * that brings the fault record back: a "kernel" (the stand-in, at the next
 * launch) writes them where the run put them, and the host reads exactly
 * those values, run after run, the same under RED_RESULTS_DEVICE_ARRAYS;
 * there an array result stays on the device, and a run on a stream whose
 * results all stay there is left queued. */
static void test_workspace_results(red_ctx *ctx)
{
    static char stream_stand_in;
    for (int mode = RED_RESULTS_HOST; mode <= RED_RESULTS_DEVICE_ARRAYS; mode += 2) {
        char what[64];
        snprintf(what, sizeof what, "workspace results (mode %d)", mode);
        red_expr *e = warm_expr(ctx, "sum(x), max(x)", mode, NULL, what);
        if (!e) return;
        int rc = RED_OK;
        for (int k = 0; !rc && k < 5; k++) {
            /* f32 results, the second 16 bytes after the first */
            float v[8] = {0};
            v[0] = 1.5f + (float)k;
            v[4] = -2.25f - (float)k;
            fc_store(RJ_WS_HEAD, v, sizeof v);
            fc_reset();
            /* the last run's kernel ends without publishing: the host sees
             * the stream done without it, and copies the workspace back */
            long long pub0 = fc_drop_publish(k >= 3);
            /* the fifth run's stream also looks busy for longer than the
             * host spins (about a millisecond): it then waits in
             * cuStreamSynchronize, and copies the workspace back */
            if (k == 4) fc_busy(1 << 30);
            rc = red_run(e);
            long long pubs = fc_drop_publish(0) - pub0;
            double a = 0, b = 0;
            red_array ra;
            int ok = rc == RED_OK && red_result(e, 0, &ra, NULL) == RED_OK && ra.memory == RED_MEM_HOST &&
                     ra.dtype == RED_F32 && red_result_f64(e, 0, &a) == RED_OK && red_result_f64(e, 1, &b) == RED_OK;
            CHECK(ok && a == v[0] && b == v[4], "workspace results (mode %d, run %d): %g and %g came back, "
                  "%g and %g were written", mode, k, a, b, v[0], v[4]);
            if (k < 3)
                CHECK(pubs == 1 && fc_count("cuMemcpyDtoHAsync") == 0 && fc_count("cuStreamSynchronize") == 0,
                      "workspace results (mode %d): published (%lld), with no copy (%lld) and no synchronisation "
                      "(%lld)", mode, pubs, fc_count("cuMemcpyDtoHAsync"), fc_count("cuStreamSynchronize"));
            else if (k == 4)
                /* at least one query before giving up: how many fit in the
                 * millisecond depends on the machine (2 under valgrind on a
                 * loaded CI machine) */
                CHECK(pubs == 0 && fc_count("cuStreamQuery") >= 1 && fc_count("cuMemcpyDtoHAsync") == 1 &&
                          fc_count("cuStreamSynchronize") == 2,
                      "workspace results (mode %d), not published, long: the stream asked (%lld), then one copy "
                      "(%lld) and two synchronisations (%lld)", mode, fc_count("cuStreamQuery"),
                      fc_count("cuMemcpyDtoHAsync"), fc_count("cuStreamSynchronize"));
            else
                CHECK(pubs == 0 && fc_count("cuStreamQuery") >= 1 && fc_count("cuMemcpyDtoHAsync") == 1 &&
                          fc_count("cuStreamSynchronize") == 1,
                      "workspace results (mode %d), not published: the stream asked (%lld), then one copy (%lld) "
                      "and one synchronisation (%lld)", mode, fc_count("cuStreamQuery"),
                      fc_count("cuMemcpyDtoHAsync"), fc_count("cuStreamSynchronize"));
        }
        /* on a stream: scalars to the host still wait for the run */
        red_expr_set_stream(e, &stream_stand_in);
        fc_reset();
        long long pub0 = fc_drop_publish(0);
        rc = red_run(e);
        long long pubs = fc_drop_publish(0) - pub0;
        red_array ra;
        CHECK(rc == RED_OK && pubs == 1 && red_result(e, 0, &ra, NULL) == RED_OK && ra.memory == RED_MEM_HOST,
              "workspace results (mode %d) on a stream: scalars on the host after red_run, published (%lld)", mode,
              pubs);
        red_finalize(e);
    }

    /* an array result under RED_RESULTS_DEVICE_ARRAYS: on the device, in
     * memory the driver gave out; queued on a stream */
    red_expr *e = warm_expr(ctx, "sum(A[i,j]) over j", RED_RESULTS_DEVICE_ARRAYS, NULL, "device arrays");
    if (!e) return;
    int rc = RED_OK;
    red_array a;
    unsigned type = 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*pga)(void *, int, unsigned long long) = NULL;
    if (h) *(void **)&pga = dlsym(h, "cuPointerGetAttribute");
    fc_reset();
    rc = red_run(e);
    CHECK(rc == RED_OK && red_result(e, 0, &a, NULL) == RED_OK && a.memory == RED_MEM_CUDA && a.ndim == 1 && pga &&
              pga(&type, 2, (unsigned long long)(uintptr_t)a.data) == 0 && type == 2,
          "device arrays: an array result stays in device memory the driver gave out");
    CHECK(fc_count("cuMemcpyDtoHAsync") == 1, "device arrays: the fault record alone comes back (%lld copies)",
          fc_count("cuMemcpyDtoHAsync"));
    static char stream_stand_in2;
    red_expr_set_stream(e, &stream_stand_in2);
    fc_reset();
    rc = red_run(e);
    CHECK(rc == RED_OK && fc_count("cuStreamSynchronize") == 0 && fc_count("cuMemcpyDtoHAsync") == 0,
          "device arrays on a stream, no scalar result: red_run leaves the run queued (%lld syncs)",
          fc_count("cuStreamSynchronize"));
    CHECK(red_sync(e) == RED_OK && red_result(e, 0, &a, NULL) == RED_OK && a.memory == RED_MEM_CUDA,
          "device arrays on a stream: red_sync, then the result on the device");
    red_finalize(e);
}

/* Faults at allocation, module load and launch: a status, no device memory
 * left in use, and the next run works. */
static void test_faults(red_ctx *ctx)
{
    static const struct {
        int kind;
        const char *name;
        int want;
    } faults[] = {{GPU_FAULT_ALLOC, "allocation", RED_ERR_NOMEM},
                  {GPU_FAULT_MODULE_LOAD, "module load", RED_ERR_DEVICE},
                  {GPU_FAULT_LAUNCH, "launch", RED_ERR_DEVICE}};
    /* each fault on a text not seen before, so that its kernels are loaded
     * after the fault is armed; the first one's 128 MB result is larger than
     * any buffer the pool holds (the largest before it: test_scan_ways's 89
     * MB), so it must allocate */
    static const char *const texts[] = {"f64(x[i]) * x[j]", "max(abs(x - 2))", "sum(A[i,j] * 3) over i"};
    for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++) {
        red_cache_info before, after;
        red_cache_stats(ctx, &before);
        gpu_inject_fault(faults[f].kind, 1);
        int count = 0;
        red_array out = {0};
        int rc = red_eval(ctx, texts[f], dev_binds, 4, &out, 1, &count);
        gpu_inject_fault(faults[f].kind, 0);
        CHECK(rc == faults[f].want, "fault at %s: status %d (%s), expected %d", faults[f].name, rc, red_errmsg(ctx),
              faults[f].want);
        CHECK(rc == RED_OK || out.data == NULL, "fault at %s: no result handed out", faults[f].name);
        red_cache_stats(ctx, &after);
        CHECK(after.pool_in_use == before.pool_in_use, "fault at %s: device memory in use %lld before, %lld after",
              faults[f].name, before.pool_in_use, after.pool_in_use);
        rc = red_eval(ctx, texts[f], dev_binds, 4, &out, 1, &count);
        CHECK(rc == RED_OK, "after the fault at %s the same text runs: %s", faults[f].name, red_errmsg(ctx));
        if (rc == RED_OK) red_free(out.data);
    }
}

/* A fault record written by a "kernel" (the stand-in, at the next launch):
 * the run fails with the record's status and a message, hands out no
 * result, leaves no device memory in use, and the next run works: it takes
 * a fresh workspace (the faulted one is not clean: one memset), and the run
 * after that none.  Queued runs report it at red_sync. */
static void test_device_faults(red_ctx *ctx)
{
    red_expr *e = warm_expr(ctx, "sum(x[i] * 2)", -1, NULL, "device faults");
    if (!e) return;
    int rc = RED_OK;
    red_cache_info before, after;
    red_cache_stats(ctx, &before);

    fc_fault(RED_ERR_INDEX, 999999, 0, 123456789);   /* node 999999: no such node */
    rc = red_run(e);
    CHECK(rc == RED_ERR_INDEX && strstr(red_expr_errmsg(e), "123456789"),
          "a device fault record is RED_ERR_INDEX with the value: %d %s", rc, red_expr_errmsg(e));
    CHECK(red_result_count(e) == 0, "a faulted run has no results (%d)", red_result_count(e));
    red_cache_stats(ctx, &after);
    CHECK(after.pool_in_use == before.pool_in_use, "a faulted run leaves no device memory in use (%lld, %lld)",
          before.pool_in_use, after.pool_in_use);
    fc_reset();
    rc = run_once(e);
    CHECK(rc == RED_OK && fc_count("cuMemsetD8Async") == 1,
          "after a fault the next run works on a fresh workspace: %d, %lld memsets", rc, fc_count("cuMemsetD8Async"));
    fc_reset();
    rc = run_once(e);
    CHECK(rc == RED_OK && fc_count("cuMemsetD8Async") == 0, "and the run after it reuses a clean one");

    fc_fault(RED_ERR_EMPTY, 0, 0, 0);
    rc = red_run(e);
    CHECK(rc == RED_ERR_EMPTY && strstr(red_expr_errmsg(e), "empty"), "an empty-argmin record is RED_ERR_EMPTY: %s",
          red_expr_errmsg(e));

    /* queued: red_run returns, red_sync finds the fault */
    static char stream_stand_in;
    red_expr_set_option(e, RED_OPT_RESULTS, RED_RESULTS_DEVICE);
    red_expr_set_stream(e, &stream_stand_in);
    rc = red_run(e) || red_sync(e);
    CHECK(rc == RED_OK, "queued: a clean run");
    red_cache_stats(ctx, &before);
    fc_fault(RED_ERR_INDEX, 999999, 0, 42);
    rc = red_run(e);
    CHECK(rc == RED_OK, "queued: red_run returns before the fault is known (%d)", rc);
    rc = red_sync(e);
    CHECK(rc == RED_ERR_INDEX, "queued: red_sync reports the device fault (%d %s)", rc, red_expr_errmsg(e));
    red_array a;
    CHECK(red_result(e, 0, &a, NULL) != RED_OK, "queued: no result after the fault");
    red_cache_stats(ctx, &after);
    CHECK(after.pool_in_use <= before.pool_in_use, "queued: the faulted run's device results are released");
    rc = red_run(e) || red_sync(e);
    CHECK(rc == RED_OK, "queued: the next run works: %s", red_expr_errmsg(e));
    red_finalize(e);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A large result on the host (x * 2 over 2^21 f32, 8 MiB): its buffer is
 * kept for the next run, page-locked with the driver when it is used the
 * second time (one cuMemHostRegister, then none), copied into with the
 * same one copy a run; red_result_detach copies, red_finalize unregisters
 * what is kept, and red_eval's buffers, the caller's, are never
 * registered. */
static void test_large_results(red_ctx *ctx)
{
    enum { BIG = 1 << 21 };
    float *hbig = calloc(BIG, sizeof *hbig);
    void *dbig = hbig ? to_device(ctx, hbig, (size_t)BIG * sizeof *hbig) : NULL;
    if (!dbig) {
        CHECK(0, "large results: no input");
        free(hbig);
        return;
    }
    int64_t n = BIG;
    red_binding b = {"x", {0}};
    red_array_init(&b.array, dbig, RED_F32, 1, &n, NULL);
    b.array.memory = RED_MEM_CUDA;
    red_expr *e = NULL;
    int rc = red_prepare(ctx, "x * 2", &e);
    if (!rc) rc = bind(e, &b, 1);
    void *data[4] = {0};
    long long reg[4] = {0}, copies[4] = {0}, live[4] = {0};
    for (int k = 0; k < 4 && !rc; k++) {
        fc_reset();
        red_array a;
        rc = red_run(e);
        if (!rc) rc = red_result(e, 0, &a, NULL);
        data[k] = rc ? NULL : (void *)a.data;
        reg[k] = fc_count("cuMemHostRegister");
        copies[k] = fc_count("cuMemcpyDtoHAsync");
        live[k] = fc_live(5);
    }
    CHECK(!rc, "large results: runs: %s", e ? red_expr_errmsg(e) : red_errmsg(ctx));
    CHECK(data[1] == data[0] && data[2] == data[0] && data[3] == data[0],
          "large results: every run writes into the first run's buffer (%p %p %p %p)", data[0], data[1], data[2],
          data[3]);
    CHECK(reg[0] == 0 && reg[1] == 1 && reg[2] == 0 && reg[3] == 0,
          "large results: registered once, at the second run (%lld %lld %lld %lld)", reg[0], reg[1], reg[2], reg[3]);
    CHECK(live[0] == 0 && live[1] == 1 && live[3] == 1, "large results: one range registered from the second run on");
    CHECK(copies[0] == copies[3] && copies[3] >= 1, "large results: the same copies a run (%lld, %lld)", copies[0],
          copies[3]);
    /* that result as another expression's host input, on a stream with
     * device results: its upload from page-locked memory is asynchronous,
     * and the owner may write the buffer on its next run, so the run is
     * finished before red_run returns; from plain memory it stays queued */
    static char stream_stand_in;
    red_expr *e2 = NULL;
    int rc2 = red_prepare(ctx, "sum(y)", &e2);
    if (!rc2) rc2 = red_expr_set_option(e2, RED_OPT_RESULTS, RED_RESULTS_DEVICE);
    if (!rc2) rc2 = red_expr_set_stream(e2, &stream_stand_in);
    red_array y;
    red_array_init(&y, data[3], RED_F32, 1, &n, NULL);
    float *plain = malloc((size_t)BIG * sizeof *plain);
    long long syncs[2] = {-1, -1};
    for (int k = 0; k < 2 && !rc2 && plain; k++) {
        if (k == 1) memcpy(plain, data[3], (size_t)BIG * sizeof *plain), y.data = plain;
        rc2 = red_bind_array(e2, "y", &y);
        if (!rc2) rc2 = red_run(e2);   /* compiles at k == 0 */
        if (!rc2) rc2 = red_sync(e2);
        fc_reset();
        if (!rc2) rc2 = red_run(e2);
        syncs[k] = fc_count("cuStreamSynchronize");
        if (!rc2) rc2 = red_sync(e2);
    }
    CHECK(!rc2 && syncs[0] >= 1 && syncs[1] == 0,
          "large results: a run reading a page-locked result is finished, one reading plain memory queued (%lld, %lld syncs): %s",
          syncs[0], syncs[1], e2 ? red_expr_errmsg(e2) : red_errmsg(ctx));
    red_finalize(e2);
    free(plain);
    red_array d = {0};
    rc = red_result_detach(e, 0, &d);
    CHECK(!rc && d.data != data[3] && fc_live(5) == 1, "large results: red_result_detach copies");
    red_free(d.data);
    red_finalize(e);
    CHECK(fc_live(5) == 0, "large results: red_finalize unregisters the kept buffer (%lld left)", fc_live(5));

    /* red_eval runs an expression of its own each call and hands the
     * buffers over: none of them registered, none left registered */
    red_array o[3] = {{0}};   /* data NULL: red_eval allocates */
    int cnt = 0;
    for (int k = 0; k < 3 && !rc; k++) {
        rc = red_eval(ctx, "x * 2", &b, 1, &o[k], 1, &cnt);
        CHECK(!rc && fc_live(5) == 0, "large results: red_eval %d hands over a buffer nothing registers (%lld)", k,
              fc_live(5));
    }
    for (int k = 0; k < 3 && !rc; k++) red_free(o[k].data);
    red_device_free(ctx, dbig);
    free(hbig);
}

static int bench(red_ctx *ctx, long calls)
{
    red_expr *e = NULL;
    double v = 0;
    if (red_prepare(ctx, "sum(x)", &e) || bind(e, dev_binds, 4) || red_run(e)) {
        fprintf(stderr, "bench: %s\n", red_errmsg(ctx));
        return 1;
    }
    for (long k = 0; k < 1000; k++) red_run(e), red_result_f64(e, 0, &v);
    fc_reset();
    double t0 = now_s();
    for (long k = 0; k < calls; k++) red_run(e), red_result_f64(e, 0, &v);
    double t1 = now_s();
    double calls_per = (double)fc_total() / (double)calls;
    for (long k = 0; k < 1000; k++) red_eval_f64(ctx, "sum(x)", dev_binds, 1, &v);
    double t2 = now_s();
    for (long k = 0; k < calls; k++) red_eval_f64(ctx, "sum(x)", dev_binds, 1, &v);
    double t3 = now_s();
    printf("sum(x), %d f32 on the device, stand-in driver, %ld calls:\n", N, calls);
    printf("  red_run + red_result_f64: %.3f us per call (%.1f driver calls)\n", (t1 - t0) * 1e6 / (double)calls,
           calls_per);
    printf("  red_eval_f64:             %.3f us per call\n", (t3 - t2) * 1e6 / (double)calls);
    red_finalize(e);

    /* Results left on the device (RED_OPT_RESULTS = RED_RESULTS_DEVICE).
     * red_eval takes no stream: it launches, waits and reads the fault
     * record (one copy), and hands the result's device buffer over (freed
     * here, back to the pool).  A prepared expression on a stream is
     * queued by red_run; the next red_run first waits for it and reads its
     * fault record, so a call here is one queued run and one finished one. */
    red_set_option(ctx, RED_OPT_RESULTS, RED_RESULTS_DEVICE);
    red_array out = {0};
    int count = 0, rc = 0;
    for (long k = 0; k < 1000 && !rc; k++) {
        out.data = NULL;
        rc = red_eval(ctx, "sum(x)", dev_binds, 1, &out, 1, &count);
        red_device_free(ctx, out.data);
    }
    fc_reset();
    double t4 = now_s();
    for (long k = 0; k < calls && !rc; k++) {
        out.data = NULL;
        rc = red_eval(ctx, "sum(x)", dev_binds, 1, &out, 1, &count);
        red_device_free(ctx, out.data);
    }
    double t5 = now_s();
    double eval_calls = (double)fc_total() / (double)calls;
    red_set_option(ctx, RED_OPT_RESULTS, RED_RESULTS_HOST);
    static char stream_stand_in;
    e = NULL;
    if (!rc) rc = red_prepare(ctx, "sum(x)", &e);
    if (!rc) {
        red_expr_set_option(e, RED_OPT_RESULTS, RED_RESULTS_DEVICE);
        red_expr_set_stream(e, &stream_stand_in);
        rc = bind(e, dev_binds, 1);
    }
    for (long k = 0; k < 1000 && !rc; k++) rc = red_run(e);
    fc_reset();
    double t6 = now_s();
    for (long k = 0; k < calls && !rc; k++) rc = red_run(e);
    double t7 = now_s();
    double queued_calls = (double)fc_total() / (double)calls;
    if (!rc) rc = red_sync(e);
    red_finalize(e);
    if (rc) {
        fprintf(stderr, "bench, device results: status %d: %s\n", rc, red_errmsg(ctx));
        return 1;
    }
    printf("  results left on the device (RED_RESULTS_DEVICE):\n");
    printf("  red_eval + red_device_free: %.3f us per call (%.1f driver calls)\n", (t5 - t4) * 1e6 / (double)calls,
           eval_calls);
    printf("  red_run on a stream:        %.3f us per call (%.1f driver calls)\n", (t7 - t6) * 1e6 / (double)calls,
           queued_calls);
    return 0;
}

int main(int argc, char **argv)
{
    long bench_calls = argc > 2 && strcmp(argv[1], "--bench") == 0 ? atol(argv[2]) : 0;
    red_ctx *ctx = NULL;
    if (red_open(&ctx)) {
        printf("red_open failed\n");
        return 1;
    }
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_GPU);
    if (!red_gpu_available(ctx) || !find_fake()) {
        printf("skipped: the stand-in driver (tests/fakecuda) is not what the library loaded\n");
        red_close(ctx);
        return 77;
    }
    make_inputs(ctx);
    /* the kernels are compiled for real: without NVRTC there is nothing to test */
    double probe = 0;
    if (red_eval_f64(ctx, "sum(x)", dev_binds, 1, &probe) == RED_ERR_DEVICE && strstr(red_errmsg(ctx), "NVRTC")) {
        printf("skipped: %s\n", red_errmsg(ctx));
        red_close(ctx);
        return 77;
    }
    if (bench_calls > 0) {
        int rc = bench(ctx, bench_calls);
        red_close(ctx);
        return rc;
    }
    test_calls(ctx);
    test_count_key(ctx);
    test_vec_choice(ctx);
    test_vec_rows(ctx);
    test_blas(ctx);
    test_scan_ways(ctx);
    test_epilogue_launches(ctx);
    test_tile_launches(ctx);
    test_key_vec_choice(ctx);
    test_csr_choice(ctx);
    test_csr_forced(ctx);
    test_refused_rebind();
    test_async(ctx);
    test_take(ctx);
    test_async_chain(ctx);
    test_async_keys(ctx);
    test_keys_retry(ctx);
    test_workspace_results(ctx);
    test_large_results(ctx);
    test_device_faults(ctx);
    test_faults(ctx);

    red_device_free(ctx, dx);
    red_device_free(ctx, dA);
    red_device_free(ctx, dptr);
    red_device_free(ctx, dseg);
    red_close(ctx);
    static const char *const kinds[] = {"device allocations", "pinned host blocks", "modules", "events",
                                        "primary-context references", "registered host ranges"};
    for (int k = 0; k < 6; k++)
        CHECK(fc_live(k) == 0, "after red_close the driver still holds %lld %s", fc_live(k), kinds[k]);
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
