/*
 * results.c -- the results store (results.h): host buffers for a run's
 * temporaries, the large ones kept from one run to the next.
 */
#define _DEFAULT_SOURCE   /* madvise */
#include "core/results.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/dtype.h"

/* From 32 MiB (glibc's largest threshold for mapping a block of its own)
 * huge pages pay; below it malloc may hand back memory already faulted in.
 * The figures: bench/TUNING.md, "Host buffers". */
void *core_big_alloc(size_t n)
{
    const size_t huge = (size_t)2 << 20;
    if (n < ((size_t)32 << 20) || n > SIZE_MAX - huge) return malloc(n ? n : 1);   /* the second: malloc fails */
    size_t len = (n + huge - 1) / huge * huge;
    void *p = aligned_alloc(huge, len);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, len, MADV_HUGEPAGE);   /* advice: failure changes nothing */
#endif
    return p;
}

void *core_scratch_take(core_scratch *s, size_t bytes)
{
    for (int i = 0; i < CORE_SCRATCH; i++)
        if (s->p[i] && s->cap[i] == bytes) {
            void *p = s->p[i];
            s->p[i] = NULL;
            return p;
        }
    return core_big_alloc(bytes);
}

void core_scratch_put(core_scratch *s, void *p, size_t bytes)
{
    if (!p) return;
    for (int i = 0; i < CORE_SCRATCH; i++)
        if (!s->p[i]) {
            s->p[i] = p;
            s->cap[i] = bytes;
            return;
        }
    free(p);
}

void core_scratch_free(core_scratch *s)
{
    for (int i = 0; i < CORE_SCRATCH; i++) {
        free(s->p[i]);
        s->p[i] = NULL;
    }
}

void core_results_leave(core_results *t, void *p, size_t bytes)
{
    if (p && t->leave && bytes >= CORE_SPARE_MIN) t->leave(t->leave_arg, p);
}

static void temps_drop(core_results *t, void *p, size_t bytes)
{
    core_results_leave(t, p, bytes);
    free(p);
}

void *core_results_alloc(core_results *t, size_t bytes, int zero, int *reused)
{
    int best = -1;
    if (reused) *reused = 0;
    if (bytes >= CORE_SPARE_MIN)
        for (int i = 0; i < CORE_SPARES && best < 0; i++)
            if (t->spare[i].p && t->spare[i].cap == bytes) best = i;
    /* zeroed: calloc's pages come zero from the kernel, where
     * core_big_alloc's would need a memset */
    if (best < 0) return zero ? calloc(bytes ? bytes : 1, 1) : core_big_alloc(bytes);
    void *p = t->spare[best].p;
    t->spare[best].p = NULL;
    if (zero) memset(p, 0, bytes);
    if (reused) *reused = 1;
    return p;
}

void core_results_free(core_results *t)
{
    if (!t->t) return;
    for (int i = 0; i < t->n; i++) {
        void *p = (void *)t->t[i].data;
        if (!p) continue;
        size_t bytes = (size_t)red_dtype_size(t->t[i].dtype);
        for (int d = 0; d < t->t[i].ndim; d++) bytes *= (size_t)(t->t[i].shape[d] > 0 ? t->t[i].shape[d] : 0);
        int kept = 0;
        for (int j = 0; j < CORE_SPARES && bytes >= CORE_SPARE_MIN && !kept; j++)
            if (!t->spare[j].p) {
                t->spare[j].p = p;
                t->spare[j].cap = bytes;
                kept = 1;
            }
        if (!kept) temps_drop(t, p, bytes);
    }
    free(t->t);
    t->t = NULL;
    t->n = 0;
}

void core_results_trim(core_results *t)
{
    for (int i = 0; i < CORE_SPARES; i++) {
        temps_drop(t, t->spare[i].p, t->spare[i].cap);
        t->spare[i].p = NULL;
    }
}
