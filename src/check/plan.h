/*
 * plan.h -- the backend-independent plan the checker produces and both the
 * CPU executor and the CUDA code generator consume.
 *
 * A plan is a list of passes over index domains.  Each pass walks the
 * product of its free indices (the output elements) and, per output, its
 * reduced indices (a box whose bounds may depend on the output), evaluates
 * typed map expressions (IR) for every element and folds them with one or
 * more reduction operators into temporaries.  Nested reductions and the
 * arithmetic around reductions become later passes that read those
 * temporaries.  Results name temporaries.
 *
 * IR nodes are hash-consed: structurally equal subtrees are the same
 * pointer, which gives common-subexpression elimination and lets reductions
 * over the same domain be fused into one pass by pointer comparison.
 */
#ifndef RED_PLAN_H
#define RED_PLAN_H

#include <stdint.h>

#include "util.h"

/* Compute types (f16/bf16 are storage-only and compute as f32). */
typedef enum plan_ct {
    CT_BOOL, CT_I32, CT_I64, CT_U32, CT_U64, CT_F32, CT_F64, CT_COUNT
} plan_ct;

#define CT_IS_FLOAT(t) ((t) == CT_F32 || (t) == CT_F64)
#define CT_IS_INT(t) ((t) >= CT_I32 && (t) <= CT_U64)
#define CT_IS_SIGNED(t) ((t) == CT_I32 || (t) == CT_I64)

const char *plan_ct_name(int ct);
int plan_ct_of_dtype(red_dtype t);
red_dtype plan_dtype_of_ct(int ct);
int plan_ct_size(int ct);

typedef enum ir_kind {
    IR_CONST,   /* c (typed)                                           */
    IR_INDEX,   /* value of index variable `slot` (i64)               */
    IR_SCALAR,  /* bound scalar `slot`, converted to `type`           */
    IR_LOAD,    /* buffer `slot` at subscripts args[0..nargs-1] (i64):
                   slot >= 0 a bound array, slot < 0 temporary -1-slot */
    IR_PARAM,   /* user-operator parameter component `slot`           */
    IR_CAST,    /* args[0] converted to `type`                        */
    IR_OP       /* `op` applied to args; operand types are explicit   */
} ir_kind;

typedef enum ir_op {
    /* unary */
    OP_NEG, OP_NOT, OP_BNOT, OP_ABS, OP_SQRT, OP_EXP, OP_LOG, OP_LOG2, OP_LOG10,
    OP_SIN, OP_COS, OP_TAN, OP_TANH, OP_FLOOR, OP_CEIL, OP_ROUND, OP_ISNAN,
    OP_ISFINITE, OP_F16ROUND, OP_BF16ROUND,
    /* binary */
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_BAND, OP_BOR, OP_BXOR, OP_SHL,
    OP_SHR, OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE, OP_LAND, OP_LOR, OP_MIN,
    OP_MAX, OP_POW, OP_HYPOT, OP_ATAN2,
    /* ternary */
    OP_FMA, OP_SELECT,
    OP_COUNT_
} ir_opcode;

#define OP_IS_UNARY(o) ((o) <= OP_BF16ROUND)
#define OP_IS_TERNARY(o) ((o) == OP_FMA || (o) == OP_SELECT)
const char *plan_op_name(int op);

typedef union plan_value {
    int64_t i;   /* CT_BOOL, CT_I32, CT_I64 (sign-extended)            */
    uint64_t u;  /* CT_U32, CT_U64                                     */
    double f;    /* CT_F32 (exactly representable), CT_F64             */
} plan_value;

typedef struct ir ir;
struct ir {
    uint8_t kind;       /* ir_kind  */
    uint8_t type;       /* plan_ct: type of the value                      */
    uint8_t op;         /* ir_op for IR_OP                                 */
    uint8_t nargs;
    int32_t slot;       /* INDEX: var; SCALAR: scalar; LOAD: buffer; PARAM */
    plan_value c;       /* CONST                                           */
    ir **args;
    uint32_t hash;
    int32_t id;         /* creation number: a stable order for backends    */
    util_pos pos;       /* LOAD: the subscripted text, for index errors.
                           Not part of the structural identity.           */
};

/* The operators check/fuse.c makes: (max, sum of exp(x - max)) pairs and
 * Welford's (count, mean, centred sum of squares). */
enum { PLAN_ONLINE_NONE, PLAN_ONLINE_EXP_SUM, PLAN_ONLINE_WELFORD };

