/*
 * fuse.c -- fewer passes over the data: reductions that depend on another
 * reduction over the same domain, rewritten into one online reduction beside
 * it, and reduction passes over equal domains merged after lowering.
 *
 * The rewrites (docs/language.md, "Fusion", lists them with their accuracy):
 *
 *   sum(exp(X - m)), m = max(X) over the same domain  ->  one pass of
 *     (M, s): a running maximum M and the sum s of exp(X - M) rescaled by
 *     exp(M_old - M_new) whenever M grows (the log-sum-exp trick);
 *   sum((X - mean(X))^2)  ->  one pass of (n, mean, M2) merged as Welford
 *     and Chan et al. do (no sum-of-squares-minus-square-of-sum).
 *
 * Both keep the value the expression defines for every input, IEEE special
 * values included; they differ from the two-pass evaluation only in rounding.
 *
 * A map over the domain of the reduction it reads last (a row's softmax
 * P[i,j] = exp(A[i,j] - m[i]) / s[i], or log(s[i]) + m[i]) is marked that
 * pass's epilogue, so a backend can run it per output right after the output's
 * reduction, while the output's inputs are still close.
 */
#include <math.h>

#include "check_internal.h"

/* ---- matching the IR of a dependent reduction ------------------------------- */

static const ir *strip_cast(const ir *x) { return x->kind == IR_CAST ? x->args[0] : x; }

static int is_op(const ir *x, int op) { return x->kind == IR_OP && x->op == op; }

/* `x` (a float-to-float widening at most) loads a temporary at exactly the
 * indices fr[0..nfree-1]: which one, else -1. */
static int temp_at(const ir *x, int nfree, const int *fr)
{
    if (x->kind == IR_CAST && CT_IS_FLOAT(x->type) && CT_IS_FLOAT(x->args[0]->type) &&
        plan_ct_size(x->type) >= plan_ct_size(x->args[0]->type))
        x = x->args[0];
    if (x->kind != IR_LOAD || x->slot >= 0 || x->nargs != nfree) return -1;
    for (int d = 0; d < nfree; d++)
        if (x->args[d]->kind != IR_INDEX || x->args[d]->slot != fr[d]) return -1;
    return -1 - x->slot;
}

/* The reduction writing temporary `t` as its first component, and its pass. */
static plan_red *red_of_temp(const plan *p, int t, int *pass_out)
{
    for (int i = 0; i < p->npasses; i++)
        for (int q = 0; q < p->passes[i].nreds; q++)
            if (p->passes[i].reds[q].temp[0] == t) {
                *pass_out = i;
                return &p->passes[i].reds[q];
            }
    return NULL;
}

/* The reduction (operator `rop`) that temporary `t`, read at the free indices
 * of the reduction being lowered, comes from, if its pass walks that
 * reduction's domain; its pass in *pass_out. */
static plan_red *sibling(ck *c, int t, int rop, int nfree, const int *fr, int nred, const int *red,
                         int *pass_out)
{
    if (t < 0) return NULL;
    plan_red *r = red_of_temp(c->p, t, pass_out);
    if (!r || r->rop != rop) return NULL;
    if (!ck_pass_matches(c, &c->p->passes[*pass_out], nfree, fr, nred, red, NULL, 0)) return NULL;
    return r;
}

/* A planner-made operator (ROP_USER, neutral identity, natively folded where
 * a backend knows `online`); the caller fills its fields' types, maps,
 * identities and combine. */
static plan_red online_op(const char *name, int online, util_pos pos, int ncomp)
{
    plan_red r;
    memset(&r, 0, sizeof r);
    r.rop = ROP_USER;
    r.uname = name;
    r.neutral = 1;
    r.online = online;
    r.pos = pos;
    r.ncomp = ncomp;
    return r;
}

/* ---- sum(exp(X - max(X))): the running maximum and the rescaled sum ---------- */

/* The pair that replaces a max reduction keeps its first field the max: a
 * later max(X) over the same domain finds it here (ck_add_reduction). */
