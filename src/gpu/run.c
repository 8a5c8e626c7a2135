/*
 * run.c -- one run of a plan on the device (gpu_execute), in phases: set-up, uploads, the
 * passes (pass.c), the results staged for the host, one read-back of the workspace, and the
 * end, which finishes the run or leaves it queued; gpu_finish and gpu_rechain for the latter.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"

/* Give a finished run's buffers and events back.  Under g->lock. */
static void gpu_run_release(gpu_dev *g, gpu_run *run)
{
    gpu_events_give(g, run->ev);
    for (int i = 0; i < run->nrelease; i++) gpu_pool_put(g, run->release[i]);
    for (int i = 0; i < run->nreuse; i++) gpu_pool_put(g, run->reuse[i]);
    if (run->ws) gpu_pool_put(g, run->ws);
    if (run->release != run->release_inl) free(run->release);
    if (run->reuse != run->reuse_inl) free(run->reuse);
    run->reuse = NULL;
    run->nreuse = run->capreuse = 0;
    if (run->bufs_owned) free(run->bufs);
    run->release = NULL;
    run->bufs = NULL;
    run->bufs_owned = 0;
    run->nrelease = run->caprelease = 0;
    run->ws = 0;
    run->pending = 0;
}

int gpu_rechain(gpu_dev *g, gpu_run *run, const unsigned long long *extra, int nextra)
{
    /* timed runs read their own events; a key flag word left set needs
     * the workspace cleaned (see ws_get) */
    if (!run->pending || !run->stream || !run->ws || run->ws_keys_dirty || run->ev[0]) return 0;
    pthread_mutex_lock(&g->lock);
    int need = run->nreuse + run->nrelease + nextra;
    if (!run->reuse) {
        run->reuse = run->reuse_inl;
        run->capreuse = (int)(sizeof run->reuse_inl / sizeof run->reuse_inl[0]);
    }
    if (need > run->capreuse) {
        unsigned long long *n = malloc((size_t)need * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&g->lock);
            return 0;
        }
        memcpy(n, run->reuse, (size_t)run->nreuse * sizeof *n);
        if (run->reuse != run->reuse_inl) free(run->reuse);
        run->reuse = n;
        run->capreuse = need;
    }
    for (int i = 0; i < run->nrelease; i++) run->reuse[run->nreuse++] = run->release[i];
    for (int i = 0; i < nextra; i++) run->reuse[run->nreuse++] = extra[i];
    if (run->release != run->release_inl) free(run->release);
    run->release = NULL;
    run->nrelease = run->caprelease = 0;
    if (run->bufs_owned) free(run->bufs);
    run->bufs = NULL;
    run->bufs_owned = 0;
    run->pending = 0;
    pthread_mutex_unlock(&g->lock);
    return 1;
}

