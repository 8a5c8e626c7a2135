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
#define CPU_SPARES 4
typedef struct cpu_temps {
    int n;
    vm_buf *t;          /* data malloc'd, contiguous, dtype of the ct    */
    /* The large host buffers of the run before, kept for this one: memory
     * new from malloc is faulted in page by page as it is first written,
     * which made a GPU run's 89 MB result take 64 ms to come back from a
     * 0.12 ms kernel (cpu_temps_alloc, cpu_temps_free, cpu_temps_trim). */
    struct {
        void *p;
        size_t cap;
    } spare[CPU_SPARES];
    /* Set by a backend that keeps a record of some large buffers (the GPU
     * backend's page-locked ones): leave(leave_arg, p) is called before a
     * buffer of 256 KiB or more is freed or handed to the caller. */
    void (*leave)(void *arg, void *p);
    void *leave_arg;
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
/* A host buffer of `bytes` for a temporary of `t` (zeroed with `zero`): a
 * spare one of the run before of the same size where there is one (*reused
 * set), else new.  NULL when out of memory. */
void *cpu_temps_alloc(cpu_temps *t, size_t bytes, int zero, int *reused);
/* Give the temporaries back: large buffers become spares for the next run's
 * cpu_temps_alloc, the rest are freed. */
void cpu_temps_free(cpu_temps *t);
/* Free the spares (the end of a run: what it did not take; red_finalize). */
void cpu_temps_trim(cpu_temps *t);
/* Buffer p, of `bytes`, leaves the temporaries for the caller (t->leave). */
void cpu_temps_leave(cpu_temps *t, void *p, size_t bytes);

/* Shared with the GPU backend: the extent of an inferred index from the
 * shapes it subscripts, or an error naming both conflicting arrays. */
int cpu_infer_extent(const plan *p, int var, const vm_buf *bufs, int64_t *ext, util_diag *diag);

#endif
