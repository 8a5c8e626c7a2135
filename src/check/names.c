/*
 * names.c -- what a name means where it is written: index variables and their
 * scopes, named values, bound arrays and scalars, operators, and the
 * "did you mean" suggestion when it means nothing.
 */
#include "check_internal.h"

#include <stdio.h>

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

int ck_find_var(const scope *s, const plan *p, const char *name) { return find_var(s, p, name); }

scope *ck_accepting(scope *s)
{
    while (s && !s->accepts) s = s->parent;
    return s;
}

int ck_scope_add(ck *c, scope *s, int var, util_pos pos)
{
    if (s->nvars >= 64) return ck_err_at(c, pos, RED_ERR_LIMIT, "too many index variables in one reduction (64)");
    s->vars[s->nvars++] = var;
    return 0;
}

int ck_is_idx_name(ck *c, const char *name)
{
    for (int i = 0; i < c->nidx_names; i++)
        if (strcmp(c->idx_names[i], name) == 0) return 1;
    return 0;
}

int ck_find_bind(ck *c, const char *name)
{
    for (int i = 0; i < c->nbinds; i++)
        if (strcmp(c->binds[i].name, name) == 0) return i;
    return -1;
}

int ck_find_let(ck *c, const char *name)
{
    for (int i = c->visible_lets - 1; i >= 0; i--)
        if (strcmp(c->lets[i]->name, name) == 0) return i;
    return -1;
}

int ck_find_op(ck *c, const char *name)
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

void ck_suggest_offer(suggest *sg, const char *cand)
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

ir *ck_index_value(ck *c, int v)
{
    for (int i = 0; i < c->nalias; i++)
        if (c->alias_var[i] == v) return c->alias_ir[i];
    return ir_index(c->b, v);
}

/* Element subs[0..ndim-1] of the array bound by bd (buffer buf); of a
 * complex array, which is bound as [..., 2] (expr_inputs), the pair of its
 * parts. */
static int load_elem(ck *c, const chk_binding *bd, int buf, ir **subs, util_pos pos, val *out)
{
    int t = plan_ct_of_dtype(bd->dtype);
    if (!ck_is_cplx_dtype(bd->dtype)) {
        *out = ck_mk(ir_load(c->b, t, buf, bd->ndim, subs, pos), 0);
        return out->c[0] ? 0 : ck_nomem(c);
    }
    ir *part[2];
    for (int k = 0; k < 2; k++) {
        subs[bd->ndim] = ir_const_i(c->b, CT_I64, k);
        part[k] = ir_load(c->b, t, buf, bd->ndim + 1, subs, pos);
        if (!part[k]) return ck_nomem(c);
    }
    *out = ck_cplx_mk(part[0], part[1]);
    return 0;
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

/* ---- literals and names ---------------------------------------------------- */

int ck_lower_name(ck *c, scope *s, const ast_node *n, val *out)
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
        *out = ck_mk(ck_index_value(c, v), 0);
        return *out->c ? 0 : ck_nomem(c);
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
        if (!bd->is_array && ck_is_cplx_dtype(bd->dtype)) {   /* its parts are two scalars */
            int t = plan_ct_of_dtype(bd->dtype), k = c->scalar_of_bind[bi];
            *out = ck_cplx_mk(ir_scalar(c->b, t, k), ir_scalar(c->b, t, k + 1));
            return out->c[0] && out->c[1] ? 0 : ck_nomem(c);
        }
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
        return load_elem(c, bd, c->buf_of_bind[bi], subs, n->pos, out);
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

int ck_lower_index(ck *c, scope *s, const ast_node *n, val *out)
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
    return load_elem(c, bd, buf, subs, n->pos, out);
}
