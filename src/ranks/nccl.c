/*
 * nccl.c -- the NCCL engine: collectives on device memory through NCCL, which is loaded
 * with dlopen on first use (libnccl.so.2, or the file REDJIT_NCCL_LIB names), so that
 * builds and machines without it work as before.  Its host collectives (the ranks'
 * agreement, their hellos, host results gathered) are staged through a device buffer of its
 * own, on a stream of its own.  Every wait polls the stream and NCCL's asynchronous error,
 * so that a collective NCCL gives up on is an error here, not a hang.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

#include <dlfcn.h>

#include "ranks/ranks.h"
#include "redjit.h"

/* ---- the library ------------------------------------------------------------------------ */

typedef int nccl_result;                       /* ncclResult_t */
typedef struct nccl_id {
    char internal[RANKS_NCCL_ID];
} nccl_id;                                     /* ncclUniqueId */
typedef struct nccl_comm_st *nccl_handle;      /* ncclComm_t   */
typedef struct CUstream_st *cu_stream;

enum { NCCL_OK = 0, NCCL_IN_PROGRESS = 7 };
/* ncclDataType_t and ncclRedOp_t, as nccl.h numbers them */
enum { NCCL_U8 = 1, NCCL_I32 = 2, NCCL_U32 = 3, NCCL_I64 = 4, NCCL_U64 = 5, NCCL_F32 = 7, NCCL_F64 = 8 };
enum { NCCL_SUM = 0, NCCL_PROD = 1, NCCL_MAX = 2, NCCL_MIN = 3 };

typedef struct nccl_api {
    nccl_result (*GetUniqueId)(nccl_id *);
    nccl_result (*CommInitRank)(nccl_handle *, int, nccl_id, int);
    nccl_result (*CommDestroy)(nccl_handle);
    nccl_result (*CommAbort)(nccl_handle);
    nccl_result (*CommCount)(nccl_handle, int *);
    nccl_result (*CommUserRank)(nccl_handle, int *);
    nccl_result (*CommCuDevice)(nccl_handle, int *);
    nccl_result (*CommGetAsyncError)(nccl_handle, nccl_result *);
    nccl_result (*AllReduce)(const void *, void *, size_t, int, int, nccl_handle, cu_stream);
    nccl_result (*AllGather)(const void *, void *, size_t, int, nccl_handle, cu_stream);
    nccl_result (*GroupStart)(void);
    nccl_result (*GroupEnd)(void);
    const char *(*GetErrorString)(nccl_result);
} nccl_api;

static nccl_api nccl;
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;
static char nccl_why[300];      /* empty once loaded */

static void nccl_load(void)
{
    const char *path = getenv("REDJIT_NCCL_LIB");
    if (!path || !*path) path = "libnccl.so.2";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(nccl_why, sizeof nccl_why, "NCCL cannot be loaded (%.200s); set REDJIT_NCCL_LIB to its file",
                 dlerror());
        return;
    }
#define NS(f) *(void **)&nccl.f = dlsym(h, "nccl" #f)
    NS(GetUniqueId);
    NS(CommInitRank);
    NS(CommDestroy);
    NS(CommAbort);
    NS(CommCount);
    NS(CommUserRank);
    NS(CommCuDevice);
    NS(CommGetAsyncError);
    NS(AllReduce);
    NS(AllGather);
    NS(GroupStart);
    NS(GroupEnd);
    NS(GetErrorString);
#undef NS
    void **fp = (void **)&nccl;
    for (size_t i = 0; i < sizeof nccl / sizeof(void *); i++)
        if (!fp[i]) {
            snprintf(nccl_why, sizeof nccl_why, "%s lacks a function redjit needs (NCCL 2.12 or later)", path);
            return;
        }
}

static int nccl_ready(util_diag *diag)
{
    if (pthread_once(&nccl_once, nccl_load) != 0 || nccl_why[0] || !nccl.GetUniqueId)
        return util_diag_set(diag, RED_ERR_UNSUPPORTED, "%s", nccl_why[0] ? nccl_why : "NCCL cannot be loaded");
    return 0;
}

static const char *nccl_words(nccl_result r)
{
    const char *s = nccl.GetErrorString ? nccl.GetErrorString(r) : NULL;
    return s ? s : "unknown NCCL error";
}

int ranks_nccl_unique_id(void *id, util_diag *diag)
{
    int rc = nccl_ready(diag);
    if (rc) return rc;
    nccl_id u;
    nccl_result r = nccl.GetUniqueId(&u);
    if (r != NCCL_OK) return util_diag_set(diag, RED_ERR_COMM, "ncclGetUniqueId: %s", nccl_words(r));
    memcpy(id, u.internal, sizeof u.internal);
    return 0;
}

