/*
 * split.c -- the public calls for several processes (red_attach_mpi, red_attach_nccl,
 * red_bind_split, red_result_split) and red_run over split arrays: each rank checks and
 * plans alone, the ranks agree on success and on what they run, each walks its blocks (on
 * the CPU for host arrays, on the GPU for device arrays), the partials are combined between
 * passes (ranks/run.c), and split results are gathered where asked.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "cpu/exec.h"

#define MAX_SPLIT_BINDS 32      /* split arrays one run binds */

/* ---- attaching, binding ------------------------------------------------------------------ */

/* Engine `c` (or NULL) in slot *slot of the context (comm or nccl); the other engine, where
 * one is attached, must see this process as the same rank of as many. */
static int attach(red_ctx *ctx, ranks_comm **slot, ranks_comm *c)
{
    pthread_mutex_lock(&ctx->lock);
    ranks_comm *other = slot == &ctx->comm ? ctx->nccl : ctx->comm;
    if (c && other && (other->rank != c->rank || other->size != c->size)) {
        pthread_mutex_unlock(&ctx->lock);
        int rank = c->rank, size = c->size;
        c->ops->free(c);
        return ctx_fail(ctx, RED_ERR_MISUSE,
                        "the %s communicator has this process as rank %d of %d, the %s one as rank %d of %d: "
                        "both must number the ranks alike", slot == &ctx->comm ? "MPI" : "NCCL", rank, size,
                        other->ops->name, other->rank, other->size);
    }
    ranks_comm *old = *slot;
    *slot = c;
    pthread_mutex_unlock(&ctx->lock);
    if (old) old->ops->free(old);
    return RED_OK;
}

RED_API int red_attach_mpi(red_ctx *ctx, const void *mpi_comm)
{
    if (!ctx) return RED_ERR_ARG;
    ranks_comm *c = NULL;
    if (mpi_comm) {
        util_diag d = {0};
        int rc = ranks_mpi_open(mpi_comm, &c, &d);
        if (rc) return ctx_fail(ctx, rc, "%s", d.msg);
    }
    return attach(ctx, &ctx->comm, c);
}

RED_API int red_nccl_unique_id(red_ctx *ctx, void *id)
{
    if (!ctx) return RED_ERR_ARG;
    if (!id) return ctx_fail(ctx, RED_ERR_ARG, "red_nccl_unique_id: `id` is NULL");
    util_diag d = {0};
    int rc = ranks_nccl_unique_id(id, &d);
    return rc ? ctx_fail(ctx, rc, "%s", d.msg) : RED_OK;
}

/* The NCCL engine on the context's GPU: on the caller's communicator, or on one made from
 * `id`. */
static int attach_nccl(red_ctx *ctx, void *nccl_comm, const void *id, int nranks, int rank)
{
    gpu_dev *g = ctx_gpu(ctx);
    if (!g)
        return ctx_fail(ctx, RED_ERR_DEVICE, "NCCL needs the GPU, and none can be used (%s)",
                        ctx->gpu_err.msg[0] ? ctx->gpu_err.msg : "no reason given");
    CUcontext cuctx;
    int ordinal;
    const cu_api *cu = gpu_driver(g, &cuctx, &ordinal);
    ranks_cuda dev = {ordinal, cuctx, cu->CtxSetCurrent, cu->MemAlloc, cu->MemFree, cu->MemcpyHtoDAsync,
                      cu->MemcpyDtoHAsync, cu->StreamCreate, cu->StreamDestroy, cu->StreamSynchronize,
                      cu->StreamQuery, cu->GetErrorName, cu->MemHostAlloc, cu->MemFreeHost};
    ranks_comm *c = NULL;
    util_diag d = {0};
    int rc = ranks_nccl_open(nccl_comm, id, nranks, rank, &dev, &c, &d);
    if (rc) return ctx_fail(ctx, rc, "%s", d.msg);
    return attach(ctx, &ctx->nccl, c);
}

