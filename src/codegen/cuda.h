/*
 * cuda.h -- CUDA source generation: one self-contained source per plan pass
 * (no CUB or Thrust: NVRTC compiles it in tens of milliseconds).  The source
 * depends only on the pass, never on sizes or strategy: sizes travel in a
 * parameter block and the strategy picks which entry kernels to launch, so a
 * compiled module serves every size and every strategy of that pass.
 */
#ifndef RED_CG_CUDA_H
#define RED_CG_CUDA_H

#include "check/plan.h"

/* Parameter slots 0..CG_RESERVED-1 are the fixed ones of rj_prelude.cuh. */
#define CG_RESERVED 10
#define CG_MAX_PARAMS 4000

typedef struct cg_layout {
    int nparams;
    int *buf_base;      /* per bound array: ptr, then shape[nd], strides[nd] */
    int *temp_base;     /* per temporary: the same                          */
    int *scalar_slot;   /* per scalar: its bits                             */
    int *var_lo, *var_sz;/* per variable: start and extent (uniform ones)   */
} cg_layout;

typedef struct cg_kernel {
    util_buf src;
    cg_layout lay;
    int kind;           /* CG_MAP, CG_FULL, CG_PARTIAL, CG_KEYED            */
    int acc_size;       /* bytes of the generated Acc (workspace partials)  */
    int ordered;        /* an ordered user operator is in the pass          */
    int ranged;         /* a reduced index has an explicit range            */
} cg_kernel;

enum { CG_MAP, CG_FULL, CG_PARTIAL, CG_KEYED };

/* Generate the source for pass `pi`.  Allocations for the layout come from
 * `a`; the source buffer must be freed with util_buf_free. */
int cg_generate(const plan *p, int pi, util_arena *a, cg_kernel *out, util_diag *diag);

/* The embedded device helpers (generated at build time from .cuh files). */
extern const char rj_prelude_cuh[];
extern const char rj_reduce_cuh[];

#endif