/* ---- the engine ------------------------------------------------------------------------- */

typedef struct nccl_engine {
    ranks_comm base;
    nccl_handle comm;
    int owned;                  /* made here from a unique id: destroyed with the engine */
    ranks_cuda dev;
    cu_stream s;                /* the host collectives' stream */
    unsigned long long stage;   /* their staging buffer, on the device */
    size_t stage_size;
    unsigned char *pinned;      /* and on the host, page-locked: the copies are then quick */
    size_t pending_at, pending_total;   /* an all-gather started (allgather_start) */
    int grouped;                /* a group is open (dev_flag): the next collective ends it */
    int aborted;                /* ncclCommAbort'ed after red_interrupt (nccl_wait) */
} nccl_engine;

static int engine_fail(ranks_comm *c, const char *what, const char *why)
{
    snprintf(c->err, sizeof c->err, "%s: %.200s", what, why);
    return RED_ERR_COMM;
}

static int cu_fail(nccl_engine *m, const char *what, int r)
{
    const char *name = NULL;
    if (m->dev.GetErrorName(r, &name) || !name) name = "unknown CUDA error";
    return engine_fail(&m->base, what, name);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* After ncclCommAbort the communicator is gone: every call says so. */
static int gone(nccl_engine *m)
{
    return m->aborted ? engine_fail(&m->base, "the NCCL communicator",
                                    "it was aborted when red_interrupt stopped a collective that did not end; "
                                    "attach another (red_attach_nccl_id, red_attach_nccl)")
                      : 0;
}

/* Interrupted waits: a collective that has not ended when a second red_interrupt comes (Ctrl-C
 * twice), or RANKS_ABORT_S after the first, is aborted, and with it the communicator.  One
 * interrupt alone waits that long because the other ranks may only be slower (a longer pass on
 * a larger block): aborting would leave them waiting in this collective for good. */
#define RANKS_ABORT_S 10.0

/* Wait for `s` (the collectives queued there): polls, so that an error NCCL raises
 * asynchronously (a peer gone, a network failure) ends the wait, and so does red_interrupt
 * (as RANKS_ABORT_S says, by aborting the communicator). */
static int nccl_wait(nccl_engine *m, cu_stream s)
{
    const ranks_cuda *cu = &m->dev;
    double asked = 0;
    for (long spin = 0;; spin++) {
        int q = cu->StreamQuery(s);
        if (q == 0) return 0;
        if (q != RANKS_CUDA_NOT_READY) return cu_fail(m, "waiting for a collective (cuStreamQuery)", q);
        ranks_watch *w = m->base.watch;
        const core_cancel *cc = w ? w->cancel : NULL;
        if (cc && core_cancelled(cc)) {
            double t = now_s();
            if (!asked) asked = t;
            int again = __atomic_load_n(cc->counter, __ATOMIC_RELAXED) - cc->seen >= 2;
            if (again || t - asked >= RANKS_ABORT_S) {
                nccl.CommAbort(m->comm);   /* its kernels end; the stream drains */
                m->aborted = 1;
                m->grouped = 0;
                w->abandoned = 1;
                engine_fail(&m->base, "interrupted",
                            again ? "a collective had not ended at a second red_interrupt (another rank not "
                                    "taking part?): the NCCL communicator was aborted; attach another"
                                  : "a collective had not ended 10 s after red_interrupt (another rank not "
                                    "taking part?): the NCCL communicator was aborted; attach another");
                return RED_ERR_INTERRUPTED;
            }
        }
        nccl_result ae = NCCL_OK;
        nccl_result r = nccl.CommGetAsyncError(m->comm, &ae);
        if (r != NCCL_OK) return engine_fail(&m->base, "ncclCommGetAsyncError", nccl_words(r));
        if (ae != NCCL_OK && ae != NCCL_IN_PROGRESS) return engine_fail(&m->base, "a collective", nccl_words(ae));
        if (spin < 1000) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

/* A collective just queued (status r) with those of an open group, waited for. */
static int nccl_called(nccl_engine *m, const char *what, nccl_result r, cu_stream s)
{
    if (m->grouped) {
        m->grouped = 0;
        nccl_result g = nccl.GroupEnd();
        if (r == NCCL_OK || r == NCCL_IN_PROGRESS) {
            r = g;
            what = "ncclGroupEnd";
        }
    }
    if (r != NCCL_OK && r != NCCL_IN_PROGRESS) return engine_fail(&m->base, what, nccl_words(r));
    return nccl_wait(m, s);
}

/* The staging buffers, at least `bytes` each, with the engine's device current. */
static int stage_get(nccl_engine *m, size_t bytes)
{
    const ranks_cuda *cu = &m->dev;
    if (gone(m)) return RED_ERR_COMM;
    int r = cu->CtxSetCurrent(m->dev.ctx);
    if (r) return cu_fail(m, "cuCtxSetCurrent", r);
    if (bytes <= m->stage_size) return 0;
    size_t want = bytes < 65536 ? 65536 : bytes + bytes / 2;
    if (m->stage) cu->MemFree(m->stage);
    if (m->pinned) cu->MemFreeHost(m->pinned);
    m->stage = 0;
    m->pinned = NULL;
    m->stage_size = 0;
    if ((r = cu->MemAlloc(&m->stage, want))) return cu_fail(m, "staging a host collective (cuMemAlloc)", r);
    void *h = NULL;
    if ((r = cu->MemHostAlloc(&h, want, 0))) return cu_fail(m, "staging a host collective (cuMemHostAlloc)", r);
    m->pinned = h;
    m->stage_size = want;
    return 0;
}

/* `n` bytes of host memory to the device staging buffer at `at`, through the pinned one. */
static int stage_in(nccl_engine *m, size_t at, const void *src, size_t n)
{
    if (!n) return 0;
    memcpy(m->pinned + at, src, n);
    int r = m->dev.MemcpyHtoDAsync(m->stage + at, m->pinned + at, n, m->s);
    return r ? cu_fail(m, "cuMemcpyHtoDAsync", r) : 0;
}

/* The device staging buffer's `n` bytes at `at` to the pinned one (waited for). */
static int stage_out(nccl_engine *m, size_t at, size_t n)
{
    int r = n ? m->dev.MemcpyDtoHAsync(m->pinned + at, m->stage + at, n, m->s) : 0;
    if (!r) r = m->dev.StreamSynchronize(m->s);
    return r ? cu_fail(m, "cuMemcpyDtoHAsync", r) : 0;
}

static size_t round_up(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

static int reserve(ranks_comm *c, size_t bytes)
{
    return stage_get((nccl_engine *)c, round_up(bytes) + bytes * (size_t)c->size + 1);
}

/* The all-gather queued on the engine's stream, not waited for: it overlaps what the caller
 * queues on its own stream meanwhile (a pass's kernels). */
static int host_allgather_start(ranks_comm *c, const void *send, size_t bytes)
{
    nccl_engine *m = (nccl_engine *)c;
    size_t at = round_up(bytes), total = bytes * (size_t)c->size;
    int rc = stage_get(m, at + total + 1);
    if (!rc) rc = stage_in(m, 0, send, bytes);
    nccl_result r = rc ? NCCL_OK
                       : nccl.AllGather((void *)(uintptr_t)m->stage, (void *)(uintptr_t)(m->stage + at), bytes,
                                        NCCL_U8, m->comm, m->s);
    if (!rc && r != NCCL_OK && r != NCCL_IN_PROGRESS) rc = engine_fail(c, "ncclAllGather", nccl_words(r));
    m->pending_at = at;
    m->pending_total = total;
    return rc;
}

static int host_allgather_wait(ranks_comm *c, void *recv)
{
    nccl_engine *m = (nccl_engine *)c;
    if (gone(m)) return RED_ERR_COMM;
    int r = m->dev.CtxSetCurrent(m->dev.ctx);
    int rc = r ? cu_fail(m, "cuCtxSetCurrent", r) : nccl_wait(m, m->s);
    if (!rc) rc = stage_out(m, m->pending_at, m->pending_total);
    if (!rc) memcpy(recv, m->pinned + m->pending_at, m->pending_total);
    return rc;
}

static int host_allgather(ranks_comm *c, const void *send, void *recv, size_t bytes)
{
    int rc = host_allgather_start(c, send, bytes);
    return rc ? rc : host_allgather_wait(c, recv);
}

/* NCCL has no all-gather of unequal parts: each rank's part padded to the largest. */
static int host_allgatherv(ranks_comm *c, const void *send, void *recv, const size_t *counts, const size_t *displs)
{
    nccl_engine *m = (nccl_engine *)c;
    size_t most = 0;
    for (int r = 0; r < c->size; r++)
        if (counts[r] > most) most = counts[r];
    size_t at = round_up(most), total = most * (size_t)c->size;
    int rc = stage_get(m, at + total + 1);
    if (!rc) rc = stage_in(m, 0, send, counts[c->rank]);
    if (!rc)
        rc = nccl_called(m, "ncclAllGather", nccl.AllGather((void *)(uintptr_t)m->stage,
                                                             (void *)(uintptr_t)(m->stage + at), most, NCCL_U8,
                                                             m->comm, m->s), m->s);
    if (!rc) rc = stage_out(m, at, total);
    for (int k = 0; !rc && k < c->size; k++)
        if (counts[k]) memcpy((char *)recv + displs[k], m->pinned + at + most * (size_t)k, counts[k]);
    return rc;
}

/* NCCL's type and operator for ranks_wire's (wct, wop), or -1. */
static int nccl_type(int wct)
{
    switch (wct) {
    case CT_BOOL: return NCCL_U8;
    case CT_I32: return NCCL_I32;
    case CT_U32: return NCCL_U32;
    case CT_I64: return NCCL_I64;
    case CT_U64: return NCCL_U64;
    case CT_F32: return NCCL_F32;
    case CT_F64: return NCCL_F64;
    }
    return -1;
}

static int nccl_op(int wop)
{
    switch (wop) {
    case ROP_SUM: return NCCL_SUM;
    case ROP_PROD: return NCCL_PROD;
    case ROP_MIN: return NCCL_MIN;
    case ROP_MAX: return NCCL_MAX;
    }
    return -1;
}

/* NCCL has no bitwise operators: those partials are gathered and merged.  Float sums and
 * products go through its all-reduce too: the same bits on every rank (its last phase
 * hands every rank the same sums) and in every run of the same sizes (its algorithm is
 * chosen from them), though not the bits of a merge in rank order.  Float minima and
 * maxima are gathered: NCCL's drop NaN, redjit's keep it. */
static int nccl_reducible(int rop, int ct)
{
    if (ct == CT_BOOL) return rop == ROP_LAND || rop == ROP_LOR || rop == ROP_MIN || rop == ROP_MAX;
    if (ct == CT_F32 || ct == CT_F64) return rop == ROP_SUM || rop == ROP_PROD;
    return CT_IS_INT(ct) && (rop == ROP_SUM || rop == ROP_PROD || rop == ROP_MIN || rop == ROP_MAX);
}

static int dev_allreduce(ranks_comm *c, void *buf, int64_t n, int ct, int rop, void *stream)
{
    nccl_engine *m = (nccl_engine *)c;
    if (gone(m)) return RED_ERR_COMM;
    int wct, wop;
    ranks_wire(ct, rop, &wct, &wop);
    int t = nccl_type(wct), op = nccl_op(wop);
    if (t < 0 || op < 0 || !nccl_reducible(rop, ct)) {
        snprintf(c->err, sizeof c->err, "no NCCL all-reduce for %s over %s", plan_rop_name(rop), plan_ct_name(ct));
        return RED_ERR_INTERNAL;
    }
    return nccl_called(m, "ncclAllReduce", nccl.AllReduce(buf, buf, (size_t)n, t, op, m->comm, stream), stream);
}

static int dev_allgather(ranks_comm *c, const void *send, void *recv, size_t bytes, void *stream)
{
    nccl_engine *m = (nccl_engine *)c;
    if (gone(m)) return RED_ERR_COMM;
    return nccl_called(m, "ncclAllGather", nccl.AllGather(send, recv, bytes, NCCL_U8, m->comm, stream), stream);
}

/* The flag's all-reduce opens a group that the next collective closes: NCCL then runs the two
 * as one, so that the flag costs no launch and no wait of its own. */
static int dev_flag(ranks_comm *c, const void *send, void *recv, void *stream)
{
    nccl_engine *m = (nccl_engine *)c;
    if (gone(m)) return RED_ERR_COMM;
    if (m->grouped) return engine_fail(c, "dev_flag", "a group is open already");
    nccl_result r = nccl.GroupStart();
    if (r != NCCL_OK) return engine_fail(c, "ncclGroupStart", nccl_words(r));
    m->grouped = 1;
    r = nccl.AllReduce(send, recv, 1, NCCL_U64, NCCL_MAX, m->comm, stream);
    if (r != NCCL_OK && r != NCCL_IN_PROGRESS) {
        m->grouped = 0;
        nccl.GroupEnd();
        return engine_fail(c, "ncclAllReduce", nccl_words(r));
    }
    return 0;
}

static int dev_flush(ranks_comm *c, void *stream)
{
    nccl_engine *m = (nccl_engine *)c;
    return m->grouped ? nccl_called(m, "ncclAllReduce", NCCL_OK, stream) : 0;
}

static int host_allreduce(ranks_comm *c, void *buf, int64_t n, int ct, int rop)
{
    nccl_engine *m = (nccl_engine *)c;
    size_t bytes = (size_t)n * (size_t)plan_ct_size(ct);
    int rc = stage_get(m, bytes + 1);
    if (!rc) rc = stage_in(m, 0, buf, bytes);
    if (!rc) rc = dev_allreduce(c, (void *)(uintptr_t)m->stage, n, ct, rop, m->s);
    if (!rc) rc = stage_out(m, 0, bytes);
    if (!rc) memcpy(buf, m->pinned, bytes);
    return rc;
}

static void engine_free(ranks_comm *c)
{
    nccl_engine *m = (nccl_engine *)c;
    const ranks_cuda *cu = &m->dev;
    cu->CtxSetCurrent(m->dev.ctx);
    if (m->s) cu->StreamSynchronize(m->s);
    if (m->comm && m->owned && !m->aborted) nccl.CommDestroy(m->comm);
    if (m->stage) cu->MemFree(m->stage);
    if (m->pinned) cu->MemFreeHost(m->pinned);
    if (m->s && cu->StreamDestroy) cu->StreamDestroy(m->s);
    free(m);
}

static const ranks_ops nccl_ops = {.name = "NCCL",
                                   .allgather = host_allgather,
                                   .allgather_start = host_allgather_start,
                                   .allgather_wait = host_allgather_wait,
                                   .allgatherv = host_allgatherv,
                                   .allreduce = host_allreduce,
                                   .reserve = reserve,
                                   .reducible = nccl_reducible,
                                   .dev_allgather = dev_allgather,
                                   .dev_allreduce = dev_allreduce,
                                   .dev_flag = dev_flag,
                                   .dev_flush = dev_flush,
                                   .free = engine_free};

int ranks_nccl_open(const void *nccl_comm, const void *id, int nranks, int rank, const ranks_cuda *dev,
                    ranks_comm **out, util_diag *diag)
{
    *out = NULL;
    int rc = nccl_ready(diag);
    if (rc) return rc;
    if (!nccl_comm && (nranks < 1 || rank < 0 || rank >= nranks))
        return util_diag_set(diag, RED_ERR_ARG, "rank %d of %d ranks: a rank runs from 0 to the number of ranks - 1",
                             rank, nranks);
    nccl_engine *m = calloc(1, sizeof *m);
    if (!m) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    m->base.ops = &nccl_ops;
    m->dev = *dev;
    const ranks_cuda *cu = dev;
    int r = cu->CtxSetCurrent(dev->ctx);
    if (!r) r = cu->StreamCreate(&m->s, 1 /* CU_STREAM_NON_BLOCKING */);
    /* the ranks' small messages never allocate: a rank failing to would leave the others
     * waiting in the collective it did not enter */
    if (!r && stage_get(m, 1)) r = 2 /* CUDA_ERROR_OUT_OF_MEMORY */;
    if (r) {
        cu_fail(m, "setting up the NCCL engine", r);
        rc = util_diag_set(diag, RED_ERR_DEVICE, "%s", m->base.err);
        engine_free(&m->base);
        return rc;
    }
    nccl_result nr = NCCL_OK;
    const char *what = "ncclCommInitRank";
    if (nccl_comm) {
        m->comm = (nccl_handle)nccl_comm;
    } else {
        /* with redjit's device current: NCCL takes the current one */
        nccl_id u;
        memcpy(u.internal, id, sizeof u.internal);
        nr = nccl.CommInitRank(&m->comm, nranks, u, rank);
        m->owned = nr == NCCL_OK;
        if (nr != NCCL_OK && m->comm) nccl.CommAbort(m->comm);   /* half made */
        if (nr != NCCL_OK) m->comm = NULL;
    }
    int cudev = -1;
    if (nr == NCCL_OK && (nr = nccl.CommUserRank(m->comm, &m->base.rank)) != NCCL_OK) what = "ncclCommUserRank";
    if (nr == NCCL_OK && (nr = nccl.CommCount(m->comm, &m->base.size)) != NCCL_OK) what = "ncclCommCount";
    if (nr == NCCL_OK && (nr = nccl.CommCuDevice(m->comm, &cudev)) != NCCL_OK) what = "ncclCommCuDevice";
    if (nr != NCCL_OK) {
        rc = util_diag_set(diag, RED_ERR_COMM, "%s: %s", what, nccl_words(nr));
    } else if (cudev != dev->ordinal) {
        rc = util_diag_set(diag, RED_ERR_DEVICE,
                           "the NCCL communicator is on GPU %d and redjit's context on GPU %d: make the "
                           "communicator's device current (cudaSetDevice) before redjit first uses the GPU",
                           cudev, dev->ordinal);
    }
    if (rc) {
        engine_free(&m->base);
        return rc;
    }
    *out = &m->base;
    return 0;
}
