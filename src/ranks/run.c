/*
 * run.c -- between the passes of a run over split arrays: every rank's status agreed
 * before any data moves, then the partials of each reduction over a split index combined
 * into the whole result on every rank, in rank order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/exec.h"
#include "ranks/ranks.h"
#include "redjit.h"

static int comm_failed(ranks_comm *c, int rc, util_diag *diag)
{
    return util_diag_set(diag, rc == RED_ERR_NOMEM ? rc : RED_ERR_COMM, "%s: %s", c->ops->name,
                         c->err[0] ? c->err : "a collective failed");
}

int ranks_agree(ranks_comm *c, int rc, util_diag *diag)
{
    int32_t mine = rc, *all = calloc((size_t)c->size, sizeof *all);
    if (!all) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    int e = c->ops->allgather(c, &mine, all, sizeof mine);
    if (e) {
        free(all);
        return comm_failed(c, e, diag);
    }
    int first = -1;
    for (int r = 0; r < c->size && first < 0; r++)
        if (all[r]) first = r;
    if (first < 0) {
        free(all);
        return 0;
    }
    /* the first failing rank's message, to every rank */
    char *msgs = malloc((size_t)c->size * UTIL_DIAG_MAX);
    if (!msgs) {
        free(all);
        return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    }
    char own[UTIL_DIAG_MAX];
    snprintf(own, sizeof own, "%s", rc ? diag->msg : "");
    e = c->ops->allgather(c, own, msgs, UTIL_DIAG_MAX);
    int code = all[first];
    if (e) {
        code = comm_failed(c, e, diag);
    } else if (first != c->rank && !(rc == code && diag->msg[0])) {
        const char *m = msgs + (size_t)first * UTIL_DIAG_MAX;
        util_diag_set(diag, code, "rank %d: %.*s", first, UTIL_DIAG_MAX - 16, m[0] ? m : "(no message)");
    }
    free(msgs);
    free(all);
    return code;
}