/* Reduction operators. */
typedef enum plan_rop {
    ROP_SUM, ROP_PROD, ROP_MIN, ROP_MAX, ROP_BAND, ROP_BOR, ROP_BXOR, ROP_LAND,
    ROP_LOR, ROP_ARGMIN, ROP_ARGMAX, ROP_USER
} plan_rop;
const char *plan_rop_name(int rop);

#define PLAN_TEMP_SLOT(t) (-1 - (t))
#define PLAN_MAX_COMP 16   /* fields of a user-defined operator's tuple */

/* An index variable.  Free variables of a pass run over 0..extent; reduced
 * variables over lo..hi, where lo and hi may depend on the pass's free
 * variables (ranges) and are evaluated per output element. */
typedef struct plan_constraint {
    int buf;            /* bound array slot                              */
    int dim;
    int64_t offset;     /* subscript is `v + offset`                     */
    util_pos pos;
    int var;            /* the index the subscript used: the owner, or one
                           whose pass it joined (check/fuse.c), for messages */
} plan_constraint;

typedef struct plan_var {
    const char *name;   /* as written ("_0".. for whole-array indices)   */
    util_pos pos;       /* first mention                                  */
    ir *lo, *hi;        /* explicit range, or NULL: inferred             */
    int nconstraints;
    plan_constraint *constraints;
    int key_pass;       /* >= 0: the extent is the key count of that pass */
} plan_var;

typedef struct plan_red {
    int rop;            /* plan_rop                                        */
    util_pos pos;       /* the reduction's text, for errors                */
    int ncomp;          /* components: 1, or the user operator's tuple size */
    ir *map[PLAN_MAX_COMP];   /* value per element, already in acc type   */
    int acc[PLAN_MAX_COMP];   /* accumulator compute types               */
    int temp[PLAN_MAX_COMP];  /* temporaries receiving the results;
                                 for argmin/argmax temp[0] gets the index  */
    /* user-defined operator */
    const char *uname;
    int ordered;
    int neutral;        /* made by the planner: the identity is neutral for
                           combine, so accumulators start from it (a user's
                           identity may only be a fill value for empty results) */
    int online;         /* PLAN_ONLINE_*: which planner-made operator, for
                           backends that fold it natively (combine says the same) */
    int skipnan;        /* argmin/argmax as nanargmin/nanargmax: an element whose
                           value is NaN is not folded (all NaN: none, an error) */
    int partial;        /* set by src/ranks: one rank's part of a reduction over a
                           split index, combined after the pass; an argmin/argmax
                           that finds nothing in it is no error until then */
    ir *combine[PLAN_MAX_COMP]; /* over IR_PARAM 2k (a's field k), 2k+1 (b's) */
    plan_value identity[PLAN_MAX_COMP];
    unsigned unread;    /* bit k: nothing reads temp[k] (no result, no later
                           pass: the field of a tuple-valued scan that `.1`
                           dropped), so a scan pass need not write it      */
} plan_red;

/* The name a reduction is written with: plan_rop_name's, "nanargmin" or
 * "nanargmax" for a skipnan one, the user operator's. */
const char *plan_red_name(const plan_red *rd);

typedef struct plan_pass {
    int nfree, free[RED_MAX_DIMS];   /* output dims, outermost first     */
    int nred, red[RED_MAX_DIMS];     /* reduced vars, outermost first    */
    ir *key;            /* `by` key (i64), or NULL                          */
    int key_var;        /* the var whose extent is the number of keys       */
    util_pos key_pos;
    int nreds;
    plan_red *reds;     /* nreds == 0: a map pass writing map_temp         */
    ir *map;
    int map_temp;
    /* a map pass that can run as the epilogue of the reduction pass before it
     * (check/fuse.c): its free indices are that pass's free indices followed
     * by none or all of its reduced ones (the same variables), and it reads
     * that pass's results at the pass's free indices only, so output o's
     * elements need only output o's reduction */
    int epilogue;
    /* a scan (prefix reduction; 1 inclusive, 2 exclusive: an element's result
     * folds the elements before it only, the first gets the identity; one
     * kind a pass): each output's reduced box is walked in
     * row-major order and every element gets the fold so far, so each
     * reduction's temporaries have the free indices and then the reduced
     * ones as dimensions (no ranges on them).  `reset` (i64, or NULL): a
     * segmented scan restarts where it differs from the previous element's
     * value, as by-key scans do. */
    int scan;
    ir *reset;
} plan_pass;

