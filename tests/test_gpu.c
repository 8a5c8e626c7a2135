/*
 * test_gpu.c -- the GPU suite beyond the data-driven cases: large and odd
 * sizes (up to 2^28 elements) under every strategy compared with the CPU
 * executor, repeated runs compared bit for bit, inputs already in device
 * memory used in place, and the disk cache across two processes (the second
 * compiles nothing).  Exits 77 (skipped) where no GPU is usable.
 *
 *   test_gpu [--max-log2 N]        (default 28)
 *   test_gpu --huge                2^32 + 2^20 + 3 elements, 12 GiB of host and device memory
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redjit.h"

static long npass, nfail;

#define CHECK(cond, ...)                     \
    do {                                     \
        if (cond) {                          \
            npass++;                         \
        } else {                             \
            nfail++;                         \
            printf("FAIL: " __VA_ARGS__);    \
            printf("\n");                    \
        }                                    \
    } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static const char *const strategy_names[] = {"auto", "tree", "sequential", "persistent", "segmented"};

/* Evaluate on the given device and strategy; results copied to f64 arrays. */
static int eval(red_ctx *ctx, int device, int strategy, const char *text, red_binding *b, int nb,
                double **out, int64_t *n, int *nres)
{
    red_set_option(ctx, RED_OPT_DEVICE, device);
    red_set_option(ctx, RED_OPT_STRATEGY, strategy);
    red_expr *e;
    int rc = red_prepare(ctx, text, &e);
    for (int i = 0; !rc && i < nb; i++) rc = red_bind_array(e, b[i].name, &b[i].array);
    if (!rc) rc = red_run(e);
    if (rc) {
        printf("  %s [%s, %s]: %s\n", text, device == RED_DEVICE_GPU ? "gpu" : "cpu", strategy_names[strategy],
               red_expr_errmsg(e));
        red_finalize(e);
        return rc;
    }
    *nres = red_result_count(e);
    for (int r = 0; r < *nres; r++) {
        red_array a;
        red_result(e, r, &a, NULL);
        n[r] = red_array_size(&a);
        out[r] = malloc((size_t)(n[r] ? n[r] : 1) * sizeof(double));
        red_array d;
        int64_t sh[RED_MAX_DIMS];
        for (int k = 0; k < a.ndim; k++) sh[k] = a.shape[k];
        red_array_init(&d, out[r], RED_F64, a.ndim, sh, NULL);
        red_result_copy(e, r, &d);
    }
    red_finalize(e);
    return 0;
}

typedef struct gcase {
    const char *text;
    const char *mag;    /* the same reduction of magnitudes, for the tolerance; NULL: exact */
} gcase;

static void compare(red_ctx *ctx, const gcase *gc, red_binding *b, int nb, const char *label)
{
    double *ref[8], *mag[8];
    int64_t nref[8], nmag[8];
    int nr = 0, nm = 0;
    if (eval(ctx, RED_DEVICE_CPU, RED_STRATEGY_AUTO, gc->text, b, nb, ref, nref, &nr)) {
        CHECK(0, "%s: %s on the CPU", label, gc->text);
        return;
    }
    if (gc->mag && eval(ctx, RED_DEVICE_CPU, RED_STRATEGY_AUTO, gc->mag, b, nb, mag, nmag, &nm)) nm = 0;
    for (int s = 0; s < 5; s++) {
        double *got[8], *again[8];
        int64_t ng[8], na[8];
        int ngot = 0, nagain = 0;
        if (eval(ctx, RED_DEVICE_GPU, s, gc->text, b, nb, got, ng, &ngot)) {
            CHECK(0, "%s: %s [%s] failed on the GPU", label, gc->text, strategy_names[s]);
            continue;
        }
        int ok = ngot == nr, worst = -1;
        double wd = 0, wt = 0;
        for (int r = 0; ok && r < nr; r++) {
            ok = ng[r] == nref[r];
            for (int64_t i = 0; ok && i < nref[r]; i++) {
                double tol = 0;
                if (gc->mag && r < nm) tol = 2e-5 * fabs(mag[r][nmag[r] == nref[r] ? i : 0]) + 1e-30;
                double d = fabs(got[r][i] - ref[r][i]);
                if (isnan(ref[r][i]) != isnan(got[r][i]) || d > tol) {
                    ok = 0;
                    worst = r;
                    wd = d;
                    wt = tol;
                    printf("  %s [%s] result %d[%lld]: gpu %.17g cpu %.17g\n", gc->text, strategy_names[s], r,
                           (long long)i, got[r][i], ref[r][i]);
                }
            }
        }
        CHECK(ok, "%s: %s [%s]: result %d differs by %g (tolerance %g)", label, gc->text, strategy_names[s],
              worst, wd, wt);
        /* the same input, strategy and device: the same bits */
        if (!eval(ctx, RED_DEVICE_GPU, s, gc->text, b, nb, again, na, &nagain)) {
            int same = nagain == ngot;
            for (int r = 0; same && r < ngot; r++)
                same = na[r] == ng[r] && memcmp(again[r], got[r], (size_t)ng[r] * sizeof(double)) == 0;
            CHECK(same, "%s: %s [%s]: two runs differ", label, gc->text, strategy_names[s]);
            for (int r = 0; r < nagain; r++) free(again[r]);
        }
        for (int r = 0; r < ngot; r++) free(got[r]);
    }
    for (int r = 0; r < nr; r++) free(ref[r]);
    for (int r = 0; r < nm; r++) free(mag[r]);
}

