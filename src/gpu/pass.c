/*
 * pass.c -- one pass of a run (gpu_exec_pass, called by run.c for each pass of the plan):
 * its parameter block and ranges, its keys, the temporaries it writes, and the kernels of
 * its kind (map, keyed, full, segments).
 */
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"
#include "tuning.h"

/* A pass in progress. */
typedef struct gpu_pass {
    int pi;
    const plan_pass *ps;
    pass_entry *e;
    long long nout, L1;
    int ranged;
    /* the one domain of a full or keyed reduction */
    long long N1;
    int key_mode;            /* KEYS_* */
    size_t ws_before;        /* the workspace's use before the pass's outputs */
    uint64_t kh;             /* gpu_count_key of a keyed pass's arrays (0: not kept) */
    int guessed;             /* the key count taken from the run before */
    long long nkeys;
    int sorted;
    CUdeviceptr offs;        /* the keys' segment starts, or 0 */
    int *outs, nouts;        /* the temporaries this pass writes */
    int key_defer;           /* the key check left to the run's final read */
} gpu_pass;

/* The pass's parameter block: the workspace, the arrays, the scalars. */
static int pass_params(gpu_exec *x, gpu_pass *q)
{
    const plan *p = x->p;
    const cg_layout *L = &q->e->k.lay;
    long long *params = x->params;
    if (params != x->params_stack) free(params);
    params = L->nparams <= x->nparams_stack ? x->params_stack : malloc((size_t)L->nparams * sizeof *params);
    x->params = params;
    if (!params) return util_diag_set(x->diag, RED_ERR_NOMEM, "out of memory");
    memset(params, 0, (size_t)L->nparams * sizeof *params);
    x->r.params = params;
    x->r.nparams = L->nparams;
    params[RJ_ERR] = (long long)x->r.ws;
    params[RJ_COUNTER] = (long long)(x->r.ws + RJ_WS_COUNTER);
    params[RJ_KSTATS] = (long long)(x->r.ws + RJ_WS_KSTATS);
    for (int i = 0; i < p->nbufs; i++) gpu_set_array(params, L->buf_base[i], x->in_adj[i], &x->bufs[i]);
    for (int i = 0; i < p->nscalars; i++) memcpy(&params[L->scalar_slot[i]], &x->scalars[i], 8);
    return 0;
}

/* Everything of a pass before its keys: kernels, parameters, ranges, the key mode. */
static int pass_setup(gpu_exec *x, gpu_pass *q)
{
    const plan *p = x->p;
    util_diag *diag = x->diag;
    const plan_pass *ps = q->ps;
    int pi = q->pi;
    if (core_cancelled(x->run->cancel)) return util_diag_set(diag, RED_ERR_INTERRUPTED, "interrupted");
    int rc = gpu_pass_kernels(x->g, p, pi, &q->e, diag);
    if (!rc) rc = pass_params(x, q);
    if (rc) return rc;
    pass_entry *e = q->e;
    const cg_layout *L = &e->k.lay;
    long long *params = x->params;

    /* the pass's ranges (explicit reduced ones are evaluated per
     * output in the kernel) */
    core_domain dom;
    rc = core_resolve_pass(p, pi, x->bufs, &x->run->bounds, 0, &x->vars, &dom, diag);
    if (rc) return rc;
    q->nout = dom.nout;
    q->L1 = dom.L;
    q->ranged = dom.ranged;
    for (int v = 0; v < p->nvars; v++) {
        params[L->var_lo[v]] = x->vlo[v];
        params[L->var_sz[v]] = x->vhi[v] - x->vlo[v];
    }
    for (int i = 0; i < p->ntemps; i++)
        if (x->tptr[i]) gpu_set_array(params, L->temp_base[i], x->tptr[i], &x->tdesc[i]);

    /* keys: the fused pass unless a strategy is forced (those run over
     * the segment starts); the scan when the fused pass found the keys
     * not sorted, which comes back here with the pass's outputs freed */
    q->key_mode = (x->strategy == RED_STRATEGY_AUTO || x->strategy == RED_STRATEGY_SEGMENTED) && e->k.acc_size <= 32
                      ? KEYS_FUSED
                      : KEYS_OFFSETS;
    /* with a hook the keys are counted before anything else runs (KEYS_SCAN finds a sorted
     * block's first and last key too), once */
    if (x->hook && q->key_mode == KEYS_FUSED) q->key_mode = KEYS_SCAN;
    /* the second run after KEYS_RETRY: the last pass's keys are not
     * sorted, or their count was not the one taken from the run before */
    if (x->retry && pi == p->npasses - 1 && q->key_mode == KEYS_FUSED) q->key_mode = KEYS_SCAN;
    q->ws_before = x->ws_used;
    /* the one domain of a full or keyed reduction: over a ranged index
     * (`over i in 1..n`, `... by k[i]`) its size comes from bounds only
     * the device can read */
    q->N1 = q->L1;
    if (ps->nreds && (ps->key || ps->nfree == 0) && q->ranged) {
        rc = gpu_count_on_device(&x->r, e, 1, 1, &q->N1);
        if (!rc && q->N1 > ((long long)1 << 40))
            rc = util_diag_set(diag, RED_ERR_LIMIT, "reduction domain too large: %lld elements (at most 2^40)", q->N1);
    }
    return rc;
}

