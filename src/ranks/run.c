/*
 * run.c -- between the passes of a run over split arrays: every rank's status agreed
 * before any data moves, then the partials of each reduction over a split index combined
 * into the whole result on every rank, in rank order.  The partials are host memory on the
 * CPU and device memory on the GPU: exact ones are all-reduced where they are; the others
 * are gathered where they are, then merged on the host.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/exec.h"
#include "ranks/ranks.h"
#include "redjit.h"

static int comm_failed(ranks_comm *c, int rc, util_diag *diag)
{
    return util_diag_set(diag, rc == RED_ERR_NOMEM || rc == RED_ERR_INTERRUPTED ? rc : RED_ERR_COMM, "%s: %s",
                         c->ops->name,
                         c->err[0] ? c->err : "a collective failed");
}

/* A rank's status and what it says beside it, in one collective. */
typedef struct said {
    int32_t rc, pad;
    unsigned char bytes[];
} said;

static size_t said_size(size_t bytes)
{
    return (sizeof(said) + bytes + 7) & ~(size_t)7;
}

/* After an engine abandoned the run (ranks_watch), its agreements are this rank's status alone. */
static int abandoned(ranks_comm *c, int rc, util_diag *diag)
{
    if (rc) return rc;
    return util_diag_set(diag, RED_ERR_INTERRUPTED, "interrupted: %s",
                         c->err[0] ? c->err : "a collective was aborted");
}

int ranks_hello_start(ranks_hello *h, int rc, const void *mine, util_diag *diag)
{
    ranks_comm *c = h->comm;
    size_t one = said_size(h->bytes);
    h->started = 1;
    h->done = 0;
    if (c->watch && c->watch->abandoned) {
        h->done = 1;
        return h->rc = abandoned(c, rc, diag);
    }
    h->sent = calloc(1, one);
    h->got = calloc((size_t)c->size, one);
    if (!h->sent || !h->got) {
        free(h->sent);
        free(h->got);
        h->sent = h->got = NULL;
        h->done = 1;
        return h->rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");   /* (as every rank would) */
    }
    said *me = h->sent;
    me->rc = rc;
    if (h->bytes) memcpy(me->bytes, mine, h->bytes);
    int e = c->ops->allgather_start ? c->ops->allgather_start(c, me, one) : c->ops->allgather(c, me, h->got, one);
    if (e) {
        h->done = 1;
        free(h->sent);
        free(h->got);
        h->sent = h->got = NULL;
        return h->rc = comm_failed(c, e, diag);
    }
    return 0;
}

int ranks_hello_finish(ranks_hello *h, util_diag *diag)
{
    if (h->done) return h->rc;
    h->done = 1;
    ranks_comm *c = h->comm;
    size_t one = said_size(h->bytes);
    int rc = ((said *)h->sent)->rc;
    int e = c->ops->allgather_start ? c->ops->allgather_wait(c, h->got) : 0;
    free(h->sent);
    h->sent = NULL;
    if (e) {
        free(h->got);
        h->got = NULL;
        return h->rc = comm_failed(c, e, diag);
    }
    int first = -1;
    for (int r = 0; r < c->size; r++) {
        const said *s = (const said *)((const char *)h->got + one * (size_t)r);
        if (h->bytes) memcpy((char *)h->every + h->bytes * (size_t)r, s->bytes, h->bytes);
        if (s->rc && first < 0) first = r;
    }
    int code = first < 0 ? 0 : ((const said *)((const char *)h->got + one * (size_t)first))->rc;
    free(h->got);
    h->got = NULL;
    if (first < 0) return h->rc = h->heard ? h->heard(h->arg, diag) : 0;
    /* the first failing rank's message, to every rank */
    char *msgs = malloc((size_t)c->size * UTIL_DIAG_MAX);
    if (!msgs) return h->rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    char own[UTIL_DIAG_MAX];
    snprintf(own, sizeof own, "%s", rc ? diag->msg : "");
    e = c->ops->allgather(c, own, msgs, UTIL_DIAG_MAX);
    if (e) {
        code = comm_failed(c, e, diag);
    } else if (first != c->rank && !(rc == code && diag->msg[0])) {
        const char *m = msgs + (size_t)first * UTIL_DIAG_MAX;
        util_diag_set(diag, code, "rank %d: %.*s", first, UTIL_DIAG_MAX - 16, m[0] ? m : "(no message)");
    }
    free(msgs);
    return h->rc = code;
}