static void sizes(red_ctx *ctx, int max_log2)
{
    static const gcase cases[] = {
        {"sum(x)", "sum(abs(x))"},
        {"sum(f64(x))", "sum(abs(f64(x)))"},
        {"max(abs(x - y))", NULL},
        {"sum(x * y)", "sum(abs(x * y))"},
        {"sum(x), sum(x * x), max(abs(x))", "sum(abs(x)), sum(x * x), max(abs(x))"},
        {"argmax(x), argmin(y)", NULL},
        {"count(x > y)", NULL},
        {"sum(i32(x * 100))", NULL},
    };
    int64_t ns[] = {0, 1, 31, 1000, 65537, (1 << 20) + 3, (1 << 24) + 1, 1ll << 26, 1ll << 28};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int64_t n = ns[k];
        if (n > (1ll << max_log2)) continue;
        float *x = malloc((size_t)(n ? n : 1) * 4), *y = malloc((size_t)(n ? n : 1) * 4);
        for (int64_t i = 0; i < n; i++) {
            x[i] = (float)(urand() * 2 - 1);
            y[i] = (float)(urand() * 2 - 1);
        }
        red_binding b[2] = {{"x", {0}}, {"y", {0}}};
        red_array_init(&b[0].array, x, RED_F32, 1, &n, NULL);
        red_array_init(&b[1].array, y, RED_F32, 1, &n, NULL);
        char label[64];
        snprintf(label, sizeof label, "n=%lld", (long long)n);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            if (n == 0 && strstr(cases[c].text, "arg")) continue;   /* an error on both: tested elsewhere */
            compare(ctx, &cases[c], b, 2, label);
        }
        free(x);
        free(y);
        printf("sizes: n=%lld done\n", (long long)n);
    }
}

