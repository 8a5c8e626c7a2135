/*
 * test_results.c -- the host buffers of an expression's results across runs.
 * A large result's buffer (256 KiB and up) is kept for the next run of the
 * same expression, which writes a result of the same size into it instead
 * of new memory, and the GPU backend page-locks one of 4 MiB and up the
 * second time (copies into it are then asynchronous); what must hold:
 *   - every run's values are its own (row sums of freshly filled matrices,
 *     checked exactly: small integers in f32), whatever buffer they are in;
 *   - a result the caller took (red_eval, red_result_detach) is never
 *     written again: its values stay after later runs;
 *   - results that grow, shrink, or come two at a time are right;
 *   - a second run of the same shape reuses the buffer (the point of it).
 * On the CPU always (results of 512 KiB); on the GPU too where there is one
 * (8 MiB: page-locked from the second run on).
 * Run under valgrind (valgrind_results): a buffer freed or written twice is
 * an error there.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <redjit.h>

#include "check.h"

enum { COLS = 4, MAXROWS = 1 << 22 };

static float A[(size_t)MAXROWS * COLS];

/* A[r, c] = (r * 7 + c * 3 + seed) % 13: row sums are exact in f32. */
static void fill(int64_t rows, int seed)
{
    for (int64_t r = 0; r < rows; r++)
        for (int c = 0; c < COLS; c++) A[r * COLS + c] = (float)((r * 7 + c * 3 + seed) % 13);
}

static int row_sums_ok(const red_array *out, int64_t rows, int seed)
{
    if (out->dtype != RED_F32 || out->ndim != 1 || out->shape[0] != rows) return 0;
    const float *v = out->data;
    for (int64_t r = 0; r < rows; r++) {
        float s = 0;
        for (int c = 0; c < COLS; c++) s += (float)((r * 7 + c * 3 + seed) % 13);
        if (v[r * out->strides[0]] != s) return 0;
    }
    return 1;
}

static int row_max_ok(const red_array *out, int64_t rows, int seed)
{
    if (out->ndim != 1 || out->shape[0] != rows) return 0;
    const float *v = out->data;
    for (int64_t r = 0; r < rows; r++) {
        float m = 0;
        for (int c = 0; c < COLS; c++) {
            float a = (float)((r * 7 + c * 3 + seed) % 13);
            m = c == 0 || a > m ? a : m;
        }
        if (v[r * out->strides[0]] != m) return 0;
    }
    return 1;
}

static int bind_rows(red_expr *e, int64_t rows)
{
    red_array a;
    int64_t sh[2] = {rows, COLS};
    red_array_init(&a, A, RED_F32, 2, sh, NULL);
    return red_bind_array(e, "A", &a);
}

