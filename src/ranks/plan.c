/*
 * plan.c -- the plan a rank runs on its blocks.  The whole text's plan is kept, with three
 * changes: a split index walks this rank's block (its extent comes from the split arrays'
 * blocks alone); where its value is used (arithmetic, subscripts of whole arrays), this
 * rank's offset is added, held in a scalar of its own so that every rank runs the same
 * plan; and argmin/argmax over a split index also keep their extreme value, which the
 * ranks' partials are combined by.  What would need other ranks' elements is refused here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranks/ranks.h"
#include "redjit.h"

typedef struct rw {
    const plan *p;
    ranks_plan *dp;
    const int *axis;
    plan_builder *b;
    ir **memo;                  /* per original node: rewritten where a value is used */
    unsigned char *offs;        /* per original node: its rewrite reads a rank's offset */
    unsigned char *seen;        /* per original node: checked (check_loads)             */
    util_diag *diag;
} rw;

static int split_of(const rw *w, const ir *s)
{
    return s && s->kind == IR_INDEX ? w->dp->split_of_var[s->slot] : -1;
}

/* The dimension of a load that a split axis or a split temporary's split dimension is. */
static int split_dim(const rw *w, const ir *x)
{
    if (x->slot >= 0) return w->axis[x->slot] < x->nargs ? w->axis[x->slot] : -1;
    return w->dp->temp_split[-1 - x->slot];
}

/* Every load reads a split dimension at a split index, nothing else. */
static int check_loads(rw *w, const ir *x)
{
    if (!x || w->seen[x->id]) return 0;
    w->seen[x->id] = 1;
    if (x->kind == IR_LOAD) {
        int d = split_dim(w, x);
        if (d >= 0 && split_of(w, x->args[d]) < 0) {
            if (x->slot >= 0)
                return util_diag_at(w->diag, w->p->src, x->pos, RED_ERR_UNSUPPORTED,
                                    "'%s' is split along axis %d: a subscript there must be an index, as in "
                                    "%s[i]; this one can need elements other ranks hold",
                                    w->p->bufs[x->slot].name, d, w->p->bufs[x->slot].name);
            return util_diag_at(w->diag, w->p->src, x->pos, RED_ERR_UNSUPPORTED,
                                "this reads an intermediate result that is split across the ranks at another "
                                "index than the one it is split along: not supported");
        }
    }
    for (int i = 0; i < x->nargs; i++)
        if (check_loads(w, x->args[i])) return w->diag->code;
    return 0;
}

static ir *rewrite(rw *w, ir *x);

static ir *rewrite_load(rw *w, ir *x)
{
    ir *subs[RED_MAX_DIMS + 1];
    int d = split_dim(w, x);
    for (int i = 0; i < x->nargs; i++) {
        subs[i] = i == d ? ir_index(w->b, x->args[i]->slot) : rewrite(w, x->args[i]);
        if (i != d) w->offs[x->id] |= w->offs[x->args[i]->id];
    }
    return ir_load(w->b, x->type, x->slot, x->nargs, subs, x->pos);
}

/* x in the new plan's builder, with a split index's value made global where it is used as
 * a value; the subscripts of split dimensions stay local. */
static ir *rewrite(rw *w, ir *x)
{
    if (!x) return NULL;
    if (w->memo[x->id]) return w->memo[x->id];
    ir *r = NULL, *args[4];
    switch (x->kind) {
    case IR_CONST: r = ir_const(w->b, x->type, x->c); break;
    case IR_SCALAR: r = ir_scalar(w->b, x->type, x->slot); break;
    case IR_PARAM: r = ir_param(w->b, x->type, x->slot); break;
    case IR_INDEX: {
        int s = w->dp->split_of_var[x->slot];
        r = ir_index(w->b, x->slot);
        if (s >= 0) {
            ir *sum[2] = {r, ir_scalar(w->b, CT_I64, w->dp->off_scalar + s)};
            r = ir_op(w->b, OP_ADD, CT_I64, 2, sum);
            w->offs[x->id] = 1;
        }
        break;
    }
    case IR_LOAD: r = rewrite_load(w, x); break;
    case IR_CAST:
        r = ir_cast(w->b, x->type, rewrite(w, x->args[0]));
        w->offs[x->id] = w->offs[x->args[0]->id];
        break;
    case IR_OP:
        for (int i = 0; i < x->nargs; i++) {
            args[i] = rewrite(w, x->args[i]);
            w->offs[x->id] |= w->offs[x->args[i]->id];
        }
        r = ir_op(w->b, x->op, x->type, x->nargs, args);
        break;
    }
    w->memo[x->id] = r;
    return r;
}

