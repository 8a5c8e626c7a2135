/*
 * check.c -- the checker: resolves names, infers and checks types, finds the
 * index variables and what each reduction reduces, and lowers the program
 * into a plan of passes (plan.h).  Every reduction becomes a reduction in a
 * pass writing temporaries; the expression around it reads them.
 */
#include "check.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define MAX_VARS 1024     /* limits of the plan's tables, which grow from */
#define MAX_PASSES 256    /* a few entries by doubling (in the arena)     */
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

/* A value during lowering: one IR per component (tuples have several). */
typedef struct val {
    int n;
    int tuple;
    int weak;           /* 0 typed; 1 weak integer; 2 weak float (literals) */
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
    /* calls of ck_lower() open now: named values and operator bodies are
     * lowered where they are used, inside the levels of the text around
     * them, so the parser's bound on nesting is enforced again here */
    int depth;
    int32_t *irdepth;           /* IR depth by node id; 0: not measured yet */
    int cap_irdepth;
    int cap_vars, cap_passes, cap_temps;   /* of p->vars, p->passes, p->temps */
} ck;

static int ck_lower(ck *c, scope *s, const ast_node *n, val *out);

/* ---- errors -------------------------------------------------------------- */

static int ck_err_at(ck *c, util_pos pos, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int ck_err_at(ck *c, util_pos pos, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    util_diag_vat(c->diag, c->src, pos, code, fmt, ap);
    va_end(ap);
    return code;
}

static int ck_nomem(ck *c) { return util_diag_set(c->diag, RED_ERR_NOMEM, "out of memory"); }

#define TRY(x)                   \
    do {                         \
        int rc_ = (x);           \
        if (rc_) return rc_;     \
    } while (0)

/* ---- plan growth ----------------------------------------------------------- */

/* Room for one more entry in a table of `n` used, `*cap` allocated: returns
 * the table, or a twice larger copy in the arena when it was full (entries
 * are only ever referred to by index across a growth).  *err: 0, -1 at the
 * limit `max`, -2 out of memory (the table is then returned unchanged). */
static void *grow(ck *c, void *table, int *cap, int n, size_t elem, int max, int *err)
{
    *err = 0;
    if (n < *cap) return table;
    if (*cap >= max) {
        *err = -1;
        return table;
    }
    int ncap = *cap * 2 < max ? *cap * 2 : max;
    void *t = util_arena_alloc(c->a, (size_t)ncap * elem);
    if (!t) {
        *err = -2;
        return table;
    }
    if (n) memcpy(t, table, (size_t)n * elem);
    *cap = ncap;
    return t;
}

/* Room for one more pass: 0, or the error (a limit or out of memory). */
static int ck_grow_passes(ck *c, const char *what)
{
    plan *p = c->p;
    int err;
    p->passes = grow(c, p->passes, &c->cap_passes, p->npasses, sizeof *p->passes, MAX_PASSES, &err);
    if (err == -2) return ck_nomem(c);
    if (err) return util_diag_set(c->diag, RED_ERR_LIMIT, "%s (%d)", what, MAX_PASSES);
    return 0;
}

/* A new index variable: its id, -1 at the limit, -2 out of memory. */
static int ck_new_var(ck *c, const char *name, util_pos pos)
{
    plan *p = c->p;
    int err;
    p->vars = grow(c, p->vars, &c->cap_vars, p->nvars, sizeof *p->vars, MAX_VARS, &err);
    if (err) return err;
    plan_var *v = &p->vars[p->nvars];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->pos = pos;
    v->key_pass = -1;
    return p->nvars++;
}

static int ck_add_constraint(ck *c, int var, int buf, int dim, int64_t off, util_pos pos)
{
    plan_var *v = &c->p->vars[var];
    for (int i = 0; i < v->nconstraints; i++) {
        plan_constraint *k = &v->constraints[i];
        if (k->buf == buf && k->dim == dim && k->offset == off) return 0;
    }
    plan_constraint *nc = util_arena_alloc(c->a, (v->nconstraints + 1) * sizeof *nc);
    if (!nc) return ck_nomem(c);
    if (v->nconstraints) memcpy(nc, v->constraints, v->nconstraints * sizeof *nc);
    nc[v->nconstraints] = (plan_constraint){buf, dim, off, pos};
    v->constraints = nc;
    v->nconstraints++;
    return 0;
}

static int ck_new_temp(ck *c, int type, int ndim, const int *dims)
{
    plan *p = c->p;
    int err;
    p->temps = grow(c, p->temps, &c->cap_temps, p->ntemps, sizeof *p->temps, MAX_TEMPS, &err);
    if (err) return err;
    plan_temp *t = &p->temps[p->ntemps];
    t->type = type;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->dims[i] = dims[i];
    return p->ntemps++;
}

/* ---- types ---------------------------------------------------------------- */

/* Common type of two typed operands (docs/language.md, Promotion). */
static int promote(int x, int y)
{
    if (x == y) return x == CT_BOOL ? CT_BOOL : x;
    if (x == CT_BOOL) return y;
    if (y == CT_BOOL) return x;
    if (CT_IS_FLOAT(x) || CT_IS_FLOAT(y)) {
        if (x == CT_F64 || y == CT_F64) return CT_F64;
        return CT_F32;
    }
    /* two different integer types */
    int sx = CT_IS_SIGNED(x), sy = CT_IS_SIGNED(y);
    int wx = plan_ct_size(x), wy = plan_ct_size(y);
    if (sx == sy) return wx >= wy ? x : y;
    int w = wx > wy ? wx : wy;
    int uw = sx ? wy : wx;   /* width of the unsigned one */
    if (uw >= w) return CT_I64; /* same width (u32+i32) or u64 with signed */
    return sx ? x : y;          /* the signed one is wider */
}

/* Type both operands of a binary operation compute in, honouring weak
 * (literal) operands, and the weakness of the result. */
static int common(const val *x, const val *y, int *weak)
{
    int tx = x->c[0]->type, ty = y->c[0]->type;
    *weak = 0;
    if (x->weak && y->weak) {
        *weak = (x->weak == 2 || y->weak == 2) ? 2 : 1;
        return *weak == 2 ? CT_F64 : CT_I64;
    }
    if (x->weak || y->weak) {
        int w = x->weak ? x->weak : y->weak;
        int t = x->weak ? ty : tx;
        if (w == 1) return t == CT_BOOL ? CT_I64 : t;
        return CT_IS_FLOAT(t) ? t : CT_F64;
    }
    return promote(tx, ty);
}

static int ck_single(ck *c, const ast_node *n, const val *v)
{
    if (v->tuple)
        return ck_err_at(c, n->pos, RED_ERR_TYPE,
                      "a tuple of %d values cannot be used here; select a field with .0 .. .%d",
                      v->n, v->n - 1);
    return 0;
}

static val ck_mk(ir *x, int weak)
{
    val v = {.n = 1, .weak = weak};
    v.c[0] = x;
    return v;
}

/* ---- names ---------------------------------------------------------------- */

/* The index `name` visible in `s`.  The keys of a keyed result are indexed by
 * a variable the user cannot name: an index written `key` is the user's own. */
static int find_var(const scope *s, const plan *p, const char *name)
{
    for (; s; s = s->parent)
        for (int i = 0; i < s->nvars; i++)
            if (p->vars[s->vars[i]].key_pass < 0 && strcmp(p->vars[s->vars[i]].name, name) == 0)
                return s->vars[i];
    return -1;
}

static scope *ck_accepting(scope *s)
{
    while (s && !s->accepts) s = s->parent;
    return s;
}

static int ck_scope_add(ck *c, scope *s, int var, util_pos pos)
{
    if (s->nvars >= 64) return ck_err_at(c, pos, RED_ERR_LIMIT, "too many index variables in one reduction (64)");
    s->vars[s->nvars++] = var;
    return 0;
}

static int ck_is_idx_name(ck *c, const char *name)
{
    for (int i = 0; i < c->nidx_names; i++)
        if (strcmp(c->idx_names[i], name) == 0) return 1;
    return 0;
}

static int ck_find_bind(ck *c, const char *name)
{
    for (int i = 0; i < c->nbinds; i++)
        if (strcmp(c->binds[i].name, name) == 0) return i;
    return -1;
}

static int ck_find_let(ck *c, const char *name)
{
    for (int i = c->visible_lets - 1; i >= 0; i--)
        if (strcmp(c->lets[i]->name, name) == 0) return i;
    return -1;
}

static int ck_find_op(ck *c, const char *name)
{
    for (int i = 0; i < c->nops; i++)
        if (strcmp(c->ops[i]->name, name) == 0) return i;
    return -1;
}

/* ---- did you mean --------------------------------------------------------- */

/* Edit distance between two names: insertions, deletions, substitutions and
 * swaps of neighbours each count 1 (names past 32 bytes are never close). */
static int edit_distance(const char *a, const char *b)
{
    enum { N = 32 };
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > N || lb > N) return N + 1;
    int d[N + 1][N + 1];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

/* The closest of the candidates offered to `word`: at most one edit away for
 * names of up to four letters, two for longer ones, and never a whole name
 * away (`a` does not suggest `x`).  The first of equally close ones wins. */
typedef struct suggest {
    const char *word, *best;
    int dist;
} suggest;

static void ck_suggest_offer(suggest *sg, const char *cand)
{
    if (!cand || !*cand || strcmp(cand, sg->word) == 0) return;
    int lw = (int)strlen(sg->word), lc = (int)strlen(cand), longer = lw > lc ? lw : lc;
    int d = edit_distance(sg->word, cand);
    if (d > (longer <= 4 ? 1 : 2) || d >= longer) return;
    if (!sg->best || d < sg->dist) {
        sg->best = cand;
        sg->dist = d;
    }
}

/* Every name a plain name could have meant: bound arrays and scalars, named
 * values defined so far, the indices in scope (not the whole-array and key
 * indices, which have no name the user wrote), and the keyword literals. */
static void suggest_names(ck *c, const scope *s, suggest *sg)
{
    for (int i = 0; i < c->nbinds; i++) ck_suggest_offer(sg, c->binds[i].name);
    for (int i = 0; i < c->visible_lets; i++) ck_suggest_offer(sg, c->lets[i]->name);
    for (; s; s = s->parent)
        for (int i = 0; i < s->nvars; i++) {
            const plan_var *v = &c->p->vars[s->vars[i]];
            if (v->key_pass < 0 && !(v->name[0] == '_' && v->name[1] >= '0' && v->name[1] <= '9'))
                ck_suggest_offer(sg, v->name);
        }
    static const char *const words[] = {"true", "false", "inf", "nan"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) ck_suggest_offer(sg, words[i]);
}

/* An index variable named `name` used at `pos`: the existing one in scope,
 * or a new one reduced by the nearest reduction without `over` (or free at
 * the top level). */
static int index_var(ck *c, scope *s, const char *name, util_pos pos, int *out)
{
    if (c->bound_owner) {
        const ast_node *r = c->bound_owner;
        for (int i = 0; i < r->nover; i++)
            if (strcmp(r->over[i].name, name) == 0)
                return ck_err_at(c, pos, RED_ERR_SHAPE,
                              "a range bound cannot use '%s', an index this reduction reduces", name);
    }
    int v = find_var(s, c->p, name);
    if (v < 0) {
        scope *home = ck_accepting(s);
        v = ck_new_var(c, name, pos);
        if (v == -2) return ck_nomem(c);
        if (v < 0) return ck_err_at(c, pos, RED_ERR_LIMIT, "too many index variables");
        TRY(ck_scope_add(c, home, v, pos));
    }
    *out = v;
    return 0;
}

/* ---- IR helpers ------------------------------------------------------------ */

static ir *ck_op2(ck *c, int op, int type, ir *x, ir *y)
{
    ir *a[2] = {x, y};
    return ir_op(c->b, op, type, 2, a);
}

static ir *ck_op1(ck *c, int op, int type, ir *x) { return ir_op(c->b, op, type, 1, &x); }

static ir *ck_to_bool(ck *c, ir *x) { return ir_cast(c->b, CT_BOOL, x); }

/* Collect the index variables an IR tree uses, in order of first use. */
typedef struct varset {
    int n;
    int v[256];
} varset;

static void vs_add(varset *vs, int v)
{
    for (int i = 0; i < vs->n; i++)
        if (vs->v[i] == v) return;
    if (vs->n < 256) vs->v[vs->n++] = v;
}

static void ck_collect_vars(const plan *p, const ir *x, varset *vs)
{
    if (!x) return;
    if (x->kind == IR_INDEX) {
        vs_add(vs, x->slot);
        const plan_var *pv = &p->vars[x->slot];
        ck_collect_vars(p, pv->lo, vs);
        ck_collect_vars(p, pv->hi, vs);
        return;
    }
    for (int i = 0; i < x->nargs; i++) ck_collect_vars(p, x->args[i], vs);
}

/* Rebuild `x` with index variables renamed by `map` (from -> to). */
static ir *subst(ck *c, ir *x, int n, const int *from, const int *to)
{
    if (!x) return NULL;
    if (x->kind == IR_INDEX) {
        for (int i = 0; i < n; i++)
            if (x->slot == from[i]) return ir_index(c->b, to[i]);
        return x;
    }
    if (!x->nargs) return x;
    ir *args[RED_MAX_DIMS + 3];
    int changed = 0;
    for (int i = 0; i < x->nargs; i++) {
        args[i] = subst(c, x->args[i], n, from, to);
        if (!args[i]) return NULL;
        changed |= args[i] != x->args[i];
    }
    if (!changed) return x;
    if (x->kind == IR_CAST) return ir_cast(c->b, x->type, args[0]);
    if (x->kind == IR_LOAD) return ir_load(c->b, x->type, x->slot, x->nargs, args, x->pos);
    return ir_op(c->b, x->op, x->type, x->nargs, args);
}

/* ---- literals and names ---------------------------------------------------- */

static int ck_lower_name(ck *c, scope *s, const ast_node *n, val *out)
{
    const char *name = n->name;
    if (c->in_op) {
        const ast_stmt *op = c->in_op;
        for (int side = 0; side < 2; side++) {
            if (strcmp(op->param[side], name) != 0) continue;
            if (c->op_ncomp == 0)   /* lowering the identity: no parameters yet */
                return ck_err_at(c, n->pos, RED_ERR_TYPE,
                              "the identity of operator '%s' must be made of constants, not '%s'", op->name, name);
            val v = {.n = c->op_ncomp, .tuple = c->op_ncomp > 1};
            for (int k = 0; k < c->op_ncomp; k++)
                v.c[k] = ir_param(c->b, c->op_types[k], 2 * k + side);
            *out = v;
            return 0;
        }
        return ck_err_at(c, n->pos, RED_ERR_NAME,
                      "operator '%s' may use only its parameters '%s' and '%s', not '%s'",
                      op->name, op->param[0], op->param[1], name);
    }
    int v = find_var(s, c->p, name);
    if (v >= 0) {
        *out = ck_mk(ir_index(c->b, v), 0);
        return 0;
    }
    int l = ck_find_let(c, name);
    if (l >= 0) {
        if (c->let_busy[l])
            return ck_err_at(c, n->pos, RED_ERR_NAME, "'%s' is defined in terms of itself", name);
        c->let_busy[l] = 1;
        int rc = ck_lower(c, s, c->lets[l]->exprs[0], out);
        c->let_busy[l] = 0;
        return rc;
    }
    int bi = ck_find_bind(c, name);
    if (bi >= 0) {
        const chk_binding *bd = &c->binds[bi];
        if (!bd->is_array) {
            int t = plan_ct_of_dtype(bd->dtype);
            int weak = bd->weak ? (CT_IS_FLOAT(t) ? 2 : 1) : 0;
            *out = ck_mk(ir_scalar(c->b, t, c->scalar_of_bind[bi]), weak);
            return 0;
        }
        /* a whole array: its elements, walked by the scope's anonymous indices */
        scope *home = ck_accepting(s);
        if (home->has_sub)
            return ck_err_at(c, n->pos, RED_ERR_SHAPE,
                          "whole array '%s' mixed with subscripted arrays in one reduction; "
                          "write it with subscripts", name);
        if (!home->has_anon) {
            home->has_anon = 1;
            home->whole_node = n;
            home->nanon = bd->ndim;
            for (int d = 0; d < bd->ndim; d++) {
                char nm[16];
                snprintf(nm, sizeof nm, "_%d", d);
                int var = ck_new_var(c, util_arena_strndup(c->a, nm, strlen(nm)), n->pos);
                if (var == -2) return ck_nomem(c);
                if (var < 0) return ck_err_at(c, n->pos, RED_ERR_LIMIT, "too many index variables");
                home->anon[d] = var;
                TRY(ck_scope_add(c, home, var, n->pos));
            }
        } else if (home->nanon != bd->ndim) {
            return ck_err_at(c, n->pos, RED_ERR_SHAPE,
                          "'%s' has %d dimension%s but '%s' has %d: whole arrays combined "
                          "elementwise must have the same shape",
                          name, bd->ndim, bd->ndim == 1 ? "" : "s", home->whole_node->name,
                          home->nanon);
        }
        ir *subs[RED_MAX_DIMS];
        for (int d = 0; d < bd->ndim; d++) {
            subs[d] = ir_index(c->b, home->anon[d]);
            TRY(ck_add_constraint(c, home->anon[d], c->buf_of_bind[bi], d, 0, n->pos));
        }
        *out = ck_mk(ir_load(c->b, plan_ct_of_dtype(bd->dtype), c->buf_of_bind[bi], bd->ndim, subs,
                          n->pos), 0);
        return 0;
    }
    if (ck_find_op(c, name) >= 0)
        return ck_err_at(c, n->pos, RED_ERR_NAME,
                      "'%s' is a reduction operator; use it as reduce(%s, ...)", name, name);
    if (ck_is_idx_name(c, name)) {
        int var;
        TRY(index_var(c, s, name, n->pos, &var));
        *out = ck_mk(ir_index(c->b, var), 0);
        return 0;
    }
    suggest sg = {name, NULL, 0};
    suggest_names(c, s, &sg);
    if (sg.best)
        return ck_err_at(c, n->pos, RED_ERR_NAME, "unknown name '%s': did you mean '%s'?", name, sg.best);
    /* A range bound is an integer: a name there that is not an index (it
     * appears in no subscript and no over list) is a scalar not bound. */
    if (c->bound_owner)
        return ck_err_at(c, n->pos, RED_ERR_NAME,
                      "unknown name '%s': bind it as an integer (--set %s=... in the CLI, "
                      "red_bind_i64 in C)", name, name);
    return ck_err_at(c, n->pos, RED_ERR_NAME,
                  "unknown name '%s': bind an array or a scalar to it (--load %s=FILE.npy or "
                  "--set %s=... in the CLI, red_bind_array or red_bind_f64 in C)", name, name, name);
}

static int ck_lower_index(ck *c, scope *s, const ast_node *n, val *out)
{
    if (c->in_op)
        return ck_err_at(c, n->pos, RED_ERR_NAME, "operator '%s' may not read arrays", c->in_op->name);
    int bi = ck_find_bind(c, n->name);
    if (bi < 0 || !c->binds[bi].is_array) {
        if (ck_find_let(c, n->name) >= 0)
            return ck_err_at(c, n->name_pos, RED_ERR_TYPE,
                          "'%s' is a named value, not an array: it cannot be subscripted", n->name);
        if (bi >= 0)
            return ck_err_at(c, n->name_pos, RED_ERR_TYPE, "'%s' is a scalar: it cannot be subscripted",
                          n->name);
        suggest sg = {n->name, NULL, 0};
        for (int i = 0; i < c->nbinds; i++)
            if (c->binds[i].is_array) ck_suggest_offer(&sg, c->binds[i].name);
        if (sg.best)
            return ck_err_at(c, n->name_pos, RED_ERR_NAME, "unknown array '%s': did you mean '%s'?",
                          n->name, sg.best);
        return ck_err_at(c, n->name_pos, RED_ERR_NAME,
                      "unknown array '%s': bind it (--load %s=FILE.npy in the CLI, red_bind_array "
                      "in C)", n->name, n->name);
    }
    const chk_binding *bd = &c->binds[bi];
    if (n->nargs != bd->ndim)
        return ck_err_at(c, n->pos, RED_ERR_SHAPE, "'%s' has %d dimension%s but %d subscript%s given",
                      n->name, bd->ndim, bd->ndim == 1 ? "" : "s", n->nargs,
                      n->nargs == 1 ? " is" : "s are");
    scope *home = ck_accepting(s);
    if (home->has_anon)
        return ck_err_at(c, n->pos, RED_ERR_SHAPE,
                      "subscripted '%s' mixed with whole array '%s' in one reduction; "
                      "write '%s' with subscripts", n->name, home->whole_node->name,
                      home->whole_node->name);
    home->has_sub = 1;
    if (!home->sub_node) home->sub_node = n;
    int buf = c->buf_of_bind[bi];
    ir *subs[RED_MAX_DIMS];
    for (int d = 0; d < n->nargs; d++) {
        const ast_node *e = n->args[d];
        val v;
        if (e->kind == AST_NAME && find_var(s, c->p, e->name) < 0 && ck_find_let(c, e->name) < 0 &&
            ck_find_bind(c, e->name) < 0) {
            int var;
            TRY(index_var(c, s, e->name, e->pos, &var));
            v = ck_mk(ir_index(c->b, var), 0);
        } else {
            TRY(ck_lower(c, s, e, &v));
        }
        TRY(ck_single(c, e, &v));
        int t = v.c[0]->type;
        if (!CT_IS_INT(t))
            return ck_err_at(c, e->pos, RED_ERR_TYPE, "subscript of '%s' must be an integer, not %s",
                          n->name, plan_ct_name(t));
        ir *x = ir_cast(c->b, CT_I64, v.c[0]);
        if (!x) return ck_nomem(c);
        subs[d] = x;
        /* v or v + c (c >= 0) bounds the extent of v */
        if (x->kind == IR_INDEX) {
            TRY(ck_add_constraint(c, x->slot, buf, d, 0, e->pos));
        } else if (x->kind == IR_OP && x->op == OP_ADD) {
            ir *l = x->args[0], *r = x->args[1];
            if (l->kind == IR_CONST) {
                ir *t2 = l;
                l = r;
                r = t2;
            }
            if (l->kind == IR_INDEX && r->kind == IR_CONST && r->c.i >= 0)
                TRY(ck_add_constraint(c, l->slot, buf, d, r->c.i, e->pos));
        }
    }
    *out = ck_mk(ir_load(c->b, plan_ct_of_dtype(bd->dtype), buf, n->nargs, subs, n->pos), 0);
    if (!out->c[0]) return ck_nomem(c);
    return 0;
}

/* ---- the depth of the IR ------------------------------------------------------ */

/* The longest path from x to a leaf, counting the range bounds of the
 * indices it reads (later stages walk into those too); -1 out of memory.
 * Remembered by node id: ck_lower() measures every value it returns, so a call
 * recurses only through the few nodes built since their operands were
 * measured. */
static int ir_depth(ck *c, const ir *x)
{
    if (!x) return 0;
    if (x->id >= c->cap_irdepth) {
        int cap = c->cap_irdepth ? c->cap_irdepth : 1024;
        while (cap <= x->id) cap *= 2;
        int32_t *t = util_arena_alloc(c->a, (size_t)cap * sizeof *t);
        if (!t) return -1;
        memset(t, 0, (size_t)cap * sizeof *t);
        if (c->cap_irdepth) memcpy(t, c->irdepth, (size_t)c->cap_irdepth * sizeof *t);
        c->irdepth = t;
        c->cap_irdepth = cap;
    }
    if (c->irdepth[x->id]) return c->irdepth[x->id];
    int d = 0;
    const ir *sub[2] = {NULL, NULL};
    if (x->kind == IR_INDEX) {
        sub[0] = c->p->vars[x->slot].lo;
        sub[1] = c->p->vars[x->slot].hi;
    }
    for (int i = 0; i < x->nargs + 2; i++) {
        int a = ir_depth(c, i < x->nargs ? x->args[i] : sub[i - x->nargs]);
        if (a < 0) return -1;
        if (a > d) d = a;
    }
    return c->irdepth[x->id] = d + 1;
}

static int ck_check_chain(ck *c, util_pos pos, const val *v)
{
    for (int k = 0; k < v->n; k++) {
        int d = ir_depth(c, v->c[k]);
        if (d < 0) return ck_nomem(c);
        if (d > MAX_CHAIN)
            return ck_err_at(c, pos, RED_ERR_LIMIT,
                          "expression too long: the limit is %d operations in a chain", MAX_CHAIN);
    }
    return 0;
}

/* ---- operators -------------------------------------------------------------- */

static int ck_lower_unary(ck *c, scope *s, const ast_node *n, val *out)
{
    val x;
    TRY(ck_lower(c, s, n->args[0], &x));
    TRY(ck_single(c, n->args[0], &x));
    int t = x.c[0]->type;
    switch (n->op) {
    case '+':
        *out = x;
        return 0;
    case '-':
        if (t == CT_BOOL) t = CT_I32;
        *out = ck_mk(ck_op1(c, OP_NEG, t, ir_cast(c->b, t, x.c[0])), x.weak);
        if (x.weak && x.c[0]->kind == IR_CONST) {
            /* fold the literal so `-1` stays a weak constant */
            plan_value v = x.c[0]->c;
            if (CT_IS_FLOAT(t)) v.f = -v.f;
            else v.u = 0 - v.u;
            out->c[0] = ir_const(c->b, t, v);
        }
        return 0;
    case '!':
        *out = ck_mk(ck_op1(c, OP_NOT, CT_BOOL, ck_to_bool(c, x.c[0])), 0);
        return 0;
    case '~':
        if (CT_IS_FLOAT(t))
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "'~' needs an integer or bool operand, not %s",
                          plan_ct_name(t));
        if (t == CT_BOOL) *out = ck_mk(ck_op1(c, OP_NOT, CT_BOOL, x.c[0]), 0);
        else *out = ck_mk(ck_op1(c, OP_BNOT, t, x.c[0]), x.weak);
        return 0;
    }
    return ck_err_at(c, n->pos, RED_ERR_INTERNAL, "unknown unary operator");
}

