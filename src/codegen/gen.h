/*
 * gen.h -- what the code generator's files share (not part of codegen's
 * interface, which is cuda.h): the state of one pass's generation and the
 * emitters each file offers the others.
 */
#ifndef RED_CG_GEN_H
#define RED_CG_GEN_H

#include "cuda.h"

extern const char *const cg_tname[CT_COUNT];   /* C++ type of each checked type */

typedef struct gen {
    const plan *p;
    const plan_pass *ps;
    const cg_tuning *tun;
    cg_kernel *k;
    util_buf *o;
    unsigned char *done;    /* by IR id: emitted in the current function */
    int nir;
    int in_user;            /* emitting a combine: params are p<slot>    */
    int pi;                 /* the pass                                  */
    int in_elem;            /* emitting acc_elem: loads are recorded      */
    int deferred;           /* a thread's rj_flt F notes bad subscripts   */
    int hoisted;            /* out_range checks ranged subscripts (below) */
    unsigned char *seen;    /* by IR id: visited by emit_range_checks      */
    unsigned char *vmemo;   /* by IR id: vec.c's vec_loads, 1 yes, 2 no    */
    int ro_loads;           /* bound arrays loaded with __ldg (epilogue.c) */
    const ir *vloads[8];    /* the pass's 16-byte loads (cg_kernel.vec), for epilogue.c */
    signed char vkind[8];   /* how vec_loads reads each (CG_V_FULL ...)         */
    int vbc;                /* vec_loads takes cg_kernel.vec_bc's loads too   */
} gen;

/* layout.c: the parameter block and the index variables read from it */
int cg_layout_params(gen *g, util_arena *a, util_diag *diag);
int cg_buf_base(gen *g, int slot);
red_dtype cg_buf_dtype(gen *g, int slot);
void cg_emit_free_vars(gen *g, const char *o);
void cg_emit_red_vars(gen *g, const char *t);
void cg_emit_temp_offset(gen *g, int temp, const char *o_name);

/* expr.c: IR nodes as single-assignment statements */
void cg_literal(util_buf *o, int type, plan_value v);
void cg_ref(gen *g, const ir *x);
void cg_emit(gen *g, const ir *x);
void cg_begin_function(gen *g);
int cg_ranged_subscript(const gen *g, const ir *s, int *v, int64_t *c);
/* Does any reduction of pass ps read an index other than its reduced ones (vec.c)? */
int cg_fold_reads_free(const plan_pass *ps);
int cg_proven_in_range(gen *g, const ir *x, int d);
/* A load whose element is its value (storage of its compute type, 4 or 8 bytes), and the
 * load of such an element straight into shared memory at dst (cp.async; rj_cp_async_wait_all) */
int cg_load_is_plain(gen *g, const ir *x);
void cg_emit_load_async(gen *g, const ir *x, const char *dst);

/* acc.c: the accumulator and the functions the strategies call */
int cg_is_arg(int rop);
void cg_emit_acc_struct(gen *g);
void cg_emit_user_ops(gen *g);
void cg_emit_acc_funcs(gen *g);
void cg_emit_acc_elem(gen *g);
void cg_emit_fold(gen *g);
void cg_emit_acc_write(gen *g);
void cg_emit_acc_stores(gen *g);
/* long long NAME(F, P, [o,] lo, sz, t): `key` at element t (of output o, whose free
 * indices it may read, where with_free); key_at is a keyed pass's */
void cg_emit_key_fn(gen *g, const char *name, const ir *key, int with_free);
void cg_emit_key_at(gen *g);
void cg_emit_map_kernel(gen *g);

/* range.c: out_range, with the once-an-output range checks */
void cg_emit_out_range(gen *g);

/* tile.c: the operand's parts along the reduced indices alone, staged per tile (cg_kernel.tile) */
void cg_emit_tile(gen *g, util_arena *a);
void cg_emit_tile2(gen *g, util_arena *a);
/* gemm.c: a matrix product that cuBLASLt may run (cg_kernel.gemm) */
void cg_find_gemm(gen *g);

/* vec.c: 16-byte loads for contiguous reductions */
void cg_emit_acc_elem_v(gen *g);

/* epilogue.c: the next pass run per output of this one (RJ_EPI; 0 none) */
int cg_epilogue_kind(const plan *p, int pi);
int cg_emit_epilogue(gen *g, util_arena *a);

/* scan.c: scan_store and scan_key for rj_scan.cuh */
void cg_emit_scan(gen *g);

/* tuning.c: RJ_UNROLL for a pass whose acc_elem is emitted (it records the loads) */
int cg_unroll(const cg_tuning *t, const cg_kernel *k);

#endif