/* Wait for the run's work, read its fault record, give its buffers back. */
int gpu_finish(gpu_dev *g, gpu_run *run, util_diag *diag)
{
    pthread_mutex_lock(&g->lock);
    int rc = 0;
    if (run->pending || run->ws) {
        run_ctx r = {.g = g, .p = run->p, .diag = diag, .s = (CUstream)run->stream, .ws = run->ws, .run = run};
        unsigned long long err[4] = {0}, rfault = 0;
        CUresult cr = g->cu.CtxSetCurrent(g->ctx);
        /* the fault record's copy queued behind the work, then one wait
         * for both (a failed kernel fails either call) */
        if (cr) rc = gpu_cu_fail(g, cr, "cuCtxSetCurrent", diag);
        else if (run->ws && ((cr = g->cu.MemcpyDtoHAsync(err, run->ws, RJ_WS_ERR_BYTES, r.s)) ||
                             (run->ranks_fault_used &&
                              (cr = g->cu.MemcpyDtoHAsync(&rfault, run->ws + RJ_WS_RFAULT, sizeof rfault, r.s)))))
            rc = gpu_cu_fail(g, cr, "kernel execution (cuMemcpyDtoHAsync)", diag);
        else if ((cr = g->cu.StreamSynchronize(r.s))) rc = gpu_cu_fail(g, cr, "kernel execution (cuStreamSynchronize)", diag);
        if (!rc) run->ranks_fault = rfault;
        if (!rc && err[0]) rc = gpu_report_device_fault(&r, err, run->bufs);
        if (!rc && run->ws) {   /* read, and zero: reusable without a memset */
            if (run->ws_keys_dirty || rfault) gpu_pool_put(g, run->ws);
            else gpu_ws_put_clean(g, run->ws);
            run->ws = 0;
        }
    }
    gpu_read_timings(g, run);
    gpu_run_release(g, run);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* The run's bookkeeping, carved from one zeroed block (x->scratch); which results come to
 * the host; the pinned staging area; the events; the run's workspace. */
static int exec_setup(gpu_exec *x)
{
    gpu_dev *g = x->g;
    const plan *p = x->p;
    gpu_run *run = x->run;
    util_diag *diag = x->diag;
    int rc = 0;
    int nt = p->ntemps + 1, nb = p->nbufs + 1, nv = p->nvars + 1;
    size_t need = (size_t)nt * (sizeof(core_buf) + sizeof(CUdeviceptr) + 3 * sizeof(int)) +
                  (size_t)nb * sizeof(CUdeviceptr) + (size_t)nv * (2 * sizeof(int64_t) + sizeof(int));
    unsigned char *scratch = need <= GPU_SCRATCH ? x->scratch_stack : malloc(need);
    x->scratch = scratch;
    if (scratch) memset(scratch, 0, need);
    unsigned char *sp = scratch;
#define SCRATCH(type, n) (sp += (size_t)(n) * sizeof(type), (type *)(void *)(sp - (size_t)(n) * sizeof(type)))
    x->tdesc = scratch ? SCRATCH(core_buf, nt) : NULL;
    x->tptr = scratch ? SCRATCH(CUdeviceptr, nt) : NULL;
    x->in_adj = scratch ? SCRATCH(CUdeviceptr, nb) : NULL;
    x->vlo = scratch ? SCRATCH(int64_t, nv) : NULL;
    x->vhi = scratch ? SCRATCH(int64_t, nv) : NULL;
    x->keep = scratch ? SCRATCH(int, nt) : NULL;
    x->to_host = scratch ? SCRATCH(int, nt) : NULL;
    x->ws_off = scratch ? SCRATCH(int, nt) : NULL;
    x->done = scratch ? SCRATCH(int, nv) : NULL;
#undef SCRATCH
    x->ws_used = RJ_WS_ERR_BYTES;
    run->ranks_fault_used = 0;
    run->ranks_fault = 0;
    x->vars = (core_vars){x->vlo, x->vhi, x->done};
    if (!scratch) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < p->nresults; i++) {
        int t = p->results[i].temp;
        x->to_host[t] = !gpu_result_on_device(run->device_results, p->temps[t].ndim);
    }
    /* the host's staging area for the workspace and small results, before
     * any pass: a run without it copies its results one by one */
    if (!rc) gpu_pinned_ensure(g);
    /* a run that ends by reading its workspace back can leave the check of
     * its last pass's sorted keys to that read (see key_fused).  A run whose
     * results stay on the device is left queued at its end, but one whose
     * last pass is keyed waits for the keys anyway: it ends with that read
     * too (one wait instead of two, or instead of rj_kends's and a second) */
    for (int i = 0; !rc && i < p->nresults; i++) x->host_bound |= x->to_host[p->results[i].temp];
    x->ends_synced = g->pinned && (x->host_bound || !run->stream || run->device_results == RED_RESULTS_HOST ||
                                   (p->npasses > 0 && p->passes[p->npasses - 1].key && p->passes[p->npasses - 1].nreds));
    /* this run's own fault record, persistent-grid counter and key stats, so
     * runs on different streams never share them */
    if (run->timings) gpu_events_take(g, run->ev);
    else memset(run->ev, 0, sizeof run->ev);
    if (run->ev[0] && g->cu.EventRecord(run->ev[0], x->s)) run->timing_failed = 1;
    x->nvrtc_before = g->stats.compile_ms;
    if (!rc && !run->ws) rc = gpu_ws_get(g, x->s, &run->ws, diag);   /* a chained run has its own */
    x->r.ws = run->ws;
    return rc;
}

