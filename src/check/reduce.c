/*
 * reduce.c -- reductions: the indices each one reduces and keeps free, its
 * operator and accumulator types, and the pass of the plan it joins or starts.
 */
#include <math.h>

#include "check_internal.h"

/* ---- IR helpers ------------------------------------------------------------ */

static void vs_add(varset *vs, int v)
{
    for (int i = 0; i < vs->n; i++)
        if (vs->v[i] == v) return;
    if (vs->n < 256) vs->v[vs->n++] = v;
}

/* The IR is hash-consed, so one node may be reached by many paths (isnan of
 * an integer is x != x, which doubles them with each level): a walk visits
 * each node once, remembering those it has seen by id under a stamp that
 * each walk renews.  Nodes made during a walk (ck_subst's) are not looked up. */
int ck_walk_begin(ck *c)
{
    size_t need = (size_t)plan_builder_count(c->b) + 1;
    if (need > c->walk_cap) {
        size_t cap = need > 2 * c->walk_cap ? need : 2 * c->walk_cap;
        uint32_t *st = util_arena_alloc(c->a, cap * sizeof *st);
        ir **vals = util_arena_alloc(c->a, cap * sizeof *vals);
        if (!st || !vals) return 0;   /* the arena's failure ends the check */
        memset(st, 0, cap * sizeof *st);
        c->walk_stamp = st;
        c->walk_val = vals;
        c->walk_cap = cap;
    }
    if (++c->stamp == 0) {
        memset(c->walk_stamp, 0, c->walk_cap * sizeof *c->walk_stamp);
        c->stamp = 1;
    }
    return 1;
}

int ck_walk_seen(ck *c, int on, const ir *x)
{
    if (!on || (size_t)x->id >= c->walk_cap) return 0;
    if (c->walk_stamp[x->id] == c->stamp) return 1;
    c->walk_stamp[x->id] = c->stamp;
    return 0;
}


static void collect_vars(ck *c, int on, const ir *x, varset *vs)
{
    if (!x || ck_walk_seen(c, on, x)) return;
    if (x->kind == IR_INDEX) {
        vs_add(vs, x->slot);
        const plan_var *pv = &c->p->vars[x->slot];
        collect_vars(c, on, pv->lo, vs);
        collect_vars(c, on, pv->hi, vs);
        return;
    }
    for (int i = 0; i < x->nargs; i++) collect_vars(c, on, x->args[i], vs);
}

void ck_collect_vars(ck *c, const ir *x, varset *vs) { collect_vars(c, ck_walk_begin(c), x, vs); }

static ir *subst(ck *c, int on, ir *x, int n, const int *from, const int *to)
{
    if (!x) return NULL;
    if (x->kind == IR_INDEX) {
        for (int i = 0; i < n; i++)
            if (x->slot == from[i]) return ir_index(c->b, to[i]);
        return x;
    }
    if (!x->nargs) return x;
    int memo = on && (size_t)x->id < c->walk_cap;
    if (memo && c->walk_stamp[x->id] == c->stamp) return c->walk_val[x->id];
    ir *args[RED_MAX_DIMS + 3];
    int changed = 0;
    for (int i = 0; i < x->nargs; i++) {
        args[i] = subst(c, on, x->args[i], n, from, to);
        if (!args[i]) return NULL;
        changed |= args[i] != x->args[i];
    }
    ir *r = x;
    if (changed && x->kind == IR_CAST) r = ir_cast(c->b, x->type, args[0]);
    else if (changed && x->kind == IR_LOAD) r = ir_load(c->b, x->type, x->slot, x->nargs, args, x->pos);
    else if (changed) r = ir_op(c->b, x->op, x->type, x->nargs, args);
    if (r && memo) {
        c->walk_stamp[x->id] = c->stamp;
        c->walk_val[x->id] = r;
    }
    return r;
}

ir *ck_load_temp(ck *c, int temp, int nd, const int *vars, util_pos pos)
{
    ir *subs[RED_MAX_DIMS];
    for (int d = 0; d < nd; d++) subs[d] = ir_index(c->b, vars[d]);
    return ir_load(c->b, c->p->temps[temp].type, PLAN_TEMP_SLOT(temp), nd, subs, pos);
}

/* Rebuild `x` with index variables renamed by `map` (from -> to). */
ir *ck_subst(ck *c, ir *x, int n, const int *from, const int *to)
{
    return subst(c, ck_walk_begin(c), x, n, from, to);
}

/* ---- reductions ----------------------------------------------------------------- */

int ck_same_domain_var(const plan *p, int a, int b)
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

