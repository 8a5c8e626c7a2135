/*
 * exec.h -- the CPU executor: runs every pass of a plan on host arrays with
 * OpenMP.  Work is cut into fixed chunks of the linearised domain, never by
 * thread count, so the same input gives the same bits on any number of
 * threads.  It is also the reference the GPU backend is tested against.
 */
#ifndef RED_EXEC_H
#define RED_EXEC_H

#include "check/plan.h"
#include "cpu/vm.h"

/* Temporaries computed by a run (results point into them). */
typedef struct cpu_temps {
    int n;
    vm_buf *t;          /* data malloc'd, contiguous, dtype of the ct    */
} cpu_temps;

/* Extents and ranges of the plan's variables for one set of bindings. */
/* Interruption: the run stops when *counter no longer equals seen. */
typedef struct cpu_cancel {
    const int *counter;
    int seen;
} cpu_cancel;

static inline int cpu_cancelled(const cpu_cancel *c)
{
    return c && c->counter && __atomic_load_n(c->counter, __ATOMIC_RELAXED) != c->seen;
}

int cpu_execute(const plan *p, const vm_buf *bufs, const plan_value *scalars, int nthreads,
                const cpu_cancel *cancel, cpu_temps *out, util_diag *diag);
void cpu_temps_free(cpu_temps *t);

/* Shared with the GPU backend: the extent of an inferred index from the
 * shapes it subscripts, or an error naming both conflicting arrays. */
int cpu_infer_extent(const plan *p, int var, const vm_buf *bufs, int64_t *ext, util_diag *diag);

#endif
