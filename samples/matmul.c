/*
 * matmul.c -- matrix product as a reduction over the shared index:
 *     C[i,j] = sum(A[i,k]*B[k,j]) over k
 * The assignment names the result "C" and fixes its index order [i,j]; redjit allocates it and
 * the program reads it back with red_result.  Checked against a naive triple loop.
 */
#include <redjit.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Distinct sizes, so that a transposed or mis-strided result cannot pass by accident. */
enum { M = 70, K = 50, N = 40 };

int main(void)
{
    static double A[M][K], B[K][N], want[M][N], mag[M][N];
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            A[i][k] = cos(0.1 * i + 0.37 * k);
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++)
            B[k][j] = (double)((k * 7 + j * 3) % 11 - 5) / 4.0;

    /* Reference, and the sum of |terms| per entry that bounds rounding in any order. */
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, m = 0;
            for (int k = 0; k < K; k++) {
                s += A[i][k] * B[k][j];
                m += fabs(A[i][k] * B[k][j]);
            }
            want[i][j] = s;
            mag[i][j] = m;
        }

    red_ctx *ctx = NULL;
    red_expr *e = NULL;
    int status = 1;
    int rc = red_open(&ctx);
    if (rc != RED_OK) {
        fprintf(stderr, "matmul: red_open: %s\n", red_errstr(rc));
        return 1;
    }
    rc = red_prepare(ctx, "C[i,j] = sum(A[i,k]*B[k,j]) over k", &e);
    if (rc != RED_OK) {
        fprintf(stderr, "matmul: red_prepare: %s\n%s\n", red_errstr(rc), red_errmsg(ctx));
        goto out;
    }
    red_array Aa, Ba;
    red_array_init(&Aa, A, RED_F64, 2, (const int64_t[]){M, K}, NULL);
    red_array_init(&Ba, B, RED_F64, 2, (const int64_t[]){K, N}, NULL);
    if ((rc = red_bind_array(e, "A", &Aa)) != RED_OK ||
        (rc = red_bind_array(e, "B", &Ba)) != RED_OK || (rc = red_run(e)) != RED_OK) {
        fprintf(stderr, "matmul: %s\n%s\n", red_errstr(rc), red_expr_errmsg(e));
        goto out;
    }

    /* The result belongs to the expression until the next red_run or red_finalize. */
    red_array C;
    const char *name;
    rc = red_result(e, 0, &C, &name);
    if (rc != RED_OK) {
        fprintf(stderr, "matmul: red_result: %s\n%s\n", red_errstr(rc), red_expr_errmsg(e));
        goto out;
    }
    if (strcmp(name, "C") != 0 || C.dtype != RED_F64 || C.ndim != 2 || C.shape[0] != M ||
        C.shape[1] != N) {
        fprintf(stderr, "matmul: result '%s' is %s with %d dimensions, want C, f64 [%d,%d]\n",
                name, red_dtype_name(C.dtype), C.ndim, M, N);
        goto out;
    }

    const double *c = C.data;
    double worst = 0;                       /* largest error relative to that entry's sum|terms| */
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double got = c[i * C.strides[0] + j * C.strides[1]];
            double rel = fabs(got - want[i][j]) / (mag[i][j] > 0 ? mag[i][j] : 1);
            if (!(rel <= 1e-13)) {
                fprintf(stderr, "matmul: C[%d,%d] = %.17g, want %.17g\n", i, j, got, want[i][j]);
                goto out;
            }
            if (rel > worst)
                worst = rel;
        }
    printf("matmul: C = A (%dx%d) * B (%dx%d) matches the C loop; largest error %.2g of "
           "sum|terms|\n", M, K, K, N, worst);
    status = 0;

out:
    red_finalize(e);
    red_close(ctx);
    return status;
}