/* A keyed pass's keys: their count, whether sorted, their segment starts. */
static int pass_keys(gpu_exec *x, gpu_pass *q)
{
    const plan_pass *ps = q->ps;
    pass_entry *e = q->e;
    long long *params = x->params;
    int rc = 0;
    q->nkeys = 0;
    q->sorted = 1;
    q->offs = 0;
    if (!ps->key) return 0;
    long long ends[2] = {0, 0};
    long long N = q->N1;
    params[RJ_N] = N;
    params[RJ_KEYMODE] = 0;
    /* the last pass of a run read back at its end may take the key
     * count the same arrays gave last time: rj_kfused checks it
     * (the first key not negative, the last one nkeys - 1), and a
     * wrong one reruns the plan (KEYS_RETRY), after which this
     * pass asks again each time */
    q->kh = q->key_mode != KEYS_OFFSETS && N > 0 ? gpu_count_key(&x->r, e, N) : 0;
    /* the same arrays had unsorted keys last time: scan them first */
    if (q->kh && q->key_mode == KEYS_FUSED && e->unsorted_key == q->kh) q->key_mode = KEYS_SCAN;
    q->guessed = q->kh && q->key_mode == KEYS_FUSED && !x->retry && x->ends_synced && q->pi == x->p->npasses - 1 &&
                 !e->nkeys_nospec && e->nkeys_key == q->kh;
    if (q->guessed) {
        q->nkeys = e->nkeys;
    } else if (N > 0) {
        rc = gpu_key_segments(&x->r, e, ps, N, q->key_mode, &q->nkeys, &q->sorted, &q->offs, ends, &x->flag_dirty);
        if (!rc && q->kh) e->unsorted_key = q->sorted ? 0 : q->kh;
    }
    if (x->hook && x->hook->keys) {
        /* the count every rank's rows are sized for; rows no element of this block reaches
         * (past its last key, or all of them) get the identity from the private rows */
        int64_t mine = q->nkeys, all = mine, span[2] = {ends[0], ends[1]};
        rc = x->hook->keys(x->hook->arg, x->p, q->pi, rc, &all, !rc && N > 0 ? span : NULL, x->diag);
        q->nkeys = all;
        if (!rc && (all != mine || N == 0)) {
            q->offs = 0;
            q->sorted = 0;
        }
    }
    if (rc) return rc;
    core_set_key_count(x->p, q->pi, &x->vars, q->nkeys);
    params[e->k.lay.var_lo[ps->key_var]] = 0;
    params[e->k.lay.var_sz[ps->key_var]] = q->nkeys;
    q->nout = q->nkeys;
    return 0;
}

/* The temporaries this pass writes: small results bound for the host in the workspace,
 * the rest from the pool; then whether the pass's last kernel publishes the workspace. */