RED_API int red_attach_nccl(red_ctx *ctx, void *nccl_comm)
{
    if (!ctx) return RED_ERR_ARG;
    return nccl_comm ? attach_nccl(ctx, nccl_comm, NULL, 0, 0) : attach(ctx, &ctx->nccl, NULL);
}

RED_API int red_attach_nccl_id(red_ctx *ctx, const void *id, int nranks, int rank)
{
    if (!ctx) return RED_ERR_ARG;
    if (!id) return ctx_fail(ctx, RED_ERR_ARG, "red_attach_nccl_id: `id` is NULL");
    return attach_nccl(ctx, NULL, id, nranks, rank);
}

void ctx_detach_comm(red_ctx *ctx)
{
    if (ctx->comm) ctx->comm->ops->free(ctx->comm);
    if (ctx->nccl) ctx->nccl->ops->free(ctx->nccl);
    ctx->comm = ctx->nccl = NULL;
}

RED_API int red_comm_rank(red_ctx *ctx, int *rank, int *size)
{
    if (!ctx) return RED_ERR_ARG;
    ranks_comm *c = ctx->comm ? ctx->comm : ctx->nccl;
    if (rank) *rank = c ? c->rank : 0;
    if (size) *size = c ? c->size : 1;
    return RED_OK;
}

RED_API int red_bind_split(red_expr *e, const char *name, const red_array *block, int axis)
{
    if (!e) return RED_ERR_ARG;
    if (block && (axis < 0 || axis >= block->ndim)) {
        expr_start(e);
        return expr_failf(e, RED_ERR_BIND, "cannot split '%s' along axis %d: it has %d dimension%s", name ? name : "(null)",
                          axis, block->ndim, block->ndim == 1 ? "" : "s");
    }
    int rc = red_bind_array(e, name, block);
    if (rc) return rc;
    expr_find_binding(e, name)->split = axis + 1;
    return RED_OK;
}

RED_API int red_result_split(red_expr *e, int i, int *axis, int64_t *offset, int64_t *extent)
{
    if (!e) return RED_ERR_ARG;
    int rc = red_sync(e);   /* starts the call */
    if (!rc) rc = expr_result_index(e, i);   /* (a result handed over still says where it was) */
    if (rc) return rc;
    const int64_t *s = e->split_res ? e->split_res + 3 * i : NULL;
    if (axis) *axis = s ? (int)s[0] : -1;
    if (offset) *offset = s ? s[1] : 0;
    if (extent) *extent = s ? s[2] : 0;
    return RED_OK;
}

/* ---- what the ranks compare -------------------------------------------------------------- */

typedef struct hello {
    uint64_t text, sig;
    int32_t nsplit, pad;
    int64_t ext[MAX_SPLIT_BINDS];   /* each split binding's block extent, in name order */
} hello;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int by_name(const void *x, const void *y)
{
    return strcmp((*(binding *const *)x)->name, (*(binding *const *)y)->name);
}

/* This rank's hello: the text, a digest of everything the ranks must agree on, and the
 * extents of its blocks. */
