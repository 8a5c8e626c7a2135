/*
 * mpi.c -- the MPI engine: collectives on the context's own duplicate of the caller's
 * communicator, which returns errors instead of aborting.  Built when CMake finds MPI.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranks/ranks.h"
#include "redjit.h"

void ranks_wire(int ct, int rop, int *wct, int *wop)
{
    int wrap = rop == ROP_SUM || rop == ROP_PROD;
    *wct = wrap && ct == CT_I32 ? CT_U32 : wrap && ct == CT_I64 ? CT_U64 : ct;
    *wop = rop == ROP_LAND ? ROP_MIN : rop == ROP_LOR ? ROP_MAX : rop;
}

int ranks_reducible(int rop, int ct)
{
    if (ct == CT_BOOL) return rop == ROP_LAND || rop == ROP_LOR || rop == ROP_MIN || rop == ROP_MAX;
    if (!CT_IS_INT(ct)) return 0;
    return rop == ROP_SUM || rop == ROP_PROD || rop == ROP_MIN || rop == ROP_MAX || rop == ROP_BAND ||
           rop == ROP_BOR || rop == ROP_BXOR;
}

#ifndef REDJIT_WITH_MPI

int ranks_mpi_open(const void *mpi_comm, ranks_comm **out, util_diag *diag)
{
    *out = NULL;
    return util_diag_set(diag, RED_ERR_UNSUPPORTED,
                         "this build of redjit has no MPI engine (build it where CMake finds MPI, e.g. "
                         "with Debian's libopenmpi-dev installed)");
}

#else

#include <limits.h>
#include <mpi.h>

typedef struct mpi_comm {
    ranks_comm base;
    MPI_Comm comm;
} mpi_comm;

/* Bytes moved per call: MPI counts are ints. */
#define MPI_CHUNK ((size_t)1 << 30)

static int mpi_fail(ranks_comm *c, int err, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(err, s, &n) != MPI_SUCCESS) snprintf(s, sizeof s, "error %d", err);
    snprintf(c->err, sizeof c->err, "%s: %.200s", what, s);
    return RED_ERR_COMM;
}

static int mpi_allgatherv(ranks_comm *c, const void *send, void *recv, const size_t *counts, const size_t *displs)
{
    MPI_Comm comm = ((mpi_comm *)c)->comm;
    int n = c->size, me = c->rank, rc = 0;
    size_t end = 0;
    for (int r = 0; r < n; r++)
        if (displs[r] + counts[r] > end) end = displs[r] + counts[r];
    if (end <= INT_MAX) {
        int *cnt = malloc((size_t)n * sizeof *cnt), *dsp = malloc((size_t)n * sizeof *dsp);
        if (!cnt || !dsp) rc = RED_ERR_NOMEM;
        for (int r = 0; !rc && r < n; r++) {
            cnt[r] = (int)counts[r];
            dsp[r] = (int)displs[r];
        }
        if (!rc) {
            int e = MPI_Allgatherv(send, cnt[me], MPI_BYTE, recv, cnt, dsp, MPI_BYTE, comm);
            if (e != MPI_SUCCESS) rc = mpi_fail(c, e, "MPI_Allgatherv");
        }
        free(cnt);
        free(dsp);
        if (rc == RED_ERR_NOMEM) snprintf(c->err, sizeof c->err, "out of memory");
        return rc;
    }
    /* past int displacements: each rank's block broadcast in pieces of MPI_CHUNK bytes */
    char *base = recv;
    if (counts[me] && base + displs[me] != (const char *)send) memcpy(base + displs[me], send, counts[me]);
    for (int r = 0; !rc && r < n; r++)
        for (size_t at = 0; !rc && at < counts[r]; at += MPI_CHUNK) {
            size_t m = counts[r] - at < MPI_CHUNK ? counts[r] - at : MPI_CHUNK;
            int e = MPI_Bcast(base + displs[r] + at, (int)m, MPI_BYTE, r, comm);
            if (e != MPI_SUCCESS) rc = mpi_fail(c, e, "MPI_Bcast");
        }
    return rc;
}