static int exec_uploads(gpu_exec *x)
{
    int rc = 0;
    for (int i = 0; !rc && i < x->p->nbufs; i++) {
        if (x->on_device && x->on_device[i]) {
            x->in_adj[i] = (CUdeviceptr)(uintptr_t)x->bufs[i].data;
        } else {
            rc = gpu_upload(&x->r, &x->bufs[i], &x->in_adj[i]);
        }
    }
    return rc;
}

/* One result bound for the host: its buffer, and its way back (in the workspace, through
 * the pinned staging area, or copied straight into it). */
static int exec_result_to_host(gpu_exec *x, int t, size_t *used)
{
    gpu_dev *g = x->g;
    const core_buf *td = &x->tdesc[t];
    int64_t n = 1;
    for (int d = 0; d < td->ndim; d++) n *= td->shape[d];
    size_t bytes = (size_t)n * red_dtype_size(td->dtype);
    int reused = 0;
    void *h = core_results_alloc(x->out, bytes, 0, &reused);
    x->out->t[t].data = h;
    if (h && reused && bytes >= PIN_MIN) gpu_host_pin(g, x->out, h, bytes);
    size_t at = (*used + 15) & ~(size_t)15;
    if (!h) return util_diag_set(x->diag, RED_ERR_NOMEM, "out of memory");
    if (x->ws_off[t] && x->nstaged < 64) {
        /* in the workspace: comes back with the fault record */
        x->staged[x->nstaged++] = (gpu_staged){h, (size_t)x->ws_off[t], bytes};
    } else if (bytes && g->pinned && at + bytes <= g->pinned_size && x->nstaged < 64) {
        /* small: into the pinned staging area, asynchronously */
        int rc = 0;
        if (g->cu.MemcpyDtoHAsync(g->pinned + at, x->tptr[t], bytes, x->s))
            rc = util_diag_set(x->diag, RED_ERR_DEVICE, "cuMemcpyDtoHAsync failed");
        x->staged[x->nstaged++] = (gpu_staged){h, at, bytes};
        *used = at + bytes;
        return rc;
    } else if (bytes && g->cu.MemcpyDtoHAsync(h, x->tptr[t], bytes, x->s)) {
        /* large, or the workspace's (without staging room): to
         * pageable memory, the call returns when the copy is done;
         * to page-locked memory it does not, and the stream is
         * waited for below (a run whose last kernel publishes has
         * every host result in its workspace: no copy like this) */
        return util_diag_set(x->diag, RED_ERR_DEVICE, "cuMemcpyDtoHAsync failed");
    }
    return 0;
}

/* results: left on the device, or copied back; every other temporary is
 * given back once the work is done */
static int exec_results(gpu_exec *x)
{
    const plan *p = x->p;
    core_results *out = x->out;
    int rc = 0;
    size_t used = x->ws_used;   /* of the pinned area: the workspace's image first */
    out->n = p->ntemps;
    out->t = calloc((size_t)p->ntemps + 1, sizeof *out->t);
    if (!out->t) rc = util_diag_set(x->diag, RED_ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < p->nresults; i++) {
        int t = p->results[i].temp;
        if (x->keep[t] || out->t[t].data) continue;
        out->t[t] = x->tdesc[t];
        if (!x->to_host[t]) {
            x->keep[t] = 1;
            out->t[t].data = (void *)(uintptr_t)x->tptr[t];
            continue;
        }
        rc = exec_result_to_host(x, t, &used);
    }
    return rc;
}

/* The workspace's image, published by the last kernel or copied back, read: the fault
 * record, the staged results, and a deferred key check's flag. */