static const struct {
    int bop, op;
    const char *text;
} binops[] = {
    {BOP_ADD, OP_ADD, "+"},   {BOP_SUB, OP_SUB, "-"},   {BOP_MUL, OP_MUL, "*"},
    {BOP_DIV, OP_DIV, "/"},   {BOP_MOD, OP_MOD, "%"},   {BOP_BAND, OP_BAND, "&"},
    {BOP_BOR, OP_BOR, "|"},   {BOP_BXOR, OP_BXOR, "^"}, {BOP_SHL, OP_SHL, "<<"},
    {BOP_SHR, OP_SHR, ">>"},  {BOP_LT, OP_LT, "<"},     {BOP_LE, OP_LE, "<="},
    {BOP_GT, OP_GT, ">"},     {BOP_GE, OP_GE, ">="},    {BOP_EQ, OP_EQ, "=="},
    {BOP_NE, OP_NE, "!="},    {BOP_LAND, OP_LAND, "&&"}, {BOP_LOR, OP_LOR, "||"},
    {BOP_POW, OP_POW, "**"},
};

/* Float math (sqrt, exp, ..., pow, hypot, fma) in the common type of the
 * arguments; integers go through f64. */
static int float_math(ck *c, int op, int nargs, const val *a, val *out)
{
    val acc = a[0];
    int weak = a[0].weak;
    for (int k = 1; k < nargs; k++) {
        int ft2 = common(&acc, &a[k], &weak);
        acc = ck_mk(ir_const_i(c->b, ft2, 0), weak);
    }
    int ft = acc.c[0]->type;
    if (!CT_IS_FLOAT(ft)) ft = CT_F64;
    ir *args[3];
    for (int k = 0; k < nargs; k++) args[k] = ir_cast(c->b, ft, a[k].c[0]);
    *out = ck_mk(ir_op(c->b, op, ft, nargs, args), weak ? 2 : 0);
    return 0;
}