static void layouts(red_ctx *ctx, int max_log2)
{
    /* rows, columns, a transposed view, short rows, CSR ranges, keys */
    int64_t r = max_log2 >= 28 ? 16384 : 2048, c = r;
    float *A = malloc((size_t)(r * c) * 4);
    for (int64_t i = 0; i < r * c; i++) A[i] = (float)(urand() - 0.5);
    red_binding b[4];
    int64_t sh[2] = {r, c}, tst[2] = {1, r};
    b[0].name = "A";
    red_array_init(&b[0].array, A, RED_F32, 2, sh, NULL);
    static const gcase mats[] = {
        {"sum(A[i,j]) over j", "sum(abs(A[i,j])) over j"},
        {"sum(A[i,j]) over i", "sum(abs(A[i,j])) over i"},
        {"max(A[i,j]) over j", NULL},
        {"argmax(A[i,j]) over i", NULL},
    };
    for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++) compare(ctx, &mats[k], b, 1, "square");
    red_array_init(&b[0].array, A, RED_F32, 2, sh, tst);   /* the transpose, as strides */
    for (size_t k = 0; k < 2; k++) compare(ctx, &mats[k], b, 1, "transposed");
    int64_t sh8[2] = {r * c / 8, 8};
    red_array_init(&b[0].array, A, RED_F32, 2, sh8, NULL);
    compare(ctx, &mats[0], b, 1, "rows of 8");
    printf("layouts: matrices done\n");

    /* CSR rows of random length 0..50 over r*c values, and the same as keys */
    int64_t nv = r * c;
    int64_t nrow = 0, cap = nv / 10 + 2;
    int64_t *ptr = malloc((size_t)cap * 8);
    int32_t *seg = malloc((size_t)nv * 4);
    ptr[0] = 0;
    while (ptr[nrow] < nv && nrow + 1 < cap) {
        int64_t len = (int64_t)(urand() * 51);
        int64_t end = ptr[nrow] + len < nv ? ptr[nrow] + len : nv;
        for (int64_t i = ptr[nrow]; i < end; i++) seg[i] = (int32_t)nrow;
        ptr[nrow + 1] = end;
        nrow++;
    }
    nv = ptr[nrow];
    int64_t np1 = nrow + 1;
    b[0].name = "v";
    red_array_init(&b[0].array, A, RED_F32, 1, &nv, NULL);
    b[1].name = "ptr";
    red_array_init(&b[1].array, ptr, RED_I64, 1, &np1, NULL);
    b[2].name = "seg";
    red_array_init(&b[2].array, seg, RED_I32, 1, &nv, NULL);
    static const gcase segs[] = {
        {"sum(v[k]) over k in ptr[r]..ptr[r+1]", "sum(abs(v[k])) over k in ptr[r]..ptr[r+1]"},
        {"sum(v[i]) by seg[i]", "sum(abs(v[i])) by seg[i]"},
        {"max(v[i]) by seg[i], count(true) by seg[i]", NULL},
    };
    for (size_t k = 0; k < sizeof segs / sizeof segs[0]; k++) compare(ctx, &segs[k], b, 3, "segments");
    printf("layouts: segments done\n");

    /* few long segments (auto splits each one over many blocks): one, then
     * three, as CSR ranges and as keys */
    for (int nseg = 1; nseg <= 3; nseg += 2) {
        np1 = nseg + 1;
        for (int q = 0; q <= nseg; q++) ptr[q] = nv * q / nseg;
        for (int q = 0; q < nseg; q++)
            for (int64_t i = ptr[q]; i < ptr[q + 1]; i++) seg[i] = q;
        red_array_init(&b[1].array, ptr, RED_I64, 1, &np1, NULL);
        char label[32];
        snprintf(label, sizeof label, "%d long segment%s", nseg, nseg > 1 ? "s" : "");
        for (size_t k = 0; k < sizeof segs / sizeof segs[0]; k++) compare(ctx, &segs[k], b, 3, label);
    }
    printf("layouts: long segments done\n");

    /* an ordered operator (an affine map mod p: not commutative) over
     * columns and over one long range: the split strategies keep the order */
#define AFF "ordered op aff(f, g) = ((f.0*g.0) % 1000003, (g.0*f.1 + g.1) % 1000003) identity (1, 0)\n"
    {
        int64_t mr = r / 4, mc = c / 4, mn = mr * mc, one[2] = {0, mn}, two = 2;
        int64_t *M = malloc((size_t)mn * 8);
        for (int64_t i = 0; i < mn; i++) M[i] = 1 + (int64_t)(urand() * 1000002);
        red_binding o[2];
        int64_t msh[2] = {mr, mc};
        o[0].name = "M";
        red_array_init(&o[0].array, M, RED_I64, 2, msh, NULL);
        o[1].name = "ptr";
        red_array_init(&o[1].array, one, RED_I64, 1, &two, NULL);
        static const gcase ord[] = {
            {AFF "reduce(aff, (M[i,j], M[i,j] % 7)) over i", NULL},
            {AFF "reduce(aff, (M[i,j], M[i,j] % 7)) over j", NULL},
        };
        for (size_t k = 0; k < 2; k++) compare(ctx, &ord[k], o, 1, "ordered, matrix");
        /* and over one long run of sorted keys (a keyed pass split by blocks) */
        int32_t *kz = calloc((size_t)mn, 4);
        o[1].name = "kz";
        red_array_init(&o[1].array, kz, RED_I32, 1, &mn, NULL);
        o[0].name = "w";
        red_array_init(&o[0].array, M, RED_I64, 1, &mn, NULL);
        static const gcase ordk = {
            AFF "reduce(aff, (w[i], w[i] % 7)) by kz[i]", NULL};
        if (kz) compare(ctx, &ordk, o, 2, "ordered, one key");
        free(kz);
        o[1].name = "ptr";
        red_array_init(&o[1].array, one, RED_I64, 1, &two, NULL);
        o[0].name = "w";
        red_array_init(&o[0].array, M, RED_I64, 1, &mn, NULL);
        static const gcase ordr = {
            AFF "reduce(aff, (w[k], w[k] % 7)) over k in ptr[r]..ptr[r+1]", NULL};
        compare(ctx, &ordr, o, 2, "ordered, one range");
        free(M);
    }
#undef AFF
    printf("layouts: ordered done\n");
    free(ptr);
    free(seg);
    free(A);
}

/* The driver calls the tests make themselves (device memory to use in
 * place, a stream), from libcuda, looked up once; 0 where it is missing. */
static struct {
    void *h;
    int (*memalloc)(unsigned long long *, size_t);
    int (*htod)(unsigned long long, const void *, size_t);
    int (*memfree)(unsigned long long);
} drv;