static int exec_read_back(gpu_exec *x)
{
    gpu_dev *g = x->g;
    gpu_run *run = x->run;
    CUstream s = x->s;
    const unsigned char *img = g->pinned;
    int seen = 0, rc = 0;
    CUresult cr = 0;
    if (x->r.pub_seq) {
        cr = gpu_publish_wait(g, s, x->r.pub_seq, &seen);
        if (seen) img = g->pub + RJ_PUB_IMAGE;
    }
    if (!cr && !seen) {
        cr = g->cu.MemcpyDtoHAsync(g->pinned, run->ws, x->ws_used, s);
        if (!cr && run->ev[3] && g->cu.EventRecord(run->ev[3], s)) run->timing_failed = 1;
        if (!cr) cr = g->cu.StreamSynchronize(s);
    }
    if (cr) return gpu_cu_fail(g, cr, "kernel execution (cuStreamSynchronize)", x->diag);
    memcpy(x->err, img + RJ_WS_ERR, RJ_WS_ERR_BYTES);
    x->have_err = 1;
    if (run->ranks_fault_used) {
        memcpy(&run->ranks_fault, img + RJ_WS_RFAULT, sizeof run->ranks_fault);
        if (run->ranks_fault) x->ws_dirty = 1;
    }
    for (int k = 0; k < x->nstaged; k++) memcpy(x->staged[k].dst, img + x->staged[k].off, x->staged[k].bytes);
    unsigned long long flag;
    memcpy(&flag, img + RJ_WS_KFLAG, sizeof flag);
    if (x->deferred.e) x->flag_dirty = flag != 0;
    if (x->deferred.e && !flag) {   /* the count is confirmed */
        x->deferred.e->nkeys_key = x->deferred.kh;
        x->deferred.e->nkeys = x->deferred.nkeys;
    }
    if (x->deferred.e && flag) {
        /* unsorted keys after all, or a wrong guess of their count:
         * nothing of this run counts, not even a fault (the results
         * it came from are wrong) */
        rc = KEYS_RETRY;
        if (x->deferred.guessed) x->deferred.e->nkeys_nospec = 1;
        x->ws_dirty = x->err[0] != 0;
        x->err[0] = 0;
    }
    return rc;
}

/* A run left queued on its stream: its fault message may come after the caller's arrays
 * are gone, so it keeps a copy.  Returns with g->lock released. */
static int exec_leave_pending(gpu_exec *x)
{
    const plan *p = x->p;
    gpu_run *run = x->run;
    core_buf *copy = malloc(((size_t)p->nbufs + 1) * sizeof *copy);
    if (copy) {
        memcpy(copy, x->bufs, (size_t)p->nbufs * sizeof *x->bufs);
        run->bufs = copy;
        run->bufs_owned = 1;
    } else {
        run->bufs = NULL;   /* the message then names no array */
    }
    run->pending = 1;
    pthread_mutex_unlock(&x->g->lock);
    return 0;
}

/* The end of a run: temporaries given back, nothing handed out after a failure, the run
 * left pending or finished, a fault found after the fact reported.  Releases g->lock. */