static int say_hello(red_expr *e, int device, hello *h)
{
    memset(h, 0, sizeof *h);
    binding **sorted = malloc((size_t)(e->nbinds + 1) * sizeof *sorted);
    if (!sorted) return util_diag_set(&e->diag, RED_ERR_NOMEM, "out of memory");
    for (int i = 0; i < e->nbinds; i++) sorted[i] = &e->binds[i];
    qsort(sorted, (size_t)e->nbinds, sizeof *sorted, by_name);
    h->text = e->pg->hash;
    uint64_t g = 1469598103934665603ull;
    int gather = expr_opt(e, RED_OPT_GATHER);
    g = fnv(g, &gather, sizeof gather);
    g = fnv(g, &device, sizeof device);
    for (int i = 0; i < e->nbinds; i++) {
        const binding *b = sorted[i];
        int head[5] = {b->is_array, b->is_array ? (int)b->arr.dtype : (int)b->sdtype, b->arr.ndim, b->weak, b->split};
        g = fnv(g, b->name, strlen(b->name) + 1);
        g = fnv(g, head, sizeof head);
        if (!b->is_array) {
            g = fnv(g, &b->scalar, sizeof b->scalar);
            g = fnv(g, &b->scalar_im, sizeof b->scalar_im);
            continue;
        }
        for (int d = 0; d < b->arr.ndim; d++)
            if (d != b->split - 1) g = fnv(g, &b->arr.shape[d], sizeof b->arr.shape[d]);
        if (!b->split) continue;
        if (h->nsplit == MAX_SPLIT_BINDS) {
            free(sorted);
            return util_diag_set(&e->diag, RED_ERR_LIMIT, "more than %d split arrays in one run", MAX_SPLIT_BINDS);
        }
        h->ext[h->nsplit++] = b->arr.shape[b->split - 1];
    }
    h->sig = g;
    free(sorted);
    return 0;
}

/* The hellos of all ranks say the same run. */
static int same_run(red_expr *e, const hello *all, int n)
{
    for (int r = 1; r < n; r++) {
        if (all[r].text != all[0].text)
            return util_diag_set(&e->diag, RED_ERR_MISUSE,
                                 "rank %d runs another text than rank 0: every rank must run the same expression", r);
        if (all[r].sig != all[0].sig || all[r].nsplit != all[0].nsplit)
            return util_diag_set(&e->diag, RED_ERR_MISUSE,
                                 "rank %d binds other arrays than rank 0: every rank binds the same names, of the "
                                 "same types, in the same memory (all host or all device), split along the same "
                                 "axes, with the same extents on the other axes, the same scalars, and asks for the "
                                 "same RED_OPT_GATHER",
                                 r);
    }
    return 0;
}

/* ---- the blocks of each split index ------------------------------------------------------- */

/* The axis plan buffer b is split along, or -1. */
static int split_axis(red_expr *e, const plan *p, int b)
{
    const binding *me = expr_find_binding(e, p->bufs[b].name);
    return me ? me->split - 1 : -1;
}

/* Split binding number (in name order) of plan buffer b, or -1. */
static int split_number(red_expr *e, const plan *p, int b)
{
    const binding *me = expr_find_binding(e, p->bufs[b].name);
    if (!me || !me->split) return -1;
    int k = 0;
    for (int i = 0; i < e->nbinds; i++)
        if (e->binds[i].split && strcmp(e->binds[i].name, me->name) < 0) k++;
    return k;
}

typedef struct windows {
    int64_t *ext, *off, *total;   /* [nsplit * size], [nsplit * size], [nsplit] */
} windows;

/* Each split index's blocks, from its arrays' (which must agree), checked against the
 * extent the whole arrays give it. */
