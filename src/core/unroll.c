/*
 * unroll.c -- small inner reductions written out (unroll.h).  A pass P0 qualifies when it is
 * one float sum or product over a box of reduced indices of its own (no ranges, no keys),
 * into a temporary that is no result, that only the next pass P1 reads, and that P1 reads
 * at P0's free indices exactly (each element once: t[i,j] where P0's outputs are i, j).  P1
 * then reads, in place of t[i,j], the fold of P0's element at each point of the box, in the
 * box's row-major order starting from the identity: the order a thread folds them in, so a
 * sequential fold's bits are kept.
 */
#include <stdlib.h>
#include <string.h>

#include "core/unroll.h"


/* A search for the reads of temporary t: where `at` is given, every read must be at exactly those
 * index variables (n of them) and of type `type`, else `bad`.  Each node once (`seen`, by id:
 * the IR is a graph that a short text can make reach a node by 2^26 paths). */
typedef struct tscan {
    unsigned char *seen;
    int nir, t, n, type, bad;
    const int *at;
} tscan;

static int reads_temp(tscan *s, const ir *x)
{
    if (!x || s->seen[x->id]) return 0;
    s->seen[x->id] = 1;
    int r = 0;
    if (x->kind == IR_LOAD && x->slot == PLAN_TEMP_SLOT(s->t)) {
        r = 1;
        if (!s->at || x->nargs != s->n || x->type != s->type) s->bad = 1;
        for (int d = 0; s->at && d < x->nargs && d < s->n; d++)
            if (x->args[d]->kind != IR_INDEX || x->args[d]->slot != s->at[d]) s->bad = 1;
    }
    for (int i = 0; i < x->nargs; i++) r |= reads_temp(s, x->args[i]);
    return r;
}

/* Whether any IR of pass ps (its key, reset, map, elements and combines) reads t. */
static int pass_reads(tscan *s, const plan_pass *ps)
{
    memset(s->seen, 0, (size_t)s->nir + 1);
    int r = reads_temp(s, ps->key) | reads_temp(s, ps->reset) | reads_temp(s, ps->map);
    for (int q = 0; q < ps->nreds; q++)
        for (int c = 0; c < ps->reds[q].ncomp; c++)
            r |= reads_temp(s, ps->reds[q].map[c]) | reads_temp(s, ps->reds[q].combine[c]);
    return r;
}

/* Whether pass pi may be dropped into pass pi + 1, by the plan alone (seen: nir + 1 bytes). */
static int droppable(const plan *p, int pi, unsigned char *seen)
{
    const plan_pass *ps = &p->passes[pi], *next = pi + 1 < p->npasses ? &p->passes[pi + 1] : NULL;
    if (!next || ps->nreds != 1 || ps->key || ps->scan || ps->nfree < 1 || ps->nred < 1) return 0;
    const plan_red *rd = &ps->reds[0];
    int t = rd->temp[0];
    if ((rd->rop != ROP_SUM && rd->rop != ROP_PROD) || rd->ncomp != 1 || rd->partial || rd->online ||
        !CT_IS_FLOAT(rd->acc[0]) || p->temps[t].type != rd->acc[0] || p->temps[t].ndim != ps->nfree)
        return 0;
    for (int d = 0; d < ps->nfree; d++)
        if (p->temps[t].dims[d] != ps->free[d] || p->vars[ps->free[d]].key_pass >= 0) return 0;
    for (int d = 0; d < ps->nred; d++) {
        const plan_var *v = &p->vars[ps->red[d]];
        if (v->lo || v->hi || v->key_pass >= 0) return 0;
    }
    /* the reader walks its whole box (no key, no ranges), so that it reads every element
     * that the dropped pass would have checked, wherever its box is not empty (found) */
    if (next->key || next->scan) return 0;
    for (int d = 0; d < next->nfree + next->nred; d++) {
        const plan_var *v = &p->vars[d < next->nfree ? next->free[d] : next->red[d - next->nfree]];
        if (v->lo || v->hi || v->key_pass >= 0) return 0;
    }
    for (int r = 0; r < p->nresults; r++)
        if (p->results[r].temp == t) return 0;
    /* read by the next pass only, at the outputs' own indices; by no range */
    tscan s = {seen, p->nir, t, 0, p->temps[t].type, 0, NULL};
    for (int q = 0; q < p->npasses; q++)
        if (q != pi + 1 && pass_reads(&s, &p->passes[q])) return 0;
    memset(seen, 0, (size_t)p->nir + 1);
    for (int v = 0; v < p->nvars; v++)
        if (reads_temp(&s, p->vars[v].lo) || reads_temp(&s, p->vars[v].hi)) return 0;
    s.at = ps->free;
    s.n = ps->nfree;
    if (!pass_reads(&s, next) || s.bad) return 0;
    for (int v = 0; v < p->nvars; v++)
        if (p->vars[v].key_pass == pi) return 0;
    return 1;
}