static int binary(ck *c, const ast_node *n, int op, const char *text, val x, val y, val *out)
{
    if (op == OP_POW) {   /* a ** b is pow(a, b) */
        val a[2] = {x, y};
        return float_math(c, op, 2, a, out);
    }
    if (op == OP_LAND || op == OP_LOR) {
        *out = ck_mk(ck_op2(c, op, CT_BOOL, ck_to_bool(c, x.c[0]), ck_to_bool(c, y.c[0])), 0);
        return 0;
    }
    int weak;
    int t = common(&x, &y, &weak);
    if (op == OP_SHL || op == OP_SHR) {
        int tl = x.c[0]->type, tr = y.c[0]->type;
        if (!CT_IS_INT(tl) || !CT_IS_INT(tr))
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "'%s' needs integer operands, not %s and %s",
                          text, plan_ct_name(tl), plan_ct_name(tr));
        t = x.weak && !y.weak ? CT_I64 : tl;
        ir *cnt = ir_cast(c->b, t, y.c[0]);
        *out = ck_mk(ck_op2(c, op, t, ir_cast(c->b, t, x.c[0]), cnt), x.weak);
        return 0;
    }
    if (op == OP_BAND || op == OP_BOR || op == OP_BXOR) {
        if (CT_IS_FLOAT(x.c[0]->type) || CT_IS_FLOAT(y.c[0]->type) || CT_IS_FLOAT(t))
            return ck_err_at(c, n->pos, RED_ERR_TYPE,
                          "bit operation '%s' on %s: it needs integer or bool operands", text,
                          plan_ct_name(CT_IS_FLOAT(x.c[0]->type) ? x.c[0]->type
                                       : CT_IS_FLOAT(y.c[0]->type) ? y.c[0]->type : t));
    } else if (t == CT_BOOL && op >= OP_ADD && op <= OP_MOD) {
        t = CT_I32;   /* bool arithmetic is int arithmetic */
    }
    ir *a = ir_cast(c->b, t, x.c[0]), *b2 = ir_cast(c->b, t, y.c[0]);
    if (op >= OP_LT && op <= OP_NE) {
        *out = ck_mk(ck_op2(c, op, CT_BOOL, a, b2), 0);
        return 0;
    }
    *out = ck_mk(ck_op2(c, op, t, a, b2), weak);
    return 0;
}