int ranks_hello_settle(ranks_hello *h, int rc, util_diag *diag)
{
    if (!h->started) {
        int e = ranks_hello_start(h, rc, h->mine, diag);
        if (e) return e;
    }
    return ranks_hello_finish(h, diag);
}

int ranks_agree_with(ranks_comm *c, int rc, const void *mine, void *every, size_t bytes, util_diag *diag)
{
    ranks_hello h = {.comm = c, .bytes = bytes, .every = every};
    int e = ranks_hello_start(&h, rc, mine, diag);
    return e ? e : ranks_hello_finish(&h, diag);
}

int ranks_agree(ranks_comm *c, int rc, util_diag *diag)
{
    return ranks_agree_with(c, rc, NULL, NULL, 0, diag);
}

/* The elements of temporary t. */
static int64_t temp_count(const core_buf *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

/* Where one pass's partials are gathered and merged: host memory, and on the GPU device
 * scratch memory, all taken before the ranks agree to combine (so that no rank fails to take
 * it after the others went into a collective), then carved up. */
typedef struct gathering {
    ranks_comm *c;
    const core_devmem *mem;
    unsigned char *next, *end;      /* the device room */
    unsigned char *hnext, *hend;    /* the host room */
} gathering;

#define GATHER_ALIGN 256

static size_t rounded(size_t bytes)
{
    return (bytes + GATHER_ALIGN - 1) / GATHER_ALIGN * GATHER_ALIGN;
}

static size_t gather_room(const gathering *g, size_t bytes)
{
    return rounded(bytes * (size_t)g->c->size);
}

/* What `bytes` of the host room take of it. */
static size_t hsize(size_t bytes)
{
    return rounded(bytes ? bytes : 1);
}

/* `bytes` of the host room, or NULL where it was misjudged. */
static void *take(gathering *g, size_t bytes)
{
    size_t r = hsize(bytes);
    if (!g->hnext || r > (size_t)(g->hend - g->hnext)) return NULL;
    void *p = g->hnext;
    g->hnext += r;
    return p;
}

/* `bytes` of every rank's `src` (a temporary) into host memory `dst`, in rank order. */
static int gather_temp(gathering *g, const void *src, void *dst, size_t bytes, util_diag *diag)
{
    ranks_comm *c = g->c;
    if (!g->mem) {
        int e = c->ops->allgather(c, src, dst, bytes);
        return e ? comm_failed(c, e, diag) : 0;
    }
    size_t room = gather_room(g, bytes);
    if (room > (size_t)(g->end - g->next))
        return util_diag_set(diag, RED_ERR_INTERNAL, "the partials' room was misjudged");
    unsigned char *d = g->next;
    g->next += room;
    int e = c->ops->dev_allgather(c, src, d, bytes, g->mem->stream);
    if (e) return comm_failed(c, e, diag);
    return g->mem->to_host(g->mem->arg, dst, d, bytes * (size_t)c->size, diag);
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
/* An argmin/argmax of pass pi combined (idx: its n indices, shaped as t): one that found
 * nothing is RED_ERR_EMPTY, as one process finds it, except where an output sits below its
 * free indices' range (the temporaries start at 0; keyed ones have no such place). */
static int check_found(const plan *p, int pi, const plan_red *rd, const core_vars *v, const core_buf *t,
                       const int64_t *idx, int64_t n, util_diag *diag)
{
    const plan_pass *ps = &p->passes[pi];
    for (int64_t i = 0; i < n; i++) {
        if (idx[i] >= 0) continue;
        int below = 0;
        for (int64_t d = t->ndim - 1, at = i; t->ndim == ps->nfree && d >= 0 && !below; d--) {
            int64_t ext = t->shape[d];
            below = ext && at % ext < v->lo[ps->free[d]];
            at = ext ? at / ext : 0;
        }
        if (!below)
            return util_diag_at(diag, p->src, rd->pos, RED_ERR_EMPTY, "%s of an empty set%s: there is no index to return",
                                plan_red_name(rd), rd->skipnan ? " (or of NaN only)" : "");
    }
    return 0;
}

/* Whether reduction rd's partials are all-reduced by the engine (else gathered). */
static int exact_red(const ranks_comm *c, const plan_red *rd)
{
    int exact = rd->rop != ROP_ARGMIN && rd->rop != ROP_ARGMAX && rd->rop != ROP_USER;
    for (int k = 0; k < rd->ncomp; k++) exact &= c->ops->reducible(rd->rop, rd->acc[k]);
    return exact;
}

static int combine_red(const ranks_run *dr, const plan *p, int pi, int q, const box *bx, const int *has,
                       const int64_t *const *counts, const core_vars *v, core_results *temps, gathering *gt,
                       util_diag *diag)
{
    ranks_comm *c = dr->comm;
    const plan_red *rd = &p->passes[pi].reds[q];
    const core_devmem *mem = gt->mem;
    int arg = rd->rop == ROP_ARGMIN || rd->rop == ROP_ARGMAX, n = c->size, rc = 0;
    int64_t count = temp_count(&temps->t[rd->temp[0]]);
    if (exact_red(c, rd)) {
        for (int k = 0; k < rd->ncomp && !rc; k++) {
            void *data = (void *)temps->t[rd->temp[k]].data;
            rc = mem ? c->ops->dev_allreduce(c, data, count, rd->acc[k], rd->rop, mem->stream)
                     : c->ops->allreduce(c, data, count, rd->acc[k], rd->rop);
        }
        return rc ? comm_failed(c, rc, diag) : 0;
    }
    /* the others gathered and combined in rank order: floats, user operators, argmin/argmax
     * (its extreme value, then its index) */
    int ncomp = arg ? 2 : rd->ncomp, src[PLAN_MAX_COMP];
    for (int k = 0; k < ncomp; k++) src[k] = arg ? (k ? rd->temp[0] : dr->dp->argval[pi][q]) : rd->temp[k];
    unsigned char *got[PLAN_MAX_COMP] = {0}, *merged[PLAN_MAX_COMP] = {0};
    size_t bytes[PLAN_MAX_COMP];
    void **part = take(gt, (size_t)n * ncomp * sizeof *part);     /* source r's component k */
    void *const **rows = take(gt, (size_t)n * sizeof *rows);
    const int64_t **idx = take(gt, (size_t)n * sizeof *idx);
    if (!part || !rows || !idx) rc = util_diag_set(diag, RED_ERR_INTERNAL, "the partials' room was misjudged");
    for (int k = 0; !rc && k < ncomp; k++) {
        const core_buf *t = &temps->t[src[k]];
        bytes[k] = (size_t)count * red_dtype_size(t->dtype);
        if (!(got[k] = take(gt, bytes[k] * (size_t)n)) || (mem && !(merged[k] = take(gt, bytes[k]))))
            rc = util_diag_set(diag, RED_ERR_INTERNAL, "the partials' room was misjudged");
        else rc = gather_temp(gt, t->data, got[k], bytes[k], diag);
        for (int r = 0; !rc && r < n; r++) part[(size_t)r * ncomp + k] = got[k] + bytes[k] * (size_t)r;
    }
    for (int r = 0; !rc && r < n; r++) {
        rows[r] = part + (size_t)r * ncomp;
        if (!arg) continue;
        idx[r] = rows[r][1];
        globalize(dr, bx, dr->dp->pass_split[pi], r, (int64_t *)idx[r], count);
    }
    if (!rc) {
        /* merged in place on the host; on the GPU on the host, then copied over the partials */
        void *out[PLAN_MAX_COMP];
        for (int k = 0; k < ncomp; k++) out[k] = mem ? merged[k] : (void *)temps->t[src[k]].data;
        if (!rc)
            rc = cpu_merge_partials(p, rd, n, count, rows, arg ? idx : NULL, has, counts, out, arg ? out[1] : NULL,
                                    diag);
        /* (the CPU executor checks its own after this hook) */
        if (!rc && arg && mem) rc = check_found(p, pi, rd, v, &temps->t[src[1]], out[1], count, diag);
        for (int k = 0; !rc && mem && k < ncomp; k++)
            rc = mem->to_device(mem->arg, (void *)temps->t[src[k]].data, merged[k], bytes[k], diag);
    }
    return rc;
}

/* The room pass pi's partials take: on the device where they are gathered there (*dev, 0
 * where all are all-reduced), on the host for the gathered ones and their merge (*host). */
static void gather_need(const ranks_run *dr, const plan *p, int pi, const core_results *temps, gathering *gt,
                        size_t *dev, size_t *host)
{
    size_t n = (size_t)gt->c->size;
    *dev = 0;
    *host = hsize(n * sizeof(int));   /* has */
    int ct = dr->dp->count[pi];
    if (ct >= 0) {
        size_t b = (size_t)temp_count(&temps->t[ct]) * sizeof(int64_t);
        *dev += gather_room(gt, b);
        *host += hsize(n * b) + hsize(n * sizeof(int64_t *));
    }
    for (int q = 0; q < dr->dp->reds0[pi]; q++) {
        const plan_red *rd = &p->passes[pi].reds[q];
        if (exact_red(dr->comm, rd)) continue;
        size_t count = (size_t)temp_count(&temps->t[rd->temp[0]]);
        int arg = rd->rop == ROP_ARGMIN || rd->rop == ROP_ARGMAX, ncomp = arg ? 2 : rd->ncomp;
        *host += hsize(n * (size_t)ncomp * sizeof(void *)) + 2 * hsize(n * sizeof(void *));
        for (int k = 0; k < ncomp; k++) {
            int t = arg ? (k ? rd->temp[0] : dr->dp->argval[pi][q]) : rd->temp[k];
            size_t b = count * red_dtype_size(temps->t[t].dtype);
            *dev += gather_room(gt, b);
            *host += hsize(n * b) + hsize(b);
        }
    }
}

/* The ranks' hello of a GPU run whose first pass reads no rank's offset is made by the first
 * hook, with the status there, once that pass's kernels are queued: it overlaps them, and it
 * is that pass's agreement (its failure ends the run on every rank there).  Whether it is
 * still to make. */
static int hello_due(const ranks_run *dr)
{
    return dr->hello && !dr->hello->done;
}

static int hook_walked(void *arg, const plan *p, int pi, int rc, const core_vars *v, core_results *temps,
                       const core_devmem *mem, util_diag *diag)
{
    ranks_run *dr = arg;
    ranks_comm *c = dr->comm;
    int s = dr->dp->pass_split[pi];
    /* a hello this pass's keys' hook made and that failed: every rank stopped there */
    if (dr->hello && dr->hello->done && dr->hello->rc) return dr->hello->rc;
    gathering gt = {c, mem, NULL, NULL, NULL, NULL};
    unsigned char *hroom = NULL;
    if (!rc && s >= 0) {
        if (mem && !c->ops->dev_allgather)
            rc = util_diag_set(diag, RED_ERR_UNSUPPORTED, "the %s engine has no collectives on device memory",
                               c->ops->name);
        size_t dev = 0, host = 0;
        if (!rc) gather_need(dr, p, pi, temps, &gt, &dev, &host);
        void *room = NULL;
        if (!rc && mem && dev) rc = mem->scratch(mem->arg, dev, &room, diag);
        gt.next = room;
        gt.end = gt.next + (room ? dev : 0);
        if (!rc && !(hroom = malloc(host))) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
        gt.hnext = hroom;
        gt.hend = hroom ? hroom + host : NULL;
    }
    rc = hello_due(dr) ? ranks_hello_settle(dr->hello, rc, diag) : ranks_agree(dr->ctl, rc, diag);
    if (rc || s < 0) {
        free(hroom);
        return rc;
    }
    const plan_pass *ps = &p->passes[pi];
    int n = c->size;
    int *has = take(&gt, (size_t)n * sizeof *has);
    if (!has) rc = util_diag_set(diag, RED_ERR_INTERNAL, "the partials' room was misjudged");
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
        cgot = take(&gt, (size_t)(m * n) * sizeof *cgot);
        counts = take(&gt, (size_t)n * sizeof *counts);
        if (!cgot || !counts) rc = util_diag_set(diag, RED_ERR_INTERNAL, "the partials' room was misjudged");
        else rc = gather_temp(&gt, temps->t[ct].data, cgot, (size_t)m * sizeof *cgot, diag);
        for (int r = 0; !rc && r < n; r++) counts[r] = cgot + (size_t)m * r;
    }
    /* the run's last pass: each rank's device fault goes with its first collective, so that
     * the run needs no agreement after it unless some rank faulted */
    if (!rc && dr->fold_ok && pi == p->npasses - 1 && mem && mem->fault && c->ops->dev_flag) {
        dr->folded = 1;
        int e = c->ops->dev_flag(c, mem->fault, mem->ranks_fault, mem->stream);
        if (e) rc = comm_failed(c, e, diag);
    }
    /* the text's own reductions; those after them (extreme values, counts) serve these */
    for (int q = 0; !rc && q < dr->dp->reds0[pi]; q++)
        rc = combine_red(dr, p, pi, q, &bx, has, counts, v, temps, &gt, diag);
    int fe = dr->folded ? c->ops->dev_flush(c, mem->stream) : 0;
    if (fe && !rc) rc = comm_failed(c, fe, diag);
    free(hroom);
    return rc;
}

static int hook_ended(void *arg, const plan *p, int pi, int rc, util_diag *diag)
{
    const ranks_run *dr = arg;
    return ranks_agree(dr->ctl, rc, diag);
}

/* Every rank sizes a keyed pass's partials for the largest key any rank holds; an ordered
 * operator's keys must be sorted across the ranks' blocks too. */
static int hook_keys(void *arg, const plan *p, int pi, int rc, int64_t *nkeys, const int64_t *ends,
                     util_diag *diag)
{
    const ranks_run *dr = arg;
    ranks_comm *c = dr->comm;
    if (hello_due(dr) && (rc = ranks_hello_settle(dr->hello, rc, diag))) return rc;
    /* the status, the count, the first and the last key of every rank, together */
    int64_t mine[4] = {*nkeys, ends != NULL, ends ? ends[0] : 0, ends ? ends[1] : 0};
    int64_t *all = malloc((size_t)c->size * sizeof mine);
    if (!all) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");   /* (as every rank would) */
    rc = ranks_agree_with(dr->ctl, rc, mine, all, sizeof mine, diag);
    if (rc || dr->dp->pass_split[pi] < 0) {
        free(all);
        return rc;
    }
    int sorted = 1, last = -1;
    for (int r = 0; r < c->size; r++) {
        if (all[4 * r] > *nkeys) *nkeys = all[4 * r];
        if (!all[4 * r + 1]) continue;
        if (last >= 0 && all[4 * r + 2] < all[4 * last + 3]) sorted = 0;
        last = r;
    }
    free(all);
    const plan_pass *ps = &p->passes[pi];
    for (int q = 0; !sorted && q < ps->nreds; q++)
        if (ps->reds[q].rop == ROP_USER && ps->reds[q].ordered)
            return util_diag_at(diag, p->src, ps->key_pos, RED_ERR_KEYS,
                                "ordered operator '%s' needs keys in non-decreasing order, and "
                                "these are not sorted", ps->reds[q].uname);
    return 0;
}

const core_pass_hook ranks_hook_proto = {hook_walked, hook_ended, hook_keys, NULL};