/* ---- finding the split indices ------------------------------------------------------------- */

/* Which dimension of each temporary of p from `from` on is split (its first with a split
 * index), or -1. */
static void mark_split_temps(ranks_plan *dp, const plan *p, int from)
{
    for (int t = from; t < p->ntemps; t++) {
        dp->temp_split[t] = -1;
        for (int d = 0; d < p->temps[t].ndim && dp->temp_split[t] < 0; d++)
            if (dp->split_of_var[p->temps[t].dims[d]] >= 0) dp->temp_split[t] = d;
    }
}

static int find_split(rw *w)
{
    const plan *p = w->p;
    ranks_plan *dp = w->dp;
    for (int v = 0; v < p->nvars; v++) {
        const plan_var *pv = &p->vars[v];
        for (int k = 0; k < pv->nconstraints; k++) {
            const plan_constraint *c = &pv->constraints[k];
            if (w->axis[c->buf] != c->dim) continue;
            if (c->offset)
                return util_diag_at(w->diag, p->src, c->pos, RED_ERR_UNSUPPORTED,
                                    "'%s' is split along axis %d: a subscript there must be an index, as in "
                                    "%s[i]; an index plus %lld needs elements other ranks hold",
                                    p->bufs[c->buf].name, c->dim, p->bufs[c->buf].name, (long long)c->offset);
            if (pv->key_pass >= 0)
                return util_diag_at(w->diag, p->src, pv->pos, RED_ERR_UNSUPPORTED,
                                    "index '%s' runs over the keys of another pass and along the split axis %d "
                                    "of '%s': not supported",
                                    pv->name, c->dim, p->bufs[c->buf].name);
            if (dp->split_of_var[v] >= 0) continue;
            if (dp->nsplit == RANKS_MAX_SPLIT)
                return util_diag_at(w->diag, p->src, pv->pos, RED_ERR_LIMIT,
                                    "more than %d indices run along split axes", RANKS_MAX_SPLIT);
            dp->split_of_var[v] = dp->nsplit;
            dp->var[dp->nsplit] = v;
            dp->buf[dp->nsplit++] = c->buf;
        }
    }
    mark_split_temps(dp, p, 0);
    return 0;
}

/* The split index pass pi reduces over (-1: none); refuses passes that walk two, or that
 * reduce over one by keys. */