static int make_windows(red_expr *e, const plan *p, const ranks_plan *dp, const hello *all, int n,
                        const core_buf *bufs, windows *w)
{
    for (int s = 0; s < dp->nsplit; s++) {
        int k = split_number(e, p, dp->buf[s]);
        int64_t at = 0;
        for (int r = 0; r < n; r++) {
            w->ext[(size_t)s * n + r] = all[r].ext[k];
            w->off[(size_t)s * n + r] = at;
            at += all[r].ext[k];
        }
        w->total[s] = at;
        const plan_var *pv = &p->vars[dp->var[s]];
        for (int c = 0; c < pv->nconstraints; c++) {
            int b = pv->constraints[c].buf, k2 = split_number(e, p, b);
            if (k2 < 0 || bufs[b].ndim <= pv->constraints[c].dim || k2 == k) continue;
            for (int r = 0; r < n; r++)
                if (all[r].ext[k2] != all[r].ext[k])
                    return util_diag_at(&e->diag, p->src, pv->constraints[c].pos, RED_ERR_SHAPE,
                                        "'%s' and '%s' are split differently along index '%s': rank %d holds %lld "
                                        "of '%s' and %lld of '%s'",
                                        p->bufs[dp->buf[s]].name, p->bufs[b].name, pv->name, r,
                                        (long long)all[r].ext[k], p->bufs[dp->buf[s]].name,
                                        (long long)all[r].ext[k2], p->bufs[b].name);
        }
    }
    /* the extent each split index has over the whole arrays, as one process would find it */
    core_buf *whole = malloc((size_t)(p->nbufs + 1) * sizeof *whole);
    if (!whole) return util_diag_set(&e->diag, RED_ERR_NOMEM, "out of memory");
    memcpy(whole, bufs, (size_t)p->nbufs * sizeof *whole);
    for (int b = 0; b < p->nbufs; b++) {
        int k = split_number(e, p, b);
        if (k < 0) continue;
        int64_t t = 0;
        for (int r = 0; r < n; r++) t += all[r].ext[k];
        whole[b].shape[split_axis(e, p, b)] = t;
    }
    int rc = 0;
    for (int s = 0; !rc && s < dp->nsplit; s++) {
        int64_t x;
        if (p->vars[dp->var[s]].lo) continue;   /* a range of its own, cut to each block */
        rc = core_infer_extent(p, dp->var[s], whole, &x, &e->diag);
        if (!rc && x != w->total[s])
            rc = util_diag_at(&e->diag, p->src, p->vars[dp->var[s]].pos, RED_ERR_UNSUPPORTED,
                              "index '%s' runs over %lld elements of the whole arrays, fewer than the %lld of the "
                              "split '%s': a split index must run over all of its arrays' blocks",
                              p->vars[dp->var[s]].name, (long long)x, (long long)w->total[s],
                              p->bufs[dp->buf[s]].name);
    }
    free(whole);
    return rc;
}

/* ---- the run ------------------------------------------------------------------------------- */

/* The plan this rank runs for p and the bindings' split axes (kept while they stay). */
static int plan_here(red_expr *e, const plan *p, ranks_plan **out)
{
    int *axis = calloc((size_t)p->nbufs + 1, sizeof *axis);
    char *key = calloc((size_t)p->nbufs * 4 + 2, 1);
    if (!axis || !key) {
        free(axis);
        free(key);
        return util_diag_set(&e->diag, RED_ERR_NOMEM, "out of memory");
    }
    for (int b = 0; b < p->nbufs; b++) {
        axis[b] = split_axis(e, p, b);
        key[4 * b] = (char)('0' + axis[b] + 1);
        key[4 * b + 1] = key[4 * b + 2] = key[4 * b + 3] = ',';
    }
    int rc = 0;
    if (!e->rplan || e->rplan->base_uid != p->uid || strcmp(e->rplan->axes, key) != 0) {
        ranks_plan_free(e->rplan);
        e->rplan = NULL;
        rc = ranks_plan_build(p, axis, &e->rplan, &e->diag);
        if (!rc) {
            e->rplan->axes = key;
            key = NULL;
        }
    }
    free(axis);
    free(key);
    *out = e->rplan;
    return rc;
}

int expr_split_plan(red_expr *e, plan *p, plan **out)
{
    *out = p;
    int split = 0;
    for (int i = 0; i < e->nbinds; i++) split |= e->binds[i].split != 0;
    if (!split || !(e->ctx->comm || e->ctx->nccl)) return 0;
    ranks_plan *dp = NULL;
    int rc = plan_here(e, p, &dp);
    if (rc) return expr_fail(e, rc);
    *out = dp->p;
    return 0;
}

/* A result in device memory, gathered through the host (see gather_result): its block
 * brought to `mine`, or the whole (`bytes` at `host`) taken back to the device. */
