/*
 * heat.c -- convergence test of a 2-D heat equation solved by Jacobi iteration.
 *
 * The stencil update is ordinary C.  Every CHECK_EVERY iterations the largest change between
 * two consecutive grids, max(abs(unew - u)), is computed by redjit and decides whether the
 * temperature has settled (the max reduction of the OpenACC heat-equation benchmark).  Each
 * of those values is verified against the same maximum computed in C: a difference and an
 * absolute value are exact operations, so the two must agree to the bit.
 */
#include <redjit.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { NX = 96, NY = 64 };              /* grid points, boundary included */
enum { CHECK_EVERY = 10, MAX_ITERS = 40000 };
static const double TOLERANCE = 1e-4;   /* stop when no point changes by more than this */

/* One Jacobi sweep: every inner point becomes the mean of its four neighbours. */
static void jacobi(const double *u, double *unew)
{
    for (int i = 1; i < NX - 1; i++)
        for (int j = 1; j < NY - 1; j++)
            unew[i * NY + j] = 0.25 * (u[(i - 1) * NY + j] + u[(i + 1) * NY + j] +
                                       u[i * NY + j - 1] + u[i * NY + j + 1]);
}

/* The reference for the reduction redjit computes. */
static double max_abs_diff(const double *u, const double *unew)
{
    double m = 0;
    for (int k = 0; k < NX * NY; k++)
        m = fmax(m, fabs(unew[k] - u[k]));
    return m;
}

int main(void)
{
    double *u = calloc(NX * NY, sizeof *u);
    double *unew = calloc(NX * NY, sizeof *unew);
    if (!u || !unew) {
        fprintf(stderr, "heat: out of memory\n");
        return 1;
    }
    /* Boundary: the top edge is held at 100 degrees, the other three at 0. */
    for (int j = 0; j < NY; j++)
        u[j] = unew[j] = 100.0;

    red_ctx *ctx = NULL;
    red_expr *e = NULL;
    int status = 1;
    int rc = red_open(&ctx);
    if (rc != RED_OK) {
        fprintf(stderr, "heat: red_open: %s\n", red_errstr(rc));
        return 1;
    }
    /* Prepared once, run at every check with the two current grids bound. */
    rc = red_prepare(ctx, "max(abs(unew - u))", &e);
    if (rc != RED_OK) {
        fprintf(stderr, "heat: red_prepare: %s\n%s\n", red_errstr(rc), red_errmsg(ctx));
        goto out;
    }

    const int64_t shape[2] = {NX, NY};
    double change = INFINITY;
    int iter = 0, checks = 0;
    while (iter < MAX_ITERS && change > TOLERANCE) {
        jacobi(u, unew);
        iter++;
        if (iter % CHECK_EVERY == 0) {
            /* The buffers swap roles every iteration, so bind the current pair each time:
             * binding copies a descriptor and is cheap. */
            red_array ua, na;
            red_array_init(&ua, u, RED_F64, 2, shape, NULL);
            red_array_init(&na, unew, RED_F64, 2, shape, NULL);
            if ((rc = red_bind_array(e, "u", &ua)) != RED_OK ||
                (rc = red_bind_array(e, "unew", &na)) != RED_OK ||
                (rc = red_run(e)) != RED_OK || (rc = red_result_f64(e, 0, &change)) != RED_OK) {
                fprintf(stderr, "heat: iteration %d: %s\n%s\n", iter, red_errstr(rc),
                        red_expr_errmsg(e));
                goto out;
            }
            double want = max_abs_diff(u, unew);
            if (change != want) {
                fprintf(stderr, "heat: iteration %d: redjit says %.17g, C says %.17g\n", iter,
                        change, want);
                goto out;
            }
            checks++;
            if (checks == 1 || checks % 100 == 0)
                printf("heat: iteration %5d  max change %.6g\n", iter, change);
        }
        double *t = u;
        u = unew;
        unew = t;
    }

    if (change > TOLERANCE) {
        fprintf(stderr, "heat: no convergence after %d iterations (max change %g)\n", iter, change);
        goto out;
    }
    /* The settled field is harmonic: each inner point is the mean of its neighbours, and the
     * centre of the plate lies strictly between the boundary temperatures. */
    double centre = u[(NX / 2) * NY + NY / 2];
    printf("heat: converged after %d iterations (%d checks through redjit, all equal to C); "
           "max change %.3g, centre %.4f\n", iter, checks, change, centre);
    if (!(centre > 0.0 && centre < 100.0)) {
        fprintf(stderr, "heat: implausible centre temperature\n");
        goto out;
    }
    status = 0;

out:
    red_finalize(e);
    red_close(ctx);
    free(u);
    free(unew);
    return status;
}