/* x op (the right operand of n): one step of a chain. */
static int binary_step(ck *c, scope *s, const ast_node *n, val x, val *out)
{
    val y;
    TRY(ck_lower(c, s, n->args[1], &y));
    int op = -1;
    const char *text = "?";
    for (size_t i = 0; i < sizeof binops / sizeof binops[0]; i++)
        if (binops[i].bop == n->op) {
            op = binops[i].op;
            text = binops[i].text;
        }
    if (op < 0) return ck_err_at(c, n->pos, RED_ERR_INTERNAL, "unknown binary operator");
    if (x.tuple || y.tuple)
        return ck_err_at(c, (x.tuple ? n->args[0] : n->args[1])->pos, RED_ERR_TYPE,
                      "'%s' cannot be applied to a tuple; select a field with .0, .1, ...", text);
    TRY(binary(c, n, op, text, x, y, out));
    return ck_check_chain(c, n->name_pos, out);
}

/* A chain of binary operators down their left operands, ((a+b)+c)+..., is
 * lowered in a loop: its length is not nesting (ast.h) and may be far more
 * than the C stack holds frames of ck_lower().  Its IR is as deep as it is
 * long, which ck_check_chain bounds at each step. */
static int ck_lower_binary(ck *c, scope *s, const ast_node *n, val *out)
{
    int len = 0;
    const ast_node *m = n;
    for (; m->kind == AST_BINARY; m = m->args[0]) len++;
    const ast_node **spine = malloc((size_t)len * sizeof *spine);
    if (!spine) return ck_nomem(c);
    m = n;
    for (int k = 0; k < len; k++, m = m->args[0]) spine[k] = m;
    val x;
    int rc = ck_lower(c, s, m, &x);
    for (int k = len - 1; k >= 0 && !rc; k--) rc = binary_step(c, s, spine[k], x, &x);
    free(spine);
    if (!rc) *out = x;
    return rc;
}

static int ck_lower_cond(ck *c, scope *s, const ast_node *n, val *out)
{
    val k, x, y;
    TRY(ck_lower(c, s, n->args[0], &k));
    TRY(ck_single(c, n->args[0], &k));
    TRY(ck_lower(c, s, n->args[1], &x));
    TRY(ck_lower(c, s, n->args[2], &y));
    if (x.tuple || y.tuple) {
        if (x.n != y.n)
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "the branches of '?:' have %d and %d fields", x.n,
                          y.n);
    }
    val r = {.n = x.n, .tuple = x.tuple};
    for (int i = 0; i < x.n; i++) {
        val xi = ck_mk(x.c[i], x.weak), yi = ck_mk(y.c[i], y.weak);
        int weak;
        int t = common(&xi, &yi, &weak);
        ir *a[3] = {ck_to_bool(c, k.c[0]), ir_cast(c->b, t, x.c[i]), ir_cast(c->b, t, y.c[i])};
        r.c[i] = ir_op(c->b, OP_SELECT, t, 3, a);
        r.weak = weak;
    }
    *out = r;
    return 0;
}

/* ---- functions and casts ---------------------------------------------------- */

static const struct {
    const char *name;
    int nargs, op;
    int kind;   /* 0 float math, 1 abs, 2 rounding, 3 predicate, 4 min/max, 5 fma */
} funcs[] = {
    {"abs", 1, OP_ABS, 1},       {"sqrt", 1, OP_SQRT, 0},   {"exp", 1, OP_EXP, 0},
    {"log", 1, OP_LOG, 0},       {"log2", 1, OP_LOG2, 0},   {"log10", 1, OP_LOG10, 0},
    {"sin", 1, OP_SIN, 0},       {"cos", 1, OP_COS, 0},     {"tan", 1, OP_TAN, 0},
    {"tanh", 1, OP_TANH, 0},     {"floor", 1, OP_FLOOR, 2}, {"ceil", 1, OP_CEIL, 2},
    {"round", 1, OP_ROUND, 2},   {"isnan", 1, OP_ISNAN, 3}, {"isfinite", 1, OP_ISFINITE, 3},
    {"pow", 2, OP_POW, 0},       {"hypot", 2, OP_HYPOT, 0}, {"fma", 3, OP_FMA, 5},
    {"min", 2, OP_MIN, 4},       {"max", 2, OP_MAX, 4},
};

static const struct {
    const char *name;
    red_dtype dtype;
} casts[] = {{"bool", RED_BOOL}, {"i32", RED_I32}, {"i64", RED_I64}, {"u32", RED_U32},
             {"u64", RED_U64},   {"f16", RED_F16}, {"bf16", RED_BF16}, {"f32", RED_F32},
             {"f64", RED_F64}};

static int ck_lower_reduce(ck *c, scope *s, const ast_node *n, const char *opname, val *out);

static const char *const red_names[] = {"sum", "prod", "min", "max", "any", "all",
                                        "count", "mean", "argmin", "argmax"};

static int ck_lower_call(ck *c, scope *s, const ast_node *n, val *out)
{
    const char *name = n->name;
    int is_red = 0;
    for (size_t i = 0; i < sizeof red_names / sizeof red_names[0]; i++)
        if (strcmp(name, red_names[i]) == 0) is_red = 1;
    if (is_red && !((strcmp(name, "min") == 0 || strcmp(name, "max") == 0) && n->nargs == 2 &&
                    !n->has_over && !n->by)) {
        if (n->nargs != 1)
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "%s() takes 1 argument (the reduced expression), "
                          "%d given%s", name, n->nargs,
                          strcmp(name, "min") == 0 || strcmp(name, "max") == 0
                              ? "; the elementwise form takes 2" : "");
        return ck_lower_reduce(c, s, n, name, out);
    }
    if (n->has_over || n->by)
        return ck_err_at(c, n->name_pos, RED_ERR_TYPE, "'%s' is not a reduction: it cannot take '%s'",
                      name, n->has_over ? "over" : "by");
    for (size_t i = 0; i < sizeof casts / sizeof casts[0]; i++) {
        if (strcmp(name, casts[i].name) != 0) continue;
        if (n->nargs != 1)
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "cast %s() takes 1 argument, %d given", name,
                          n->nargs);
        val x;
        TRY(ck_lower(c, s, n->args[0], &x));
        TRY(ck_single(c, n->args[0], &x));
        int t = plan_ct_of_dtype(casts[i].dtype);
        ir *r = ir_cast(c->b, t, x.c[0]);
        if (casts[i].dtype == RED_F16) r = ck_op1(c, OP_F16ROUND, CT_F32, r);
        if (casts[i].dtype == RED_BF16) r = ck_op1(c, OP_BF16ROUND, CT_F32, r);
        *out = ck_mk(r, 0);
        return 0;
    }
    for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++) {
        if (strcmp(name, funcs[i].name) != 0) continue;
        if (n->nargs != funcs[i].nargs)
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "%s() takes %d argument%s, %d given", name,
                          funcs[i].nargs, funcs[i].nargs == 1 ? "" : "s", n->nargs);
        val a[3];
        for (int k = 0; k < n->nargs; k++) {
            TRY(ck_lower(c, s, n->args[k], &a[k]));
            TRY(ck_single(c, n->args[k], &a[k]));
        }
        int t = a[0].c[0]->type;
        switch (funcs[i].kind) {
        case 1: /* abs */
            if (t == CT_BOOL) t = CT_I32;
            *out = ck_mk(ck_op1(c, OP_ABS, t, ir_cast(c->b, t, a[0].c[0])), a[0].weak);
            return 0;
        case 2: /* rounding: identity on integers */
            if (!CT_IS_FLOAT(t)) {
                *out = a[0];
                return 0;
            }
            *out = ck_mk(ck_op1(c, funcs[i].op, t, a[0].c[0]), a[0].weak);
            return 0;
        case 3: /* predicates */
            if (!CT_IS_FLOAT(t)) {
                /* always false / true, but still one per element: x == x keeps
                 * the operand's indices, so isnan(x[i]) has the shape of x */
                *out = ck_mk(ck_op2(c, funcs[i].op == OP_ISFINITE ? OP_EQ : OP_NE, CT_BOOL, a[0].c[0], a[0].c[0]), 0);
                return 0;
            }
            *out = ck_mk(ck_op1(c, funcs[i].op, CT_BOOL, a[0].c[0]), 0);
            return 0;
        case 4: /* elementwise min / max */
            return binary(c, n, funcs[i].op, name, a[0], a[1], out);
        default: return float_math(c, funcs[i].op, n->nargs, a, out);
        }
    }
    if (ck_find_op(c, name) >= 0)
        return ck_err_at(c, n->name_pos, RED_ERR_NAME,
                      "'%s' is a reduction operator; use it as reduce(%s, ...)", name, name);
    suggest sg = {name, NULL, 0};
    for (size_t i = 0; i < sizeof red_names / sizeof red_names[0]; i++) ck_suggest_offer(&sg, red_names[i]);
    for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++) ck_suggest_offer(&sg, funcs[i].name);
    for (size_t i = 0; i < sizeof casts / sizeof casts[0]; i++) ck_suggest_offer(&sg, casts[i].name);
    for (int i = 0; i < c->nops; i++) ck_suggest_offer(&sg, c->ops[i]->name);
    if (sg.best)
        return ck_err_at(c, n->name_pos, RED_ERR_NAME, "unknown function '%s': did you mean '%s'?", name,
                      sg.best);
    return ck_err_at(c, n->name_pos, RED_ERR_NAME, "unknown function '%s'", name);
}