static int block_to_host(red_expr *e, const core_buf *b, size_t bytes, unsigned char **mine)
{
    *mine = malloc(bytes + 1);
    if (!*mine) return util_diag_set(&e->diag, RED_ERR_NOMEM, "out of memory for a gathered result");
    return gpu_copy(e->gpu, *mine, 0, b->data, 1, bytes, &e->diag);
}

static int whole_to_device(red_expr *e, unsigned char **host, size_t bytes)
{
    void *dev = NULL;
    int rc = gpu_alloc(e->gpu, bytes + 1, &dev, &e->diag);
    if (!rc) rc = gpu_copy(e->gpu, dev, 1, *host, 0, bytes, &e->diag);
    if (rc) {
        if (dev) gpu_release(e->gpu, dev);
        return rc;
    }
    free(*host);
    *host = dev;
    return 0;
}

/* Result temporary t, split along dimension d, gathered from every rank's block (a result in
 * device memory through the host).  `before`: this rank's status from the gathers before, which
 * the ranks agree on here with what this one needs (so that a gather that failed on one rank
 * alone stops every rank at the next agreement). */
static int gather_result(red_expr *e, int t, int d, const windows *w, int s, int before)
{
    ranks_comm *c = e->rctl;   /* host memory: MPI where it is attached */
    int n = c->size, on_device = expr_temp_on_device(e, t);
    core_buf *b = &e->temps.t[t];
    size_t es = red_dtype_size(b->dtype);
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < d; k++) outer *= b->shape[k];
    for (int k = d + 1; k < b->ndim; k++) inner *= b->shape[k];
    size_t row = (size_t)inner * es, total = (size_t)outer * (size_t)w->total[s] * row;
    size_t *counts = calloc((size_t)n * 2, sizeof *counts);
    unsigned char *flat = malloc(total + 1), *mine = NULL;
    unsigned char *whole = on_device ? malloc(total + 1) : core_results_alloc(&e->temps, total + 1, 0, NULL);
    int rc = before ? before : counts && flat && whole ? 0 : util_diag_set(&e->diag, RED_ERR_NOMEM, "out of memory for a gathered result");
    size_t most = 0;
    for (int r = 0; !rc && r < n; r++) {
        counts[r] = (size_t)outer * (size_t)w->ext[(size_t)s * n + r] * row;
        counts[n + r] = (size_t)outer * (size_t)w->off[(size_t)s * n + r] * row;
        if (counts[r] > most) most = counts[r];
    }
    if (!rc && on_device) rc = block_to_host(e, b, counts[c->rank], &mine);
    /* the engine's room for the gather, taken before the ranks agree to go into it */
    if (!rc && c->ops->reserve && c->ops->reserve(c, most))
        rc = util_diag_set(&e->diag, RED_ERR_NOMEM, "%s: %s", c->ops->name, c->err);
    rc = ranks_agree(c, rc, &e->diag);
    if (rc) {
        free(mine);
        free(whole);
        free(flat);
        free(counts);
        return rc;
    }
    if (c->ops->allgatherv(c, on_device ? mine : b->data, flat, counts, counts + n)) rc = RED_ERR_COMM;
    free(mine);
    if (!rc) {
        /* [rank][outer][block][inner] to [outer][whole][inner] */
        for (int r = 0; r < n; r++)
            for (int64_t o = 0; o < outer; o++) {
                size_t len = (size_t)w->ext[(size_t)s * n + r] * row;
                memcpy(whole + ((size_t)o * (size_t)w->total[s] + (size_t)w->off[(size_t)s * n + r]) * row,
                       flat + counts[n + r] + (size_t)o * len, len);
            }
        /* (a failure here is agreed on at the next gather or after the last) */
        int dr = on_device ? whole_to_device(e, &whole, total) : 0;
        if (dr) {
            free(whole);
            free(flat);
            free(counts);
            return dr;
        }
        if (on_device) {
            gpu_release(e->gpu, (void *)b->data);
        } else {
            core_results_leave(&e->temps, (void *)b->data, counts[c->rank]);   /* (a page-locked one unpinned) */
            free((void *)b->data);
        }
        b->data = whole;
        whole = NULL;
        b->shape[d] = w->total[s];
        int64_t st = 1;
        for (int k = b->ndim - 1; k >= 0; k--) {
            b->strides[k] = st;
            st *= b->shape[k];
        }
    }
    free(whole);
    free(flat);
    free(counts);
    return rc ? util_diag_set(&e->diag, RED_ERR_COMM, "%s: %s", c->ops->name, c->err) : 0;
}

