/*
 * ranks.h -- runs over arrays split across ranks: the engine interface the collectives go
 * through (MPI for host arrays, NCCL for device arrays), and the plan a rank runs on its blocks (the whole text's plan with
 * its split indices walked over this rank's block only, and index values made global).
 */
#ifndef RED_RANKS_H
#define RED_RANKS_H

#include <stddef.h>
#include <stdint.h>

#include "check/plan.h"
#include "core/extents.h"
#include "core/hook.h"
#include "core/results.h"

/* ---- engines ------------------------------------------------------------------------------ */

typedef struct ranks_comm ranks_comm;

/* What a run's collectives watch: its red_interrupt counter; `abandoned`, set by an engine that
 * aborted a collective that never ended, after which the run's agreements are made by no
 * collective (every engine attached to the context watches the same one). */
typedef struct ranks_watch {
    const core_cancel *cancel;
    int abandoned;
} ranks_watch;

typedef struct ranks_ops {
    const char *name;
    /* `bytes` from every rank, in rank order, into recv (size * bytes) */
    int (*allgather)(ranks_comm *c, const void *send, void *recv, size_t bytes);
    /* the same in two halves, where the engine can overlap it with other work (else NULL):
     * started, then waited for; no other collective of the engine in between */
    int (*allgather_start)(ranks_comm *c, const void *send, size_t bytes);
    int (*allgather_wait)(ranks_comm *c, void *recv);
    /* rank r's counts[r] bytes into recv + displs[r] */
    int (*allgatherv)(ranks_comm *c, const void *send, void *recv, const size_t *counts, const size_t *displs);
    /* n values of compute type ct, in place, with a plan_rop that is exact in any order (integer and
     * logical built-in operators the engine has: reducible) */
    int (*allreduce)(ranks_comm *c, void *buf, int64_t n, int ct, int rop);
    /* room for host all-gathers of up to `bytes` from each rank, taken now so that the
     * collective itself allocates nothing (NULL: the engine never needs any) */
    int (*reserve)(ranks_comm *c, size_t bytes);
    /* whether allreduce combines partials of rop over ct exactly (in any order) */
    int (*reducible)(int rop, int ct);
    /* allgather and allreduce on device memory, queued on `stream` (a CUstream) behind the work
     * there, returning once they are done; NULL for an engine of host memory only */
    int (*dev_allgather)(ranks_comm *c, const void *send, void *recv, size_t bytes, void *stream);
    int (*dev_allreduce)(ranks_comm *c, void *buf, int64_t n, int ct, int rop, void *stream);
    /* the largest of the ranks' 64-bit words at `send` into `recv` (device memory), queued
     * on `stream` with the next device collective, as one (NULL where the engine cannot) */
    int (*dev_flag)(ranks_comm *c, const void *send, void *recv, void *stream);
    /* the device collectives queued with `stream` so far, waited for (after dev_flag with
     * no collective after it) */
    int (*dev_flush)(ranks_comm *c, void *stream);
    void (*free)(ranks_comm *c);
} ranks_ops;

struct ranks_comm {
    const ranks_ops *ops;
    int rank, size;
    char err[256];          /* the engine's words for its last failure (RED_ERR_COMM) */
    /* the run's, while a run uses the engine (else NULL): an engine that can abort a
     * collective that does not end once the run is interrupted does (nccl.c says when), sets
     * `abandoned` and returns RED_ERR_INTERRUPTED */
    ranks_watch *watch;
};

/* The GPU an engine of device memory works on, redjit's own (its primary context), and the
 * driver calls it makes there, as the CUDA driver API declares them (the API fills them in
 * from the GPU backend's table: nothing here sees the backend). */
struct CUctx_st;
struct CUstream_st;
#define RANKS_CUDA_NOT_READY 600     /* CUDA_ERROR_NOT_READY */
typedef struct ranks_cuda {
    int ordinal;
    struct CUctx_st *ctx;
    int (*CtxSetCurrent)(struct CUctx_st *);
    int (*MemAlloc)(unsigned long long *, size_t);
    int (*MemFree)(unsigned long long);
    int (*MemcpyHtoDAsync)(unsigned long long, const void *, size_t, struct CUstream_st *);
    int (*MemcpyDtoHAsync)(void *, unsigned long long, size_t, struct CUstream_st *);
    int (*StreamCreate)(struct CUstream_st **, unsigned);
    int (*StreamDestroy)(struct CUstream_st *);   /* may be NULL */
    int (*StreamSynchronize)(struct CUstream_st *);
    int (*StreamQuery)(struct CUstream_st *);
    int (*GetErrorName)(int, const char **);
    int (*MemHostAlloc)(void **, size_t, unsigned);
    int (*MemFreeHost)(void *);
} ranks_cuda;

/* The MPI engine on a duplicate of *(MPI_Comm *)mpi_comm; RED_ERR_UNSUPPORTED in a build
 * without MPI. */
int ranks_mpi_open(const void *mpi_comm, ranks_comm **out, util_diag *diag);
/* Whether MPI's all-reduce combines partials of rop over ct exactly (any order). */
int ranks_reducible(int rop, int ct);
/* How any engine's all-reduce moves partials of rop over ct: as compute type *wct (a sum or
 * product of signed integers as the unsigned type of the width, whose wrapping gives the same
 * bits) with operator *wop (logical and/or as min/max: booleans are 0 / 1 bytes). */