/* ---- reductions ----------------------------------------------------------------- */

static int same_domain_var(const plan *p, int a, int b)
{
    if (a == b) return 1;
    const plan_var *x = &p->vars[a], *y = &p->vars[b];
    if (x->key_pass != y->key_pass) return 0;
    if (x->lo || y->lo) return x->lo == y->lo && x->hi == y->hi;
    if (x->nconstraints != y->nconstraints || !x->nconstraints) return 0;
    for (int i = 0; i < x->nconstraints; i++) {
        const plan_constraint *k = &x->constraints[i], *l = &y->constraints[i];
        if (k->buf != l->buf || k->dim != l->dim || k->offset != l->offset) return 0;
    }
    return 1;
}

/* The last pass producing a temporary that `x` reads (-1: none). */
static int last_producer(const plan *p, const ir *x)
{
    if (!x) return -1;
    int r = -1;
    if (x->kind == IR_LOAD && x->slot < 0) {
        int t = -1 - x->slot;
        for (int i = 0; i < p->npasses; i++) {
            const plan_pass *ps = &p->passes[i];
            if (ps->map_temp == t) r = i;
            for (int q = 0; q < ps->nreds; q++)
                for (int k = 0; k < ps->reds[q].ncomp; k++)
                    if (ps->reds[q].temp[k] == t) r = i;
        }
    }
    for (int i = 0; i < x->nargs; i++) {
        int a = last_producer(p, x->args[i]);
        if (a > r) r = a;
    }
    if (x->kind == IR_INDEX) {
        int a = last_producer(p, p->vars[x->slot].lo), b = last_producer(p, p->vars[x->slot].hi);
        if (a > r) r = a;
        if (b > r) r = b;
    }
    return r;
}

/* Find a pass with the same domain that runs after everything the new
 * reduction reads, or start one. */
static int find_pass(ck *c, int nfree, const int *fr, int nred, const int *rd, ir *key,
                     int after, int *pass_out)
{
    plan *p = c->p;
    for (int i = after + 1; i < p->npasses; i++) {
        plan_pass *ps = &p->passes[i];
        if (!ps->nreds || ps->nfree != nfree || ps->nred != nred) continue;
        int ok = 1;
        for (int k = 0; k < nfree && ok; k++) ok = ps->free[k] == fr[k];
        for (int k = 0; k < nred && ok; k++) ok = same_domain_var(p, ps->red[k], rd[k]);
        if (!ok) continue;
        if (!!ps->key != !!key) continue;
        if (key) {
            ir *k2 = subst(c, key, nred, rd, ps->red);
            if (k2 != ps->key) continue;
        }
        *pass_out = i;
        return 0;
    }
    TRY(ck_grow_passes(c, "too many reductions"));
    plan_pass *ps = &p->passes[p->npasses];
    memset(ps, 0, sizeof *ps);
    ps->nfree = nfree;
    memcpy(ps->free, fr, nfree * sizeof *fr);
    ps->nred = nred;
    memcpy(ps->red, rd, nred * sizeof *rd);
    ps->key = key;
    ps->key_var = -1;
    ps->map_temp = -1;
    *pass_out = p->npasses++;
    return 0;
}

static int ck_op_from_name(const char *name)
{
    static const struct {
        const char *n;
        int rop;
    } t[] = {{"+", ROP_SUM},     {"*", ROP_PROD},    {"min", ROP_MIN},     {"max", ROP_MAX},
             {"&", ROP_BAND},    {"|", ROP_BOR},     {"^", ROP_BXOR},      {"&&", ROP_LAND},
             {"||", ROP_LOR},    {"argmin", ROP_ARGMIN}, {"argmax", ROP_ARGMAX},
             {"sum", ROP_SUM},   {"prod", ROP_PROD}, {"any", ROP_LOR},     {"all", ROP_LAND}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(t[i].n, name) == 0) return t[i].rop;
    return -1;
}

static int sum_type(int t)
{
    if (t == CT_BOOL || t == CT_I32 || t == CT_I64) return CT_I64;
    if (t == CT_U32 || t == CT_U64) return CT_U64;
    return t;
}

/* Evaluate a constant IR tree (identities of user operators). */
static int const_value(const ir *x, plan_value *v)
{
    if (x->kind != IR_CONST) return 0;
    *v = x->c;
    return 1;
}

static int add_reduction(ck *c, int pass, const plan_red *rd, int ncomp_out, int *temps_out)
{
    plan *p = c->p;
    plan_pass *ps = &p->passes[pass];
    for (int i = 0; i < ps->nreds; i++) {
        plan_red *o = &ps->reds[i];
        if (o->rop != rd->rop || o->ncomp != rd->ncomp || o->uname != rd->uname) continue;
        int same = 1;
        for (int k = 0; k < rd->ncomp && same; k++) same = o->map[k] == rd->map[k] && o->acc[k] == rd->acc[k];
        if (!same) continue;
        for (int k = 0; k < ncomp_out; k++) temps_out[k] = o->temp[k];
        return 0;
    }
    plan_red *nr = util_arena_alloc(c->a, (ps->nreds + 1) * sizeof *nr);
    if (!nr) return ck_nomem(c);
    if (ps->nreds) memcpy(nr, ps->reds, ps->nreds * sizeof *nr);
    nr[ps->nreds] = *rd;
    int dims[RED_MAX_DIMS], nd = ps->nfree;
    memcpy(dims, ps->free, nd * sizeof *dims);
    if (ps->key) {
        nd = 1;
        dims[0] = ps->key_var;
    }
    for (int k = 0; k < ncomp_out; k++) {
        int t;
        if (rd->rop == ROP_ARGMIN || rd->rop == ROP_ARGMAX) t = CT_I64;
        else t = rd->acc[k];
        int tmp = ck_new_temp(c, t, nd, dims);
        if (tmp == -2) return ck_nomem(c);
        if (tmp < 0) return util_diag_set(c->diag, RED_ERR_LIMIT, "too many intermediate results");
        nr[ps->nreds].temp[k] = tmp;
        temps_out[k] = tmp;
    }
    ps->reds = nr;
    ps->nreds++;
    return 0;
}

static int ck_lower_user_combine(ck *c, const ast_stmt *op, int ncomp, const int *types, ir **out)
{
    const ast_stmt *saved = c->in_op;
    c->in_op = op;
    c->op_ncomp = ncomp;
    memcpy(c->op_types, types, ncomp * sizeof *types);
    val v;
    scope top = {.accepts = 1};
    int rc = ck_lower(c, &top, op->exprs[0], &v);
    c->in_op = saved;
    if (rc) return rc;
    if (v.n != ncomp)
        return ck_err_at(c, op->exprs[0]->pos, RED_ERR_TYPE,
                      "operator '%s' combines %d field%s but its identity has %d", op->name, v.n,
                      v.n == 1 ? "" : "s", ncomp);
    for (int k = 0; k < ncomp; k++) out[k] = ir_cast(c->b, types[k], v.c[k]);
    return 0;
}

/* In `sum(A[i,j]) over j, x` a plain name after the comma is another index
 * (docs/language.md).  When such an index got no extent from the operand and
 * its name is bound, it was most likely meant as another result: say so, and
 * how to write that, instead of only that the index has no extent. */