static int last_producer(ck *c, int on, const ir *x)
{
    if (!x || ck_walk_seen(c, on, x)) return -1;
    const plan *p = c->p;
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
        int a = last_producer(c, on, x->args[i]);
        if (a > r) r = a;
    }
    if (x->kind == IR_INDEX) {
        int a = last_producer(c, on, p->vars[x->slot].lo), b = last_producer(c, on, p->vars[x->slot].hi);
        if (a > r) r = a;
        if (b > r) r = b;
    }
    return r;
}

/* The last pass producing a temporary that `x` reads (-1: none). */
int ck_last_producer(ck *c, const ir *x) { return last_producer(c, ck_walk_begin(c), x); }

/* An index whose extent comes from whole dimensions only (subscripts without
 * offsets): all those dimensions must agree, so two such indices that share
 * one of them have the same extent whenever a run passes its shape checks. */
static int plain_var(const plan_var *v)
{
    if (v->lo || v->key_pass >= 0 || !v->nconstraints) return 0;
    for (int i = 0; i < v->nconstraints; i++)
        if (v->constraints[i].offset) return 0;
    return 1;
}

int ck_plain_pair(const plan *p, int a, int b)
{
    const plan_var *x = &p->vars[a], *y = &p->vars[b];
    if (!plain_var(x) || !plain_var(y)) return 0;
    for (int i = 0; i < x->nconstraints; i++)
        for (int j = 0; j < y->nconstraints; j++)
            if (x->constraints[i].buf == y->constraints[j].buf && x->constraints[i].dim == y->constraints[j].dim)
                return 1;
    return 0;
}

int ck_equal_extents(const plan *p, int a, int b)
{
    return ck_same_domain_var(p, a, b) || ck_plain_pair(p, a, b);
}

/* Does reduction pass `ps` walk the domain of a reduction with free indices
 * fr[] (the same variables), reduced indices rd[] (the same extents) and
 * `key`?  by_shape: reduced indices may also be plain ones that share a
 * dimension (`count(true) by seg[i]` beside `sum(v[i]) by seg[i]`; the
 * caller then gives the pass's indices the other's shape checks). */
int ck_pass_matches(ck *c, const plan_pass *ps, int nfree, const int *fr, int nred, const int *rd,
                    ir *key, int by_shape)
{
    const plan *p = c->p;
    if (!ps->nreds || ps->scan || ps->nfree != nfree || ps->nred != nred || !!ps->key != !!key) return 0;
    for (int k = 0; k < nfree; k++)
        if (ps->free[k] != fr[k]) return 0;
    for (int k = 0; k < nred; k++)
        if (!(by_shape ? ck_equal_extents : ck_same_domain_var)(p, ps->red[k], rd[k])) return 0;
    return !key || ck_subst(c, key, nred, rd, ps->red) == ps->key;
}

/* Find a pass with the same domain that runs after everything the new
 * reduction reads, or start one. */
/* Does scan pass `ps` walk the domain of a scan of kind `scan` (inclusive or
 * exclusive: one kind a pass) with free indices fr[] (the same variables),
 * scanned indices rd[] (the same extents) and restart key `reset`? */
static int scan_matches(ck *c, const plan_pass *ps, int scan, int nfree, const int *fr, int nred, const int *rd,
                        ir *reset)
{
    if (ps->scan != scan || ps->nfree != nfree || ps->nred != nred || !!ps->reset != !!reset) return 0;
    for (int k = 0; k < nfree; k++)
        if (ps->free[k] != fr[k]) return 0;
    for (int k = 0; k < nred; k++)
        if (!ck_equal_extents(c->p, ps->red[k], rd[k])) return 0;
    return !reset || ck_subst(c, reset, nred, rd, ps->red) == ps->reset;
}

