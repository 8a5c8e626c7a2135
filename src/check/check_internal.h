/*
 * check_internal.h -- what the checker's files share: the lowering state (ck),
 * scopes, values under lowering, and the ck_ functions one file calls in another.
 */
#ifndef RED_CHECK_INTERNAL_H
#define RED_CHECK_INTERNAL_H

#include "check.h"

#include <stdint.h>
#include <string.h>

#define MAX_VARS 1024     /* limits of the plan's tables, which grow from */
#define MAX_PASSES CHK_MAX_PASSES /* a few entries by doubling (in the arena)     */
#define MAX_TEMPS 1024
#define MAX_LETS 256
#define MAX_OPS 64
/* The longest path through the IR of one value: a chain x+x+...+x is not
 * nesting (ast.h), but the stages after this one (the CPU program's and the
 * CUDA kernel's generators, the plan's printer) walk IR recursively, a C
 * stack frame per step of the longest path.  A path of 2048 steps ran in
 * 1.5 MB of stack (2 MB under ASan), about what 512 levels of nesting take
 * here, and well inside a thread's usual 8 MB. */
#define MAX_CHAIN 2048
/* Lowering steps for one program (calls of ck_lower).  A named value is
 * lowered again at each use, so names built from names can expand a short
 * text exponentially (a0 = x*x; a1 = a0*a0; ... doubles per line): without a
 * bound, 40 such lines ran for minutes.  A program without names takes about
 * one step per syntax node (at most AST_MAX_NODES); 4M steps take about a
 * second on the development machine. */
#define MAX_LOWER_STEPS (4L * AST_MAX_NODES)

/* A value during lowering: one IR per component (tuples have several). */
typedef struct val {
    int n;
    int tuple;
    int weak;           /* 0 typed; 1 weak integer; 2 weak float (literals) */
    int cplx;           /* a complex number: n 2, c[0] the real part, c[1] the
                           imaginary one, both f32 or both f64 (complex.c)  */
    ir *c[PLAN_MAX_COMP];
} val;

typedef struct scope scope;
struct scope {
    scope *parent;
    int accepts;                /* implicit indices are reduced here       */
    int nvars, vars[64];        /* explicit and implicit vars bound here   */
    int nanon, anon[RED_MAX_DIMS];   /* whole-array indices               */
    int has_anon, has_sub;      /* whole arrays / subscripted arrays seen  */
    const ast_node *whole_node; /* first whole array, for errors           */
    const ast_node *sub_node;
};

typedef struct user_op {
    const ast_stmt *st;
} user_op;

typedef struct ck {
    const ast_program *prog;
    const char *src;
    const chk_binding *binds;
    int nbinds;
    util_arena *a;
    plan_builder *b;
    util_diag *diag;
    plan *p;
    int *buf_of_bind, *scalar_of_bind;
    /* lets visible now (substituted at use) */
    int nlets, visible_lets;
    const ast_stmt *lets[MAX_LETS];
    int let_busy[MAX_LETS];
    int nops;
    const ast_stmt *ops[MAX_OPS];
    /* names that appear in subscripts, over clauses or range bounds */
    int nidx_names;
    const char **idx_names;
    /* inside a user operator's combine: its parameters */
    const ast_stmt *in_op;
    int op_ncomp;
    int op_types[PLAN_MAX_COMP];
    /* lowering range bounds of this reduction: its own indices are banned */
    const ast_node *bound_owner;
    /* a result's index written `x in lo..hi` with lo not 0 (check.c): the
     * variable runs over 0..hi-lo and the name reads as that + lo */
    int nalias, alias_var[RED_MAX_DIMS];
    ir *alias_ir[RED_MAX_DIMS];
    /* calls of ck_lower() open now: named values and operator bodies are
     * lowered where they are used, inside the levels of the text around
     * them, so the parser's bound on nesting is enforced again here */
    int depth;
    long steps;                 /* calls of ck_lower so far (MAX_LOWER_STEPS) */
    /* the IR walk under way (reduce.c): nodes seen, by id, and ck_subst's results */
    uint32_t *walk_stamp, stamp;
    ir **walk_val;
    size_t walk_cap;
    int32_t *irdepth;           /* IR depth by node id; 0: not measured yet */
    int cap_irdepth;
    int cap_vars, cap_passes, cap_temps;   /* of p->vars, p->passes, p->temps */
    int max_passes;                        /* chk_limits's, at most MAX_PASSES */
} ck;

