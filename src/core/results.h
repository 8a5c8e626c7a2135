/*
 * results.h -- the results store: the temporaries one run computes (the
 * caller's results point into them), in host memory, with the large buffers
 * of the run before kept for the next.  Both backends fill it; the API reads
 * results out of it.
 */
#ifndef RED_CORE_RESULTS_H
#define RED_CORE_RESULTS_H

#include <stddef.h>

#include "core/buf.h"

/* Large buffers kept from one run to the next: memory new from malloc is
 * faulted in page by page as it is first written, which costs more than the
 * work of a short run (bench/TUNING.md). */
#define CORE_SPARES 4

/* A backend's work buffers kept from one run to the next (the CPU's per-output
 * ranges, 24 bytes a CSR row: new memory each run, faulted in again, took
 * most of the run's time): a run takes them back by size, frees at its end
 * those it did not, and keeps its own; the expression frees the last. */
#define CORE_SCRATCH 4
typedef struct core_scratch {
    void *p[CORE_SCRATCH];
    size_t cap[CORE_SCRATCH];
} core_scratch;

typedef struct core_results {
    int n;
    core_buf *t;        /* one per plan temporary; data malloc'd (or device
                           memory where the GPU backend leaves a result)   */
    struct {
        void *p;
        size_t cap;
    } spare[CORE_SPARES];
    /* Set by a backend that keeps a record of some large buffers (the GPU
     * backend's page-locked ones): leave(leave_arg, p) is called before a
     * buffer of CORE_SPARE_MIN or more is freed or handed to the caller. */
    void (*leave)(void *arg, void *p);
    void *leave_arg;
    core_scratch scratch;   /* the last run's work buffers (core_scratch_*) */
} core_results;

/* Buffers from this size up are kept as spares (glibc serves them with mmap,
 * so each new one is untouched memory). */
#define CORE_SPARE_MIN ((size_t)256 << 10)

/* A host buffer of `bytes` (zeroed with `zero`): a spare of the run before
 * of that very size where there is one (*reused set), else new.  NULL when
 * out of memory. */
void *core_results_alloc(core_results *t, size_t bytes, int zero, int *reused);
/* Give the temporaries back: large buffers become spares for the next run's
 * core_results_alloc, the rest are freed. */
void core_results_free(core_results *t);
/* Free the spares (the end of a run: what it did not take; red_finalize). */
void core_results_trim(core_results *t);
/* Buffer p, of `bytes`, leaves the store for the caller (t->leave). */
void core_results_leave(core_results *t, void *p, size_t bytes);

/* A buffer of `bytes`: one of s's of that very size where there is one (taken
 * out of s), else new (core_big_alloc).  NULL when out of memory. */
void *core_scratch_take(core_scratch *s, size_t bytes);
/* Keep p, of `bytes`, in s (freed where s is full); p may be NULL. */
void core_scratch_put(core_scratch *s, void *p, size_t bytes);
/* Free s's buffers. */
void core_scratch_free(core_scratch *s);

/* Memory for a buffer of `n` bytes about to be written whole: from 32 MiB up
 * 2 MiB-aligned with transparent huge pages asked for, so that its first
 * writes fault 512 times fewer pages.  Freed with free(). */
void *core_big_alloc(size_t n);

#endif