static int drv_load(void)
{
    if (!drv.h && (drv.h = dlopen("libcuda.so.1", RTLD_NOW)) != NULL) {
        *(void **)&drv.memalloc = dlsym(drv.h, "cuMemAlloc_v2");
        *(void **)&drv.htod = dlsym(drv.h, "cuMemcpyHtoD_v2");
        *(void **)&drv.memfree = dlsym(drv.h, "cuMemFree_v2");
    }
    return drv.h && drv.memalloc && drv.htod && drv.memfree;
}

/* Inputs in device memory, through the driver API loaded here. */
static void device_inputs(red_ctx *ctx)
{
    if (!drv_load()) return;
    int64_t n = 1000003;
    float *x = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = (float)urand();
    unsigned long long d = 0;
    /* the context exists: red_gpu_available made it current on this thread */
    CHECK(drv.memalloc(&d, (size_t)n * 4) == 0 && drv.htod(d, x, (size_t)n * 4) == 0,
          "device allocation for the in-place test");
    if (d) {
        red_binding hb = {"x", {0}}, db = {"x", {0}};
        red_array_init(&hb.array, x, RED_F32, 1, &n, NULL);
        red_array_init(&db.array, (void *)(uintptr_t)d, RED_F32, 1, &n, NULL);
        db.array.memory = RED_MEM_CUDA;
        double hv = 0, dv = 0;
        red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_GPU);
        red_set_option(ctx, RED_OPT_STRATEGY, RED_STRATEGY_AUTO);
        int rc1 = red_eval_f64(ctx, "sum(x)", &hb, 1, &hv), rc2 = red_eval_f64(ctx, "sum(x)", &db, 1, &dv);
        CHECK(rc1 == 0 && rc2 == 0 && hv == dv, "device input: host %.9g (%d), device %.9g (%d): %s", hv, rc1, dv,
              rc2, red_errmsg(ctx));
        /* results left on the device, on a stream of the caller's */
        int (*streamcreate)(void **, unsigned) = (int (*)(void **, unsigned))dlsym(drv.h, "cuStreamCreate");
        void *stream = NULL;
        CHECK(streamcreate && streamcreate(&stream, 0) == 0, "cuStreamCreate");
        red_expr *e;
        red_prepare(ctx, "sum(x), (max(x[i]) over i), x[i] * 2", &e);
        red_expr_set_option(e, RED_OPT_RESULTS, RED_RESULTS_DEVICE);
        red_expr_set_stream(e, stream);
        red_bind_array(e, "x", &db.array);
        int rr = red_run(e), rs = red_sync(e);
        red_array r0, r2;
        double s0 = 0;
        int ok = rr == 0 && rs == 0 && red_result(e, 0, &r0, NULL) == 0 && red_result(e, 2, &r2, NULL) == 0 &&
                 r0.memory == RED_MEM_CUDA && r2.memory == RED_MEM_CUDA && red_result_f64(e, 0, &s0) == 0;
        CHECK(ok && s0 == hv, "device results on a stream: sum %.9g (host run %.9g): %s", s0, hv, red_expr_errmsg(e));
        if (ok) {
            float *back = malloc((size_t)n * 4);
            red_array hb2;
            red_array_init(&hb2, back, RED_F32, 1, &n, NULL);
            int same = red_result_copy(e, 2, &hb2) == 0;
            for (int64_t i = 0; same && i < n; i++) same = back[i] == x[i] * 2;
            CHECK(same, "a device array result copied back equals x * 2");
            red_array det;
            int rd = red_result_detach(e, 2, &det);
            CHECK(rd == 0 && det.memory == RED_MEM_CUDA, "detach hands over device memory (%d)", rd);
            if (rd == 0) red_device_free(ctx, det.data);
            free(back);
        }
        red_finalize(e);
        red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
        int rc3 = red_eval_f64(ctx, "sum(x)", &db, 1, &dv);
        CHECK(rc3 == RED_ERR_BIND, "a device array on the CPU backend is refused (got %d)", rc3);
        drv.memfree(d);
    }
    free(x);
}

/* Row reductions over views: rows whose pitch keeps every row on 16 bytes
 * take 16-byte loads under auto (rj_seg1v, rj_segnv for a thread's rows of
 * 16 vectors or more, rj_seg32v, and from 4096 elements rj_segbv), with a scalar tail
 * where the row length is not a multiple of the vector; other pitches take
 * the scalar kernels.  Every strategy against the CPU (compare). */
