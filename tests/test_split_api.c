/*
 * test_split_api.c -- the calls for several processes, under mpirun -np 2 (or more): ranks
 * that disagree (another text, other split axes), an error on one rank only, refusals, split
 * and gathered results, and the context still usable after each.  Every rank checks its own
 * outcome; the exit status is the worst of the ranks'.
 */
#define _POSIX_C_SOURCE 200809L   /* nanosleep */
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redjit.h"

static int rank, size, failures;

#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (!(cond)) {                                                \
            printf("FAIL [rank %d] line %d: ", rank, __LINE__);       \
            printf(__VA_ARGS__);                                      \
            printf("\n");                                             \
            failures++;                                               \
        }                                                             \
    } while (0)

/* A matrix of 12 x 5, rows split in rank order (rank r holds rows lo..hi-1). */
enum { ROWS = 12, COLS = 5 };
static double A[ROWS * COLS];
static int64_t lo, hi;

/* red_interrupt from another thread every 5 ms until the run is over (an interrupt before a
 * run starts is not that run's) */
static atomic_int run_over;
static void *interrupter(void *arg)
{
    struct timespec ts = {0, 5 * 1000 * 1000};
    while (!atomic_load(&run_over)) {
        nanosleep(&ts, NULL);
        red_interrupt((red_ctx *)arg);
    }
    return NULL;
}

static red_expr *split_expr(red_ctx *ctx, const char *text, int axis)
{
    red_expr *e = NULL;
    CHECK(red_prepare(ctx, text, &e) == RED_OK, "prepare %s: %s", text, red_errmsg(ctx));
    red_array a;
    int64_t shape[2] = {hi - lo, COLS};
    red_array_init(&a, A + lo * COLS, RED_F64, 2, shape, NULL);
    if (axis == 1) {   /* my columns instead: a strided block of the whole */
        int64_t c0 = rank * COLS / size, c1 = (rank + 1) * COLS / size, sh[2] = {ROWS, c1 - c0}, st[2] = {COLS, 1};
        red_array_init(&a, A + c0, RED_F64, 2, sh, st);
    }
    CHECK(red_bind_split(e, "A", &a, axis) == RED_OK, "bind_split: %s", red_expr_errmsg(e));
    return e;
}