/* The elements of temporary t. */
static int64_t temp_count(const core_buf *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

/* Reduction q of pass pi (over split index s) combined across the ranks. */
/* How a rank's argmin/argmax positions become positions in the whole box: the reduced
 * indices' extents here, the split one's position among them. */
typedef struct box {
    int nred, at;
    int64_t ext[RED_MAX_DIMS];
} box;

/* Rank r's positions in its block's box (its extent of the split index) to the whole box. */
static void globalize(const ranks_run *dr, const box *b, int s, int r, int64_t *idx, int64_t count)
{
    int n = dr->comm->size;
    int64_t mine = dr->ext[(size_t)s * n + r], off = dr->off[(size_t)s * n + r], total = 0;
    for (int k = 0; k < n; k++) total += dr->ext[(size_t)s * n + k];
    for (int64_t o = 0; o < count; o++) {
        int64_t pos = idx[o], digit[RED_MAX_DIMS];
        if (pos < 0) continue;
        for (int d = b->nred - 1; d >= 0; d--) {
            int64_t e = d == b->at ? mine : b->ext[d];
            digit[d] = e ? pos % e : 0;
            pos = e ? pos / e : 0;
        }
        digit[b->at] += off;
        pos = 0;
        for (int d = 0; d < b->nred; d++) pos = pos * (d == b->at ? total : b->ext[d]) + digit[d];
        idx[o] = pos;
    }
}

/* Reduction q of pass pi (over a split index) combined across the ranks: in place in its
 * temporaries, on every rank. */
static int combine_red(const ranks_run *dr, const plan *p, int pi, int q, const box *bx, const int *has,
                       const int64_t *const *counts, core_results *temps, util_diag *diag)
{
    ranks_comm *c = dr->comm;
    const plan_red *rd = &p->passes[pi].reds[q];
    int arg = rd->rop == ROP_ARGMIN || rd->rop == ROP_ARGMAX, n = c->size, rc = 0;
    int64_t count = temp_count(&temps->t[rd->temp[0]]);
    int exact = !arg && rd->rop != ROP_USER;
    for (int k = 0; k < rd->ncomp; k++) exact &= ranks_reducible(rd->rop, rd->acc[k]);
    if (exact) {
        for (int k = 0; k < rd->ncomp && !rc; k++)
            rc = c->ops->allreduce(c, (void *)temps->t[rd->temp[k]].data, count, rd->acc[k], rd->rop);
        return rc ? comm_failed(c, rc, diag) : 0;
    }
    /* the others gathered and combined in rank order: floats, user operators, argmin/argmax
     * (its extreme value, then its index) */
    int ncomp = arg ? 2 : rd->ncomp, src[PLAN_MAX_COMP];
    for (int k = 0; k < ncomp; k++) src[k] = arg ? (k ? rd->temp[0] : dr->dp->argval[pi][q]) : rd->temp[k];
    unsigned char *got[PLAN_MAX_COMP] = {0};
    void **part = calloc((size_t)n * ncomp, sizeof *part);       /* source r's component k */
    void *const **rows = calloc((size_t)n, sizeof *rows);
    const int64_t **idx = calloc((size_t)n, sizeof *idx);
    if (!part || !rows || !idx) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    for (int k = 0; !rc && k < ncomp; k++) {
        const core_buf *t = &temps->t[src[k]];
        size_t bytes = (size_t)count * red_dtype_size(t->dtype);
        if (!(got[k] = malloc(bytes * (size_t)n + 1))) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
        else if ((rc = c->ops->allgather(c, t->data, got[k], bytes))) rc = comm_failed(c, rc, diag);
        for (int r = 0; !rc && r < n; r++) part[(size_t)r * ncomp + k] = got[k] + bytes * (size_t)r;
    }
    for (int r = 0; !rc && r < n; r++) {
        rows[r] = part + (size_t)r * ncomp;
        if (!arg) continue;
        idx[r] = rows[r][1];
        globalize(dr, bx, dr->dp->pass_split[pi], r, (int64_t *)idx[r], count);
    }
    if (!rc) {
        void *out[PLAN_MAX_COMP];
        for (int k = 0; k < ncomp; k++) out[k] = (void *)temps->t[src[k]].data;
        rc = cpu_merge_partials(p, rd, n, count, rows, arg ? idx : NULL, has, counts, out, arg ? out[1] : NULL, diag);
    }
    for (int k = 0; k < ncomp; k++) free(got[k]);
    free(part);
    free(rows);
    free(idx);
    return rc;
}

static int hook_walked(void *arg, const plan *p, int pi, int rc, const core_vars *v, core_results *temps,
                       util_diag *diag)
{
    const ranks_run *dr = arg;
    ranks_comm *c = dr->comm;
    rc = ranks_agree(c, rc, diag);
    int s = dr->dp->pass_split[pi];
    if (rc || s < 0) return rc;
    const plan_pass *ps = &p->passes[pi];
    int n = c->size;
    int *has = calloc((size_t)n, sizeof *has);
    if (!has) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    for (int r = 0; !rc && r < n; r++) has[r] = dr->ext[(size_t)s * n + r] > 0;
    /* an argmin/argmax index is a position in the reduced box (globalize) */
    box bx = {ps->nred, 0, {0}};
    for (int d = 0; d < ps->nred; d++) {
        bx.ext[d] = v->hi[ps->red[d]] - v->lo[ps->red[d]];
        if (ps->red[d] == dr->dp->var[s]) bx.at = d;
    }
    /* each rank's element count of each key, where a user operator needs it */
    int ct = dr->dp->count[pi];
    int64_t *cgot = NULL;
    const int64_t **counts = NULL;
    if (!rc && ct >= 0) {
        int64_t m = temp_count(&temps->t[ct]);
        cgot = malloc((size_t)(m * n + 1) * sizeof *cgot);
        counts = calloc((size_t)n, sizeof *counts);
        if (!cgot || !counts) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
        else if ((rc = c->ops->allgather(c, temps->t[ct].data, cgot, (size_t)m * sizeof *cgot)))
            rc = comm_failed(c, rc, diag);
        for (int r = 0; !rc && r < n; r++) counts[r] = cgot + (size_t)m * r;
    }
    /* the text's own reductions; those after them (extreme values, counts) serve these */
    for (int q = 0; !rc && q < dr->dp->reds0[pi]; q++) rc = combine_red(dr, p, pi, q, &bx, has, counts, temps, diag);
    free(cgot);
    free(counts);
    free(has);
    return rc;
}

static int hook_ended(void *arg, const plan *p, int pi, int rc, util_diag *diag)
{
    const ranks_run *dr = arg;
    return ranks_agree(dr->comm, rc, diag);
}

/* Every rank sizes a keyed pass's partials for the largest key any rank holds; an ordered
 * operator's keys must be sorted across the ranks' blocks too. */
static int hook_keys(void *arg, const plan *p, int pi, int rc, int64_t *nkeys, const int64_t *ends,
                     util_diag *diag)
{
    const ranks_run *dr = arg;
    ranks_comm *c = dr->comm;
    rc = ranks_agree(c, rc, diag);
    if (rc || dr->dp->pass_split[pi] < 0) return rc;
    int e = c->ops->allreduce(c, nkeys, 1, CT_I64, ROP_MAX);
    int64_t mine[3] = {ends != NULL, ends ? ends[0] : 0, ends ? ends[1] : 0};
    int64_t *all = malloc((size_t)c->size * sizeof mine);
    if (!all) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");   /* (as every rank would) */
    if (!e) e = c->ops->allgather(c, mine, all, sizeof mine);
    int sorted = 1, last = -1;
    for (int r = 0; !e && r < c->size; r++) {
        if (!all[3 * r]) continue;
        if (last >= 0 && all[3 * r + 1] < all[3 * last + 2]) sorted = 0;
        last = r;
    }
    free(all);
    if (e) return comm_failed(c, e, diag);
    const plan_pass *ps = &p->passes[pi];
    for (int q = 0; !sorted && q < ps->nreds; q++)
        if (ps->reds[q].rop == ROP_USER && ps->reds[q].ordered)
            return util_diag_at(diag, p->src, ps->key_pos, RED_ERR_KEYS,
                                "ordered operator '%s' needs keys in non-decreasing order, and "
                                "these are not sorted", ps->reds[q].uname);
    return 0;
}

const core_pass_hook ranks_hook_proto = {hook_walked, hook_ended, hook_keys, NULL};