/* Which block of each result this rank holds, and the gathering RED_OPT_GATHER asks for. */
static int place_results(red_expr *e, const plan *p, const ranks_plan *dp, const windows *w, int *gathered)
{
    int n = e->rcomm->size, me = e->rcomm->rank, rc = 0;
    /* every rank makes every gather, a failed one's status going into the next's agreement */
    for (int i = 0; i < p->nresults; i++) {
        int t = p->results[i].temp, d = dp->temp_split[t];
        int64_t *r = e->split_res + 3 * i;
        r[0] = -1;
        if (d < 0) continue;
        int s = dp->split_of_var[p->temps[t].dims[d]];
        if (expr_opt(e, RED_OPT_GATHER)) {
            rc = gather_result(e, t, d, w, s, rc);
            *gathered = 1;
        } else {
            r[0] = d;
            r[1] = w->off[(size_t)s * n + me];
            r[2] = w->total[s];
        }
    }
    return rc;
}

/* The first array bound in device memory, or NULL: the run is then the GPU's, through NCCL. */
static const char *device_array(const red_expr *e)
{
    for (int i = 0; i < e->nbinds; i++)
        if (e->binds[i].is_array && e->binds[i].arr.memory == RED_MEM_CUDA) return e->binds[i].name;
    return NULL;
}

/* Up to the agreement: the engine, the device, the plan, this rank's plan. */
static int prepare_here(red_expr *e, gpu_dev **gpu, plan **p, ranks_plan **dp)
{
    *gpu = NULL;
    const char *dev = device_array(e);
    if (dev && !e->ctx->nccl)
        return util_diag_set(&e->diag, RED_ERR_UNSUPPORTED,
                             "'%s' is in device memory: split device arrays go through NCCL (red_attach_nccl); "
                             "the MPI engine runs on the CPU, over host arrays", dev);
    if (dev && expr_opt(e, RED_OPT_DEVICE) == RED_DEVICE_CPU)
        return util_diag_set(&e->diag, RED_ERR_BIND, "device cpu was chosen, but '%s' is in CUDA device memory", dev);
    if (dev && !(*gpu = ctx_gpu(e->ctx)))
        return util_diag_set(&e->diag, RED_ERR_DEVICE, "'%s' is in device memory, but no GPU can be used (%s)", dev,
                             e->ctx->gpu_err.msg[0] ? e->ctx->gpu_err.msg : "no reason given");
    int rc = expr_plan(e, p);
    if (!rc) rc = plan_here(e, *p, dp);
    return rc;
}

/* The inputs of one run: the plan's arrays (this rank's blocks) and scalars, then the
 * split indices' offsets here. */
typedef struct inputs {
    core_buf *bufs;
    plan_value *scalars;
    int *on_device;
} inputs;

static int make_inputs(red_expr *e, const plan *p, const ranks_plan *dp, inputs *in)
{
    in->bufs = calloc((size_t)p->nbufs + 1, sizeof *in->bufs);
    in->scalars = calloc((size_t)dp->p->nscalars + 1, sizeof *in->scalars);
    in->on_device = calloc((size_t)p->nbufs + 1, sizeof *in->on_device);
    if (!in->bufs || !in->scalars || !in->on_device) return util_diag_set(&e->diag, RED_ERR_NOMEM, "out of memory");
    return expr_inputs(e, p, in->bufs, in->scalars, in->on_device);
}