static void row_views(red_ctx *ctx)
{
    static const gcase cases[] = {
        {"sum(A[i,j]) over j", "sum(abs(A[i,j])) over j"},
        {"max(abs(A[i,j])) over j", NULL},
        {"argmax(A[i,j]) over j", NULL},
        {"sum(A[i,j] * A[i,j]) over j", "sum(A[i,j] * A[i,j]) over j"},
        /* a row map in the reduction's kernel (rj_epilogue), over 16-byte
         * vectors where the rows start on 16 bytes (epi_out_v), with a tail */
        {"m = max(A[i,j]) over j; s = sum(exp(A[i,j] - m)) over j; P[i,j] = exp(A[i,j] - m) / s",
         "m = max(A[i,j]) over j; s = sum(exp(A[i,j] - m)) over j; P[i,j] = exp(A[i,j] - m) / s + 0.001"},
    };
    static const int64_t shapes[][3] = {   /* rows, columns, pitch */
        {5000, 1001, 1024}, {3000, 1001, 1001}, {100003, 8, 8}, {100003, 7, 8}, {77, 20000, 20004}, {4, 4, 4},
        {33, 4099, 4100}, {200, 6000, 6004}, {9000, 4096, 4096}, {3, 5001, 5004},
        /* rows of a few vectors (a thread a row), of 16 (rj_segnv, 4 lanes a row),
         * and of a warp's, some with a tail */
        {60001, 10, 12}, {30000, 13, 16}, {50000, 24, 24}, {20000, 64, 64}, {7, 12, 12}, {20000, 100, 104},
        {20000, 203, 204}, {5000, 500, 508},
        /* few long rows: chunks of each, a block a chunk (rj_splitbv), one with a tail */
        {5, 40001, 40004}, {9, 65536, 65536}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int64_t rows = shapes[k][0], cols = shapes[k][1], pitch = shapes[k][2];
        float *A = malloc((size_t)(rows * pitch) * 4);
        for (int64_t i = 0; i < rows * pitch; i++) A[i] = (float)(urand() * 2 - 1);
        int64_t sh[2] = {rows, cols}, st[2] = {pitch, 1};
        red_binding b = {"A", {0}};
        red_array_init(&b.array, A, RED_F32, 2, sh, st);
        char label[96];
        snprintf(label, sizeof label, "rows %lld x %lld, pitch %lld", (long long)rows, (long long)cols, (long long)pitch);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) compare(ctx, &cases[c], &b, 1, label);
        free(A);
    }
    printf("row views done\n");
}

/* Device arrays at each alignment and at a stride: full reductions take
 * 16-byte loads (rj_persistv) where every array has stride 1 and its first
 * element on 16 bytes, scalar loads otherwise.  Each result against the CPU
 * on the same elements (host copies), under auto and persistent; x and y
 * start at different offsets, so some runs mix an aligned array with one
 * that is not. */