static int find_pass(ck *c, int nfree, const int *fr, int nred, const int *rd, ir *key, int scan,
                     int after, int *pass_out)
{
    plan *p = c->p;
    for (int i = after + 1; i < p->npasses; i++) {
        if (scan ? !scan_matches(c, &p->passes[i], scan, nfree, fr, nred, rd, key)
                 : !ck_pass_matches(c, &p->passes[i], nfree, fr, nred, rd, key, 1))
            continue;
        /* the pass's indices check every shape the new reduction's did */
        for (int k = 0; k < nred; k++) TRY(ck_take_constraints(c, p->passes[i].red[k], rd[k]));
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
    ps->scan = scan;
    ps->reset = scan ? key : NULL;
    ps->key = scan ? NULL : key;
    ps->key_var = -1;
    ps->map_temp = -1;
    *pass_out = p->npasses++;
    return 0;
}

int ck_op_from_name(const char *name)
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

int ck_add_reduction(ck *c, int pass, const plan_red *rd, int ncomp_out, int *temps_out)
{
    plan *p = c->p;
    plan_pass *ps = &p->passes[pass];
    for (int i = 0; i < ps->nreds; i++) {
        plan_red *o = &ps->reds[i];
        if (rd->rop == ROP_MAX && o->uname == ck_max_pair_name && o->map[0] == rd->map[0] &&
            o->acc[0] == rd->acc[0]) {
            temps_out[0] = o->temp[0];   /* the max, as the first field of fuse.c's pair */
            return 0;
        }
        if (o->rop != rd->rop || o->ncomp != rd->ncomp || o->uname != rd->uname || o->skipnan != rd->skipnan)
            continue;
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
    if (plan_scan_ranged(p, ps)) {   /* indexed by k alone: the ranges tile it */
        nd = 1;
        dims[0] = ps->red[0];
    } else if (ps->scan) {   /* a scan's result has an element per element walked */
        memcpy(dims + nd, ps->red, ps->nred * sizeof *dims);
        nd += ps->nred;
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

int ck_lower_user_combine(ck *c, const ast_stmt *op, int ncomp, const int *types, ir **out)
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

/* A reduction operator that is neither built in nor mean/count: a user
 * operator, or an error suggesting the closest name. */
static int find_user_op(ck *c, const ast_node *n, const char *opname, const ast_stmt **uop)
{
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
    *uop = c->ops[oi];
    return 0;
}

/* The over-list into the reduction's own scope `rs`: a new variable per
 * index, with the range bounds lowered in the scope `s` around it. */
static int lower_over(ck *c, scope *s, const ast_node *n, scope *rs)
{
    plan *p = c->p;
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
        TRY(ck_scope_add(c, rs, v, o->pos));
    }
    return 0;
}

/* The key of `by`, an integer, lowered in the reduction's scope. */
static int lower_key(ck *c, scope *rs, const ast_node *n, ir **key)
{
    val k;
    TRY(ck_lower(c, rs, n->by, &k));
    TRY(ck_single(c, n->by, &k));
    if (!CT_IS_INT(k.c[0]->type))
        return ck_err_at(c, n->by->pos, RED_ERR_TYPE, "the key of 'by' must be an integer, not %s",
                         plan_ct_name(k.c[0]->type));
    *key = ir_cast(c->b, CT_I64, k.c[0]);
    return 0;
}

/* The map expressions, accumulator types, identity and combine of a user
 * operator; *nres: the number of fields of the result. */
static int map_user(ck *c, const ast_node *n, const ast_stmt *uop, const val *body, plan_red *rd,
                    int *nres)
{
    rd->uname = uop->name;
    rd->ordered = uop->ordered;
    /* identity arity decides the tuple size */
    val idv;
    scope none = {.accepts = 1};
    const ast_stmt *saved = c->in_op;
    c->in_op = uop;
    c->op_ncomp = 0;
    int rc = ck_lower(c, &none, uop->exprs[1], &idv);
    c->in_op = saved;
    if (rc) return rc;
    if (body->n != idv.n)
        return ck_err_at(c, n->args[0]->pos, RED_ERR_TYPE,
                         "operator '%s' reduces %d-field values (its identity has %d) but this "
                         "operand has %d", uop->name, idv.n, idv.n, body->n);
    rd->ncomp = *nres = body->n;
    for (int k = 0; k < body->n; k++) {
        int t = body->c[k]->type;
        rd->acc[k] = t;
        rd->map[k] = body->c[k];
        ir *idc = ir_cast(c->b, t, idv.c[k]);
        if (!const_value(idc, &rd->identity[k]))
            return ck_err_at(c, uop->exprs[1]->pos, RED_ERR_TYPE,
                             "the identity of operator '%s' must be made of constants", uop->name);
    }
    return ck_lower_user_combine(c, uop, rd->ncomp, rd->acc, rd->combine);
}

/* The map expression and accumulator type of a built-in reduction. */
static int map_builtin(ck *c, const ast_node *n, const char *opname, int is_mean, int is_count,
                       const val *body, plan_red *rd)
{
    if (body->tuple)
        return ck_err_at(c, n->args[0]->pos, RED_ERR_TYPE,
                         "'%s' reduces single values, not a tuple of %d; use a user-defined "
                         "operator (op NAME(a, b) = ... identity ...)", opname, body->n);
    ir *x = body->c[0];
    int t = x->type;
    switch (rd->rop) {
    case ROP_SUM:
    case ROP_PROD:
        if (is_count) {
            rd->acc[0] = CT_I64;
            rd->map[0] = ir_cast(c->b, CT_I64, ck_to_bool(c, x));
        } else {
            rd->acc[0] = is_mean ? (CT_IS_FLOAT(t) ? t : CT_F64) : sum_type(t);
            rd->map[0] = ir_cast(c->b, rd->acc[0], x);
        }
        break;
    case ROP_MIN: case ROP_MAX: case ROP_ARGMIN: case ROP_ARGMAX:
        rd->acc[0] = t;
        rd->map[0] = x;
        break;
    case ROP_BAND: case ROP_BOR: case ROP_BXOR:
        if (CT_IS_FLOAT(t))
            return ck_err_at(c, n->args[0]->pos, RED_ERR_TYPE,
                             "bit reduction '%s' of %s values: it needs integers or bools",
                             opname, plan_ct_name(t));
        rd->acc[0] = t;
        rd->map[0] = x;
        break;
    case ROP_LAND: case ROP_LOR:
        rd->acc[0] = CT_BOOL;
        rd->map[0] = ck_to_bool(c, x);
        break;
    }
    return 0;
}

/* Index v out of the nearest scope from s up that has it. */
static void drop_index(scope *s, int v)
{
    for (; s; s = s->parent)
        for (int i = 0; i < s->nvars; i++)
            if (s->vars[i] == v) {
                memmove(&s->vars[i], &s->vars[i + 1], (size_t)(s->nvars - i - 1) * sizeof s->vars[0]);
                s->nvars--;
                return;
            }
}

/* What is reduced (the variables of the reduction's scope, red[]) and what
 * stays free (every other variable the map, the key or the bounds read, fr[]);
 * nv0: the first index the reduction's own text introduced. */
static int split_domain(ck *c, const ast_node *n, const scope *rs, const plan_red *rd, ir *key, int scan, int nv0,
                        int *red, int *nred_out, int *fr, int *nfree_out)
{
    plan *p = c->p;
    int nred = 0;
    for (int i = 0; i < rs->nvars; i++) {
        if (nred >= RED_MAX_DIMS)
            return ck_err_at(c, n->pos, RED_ERR_LIMIT, "a reduction over more than %d indices",
                             RED_MAX_DIMS);
        red[nred++] = rs->vars[i];
    }
    varset used = {0};
    for (int k = 0; k < rd->ncomp; k++) ck_collect_vars(c, rd->map[k], &used);
    ck_collect_vars(c, key, &used);
    for (int k = 0; k < nred; k++) {
        /* a range's bounds make their indices free even if the operand does
         * not use them: count(true) over k in ptr[r]..ptr[r+1] is per r */
        ck_collect_vars(c, p->vars[red[k]].lo, &used);
        ck_collect_vars(c, p->vars[red[k]].hi, &used);
    }
    int nfree = 0;
    for (int i = 0; i < used.n; i++) {
        int v = used.v[i], isred = 0;
        for (int k = 0; k < nred; k++) isred |= red[k] == v;
        if (isred) continue;
        if (nfree >= RED_MAX_DIMS)
            return ck_err_at(c, n->pos, RED_ERR_LIMIT, "a result with more than %d dimensions",
                             RED_MAX_DIMS);
        fr[nfree++] = v;
    }
    if (scan) {
        /* its result has the free indices and the scanned ones */
        if (nfree + nred > RED_MAX_DIMS)
            return ck_err_at(c, n->pos, RED_ERR_LIMIT, "a result with more than %d dimensions", RED_MAX_DIMS);
        for (int k = 0; k < nred; k++) {
            const plan_var *pv = &p->vars[red[k]];
            if (!pv->lo) continue;
            /* rows that follow each other, each scanned into its own range of
             * a result indexed by k (plan_scan_ranged) */
            if (nred != 1 || nfree != 1 || key || !plan_csr_bounds(pv->lo, pv->hi, fr[0]))
                return ck_err_at(c, pv->pos, RED_ERR_SHAPE,
                                 "a scan over the ranged index '%s' needs ranges that follow each other, "
                                 "one a row: 'over %s in ptr[r]..ptr[r+1]', '%s' the only index scanned and "
                                 "'r' the only other index (or scan the whole index by a key: "
                                 "cumsum(v[k]) by row[k])",
                                 pv->name, pv->name, pv->name);
            if (!pv->nconstraints)
                return ck_err_at(c, pv->pos, RED_ERR_SHAPE,
                                 "a scan over the ranged index '%s' takes its result's length from the "
                                 "arrays '%s' subscripts, and none does",
                                 pv->name, pv->name);
            /* its rows are its own: a row index its bounds introduced (an
             * implicit index of the reduction around it) is no index there,
             * or sum(cumsum(v[k]) over k in ptr[r]..ptr[r+1]) would count each
             * element once a row */
            if (fr[0] >= nv0) drop_index(rs->parent, fr[0]);
        }
    }
    /* range bounds may use free indices only (checked when lowered) */
    if (key && nfree && !scan)
        return ck_err_at(c, n->by->pos, RED_ERR_SHAPE,
                         "a reduction with 'by' cannot have free indices ('%s' is not reduced)",
                         p->vars[fr[0]].name);
    *nred_out = nred;
    *nfree_out = nfree;
    return 0;
}

/* The pass the reduction joins or starts, after every pass producing a
 * temporary it reads; a keyed pass's key index is reduced by the nearest
 * enclosing reduction without `over` (scope `s`), or free. */
static int place_in_pass(ck *c, scope *s, const ast_node *n, const plan_red *rd, ir *key, int scan,
                         int nfree, const int *fr, int nred, const int *red, int *pass_out)
{
    plan *p = c->p;
    int after = ck_last_producer(c, key);
    for (int k = 0; k < rd->ncomp; k++) {
        int a = ck_last_producer(c, rd->map[k]);
        if (a > after) after = a;
    }
    for (int k = 0; k < nred; k++) {
        int a = ck_last_producer(c, p->vars[red[k]].lo), b = ck_last_producer(c, p->vars[red[k]].hi);
        if (a > after) after = a;
        if (b > after) after = b;
    }
    int pass = -1;
    TRY(find_pass(c, nfree, fr, nred, red, key, scan, after, &pass));
    plan_pass *ps = &p->passes[pass];
    if (scan) {
        /* a scan's key only restarts it: no key index */
    } else if (ps->nreds == 0 && key) {
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
    *pass_out = pass;
    return 0;
}

/* The reduction added to its pass, and the value that reads its result: one
 * load per field of the temporaries, or sum / count for a mean.  For nanmean,
 * nanmin and nanmax (`valid`: the operand is not NaN; else NULL) the mean
 * divides by the count of valid elements, and a min or max over none of them
 * is NaN. */
static int read_result(ck *c, const ast_node *n, int pass, plan_red *rd, int nres, int nred,
                       const int *red, int is_mean, ir *valid, const int *scan_at, val *out)
{
    plan *p = c->p;
    plan_pass *ps = &p->passes[pass];
    /* rename this reduction's indices to the pass's */
    for (int k = 0; k < rd->ncomp; k++) rd->map[k] = ck_subst(c, rd->map[k], nred, red, ps->red);
    int temps[PLAN_MAX_COMP];
    TRY(ck_add_reduction(c, pass, rd, nres, temps));

    int dims = ps->key ? 1 : ps->nfree;
    const int *at = ps->key ? &ps->key_var : ps->free;
    int scan_idx[2 * RED_MAX_DIMS];
    if (scan_at) {   /* a scan's result: at its free indices and where the text reads its scanned ones */
        int nf = plan_scan_ranged(p, ps) ? 0 : ps->nfree;   /* over ranged rows: k alone */
        memcpy(scan_idx, ps->free, nf * sizeof *scan_idx);
        memcpy(scan_idx + nf, scan_at, nred * sizeof *scan_idx);
        dims = nf + nred;
        at = scan_idx;
    }
    val r = {.n = nres, .tuple = nres > 1};
    for (int k = 0; k < nres; k++) r.c[k] = ck_load_temp(c, temps[k], dims, at, n->pos);

    if (is_mean || valid) {
        /* mean = sum / count over the same domain, fused in the same pass (the
         * valid elements only, for nanmean) */
        plan_red cnt;
        memset(&cnt, 0, sizeof cnt);
        cnt.rop = ROP_SUM;
        cnt.ncomp = 1;
        cnt.acc[0] = CT_I64;
        cnt.map[0] = valid ? ir_cast(c->b, CT_I64, ck_subst(c, valid, nred, red, ps->red))
                           : ir_const_i(c->b, CT_I64, 1);
        int ct = -1;   /* add_reduction sets it; GCC, inlining this, cannot tell */
        if (!cnt.map[0]) return ck_nomem(c);
        TRY(ck_add_reduction(c, pass, &cnt, 1, &ct));
        ir *cl = ck_load_temp(c, ct, dims, at, n->pos);
        int ft = rd->acc[0];
        if (is_mean) {
            r.c[0] = ck_op2(c, OP_DIV, ft, r.c[0], ir_cast(c->b, ft, cl));
        } else {
            ir *none = ck_op2(c, OP_EQ, CT_BOOL, cl, ir_const_i(c->b, CT_I64, 0));
            ir *args[3] = {none, ir_const_f(c->b, ft, NAN), r.c[0]};
            r.c[0] = ir_op(c->b, OP_SELECT, ft, 3, args);
        }
    }
    for (int k = 0; k < r.n; k++)
        if (!r.c[k]) return ck_nomem(c);
    *out = r;
    return 0;
}

/* The operand of nansum, nanprod, nanmin, nanmax or nanmean (`name`): NaN
 * elements replaced by the operator's identity, so that they change nothing;
 * *valid: the elements that are not NaN (NULL for integers and bools, which
 * have none, and then the form is the plain one). */
static int nan_form(ck *c, const ast_node *n, const char *name, int rop, val *body, ir **valid)
{
    if (rop != ROP_SUM && rop != ROP_PROD && rop != ROP_MIN && rop != ROP_MAX && rop != ROP_ARGMIN &&
        rop != ROP_ARGMAX)
        return ck_err_at(c, n->name_pos, RED_ERR_NAME,
                         "unknown reduction operator '%s': the NaN-skipping ones are nansum, nanprod, "
                         "nanmin, nanmax, nanmean, nanargmin and nanargmax", name);
    if (body->tuple)
        return ck_err_at(c, n->args[0]->pos, RED_ERR_TYPE, "'%s' reduces single values, not a tuple of %d",
                         name, body->n);
    ir *x = body->c[0];
    *valid = NULL;
    /* nanargmin / nanargmax: the operand as it is, its NaNs not folded (skipnan) */
    if (!CT_IS_FLOAT(x->type) || rop == ROP_ARGMIN || rop == ROP_ARGMAX) return 0;
    ir *ok = ck_op1(c, OP_NOT, CT_BOOL, ck_op1(c, OP_ISNAN, CT_BOOL, x));
    plan_value id = plan_identity(rop, x->type);
    ir *args[3] = {ok, x, ir_const(c->b, x->type, id)};
    body->c[0] = ir_op(c->b, OP_SELECT, x->type, 3, args);
    *valid = ok;
    return body->c[0] && ok ? 0 : ck_nomem(c);
}

/* A reduction, in phases: its operator, its scope and indices, its operand
 * and key, the map and accumulator types, the domain it reduces and keeps
 * free, the pass it joins, and the value reading its result. */
/* A reduction's operator as the text gives it: rop, and the forms on top of it. */
typedef struct red_form {
    const char *name;          /* as written: "nanmean", "sum", a user's name */
    const char *opname;        /* without "nan" */
    int rop, is_mean, is_count, is_nan;
    const ast_stmt *uop;
    int scan;                  /* 0, AST_SCAN or AST_EXSCAN */
    const int *scan_at;        /* a scan: the indices its result is read at (scan_targets) */
    int nv0;                   /* the plan's indices before its own (split_domain) */
} red_form;

/* The phases after the operand: the map expressions and accumulator types,
 * the domain it reduces and keeps free, the pass it joins, and the value
 * reading its result.  online: the planner may rewrite it (fuse.c). */
static int reduce_body(ck *c, scope *s, const ast_node *n, const scope *rs, const red_form *f, val *body,
                       ir *valid, ir *key, int online, val *out)
{
    plan_red rd;
    memset(&rd, 0, sizeof rd);
    rd.rop = f->rop;
    rd.pos = n->pos;
    rd.ncomp = 1;
    rd.skipnan = f->is_nan && (f->rop == ROP_ARGMIN || f->rop == ROP_ARGMAX) && CT_IS_FLOAT(body->c[0]->type);
    int nres = 1;
    if (f->rop == ROP_USER) TRY(map_user(c, n, f->uop, body, &rd, &nres));
    else TRY(map_builtin(c, n, f->opname, f->is_mean, f->is_count, body, &rd));
    for (int k = 0; k < rd.ncomp; k++)
        if (!rd.map[k]) return ck_nomem(c);

    /* what is reduced, what stays free */
    int red[RED_MAX_DIMS], nred = 0, fr[RED_MAX_DIMS], nfree = 0;
    TRY(split_domain(c, n, rs, &rd, key, f->scan, f->nv0, red, &nred, fr, &nfree));

    int done = 0;
    if (online && !f->scan && !f->is_mean && !f->is_nan)
        TRY(ck_online_rewrite(c, n, &rd, key, nfree, fr, nred, red, out, &done));
    if (done) return 0;
    int pass = -1;
    TRY(place_in_pass(c, s, n, &rd, key, f->scan, nfree, fr, nred, red, &pass));
    /* nanmin / nanmax of nothing but NaN: NaN; nanmean: over the valid elements */
    ir *guard = valid && (f->is_mean || f->rop == ROP_MIN || f->rop == ROP_MAX) ? valid : NULL;
    return read_result(c, n, pass, &rd, nres, nred, red, f->is_mean, guard, f->scan_at, out);
}

/* The product of complex values: a planner-made operator over (re, im)
 * pairs, commutative, its identity (1, 0) neutral. */
static int cplx_prod(ck *c, scope *s, const ast_node *n, const scope *rs, const red_form *f, const val *body,
                     ir *key, val *out)
{
    int ft = body->c[0]->type;
    plan_red rd;
    memset(&rd, 0, sizeof rd);
    rd.rop = ROP_USER;
    rd.uname = "complex product";
    rd.neutral = 1;
    rd.pos = n->pos;
    rd.ncomp = 2;
    for (int k = 0; k < 2; k++) {
        rd.acc[k] = ft;
        rd.map[k] = body->c[k];
    }
    rd.identity[0].f = 1.0;
    rd.identity[1].f = 0.0;
    /* component k of the left operand is parameter 2k, of the right 2k + 1 */
    ir *ar = ir_param(c->b, ft, 0), *br = ir_param(c->b, ft, 1), *ai = ir_param(c->b, ft, 2),
       *bi = ir_param(c->b, ft, 3);
    rd.combine[0] = ck_op2(c, OP_SUB, ft, ck_op2(c, OP_MUL, ft, ar, br), ck_op2(c, OP_MUL, ft, ai, bi));
    rd.combine[1] = ck_op2(c, OP_ADD, ft, ck_op2(c, OP_MUL, ft, ar, bi), ck_op2(c, OP_MUL, ft, ai, br));
    if (!rd.combine[0] || !rd.combine[1]) return ck_nomem(c);
    int red[RED_MAX_DIMS], nred = 0, fr[RED_MAX_DIMS], nfree = 0, pass = -1;
    TRY(split_domain(c, n, rs, &rd, key, f->scan, f->nv0, red, &nred, fr, &nfree));
    TRY(place_in_pass(c, s, n, &rd, key, f->scan, nfree, fr, nred, red, &pass));
    TRY(read_result(c, n, pass, &rd, 2, nred, red, 0, NULL, f->scan_at, out));
    *out = ck_cplx_mk(out->c[0], out->c[1]);
    return 0;
}

/* A reduction of complex values: sum and mean as two real ones in the same
 * pass, prod as a pair operator, count, any and all of z != 0; none of the
 * others. */
static int cplx_reduce(ck *c, scope *s, const ast_node *n, const scope *rs, const red_form *f, val *body,
                       ir *key, val *out)
{
    if (f->is_count || f->rop == ROP_LOR || f->rop == ROP_LAND) {
        val t = ck_mk(ck_cplx_truth(c, body), 0);
        return reduce_body(c, s, n, rs, f, &t, NULL, key, 0, out);
    }
    if (f->is_nan || f->rop == ROP_USER ||
        (f->rop != ROP_SUM && f->rop != ROP_PROD))
        return ck_err_at(c, n->name_pos, RED_ERR_TYPE, "%s of complex values is not supported%s", f->name,
                         f->rop == ROP_MIN || f->rop == ROP_MAX || f->rop == ROP_ARGMIN || f->rop == ROP_ARGMAX
                             ? ": complex numbers have no order (NumPy's is by the real part, then the "
                               "imaginary one); reduce abs(z), real(z) or imag(z)"
                         : f->rop == ROP_USER ? ": pass the parts as a tuple, (real(z), imag(z))"
                                              : "");
    if (f->rop == ROP_PROD) return cplx_prod(c, s, n, rs, f, body, key, out);
    val part[2];
    for (int k = 0; k < 2; k++) {
        val b = ck_mk(body->c[k], 0);
        TRY(reduce_body(c, s, n, rs, f, &b, NULL, key, 0, &part[k]));
    }
    *out = ck_cplx_mk(part[0].c[0], part[1].c[0]);
    return 0;
}

/* Where the text reads a scan's result (at[k] for scanned index k of the scan's
 * scope rs): a scanned index becomes an index of the text around the scan, the
 * one of the same name visible there (then both are one index, its extent
 * checked against the shapes of both), or, where there is none, a new index of
 * the nearest reduction without `over` (free at the top level).  The
 * whole-array indices of a scan without `over` become those of the whole
 * arrays around it, or start them: cumsum(x) + y adds elementwise. */
static int scan_targets(ck *c, scope *s, const ast_node *n, const scope *rs, int *at)
{
    plan *p = c->p;
    scope *home = ck_accepting(s);
    if (rs->has_anon) {
        if (home->has_sub)
            return ck_err_at(c, n->pos, RED_ERR_SHAPE,
                             "a scan of whole arrays mixed with subscripted arrays in one reduction; write "
                             "the scan's arrays with subscripts");
        if (home->has_anon && home->nanon != rs->nanon)
            return ck_err_at(c, n->pos, RED_ERR_SHAPE,
                             "this scan has %d dimension%s but '%s' has %d: whole arrays combined "
                             "elementwise must have the same shape",
                             rs->nanon, rs->nanon == 1 ? "" : "s", home->whole_node->name, home->nanon);
        if (!home->has_anon) {
            home->has_anon = 1;
            home->whole_node = n;
            home->nanon = rs->nanon;
            for (int d = 0; d < rs->nanon; d++) {
                home->anon[d] = rs->anon[d];
                TRY(ck_scope_add(c, home, rs->anon[d], n->pos));
            }
        } else {
            for (int d = 0; d < rs->nanon; d++) TRY(ck_take_constraints(c, home->anon[d], rs->anon[d]));
        }
    }
    for (int k = 0; k < rs->nvars; k++) {
        int v = rs->vars[k], w = -1;
        for (int d = 0; rs->has_anon && d < rs->nanon; d++)
            if (rs->anon[d] == v) w = home->anon[d];
        if (w < 0) {
            w = ck_find_var(s, p, p->vars[v].name);
            /* (a ranged scanned index's too: its rows tile the result, as long as its arrays) */
            if (w >= 0) TRY(ck_share_constraints(c, w, v));
        }
        if (w < 0 && p->vars[v].lo) {
            /* a ranged index's rows tile the result: around the scan it is a
             * plain index over the arrays' length (ck_take_constraints takes
             * none from a ranged one) */
            const plan_var *pv = &p->vars[v];
            w = ck_new_var(c, pv->name, pv->pos);
            if (w == -2) return ck_nomem(c);
            if (w < 0) return ck_err_at(c, n->pos, RED_ERR_LIMIT, "too many index variables");
            TRY(ck_share_constraints(c, w, v));
            TRY(ck_scope_add(c, home, w, p->vars[w].pos));
        }
        if (w < 0) {
            w = v;
            TRY(ck_scope_add(c, home, v, p->vars[v].pos));
        }
        at[k] = w;
    }
    return 0;
}

/* The forms a scan refuses: those with no cumulative meaning here. */
static int scan_form(ck *c, const ast_node *n, const red_form *f)
{
    if (f->is_mean)
        return ck_err_at(c, n->name_pos, RED_ERR_NAME,
                         "there is no cumulative %s: divide a cumsum by a cumcount", f->name);
    if (f->is_nan && f->rop != ROP_SUM && f->rop != ROP_PROD)
        return ck_err_at(c, n->name_pos, RED_ERR_NAME,
                         "the NaN-skipping scans are nancumsum and nancumprod (scan of '%s')", f->name);
    if (f->scan == AST_EXSCAN && (f->rop == ROP_ARGMIN || f->rop == ROP_ARGMAX))
        return ck_err_at(c, n->name_pos, RED_ERR_TYPE,
                         "an exclusive %s scan has no index to give the first element", f->name);
    return 0;
}

/* A reduction, or a scan (`scan`: AST_SCAN or AST_EXSCAN), of operator `opname`. */
static int lower_red(ck *c, scope *s, const ast_node *n, const char *opname, int scan, val *out)
{
    if (c->in_op)
        return ck_err_at(c, n->pos, RED_ERR_TYPE, "operator '%s' may not contain a %s",
                         c->in_op->name, scan ? "scan" : "reduction");
    /* nansum, nanprod, nanmin, nanmax, nanmean: the same over the elements
     * that are not NaN (nan_form); "nan" and a built-in name, not a user's */
    red_form f = {.name = opname, .scan = scan, .nv0 = c->p->nvars};
    f.is_nan = strncmp(opname, "nan", 3) == 0 && ck_find_op(c, opname) < 0 &&
               (ck_op_from_name(opname + 3) >= 0 || strcmp(opname + 3, "mean") == 0);
    if (f.is_nan) opname += 3;
    f.opname = opname;
    f.is_mean = strcmp(opname, "mean") == 0;
    f.is_count = strcmp(opname, "count") == 0;
    f.rop = f.is_mean || f.is_count ? ROP_SUM : ck_op_from_name(opname);
    if (f.rop < 0) {
        TRY(find_user_op(c, n, opname, &f.uop));
        f.rop = ROP_USER;
    }
    if (scan) TRY(scan_form(c, n, &f));

    /* the reduction's own scope and its explicit indices */
    scope rs = {.parent = s, .accepts = !n->has_over};
    TRY(lower_over(c, s, n, &rs));

    val body;
    TRY(ck_lower(c, &rs, n->args[0], &body));
    ir *key = NULL;
    int at[64];
    if (body.cplx) {
        if (n->by) TRY(lower_key(c, &rs, n, &key));
        TRY(check_over_tail(c, n, &rs));
        if (scan) {
            TRY(scan_targets(c, s, n, &rs, at));
            f.scan_at = at;
        }
        return cplx_reduce(c, s, n, &rs, &f, &body, key, out);
    }
    ir *valid = NULL;
    if (f.is_nan) TRY(nan_form(c, n, f.name, f.rop, &body, &valid));
    if (n->by) TRY(lower_key(c, &rs, n, &key));
    TRY(check_over_tail(c, n, &rs));
    if (scan) {
        TRY(scan_targets(c, s, n, &rs, at));
        f.scan_at = at;
    }
    return reduce_body(c, s, n, &rs, &f, &body, valid, key, 1, out);
}

int ck_lower_reduce(ck *c, scope *s, const ast_node *n, const char *opname, val *out)
{
    return lower_red(c, s, n, opname, 0, out);
}

int ck_lower_scan(ck *c, scope *s, const ast_node *n, const char *opname, int scan, val *out)
{
    return lower_red(c, s, n, opname, scan, out);
}