const char ck_max_pair_name[] = "max and online sum of exp";

/* The combine of (M, s) pairs, s standing for the sum of exp(x - M) over the
 * elements seen: M is the maximum (the language's max, NaN propagating, so
 * that M is the max reduction's value itself) and the side with the smaller
 * maximum is scaled by exp(smaller - larger), one exp per step.  Equal
 * maxima scale by 1, so that while M is -inf, s counts the -inf elements:
 * exp(x - m) is NaN for them only if no larger element comes (see the read
 * in exp_sum).  A NaN element makes s NaN, as it does in the expression. */
static void exp_sum_combine(ck *c, int mt, int st, plan_red *pr)
{
    /* component k of the left operand is parameter 2k, of the right 2k + 1 */
    ir *a0 = ir_param(c->b, mt, 0), *a1 = ir_param(c->b, st, 2);
    ir *b0 = ir_param(c->b, mt, 1), *b1 = ir_param(c->b, st, 3);
    ir *gt = ck_op2(c, OP_GT, CT_BOOL, b0, a0);
    /* smaller - larger, as -|b - a| (subtraction is exactly antisymmetric) */
    ir *d = ck_op1(c, OP_NEG, mt, ck_op1(c, OP_ABS, mt, ck_op2(c, OP_SUB, mt, b0, a0)));
    ir *f = ck_sel(c, ck_op2(c, OP_EQ, CT_BOOL, a0, b0), ir_const_f(c->b, st, 1.0),
                ir_cast(c->b, st, ck_op1(c, OP_EXP, mt, d)));
    ir *s_gt = ck_op2(c, OP_ADD, st, ck_op2(c, OP_MUL, st, a1, f), b1);
    ir *s_le = ck_op2(c, OP_ADD, st, a1, ck_op2(c, OP_MUL, st, b1, f));
    pr->combine[0] = ck_op2(c, OP_MAX, mt, a0, b0);
    pr->combine[1] = ck_sel(c, gt, s_gt, s_le);
}

static int exp_sum(ck *c, const ast_node *n, const plan_red *rd, int nfree, const int *fr, int nred,
                   const int *red, val *out, int *done)
{
    if (rd->rop != ROP_SUM || rd->ncomp != 1 || !CT_IS_FLOAT(rd->acc[0])) return 0;
    const ir *e = strip_cast(rd->map[0]);
    if (!is_op(e, OP_EXP) || !is_op(e->args[0], OP_SUB)) return 0;
    const ir *d = e->args[0];
    int mt = d->type, st = rd->acc[0], pass = -1;
    plan_red *mx = sibling(c, temp_at(d->args[1], nfree, fr), ROP_MAX, nfree, fr, nred, red, &pass);
    if (!mx || !CT_IS_FLOAT(mt)) return 0;
    plan_pass *ps = &c->p->passes[pass];
    ir *x = ck_subst(c, d->args[0], nred, red, ps->red);
    if (!x) return ck_nomem(c);
    if (x != ir_cast(c->b, mt, mx->map[0])) return 0;

    plan_red pr = online_op(ck_max_pair_name, PLAN_ONLINE_EXP_SUM, mx->pos, 2);
    pr.acc[0] = mt;
    pr.acc[1] = st;
    pr.map[0] = x;
    pr.map[1] = ir_const_f(c->b, st, 1.0);
    pr.identity[0].f = -INFINITY;
    pr.identity[1].f = 0.0;
    exp_sum_combine(c, mt, st, &pr);
    int temps[2];
    if (mx->acc[0] == mt) {
        /* the max itself becomes the pair's first field: one comparison
         * chain per element instead of two */
        int s_temp = ck_new_temp(c, st, ps->nfree, ps->free);
        if (s_temp == -2) return ck_nomem(c);
        if (s_temp < 0) return util_diag_set(c->diag, RED_ERR_LIMIT, "too many intermediate results");
        pr.temp[0] = temps[0] = mx->temp[0];
        pr.temp[1] = temps[1] = s_temp;
        *mx = pr;
    } else {
        pr.uname = "online sum of exp (max-rescaled)";
        pr.pos = rd->pos;
        TRY(ck_add_reduction(c, pass, &pr, 2, temps));
    }
    /* NaN as the expression gives it: a maximum of +inf (exp(inf - inf)), or
     * of -inf over elements that are all -inf (s counts them; none: empty, 0) */
    ir *m = ck_load_temp(c, temps[0], nfree, fr, n->pos), *s = ck_load_temp(c, temps[1], nfree, fr, n->pos);
    ir *pinf = ck_op2(c, OP_EQ, CT_BOOL, m, ir_const_f(c->b, mt, INFINITY));
    ir *ninf = ck_op2(c, OP_LAND, CT_BOOL, ck_op2(c, OP_EQ, CT_BOOL, m, ir_const_f(c->b, mt, -INFINITY)),
                      ck_op2(c, OP_NE, CT_BOOL, s, ir_const_f(c->b, st, 0.0)));
    ir *bad = ck_op2(c, OP_LOR, CT_BOOL, pinf, ninf);
    *out = ck_mk(ck_sel(c, bad, ir_const_f(c->b, st, NAN), s), 0);
    if (!out->c[0]) return ck_nomem(c);
    *done = 1;
    return 0;
}