static void device_offsets(red_ctx *ctx)
{
    if (!drv_load()) return;
    int64_t n = (1 << 20) + 37, m = n + 8;
    float *x = malloc((size_t)m * 4);
    double *z = malloc((size_t)m * 8);
    for (int64_t i = 0; i < m; i++) {
        x[i] = (float)(urand() * 2 - 1);
        z[i] = urand() * 2 - 1;
    }
    unsigned long long dx = 0, dz = 0;
    CHECK(drv.memalloc(&dx, (size_t)m * 4) == 0 && drv.memalloc(&dz, (size_t)m * 8) == 0 &&
              drv.htod(dx, x, (size_t)m * 4) == 0 && drv.htod(dz, z, (size_t)m * 8) == 0,
          "device allocations for the alignment test");
    static const gcase cases[] = {
        {"sum(x)", "sum(abs(x))"},
        {"sum(x * y)", "sum(abs(x * y))"},
        {"max(abs(x - y))", NULL},
        {"argmax(x), argmin(y)", NULL},
        {"sum(x), sum(x * x)", "sum(abs(x)), sum(x * x)"},
        {"sum(z * f64(x))", "sum(abs(z * f64(x)))"},
        {"sum(z)", "sum(abs(z))"},
    };
    /* offsets in elements of x and y (floats) and z (doubles); the last
     * row reads every second element */
    static const int offs[][4] = {{0, 0, 0, 1}, {1, 0, 1, 1}, {2, 4, 0, 1}, {3, 3, 1, 1}, {4, 1, 2, 1}, {4, 4, 2, 1},
                                  {0, 0, 0, 2}};
    for (size_t k = 0; dx && dz && k < sizeof offs / sizeof offs[0]; k++) {
        int64_t st = offs[k][3], len = (n - 4) / st, strides[1] = {st};
        red_binding hb[3] = {{"x", {0}}, {"y", {0}}, {"z", {0}}}, db[3] = {{"x", {0}}, {"y", {0}}, {"z", {0}}};
        red_array_init(&hb[0].array, x + offs[k][0], RED_F32, 1, &len, strides);
        red_array_init(&hb[1].array, x + offs[k][1], RED_F32, 1, &len, strides);
        red_array_init(&hb[2].array, z + offs[k][2], RED_F64, 1, &len, strides);
        red_array_init(&db[0].array, (void *)(uintptr_t)(dx + 4ull * offs[k][0]), RED_F32, 1, &len, strides);
        red_array_init(&db[1].array, (void *)(uintptr_t)(dx + 4ull * offs[k][1]), RED_F32, 1, &len, strides);
        red_array_init(&db[2].array, (void *)(uintptr_t)(dz + 8ull * offs[k][2]), RED_F64, 1, &len, strides);
        for (int i = 0; i < 3; i++) db[i].array.memory = RED_MEM_CUDA;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            double *ref[4], *mag[4], *got[4];
            int64_t nref[4], nmag[4], ngot[4];
            int nr = 0, nm = 0, ng = 0;
            if (eval(ctx, RED_DEVICE_CPU, RED_STRATEGY_AUTO, cases[c].text, hb, 3, ref, nref, &nr)) {
                CHECK(0, "offsets: %s on the CPU", cases[c].text);
                continue;
            }
            if (cases[c].mag && eval(ctx, RED_DEVICE_CPU, RED_STRATEGY_AUTO, cases[c].mag, hb, 3, mag, nmag, &nm)) nm = 0;
            static const int strat[2] = {RED_STRATEGY_AUTO, RED_STRATEGY_PERSISTENT};
            for (int s = 0; s < 2; s++) {
                if (eval(ctx, RED_DEVICE_GPU, strat[s], cases[c].text, db, 3, got, ngot, &ng)) {
                    CHECK(0, "offsets %d/%d/%d stride %d: %s [%s] failed", offs[k][0], offs[k][1], offs[k][2],
                          offs[k][3], cases[c].text, strategy_names[strat[s]]);
                    continue;
                }
                int ok = ng == nr;
                for (int r = 0; ok && r < nr; r++) {
                    double tol = cases[c].mag && r < nm ? 2e-5 * fabs(mag[r][0]) + 1e-30 : 0;
                    ok = ngot[r] == 1 && nref[r] == 1 && fabs(got[r][0] - ref[r][0]) <= tol;
                    if (!ok) printf("  result %d: gpu %.17g cpu %.17g\n", r, got[r][0], ref[r][0]);
                }
                CHECK(ok, "offsets %d/%d/%d stride %d: %s [%s] equals the CPU's", offs[k][0], offs[k][1], offs[k][2],
                      offs[k][3], cases[c].text, strategy_names[strat[s]]);
                for (int r = 0; r < ng; r++) free(got[r]);
            }
            for (int r = 0; r < nr; r++) free(ref[r]);
            for (int r = 0; r < nm; r++) free(mag[r]);
        }
    }
    if (dx) drv.memfree(dx);
    if (dz) drv.memfree(dz);
    free(x);
    free(z);
    printf("device offsets done\n");
}

/* Keys whose count changes between runs on the same arrays: the last pass
 * of a keyed reduction may take the count from the run before and lets the
 * kernel check it (a wrong guess reruns the plan).  Each run's results must
 * equal the CPU's, in length and value, whatever the guess was; so must a
 * run whose keys stopped being sorted. */
static void key_count_changes(red_ctx *ctx)
{
    int64_t n = 100000;
    float *v = malloc((size_t)n * 4);
    int32_t *seg = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(urand() * 2 - 1);
    red_binding b[2] = {{"v", {0}}, {"seg", {0}}};
    red_array_init(&b[0].array, v, RED_F32, 1, &n, NULL);
    red_array_init(&b[1].array, seg, RED_I32, 1, &n, NULL);
    /* the last key (the count less one) run by run; 0: unsorted keys */
    const int32_t lasts[] = {99, 99, 149, 49, 0, 99, 5000};
    for (size_t r = 0; r < sizeof lasts / sizeof lasts[0]; r++) {
        for (int64_t i = 0; i < n; i++)
            seg[i] = lasts[r] ? (int32_t)(i * (lasts[r] + 1) / n) : (int32_t)(urand() * 300);
        double *go[1] = {0}, *co[1] = {0};
        int64_t gn[1] = {0}, cn[1] = {0};
        int gr = 0, cr = 0;
        int rg = eval(ctx, RED_DEVICE_GPU, RED_STRATEGY_AUTO, "sum(v[i]) by seg[i]", b, 2, go, gn, &gr);
        int rc = eval(ctx, RED_DEVICE_CPU, RED_STRATEGY_AUTO, "sum(v[i]) by seg[i]", b, 2, co, cn, &cr);
        int ok = rg == 0 && rc == 0 && gr == 1 && cr == 1 && gn[0] == cn[0];
        for (int64_t k = 0; ok && k < gn[0]; k++) ok = fabs(go[0][k] - co[0][k]) <= 1e-3;
        CHECK(ok, "keys with last key %d (run %zu): %lld results on the GPU, %lld on the CPU", (int)lasts[r], r,
              (long long)gn[0], (long long)cn[0]);
        free(go[0]);
        free(co[0]);
    }
    free(v);
    free(seg);
}

