/*
 * tuning.h -- the values the generated kernels are tuned with, as data apart
 * from the generator: one struct, filled once a process from its defaults
 * and the REDJIT_* overrides (bench/TUNING.md, "Code generation", has the
 * measurements behind each value and the table of overrides).
 */
#ifndef RED_CG_TUNING_H
#define RED_CG_TUNING_H

typedef struct cg_tuning {
    int unroll_one;   /* RJ_UNROLL where an element is one load with no check of its own */
    int unroll;       /* RJ_UNROLL for every other pass                                 */
    int vunroll;      /* RJ_VUNROLL: 16-byte loads of each array in flight in rj_run_v */
    int kvt;          /* RJ_KVT: vectors a lane of rj_kfusedv takes a tile; 0 the
                         kernel chooses, -1 no 16-byte loads for keyed passes          */
    int kdb;          /* RJ_KDB: rj_kfusedv issues a tile's loads while the one before
                         folds (1) or as it comes (0)                                  */
    int kminb;        /* RJ_KMINB: blocks an SM rj_kfusedv is compiled for             */
} cg_tuning;

/* The defaults, before any override. */
extern const cg_tuning cg_tuning_defaults;

/* The process's tuning: the defaults with the environment's REDJIT_UNROLL,
 * REDJIT_VUNROLL, REDJIT_KVT, REDJIT_KDB and REDJIT_KMINB applied (values
 * outside the valid ones are ignored), read once on the first call;
 * thread-safe.  The pointer stays valid for the life of the process. */
const cg_tuning *cg_tuning_get(void);

#endif
