/*
 * check.c -- the checker: resolves names, infers and checks types, finds the
 * index variables and what each reduction reduces, and lowers the program
 * into a plan of passes (plan.h).  Every reduction becomes a reduction in a
 * pass writing temporaries; the expression around it reads them.
 * This file holds the program, the dispatcher over syntax nodes, errors and
 * the growth of the plan's tables; names.c, ops.c and reduce.c lower the rest.
 */
#include "check_internal.h"

#include <stdio.h>

/* ---- errors -------------------------------------------------------------- */

int ck_err_at(ck *c, util_pos pos, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    util_diag_vat(c->diag, c->src, pos, code, fmt, ap);
    va_end(ap);
    return code;
}

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
int ck_grow_passes(ck *c, const char *what)
{
    plan *p = c->p;
    int err;
    p->passes = grow(c, p->passes, &c->cap_passes, p->npasses, sizeof *p->passes, c->max_passes, &err);
    if (err == -2) return ck_nomem(c);
    if (err)
        return util_diag_set(c->diag, RED_ERR_LIMIT, "%s: the plan needs more than %d passes (RED_OPT_MAX_PASSES)",
                             what, c->max_passes);
    return 0;
}

/* A new index variable: its id, -1 at the limit, -2 out of memory. */
int ck_new_var(ck *c, const char *name, util_pos pos)
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

/* var takes on constraint k, unless it has it (k.var keeps the index the
 * subscript used, for messages) */
static int copy_constraint(ck *c, int var, const plan_constraint *k)
{
    int buf = k->buf, dim = k->dim;
    int64_t off = k->offset;
    plan_var *v = &c->p->vars[var];
    for (int i = 0; i < v->nconstraints; i++) {
        const plan_constraint *o = &v->constraints[i];
        if (o->buf == buf && o->dim == dim && o->offset == off) return 0;
    }
    plan_constraint *nc = util_arena_alloc(c->a, (v->nconstraints + 1) * sizeof *nc);
    if (!nc) return ck_nomem(c);
    if (v->nconstraints) memcpy(nc, v->constraints, v->nconstraints * sizeof *nc);
    nc[v->nconstraints] = *k;
    v->constraints = nc;
    v->nconstraints++;
    return 0;
}

int ck_add_constraint(ck *c, int var, int buf, int dim, int64_t off, util_pos pos)
{
    plan_constraint k = {buf, dim, off, pos, var};
    return copy_constraint(c, var, &k);
}

int ck_share_constraints(ck *c, int to, int from)
{
    if (to == from) return 0;
    for (int q = 0; q < c->p->vars[from].nconstraints; q++)
        TRY(copy_constraint(c, to, &c->p->vars[from].constraints[q]));
    return 0;
}

int ck_take_constraints(ck *c, int to, int from)
{
    if (c->p->vars[from].lo) return 0;   /* a range's extent is its own */
    return ck_share_constraints(c, to, from);
}

int ck_new_temp(ck *c, int type, int ndim, const int *dims)
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