static int check_over_tail(ck *c, const ast_node *n, const scope *rs)
{
    for (int i = 1; i < n->nover; i++) {
        const ast_over *o = &n->over[i];
        const plan_var *pv = &c->p->vars[rs->vars[i]];
        if (o->lo || pv->nconstraints || (ck_find_bind(c, o->name) < 0 && ck_find_let(c, o->name) < 0))
            continue;
        /* the reduction as written up to the comma before the name */
        const char *from = c->src + n->pos.off, *to = c->src + o->pos.off;
        while (to > from && (to[-1] == ' ' || to[-1] == '\t' || to[-1] == '\n' || to[-1] == '\r'))
            to--;
        if (to > from && to[-1] == ',') to--;
        int len = (int)(to - from);
        if (len > 60)
            return ck_err_at(c, o->pos, RED_ERR_SHAPE,
                          "index '%s' has no extent; if '%s' is meant as another result rather than "
                          "an index of 'over', put the reduction before it in parentheses",
                          o->name, o->name);
        return ck_err_at(c, o->pos, RED_ERR_SHAPE,
                      "index '%s' has no extent; if '%s' is meant as another result rather than an "
                      "index of 'over', put the reduction in parentheses: (%.*s), %s",
                      o->name, o->name, len, from, o->name);
    }
    return 0;
}

static int ck_lower_reduce(ck *c, scope *s, const ast_node *n, const char *opname, val *out)
{
    if (c->in_op)
        return ck_err_at(c, n->pos, RED_ERR_TYPE, "operator '%s' may not contain a reduction",
                      c->in_op->name);
    plan *p = c->p;
    int is_mean = strcmp(opname, "mean") == 0, is_count = strcmp(opname, "count") == 0;
    int rop = is_mean || is_count ? ROP_SUM : ck_op_from_name(opname);
    const ast_stmt *uop = NULL;
    if (rop < 0) {
        int oi = ck_find_op(c, opname);
        if (oi < 0) {
            suggest sg = {opname, NULL, 0};
            static const char *const named[] = {"min", "max", "argmin", "argmax"};
            for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) ck_suggest_offer(&sg, named[i]);
            for (int i = 0; i < c->nops; i++) ck_suggest_offer(&sg, c->ops[i]->name);
            if (sg.best)
                return ck_err_at(c, n->name_pos, RED_ERR_NAME,
                              "unknown reduction operator '%s': did you mean '%s'?", opname, sg.best);
            return ck_err_at(c, n->name_pos, RED_ERR_NAME, "unknown reduction operator '%s'", opname);
        }
        uop = c->ops[oi];
        rop = ROP_USER;
    }

    /* the reduction's own scope and its explicit indices */
    scope rs = {.parent = s, .accepts = !n->has_over};
    for (int i = 0; i < n->nover; i++) {
        const ast_over *o = &n->over[i];
        for (int j = 0; j < i; j++)
            if (strcmp(n->over[j].name, o->name) == 0)
                return ck_err_at(c, o->pos, RED_ERR_NAME, "index '%s' is listed twice", o->name);
        int v = ck_new_var(c, o->name, o->pos);
        if (v == -2) return ck_nomem(c);
        if (v < 0) return ck_err_at(c, o->pos, RED_ERR_LIMIT, "too many index variables");
        if (o->lo) {
            const ast_node *saved = c->bound_owner;
            c->bound_owner = n;
            val lo, hi;
            int rc = ck_lower(c, s, o->lo, &lo);
            if (!rc) rc = ck_lower(c, s, o->hi, &hi);
            c->bound_owner = saved;
            if (rc) return rc;
            TRY(ck_single(c, o->lo, &lo));
            TRY(ck_single(c, o->hi, &hi));
            if (!CT_IS_INT(lo.c[0]->type) || !CT_IS_INT(hi.c[0]->type))
                return ck_err_at(c, (CT_IS_INT(lo.c[0]->type) ? o->hi : o->lo)->pos, RED_ERR_TYPE,
                              "range bounds of '%s' must be integers", o->name);
            p->vars[v].lo = ir_cast(c->b, CT_I64, lo.c[0]);
            p->vars[v].hi = ir_cast(c->b, CT_I64, hi.c[0]);
        }
        TRY(ck_scope_add(c, &rs, v, o->pos));
    }

    val body;
    TRY(ck_lower(c, &rs, n->args[0], &body));
    ir *key = NULL;
    if (n->by) {
        val k;
        TRY(ck_lower(c, &rs, n->by, &k));
        TRY(ck_single(c, n->by, &k));
        if (!CT_IS_INT(k.c[0]->type))
            return ck_err_at(c, n->by->pos, RED_ERR_TYPE, "the key of 'by' must be an integer, not %s",
                          plan_ct_name(k.c[0]->type));
        key = ir_cast(c->b, CT_I64, k.c[0]);
    }
    TRY(check_over_tail(c, n, &rs));

    /* the map expressions and accumulator types */
    plan_red rd;
    memset(&rd, 0, sizeof rd);
    rd.rop = rop;
    rd.pos = n->pos;
    rd.ncomp = 1;
    int nres = 1;
    if (rop == ROP_USER) {
        rd.uname = uop->name;
        rd.ordered = uop->ordered;
        /* identity arity decides the tuple size */
        val idv;
        scope none = {.accepts = 1};
        const ast_stmt *saved = c->in_op;
        c->in_op = uop;
        c->op_ncomp = 0;
        int rc = ck_lower(c, &none, uop->exprs[1], &idv);
        c->in_op = saved;
        if (rc) return rc;
        if (body.n != idv.n)
            return ck_err_at(c, n->args[0]->pos, RED_ERR_TYPE,
                          "operator '%s' reduces %d-field values (its identity has %d) but this "
                          "operand has %d", uop->name, idv.n, idv.n, body.n);
        rd.ncomp = nres = body.n;
        for (int k = 0; k < body.n; k++) {
            int t = body.c[k]->type;
            rd.acc[k] = t;
            rd.map[k] = body.c[k];
            ir *idc = ir_cast(c->b, t, idv.c[k]);
            if (!const_value(idc, &rd.identity[k]))
                return ck_err_at(c, uop->exprs[1]->pos, RED_ERR_TYPE,
                              "the identity of operator '%s' must be made of constants", uop->name);
        }
        TRY(ck_lower_user_combine(c, uop, rd.ncomp, rd.acc, rd.combine));
    } else {
        if (body.tuple)
            return ck_err_at(c, n->args[0]->pos, RED_ERR_TYPE,
                          "'%s' reduces single values, not a tuple of %d; use a user-defined "
                          "operator (op NAME(a, b) = ... identity ...)", opname, body.n);
        ir *x = body.c[0];
        int t = x->type;
        switch (rop) {
        case ROP_SUM:
        case ROP_PROD:
            if (is_count) {
                rd.acc[0] = CT_I64;
                rd.map[0] = ir_cast(c->b, CT_I64, ck_to_bool(c, x));
            } else {
                rd.acc[0] = is_mean ? (CT_IS_FLOAT(t) ? t : CT_F64) : sum_type(t);
                rd.map[0] = ir_cast(c->b, rd.acc[0], x);
            }
            break;
        case ROP_MIN: case ROP_MAX: case ROP_ARGMIN: case ROP_ARGMAX:
            rd.acc[0] = t;
            rd.map[0] = x;
            break;
        case ROP_BAND: case ROP_BOR: case ROP_BXOR:
            if (CT_IS_FLOAT(t))
                return ck_err_at(c, n->args[0]->pos, RED_ERR_TYPE,
                              "bit reduction '%s' of %s values: it needs integers or bools",
                              opname, plan_ct_name(t));
            rd.acc[0] = t;
            rd.map[0] = x;
            break;
        case ROP_LAND: case ROP_LOR:
            rd.acc[0] = CT_BOOL;
            rd.map[0] = ck_to_bool(c, x);
            break;
        }
    }
    for (int k = 0; k < rd.ncomp; k++)
        if (!rd.map[k]) return ck_nomem(c);

    /* what is reduced, what stays free */
    int red[RED_MAX_DIMS], nred = 0;
    for (int i = 0; i < rs.nvars; i++) {
        if (nred >= RED_MAX_DIMS)
            return ck_err_at(c, n->pos, RED_ERR_LIMIT, "a reduction over more than %d indices",
                          RED_MAX_DIMS);
        red[nred++] = rs.vars[i];
    }
    varset used = {0};
    for (int k = 0; k < rd.ncomp; k++) ck_collect_vars(p, rd.map[k], &used);
    ck_collect_vars(p, key, &used);
    for (int k = 0; k < nred; k++) {
        /* a range's bounds make their indices free even if the operand does
         * not use them: count(true) over k in ptr[r]..ptr[r+1] is per r */
        ck_collect_vars(p, p->vars[red[k]].lo, &used);
        ck_collect_vars(p, p->vars[red[k]].hi, &used);
    }
    int fr[RED_MAX_DIMS], nfree = 0;
    for (int i = 0; i < used.n; i++) {
        int v = used.v[i], isred = 0;
        for (int k = 0; k < nred; k++) isred |= red[k] == v;
        if (isred) continue;
        if (nfree >= RED_MAX_DIMS)
            return ck_err_at(c, n->pos, RED_ERR_LIMIT, "a result with more than %d dimensions",
                          RED_MAX_DIMS);
        fr[nfree++] = v;
    }
    /* range bounds may use free indices only (checked when lowered) */
    if (key && nfree)
        return ck_err_at(c, n->by->pos, RED_ERR_SHAPE,
                      "a reduction with 'by' cannot have free indices ('%s' is not reduced)",
                      p->vars[fr[0]].name);

    int after = last_producer(p, key);
    for (int k = 0; k < rd.ncomp; k++) {
        int a = last_producer(p, rd.map[k]);
        if (a > after) after = a;
    }
    for (int k = 0; k < nred; k++) {
        int a = last_producer(p, p->vars[red[k]].lo), b = last_producer(p, p->vars[red[k]].hi);
        if (a > after) after = a;
        if (b > after) after = b;
    }
    int pass = -1;
    TRY(find_pass(c, nfree, fr, nred, red, key, after, &pass));
    plan_pass *ps = &p->passes[pass];
    if (ps->nreds == 0 && key) {
        /* a new keyed pass: its key index is a new variable, reduced by the
         * nearest enclosing reduction without `over`, or free */
        int kv = ck_new_var(c, "key", n->by->pos);
        if (kv == -2) return ck_nomem(c);
        if (kv < 0) return ck_err_at(c, n->pos, RED_ERR_LIMIT, "too many index variables");
        p->vars[kv].key_pass = pass;
        ps->key_var = kv;
        ps->key_pos = n->by->pos;
        TRY(ck_scope_add(c, ck_accepting(s), kv, n->by->pos));
    } else if (key) {
        /* the same keyed pass used again, maybe under another reduction
         * (`min(m), sum(m)` with m keyed): the nearest enclosing reduction
         * without `over` reduces over the keys here too */
        scope *home = ck_accepting(s);
        int has = 0;
        for (int i = 0; home && i < home->nvars; i++) has |= home->vars[i] == ps->key_var;
        if (home && !has) TRY(ck_scope_add(c, home, ps->key_var, n->by->pos));
    }
    /* rename this reduction's indices to the pass's */
    for (int k = 0; k < rd.ncomp; k++) rd.map[k] = subst(c, rd.map[k], nred, red, ps->red);
    int temps[PLAN_MAX_COMP];
    TRY(add_reduction(c, pass, &rd, nres, temps));

    int dims = ps->key ? 1 : ps->nfree;
    ir *subs[RED_MAX_DIMS];
    for (int d = 0; d < dims; d++) subs[d] = ir_index(c->b, ps->key ? ps->key_var : ps->free[d]);
    val r = {.n = nres, .tuple = nres > 1};
    for (int k = 0; k < nres; k++)
        r.c[k] = ir_load(c->b, p->temps[temps[k]].type, PLAN_TEMP_SLOT(temps[k]), dims, subs, n->pos);

    if (is_mean) {
        /* mean = sum / count over the same domain, fused in the same pass */
        plan_red cnt;
        memset(&cnt, 0, sizeof cnt);
        cnt.rop = ROP_SUM;
        cnt.ncomp = 1;
        cnt.acc[0] = CT_I64;
        cnt.map[0] = ir_const_i(c->b, CT_I64, 1);
        int ct;
        TRY(add_reduction(c, pass, &cnt, 1, &ct));
        ir *cl = ir_load(c->b, CT_I64, PLAN_TEMP_SLOT(ct), dims, subs, n->pos);
        int ft = rd.acc[0];
        r.c[0] = ck_op2(c, OP_DIV, ft, r.c[0], ir_cast(c->b, ft, cl));
    }
    for (int k = 0; k < r.n; k++)
        if (!r.c[k]) return ck_nomem(c);
    *out = r;
    return 0;
}