static void test_device(int device, const char *dev, int64_t R)
{
    red_ctx *ctx;
    if (red_open(&ctx) != RED_OK) {
        CHECK(0, "%s: red_open", dev);
        return;
    }
    red_set_option(ctx, RED_OPT_DEVICE, device);

    /* the same shape twice: the second run writes into the first's buffer */
    red_expr *e;
    if (red_prepare(ctx, "sum(A[i,j]) over j", &e) != RED_OK) {
        CHECK(0, "%s: prepare: %s", dev, red_errmsg(ctx));
        red_close(ctx);
        return;
    }
    red_array r1 = {0}, r2 = {0};
    fill(R, 1);
    int rc = bind_rows(e, R);
    if (!rc) rc = red_run(e);
    if (!rc) rc = red_result(e, 0, &r1, NULL);
    CHECK(!rc && row_sums_ok(&r1, R, 1), "%s: first run's row sums (%s)", dev, red_expr_errmsg(e));
    void *first = r1.data;
    fill(R, 2);
    rc = red_run(e);
    if (!rc) rc = red_result(e, 0, &r2, NULL);
    CHECK(!rc && row_sums_ok(&r2, R, 2), "%s: second run's row sums are its own", dev);
    CHECK(!rc && r2.data == first, "%s: the second run of one shape reuses the first's buffer", dev);

    /* detached: a copy the caller owns, untouched by the runs after it */
    red_array d = {0};
    rc = red_result_detach(e, 0, &d);
    CHECK(!rc && d.data != r2.data && row_sums_ok(&d, R, 2), "%s: red_result_detach copies", dev);
    fill(R, 3);
    rc = red_run(e);
    red_array r3 = {0};
    if (!rc) rc = red_result(e, 0, &r3, NULL);
    CHECK(!rc && row_sums_ok(&r3, R, 3) && row_sums_ok(&d, R, 2),
          "%s: a run after red_result_detach leaves the detached values alone", dev);
    red_free(d.data);

    /* taken: the result's own buffer, no copy; the next run writes a new one and leaves it alone */
    red_array t = {0}, r4 = {0}, gone = {0};
    rc = red_result_take(e, 0, &t);
    CHECK(!rc && t.data == r3.data && row_sums_ok(&t, R, 3), "%s: red_result_take hands over the result's buffer", dev);
    CHECK(red_result(e, 0, &gone, NULL) == RED_ERR_MISUSE, "%s: a taken result reads RED_ERR_MISUSE", dev);
    fill(R, 4);
    rc = red_run(e);
    if (!rc) rc = red_result(e, 0, &r4, NULL);
    CHECK(!rc && r4.data != t.data && row_sums_ok(&r4, R, 4) && row_sums_ok(&t, R, 3),
          "%s: the run after red_result_take writes a new buffer and leaves the taken one alone", dev);
    if (t.memory == RED_MEM_CUDA) red_device_free(ctx, t.data);
    else red_free(t.data);

    /* shrinking, then growing past the kept buffer */
    const int64_t sizes[] = {R / 2, R / 8, 2 * R, R};
    for (int k = 0; k < 4; k++) {
        fill(sizes[k], 10 + k);
        rc = bind_rows(e, sizes[k]);
        red_array r = {0};
        if (!rc) rc = red_run(e);
        if (!rc) rc = red_result(e, 0, &r, NULL);
        CHECK(!rc && row_sums_ok(&r, sizes[k], 10 + k), "%s: %lld rows after another size", dev,
              (long long)sizes[k]);
    }
    red_finalize(e);

    /* two large results of one run, twice */
    e = NULL;
    rc = red_prepare(ctx, "(sum(A[i,j]) over j), (max(A[i,j]) over j)", &e);
    CHECK(rc == RED_OK, "%s: prepare two results", dev);
    for (int k = 0; k < 3 && e; k++) {
        fill(R, 20 + k);
        rc = bind_rows(e, R);
        red_array s = {0}, m = {0};
        if (!rc) rc = red_run(e);
        if (!rc) rc = red_result(e, 0, &s, NULL);
        if (!rc) rc = red_result(e, 1, &m, NULL);
        CHECK(!rc && s.data != m.data && row_sums_ok(&s, R, 20 + k) && row_max_ok(&m, R, 20 + k),
              "%s: run %d of two results (%s)", dev, k, red_expr_errmsg(e));
    }
    red_finalize(e);

    /* red_eval hands its buffers over: the next call gets new ones */
    red_binding b = {"A", {0}};
    int64_t sh[2] = {R, COLS};
    red_array_init(&b.array, A, RED_F32, 2, sh, NULL);
    red_array o1 = {0}, o2 = {0};
    int n1 = 0, n2 = 0;
    fill(R, 30);
    rc = red_eval(ctx, "sum(A[i,j]) over j", &b, 1, &o1, 1, &n1);
    fill(R, 31);
    if (!rc) rc = red_eval(ctx, "sum(A[i,j]) over j", &b, 1, &o2, 1, &n2);
    CHECK(!rc && n1 == 1 && n2 == 1 && o1.data != o2.data && row_sums_ok(&o1, R, 30) && row_sums_ok(&o2, R, 31),
          "%s: red_eval's results are the caller's (%s)", dev, red_errmsg(ctx));
    if (device == RED_DEVICE_GPU && o1.memory == RED_MEM_CUDA) {
        red_device_free(ctx, o1.data);
        red_device_free(ctx, o2.data);
    } else {
        red_free(o1.data);
        red_free(o2.data);
    }
    red_close(ctx);
}

int main(void)
{
    test_device(RED_DEVICE_CPU, "cpu", 1 << 17);
    red_ctx *ctx;
    int gpu = 0;
    if (red_open(&ctx) == RED_OK) {
        gpu = red_gpu_available(ctx) && !getenv("REDJIT_FAKECUDA");
        red_close(ctx);
    }
    if (gpu) test_device(RED_DEVICE_GPU, "gpu", 1 << 21);
    else printf("no GPU: the CPU part only\n");
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
