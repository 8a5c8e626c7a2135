/*
 * hook.h -- what a backend calls between the passes of a plan, for a caller that must act
 * there: the distributed runs (src/ranks/) agree on each pass's status across ranks and
 * combine the ranks' partial results before the next pass reads them.
 */
#ifndef RED_CORE_HOOK_H
#define RED_CORE_HOOK_H

#include "check/plan.h"
#include "core/extents.h"
#include "core/results.h"

/* The device memory of a GPU run between two passes, for a hook that moves its temporaries
 * (whose data are then device pointers).  Copies wait for the work queued before them. */
typedef struct core_devmem {
    void *arg;
    void *stream;           /* the run's CUstream: a collective on its temporaries goes there */
    int (*to_host)(void *arg, void *dst, const void *src, size_t bytes, util_diag *diag);
    int (*to_device)(void *arg, void *dst, const void *src, size_t bytes, util_diag *diag);
    /* device memory for the rest of the run */
    int (*scratch)(void *arg, size_t bytes, void **dev, util_diag *diag);
    /* the device's fault record's first word (nonzero: a fault), and a word that comes back
     * with the run's results (gpu_run's ranks_fault) for a collective to write; NULL where the
     * backend has none */
    void *fault, *ranks_fault;
} core_devmem;

typedef struct core_pass_hook {
    /* After pass `pass` was walked with status `rc` (0, or the error it set in `diag`), before
     * the checks of its results (argmin/argmax over nothing): the status the run goes on with.
     * Called for every pass the run starts, whatever its status.  `mem`: NULL on the CPU, the
     * run's device memory on the GPU. */
    int (*walked)(void *arg, const plan *p, int pass, int rc, const core_vars *v, core_results *temps,
                  const core_devmem *mem, util_diag *diag);
    /* After those checks: the same, for a status every caller must agree on.  Only a backend
     * that checks between passes calls it (the CPU); the GPU's checks come at the run's end. */
    int (*ended)(void *arg, const plan *p, int pass, int rc, util_diag *diag);
    /* A keyed pass counted its keys (*nkeys, status rc; ends: the first and the last
     * element's keys, NULL for no elements): the status to go on with, and the count every
     * rank's partials are sized for (the largest). */
    int (*keys)(void *arg, const plan *p, int pass, int rc, int64_t *nkeys, const int64_t *ends, util_diag *diag);
    void *arg;
} core_pass_hook;

/* A run that failed (rc) before its first pass: the hook hears it where it would have heard
 * that pass (its keys where it is keyed, then walked, and ended where the backend calls it),
 * so that the other ranks, which are there, hear it too.  The status to return. */
static inline int core_hook_failed_early(const core_pass_hook *h, const plan *p, int rc, int with_ended,
                                         util_diag *diag)
{
    if (!h || !p->npasses) return rc;
    int64_t nokeys = 0;
    core_vars novars = {0};
    core_results none = {0};
    if (p->passes[0].key && h->keys) rc = h->keys(h->arg, p, 0, rc, &nokeys, NULL, diag);
    rc = h->walked(h->arg, p, 0, rc, &novars, &none, NULL, diag);
    return with_ended ? h->ended(h->arg, p, 0, rc, diag) : rc;
}

#endif