static void free_inputs(inputs *in)
{
    free(in->bufs);
    free(in->scalars);
    free(in->on_device);
}

/* This rank's part of the run: on the GPU with `gpu` (waited for: a fault found at its end
 * is agreed on after the results are placed), else on the CPU; `pending`: the hello, to be
 * made by the first hook; *folded: ranks_run's. */
static int execute_here(red_expr *e, gpu_dev *gpu, ranks_plan *dp, const windows *w, inputs *in, core_cancel *cancel,
                        ranks_hello *pending, int *folded)
{
    ranks_comm *c = e->rcomm;
    /* (a run whose results are gathered makes its end agreement: the gathers' collectives follow) */
    ranks_run dr = {c, dp, w->ext, w->off, pending, e->rctl, !expr_opt(e, RED_OPT_GATHER), 0};
    core_pass_hook hook = ranks_hook_proto;
    hook.arg = &dr;
    double tc = expr_now_ms();
    int rc;
    if (gpu) {
        rc = expr_gpu_run(e, gpu, dp->p, in->bufs, in->on_device, in->scalars, cancel, &hook, 0);
        if (!rc && e->run.pending) rc = gpu_finish(gpu, &e->run, &e->diag);
        if (rc) e->results_on_device = RED_RESULTS_HOST;
    } else {
        rc = cpu_execute_hooked(dp->p, in->bufs, in->scalars, expr_opt(e, RED_OPT_THREADS), cancel, &hook, &e->temps,
                                &e->diag);
    }
    e->timings.cpu_ms = expr_now_ms() - tc;
    *folded = dr.folded;
    return rc;
}

/* What follows from the ranks' hellos, alike on every rank: the same run, each split index's
 * blocks, this rank's offsets. */
typedef struct hearing {
    red_expr *e;
    const plan *p;
    const ranks_plan *dp;
    const hello *all;
    int n;
    inputs *in;
    windows *w;
} hearing;

static int heard(void *arg, util_diag *diag)
{
    hearing *h = arg;
    int rc = same_run(h->e, h->all, h->n);
    if (!rc) rc = make_windows(h->e, h->p, h->dp, h->all, h->n, h->in->bufs, h->w);
    ranks_comm *c = h->e->rcomm;
    for (int s = 0; !rc && s < h->dp->nsplit; s++) {
        h->in->scalars[h->dp->off_scalar + s].i = h->w->off[(size_t)s * c->size + c->rank];
        /* a range of the index's own is cut to the block where another rank's block is beyond */
        int64_t off = h->w->off[(size_t)s * c->size + c->rank], ext = h->w->ext[(size_t)s * c->size + c->rank];
        h->in->scalars[h->dp->cut_scalar + 2 * s].i = off > 0 ? 0 : INT64_MIN / 4;
        h->in->scalars[h->dp->cut_scalar + 2 * s + 1].i = off + ext < h->w->total[s] ? ext : INT64_MAX / 4;
    }
    return rc;
}

/* The ranks' phases, each entered by all or by none: a failure is agreed on (ranks_agree)
 * before the next collective, so that no rank is left waiting in one.  The first collective
 * is the ranks' hello (their status, what they run, their blocks' extents).  A GPU run whose
 * first pass reads no rank's offset queues that pass first and makes the hello in the pass's
 * hook, with the status there: the two overlap, and the hello is the pass's agreement.  A GPU
 * run whose last pass is split needs no agreement after it unless a rank's device faulted
 * (ranks_run's folded). */
