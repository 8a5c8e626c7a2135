/*
 * extents.h -- the one per-run resolution of a plan's index ranges: each
 * pass's free and reduced extents from the bound shapes, explicit ranges and
 * earlier passes' key counts, the temporaries' shapes, and the limits and
 * overflow checks on all of them.  Both backends call it, so they accept and
 * refuse the same bindings with the same messages.
 */
#ifndef RED_CORE_EXTENTS_H
#define RED_CORE_EXTENTS_H

#include <stdint.h>

#include "check/plan.h"
#include "core/buf.h"

/* The most elements one pass may walk: 2^40 is minutes of work on a CPU and
 * seconds on a GPU; a larger domain (a range from a stray value, say) is
 * refused with RED_ERR_LIMIT rather than run for days. */
#define CORE_MAX_DOMAIN ((int64_t)1 << 40)

/* The ranges of a plan's variables during one run, known pass by pass: a
 * variable runs over lo..hi-1.  Arrays of p->nvars, zeroed, the caller's. */
typedef struct core_vars {
    int64_t *lo, *hi;
    int *done;          /* a free variable's range is known                */
} core_vars;

/* Evaluates a range bound: integer IR that depends on no index (scalars,
 * constants, loads at constant positions).  The CPU executor runs it in its
 * VM; the API hands the GPU runtime one that does the same on host arrays. */
typedef int (*core_bound_fn)(void *arg, const plan *p, ir *x, int64_t *out, util_diag *diag);
typedef struct core_bounds {
    core_bound_fn eval;
    void *arg;
} core_bounds;

/* One pass's domain for one run.  Outputs are the free variables' box
 * (row-major, outermost first); each output reduces over the reduced box. */
typedef struct core_domain {
    int nf, fvar[RED_MAX_DIMS];
    int64_t flo[RED_MAX_DIMS], fext[RED_MAX_DIMS];
    int64_t nout;               /* product of fext                           */
    int nr, rvar[RED_MAX_DIMS];
    int64_t rlo[RED_MAX_DIMS], rsz[RED_MAX_DIMS];   /* uniform dims only   */
    int ranged;                 /* some reduced range differs per output:
                                   its rlo/rsz are unset, the backend
                                   evaluates it per output               */
    int64_t L;                  /* product of the uniform reduced sizes      */
    int64_t N;                  /* nout * L: the whole domain unless ranged  */
} core_domain;

/* core_resolve_pass flags */
enum {
    /* explicit reduced ranges that depend on no free index are evaluated
     * here (the CPU); without it every explicit reduced range counts as
     * ranged, for a backend that evaluates them per output on the device */
    CORE_EVAL_UNIFORM_RANGES = 1
};

/* Resolve pass `pass`: the free variables' ranges (into `v`, once each),
 * the reduced ones (uniform into `dom`, or dom->ranged) and the domain's
 * size, checked against overflow and CORE_MAX_DOMAIN.  A keyed pass's key
 * variable is set by the backend after it counts the keys
 * (core_set_key_count).  Returns 0 or a red_status with `diag` set. */
int core_resolve_pass(const plan *p, int pass, const core_buf *bufs, const core_bounds *bounds,
                      int flags, core_vars *v, core_domain *dom, util_diag *diag);

/* The key variable of a keyed pass takes its count of distinct keys. */
void core_set_key_count(const plan *p, int pass, core_vars *v, int64_t nkeys);

/* The shape of temporary `t` (contiguous, row-major) from its variables'
 * ranges into `out` (name ""), and its size in bytes; RED_ERR_LIMIT past
 * CORE_MAX_DOMAIN elements.  out->data is left alone. */
int core_temp_shape(const plan *p, int t, const core_vars *v, core_buf *out, size_t *bytes,
                    util_diag *diag);

/* The extent of an inferred index from the shapes it subscripts, or an error
 * naming both conflicting arrays. */
int core_infer_extent(const plan *p, int var, const core_buf *bufs, int64_t *ext, util_diag *diag);

/* A scan over ranged rows (plan_scan_ranged) writes row r's results at its
 * range, so the ranges must tile the result's 0..K in order: the first starts
 * at 0, none ends before it starts (CSR bounds: each starts where the one
 * before ends) and the last ends at K.  The error for the broken rule `what`
 * at row `row` (`value`: the range's start or end), worded the same for both
 * backends. */
enum { CORE_TILE_START, CORE_TILE_BACK, CORE_TILE_END };
int core_scan_tile_error(const plan *p, int pass, int what, int64_t row, int64_t value, int64_t K, util_diag *diag);

#endif
