/*
 * ranks.h -- runs over arrays split across ranks: the engine interface the collectives go
 * through (MPI today), and the plan a rank runs on its blocks (the whole text's plan with
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

typedef struct ranks_ops {
    const char *name;
    /* `bytes` from every rank, in rank order, into recv (size * bytes) */
    int (*allgather)(ranks_comm *c, const void *send, void *recv, size_t bytes);
    /* rank r's counts[r] bytes into recv + displs[r] */
    int (*allgatherv)(ranks_comm *c, const void *send, void *recv, const size_t *counts, const size_t *displs);
    /* n values of compute type ct, in place, with a plan_rop that is exact in any order (integer and
     * logical built-in operators: ranks_reducible) */
    int (*allreduce)(ranks_comm *c, void *buf, int64_t n, int ct, int rop);
    void (*free)(ranks_comm *c);
} ranks_ops;

struct ranks_comm {
    const ranks_ops *ops;
    int rank, size;
    char err[256];          /* the engine's words for its last failure (RED_ERR_COMM) */
};

/* The MPI engine on a duplicate of *(MPI_Comm *)mpi_comm; RED_ERR_UNSUPPORTED in a build
 * without MPI. */
int ranks_mpi_open(const void *mpi_comm, ranks_comm **out, util_diag *diag);
/* Whether the engine's all-reduce combines partials of rop over ct exactly (any order). */
int ranks_reducible(int rop, int ct);

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
    int *split_of_var;          /* per variable: index into var[], or -1                    */
    int *pass_split;            /* per pass: the split index it reduces over, or -1         */
    int *reds0;                 /* per pass: its reductions in the text's plan; those added
                                   after them (argval, count) serve them                   */
    int **argval;               /* per pass and reduction: for argmin/argmax over a split
                                   index, the temporary of its extreme value; else -1      */
    int *count;                 /* per pass: for a keyed one over a split index with a user
                                   operator, the temporary of each key's element count; -1   */
    int *temp_split;            /* per temporary: the dimension that is split, or -1        */
} ranks_plan;

/* The plan for `p` when its bound arrays are split along axis[b] (-1: whole); refusals
 * (RED_ERR_UNSUPPORTED) point at the text.  Free with ranks_plan_free. */
int ranks_plan_build(const plan *p, const int *axis, ranks_plan **out, util_diag *diag);
void ranks_plan_free(ranks_plan *dp);

/* ---- one run ------------------------------------------------------------------------------- */

typedef struct ranks_run {
    ranks_comm *comm;
    ranks_plan *dp;
    const int64_t *ext;         /* [nsplit * size]: each rank's extent of each split index */
    const int64_t *off;         /* [nsplit * size]: where each rank's block starts          */
} ranks_run;

/* The hook that agrees on each pass's status across ranks and combines the partials of a
 * reduction over a split index (arg: a ranks_run). */
extern const core_pass_hook ranks_hook_proto;

/* Every rank's status agreed: `rc` here; the first failing rank's status everywhere, with its
 * message after "rank N: " on the others.  An engine failure is RED_ERR_COMM. */
int ranks_agree(ranks_comm *c, int rc, util_diag *diag);

#endif