static int pass_split(rw *w, int pi, int *out)
{
    const plan *p = w->p;
    const plan_pass *ps = &p->passes[pi];
    util_pos pos = ps->nreds ? ps->reds[0].pos : (util_pos){0, 0};
    int seen = -1;
    *out = -1;
    for (int k = 0; k < ps->nfree + ps->nred; k++) {
        int v = k < ps->nfree ? ps->free[k] : ps->red[k - ps->nfree], s = w->dp->split_of_var[v];
        if (s < 0) continue;
        if (seen >= 0 && seen != s)
            return util_diag_at(w->diag, p->src, pos, RED_ERR_UNSUPPORTED,
                                "this walks two split indices, '%s' and '%s': each rank holds one block of "
                                "each, and the pairs of blocks on different ranks would be missed; bind one "
                                "of the arrays whole",
                                p->vars[w->dp->var[seen]].name, p->vars[v].name);
        seen = s;
        /* a range of its own (over k in ptr[r]..ptr[r+1]) is cut to each rank's block where the
         * index is reduced over, not where it indexes the results */
        if (k < ps->nfree && p->vars[v].lo)
            return util_diag_at(w->diag, p->src, p->vars[v].pos, RED_ERR_UNSUPPORTED,
                                "index '%s' has a range of its own and indexes the results along a split axis: "
                                "not supported (bind the arrays whole, or split them along another axis)",
                                p->vars[v].name);
        /* a scan within CSR rows: its rows are cut where its result is not (k, whole) */
        if (plan_scan_ranged(p, ps))
            return util_diag_at(w->diag, p->src, pos, RED_ERR_UNSUPPORTED,
                                "this scans within rows over the split index '%s': not supported; bind the "
                                "arrays whole",
                                p->vars[v].name);
        if (k >= ps->nfree && ps->scan)
            return util_diag_at(w->diag, p->src, pos, RED_ERR_UNSUPPORTED,
                                "this scans along the split index '%s': a scan across ranks is not supported; "
                                "split the arrays along another axis, or bind them whole",
                                p->vars[v].name);
        if (k >= ps->nfree) *out = s;
    }
    return 0;
}

static int check_plan(rw *w)
{
    const plan *p = w->p;
    int rc = find_split(w);
    for (int pi = 0; !rc && pi < p->npasses; pi++) {
        const plan_pass *ps = &p->passes[pi];
        rc = pass_split(w, pi, &w->dp->pass_split[pi]);
        for (int q = 0; !rc && q < ps->nreds; q++)
            for (int c = 0; !rc && c < ps->reds[q].ncomp; c++) rc = check_loads(w, ps->reds[q].map[c]);
        if (!rc) rc = check_loads(w, ps->key);
        if (!rc) rc = check_loads(w, ps->reset);
        if (!rc) rc = check_loads(w, ps->map);
    }
    for (int v = 0; !rc && v < p->nvars; v++) {
        rc = check_loads(w, p->vars[v].lo);
        if (!rc) rc = check_loads(w, p->vars[v].hi);
    }
    return rc;
}

/* ---- the new plan ------------------------------------------------------------------------- */

static void *dup_arr(util_arena *a, const void *src, size_t n, size_t extra)
{
    void *d = util_arena_alloc(a, n + extra + 1);
    if (d && n) memcpy(d, src, n);
    return d;
}

/* Argmin/argmax q of pass pi reduces over a split index: a reduction of its extreme value
 * beside it (max or min of the same values; NaN-skipping ones leave NaN out). */
static int add_extreme(rw *w, plan *np, plan_pass *ps, int q)
{
    const plan_red *rd = &ps->reds[q];
    plan_red x;
    memset(&x, 0, sizeof x);
    x.rop = rd->rop == ROP_ARGMAX ? ROP_MAX : ROP_MIN;
    x.pos = rd->pos;
    x.ncomp = 1;
    x.acc[0] = rd->acc[0];
    x.map[0] = rd->map[0];
    if (rd->skipnan) {
        ir *m = rd->map[0], *nan = ir_op(w->b, OP_ISNAN, CT_BOOL, 1, &m);
        ir *inf = ir_const_f(w->b, m->type, rd->rop == ROP_ARGMAX ? -__builtin_inf() : __builtin_inf());
        ir *sel[3] = {nan, inf, m};
        x.map[0] = ir_op(w->b, OP_SELECT, m->type, 3, sel);
    }
    int t = np->ntemps++;
    np->temps[t] = w->p->temps[rd->temp[0]];
    np->temps[t].type = (uint8_t)rd->acc[0];
    x.temp[0] = t;
    x.identity[0] = plan_identity(x.rop, x.acc[0]);
    ps->reds[ps->nreds] = x;
    w->dp->argval[ps - np->passes][q] = t;
    ps->nreds++;
    return x.map[0] ? 0 : RED_ERR_NOMEM;
}