int expr_run_split(red_expr *e)
{
    double t0 = expr_now_ms();
    memset(&e->timings, 0, sizeof e->timings);
    expr_start(e);
    expr_clear_results(e);
    e->gpu = NULL;
    /* the hello goes through MPI where it is attached (NCCL where it is not); a run on device
     * arrays, which every rank's hello then says, goes on through NCCL */
    ranks_comm *c = e->ctx->comm ? e->ctx->comm : e->ctx->nccl;
    e->rcomm = e->rctl = c;
    int n = c->size;
    plan *p = NULL;
    ranks_plan *dp = NULL;
    gpu_dev *gpu = NULL;
    hello mine;
    windows w = {0};
    inputs in = {0};
    hello *all = calloc((size_t)n, sizeof *all);
    if (!all) return expr_failf(e, RED_ERR_NOMEM, "out of memory");   /* (as every rank would) */
    /* (until the run returns: an engine that can abort a collective red_interrupt stops does) */
    core_cancel cancel = {&e->ctx->interrupts, __atomic_load_n(&e->ctx->interrupts, __ATOMIC_RELAXED)};
    ranks_watch watch = {&cancel, 0};
    if (e->ctx->comm) e->ctx->comm->watch = &watch;
    if (e->ctx->nccl) e->ctx->nccl->watch = &watch;
    /* all that this rank may fail at alone comes before the hello; what follows it is
     * decided alike on every rank, from what they said */
    int rc = prepare_here(e, &gpu, &p, &dp);
    if (!rc) {
        w.ext = calloc((size_t)(dp->nsplit + 1) * n, sizeof *w.ext);
        w.off = calloc((size_t)(dp->nsplit + 1) * n, sizeof *w.off);
        w.total = calloc((size_t)dp->nsplit + 1, sizeof *w.total);
        e->split_res = calloc((size_t)p->nresults * 3 + 1, sizeof *e->split_res);   /* (place_results's) */
        rc = w.ext && w.off && w.total && e->split_res ? make_inputs(e, p, dp, &in)
                                                       : util_diag_set(&e->diag, RED_ERR_NOMEM, "out of memory");
    }
    memset(&mine, 0, sizeof mine);
    if (!rc) rc = say_hello(e, gpu != NULL, &mine);   /* (a GPU run: device arrays) */
    if (!rc && gpu) e->rcomm = e->ctx->nccl;
    hearing hh = {e, p, dp, all, n, &in, &w};
    ranks_hello hi = {.comm = c, .bytes = sizeof mine, .every = all, .heard = heard, .arg = &hh, .mine = &mine};
    int overlap = !rc && gpu && dp->p->npasses > 0 && !dp->pass_offsets[0];
    if (!overlap) rc = ranks_hello_settle(&hi, rc, &e->diag);
    if (!rc) {
        int folded = 0;
        rc = execute_here(e, gpu, dp, &w, &in, &cancel, overlap ? &hi : NULL, &folded);
        int hrc = ranks_hello_settle(&hi, rc, &e->diag);   /* (made by the run's first hook) */
        if (hrc && !rc) rc = hrc;
        /* a fault the device found at the end of its run is every rank's (the CPU's hooks
         * agreed on everything); after a failed hello every rank has stopped already */
        if (gpu && !hrc && (!folded || e->run.ranks_fault)) rc = ranks_agree(e->rctl, rc, &e->diag);
        int gathered = 0;
        if (!rc) {
            e->run_pe = e->last_pe;
            __atomic_add_fetch(&e->run_pe->refs, 1, __ATOMIC_ACQ_REL);
            rc = place_results(e, p, dp, &w, &gathered);
        }
        /* a gathered result not placed (its collective agreed on what came before) */
        if (gathered) rc = ranks_agree(e->rctl, rc, &e->diag);
    }
    if (e->ctx->comm) e->ctx->comm->watch = NULL;
    if (e->ctx->nccl) e->ctx->nccl->watch = NULL;
    free(all);
    free_inputs(&in);
    free(w.ext);
    free(w.off);
    free(w.total);
    e->timings.total_ms = expr_now_ms() - t0;
    if (rc) {
        expr_clear_results(e);
        return expr_fail(e, rc);
    }
    return expr_take_results(e, p);
}