/* Pass pi's domain for these bindings, with a scratch diag (a failure: the run reports it). */
static int resolve(const plan *p, int pi, const core_buf *bufs, const core_bounds *bounds, core_domain *dom)
{
    int64_t lo[64], hi[64];
    int done[64];
    memset(lo, 0, sizeof lo);
    memset(hi, 0, sizeof hi);
    memset(done, 0, sizeof done);
    core_vars v = {lo, hi, done};
    util_diag scratch = {0};
    return core_resolve_pass(p, pi, bufs, bounds, CORE_EVAL_UNIFORM_RANGES, &v, dom, &scratch);
}

uint32_t core_unroll_candidates(const plan *p)
{
    if (p->nvars > 64 || p->npasses < 2) return 0;
    unsigned char seen_stack[1024], *seen = p->nir < 1024 ? seen_stack : malloc((size_t)p->nir + 1);
    uint32_t mask = 0;
    for (int pi = 0; seen && pi + 1 < p->npasses && pi < 32; pi++)
        if (droppable(p, pi, seen)) mask |= 1u << pi;
    if (seen != seen_stack) free(seen);
    return mask;
}

int core_unroll_find(const plan *p, uint32_t candidates, const core_buf *bufs, const core_bounds *bounds,
                     core_unroll_key *key)
{
    if (!candidates) return 0;
    memset(key, 0, sizeof *key);
    key->base_uid = p->uid;
    for (int pi = 0; pi < 32 && pi + 1 < p->npasses && key->n < CORE_UNROLL_PASSES; pi++) {
        /* (a pass that reads a dropped one's temporary is not dropped itself) */
        if (!(candidates >> pi & 1) || (key->n && key->pass[key->n - 1] == pi - 1)) continue;
        core_domain dom, next;
        if (resolve(p, pi, bufs, bounds, &dom) || dom.ranged || dom.L > CORE_UNROLL_MAX ||
            dom.nr != p->passes[pi].nred)
            continue;
        /* every element the pass would check is read where it has any (an empty index of the
         * reader's own would leave a bad subscript unread) */
        if (dom.nout > 0 && (resolve(p, pi + 1, bufs, bounds, &next) || next.nout == 0 || next.L == 0)) continue;
        int ok = 1;
        for (int d = 0; d < dom.nr; d++) {
            ok &= dom.rvar[d] == p->passes[pi].red[d];
            key->lo[key->n][d] = dom.rlo[d];
            key->hi[key->n][d] = dom.rlo[d] + dom.rsz[d];
        }
        if (ok) key->pass[key->n++] = pi;
    }
    return key->n > 0;
}

/* ---- the plan without them ------------------------------------------------------------------ */

typedef struct unroller {
    const plan *p;
    const core_unroll_key *key;
    plan_builder *b;
    ir **memo;                  /* per original node, outside the written-out terms */
    ir **tmemo;                 /* inside one term (cleared for each)                */
    int *drop_of_temp;          /* per temporary: the key's slot of the pass writing it, or -1 */
    int nsub, sub_var[RED_MAX_DIMS];
    int64_t sub_val[RED_MAX_DIMS];   /* a term's point: its reduced indices' values */
} unroller;

static ir *rw(unroller *u, const ir *x);

/* What pass key->pass[k] would have written at the load's position: the fold of its element
 * at each point of the box, in row-major order, from the identity. */
static ir *written_out(unroller *u, int k)
{
    const plan_pass *ps = &u->p->passes[u->key->pass[k]];
    const plan_red *rd = &ps->reds[0];
    int ct = rd->acc[0], op = rd->rop == ROP_SUM ? OP_ADD : OP_MUL, nr = ps->nred;
    ir *acc = ir_const(u->b, ct, plan_identity(rd->rop, ct));
    int64_t at[RED_MAX_DIMS];
    for (int d = 0; d < nr; d++) {
        at[d] = u->key->lo[k][d];
        if (at[d] >= u->key->hi[k][d]) return acc;   /* an empty box */
    }
    for (;;) {
        u->nsub = nr;
        for (int d = 0; d < nr; d++) {
            u->sub_var[d] = ps->red[d];
            u->sub_val[d] = at[d];
        }
        memset(u->tmemo, 0, (size_t)(u->p->nir + 1) * sizeof *u->tmemo);
        ir *args[2] = {acc, rw(u, rd->map[0])};
        u->nsub = 0;
        acc = ir_op(u->b, op, ct, 2, args);
        int d = nr - 1;
        while (d >= 0 && ++at[d] == u->key->hi[k][d]) {
            at[d] = u->key->lo[k][d];
            d--;
        }
        if (d < 0) return acc;
    }
}