static void good_run_still_works(red_ctx *ctx)
{
    red_expr *e = split_expr(ctx, "sum(A)", 0);
    double v = 0, want = 0;
    for (int k = 0; k < ROWS * COLS; k++) want += A[k];
    CHECK(red_run(e) == RED_OK && red_result_f64(e, 0, &v) == RED_OK && v == want,
          "a good run after an error: %s (%g, want %g)", red_expr_errmsg(e), v, want);
    red_finalize(e);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int k = 0; k < ROWS * COLS; k++) A[k] = (double)((k * 37) % 23) - 9.5;
    lo = rank * ROWS / size;
    hi = (rank + 1) * ROWS / size;
    red_ctx *ctx;
    red_open(&ctx);
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_CPU);
    MPI_Comm world = MPI_COMM_WORLD;
    int r = 0, n = 0;
    CHECK(red_attach_mpi(ctx, &world) == RED_OK, "attach: %s", red_errmsg(ctx));
    CHECK(red_comm_rank(ctx, &r, &n) == RED_OK && r == rank && n == size, "red_comm_rank %d/%d", r, n);

    /* another text on the last rank: RED_ERR_MISUSE everywhere */
    red_expr *e = split_expr(ctx, rank == size - 1 ? "max(A)" : "sum(A)", 0);
    int st = red_run(e);
    CHECK(st == RED_ERR_MISUSE && strstr(red_expr_errmsg(e), "another text"), "texts differ: %d %s", st,
          red_expr_errmsg(e));
    red_finalize(e);
    good_run_still_works(ctx);

    /* other split axes: RED_ERR_MISUSE everywhere */
    e = split_expr(ctx, "sum(A)", rank == 0 ? 0 : 1);
    st = red_run(e);
    CHECK(st == RED_ERR_MISUSE, "axes differ: %d %s", st, red_expr_errmsg(e));
    red_finalize(e);

    /* a name unbound on rank 0 only: its error, on every rank */
    e = split_expr(ctx, "sum(A) + y", 0);
    if (rank != 0) red_bind_f64(e, "y", 1.0);
    st = red_run(e);
    CHECK(st == RED_ERR_NAME, "unbound on rank 0: %d %s", st, red_expr_errmsg(e));
    if (rank != 0) CHECK(strncmp(red_expr_errmsg(e), "rank 0: ", 8) == 0, "message: %s", red_expr_errmsg(e));
    red_finalize(e);
    good_run_still_works(ctx);

    /* a subscript out of range in one rank's block only */
    e = split_expr(ctx, "sum(A[i,j] * w[i])", 0);
    double wv[ROWS - 1];
    for (int k = 0; k < ROWS - 1; k++) wv[k] = 1;
    red_array wa;
    int64_t wn = ROWS - 1;
    red_array_init(&wa, wv, RED_F64, 1, &wn, NULL);
    red_bind_array(e, "w", &wa);
    st = red_run(e);
    CHECK(st == RED_ERR_SHAPE || st == RED_ERR_INDEX, "w too short: %d %s", st, red_expr_errmsg(e));
    red_finalize(e);

    /* a refusal: the same caret on every rank */
    e = split_expr(ctx, "sum(A[i,j] * A[i+1,j])", 0);
    st = red_run(e);
    CHECK(st == RED_ERR_UNSUPPORTED && strstr(red_expr_errmsg(e), "1:"), "stencil: %d %s", st, red_expr_errmsg(e));
    red_finalize(e);

    /* a bad axis is a binding error, and nothing runs */
    CHECK(red_prepare(ctx, "sum(A)", &e) == RED_OK, "prepare");
    red_array a;
    int64_t shape[2] = {2, 2};
    red_array_init(&a, A, RED_F64, 2, shape, NULL);
    CHECK(red_bind_split(e, "A", &a, 2) == RED_ERR_BIND, "axis 2 of a matrix");
    red_finalize(e);

    /* row sums stay split; gathered they are whole */
    for (int gather = 0; gather < 2; gather++) {
        e = split_expr(ctx, "sum(A[i,j]) over j, sum(A[i,j]) over i", 0);
        red_expr_set_option(e, RED_OPT_GATHER, gather);
        st = red_run(e);
        CHECK(st == RED_OK, "row sums: %s", red_expr_errmsg(e));
        red_array res;
        int axis;
        int64_t off, ext;
        if (st == RED_OK && red_result(e, 0, &res, NULL) == RED_OK && red_result_split(e, 0, &axis, &off, &ext) == RED_OK) {
            int64_t first = gather ? 0 : lo, count = gather ? ROWS : hi - lo;
            CHECK(res.shape[0] == count && axis == (gather ? -1 : 0) && off == (gather ? 0 : lo) && ext == (gather ? 0 : ROWS),
                  "row sums: shape %lld axis %d off %lld ext %lld", (long long)res.shape[0], axis, (long long)off,
                  (long long)ext);
            for (int64_t i = 0; i < count && res.shape[0] == count; i++) {
                double want = 0;
                for (int j = 0; j < COLS; j++) want += A[(first + i) * COLS + j];
                CHECK(((double *)res.data)[i] == want, "row %lld: %g, want %g", (long long)(first + i),
                      ((double *)res.data)[i], want);
            }
        }
        if (st == RED_OK && red_result(e, 1, &res, NULL) == RED_OK) {
            CHECK(res.shape[0] == COLS, "column sums: %lld", (long long)res.shape[0]);
            red_result_split(e, 1, &axis, NULL, NULL);
            CHECK(axis == -1, "column sums are whole: axis %d", axis);
        }
        /* a result handed over still says which block it was */
        red_array taken;
        if (st == RED_OK && red_result_take(e, 0, &taken) == RED_OK) {
            axis = -2;
            off = ext = -1;
            CHECK(red_result_split(e, 0, &axis, &off, &ext) == RED_OK && axis == (gather ? -1 : 0) &&
                      off == (gather ? 0 : lo) && ext == (gather ? 0 : ROWS),
                  "after red_result_take: axis %d off %lld ext %lld (%s)", axis, (long long)off, (long long)ext,
                  red_expr_errmsg(e));
            free(taken.data);
        } else if (st == RED_OK) {
            CHECK(0, "red_result_take: %s", red_expr_errmsg(e));
        }
        red_finalize(e);
    }

    /* red_interrupt on rank 0 only, during a long run: every rank stops with its status and
     * rank 0's message (none waits in a collective), and the next run works */
    e = NULL;
    CHECK(red_prepare(ctx, "sum(sin(i * 0.001) * cos(i * 0.002)) over i in 0..n", &e) == RED_OK, "prepare long");
    if (e) {
        red_bind_i64(e, "n", (int64_t)1 << 27);
        pthread_t th;
        atomic_store(&run_over, 0);
        int started = rank == 0 && pthread_create(&th, NULL, interrupter, ctx) == 0;
        st = red_run(e);
        atomic_store(&run_over, 1);
        if (started) pthread_join(th, NULL);
        CHECK(st == RED_ERR_INTERRUPTED && (rank == 0 || strstr(red_expr_errmsg(e), "rank 0")),
              "interrupted on rank 0: %d %s", st, red_expr_errmsg(e));
        red_bind_i64(e, "n", 1000);
        double v = 0;
        st = red_run(e);
        CHECK(st == RED_OK && red_result_f64(e, 0, &v) == RED_OK, "after the interrupt: %d %s", st, red_expr_errmsg(e));
        red_finalize(e);
    }

    /* both engines on one context (CTest gives the stand-ins: REDJIT_NCCL_LIB, tests/fakecuda):
     * host arrays still go through MPI and give the same bits; an NCCL communicator that
     * numbers the ranks otherwise is refused with RED_ERR_MISUSE and the one before stays */
    if (getenv("REDJIT_NCCL_LIB")) {
        unsigned char id[RED_NCCL_ID_BYTES] = {0}, id2[RED_NCCL_ID_BYTES] = {0}, id3[RED_NCCL_ID_BYTES] = {0},
                      id4[RED_NCCL_ID_BYTES] = {0};
        int made = rank != 0 || (red_nccl_unique_id(ctx, id) == RED_OK && red_nccl_unique_id(ctx, id2) == RED_OK &&
                                 red_nccl_unique_id(ctx, id3) == RED_OK && red_nccl_unique_id(ctx, id4) == RED_OK);
        CHECK(made, "red_nccl_unique_id: %s", red_errmsg(ctx));
        MPI_Bcast(id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        MPI_Bcast(id2, sizeof id2, MPI_BYTE, 0, MPI_COMM_WORLD);
        MPI_Bcast(id3, sizeof id3, MPI_BYTE, 0, MPI_COMM_WORLD);
        MPI_Bcast(id4, sizeof id4, MPI_BYTE, 0, MPI_COMM_WORLD);
        e = split_expr(ctx, "sum(A[i,j]) over i", 0);
        double mpi_only[COLS] = {0}, both[COLS] = {0};
        red_array res;
        CHECK(red_run(e) == RED_OK && red_result(e, 0, &res, NULL) == RED_OK, "MPI alone: %s", red_expr_errmsg(e));
        memcpy(mpi_only, res.data, sizeof mpi_only);
        st = red_attach_nccl_id(ctx, id, size, rank);
        CHECK(st == RED_OK, "red_attach_nccl_id: %d %s", st, red_errmsg(ctx));
        CHECK(red_comm_rank(ctx, &r, &n) == RED_OK && r == rank && n == size, "both: red_comm_rank %d/%d", r, n);
        CHECK(red_run(e) == RED_OK && red_result(e, 0, &res, NULL) == RED_OK, "both: %s", red_expr_errmsg(e));
        memcpy(both, res.data, sizeof both);
        CHECK(memcmp(mpi_only, both, sizeof both) == 0, "host arrays with both engines: other bits than MPI's");
        st = red_attach_nccl_id(ctx, id2, size, (rank + 1) % size);
        CHECK(size == 1 || (st == RED_ERR_MISUSE && strstr(red_errmsg(ctx), "number the ranks")),
              "renumbered NCCL: %d %s", st, red_errmsg(ctx));
        CHECK(red_run(e) == RED_OK, "after the refusal: %s", red_expr_errmsg(e));
        red_finalize(e);
        CHECK(red_attach_nccl(ctx, NULL) == RED_OK, "detach NCCL");
        CHECK(red_attach_nccl_id(ctx, id, size, size) == RED_ERR_ARG, "rank %d of %d accepted", size, size);

        /* the caller's own communicator (made here through the library's ncclCommInitRank),
         * which stays the caller's: destroyed after the context let go of it */
        typedef struct { char internal[RED_NCCL_ID_BYTES]; } nccl_uid;
        void *lib = dlopen(getenv("REDJIT_NCCL_LIB"), RTLD_NOW | RTLD_LOCAL);
        int (*init)(void **, int, nccl_uid, int) = NULL;
        int (*destroy)(void *) = NULL;
        if (lib) {
            *(void **)&init = dlsym(lib, "ncclCommInitRank");
            *(void **)&destroy = dlsym(lib, "ncclCommDestroy");
        }
        CHECK(init && destroy, "the NCCL library's ncclCommInitRank: %s", dlerror());
        nccl_uid u;
        memcpy(u.internal, id3, sizeof u.internal);
        void *comm = NULL;
        if (init && destroy && init(&comm, size, u, rank) == 0) {
            CHECK(red_attach_nccl(ctx, comm) == RED_OK, "red_attach_nccl: %s", red_errmsg(ctx));
            e = split_expr(ctx, "sum(A[i,j]) over i", 0);
            CHECK(red_run(e) == RED_OK && red_result(e, 0, &res, NULL) == RED_OK &&
                      memcmp(res.data, mpi_only, sizeof mpi_only) == 0,
                  "the caller's communicator: %s", red_expr_errmsg(e));
            red_finalize(e);
            CHECK(red_attach_nccl(ctx, NULL) == RED_OK, "detach the caller's communicator");
            destroy(comm);
        } else {
            CHECK(0, "ncclCommInitRank failed");
        }

        /* red_interrupt while a collective never ends (the stand-in's FAKENCCL_HANG_AT: every
         * rank's next collective, the hello, as when a rank never comes): RED_ERR_INTERRUPTED
         * a second later with the communicator aborted, and the next run says so */
        long (*calls)(void) = NULL;
        if (lib) *(void **)&calls = dlsym(lib, "fakenccl_calls");
        red_ctx *c2 = NULL;
        CHECK(calls && red_open(&c2) == RED_OK, "the stand-in's fakenccl_calls, red_open");
        if (calls && c2) {
            red_set_option(c2, RED_OPT_DEVICE, RED_DEVICE_CPU);
            st = red_attach_nccl_id(c2, id4, size, rank);
            CHECK(st == RED_OK, "red_attach_nccl_id (NCCL alone): %d %s", st, red_errmsg(c2));
            e = split_expr(c2, "sum(A)", 0);
            char at[32];
            snprintf(at, sizeof at, "%ld", calls() + 1);
            setenv("FAKENCCL_HANG_AT", at, 1);
            pthread_t th;
            atomic_store(&run_over, 0);
            int started = pthread_create(&th, NULL, interrupter, c2) == 0;
            st = red_run(e);
            atomic_store(&run_over, 1);
            if (started) pthread_join(th, NULL);
            unsetenv("FAKENCCL_HANG_AT");
            CHECK(st == RED_ERR_INTERRUPTED && strstr(red_expr_errmsg(e), "aborted"), "a collective that hangs: %d %s",
                  st, red_expr_errmsg(e));
            st = red_run(e);
            CHECK(st == RED_ERR_COMM && strstr(red_expr_errmsg(e), "aborted"), "after the abort: %d %s", st,
                  red_expr_errmsg(e));
            red_finalize(e);
            red_close(c2);
        }
        if (lib) dlclose(lib);
    }

    /* detached: runs are this rank's alone again */
    CHECK(red_attach_mpi(ctx, NULL) == RED_OK, "detach");
    CHECK(red_comm_rank(ctx, &r, &n) == RED_OK && r == 0 && n == 1, "after detach %d/%d", r, n);
    e = split_expr(ctx, "count(A == A)", 0);
    double v = 0;
    CHECK(red_run(e) == RED_OK && red_result_f64(e, 0, &v) == RED_OK && v == (double)((hi - lo) * COLS),
          "detached: %g", v);
    red_finalize(e);
    red_close(ctx);

    int worst = 0;
    MPI_Allreduce(&failures, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("test_split_api: %s over %d ranks\n", worst ? "FAILED" : "passed", size);
    MPI_Finalize();
    return worst ? 1 : 0;
}