int ck_check_chain(ck *c, util_pos pos, const val *v)
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
    case AST_REDUCE:
        return n->op ? ck_lower_scan(c, s, n, n->name, n->op, out) : ck_lower_reduce(c, s, n, n->name, out);
    case AST_RANGE:
        return ck_err_at(c, n->pos, RED_ERR_SYNTAX,
                         "'%s in lo..hi' gives a result's index its range: it belongs on the left side of "
                         "'=', as in R[%s in lo..hi] = ...", n->name, n->name);
    case AST_TUPLE: {
        if (n->nargs > PLAN_MAX_COMP)
            return ck_err_at(c, n->pos, RED_ERR_LIMIT, "a tuple of more than %d values", PLAN_MAX_COMP);
        val r = {.n = n->nargs, .tuple = 1};
        for (int i = 0; i < n->nargs; i++) {
            val e;
            TRY(ck_lower(c, s, n->args[i], &e));
            if (e.tuple) return ck_err_at(c, n->args[i]->pos, RED_ERR_TYPE, "tuples cannot be nested");
            if (e.cplx)
                return ck_err_at(c, n->args[i]->pos, RED_ERR_TYPE,
                                 "a complex value cannot be a field of a tuple: give its parts, real(z), imag(z)");
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
int ck_lower(ck *c, scope *s, const ast_node *n, val *out)
{
    if (c->depth >= AST_MAX_DEPTH)
        return ck_err_at(c, n->pos, RED_ERR_LIMIT,
                         "expression nested too deeply: the limit is %d levels, named values counted "
                         "where they are used", AST_MAX_DEPTH);
    if (++c->steps > MAX_LOWER_STEPS)
        return ck_err_at(c, n->pos, RED_ERR_LIMIT,
                         "the program is too large once its names are substituted: more than %ld "
                         "steps (a name is lowered again where it is used, so names built from "
                         "names multiply)", MAX_LOWER_STEPS);
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

/* `R[x in lo..hi] = ...`: x's range, lowered where no index is in scope (a
 * result is a box: a bound may not use another of its indices). */
static const ast_node *find_name(const ast_node *n, const char *name)
{
    if (!n) return NULL;
    if (n->kind == AST_NAME && strcmp(n->name, name) == 0) return n;
    for (int i = 0; i < n->nargs; i++) {
        const ast_node *r = find_name(n->args[i], name);
        if (r) return r;
    }
    for (int i = 0; i < n->nover; i++) {
        const ast_node *r = find_name(n->over[i].lo, name);
        if (!r) r = find_name(n->over[i].hi, name);
        if (r) return r;
    }
    return find_name(n->by, name);
}

static int lhs_range(ck *c, const ast_stmt *st, int i, int v)
{
    scope alone = {.accepts = 1};
    val b[2];
    for (int k = 0; k < 2; k++) {
        const ast_node *e = k ? st->idx_hi[i] : st->idx_lo[i];
        for (int j = 0; j < st->nidx; j++) {
            const ast_node *at = ck_find_bind(c, st->idx[j]) < 0 && ck_find_let(c, st->idx[j]) < 0
                                     ? find_name(e, st->idx[j]) : NULL;
            if (at)
                return ck_err_at(c, at->pos, RED_ERR_SHAPE,
                                 "the range of '%s' uses the index '%s': a result's ranges may use scalars "
                                 "and arrays, not indices", st->idx[i], st->idx[j]);
        }
        TRY(ck_lower(c, &alone, e, &b[k]));
        TRY(ck_single(c, e, &b[k]));
        varset used = {0};
        ck_collect_vars(c, b[k].c[0], &used);
        if (used.n)
            return ck_err_at(c, e->pos, RED_ERR_SHAPE,
                             "the range of '%s' uses the index '%s': a result's ranges may use scalars "
                             "and arrays, not indices", st->idx[i], c->p->vars[used.v[0]].name);
    }
    val lo = b[0], hi = b[1];
    if (!CT_IS_INT(lo.c[0]->type) || !CT_IS_INT(hi.c[0]->type))
        return ck_err_at(c, (CT_IS_INT(lo.c[0]->type) ? st->idx_hi[i] : st->idx_lo[i])->pos, RED_ERR_TYPE,
                         "range bounds of '%s' must be integers", st->idx[i]);
    plan_var *pv = &c->p->vars[v];
    ir *l = ir_cast(c->b, CT_I64, lo.c[0]), *h = ir_cast(c->b, CT_I64, hi.c[0]);
    if (!l || !h) return ck_nomem(c);
    if (l->kind == IR_CONST && l->c.i == 0) {
        pv->lo = l;
        pv->hi = h;
        return 0;
    }
    /* Element k is the value at x = lo + k: the variable runs over 0..hi-lo
     * and the name x reads as it + lo, in the reductions inside too (their
     * results then start at 0: no padding, no negative index).  A width past
     * int64 (hi - lo wrapping below 0 while hi > lo) becomes INT64_MAX, which
     * the extent limit refuses. */
    ir *w = ck_op2(c, OP_SUB, CT_I64, h, l);
    ir *wraps = ck_op2(c, OP_LAND, CT_BOOL, ck_op2(c, OP_GT, CT_BOOL, h, l),
                       ck_op2(c, OP_LT, CT_BOOL, w, ir_const_i(c->b, CT_I64, 0)));
    pv->lo = ir_const_i(c->b, CT_I64, 0);
    int64_t cw;
    if (l->kind == IR_CONST && h->kind == IR_CONST)   /* folded, for --explain */
        pv->hi = ir_const_i(c->b, CT_I64, __builtin_sub_overflow(h->c.i, l->c.i, &cw) ? INT64_MAX : cw);
    else
        pv->hi = ck_sel(c, wraps, ir_const_i(c->b, CT_I64, INT64_MAX), w);
    if (c->nalias == RED_MAX_DIMS) return ck_err_at(c, st->idx_pos[i], RED_ERR_LIMIT, "too many ranged indices");
    c->alias_var[c->nalias] = v;
    c->alias_ir[c->nalias++] = ck_op2(c, OP_ADD, CT_I64, ir_index(c->b, v), l);
    return pv->hi && c->alias_ir[c->nalias - 1] ? 0 : ck_nomem(c);
}

/* The name of the assignment whose left side lists the index at `pos`, or
 * "R" for an index that is free in a result without one. */
static const char *lhs_name(const ast_program *prog, util_pos pos)
{
    for (int i = 0; i < prog->nstmts; i++) {
        const ast_stmt *st = &prog->stmts[i];
        for (int j = 0; st->kind == STMT_ASSIGN && j < st->nidx; j++)
            if (st->idx_pos[j].off == pos.off) return st->name;
    }
    return "R";
}

/* A complex result is stored as its parts, [..., 2] (as a complex array is
 * bound): *x the part that a new index *cv over 0..2 selects. */
static int cplx_result(ck *c, const ast_node *e, const val *v, int *cv, ir **x)
{
    int w = ck_new_var(c, "_part", e->pos);
    if (w == -2) return ck_nomem(c);
    if (w < 0) return ck_err_at(c, e->pos, RED_ERR_LIMIT, "too many index variables");
    c->p->vars[w].lo = ir_const_i(c->b, CT_I64, 0);
    c->p->vars[w].hi = ir_const_i(c->b, CT_I64, 2);
    *x = ck_sel(c, ck_op2(c, OP_EQ, CT_BOOL, ir_index(c->b, w), ir_const_i(c->b, CT_I64, 0)), v->c[0], v->c[1]);
    *cv = w;
    return *x ? 0 : ck_nomem(c);
}

static int lower_result(ck *c, const ast_stmt *st, const ast_node *e, const char *name)
{
    plan *p = c->p;
    scope top = {.accepts = 1};
    c->nalias = 0;   /* a statement's own */
    if (st->kind == STMT_ASSIGN) {
        for (int i = 0; i < st->nidx; i++) {
            for (int j = 0; j < i; j++)
                if (strcmp(st->idx[i], st->idx[j]) == 0)
                    return ck_err_at(c, st->idx_pos[i], RED_ERR_NAME, "index '%s' is listed twice",
                                     st->idx[i]);
            int v = ck_new_var(c, st->idx[i], st->idx_pos[i]);
            if (v == -2) return ck_nomem(c);
            if (v < 0) return ck_err_at(c, st->idx_pos[i], RED_ERR_LIMIT, "too many index variables");
            if (st->idx_lo && st->idx_lo[i]) TRY(lhs_range(c, st, i, v));
            TRY(ck_scope_add(c, &top, v, st->idx_pos[i]));
        }
    }
    val v;
    TRY(ck_lower(c, &top, e, &v));
    for (int k = 0; k < (v.cplx ? 1 : v.n); k++) {
        ir *x = v.c[k];
        int cv = -1;
        if (v.cplx) TRY(cplx_result(c, e, &v, &cv, &x));
        /* literals alone are i64 / f64 */
        varset used = {0};
        ck_collect_vars(c, x, &used);
        for (int i = 0, o = 0, n0 = used.n; i < n0; i++)   /* the part's index is the result's last */
            if (used.v[i] != cv) used.v[o++] = used.v[i];
            else used.n--;
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
        if (cv >= 0) {   /* the parts, innermost */
            if (nd >= RED_MAX_DIMS)
                return ck_err_at(c, e->pos, RED_ERR_LIMIT, "a complex result with more than %d dimensions",
                                 RED_MAX_DIMS - 1);
            dims[nd++] = cv;
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
        r->cplx = cv >= 0;
        if (name && v.n > 1 && !v.cplx) {
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

int chk_build(const ast_program *prog, const chk_binding *binds, int nbinds, const chk_limits *lim,
              util_arena *arena, plan **out, util_diag *diag)
{
    *out = NULL;
    ck c;
    memset(&c, 0, sizeof c);
    c.max_passes = lim && lim->max_passes > 0 && lim->max_passes < MAX_PASSES ? lim->max_passes : MAX_PASSES;
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
    p->uid = plan_next_uid();
    p->src = prog->src;
    c.cap_vars = 8;
    c.cap_passes = c.max_passes < 4 ? c.max_passes : 4;
    c.cap_temps = 8;
    p->vars = util_arena_alloc(arena, (size_t)c.cap_vars * sizeof *p->vars);
    p->passes = util_arena_alloc(arena, (size_t)c.cap_passes * sizeof *p->passes);
    p->temps = util_arena_alloc(arena, (size_t)c.cap_temps * sizeof *p->temps);
    p->bufs = util_arena_alloc(arena, (nbinds + 1) * sizeof *p->bufs);
    p->scalars = util_arena_alloc(arena, (2 * nbinds + 1) * sizeof *p->scalars);   /* complex: two */
    if (!p->vars || !p->passes || !p->temps || !p->bufs || !p->scalars) return ck_nomem(&c);
    for (int i = 0; i < nbinds; i++) {
        if (binds[i].is_array) {
            c.buf_of_bind[i] = p->nbufs;
            if (binds[i].dtype == RED_C64 || binds[i].dtype == RED_C128)   /* read as [..., 2] parts */
                p->bufs[p->nbufs++] = (plan_buf){binds[i].name, binds[i].dtype == RED_C64 ? RED_F32 : RED_F64,
                                                 binds[i].ndim + 1};
            else
                p->bufs[p->nbufs++] = (plan_buf){binds[i].name, binds[i].dtype, binds[i].ndim};
        } else {
            c.scalar_of_bind[i] = p->nscalars;
            p->scalars[p->nscalars++] = (plan_scalar){binds[i].name, plan_ct_of_dtype(binds[i].dtype), 0};
            if (binds[i].dtype == RED_C64 || binds[i].dtype == RED_C128)
                p->scalars[p->nscalars++] = (plan_scalar){binds[i].name, plan_ct_of_dtype(binds[i].dtype), 1};
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

    TRY(ck_merge_passes(&c));

    /* every index needs an extent */
    for (int v = 0; v < p->nvars; v++) {
        plan_var *pv = &p->vars[v];
        if (!pv->lo && !pv->nconstraints && pv->key_pass < 0) {
            /* only variables some pass or result actually uses matter */
            int used = 0, reduced = 0;
            for (int i = 0; i < p->npasses; i++) {
                plan_pass *ps = &p->passes[i];
                for (int k = 0; k < ps->nfree; k++) used |= ps->free[k] == v;
                for (int k = 0; k < ps->nred; k++) reduced |= ps->red[k] == v;
            }
            if (reduced)
                return ck_err_at(&c, pv->pos, RED_ERR_SHAPE,
                                 "index '%s' has no extent: give one with 'over %s in lo..hi' or use "
                                 "it as a subscript", pv->name, pv->name);
            if (used)   /* an index of a result */
                return ck_err_at(&c, pv->pos, RED_ERR_SHAPE,
                                 "index '%s' has no extent: use it as a subscript, or give the result's "
                                 "index a range on the left of '=': %s[%s in lo..hi] = ...",
                                 pv->name, lhs_name(prog, pv->pos), pv->name);
        }
    }
    p->nir = plan_builder_count(c.b);
    if (arena->failed) return ck_nomem(&c);
    *out = p;
    return 0;
}