static int pass_temps(gpu_exec *x, gpu_pass *q)
{
    const plan *p = x->p;
    const plan_pass *ps = q->ps;
    gpu_run *run = x->run;
    int rc = 0;
    q->nouts = 0;
    if (!ps->nreds) q->outs[q->nouts++] = ps->map_temp;
    for (int k = 0; k < ps->nreds; k++)
        for (int c = 0; c < ps->reds[k].ncomp; c++) q->outs[q->nouts++] = ps->reds[k].temp[c];
    /* the next pass's result too where it may run inside this pass (rj_epilogue) */
    if (q->e->k.epi) q->outs[q->nouts++] = p->passes[q->pi + 1].map_temp;
    for (int k = 0; !rc && k < q->nouts; k++) {
        int t = q->outs[k];
        size_t bytes;
        if (x->tptr[t]) continue;   /* given by the pass before (its epilogue's result) */
        rc = core_temp_shape(p, t, &x->vars, &x->tdesc[t], &bytes, x->diag);
        if (rc) break;
        size_t at = (x->ws_used > RJ_WS_HEAD ? x->ws_used + 15 : RJ_WS_HEAD) & ~(size_t)15;
        if (x->to_host[t] && x->g->pinned && bytes > 0 && at + bytes <= RJ_WS_BYTES) {
            /* bound for the host and small: beside the fault record */
            x->tptr[t] = x->r.ws + at;
            x->ws_off[t] = (int)at;
            x->ws_used = at + bytes;
            continue;
        }
        /* not cleared: every strategy's kernels write every output
         * element, the identity where a domain is empty */
        rc = gpu_run_get(&x->r, bytes, &x->tptr[t], 0);
    }
    if (rc) return rc;
    const cg_layout *L = &q->e->k.lay;
    for (int i = 0; i < p->ntemps; i++)
        if (x->tptr[i]) gpu_set_array(x->params, L->temp_base[i], x->tptr[i], &x->tdesc[i]);

    /* the last pass of a run that ends by reading its workspace back,
     * with every result for the host in it, and no timing event to
     * record after the copy: its last kernel can publish instead.  A
     * sorted keyed last pass whose key check is read at the run's end
     * (key_fused's deferred flag) waits even when its results stay on
     * the device of a stream, and its read takes the key statistics
     * (64 + 24 bytes) */
    int last = q->pi == p->npasses - 1;
    /* or the pass before a last map of one element that runs inside it
     * (a full reduction's epilogue, gpu_run_full) */
    if (q->pi + 1 == p->npasses - 1 && ps->nreds && ps->nfree == 0 && q->e->k.epi == 1 && gpu_tuning_get()->epi)
        last = 1;
    q->key_defer = ps->key && ps->nreds && q->sorted && !q->offs && !x->retry && x->ends_synced && last && !x->hook;
    if (q->key_defer && x->ws_used < RJ_WS_KSTATS + RJ_WS_KSTATS_BYTES) x->ws_used = RJ_WS_KSTATS + RJ_WS_KSTATS_BYTES;
    x->r.pub_words = 0;
    if (last && x->g->pub && !run->ev[3] && !x->hook &&
        (q->key_defer || !(run->stream && run->device_results != RED_RESULTS_HOST && !x->host_bound))) {
        int all_ws = 1;
        for (int i = 0; i < p->nresults; i++)
            if (x->to_host[p->results[i].temp] && !x->ws_off[p->results[i].temp]) all_ws = 0;
        if (all_ws) x->r.pub_words = (long long)(x->ws_used + 7) / 8;
    }
    return 0;
}

/* Sorted keys without segment starts: rj_kfused.  *again when they were not sorted after
 * all: the pass's outputs are given back and the keys are to be scanned. */
static int pass_fused(gpu_exec *x, gpu_pass *q, int *again)
{
    pass_entry *e = q->e;
    int bad = 0, defer = q->key_defer;
    int rc = gpu_key_fused(&x->r, e, q->N1, q->nkeys, x->flag_dirty, defer ? NULL : &bad);
    x->flag_dirty = defer || bad;   /* deferred: known at the end */
    if (!rc && defer) {
        /* the key statistics come back with the results */
        x->deferred.e = e;
        x->deferred.kh = q->kh;
        x->deferred.nkeys = q->nkeys;
        x->deferred.guessed = q->guessed;
    } else if (!rc && q->kh && !bad) {   /* a count rj_kfused confirmed */
        e->nkeys_key = q->kh;
        e->nkeys = q->nkeys;
    }
    if (!rc && bad && q->key_mode == KEYS_SCAN) {
        /* the scan found them sorted, and rj_kfused did not */
        rc = util_diag_set(x->diag, RED_ERR_INTERNAL, "key statistics disagree");
    } else if (!rc && bad) {
        /* not sorted after all (or a key past the last one): the
         * outputs, sized by the last key, go back, and the keys
         * are scanned */
        for (int k = 0; k < q->nouts; k++) {
            int t = q->outs[k];
            if (x->tptr[t] && !x->ws_off[t]) gpu_pool_put(x->g, x->tptr[t]);
            x->tptr[t] = 0;
            x->ws_off[t] = 0;
        }
        x->ws_used = q->ws_before;
        q->key_mode = KEYS_SCAN;
        *again = 1;
    }
    return rc;
}