static int exec_end(gpu_exec *x, int rc)
{
    gpu_dev *g = x->g;
    const plan *p = x->p;
    gpu_run *run = x->run;
    core_results *out = x->out;
    int *keep = x->keep;
    for (int i = 0; i < p->ntemps; i++)
        if (x->tptr && x->tptr[i] && !(keep && keep[i]) && !x->ws_off[i]) gpu_defer_release(&x->r, x->tptr[i]);
    int pending = !rc && x->queued;
    run->ws_keys_dirty = x->flag_dirty;   /* for gpu_finish, on the paths below that end there */
    if (x->params != x->params_stack) free(x->params);
    if (rc && keep && out->t) {
        /* nothing is handed out after a failure */
        for (int i = 0; i < p->ntemps; i++)
            if (keep[i]) {
                gpu_defer_release(&x->r, (CUdeviceptr)(uintptr_t)out->t[i].data);
                out->t[i].data = NULL;
            }
    }
    if (pending) return exec_leave_pending(x);
    int frc = 0;
    if (x->have_err) {
        /* already synchronised and read: report, release, and give the
         * workspace back clean unless the record was written */
        if (x->err[0]) frc = gpu_report_device_fault(&x->r, x->err, x->bufs);
        unsigned long long ws = run->ws;
        run->ws = 0;
        gpu_read_timings(g, run);
        gpu_run_release(g, run);
        if (x->err[0] || x->ws_dirty || x->flag_dirty) gpu_pool_put(g, ws);
        else gpu_ws_put_clean(g, ws);
        pthread_mutex_unlock(&g->lock);
    } else {
        pthread_mutex_unlock(&g->lock);
        frc = gpu_finish(g, run, rc ? &(util_diag){0} : x->diag);
    }
    if (!rc && frc && out->t) {
        /* a fault found after the fact: the results are not valid */
        for (int i = 0; i < out->n; i++)
            if (keep[i]) gpu_release(g, (void *)out->t[i].data), out->t[i].data = NULL;
        core_results_free(out);
    }
    return rc ? rc : frc;
}

/* ---- the run's device memory, for a hook between passes (g->lock is held) ------------------ */

static int mem_to_host(void *arg, void *dst, const void *src, size_t bytes, util_diag *diag)
{
    gpu_exec *x = arg;
    CUresult r = bytes ? x->g->cu.MemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, bytes, x->s) : 0;
    if (!r) r = x->g->cu.StreamSynchronize(x->s);
    return r ? gpu_cu_fail(x->g, r, "cuMemcpyDtoHAsync", diag) : 0;
}

static int mem_to_device(void *arg, void *dst, const void *src, size_t bytes, util_diag *diag)
{
    gpu_exec *x = arg;
    /* waits: the caller's host buffer may go once this returns */
    CUresult r = bytes ? x->g->cu.MemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, bytes, x->s) : 0;
    if (!r) r = x->g->cu.StreamSynchronize(x->s);
    return r ? gpu_cu_fail(x->g, r, "cuMemcpyHtoDAsync", diag) : 0;
}

static int mem_scratch(void *arg, size_t bytes, void **dev, util_diag *diag)
{
    gpu_exec *x = arg;
    CUdeviceptr d = 0;
    util_diag *keep = x->r.diag;
    x->r.diag = diag;
    int rc = gpu_run_get(&x->r, bytes, &d, 1);
    x->r.diag = keep;
    *dev = (void *)(uintptr_t)d;
    return rc;
}

/* The hook after pass pi (status rc): the temporaries as the device holds them. */
static int exec_hook(gpu_exec *x, int pi, int rc)
{
    const plan *p = x->p;
    core_buf view_stack[16];
    core_buf *view = p->ntemps <= 16 ? view_stack : calloc((size_t)p->ntemps, sizeof *view);
    if (!view) rc = util_diag_set(x->diag, RED_ERR_NOMEM, "out of memory");   /* (still heard) */
    for (int i = 0; view && i < p->ntemps; i++) {
        view[i] = x->tdesc ? x->tdesc[i] : (core_buf){0};
        view[i].data = x->tptr ? (void *)(uintptr_t)x->tptr[i] : NULL;
    }
    core_results temps = {.t = view, .n = view ? p->ntemps : 0};
    core_devmem mem = {x, x->s, mem_to_host, mem_to_device, mem_scratch, NULL, NULL};
    if (x->run->ws) {
        /* comes back with the fault record (zero unless a rank faulted: then not clean) */
        mem.fault = (void *)(uintptr_t)(x->run->ws + RJ_WS_ERR);
        mem.ranks_fault = (void *)(uintptr_t)(x->run->ws + RJ_WS_RFAULT);
        x->run->ranks_fault_used = 1;
        if (x->ws_used < RJ_WS_RFAULT + 8) x->ws_used = RJ_WS_RFAULT + 8;
    }
    const core_pass_hook *h = x->hook;
    /* (`ended` follows checks of a pass's results, which the GPU makes at the run's end) */
    rc = h->walked(h->arg, p, pi, rc, &x->vars, &temps, &mem, x->diag);
    if (view != view_stack) free(view);
    return rc;
}

