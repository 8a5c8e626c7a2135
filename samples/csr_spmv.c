/*
 * csr_spmv.c -- sparse matrix times vector, the matrix in CSR form (row pointers, column
 * indices, values):
 *     sum(v[k]*x[col[k]]) over k in ptr[r]..ptr[r+1]
 * For each row r the sum runs over that row's stored entries; x is gathered through col.
 * The matrix is random, with some empty rows (their sum is the identity, 0).  The one-call
 * interface allocates the result; the program releases it with red_free.
 */
#include <redjit.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { ROWS = 2000, COLS = 1500, MAX_PER_ROW = 40 };

static uint64_t rng = 42;
static uint32_t rnd(void)                  /* xorshift64*, upper half */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 0x2545f4914f6cdd1du) >> 32);
}

int main(void)
{
    int32_t *ptr = malloc((ROWS + 1) * sizeof *ptr);
    int32_t *col = malloc((size_t)ROWS * MAX_PER_ROW * sizeof *col);
    double *v = malloc((size_t)ROWS * MAX_PER_ROW * sizeof *v);
    double *x = malloc(COLS * sizeof *x);
    if (!ptr || !col || !v || !x) {
        fprintf(stderr, "csr_spmv: out of memory\n");
        return 1;
    }

    /* Build the matrix row by row: one row in eight is empty, the others hold 1..MAX_PER_ROW
     * entries in random columns (repeats allowed: CSR does not forbid them). */
    int nnz = 0, empty = 0;
    ptr[0] = 0;
    for (int r = 0; r < ROWS; r++) {
        int len = rnd() % 8 == 0 ? 0 : 1 + (int)(rnd() % MAX_PER_ROW);
        for (int t = 0; t < len; t++, nnz++) {
            col[nnz] = (int32_t)(rnd() % COLS);
            v[nnz] = (double)(int32_t)rnd() / 2147483648.0;       /* in [-1, 1) */
        }
        empty += len == 0;
        ptr[r + 1] = nnz;
    }
    for (int c = 0; c < COLS; c++)
        x[c] = 1.0 + (double)(rnd() % 1000) / 1000.0;

    red_ctx *ctx;
    int rc = red_open(&ctx);
    if (rc != RED_OK) {
        fprintf(stderr, "csr_spmv: red_open: %s\n", red_errstr(rc));
        return 1;
    }
    red_binding b[4] = {{.name = "ptr"}, {.name = "col"}, {.name = "v"}, {.name = "x"}};
    red_array_init(&b[0].array, ptr, RED_I32, 1, (const int64_t[]){ROWS + 1}, NULL);
    red_array_init(&b[1].array, col, RED_I32, 1, (const int64_t[]){nnz}, NULL);
    red_array_init(&b[2].array, v, RED_F64, 1, (const int64_t[]){nnz}, NULL);
    red_array_init(&b[3].array, x, RED_F64, 1, (const int64_t[]){COLS}, NULL);

    /* data == NULL: redjit allocates the result and describes it in y. */
    red_array y = {0};
    rc = red_eval(ctx, "sum(v[k]*x[col[k]]) over k in ptr[r]..ptr[r+1]", b, 4, &y, 1, NULL);
    if (rc != RED_OK) {
        fprintf(stderr, "csr_spmv: red_eval: %s\n%s\n", red_errstr(rc), red_errmsg(ctx));
        red_close(ctx);
        return 1;
    }
    red_close(ctx);                         /* y is ours now; it outlives the context */

    int status = 0;
    if (y.dtype != RED_F64 || y.ndim != 1 || y.shape[0] != ROWS) {
        fprintf(stderr, "csr_spmv: result is %s with %d dimensions, want f64 [%d]\n",
                red_dtype_name(y.dtype), y.ndim, ROWS);
        status = 1;
    }
    const double *yv = y.data;
    double worst = 0;
    for (int r = 0; r < ROWS && status == 0; r++) {
        double want = 0, mag = 0;
        for (int k = ptr[r]; k < ptr[r + 1]; k++) {
            want += v[k] * x[col[k]];
            mag += fabs(v[k] * x[col[k]]);
        }
        double got = yv[r * y.strides[0]];
        double err = fabs(got - want);
        /* An empty row must give exactly 0; others agree to rounding in any summation order. */
        if (ptr[r] == ptr[r + 1] ? got != 0.0 : !(err <= 1e-13 * mag)) {
            fprintf(stderr, "csr_spmv: row %d (%d entries): %.17g, want %.17g\n", r,
                    ptr[r + 1] - ptr[r], got, want);
            status = 1;
        }
        if (mag > 0 && err / mag > worst)
            worst = err / mag;
    }
    if (status == 0)
        printf("csr_spmv: %d x %d matrix, %d stored entries, %d empty rows: y = A x matches the "
               "C loop; largest error %.2g of sum|terms|\n", ROWS, COLS, nnz, empty, worst);

    red_free(y.data);
    free(ptr);
    free(col);
    free(v);
    free(x);
    return status;
}