/* ---- sum((X - mean(X))^2): Welford's update and Chan's merge ------------------ */

/* (n, mean, M2) pairs merged: n = na + nb, mean = ma + (mb - ma) nb / n,
 * M2 = M2a + M2b + (mb - ma)^2 na nb / n; an empty side leaves the other. */
static void welford_combine(ck *c, int ft, int st, plan_red *pr)
{
    ir *na = ir_param(c->b, CT_I64, 0), *ma = ir_param(c->b, ft, 2), *qa = ir_param(c->b, st, 4);
    ir *nb = ir_param(c->b, CT_I64, 1), *mb = ir_param(c->b, ft, 3), *qb = ir_param(c->b, st, 5);
    ir *zero = ir_const_i(c->b, CT_I64, 0);
    ir *n = ck_op2(c, OP_ADD, CT_I64, na, nb);
    ir *delta = ck_op2(c, OP_SUB, ft, mb, ma);
    ir *w = ck_op2(c, OP_DIV, ft, ir_cast(c->b, ft, nb), ir_cast(c->b, ft, n));
    ir *mean = ck_op2(c, OP_ADD, ft, ma, ck_op2(c, OP_MUL, ft, delta, w));
    ir *cross = ck_op2(c, OP_MUL, ft, ck_op2(c, OP_MUL, ft, delta, delta),
                       ck_op2(c, OP_MUL, ft, ir_cast(c->b, ft, na), w));
    ir *q = ck_op2(c, OP_ADD, st, ck_op2(c, OP_ADD, st, qa, qb), ir_cast(c->b, st, cross));
    ir *a_empty = ck_op2(c, OP_EQ, CT_BOOL, na, zero), *b_empty = ck_op2(c, OP_EQ, CT_BOOL, nb, zero);
    pr->combine[0] = n;
    pr->combine[1] = ck_sel(c, b_empty, ma, ck_sel(c, a_empty, mb, mean));
    pr->combine[2] = ck_sel(c, b_empty, qa, ck_sel(c, a_empty, qb, q));
}

/* d is X - mean(X): mean(X) lowered as sum / f(count) over this domain */
static int centred(ck *c, const ir *d, int nfree, const int *fr, int nred, const int *red,
                   int *pass_out, ir **x_out)
{
    if (!is_op(d, OP_SUB) || !CT_IS_FLOAT(d->type)) return 0;
    const ir *mean = d->args[1];
    if (!is_op(mean, OP_DIV) || mean->type != d->type || mean->args[1]->kind != IR_CAST) return 0;
    int ps_s = -1, ps_c = -1;
    plan_red *rs = sibling(c, temp_at(mean->args[0], nfree, fr), ROP_SUM, nfree, fr, nred, red, &ps_s);
    plan_red *rc = sibling(c, temp_at(mean->args[1]->args[0], nfree, fr), ROP_SUM, nfree, fr, nred,
                           red, &ps_c);
    if (!rs || !rc || ps_s != ps_c || rs->acc[0] != d->type || rc->acc[0] != CT_I64) return 0;
    if (rc->map[0] != ir_const_i(c->b, CT_I64, 1)) return 0;
    ir *x = ck_subst(c, d->args[0], nred, red, c->p->passes[ps_s].red);
    if (!x) return -1;
    if (x != rs->map[0]) return 0;
    *pass_out = ps_s;
    *x_out = x;
    return 1;
}

