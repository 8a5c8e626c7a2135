/*
 * unroll.h -- a run's plan with its small inner reductions written out: a pass that sums or
 * multiplies over a reduced box of a few elements (the coordinates of a point, d in 0..3) into a
 * temporary that only the next pass reads, each element of it once, is dropped, and the next
 * pass reads the few terms in its place.  The temporary (N^2 elements for N points) is never
 * written, and the next pass sees the operand parts its tiles reuse (x[i,0], y[j,1], ...).
 * Both backends run the plan it gives; the sizes decide, so it is made per binding.
 */
#ifndef RED_CORE_UNROLL_H
#define RED_CORE_UNROLL_H

#include "core/extents.h"

/* Reduced boxes of at most this many elements are written out. */
#define CORE_UNROLL_MAX 8

/* Passes dropped from one plan, at most. */
#define CORE_UNROLL_PASSES 4

/* What the unrolled plan depends on besides the plan: the passes dropped and the reduced
 * boxes written out (each reduced index's lo..hi-1, in the pass's order). */
typedef struct core_unroll_key {
    uint64_t base_uid;
    int n;
    int pass[CORE_UNROLL_PASSES];
    int pad;                    /* (zero: keys are compared with memcmp) */
    int64_t lo[CORE_UNROLL_PASSES][RED_MAX_DIMS], hi[CORE_UNROLL_PASSES][RED_MAX_DIMS];
} core_unroll_key;

/* The passes of `p` that may be dropped whatever the sizes, as bits (pass < 32): made once per
 * plan, so that a run of a plan with none costs nothing more. */
uint32_t core_unroll_candidates(const plan *p);

/* Whether `p` has a pass to drop for these bindings, among `candidates` (bounds: for the free
 * indices' explicit ranges): 1 with *key filled, else 0 (nothing to do, or the bindings fail
 * in a way the run itself will report). */
int core_unroll_find(const plan *p, uint32_t candidates, const core_buf *bufs, const core_bounds *bounds,
                     core_unroll_key *key);

/* The plan for `key` (core_unroll_find's), made in `a`: the dropped passes gone, their
 * readers reading the terms.  0 or RED_ERR_NOMEM. */
int core_unroll_make(const plan *p, const core_unroll_key *key, util_arena *a, plan **out);

#endif