typedef struct plan_temp {
    int type;           /* plan_ct                                        */
    int ndim, dims[RED_MAX_DIMS];    /* var ids                            */
} plan_temp;

typedef struct plan_buf {            /* a bound array the plan reads      */
    const char *name;
    red_dtype dtype;
    int ndim;
} plan_buf;

typedef struct plan_scalar {
    const char *name;
    int type;           /* plan_ct of the bound value                      */
    int part;           /* a complex scalar is two: its real part (0), then
                           its imaginary part (1), of the part type       */
} plan_scalar;

typedef struct plan_result {
    const char *name;   /* "" unless assigned                              */
    int temp;
    int cplx;           /* complex: the temporary holds the parts, [..., 2] */
} plan_result;

typedef struct plan {
    util_arena *arena;
    uint64_t uid;       /* unique in the process: caches key on it, never on
                           the address, which a later plan may reuse        */
    const char *src;
    int nbufs;   plan_buf *bufs;     /* bound arrays (IR_LOAD slot >= 0)     */
    int ntemps;  plan_temp *temps;   /* temporaries (IR_LOAD slot -1-t)      */
    int nscalars; plan_scalar *scalars;
    int nvars;   plan_var *vars;
    int npasses; plan_pass *passes;
    int nresults; plan_result *results;
    int nir;     /* IR nodes created (ids are < nir) */
} plan;

/* ---- IR construction (hash-consed in the plan's arena) ---------------- */
typedef struct plan_builder plan_builder;
plan_builder *plan_builder_new(util_arena *a);
ir *ir_const(plan_builder *b, int type, plan_value v);
ir *ir_const_i(plan_builder *b, int type, int64_t v);
ir *ir_const_f(plan_builder *b, int type, double v);
ir *ir_index(plan_builder *b, int var);
ir *ir_scalar(plan_builder *b, int type, int slot);
ir *ir_param(plan_builder *b, int type, int slot);
ir *ir_load(plan_builder *b, int type, int buf, int nsub, ir **subs, util_pos pos);
ir *ir_cast(plan_builder *b, int type, ir *x);
ir *ir_op(plan_builder *b, int op, int type, int nargs, ir **args);
int plan_builder_count(plan_builder *b);
/* A new plan uid: unique in the process. */
uint64_t plan_next_uid(void);

/* Identity element of a built-in operator for a compute type. */
plan_value plan_identity(int rop, int ct);

/* A pass that is a matrix product, C[i,j] = sum(A[i,k]*B[k,j]) over k, or a batch of
 * them, C[b,i,j] = sum(A[b,i,k]*B[b,k,j]) over k: one sum (built in, one field) of one
 * product of two loads of bound arrays at plain indices, both of the accumulator's type,
 * f32 or f64; no keys, no scan, no range on k.  Which load is A (it reads i, not j) and
 * which B, and each index's dimension in them, are free.  Both backends take it from
 * here and add what they need (src/codegen/gemm.c, src/cpu/gemm.c). */
typedef struct plan_product {
    int ct;             /* CT_F32 or CT_F64                                */
    const ir *a, *b;    /* the loads of A and B                            */
    int var[4];         /* b (-1 without a batch), i, j, k                 */
    int adim[4], bdim[4];   /* the dimension of A and of B each reads (-1: none) */
} plan_product;
int plan_find_product(const plan *p, const plan_pass *ps, plan_product *out);

/* The index of a subscript `v` or `v + c` (c a constant, stored in *c), or NULL. */
const ir *plan_index_plus(const ir *x, int64_t *c);

/* Whether lo and hi are the same conversions of loads of one 1-D bound array at
 * `r + c` and `r + c + 1` (index r): range r ends where range r + 1 begins (CSR
 * offsets, `ptr[r]..ptr[r+1]`). */
int plan_csr_bounds(const ir *lo, const ir *hi, int r);

/* A scan over ranged rows (`cumsum(v[k]) over k in ptr[r]..ptr[r+1]`): one
 * free index r, one scanned index k over CSR bounds in r.  Its temporaries
 * are indexed by k alone (k's extent: the arrays k subscripts), each row's
 * results written at its own range, and the ranges must tile 0..K in order;
 * r is the pass's output, not an index of the result. */
int plan_scan_ranged(const plan *p, const plan_pass *ps);

/* Readable description (red_explain): passes, domains, maps, operators. */
void plan_explain(util_buf *out, const plan *p);
void ir_print(util_buf *out, const plan *p, const ir *x);

#endif