static int centred_squares(ck *c, const ast_node *n, const plan_red *rd, int nfree, const int *fr,
                           int nred, const int *red, val *out, int *done)
{
    if (rd->rop != ROP_SUM || rd->ncomp != 1 || !CT_IS_FLOAT(rd->acc[0])) return 0;
    const ir *sq = strip_cast(rd->map[0]);
    const ir *d = NULL;
    if (is_op(sq, OP_MUL) && sq->args[0] == sq->args[1]) d = sq->args[0];
    else if (is_op(sq, OP_POW) && sq->args[1]->kind == IR_CONST &&
             (CT_IS_FLOAT(sq->args[1]->type) ? sq->args[1]->c.f == 2.0 : sq->args[1]->c.i == 2))
        d = sq->args[0];
    if (!d) return 0;
    int pass = -1;
    ir *x = NULL;
    int m = centred(c, d, nfree, fr, nred, red, &pass, &x);
    if (m < 0) return ck_nomem(c);
    if (!m) return 0;
    int ft = d->type, st = rd->acc[0];

    plan_red pr = online_op("Welford (count, mean, centred sum of squares)", PLAN_ONLINE_WELFORD, rd->pos, 3);
    pr.acc[0] = CT_I64;
    pr.acc[1] = ft;
    pr.acc[2] = st;
    pr.map[0] = ir_const_i(c->b, CT_I64, 1);
    pr.map[1] = x;
    pr.map[2] = ir_const_f(c->b, st, 0.0);
    pr.identity[0].i = 0;
    pr.identity[1].f = 0.0;
    pr.identity[2].f = 0.0;
    welford_combine(c, ft, st, &pr);
    int temps[3];
    TRY(ck_add_reduction(c, pass, &pr, 3, temps));
    /* an infinite or NaN element: (x - mean)^2 is NaN in the expression */
    ir *mean = ck_load_temp(c, temps[1], nfree, fr, n->pos), *q = ck_load_temp(c, temps[2], nfree, fr, n->pos);
    ir *fin = ck_op1(c, OP_ISFINITE, CT_BOOL, mean);
    *out = ck_mk(ck_sel(c, fin, q, ir_const_f(c->b, st, NAN)), 0);
    if (!out->c[0]) return ck_nomem(c);
    *done = 1;
    return 0;
}

int ck_online_rewrite(ck *c, const ast_node *n, const plan_red *rd, ir *key, int nfree, const int *fr,
                      int nred, const int *red, val *out, int *done)
{
    *done = 0;
    if (key) return 0;   /* keyed passes read other reductions per key, not per free index */
    TRY(exp_sum(c, n, rd, nfree, fr, nred, red, out, done));
    if (*done) return 0;
    return centred_squares(c, n, rd, nfree, fr, nred, red, out, done);
}

/* ---- merging reduction passes over equal domains ------------------------------- */

/* Can pass q's reductions run in pass p (p < q, after everything q reads)?
 * Equal domains: the free indices may be different variables with the same
 * extent, as in two results `sum(A[i,j]) over j, sum(A[k,j]) over j`.
 * Called when every variable's constraints are final. */