/* A count of each output's elements beside a keyed pass's reductions (ranks_plan.count). */
static int add_count(rw *w, plan *np, plan_pass *ps)
{
    plan_red x;
    memset(&x, 0, sizeof x);
    x.rop = ROP_SUM;
    x.pos = ps->reds[0].pos;
    x.ncomp = 1;
    x.acc[0] = CT_I64;
    x.map[0] = ir_const_i(w->b, CT_I64, 1);
    int t = np->ntemps++;
    np->temps[t] = w->p->temps[ps->reds[0].temp[0]];
    np->temps[t].type = CT_I64;
    x.temp[0] = t;
    ps->reds[ps->nreds++] = x;
    w->dp->count[ps - np->passes] = t;
    return x.map[0] ? 0 : RED_ERR_NOMEM;
}

static int build_passes(rw *w, plan *np)
{
    const plan *p = w->p;
    ranks_plan *dp = w->dp;
    util_arena *a = &dp->arena;
    np->passes = dup_arr(a, p->passes, (size_t)p->npasses * sizeof *p->passes, 0);
    dp->argval = util_arena_alloc(a, (size_t)(p->npasses + 1) * sizeof *dp->argval);
    dp->count = util_arena_alloc(a, (size_t)(p->npasses + 1) * sizeof *dp->count);
    dp->reds0 = util_arena_alloc(a, (size_t)(p->npasses + 1) * sizeof *dp->reds0);
    if (!np->passes || !dp->argval || !dp->count || !dp->reds0) return RED_ERR_NOMEM;
    for (int pi = 0; pi < p->npasses; pi++) {
        plan_pass *ps = &np->passes[pi];
        int n = ps->nreds;
        dp->count[pi] = -1;
        dp->reds0[pi] = n;
        ps->reds = dup_arr(a, p->passes[pi].reds, (size_t)n * sizeof *ps->reds, (size_t)(n + 1) * sizeof *ps->reds);
        dp->argval[pi] = util_arena_alloc(a, (size_t)(2 * n + 1) * sizeof(int));
        if (!ps->reds || !dp->argval[pi]) return RED_ERR_NOMEM;
        for (int q = 0; q < 2 * n + 1; q++) dp->argval[pi][q] = -1;
        for (int q = 0; q < n; q++) {
            plan_red *rd = &ps->reds[q];
            for (int c = 0; c < rd->ncomp; c++) {
                rd->map[c] = rewrite(w, rd->map[c]);
                if (rd->combine[c]) rd->combine[c] = rewrite(w, rd->combine[c]);
                if (!rd->map[c]) return RED_ERR_NOMEM;
            }
        }
        if (ps->key) ps->key = rewrite(w, ps->key);
        if (ps->reset) ps->reset = rewrite(w, ps->reset);
        if (ps->map) ps->map = rewrite(w, ps->map);
        /* whether the pass reads an offset: its kernels then need every rank's extents */
        const plan_pass *old = &p->passes[pi];
        int offs = (old->key && w->offs[old->key->id]) || (old->reset && w->offs[old->reset->id]) ||
                   (old->map && w->offs[old->map->id]);
        for (int q = 0; q < n; q++)
            for (int c = 0; c < old->reds[q].ncomp; c++) offs |= w->offs[old->reds[q].map[c]->id];
        w->dp->pass_offsets[pi] = offs;
        if ((p->passes[pi].key && !ps->key) || (p->passes[pi].reset && !ps->reset) || (p->passes[pi].map && !ps->map))
            return RED_ERR_NOMEM;
        if (dp->pass_split[pi] < 0) continue;
        for (int q = 0; q < n; q++) ps->reds[q].partial = 1;
        for (int q = 0; q < n; q++)
            if ((ps->reds[q].rop == ROP_ARGMIN || ps->reds[q].rop == ROP_ARGMAX) && add_extreme(w, np, ps, q))
                return RED_ERR_NOMEM;
        /* by keys, a key a rank does not hold has the identity there, which a user operator
         * may not take as neutral: each rank also counts each key's elements */
        int user = 0, ranged = p->vars[dp->var[dp->pass_split[pi]]].lo != NULL;
        for (int q = 0; q < n; q++) user |= ps->reds[q].rop == ROP_USER && !ps->reds[q].neutral;
        /* (so does an output whose range misses a rank's block) */
        if ((ps->key || ranged) && user && add_count(w, np, ps)) return RED_ERR_NOMEM;
        /* the map after it reads the ranks' combined results: never its epilogue */
        if (pi + 1 < p->npasses) np->passes[pi + 1].epilogue = 0;
    }
    /* a map that runs as the pass before's epilogue runs in that pass's kernels: what it reads,
     * they read */
    for (int pi = p->npasses - 2; pi >= 0; pi--)
        if (np->passes[pi + 1].epilogue) w->dp->pass_offsets[pi] |= w->dp->pass_offsets[pi + 1];
    return 0;
}