static ir *rw(unroller *u, const ir *x)
{
    if (!x) return NULL;
    ir **memo = u->nsub ? u->tmemo : u->memo;
    if (memo[x->id]) return memo[x->id];
    ir *r = NULL, *args[RED_MAX_DIMS + 4];
    switch (x->kind) {
    case IR_CONST: r = ir_const(u->b, x->type, x->c); break;
    case IR_SCALAR: r = ir_scalar(u->b, x->type, x->slot); break;
    case IR_PARAM: r = ir_param(u->b, x->type, x->slot); break;
    case IR_INDEX:
        r = ir_index(u->b, x->slot);
        for (int d = 0; d < u->nsub; d++)
            if (u->sub_var[d] == x->slot) r = ir_const_i(u->b, x->type, u->sub_val[d]);
        break;
    case IR_LOAD:
        if (x->slot < 0 && !u->nsub && u->drop_of_temp[-1 - x->slot] >= 0) {
            r = written_out(u, u->drop_of_temp[-1 - x->slot]);
            break;
        }
        for (int i = 0; i < x->nargs; i++) args[i] = rw(u, x->args[i]);
        r = ir_load(u->b, x->type, x->slot, x->nargs, args, x->pos);
        break;
    case IR_CAST: r = ir_cast(u->b, x->type, rw(u, x->args[0])); break;
    case IR_OP:
        for (int i = 0; i < x->nargs; i++) args[i] = rw(u, x->args[i]);
        r = ir_op(u->b, x->op, x->type, x->nargs, args);
        break;
    }
    memo[x->id] = r;
    return r;
}

/* x rewritten, failing (*nomem) where x was something and the rewrite is nothing. */
static ir *rw_keep(unroller *u, ir *x, int *nomem)
{
    ir *r = rw(u, x);
    if (x && !r) *nomem = 1;
    return r;
}

static void *dup(util_arena *a, const void *src, size_t bytes)
{
    void *d = util_arena_alloc(a, bytes ? bytes : 1);
    if (d && bytes) memcpy(d, src, bytes);
    return d;
}

int core_unroll_make(const plan *p, const core_unroll_key *key, util_arena *a, plan **out)
{
    *out = NULL;
    unroller u = {.p = p, .key = key, .b = plan_builder_new(a)};
    size_t nm = (size_t)(p->nir + 1) * sizeof(ir *);
    u.memo = util_arena_alloc(a, nm);
    u.tmemo = util_arena_alloc(a, nm);
    u.drop_of_temp = util_arena_alloc(a, (size_t)(p->ntemps + 1) * sizeof(int));
    int *newpi = util_arena_alloc(a, (size_t)(p->npasses + 1) * sizeof(int));
    plan *np = util_arena_alloc(a, sizeof *np);
    if (!u.b || !u.memo || !u.tmemo || !u.drop_of_temp || !newpi || !np) return RED_ERR_NOMEM;
    memset(u.memo, 0, nm);
    for (int t = 0; t < p->ntemps; t++) u.drop_of_temp[t] = -1;
    for (int pi = 0; pi < p->npasses; pi++) newpi[pi] = pi;
    for (int k = 0; k < key->n; k++) {
        u.drop_of_temp[p->passes[key->pass[k]].reds[0].temp[0]] = k;
        newpi[key->pass[k]] = -1;
    }
    *np = *p;
    np->arena = a;
    np->uid = plan_next_uid();
    np->passes = util_arena_alloc(a, (size_t)p->npasses * sizeof *np->passes);
    np->vars = dup(a, p->vars, (size_t)p->nvars * sizeof *p->vars);
    np->temps = dup(a, p->temps, (size_t)p->ntemps * sizeof *p->temps);
    if (!np->passes || !np->vars || !np->temps) return RED_ERR_NOMEM;
    int n = 0, nomem = 0;
    for (int pi = 0; pi < p->npasses; pi++) {
        if (newpi[pi] < 0) continue;
        newpi[pi] = n;
        plan_pass *ps = &np->passes[n++];
        *ps = p->passes[pi];
        /* a map that was the dropped pass's epilogue runs on its own */
        if (pi > 0 && newpi[pi - 1] < 0) ps->epilogue = 0;
        ps->reds = dup(a, p->passes[pi].reds, (size_t)ps->nreds * sizeof *ps->reds);
        if (!ps->reds) return RED_ERR_NOMEM;
        ps->key = rw_keep(&u, ps->key, &nomem);
        ps->reset = rw_keep(&u, ps->reset, &nomem);
        ps->map = rw_keep(&u, ps->map, &nomem);
        for (int q = 0; q < ps->nreds; q++)
            for (int c = 0; c < ps->reds[q].ncomp; c++) {
                ps->reds[q].map[c] = rw_keep(&u, ps->reds[q].map[c], &nomem);
                ps->reds[q].combine[c] = rw_keep(&u, ps->reds[q].combine[c], &nomem);
            }
    }
    np->npasses = n;
    for (int v = 0; v < p->nvars; v++) {
        np->vars[v].lo = rw_keep(&u, np->vars[v].lo, &nomem);
        np->vars[v].hi = rw_keep(&u, np->vars[v].hi, &nomem);
        if (np->vars[v].key_pass >= 0) np->vars[v].key_pass = newpi[np->vars[v].key_pass];
    }
    for (int k = 0; k < key->n; k++) np->temps[p->passes[key->pass[k]].reds[0].temp[0]].ndim = 0;   /* never written */
    if (nomem) return RED_ERR_NOMEM;
    np->nir = plan_builder_count(u.b);
    *out = np;
    return 0;
}