static int mergeable(ck *c, int pi, int qi)
{
    const plan *p = c->p;
    const plan_pass *a = &p->passes[pi], *b = &p->passes[qi];
    if (!a->nreds || !b->nreds || a->key || b->key || a->scan || b->scan || a->nfree != b->nfree ||
        a->nred != b->nred)
        return 0;
    for (int k = 0; k < a->nfree; k++) {
        const plan_var *x = &p->vars[a->free[k]], *y = &p->vars[b->free[k]];
        if (x->lo || y->lo) return 0;
        if (!ck_equal_extents(p, a->free[k], b->free[k])) return 0;
    }
    for (int k = 0; k < a->nred; k++) {
        const plan_var *x = &p->vars[a->red[k]], *y = &p->vars[b->red[k]];
        if (x->lo || y->lo) {
            /* a range may read the free indices: compare it renamed */
            if (ck_subst(c, y->lo, b->nfree, b->free, a->free) != x->lo ||
                ck_subst(c, y->hi, b->nfree, b->free, a->free) != x->hi)
                return 0;
        } else if (!ck_equal_extents(p, a->red[k], b->red[k])) {
            return 0;
        }
    }
    return 1;
}

/* The last pass producing a temporary that pass q's reductions read: q's
 * reductions can move to a pass after it only. */
static int last_input(ck *c, int qi)
{
    const plan *p = c->p;
    const plan_pass *b = &p->passes[qi];
    int r = -1;
    for (int q = 0; q < b->nreds; q++)
        for (int k = 0; k < b->reds[q].ncomp; k++) {
            int a = ck_last_producer(c, b->reds[q].map[k]);
            if (a > r) r = a;
        }
    for (int k = 0; k < b->nred; k++) {
        int lo = ck_last_producer(c, p->vars[b->red[k]].lo), hi = ck_last_producer(c, p->vars[b->red[k]].hi);
        if (lo > r) r = lo;
        if (hi > r) r = hi;
    }
    return r;
}

/* Temporary t's dimensions renamed from[k] -> to[k]. */
static void rename_dims(plan_temp *t, int n, const int *from, const int *to)
{
    for (int d = 0; d < t->ndim; d++)
        for (int k = 0; k < n; k++)
            if (t->dims[d] == from[k]) {
                t->dims[d] = to[k];
                break;
            }
}

/* Move pass q's reductions into pass p, their maps and temporaries renamed
 * to p's indices, and drop q. */
static int merge(ck *c, int pi, int qi)
{
    plan *p = c->p;
    plan_pass *a = &p->passes[pi], *b = &p->passes[qi];
    int from[2 * RED_MAX_DIMS], to[2 * RED_MAX_DIMS], n = 0;
    for (int k = 0; k < a->nfree; k++, n++) from[n] = b->free[k], to[n] = a->free[k];
    for (int k = 0; k < a->nred; k++, n++) from[n] = b->red[k], to[n] = a->red[k];
    plan_red *nr = util_arena_alloc(c->a, (a->nreds + b->nreds) * sizeof *nr);
    if (!nr) return ck_nomem(c);
    memcpy(nr, a->reds, a->nreds * sizeof *nr);
    for (int q = 0; q < b->nreds; q++) {
        plan_red r = b->reds[q];
        for (int k = 0; k < r.ncomp; k++) {
            r.map[k] = ck_subst(c, r.map[k], n, from, to);
            if (!r.map[k]) return ck_nomem(c);
        }
        nr[a->nreds + q] = r;
        /* the temporaries are laid out as pass p's outputs; the extents are equal,
         * and p's indices are the ones resolved when the pass runs */
        for (int k = 0; k < r.ncomp; k++) rename_dims(&p->temps[r.temp[k]], a->nfree, b->free, a->free);
    }
    a->reds = nr;
    a->nreds += b->nreds;
    /* p's indices take on q's shape checks (equal extents when they pass) */
    for (int k = 0; k < n; k++) TRY(ck_take_constraints(c, to[k], from[k]));
    memmove(b, b + 1, (p->npasses - qi - 1) * sizeof *b);
    p->npasses--;
    for (int v = 0; v < p->nvars; v++)
        if (p->vars[v].key_pass > qi) p->vars[v].key_pass--;
    return 0;
}