/* A keyed pass's kernels, by what its keys turned out to be. */
static int pass_keyed(gpu_exec *x, gpu_pass *q, int *again)
{
    gpu_dev *g = x->g;
    pass_entry *e = q->e;
    long long *params = x->params;
    long long N = q->N1, nkeys = q->nkeys;
    params[RJ_N] = N;
    if (nkeys == 0) return 0;   /* nothing to reduce: the result is empty */
    if (q->sorted && !q->offs) return pass_fused(x, q, again);
    if (q->sorted) {
        /* key_segments wrote the segment starts */
        params[RJ_OFFS] = (long long)q->offs;
        params[RJ_NOUT] = nkeys;
        params[RJ_KEYMODE] = 1;
        return gpu_run_segments(&x->r, e, nkeys, N, x->strategy);
    }
    /* private rows per partition, combined in partition order */
    long long asz = e->k.acc_size, np = 4 * g->nsm;
    while (np > 1 && (double)np * nkeys * asz > 512.0 * 1024 * 1024) np /= 2;
    if (np > N) np = N > 0 ? N : 1;
    CUdeviceptr rows;
    int rc = gpu_pool_get(g, (size_t)(np * nkeys * asz), &rows, x->diag);
    if (!rc) {
        gpu_defer_release(&x->r, rows);
        params[RJ_PARTIALS] = (long long)rows;
        params[RJ_NBLK] = np;
        params[RJ_PER] = cdiv(N, np);
        params[RJ_NOUT] = nkeys;
        params[RJ_KEYMODE] = 0;
        rc = gpu_launch(&x->r, e, GPU_E_KPRIV, cdiv(np, BLOCK));
        if (!rc) rc = gpu_launch(&x->r, e, GPU_E_KCOMB, cdiv(nkeys, BLOCK));
    }
    return rc;
}

/* The pass's kernels, by its kind. */
static int pass_dispatch(gpu_exec *x, gpu_pass *q, int *again)
{
    const plan_pass *ps = q->ps;
    pass_entry *e = q->e;
    if (!ps->nreds) {
        x->params[RJ_NOUT] = q->nout;
        long long grid = cdiv(q->nout, BLOCK);
        if (grid > (long long)x->g->nsm * 32) grid = (long long)x->g->nsm * 32;
        return q->nout > 0 ? gpu_launch(&x->r, e, GPU_E_MAP, grid) : 0;
    }
    if (ps->scan) return gpu_run_scan(&x->r, e, q->nout, q->L1, x->strategy);
    if (ps->key) return pass_keyed(x, q, again);
    long long total = q->ranged ? -1 : q->nout * q->L1;
    int rc = ps->nfree == 0 ? gpu_run_full(&x->r, e, q->N1, x->strategy, e->k.ordered)
                            : gpu_run_segments(&x->r, e, q->nout, total, x->strategy);
    if (!rc && x->r.epi_done) x->epi_pass = q->pi + 1;
    return rc;
}

int gpu_exec_pass(gpu_exec *x, int pi)
{
    if (pi > 0 && pi == x->epi_pass) return 0;   /* it ran inside pass pi - 1 */
    int outs[PLAN_MAX_COMP * 64];
    gpu_pass q = {.pi = pi, .ps = &x->p->passes[pi], .outs = outs};
    int rc = pass_setup(x, &q);
    if (rc && q.ps->key && x->hook && x->hook->keys) {
        /* the hook hears it where the others count their keys */
        int64_t none = 0;
        return x->hook->keys(x->hook->arg, x->p, pi, rc, &none, NULL, x->diag);
    }
    /* keys, temporaries, kernels; again (with the pass's outputs given back) when the fused
     * pass found the keys not sorted, which then scans them */
    for (int again = 1; !rc && again;) {
        again = 0;
        rc = pass_keys(x, &q);
        if (!rc) rc = pass_temps(x, &q);
        if (!rc) rc = pass_dispatch(x, &q, &again);
    }
    return rc;
}
