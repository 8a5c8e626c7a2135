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
#include "core/hook.h"
#include "core/results.h"
#include "cpu/vm.h"

int cpu_execute(const plan *p, const core_buf *bufs, const plan_value *scalars, int nthreads,
                const core_cancel *cancel, core_results *out, util_diag *diag);
/* cpu_execute with `hook` (may be NULL) called between passes (core/hook.h), also when the
 * run fails before its first pass; a run with a hook walks every pass on its own, never a
 * reduction and its epilogue together. */
int cpu_execute_hooked(const plan *p, const core_buf *bufs, const plan_value *scalars, int nthreads,
                       const core_cancel *cancel, const core_pass_hook *hook, core_results *out,
                       util_diag *diag);

/* The partials of reduction `rd` from `nparts` sources (the ranks of a distributed run),
 * combined in source order, as the executor combines its chunks: n outputs; component c of
 * source k at comp[k][c] (arrays of rd->acc[c], or for argmin/argmax the extreme value at
 * comp[k][0], of rd->acc[0], and the index at idx[k]); a source
 * with has[k] == 0 is left out, as is an argmin/argmax partial whose index is negative,
 * and, where `count` is given, output o of a source whose count[k][o] is 0.
 * Written to out[c] (and out_idx; -1 where no source had one). */
int cpu_merge_partials(const plan *p, const plan_red *rd, int nparts, int64_t n, void *const *const *comp,
                       const int64_t *const *idx, const int *has, const int64_t *const *count, void *const *out, int64_t *out_idx, util_diag *diag);

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