/* ---- reductions nobody reads ---------------------------------------------------- */

/* The temporaries x reads, marked in temp[] (one walk: each node once). */
static void mark(ck *c, int on, uint8_t *temp, const ir *x)
{
    if (!x || ck_walk_seen(c, on, x)) return;
    if (x->kind == IR_LOAD && x->slot < 0) temp[-1 - x->slot] = 1;
    for (int i = 0; i < x->nargs; i++) mark(c, on, temp, x->args[i]);
}

/* Drop the reductions whose temporaries nothing reads (the sum and count of
 * a mean that a rewrite above replaced), and passes left without any. */
static int prune(ck *c)
{
    plan *p = c->p;
    uint8_t *read = util_arena_alloc(c->a, p->ntemps + 1);
    if (!read) return ck_nomem(c);
    memset(read, 0, p->ntemps + 1);
    int on = ck_walk_begin(c);
    for (int i = 0; i < p->nresults; i++) read[p->results[i].temp] = 1;
    for (int v = 0; v < p->nvars; v++) mark(c, on, read, p->vars[v].lo), mark(c, on, read, p->vars[v].hi);
    for (int i = 0; i < p->npasses; i++) {
        const plan_pass *ps = &p->passes[i];
        mark(c, on, read, ps->map);
        mark(c, on, read, ps->key);
        mark(c, on, read, ps->reset);
        for (int q = 0; q < ps->nreds; q++)
            for (int k = 0; k < ps->reds[q].ncomp; k++) mark(c, on, read, ps->reds[q].map[k]);
    }
    for (int i = 0; i < p->npasses; i++)
        for (int q = 0; q < p->passes[i].nreds; q++) {
            plan_red *rd = &p->passes[i].reds[q];
            rd->unread = 0;
            for (int k = 0; k < rd->ncomp; k++)
                if (!read[rd->temp[k]]) rd->unread |= 1u << k;
        }
    for (int i = p->npasses - 1; i >= 0; i--) {
        plan_pass *ps = &p->passes[i];
        if (!ps->nreds || ps->key) continue;   /* a keyed pass also gives the key count */
        int kept = 0;
        for (int q = 0; q < ps->nreds; q++) {
            int used = 0;
            for (int k = 0; k < ps->reds[q].ncomp; k++) used |= read[ps->reds[q].temp[k]];
            if (used) ps->reds[kept++] = ps->reds[q];
        }
        ps->nreds = kept;
        if (kept) continue;
        memmove(ps, ps + 1, (p->npasses - i - 1) * sizeof *ps);
        p->npasses--;
        for (int v = 0; v < p->nvars; v++)
            if (p->vars[v].key_pass > i) p->vars[v].key_pass--;
    }
    return 0;
}

/* ---- maps that can run as the epilogue of the reduction before them ------------- */

/* Does x read a temporary of pass `pi` (marked in mine[]) anywhere but at
 * that pass's free indices, in order?  (One walk: each node once.) */
static int off_row(ck *c, int on, const uint8_t *mine, const plan_pass *ps, const ir *x)
{
    if (!x || ck_walk_seen(c, on, x)) return 0;
    if (x->kind == IR_LOAD && x->slot < 0 && mine[-1 - x->slot]) {
        if (x->nargs != ps->nfree) return 1;
        for (int d = 0; d < ps->nfree; d++)
            if (x->args[d]->kind != IR_INDEX || x->args[d]->slot != ps->free[d]) return 1;
        return 0;
    }
    for (int i = 0; i < x->nargs; i++)
        if (off_row(c, on, mine, ps, x->args[i])) return 1;
    return 0;
}

/* Can index `from` of a map be renamed to `to` of the reduction pass a?  The
 * same variable, or one of equal extent that is none of a's own. */