static int execute(gpu_dev *g, const plan *p, const core_buf *bufs, const int *on_device, const plan_value *scalars,
                   int strategy, const core_pass_hook *hook, gpu_run *run, core_results *out, util_diag *diag,
                   int retry)
{
    pthread_mutex_lock(&g->lock);
    CUresult cr0 = g->cu.CtxSetCurrent(g->ctx);
    if (cr0) {
        int rc = gpu_cu_fail(g, cr0, "cuCtxSetCurrent", diag);
        pthread_mutex_unlock(&g->lock);
        return core_hook_failed_early(hook, p, rc, 0, diag);
    }
    CUstream s = (CUstream)run->stream;
    run->p = p;
    run->pending = 0;
    /* the caller's arrays serve fault messages until the run returns; a run
     * left pending gets a copy at the end */
    run->bufs = (core_buf *)bufs;
    run->bufs_owned = 0;
    union {
        max_align_t align;
        unsigned char bytes[GPU_SCRATCH];
    } scratch_stack;
    long long params_stack[256];
    gpu_staged staged[64];
    gpu_exec x = {.g = g, .p = p, .bufs = bufs, .on_device = on_device, .scalars = scalars, .strategy = strategy,
                  .hook = hook, .run = run, .out = out, .diag = diag, .retry = retry, .s = s,
                  .r = {.g = g, .p = p, .diag = diag, .s = s, .run = run, .bufs = bufs},
                  .scratch_stack = scratch_stack.bytes, .params_stack = params_stack,
                  .nparams_stack = (int)(sizeof params_stack / sizeof params_stack[0]), .staged = staged};
    int rc = exec_setup(&x);
    if (!rc) rc = exec_uploads(&x);
    if (run->ev[1] && g->cu.EventRecord(run->ev[1], s)) run->timing_failed = 1;
    if (rc) rc = core_hook_failed_early(hook, p, rc, 0, diag);   /* failed before the first pass */
    for (int pi = 0; !rc && pi < p->npasses; pi++) {
        rc = gpu_exec_pass(&x, pi);
        if (hook) rc = exec_hook(&x, pi, rc);
    }

    if (run->ev[2] && g->cu.EventRecord(run->ev[2], s)) run->timing_failed = 1;
    run->compile_ms = g->stats.compile_ms - x.nvrtc_before;
    if (!rc) rc = exec_results(&x);
    /* the fault record and the results beside it in one copy, then one sync
     * covers everything; a run with a stream whose results all stay on the
     * device is left queued (pending) instead */
    x.queued = run->stream && run->device_results != RED_RESULTS_HOST && !x.host_bound && !x.deferred.e &&
               !x.r.locked_input;
    if (!rc && !x.queued && g->pinned) {
        rc = exec_read_back(&x);
    } else if (run->ev[3] && g->cu.EventRecord(run->ev[3], s)) {
        run->timing_failed = 1;
    }
    rc = exec_end(&x, rc);
    if (x.scratch != x.scratch_stack) free(x.scratch);
    return rc;
}

int gpu_execute(gpu_dev *g, const plan *p, const core_buf *bufs, const int *on_device, const plan_value *scalars,
                int strategy, const core_pass_hook *hook, gpu_run *run, core_results *out, util_diag *diag)
{
    int rc = execute(g, p, bufs, on_device, scalars, strategy, hook, run, out, diag, 0);
    if (rc == KEYS_RETRY) {   /* (never with a hook: no key check is left to the end) */
        core_results_free(out);
        rc = execute(g, p, bufs, on_device, scalars, strategy, hook, run, out, diag, 1);
    }
    core_results_trim(out);
    return rc;
}