/* A global position x as a position in this rank's block of split index s, held to the
 * block where another rank's block is beyond: max(min(x - offset, cut_hi), cut_lo), the cuts
 * the block's ends, or none at the whole's (so that a range past the whole arrays still
 * reads outside them, which is the error one process reports). */
static ir *to_block(rw *w, ir *x, int s)
{
    if (x->type != CT_I64) x = ir_cast(w->b, CT_I64, x);
    ir *a[2] = {x, ir_scalar(w->b, CT_I64, w->dp->off_scalar + s)};
    ir *d = ir_op(w->b, OP_SUB, CT_I64, 2, a);
    ir *m[2] = {d, ir_scalar(w->b, CT_I64, w->dp->cut_scalar + 2 * s + 1)};
    ir *lo = ir_op(w->b, OP_MIN, CT_I64, 2, m);
    ir *z[2] = {lo, ir_scalar(w->b, CT_I64, w->dp->cut_scalar + 2 * s)};
    return ir_op(w->b, OP_MAX, CT_I64, 2, z);
}

static int build_vars(rw *w, plan *np)
{
    const plan *p = w->p;
    util_arena *a = &w->dp->arena;
    np->vars = dup_arr(a, p->vars, (size_t)p->nvars * sizeof *p->vars, 0);
    if (!np->vars) return RED_ERR_NOMEM;
    for (int v = 0; v < p->nvars; v++) {
        plan_var *pv = &np->vars[v];
        if (pv->lo && !(pv->lo = rewrite(w, pv->lo))) return RED_ERR_NOMEM;
        if (pv->hi && !(pv->hi = rewrite(w, pv->hi))) return RED_ERR_NOMEM;
        int s = w->dp->split_of_var[v];
        if (s >= 0 && pv->lo) {
            /* a reduced split index with a range of its own: the range (global) cut to this
             * rank's block, in the block's own positions; its kernels read the offset */
            pv->lo = to_block(w, pv->lo, s);
            pv->hi = pv->hi ? to_block(w, pv->hi, s) : NULL;
            if (!pv->lo || (p->vars[v].hi && !pv->hi)) return RED_ERR_NOMEM;
            for (int pi = 0; pi < p->npasses; pi++) w->dp->pass_offsets[pi] = 1;
        }
        /* a range that reads an offset (j in 0..i+1, i split) may bound any pass's index */
        if ((p->vars[v].lo && w->offs[p->vars[v].lo->id]) || (p->vars[v].hi && w->offs[p->vars[v].hi->id]))
            for (int pi = 0; pi < p->npasses; pi++) w->dp->pass_offsets[pi] = 1;
        if (w->dp->split_of_var[v] < 0) continue;
        /* a split index runs over the split arrays' blocks: whole arrays it subscripts are
         * read at its global value, checked at run time */
        plan_constraint *kept = util_arena_alloc(a, (size_t)(pv->nconstraints + 1) * sizeof *kept);
        if (!kept) return RED_ERR_NOMEM;
        int n = 0;
        for (int k = 0; k < pv->nconstraints; k++)
            if (w->axis[pv->constraints[k].buf] == pv->constraints[k].dim) kept[n++] = pv->constraints[k];
        pv->constraints = kept;
        pv->nconstraints = n;
    }
    return 0;
}