static int renamable(const plan *p, const plan_pass *a, int from, int to)
{
    if (from == to) return 1;
    if (p->vars[from].lo || p->vars[to].lo || p->vars[to].key_pass >= 0) return 0;
    for (int k = 0; k < a->nfree; k++)
        if (a->free[k] == from) return 0;
    for (int k = 0; k < a->nred; k++)
        if (a->red[k] == from) return 0;
    return ck_equal_extents(p, from, to);
}

/* Map pass qi over the domain of reduction pass pi (its free indices, then
 * none or all of its reduced ones, as equal extents), reading pi's results at
 * pi's free indices only: renamed to pi's indices, moved right after pi and
 * marked its epilogue (plan_pass.epilogue), where it qualifies.  After a full
 * reduction only a map of one element qualifies (mean(x)'s division): a map
 * over the whole domain would wait for all of it in one block. */
static int attach(ck *c, int pi, int qi)
{
    plan *p = c->p;
    plan_pass *a = &p->passes[pi], *b = &p->passes[qi];
    if (!a->nreds || a->key || a->scan || !a->nred || (pi + 1 < p->npasses && p->passes[pi + 1].epilogue))
        return 0;
    if (!a->nfree && b->nfree) return 0;
    for (int k = 0; k < a->nred; k++)
        if (p->vars[a->red[k]].lo) return 0;   /* per-output ranges: not one box a row */
    int r = b->nfree - a->nfree;
    if (r != 0 && r != a->nred) return 0;
    int from[2 * RED_MAX_DIMS], to[2 * RED_MAX_DIMS], n = 0;
    for (int k = 0; k < a->nfree; k++, n++) from[n] = b->free[k], to[n] = a->free[k];
    for (int k = 0; k < r; k++, n++) from[n] = b->free[a->nfree + k], to[n] = a->red[k];
    for (int k = 0; k < n; k++) {
        if (!renamable(p, a, from[k], to[k])) return 0;
        for (int l = 0; l < k; l++)
            if (from[l] == from[k]) return 0;
    }
    ir *map = ck_subst(c, b->map, n, from, to);
    if (!map) return ck_nomem(c);
    uint8_t *mine = util_arena_alloc(c->a, p->ntemps + 1);
    if (!mine) return ck_nomem(c);
    memset(mine, 0, p->ntemps + 1);
    for (int q = 0; q < a->nreds; q++)
        for (int k = 0; k < a->reds[q].ncomp; k++) mine[a->reds[q].temp[k]] = 1;
    if (off_row(c, ck_walk_begin(c), mine, a, map)) return 0;

    /* renamed: the map, its result's dimensions, and a's indices take on the
     * map's shape checks */
    b->map = map;
    rename_dims(&p->temps[b->map_temp], n, from, to);
    for (int k = 0; k < n; k++) {
        TRY(ck_take_constraints(c, to[k], from[k]));
        b->free[k] = to[k];
    }
    plan_pass moved = *b;
    moved.epilogue = 1;
    memmove(&p->passes[pi + 2], &p->passes[pi + 1], (size_t)(qi - pi - 1) * sizeof *b);
    p->passes[pi + 1] = moved;
    for (int v = 0; v < p->nvars; v++)
        if (p->vars[v].key_pass > pi && p->vars[v].key_pass < qi) p->vars[v].key_pass++;
    return 0;
}

int ck_merge_passes(ck *c)
{
    plan *p = c->p;
    TRY(prune(c));
    for (int q = 1; q < p->npasses; q++) {
        if (!p->passes[q].nreds || p->passes[q].key) continue;
        for (int i = last_input(c, q) + 1; i < q; i++)
            if (mergeable(c, i, q)) {
                TRY(merge(c, i, q));
                q--;
                break;
            }
    }
    /* maps over the domain of the reduction they read last */
    for (int q = 1; q < p->npasses; q++) {
        plan_pass *b = &p->passes[q];
        if (b->nreds || !b->map || b->epilogue) continue;
        int pi = ck_last_producer(c, b->map);
        for (int k = 0; k < b->nfree; k++)
            if (p->vars[b->free[k]].lo) pi = -1;
        if (pi >= 0) TRY(attach(c, pi, q));
    }
    return 0;
}