/* One process's share of the disk-cache test: evaluate a few expressions
 * no other test uses and report how many kernels it compiled. */
/* RED_OPT_TIMINGS: the kernel phase is timed with events only when asked. */
static void timings(red_ctx *ctx)
{
    int64_t n = 1 << 20;
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 7) - 3.0f;
    red_expr *e = NULL;
    CHECK(red_prepare(ctx, "sum(x)", &e) == RED_OK, "timings: prepare");
    red_array a;
    red_array_init(&a, x, RED_F32, 1, &n, NULL);
    red_bind_array(e, "x", &a);
    red_expr_set_option(e, RED_OPT_DEVICE, RED_DEVICE_GPU);
    for (int on = 0; on <= 1; on++) {
        red_expr_set_option(e, RED_OPT_TIMINGS, on);
        red_timings t = {0};
        int rc = red_run(e);
        if (rc == RED_OK) rc = red_last_timings(e, &t);
        CHECK(rc == RED_OK, "timings: run: %s", red_expr_errmsg(e));
        CHECK(on ? t.kernel_ms > 0 : t.kernel_ms == 0 && t.upload_ms == 0 && t.download_ms == 0,
              "timings: RED_OPT_TIMINGS %d gave kernel %g ms, upload %g, download %g", on, t.kernel_ms,
              t.upload_ms, t.download_ms);
    }
    CHECK(red_set_option(ctx, RED_OPT_TIMINGS, 2) == RED_ERR_ARG, "timings: 2 is refused");
    red_finalize(e);
    free(x);
}

static int cache_child(void)
{
    red_ctx *ctx;
    red_open(&ctx);
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_GPU);
    float x[100];
    for (int i = 0; i < 100; i++) x[i] = (float)i;
    int64_t n = 100;
    red_binding b = {"x", {0}};
    red_array_init(&b.array, x, RED_F32, 1, &n, NULL);
    const char *ex[] = {"sum(x * 1.25)", "max(x - 3.5)", "sum(x[i] * x[i]) over i"};
    for (int k = 0; k < 3; k++) {
        double v;
        if (red_eval_f64(ctx, ex[k], &b, 1, &v)) {
            printf("cache child: %s\n", red_errmsg(ctx));
            return 100;
        }
    }
    red_cache_info ci;
    red_cache_stats(ctx, &ci);
    red_close(ctx);
    printf("cache child: %lld compiled, %lld from disk\n", ci.compiles, ci.disk_hits);
    return ci.compiles > 50 ? 50 : (int)ci.compiles;
}

static int run_child(const char *self, const char *dir)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("REDJIT_CACHE_DIR", dir, 1);
        setenv("REDJIT_CACHE", "1", 1);
        execl(self, self, "--cache-child", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 126;
}

/* --huge: more than 2^32 elements (64-bit indexing), more than 4 GiB in one
 * array.  The arrays are copied to device memory once and bound there; the
 * CPU executor computes the references from the host copies.  b: 2^32 + 2^20
 * + 3 bools (4 GiB), every third true; h: as many f16 values k/16. */
static uint16_t half_of(float f)   /* exact for the normal values used here */
{
    if (f == 0) return 0;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(((u >> 16) & 0x8000) | ((((u >> 23) & 0xff) - 127 + 15) << 10) | ((u >> 13) & 0x3ff));
}