#define TRY(x)                   \
    do {                         \
        int rc_ = (x);           \
        if (rc_) return rc_;     \
    } while (0)

/* ---- errors (check.c) ------------------------------------------------------ */

int ck_err_at(ck *c, util_pos pos, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static inline int ck_nomem(ck *c) { return util_diag_set(c->diag, RED_ERR_NOMEM, "out of memory"); }

/* ---- plan growth (check.c) ------------------------------------------------- */

/* Room for one more pass: 0, or the error (a limit or out of memory). */
int ck_grow_passes(ck *c, const char *what);
/* A new index variable: its id, -1 at the limit, -2 out of memory. */
int ck_new_var(ck *c, const char *name, util_pos pos);
int ck_add_constraint(ck *c, int var, int buf, int dim, int64_t off, util_pos pos);
/* index `to` takes on every shape check of index `from` (a merged pass's
 * indices; nothing for the same index or a ranged one) */
int ck_take_constraints(ck *c, int to, int from);
/* The same from any index, ranged ones too (a ranged scan's result index). */
int ck_share_constraints(ck *c, int to, int from);
int ck_new_temp(ck *c, int type, int ndim, const int *dims);

/* ---- lowering: the dispatcher and the depth of the IR (check.c) ------------- */

int ck_lower(ck *c, scope *s, const ast_node *n, val *out);
int ck_check_chain(ck *c, util_pos pos, const val *v);

/* ---- types (ops.c) ---------------------------------------------------------- */

int ck_single(ck *c, const ast_node *n, const val *v);
/* The value of index variable v where its name is read: ir_index(v), or its alias. */
ir *ck_index_value(ck *c, int v);

static inline val ck_mk(ir *x, int weak)
{
    val v = {.n = 1, .weak = weak};
    v.c[0] = x;
    return v;
}

/* ---- names and did you mean (names.c) --------------------------------------- */

scope *ck_accepting(scope *s);
/* The index named `name` visible in `s` (not a key index), or -1. */
int ck_find_var(const scope *s, const plan *p, const char *name);
int ck_scope_add(ck *c, scope *s, int var, util_pos pos);
int ck_is_idx_name(ck *c, const char *name);
int ck_find_bind(ck *c, const char *name);
int ck_find_let(ck *c, const char *name);
int ck_find_op(ck *c, const char *name);

/* The closest of the candidates offered to `word`: at most one edit away for
 * names of up to four letters, two for longer ones, and never a whole name
 * away (`a` does not suggest `x`).  The first of equally close ones wins. */
typedef struct suggest {
    const char *word, *best;
    int dist;
} suggest;
void ck_suggest_offer(suggest *sg, const char *cand);

/* ---- IR helpers ------------------------------------------------------------ */

static inline ir *ck_op2(ck *c, int op, int type, ir *x, ir *y)
{
    ir *a[2] = {x, y};
    return ir_op(c->b, op, type, 2, a);
}

static inline ir *ck_op1(ck *c, int op, int type, ir *x) { return ir_op(c->b, op, type, 1, &x); }

static inline ir *ck_to_bool(ck *c, ir *x) { return ir_cast(c->b, CT_BOOL, x); }

/* k ? a : b, of a's type (NULL where an operand is: out of memory) */
static inline ir *ck_sel(ck *c, ir *k, ir *a, ir *b)
{
    ir *args[3] = {k, a, b};
    return k && a && b ? ir_op(c->b, OP_SELECT, a->type, 3, args) : NULL;
}

/* Collect the index variables an IR tree uses, in order of first use. */
typedef struct varset {
    int n;
    int v[256];
} varset;
void ck_collect_vars(ck *c, const ir *x, varset *vs);   /* reduce.c */
/* A walk over the IR that visits each node once (the IR is a graph: one node
 * may be reached by 2^26 paths from a short text): ck_walk_begin starts one
 * (0: out of memory, walk without the memo), ck_walk_seen says whether this
 * walk has seen x, and marks it.  One walk at a time. */
int ck_walk_begin(ck *c);
int ck_walk_seen(ck *c, int on, const ir *x);
/* A load of temporary `temp` at index variables vars[0..nd-1]. */
ir *ck_load_temp(ck *c, int temp, int nd, const int *vars, util_pos pos);
/* `x` with index variables from[k] renamed to[k] (NULL: out of memory). */
ir *ck_subst(ck *c, ir *x, int n, const int *from, const int *to);
/* Do index variables a and b run over the same extent (the same range, or the
 * same constraints in the same order)? */
int ck_same_domain_var(const plan *p, int a, int b);
/* The last pass producing a temporary that `x` reads (-1: none). */
int ck_last_producer(ck *c, const ir *x);
/* Are a and b indices whose extents come from whole dimensions only, one of
 * which they share (then equal whenever a run passes its shape checks)? */
int ck_plain_pair(const plan *p, int a, int b);
/* ck_same_domain_var or ck_plain_pair: equal extents in every run that passes its checks */
int ck_equal_extents(const plan *p, int a, int b);
int ck_pass_matches(ck *c, const plan_pass *ps, int nfree, const int *fr, int nred, const int *rd,
                    ir *key, int by_shape);
/* Add reduction `rd` (its maps over the pass's indices) to `pass`, or find an
 * equal one there; temps_out[] gets its first ncomp_out temporaries. */
int ck_add_reduction(ck *c, int pass, const plan_red *rd, int ncomp_out, int *temps_out);

/* ---- lowering each kind of node ------------------------------------------------ */

/* names.c */
int ck_lower_name(ck *c, scope *s, const ast_node *n, val *out);
int ck_lower_index(ck *c, scope *s, const ast_node *n, val *out);
/* ops.c */
int ck_lower_unary(ck *c, scope *s, const ast_node *n, val *out);
/* complex.c */
int ck_is_cplx_dtype(red_dtype t);
val ck_cplx_mk(ir *re, ir *im);
int ck_cplx_binary(ck *c, const ast_node *n, int op, const char *text, val x, val y, val *out);
int ck_cplx_unary(ck *c, const ast_node *n, const val *x, val *out);
int ck_cplx_cond(ck *c, const ir *k, val x, val y, val *out);
ir *ck_cplx_truth(ck *c, const val *x);
int ck_cplx_call(ck *c, const ast_node *n, const char *name, const val *a, int nargs, val *out, int *done);
int ck_lower_binary(ck *c, scope *s, const ast_node *n, val *out);
int ck_lower_cond(ck *c, scope *s, const ast_node *n, val *out);
int ck_lower_call(ck *c, scope *s, const ast_node *n, val *out);
/* reduce.c */
int ck_lower_reduce(ck *c, scope *s, const ast_node *n, const char *opname, val *out);
/* a scan (AST_SCAN inclusive, AST_EXSCAN exclusive) of operator `opname` */
int ck_lower_scan(ck *c, scope *s, const ast_node *n, const char *opname, int scan, val *out);
int ck_op_from_name(const char *name);
int ck_lower_user_combine(ck *c, const ast_stmt *op, int ncomp, const int *types, ir **out);
/* fuse.c: a reduction that reads another one over its own domain, rewritten
 * into an online reduction in that one's pass (*done = 1, its value in *out) */
int ck_online_rewrite(ck *c, const ast_node *n, const plan_red *rd, ir *key, int nfree, const int *fr,
                      int nred, const int *red, val *out, int *done);
/* fuse.c: the name of the (max, sum of exp) pair whose first field is a max */
extern const char ck_max_pair_name[];
/* fuse.c: reduction passes over equal domains merged, once lowering is done */
int ck_merge_passes(ck *c);

#endif
