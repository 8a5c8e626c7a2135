/*
 * exec.h -- the CPU executor: runs every pass of a plan on host arrays with
 * OpenMP.  Work is cut into fixed chunks of the linearised domain, never by
 * thread count, so the same input gives the same bits on any number of
 * threads.  It is also the reference the GPU backend is tested against.
 */
#ifndef RED_EXEC_H
#define RED_EXEC_H

#include "check/plan.h"
#include "core/buf.h"
#include "core/extents.h"
#include "core/results.h"
#include "cpu/vm.h"

int cpu_execute(const plan *p, const core_buf *bufs, const plan_value *scalars, int nthreads,
                const core_cancel *cancel, core_results *out, util_diag *diag);

/* A range bound evaluated in the VM over host memory: the core_bound_fn the
 * executor resolves ranges with.  The API hands it to the GPU runtime too,
 * with `on_device` set: a bound that reads a device array, or a temporary,
 * is then refused (RED_ERR_UNSUPPORTED) instead of read. */
typedef struct cpu_bound_arg {
    const core_buf *bufs;
    const plan_value *scalars;
    core_buf *temps;            /* NULL: none can be read                   */
    const int *on_device;       /* per bound array, or NULL: all host       */
} cpu_bound_arg;
int cpu_eval_bound(void *arg, const plan *p, ir *x, int64_t *out, util_diag *diag);

#endif
