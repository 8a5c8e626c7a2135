/*
 * test_segplan.c -- the GPU backend's choice of kernel for segmented
 * reductions, checked without a GPU: gpu_choose_segments (thread, warp, or a
 * split of each output into chunks) on the benchmark's layouts for an H200's
 * 132 multiprocessors, and gpu_column_layout on plans built and generated
 * from expressions with row-major and transposed matrices.
 */
#include <stdio.h>
#include <string.h>

#include "check/check.h"
#include "codegen/cuda.h"
#include "parser/ast.h"
#include "runtime/gpu.h"

#include "check.h"

static void choice(const char *what, long long nout, long long total, int columns, const char *kernel,
                   long long chunks)
{
    gpu_seg_choice c = gpu_choose_segments(nout, total, columns, 132);
    CHECK(strcmp(c.kernel, kernel) == 0 && c.chunks == chunks, "%s: %s with %lld chunks, want %s with %lld", what,
          c.kernel, c.chunks, kernel, chunks);
}

static void choices(void)
{
    long long n26 = 1ll << 26, n28 = 1ll << 28;
    choice("rows of 8", n28 / 8, n28, 0, "rj_seg1", 0);
    choice("CSR lengths 10..50", n26 / 30, n26, 0, "rj_seg1", 0);
    choice("CSR all length 3", n26 / 3, n26, 0, "rj_seg1", 0);
    choice("rows of 1024", n26 / 1024, n26, 0, "rj_seg32", 0);
    choice("row sums 16384 x 16384", 16384, n28, 0, "rj_seg32", 0);
    /* 2 x 132 x 2048 threads over 16384 columns: 33 chunks of 497 rows */
    choice("column sums 16384 x 16384", 16384, n28, 1, "rj_split1", 33);
    choice("column sums 2048 x 2048", 2048, 2048ll * 2048, 1, "rj_split1", 64);
    choice("one segment of 2^26", 1, n26, 0, "rj_splitb", 1056);
    choice("three segments of 2^26 / 3", 3, n26, 0, "rj_splitb", 352);
    choice("one segment of 2^20", 1, 1 << 20, 0, "rj_splitb", 256);
    choice("one short segment", 1, 1000, 0, "rj_seg32", 0);
    choice("two columns of 10^7 (too few for threads)", 2, 20000000, 1, "rj_splitb", 528);
    choice("columns of 40 (too short to split)", 100000, 4000000, 1, "rj_seg1", 0);
    gpu_seg_choice c = gpu_choose_segments(n26 / 1024, n26, 0, 132);
    CHECK(c.occupancy_grid == 1 && c.group == 32, "a warp per output runs on the occupancy grid");
    c = gpu_choose_segments(100, 800, 0, 132);
    CHECK(c.group == 1 && !c.occupancy_grid, "a thread per output");
}

typedef struct arr {
    const char *name;
    red_dtype dtype;
    int ndim;
    int64_t shape[2], strides[2];
} arr;

/* gpu_column_layout of pass `pass` of `text` with these arrays. */
static int layout_of(const char *text, const arr *a, int na, int pass)
{
    util_arena ar;
    util_arena_init(&ar);
    util_diag d = {0};
    ast_program *prog = NULL;
    chk_binding b[4];
    vm_buf bufs[4];
    memset(bufs, 0, sizeof bufs);
    for (int i = 0; i < na; i++) {
        b[i] = (chk_binding){a[i].name, 1, a[i].dtype, a[i].ndim, 0};
        bufs[i].dtype = a[i].dtype;
        bufs[i].ndim = a[i].ndim;
        bufs[i].name = a[i].name;
        for (int k = 0; k < a[i].ndim; k++) {
            bufs[i].shape[k] = a[i].shape[k];
            bufs[i].strides[k] = a[i].strides[k];
        }
    }
    plan *p = NULL;
    cg_kernel k;
    int r = -1;
    if (ast_parse(&ar, text, &prog, &d, NULL) || chk_build(prog, b, na, &ar, &p, &d) || pass >= p->npasses ||
        cg_generate(p, pass, &ar, &k, &d)) {
        printf("FAIL: %s: %s\n", text, d.msg);
        nfail++;
    } else {
        r = gpu_column_layout(&k, bufs);
        util_buf_free(&k.src);
    }
    util_arena_free(&ar);
    return r;
}

static void layouts(void)
{
    arr A = {"A", RED_F32, 2, {300, 200}, {200, 1}};
    arr At = {"A", RED_F32, 2, {300, 200}, {1, 300}};   /* the transpose of a 200 x 300 array */
    arr B = {"B", RED_F64, 2, {300, 200}, {200, 1}};
    arr u = {"u", RED_F32, 1, {300, 0}, {1, 0}};
    arr v = {"v", RED_F32, 1, {1000, 0}, {1, 0}};
    arr ptr = {"ptr", RED_I64, 1, {301, 0}, {1, 0}};
    CHECK(layout_of("sum(A[i,j]) over i", &A, 1, 0) == 1, "column sums of a row-major matrix are a column layout");
    CHECK(layout_of("sum(A[i,j]) over j", &A, 1, 0) == 0, "row sums are not");
    CHECK(layout_of("sum(A[i,j]) over j", &At, 1, 0) == 1, "row sums of a transposed view are");
    CHECK(layout_of("sum(A[i,j]) over i", &At, 1, 0) == 0, "column sums of a transposed view are not");
    arr AB[2] = {A, B};
    CHECK(layout_of("sum(A[i,j] * B[i,j]) over i", AB, 2, 0) == 1, "two matrices read by columns");
    arr Au[2] = {A, u};
    CHECK(layout_of("sum(A[i,j] * u[i]) over i", Au, 2, 0) == 0, "a vector along the reduced index is not");
    arr vp[2] = {v, ptr};
    CHECK(layout_of("sum(v[k]) over k in ptr[r]..ptr[r+1]", vp, 2, 0) == 0,
          "CSR ranges are not (their bounds are not element loads)");
    CHECK(layout_of("max(abs(A[i,j] - 1)) over i", &A, 1, 0) == 1, "an expression of one column load");
}

int main(void)
{
    choices();
    layouts();
    printf("test_segplan: %d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