void ranks_wire(int ct, int rop, int *wct, int *wop);

/* NCCL (libnccl.so.2, or the file REDJIT_NCCL_LIB names, loaded with dlopen on first use).
 * The unique id (RANKS_NCCL_ID bytes) one rank makes and hands to the others. */
#define RANKS_NCCL_ID 128
int ranks_nccl_unique_id(void *id, util_diag *diag);
/* The NCCL engine on device `dev`: on the caller's communicator `nccl_comm` (an ncclComm_t,
 * which stays the caller's), or, with nccl_comm NULL, on one made here from `id` for `rank` of
 * `nranks` (collective over those ranks; freed with the engine).  Its host collectives are
 * staged through device memory. */
int ranks_nccl_open(const void *nccl_comm, const void *id, int nranks, int rank, const ranks_cuda *dev,
                    ranks_comm **out, util_diag *diag);

/* ---- the plan a rank runs ----------------------------------------------------------------- */

#define RANKS_MAX_SPLIT 64       /* split indices of one plan (one per whole-array reduction) */

typedef struct ranks_plan {
    util_arena arena;
    uint64_t base_uid;          /* the whole text's plan this was made from */
    char *axes;                 /* its bound arrays' split axes, as made ("-1,0,...")     */
    plan *p;                    /* to run: index values global, split extents local         */
    int nsplit;                 /* split indices                                            */
    int var[RANKS_MAX_SPLIT];    /* their variables                                          */
    int buf[RANKS_MAX_SPLIT];    /* a split array that gives each its blocks                 */
    int off_scalar;             /* scalar slot of the first one's offset, one slot each     */
    int cut_scalar;             /* and of where a range of its own is cut, two slots each    */
    int *split_of_var;          /* per variable: index into var[], or -1                    */
    int *pass_split;            /* per pass: the split index it reduces over, or -1         */
    int *reds0;                 /* per pass: its reductions in the text's plan; those added
                                   after them (argval, count) serve them                   */
    int **argval;               /* per pass and reduction: for argmin/argmax over a split
                                   index, the temporary of its extreme value; else -1      */
    int *count;                 /* per pass: for a keyed one over a split index with a user
                                   operator, the temporary of each key's element count; -1   */
    int *temp_split;            /* per temporary: the dimension that is split, or -1        */
    int *pass_offsets;          /* per pass: it reads a rank's offset (a split index's value) */
} ranks_plan;

/* The plan for `p` when its bound arrays are split along axis[b] (-1: whole); refusals
 * (RED_ERR_UNSUPPORTED) point at the text.  Free with ranks_plan_free. */
int ranks_plan_build(const plan *p, const int *axis, ranks_plan **out, util_diag *diag);
void ranks_plan_free(ranks_plan *dp);

/* ---- agreeing ------------------------------------------------------------------------------ */

/* Every rank's status agreed: `rc` here; the first failing rank's status everywhere, with its
 * message after "rank N: " on the others.  An engine failure is RED_ERR_COMM. */
int ranks_agree(ranks_comm *c, int rc, util_diag *diag);
/* The same, in the same one collective, with `bytes` of `mine` from every rank into `every`
 * (size * bytes, rank order; filled whatever the status). */
int ranks_agree_with(ranks_comm *c, int rc, const void *mine, void *every, size_t bytes, util_diag *diag);

/* ranks_agree_with in two halves: started (the collective under way where the engine can),
 * then finished where the caller needs its outcome; `heard`, called once the ranks agree on
 * success, draws what follows from `every` (alike on every rank). */
typedef struct ranks_hello {
    ranks_comm *comm;
    size_t bytes;
    void *every;
    int (*heard)(void *arg, util_diag *diag);
    void *arg;
    const void *mine;           /* for ranks_hello_settle of one not started */
    /* kept between the halves */
    int started, done, rc;
    void *sent, *got;
} ranks_hello;
int ranks_hello_start(ranks_hello *h, int rc, const void *mine, util_diag *diag);
/* The agreed status (every later call returns it again). */
int ranks_hello_finish(ranks_hello *h, util_diag *diag);
/* Finished, started first with status rc and h->mine where it was not: the agreed status. */
int ranks_hello_settle(ranks_hello *h, int rc, util_diag *diag);

/* ---- one run ------------------------------------------------------------------------------- */

typedef struct ranks_run {
    ranks_comm *comm;
    ranks_plan *dp;
    const int64_t *ext;         /* [nsplit * size]: each rank's extent of each split index */
    const int64_t *off;         /* [nsplit * size]: where each rank's block starts          */
    ranks_hello *hello;         /* not yet made: the first hook makes it, with its status,
                                   as the agreement on its pass (ranks_hello_settle); or NULL */
    ranks_comm *ctl;            /* the ranks' status goes through this one: MPI where it is
                                   attached (quick for small messages, and unharmed by a GPU
                                   that failed), else `comm`                                */
    int fold_ok;                /* no collective follows the run (no result is gathered) */
    int folded;                 /* set by the hook: the run's last pass was split, and every
                                   rank's device fault went with its partials (core_devmem's
                                   ranks_fault), so that only a fault there wants the ranks'
                                   agreement after the run                                 */
} ranks_run;

/* The hook that agrees on each pass's status across ranks and combines the partials of a
 * reduction over a split index (arg: a ranks_run). */
extern const core_pass_hook ranks_hook_proto;

#endif