static void huge(red_ctx *ctx)
{
    const int64_t n = ((int64_t)1 << 32) + (1 << 20) + 3;
    unsigned char *b = malloc((size_t)n);
    uint16_t *h = malloc((size_t)n * 2);
    void *db = NULL, *dh = NULL;
    if (!b || !h || red_device_alloc(ctx, (size_t)n, &db) || red_device_alloc(ctx, (size_t)n * 2, &dh)) {
        CHECK(0, "huge: cannot allocate 12 GiB of host and device memory: %s", red_errmsg(ctx));
        free(b);
        free(h);
        if (db) red_device_free(ctx, db);
        return;
    }
    uint16_t hv[16];
    for (int k = 0; k < 16; k++) hv[k] = half_of((float)k / 16);
    for (int64_t i = 0; i < n; i++) {
        b[i] = i % 3 == 0;
        h[i] = hv[i & 15];
    }
    CHECK(red_memcpy(ctx, db, RED_MEM_CUDA, b, RED_MEM_HOST, (size_t)n) == RED_OK &&
          red_memcpy(ctx, dh, RED_MEM_CUDA, h, RED_MEM_HOST, (size_t)n * 2) == RED_OK, "huge: copies to the device");
    red_binding host[2], dev[2];
    host[0].name = dev[0].name = "b";
    host[1].name = dev[1].name = "h";
    red_array_init(&host[0].array, b, RED_BOOL, 1, &n, NULL);
    red_array_init(&host[1].array, h, RED_F16, 1, &n, NULL);
    dev[0] = host[0];
    dev[1] = host[1];
    dev[0].array.data = db;
    dev[1].array.data = dh;
    dev[0].array.memory = dev[1].array.memory = RED_MEM_CUDA;
    static const gcase cases[] = {
        {"count(b)", NULL},
        {"max(b[i] ? i : -1) over i", NULL},
        {"argmax(h)", NULL},
        {"sum(h)", "sum(abs(h))"},
        {"sum(h[i]) by i % 5", "sum(abs(h[i])) by i % 5"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double *ref[8], *mag[8];
        int64_t nref[8], nmag[8];
        int nr = 0, nm = 0;
        if (eval(ctx, RED_DEVICE_CPU, RED_STRATEGY_AUTO, cases[c].text, host, 2, ref, nref, &nr)) {
            CHECK(0, "huge: %s on the CPU", cases[c].text);
            continue;
        }
        if (cases[c].mag) eval(ctx, RED_DEVICE_CPU, RED_STRATEGY_AUTO, cases[c].mag, host, 2, mag, nmag, &nm);
        for (int s = 0; s < 5; s++) {
            double *got[8];
            int64_t ng[8];
            int ngot = 0;
            if (eval(ctx, RED_DEVICE_GPU, s, cases[c].text, dev, 2, got, ng, &ngot)) {
                CHECK(0, "huge: %s [%s] failed on the GPU", cases[c].text, strategy_names[s]);
                continue;
            }
            int ok = ngot == nr && ng[0] == nref[0];
            for (int64_t i = 0; ok && i < nref[0]; i++) {
                double tol = nm ? 2e-5 * fabs(mag[0][i]) : 0;
                if (fabs(got[0][i] - ref[0][i]) > tol) {
                    ok = 0;
                    printf("  huge: %s [%s] [%lld]: gpu %.17g cpu %.17g (tolerance %g)\n", cases[c].text,
                           strategy_names[s], (long long)i, got[0][i], ref[0][i], tol);
                }
            }
            CHECK(ok, "huge: %s [%s] over %lld elements", cases[c].text, strategy_names[s], (long long)n);
            for (int r = 0; r < ngot; r++) free(got[r]);
        }
        for (int r = 0; r < nr; r++) free(ref[r]);
        for (int r = 0; r < nm; r++) free(mag[r]);
    }
    red_device_free(ctx, db);
    red_device_free(ctx, dh);
    free(b);
    free(h);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--cache-child") == 0) return cache_child();
    int max_log2 = 28, only_huge = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--max-log2") == 0 && i + 1 < argc) max_log2 = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--huge") == 0) only_huge = 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    red_ctx *ctx;
    red_open(&ctx);
    if (!red_gpu_available(ctx)) {
        printf("test_gpu: no GPU (%s): skipped\n", red_errmsg(ctx));
        red_close(ctx);
        return 77;
    }
    if (only_huge) {
        huge(ctx);
        red_close(ctx);
        printf("%ld passed, %ld failed\n", npass, nfail);
        return nfail ? 1 : 0;
    }
    sizes(ctx, max_log2);
    layouts(ctx, max_log2);
    device_inputs(ctx);
    device_offsets(ctx);
    row_views(ctx);
    key_count_changes(ctx);
    timings(ctx);
    red_close(ctx);

    char dir[] = "/tmp/redjit-cache-XXXXXX";
    if (mkdtemp(dir)) {
        int first = run_child(argv[0], dir), second = run_child(argv[0], dir);
        CHECK(first > 0 && first < 100, "first process compiled its kernels (%d)", first);
        CHECK(second == 0, "second process found every kernel on disk (compiled %d)", second);
    }
    printf("%ld passed, %ld failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