/* ---- the dispatcher ---------------------------------------------------------------- */

static int lower_node(ck *c, scope *s, const ast_node *n, val *out)
{
    switch (n->kind) {
    case AST_INT:
        if (n->u.ival > (uint64_t)INT64_MAX) {
            plan_value v = {.u = n->u.ival};
            *out = ck_mk(ir_const(c->b, CT_U64, v), 0);
        } else {
            *out = ck_mk(ir_const_i(c->b, CT_I64, (int64_t)n->u.ival), 1);
        }
        return out->c[0] ? 0 : ck_nomem(c);
    case AST_FLOAT:
        *out = ck_mk(ir_const_f(c->b, CT_F64, n->u.fval), 2);
        return out->c[0] ? 0 : ck_nomem(c);
    case AST_BOOL:
        *out = ck_mk(ir_const_i(c->b, CT_BOOL, n->u.ival != 0), 0);
        return out->c[0] ? 0 : ck_nomem(c);
    case AST_NAME: return ck_lower_name(c, s, n, out);
    case AST_INDEX: return ck_lower_index(c, s, n, out);
    case AST_UNARY: return ck_lower_unary(c, s, n, out);
    case AST_BINARY: return ck_lower_binary(c, s, n, out);
    case AST_COND: return ck_lower_cond(c, s, n, out);
    case AST_CALL: return ck_lower_call(c, s, n, out);
    case AST_REDUCE: return ck_lower_reduce(c, s, n, n->name, out);
    case AST_TUPLE: {
        if (n->nargs > PLAN_MAX_COMP)
            return ck_err_at(c, n->pos, RED_ERR_LIMIT, "a tuple of more than %d values", PLAN_MAX_COMP);
        val r = {.n = n->nargs, .tuple = 1};
        for (int i = 0; i < n->nargs; i++) {
            val e;
            TRY(ck_lower(c, s, n->args[i], &e));
            if (e.tuple) return ck_err_at(c, n->args[i]->pos, RED_ERR_TYPE, "tuples cannot be nested");
            r.c[i] = e.c[0];
            if (i == 0 || e.weak < r.weak) r.weak = e.weak;
        }
        r.weak = 0;
        *out = r;
        return 0;
    }
    case AST_FIELD: {
        val e;
        TRY(ck_lower(c, s, n->args[0], &e));
        if (!e.tuple)
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "'.%d' selects a tuple field, but this is a "
                          "single value", n->field);
        if (n->field < 0 || n->field >= e.n)
            return ck_err_at(c, n->pos, RED_ERR_TYPE, "field .%d of a tuple of %d values (fields are "
                          ".0 .. .%d)", n->field, e.n, e.n - 1);
        *out = ck_mk(e.c[n->field], 0);
        return 0;
    }
    }
    return ck_err_at(c, n->pos, RED_ERR_INTERNAL, "unknown syntax node");
}

/* Nesting is bounded as in the parser, now with named values and operator
 * bodies counted at the depth where they are used, and the IR built is
 * bounded in depth (MAX_CHAIN). */
static int ck_lower(ck *c, scope *s, const ast_node *n, val *out)
{
    if (c->depth >= AST_MAX_DEPTH)
        return ck_err_at(c, n->pos, RED_ERR_LIMIT,
                      "expression nested too deeply: the limit is %d levels, named values counted "
                      "where they are used", AST_MAX_DEPTH);
    c->depth++;
    int rc = lower_node(c, s, n, out);
    c->depth--;
    return rc ? rc : ck_check_chain(c, n->pos, out);
}

/* ---- the program ------------------------------------------------------------------- */

static void scan_idx_names(ck *c, const ast_node *n, int in_sub)
{
    /* a chain of binary operators in a loop, down its left operands */
    for (; n && n->kind == AST_BINARY; n = n->args[0]) scan_idx_names(c, n->args[1], in_sub);
    if (!n) return;
    if (n->kind == AST_NAME && in_sub) {
        if (!ck_is_idx_name(c, n->name)) {
            const char **nn = util_arena_alloc(c->a, (c->nidx_names + 1) * sizeof *nn);
            if (!nn) return;
            if (c->nidx_names) memcpy(nn, c->idx_names, c->nidx_names * sizeof *nn);
            nn[c->nidx_names++] = n->name;
            c->idx_names = nn;
        }
        return;
    }
    int sub = in_sub || n->kind == AST_INDEX;
    for (int i = 0; i < n->nargs; i++) scan_idx_names(c, n->args[i], sub);
    /* A name listed in `over` is an index; one used directly in a range
     * bound is not (a bound is an integer: `0..n` reads a scalar n), only
     * the names in subscripts there are (`ptr[r]..ptr[r+1]`). */
    for (int i = 0; i < n->nover; i++) {
        ast_node fake = {.kind = AST_NAME, .name = n->over[i].name};
        scan_idx_names(c, &fake, 1);
        scan_idx_names(c, n->over[i].lo, in_sub);
        scan_idx_names(c, n->over[i].hi, in_sub);
    }
    scan_idx_names(c, n->by, in_sub);
}