static int mpi_allgather(ranks_comm *c, const void *send, void *recv, size_t bytes)
{
    if (bytes <= MPI_CHUNK) {
        int e = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, ((mpi_comm *)c)->comm);
        return e == MPI_SUCCESS ? 0 : mpi_fail(c, e, "MPI_Allgather");
    }
    size_t *counts = malloc((size_t)c->size * 2 * sizeof *counts);
    if (!counts) return RED_ERR_NOMEM;
    for (int r = 0; r < c->size; r++) {
        counts[r] = bytes;
        counts[c->size + r] = (size_t)r * bytes;
    }
    int rc = mpi_allgatherv(c, send, recv, counts, counts + c->size);
    free(counts);
    return rc;
}

/* MPI's type and operator for ranks_wire's (wct, wop). */
static MPI_Datatype mpi_type(int wct)
{
    switch (wct) {
    case CT_BOOL: return MPI_UINT8_T;
    case CT_I32: return MPI_INT32_T;
    case CT_U32: return MPI_UINT32_T;
    case CT_I64: return MPI_INT64_T;
    case CT_U64: return MPI_UINT64_T;
    }
    return MPI_DATATYPE_NULL;
}

static MPI_Op mpi_op(int wop)
{
    switch (wop) {
    case ROP_SUM: return MPI_SUM;
    case ROP_PROD: return MPI_PROD;
    case ROP_MIN: return MPI_MIN;
    case ROP_MAX: return MPI_MAX;
    case ROP_BAND: return MPI_BAND;
    case ROP_BOR: return MPI_BOR;
    case ROP_BXOR: return MPI_BXOR;
    }
    return MPI_OP_NULL;
}

static int mpi_allreduce(ranks_comm *c, void *buf, int64_t n, int ct, int rop)
{
    int wct, wop;
    ranks_wire(ct, rop, &wct, &wop);
    MPI_Datatype t = mpi_type(wct);
    MPI_Op op = mpi_op(wop);
    if (t == MPI_DATATYPE_NULL || op == MPI_OP_NULL || !ranks_reducible(rop, ct)) {
        snprintf(c->err, sizeof c->err, "no MPI all-reduce for %s over %s", plan_rop_name(rop), plan_ct_name(ct));
        return RED_ERR_INTERNAL;
    }
    size_t es = (size_t)plan_ct_size(ct);
    for (int64_t at = 0; at < n; at += INT_MAX / 8) {
        int64_t m = n - at < INT_MAX / 8 ? n - at : INT_MAX / 8;
        int e = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + (size_t)at * es, (int)m, t, op, ((mpi_comm *)c)->comm);
        if (e != MPI_SUCCESS) return mpi_fail(c, e, "MPI_Allreduce");
    }
    return 0;
}

static void mpi_free(ranks_comm *c)
{
    mpi_comm *m = (mpi_comm *)c;
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Comm_free(&m->comm);
    free(m);
}

static const ranks_ops mpi_ops = {.name = "MPI", .allgather = mpi_allgather, .allgatherv = mpi_allgatherv,
                                  .allreduce = mpi_allreduce, .reducible = ranks_reducible, .free = mpi_free};

int ranks_mpi_open(const void *mpi_comm_ptr, ranks_comm **out, util_diag *diag)
{
    *out = NULL;
    int init = 0, done = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&done);
    if (!init || done)
        return util_diag_set(diag, RED_ERR_UNSUPPORTED, "MPI is %s: call red_attach_mpi between MPI_Init and MPI_Finalize",
                             done ? "finalized" : "not initialised");
    mpi_comm *m = calloc(1, sizeof *m);
    if (!m) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    int e = MPI_Comm_dup(*(const MPI_Comm *)mpi_comm_ptr, &m->comm);
    if (e == MPI_SUCCESS) e = MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    if (e == MPI_SUCCESS) e = MPI_Comm_rank(m->comm, &m->base.rank);
    if (e == MPI_SUCCESS) e = MPI_Comm_size(m->comm, &m->base.size);
    if (e != MPI_SUCCESS) {
        mpi_fail(&m->base, e, "MPI_Comm_dup");
        util_diag_set(diag, RED_ERR_COMM, "%s", m->base.err);
        free(m);
        return RED_ERR_COMM;
    }
    m->base.ops = &mpi_ops;
    *out = &m->base;
    return 0;
}

#endif
