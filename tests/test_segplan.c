/*
 * test_segplan.c -- the GPU backend's choice of kernel for segmented
 * reductions, checked without a GPU: gpu_choose_segments (thread, warp, or a
 * split of each output into chunks) on the benchmark's layouts for an H200's
 * 132 multiprocessors, and gpu_column_layout on plans built and generated
 * from expressions with row-major and transposed matrices; and, in the
 * generated source, where ranged subscripts are checked (once an output in
 * out_range, or at every element in acc_elem) and how many loads a thread
 * issues at once (RJ_UNROLL).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "codegen/cuda.h"
#include "parser/ast.h"
#include "gpu/gpu.h"

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
    /* a block where rows of 4096 or more take 16-byte loads (rj_segbv) */
    CHECK(!gpu_choose_segments(n26 / 1024, n26, 0, 132).long_rows, "rows of 1024: a warp");
    CHECK(gpu_choose_segments(16384, n28, 0, 132).long_rows, "row sums 16384 x 16384: a block");
    CHECK(gpu_choose_segments(33, 33 * 4099, 0, 132).long_rows, "33 rows of 4099: a block");
    CHECK(!gpu_choose_segments(33, 33 * 4095, 0, 132).long_rows, "33 rows of 4095: a warp");
}

typedef struct arr {
    const char *name;
    red_dtype dtype;
    int ndim;
    int64_t shape[2], strides[2];
} arr;

/* gpu_column_layout of pass `pass` of `text` with these arrays; with `src`,
 * a copy of the pass's generated source there instead (the caller frees it),
 * and 1. */
static int generate(const char *text, const arr *a, int na, int pass, char **src)
{
    util_arena ar;
    util_arena_init(&ar);
    util_diag d = {0};
    ast_program *prog = NULL;
    chk_binding b[4];
    core_buf bufs[4];
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
    if (ast_parse(&ar, text, &prog, &d, NULL) || chk_build(prog, b, na, NULL, &ar, &p, &d) || pass >= p->npasses ||
        cg_generate(p, pass, cg_tuning_get(), &ar, &k, &d)) {
        printf("FAIL: %s: %s\n", text, d.msg);
        nfail++;
    } else {
        if (src) {
            const char *t = util_buf_str(&k.src);
            *src = malloc(strlen(t) + 1);
            r = *src != NULL;
            if (r) strcpy(*src, t);
        } else {
            r = gpu_column_layout(&k, bufs);
        }
        util_buf_free(&k.src);
    }
    util_arena_free(&ar);
    return r;
}

static int layout_of(const char *text, const arr *a, int na, int pass)
{
    return generate(text, a, na, pass, NULL);
}

/* Whether generated function `fn` (from its name to the next line that is
 * only "}") contains `what`; -1 when there is no such function. */
static int in_function(const char *src, const char *fn, const char *what)
{
    const char *b = strstr(src, fn);
    const char *e = b ? strstr(b, "\n}\n") : NULL;
    if (!e) return -1;
    const char *w = strstr(b, what);
    return w && w < e;
}

/* Ranged subscripts of partial passes are checked once an output in
 * out_range, over the whole range, and not in acc_elem; such passes load 8
 * elements a thread.  Full reductions over a range, subscripts of another
 * form and keyed passes keep the per-element check (and 4). */
static void range_checks(void)
{
    arr v = {"v", RED_F32, 1, {1000, 0}, {1, 0}};
    arr ptr = {"ptr", RED_I64, 1, {301, 0}, {1, 0}};
    arr x = {"x", RED_F64, 1, {50, 0}, {1, 0}};
    arr col = {"col", RED_I64, 1, {1000, 0}, {1, 0}};
    arr vp[2] = {v, ptr}, vpxc[4] = {v, ptr, x, col};
    const struct {
        const char *text;
        int hoisted, elem_check, unroll;
        arr *a;
        int na;
    } t[] = {
        {"sum(v[k]) over k in ptr[r]..ptr[r+1]", 1, 0, 8, vp, 2},
        {"max(v[k+1]) over k in ptr[r]..ptr[r+1]", 1, 0, 8, vp, 2},
        {"sum(v[k-1]) over k in ptr[r]..ptr[r+1]", 0, 1, 4, vp, 2},
        {"sum(v[2*k]) over k in ptr[r]..ptr[r+1]", 0, 1, 4, vp, 2},
        /* col[k] is hoisted, x[col[k]] is not: a second load, so 4 */
        {"sum(v[k]*x[col[k]]) over k in ptr[r]..ptr[r+1]", 1, 1, 4, vpxc, 4},
        /* a full reduction: its kernels fold the host's count, not out_range's */
        {"sum(v[k]) over k in ptr[3]..ptr[7]", 0, 1, 4, vp, 2},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char *src = NULL;
        if (generate(t[i].text, t[i].a, t[i].na, 0, &src) != 1) continue;
        CHECK(in_function(src, "long long out_range(", "") == 1 && in_function(src, "void acc_elem(", "") == 1,
              "%s: out_range and acc_elem generated", t[i].text);
        CHECK(in_function(src, "long long out_range(", "a0 > n - sz[") == t[i].hoisted, "%s: out_range %s the range",
              t[i].text, t[i].hoisted ? "checks" : "does not check");
        CHECK(in_function(src, "void acc_elem(", "rj_check(") == t[i].elem_check,
              "%s: acc_elem %s a subscript per element", t[i].text, t[i].elem_check ? "checks" : "does not check");
        char want[32];
        snprintf(want, sizeof want, "#define RJ_UNROLL %d\n", t[i].unroll);
        CHECK(strstr(src, want) != NULL, "%s: %s", t[i].text, want);
        free(src);
    }
    /* two ranges: their product is held to 2^40 too */
    char *src = NULL;
    if (generate("count(v[k] > 0) over k in ptr[r]..ptr[r+1], j in ptr[r]..ptr[r+1]", vp, 2, 0, &src) == 1) {
        CHECK(strstr(src, "cnt > (1ll << 40) / sz[1]") != NULL, "the product of two ranges is bounded");
        free(src);
    }
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
    range_checks();
    printf("test_segplan: %d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