int ranks_plan_build(const plan *p, const int *axis, ranks_plan **out, util_diag *diag)
{
    *out = NULL;
    ranks_plan *dp = calloc(1, sizeof *dp);
    if (!dp) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    util_arena_init(&dp->arena);
    util_arena *a = &dp->arena;
    rw w = {.p = p, .dp = dp, .axis = axis, .b = plan_builder_new(a), .diag = diag};
    dp->split_of_var = util_arena_alloc(a, (size_t)(p->nvars + 1) * sizeof(int));
    dp->pass_split = util_arena_alloc(a, (size_t)(p->npasses + 1) * sizeof(int));
    dp->temp_split = util_arena_alloc(a, (size_t)(2 * p->ntemps + p->npasses + 1) * sizeof(int));
    w.memo = util_arena_alloc(a, (size_t)(p->nir + 1) * sizeof *w.memo);
    w.seen = util_arena_alloc(a, (size_t)p->nir + 1);
    w.offs = util_arena_alloc(a, (size_t)p->nir + 1);
    dp->pass_offsets = util_arena_alloc(a, (size_t)(p->npasses + 1) * sizeof(int));
    plan *np = util_arena_alloc(a, sizeof *np);
    int rc = w.b && dp->split_of_var && dp->pass_split && dp->temp_split && w.memo && w.seen && w.offs &&
                     dp->pass_offsets && np
                 ? 0
                 : RED_ERR_NOMEM;
    if (!rc) {
        memset(w.memo, 0, (size_t)(p->nir + 1) * sizeof *w.memo);
        memset(w.seen, 0, (size_t)p->nir + 1);
        memset(w.offs, 0, (size_t)p->nir + 1);
        for (int v = 0; v < p->nvars; v++) dp->split_of_var[v] = -1;
        rc = check_plan(&w);
    }
    if (!rc) {
        *np = *p;
        np->arena = a;
        np->uid = plan_next_uid();
        dp->base_uid = p->uid;
        dp->off_scalar = p->nscalars;
        dp->cut_scalar = p->nscalars + dp->nsplit;
        np->scalars = dup_arr(a, p->scalars, (size_t)p->nscalars * sizeof *p->scalars,
                              (size_t)(3 * dp->nsplit) * sizeof *p->scalars);
        np->temps = dup_arr(a, p->temps, (size_t)p->ntemps * sizeof *p->temps,
                            (size_t)(p->ntemps + p->npasses) * sizeof *p->temps);
        if (!np->scalars || !np->temps) rc = RED_ERR_NOMEM;
        for (int s = 0; !rc && s < dp->nsplit; s++)
            np->scalars[np->nscalars++] = (plan_scalar){"(this rank's offset)", CT_I64, 0};
        for (int s = 0; !rc && s < 2 * dp->nsplit; s++)
            np->scalars[np->nscalars++] = (plan_scalar){"(this rank's block's cut)", CT_I64, 0};
    }
    if (!rc) rc = build_passes(&w, np);
    if (!rc) rc = build_vars(&w, np);
    if (!rc) {
        mark_split_temps(dp, np, p->ntemps);
        np->nir = plan_builder_count(w.b);
        dp->p = np;
    }
    if (rc) {
        if (rc == RED_ERR_NOMEM && !diag->code) util_diag_set(diag, rc, "out of memory");
        ranks_plan_free(dp);
        return rc;
    }
    *out = dp;
    return 0;
}

void ranks_plan_free(ranks_plan *dp)
{
    if (!dp) return;
    free(dp->axes);
    util_arena_free(&dp->arena);
    free(dp);
}