static int lower_result(ck *c, const ast_stmt *st, const ast_node *e, const char *name)
{
    plan *p = c->p;
    scope top = {.accepts = 1};
    if (st->kind == STMT_ASSIGN) {
        for (int i = 0; i < st->nidx; i++) {
            for (int j = 0; j < i; j++)
                if (strcmp(st->idx[i], st->idx[j]) == 0)
                    return ck_err_at(c, st->idx_pos[i], RED_ERR_NAME, "index '%s' is listed twice",
                                  st->idx[i]);
            int v = ck_new_var(c, st->idx[i], st->idx_pos[i]);
            if (v == -2) return ck_nomem(c);
            if (v < 0) return ck_err_at(c, st->idx_pos[i], RED_ERR_LIMIT, "too many index variables");
            TRY(ck_scope_add(c, &top, v, st->idx_pos[i]));
        }
    }
    val v;
    TRY(ck_lower(c, &top, e, &v));
    for (int k = 0; k < v.n; k++) {
        ir *x = v.c[k];
        /* literals alone are i64 / f64 */
        varset used = {0};
        ck_collect_vars(p, x, &used);
        int dims[RED_MAX_DIMS], nd = 0;
        if (st->kind == STMT_ASSIGN) {
            for (int i = 0; i < used.n; i++) {
                int on_left = 0;
                for (int j = 0; j < st->nidx; j++) on_left |= top.vars[j] == used.v[i];
                if (!on_left)
                    return ck_err_at(c, p->vars[used.v[i]].pos, RED_ERR_SHAPE,
                                  "free index '%s' is not on the left side of '='",
                                  p->vars[used.v[i]].name);
            }
            for (int j = 0; j < st->nidx; j++) {
                int found = 0;
                for (int i = 0; i < used.n; i++) found |= used.v[i] == top.vars[j];
                if (!found)
                    return ck_err_at(c, st->idx_pos[j], RED_ERR_SHAPE,
                                  "index '%s' on the left side is not a free index of the right side",
                                  st->idx[j]);
                if (nd >= RED_MAX_DIMS)   /* dims has RED_MAX_DIMS entries */
                    return ck_err_at(c, st->idx_pos[j], RED_ERR_LIMIT, "a result with more than %d dimensions",
                                  RED_MAX_DIMS);
                dims[nd++] = top.vars[j];
            }
        } else {
            for (int i = 0; i < used.n; i++) {
                if (nd >= RED_MAX_DIMS)
                    return ck_err_at(c, e->pos, RED_ERR_LIMIT, "a result with more than %d dimensions",
                                  RED_MAX_DIMS);
                dims[nd++] = used.v[i];
            }
        }
        int temp = -1;
        if (x->kind == IR_LOAD && x->slot < 0 && x->nargs == nd) {
            int same = 1;
            for (int d = 0; d < nd && same; d++)
                same = x->args[d]->kind == IR_INDEX && x->args[d]->slot == dims[d];
            if (same) temp = -1 - x->slot;
        }
        if (temp < 0) {
            TRY(ck_grow_passes(c, "too many passes"));
            temp = ck_new_temp(c, x->type, nd, dims);
            if (temp == -2) return ck_nomem(c);
            if (temp < 0) return util_diag_set(c->diag, RED_ERR_LIMIT, "too many intermediate results");
            plan_pass *ps = &p->passes[p->npasses++];
            memset(ps, 0, sizeof *ps);
            ps->nfree = nd;
            memcpy(ps->free, dims, nd * sizeof *dims);
            ps->map = x;
            ps->map_temp = temp;
            ps->key_var = -1;
        }
        plan_result *r = &p->results[p->nresults++];
        r->temp = temp;
        if (name && v.n > 1) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s.%d", name, k);
            r->name = util_arena_strndup(c->a, buf, strlen(buf));
        } else {
            r->name = name ? name : "";
        }
    }
    return 0;
}

static int check_op(ck *c, const ast_stmt *st)
{
    if (ck_find_op(c, st->name) >= 0)
        return ck_err_at(c, st->name_pos, RED_ERR_NAME, "operator '%s' is defined twice", st->name);
    if (ck_op_from_name(st->name) >= 0 || strcmp(st->name, "mean") == 0 || strcmp(st->name, "count") == 0)
        return ck_err_at(c, st->name_pos, RED_ERR_NAME, "'%s' is a built-in reduction", st->name);
    if (strcmp(st->param[0], st->param[1]) == 0)
        return ck_err_at(c, st->param_pos[1], RED_ERR_NAME, "both parameters are named '%s'",
                      st->param[0]);
    if (c->nops >= MAX_OPS) return ck_err_at(c, st->pos, RED_ERR_LIMIT, "too many operators");
    c->ops[c->nops++] = st;
    /* check the identity is constant and the combine well typed, once with
     * f64 fields, so errors appear even if the operator is never used */
    val idv;
    scope none = {.accepts = 1};
    c->in_op = st;
    c->op_ncomp = 0;
    int rc = ck_lower(c, &none, st->exprs[1], &idv);
    c->in_op = NULL;
    if (rc) return rc;
    for (int k = 0; k < idv.n; k++)
        if (idv.c[k]->kind != IR_CONST)
            return ck_err_at(c, st->exprs[1]->pos, RED_ERR_TYPE,
                          "the identity of operator '%s' must be made of constants", st->name);
    int types[PLAN_MAX_COMP];
    for (int k = 0; k < idv.n; k++) types[k] = CT_F64;
    ir *comb[PLAN_MAX_COMP];
    return ck_lower_user_combine(c, st, idv.n, types, comb);
}

int chk_build(const ast_program *prog, const chk_binding *binds, int nbinds, util_arena *arena,
              plan **out, util_diag *diag)
{
    *out = NULL;
    ck c;
    memset(&c, 0, sizeof c);
    c.prog = prog;
    c.src = prog->src;
    c.binds = binds;
    c.nbinds = nbinds;
    c.a = arena;
    c.diag = diag;
    c.b = plan_builder_new(arena);
    plan *p = util_arena_alloc(arena, sizeof *p);
    c.buf_of_bind = util_arena_alloc(arena, (nbinds + 1) * sizeof(int));
    c.scalar_of_bind = util_arena_alloc(arena, (nbinds + 1) * sizeof(int));
    if (!c.b || !p || !c.buf_of_bind || !c.scalar_of_bind) return ck_nomem(&c);
    c.p = p;
    p->arena = arena;
    static uint64_t next_uid;
    p->uid = __atomic_add_fetch(&next_uid, 1, __ATOMIC_RELAXED);
    p->src = prog->src;
    c.cap_vars = 8;
    c.cap_passes = 4;
    c.cap_temps = 8;
    p->vars = util_arena_alloc(arena, (size_t)c.cap_vars * sizeof *p->vars);
    p->passes = util_arena_alloc(arena, (size_t)c.cap_passes * sizeof *p->passes);
    p->temps = util_arena_alloc(arena, (size_t)c.cap_temps * sizeof *p->temps);
    p->bufs = util_arena_alloc(arena, (nbinds + 1) * sizeof *p->bufs);
    p->scalars = util_arena_alloc(arena, (nbinds + 1) * sizeof *p->scalars);
    if (!p->vars || !p->passes || !p->temps || !p->bufs || !p->scalars) return ck_nomem(&c);
    for (int i = 0; i < nbinds; i++) {
        if (binds[i].is_array) {
            c.buf_of_bind[i] = p->nbufs;
            p->bufs[p->nbufs++] = (plan_buf){binds[i].name, binds[i].dtype, binds[i].ndim};
        } else {
            c.scalar_of_bind[i] = p->nscalars;
            p->scalars[p->nscalars++] = (plan_scalar){binds[i].name, plan_ct_of_dtype(binds[i].dtype)};
        }
    }

    int nres = 0;
    for (int i = 0; i < prog->nstmts; i++) {
        const ast_stmt *st = &prog->stmts[i];
        for (int k = 0; k < st->nexprs; k++) scan_idx_names(&c, st->exprs[k], 0);
        if (st->kind == STMT_EXPR) nres += st->nexprs * PLAN_MAX_COMP;
        else if (st->kind != STMT_OP) nres += PLAN_MAX_COMP;
    }
    p->results = util_arena_alloc(arena, (nres + 1) * sizeof *p->results);
    if (!p->results) return ck_nomem(&c);

    /* definitions first in order; results are the expression statements and
     * assignments, or the last named value if there are none */
    int nexpr = 0;
    const ast_stmt *last_let = NULL;
    for (int i = 0; i < prog->nstmts; i++) {
        const ast_stmt *st = &prog->stmts[i];
        switch (st->kind) {
        case STMT_OP: TRY(check_op(&c, st)); break;
        case STMT_LET:
            c.visible_lets = c.nlets;   /* every earlier definition */
            if (ck_find_let(&c, st->name) >= 0)
                return ck_err_at(&c, st->name_pos, RED_ERR_NAME, "'%s' is already defined", st->name);
            if (ck_find_bind(&c, st->name) >= 0)
                return ck_err_at(&c, st->name_pos, RED_ERR_NAME,
                              "'%s' is a bound array or scalar; choose another name", st->name);
            if (c.nlets >= MAX_LETS) return ck_err_at(&c, st->pos, RED_ERR_LIMIT, "too many names");
            c.lets[c.nlets++] = st;
            last_let = st;
            break;
        case STMT_EXPR:
        case STMT_ASSIGN: nexpr++; break;
        }
    }
    c.visible_lets = 0;   /* now grown statement by statement */
    for (int i = 0; i < prog->nstmts; i++) {
        const ast_stmt *st = &prog->stmts[i];
        if (st->kind == STMT_LET) {
            c.visible_lets++;
            continue;
        }
        if (st->kind == STMT_EXPR)
            for (int k = 0; k < st->nexprs; k++) TRY(lower_result(&c, st, st->exprs[k], NULL));
        if (st->kind == STMT_ASSIGN) TRY(lower_result(&c, st, st->exprs[0], st->name));
    }
    if (!nexpr) {
        if (!last_let)
            return util_diag_at(diag, prog->src, (util_pos){0, 0}, RED_ERR_SYNTAX,
                                "nothing to compute: the program only defines operators");
        TRY(lower_result(&c, last_let, last_let->exprs[0], last_let->name));
    }

    /* every index needs an extent */
    for (int v = 0; v < p->nvars; v++) {
        plan_var *pv = &p->vars[v];
        if (!pv->lo && !pv->nconstraints && pv->key_pass < 0) {
            /* only variables some pass or result actually uses matter */
            int used = 0;
            for (int i = 0; i < p->npasses && !used; i++) {
                plan_pass *ps = &p->passes[i];
                for (int k = 0; k < ps->nfree; k++) used |= ps->free[k] == v;
                for (int k = 0; k < ps->nred; k++) used |= ps->red[k] == v;
            }
            if (used)
                return ck_err_at(&c, pv->pos, RED_ERR_SHAPE,
                              "index '%s' has no extent: give one with 'over %s in lo..hi' or use "
                              "it as a subscript", pv->name, pv->name);
        }
    }
    p->nir = plan_builder_count(c.b);
    if (arena->failed) return ck_nomem(&c);
    *out = p;
    return 0;
}
