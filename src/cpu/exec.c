/*
 * exec.c -- the CPU executor's driver: each pass of a plan resolved, compiled
 * to a VM program and handed to the walk that fits it; range bounds evaluated
 * on the host; index errors turned into messages.
 *
 * A pass's domain is linearised: outputs (free indices, row-major) outermost,
 * each output's reduced box (row-major) inside.  The linear range is cut into
 * fixed CHUNK-element chunks processed in parallel; within a chunk, blocks of
 * up to VM_B elements go through the VM (walk.c).  A block runs flat across
 * short rows where every load steps evenly with the position (cpu_flat_walk:
 * one index ramping past the rows' ends), else lies along one row of the
 * innermost index (RAMP: loads become contiguous or strided) or is walked
 * element by element (VEC: short rows, gathers).  Outputs wholly inside a
 * chunk are written directly; outputs crossing chunk boundaries leave partial
 * accumulators that are combined afterwards in chunk order (reduce.c, folds in
 * fold.c).  Column reductions (columns.c) and keyed ones (keyed.c) have walks
 * of their own.  Nothing depends on the number of threads, so results are
 * bit-identical.
 */
#include "exec_internal.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- index errors ----------------------------------------------------------------- */

int cpu_report_fault(const plan *p, const core_buf *bufs, const core_buf *temps, const vm_fault *f,
                     util_diag *diag)
{
    const core_buf *b = f->buf >= 0 ? &bufs[f->buf] : &temps[-1 - f->buf];
    char shape[128] = "";
    size_t k = 0;
    for (int d = 0; d < b->ndim && k < sizeof shape - 24; d++)
        k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%lld", d ? ", " : "", (long long)b->shape[d]);
    util_pos pos = f->node ? f->node->pos : (util_pos){0, 0};
    return util_diag_at(diag, p->src, pos, RED_ERR_INDEX,
                        "subscript %d of '%s' is %lld, outside 0..%lld (shape [%s])", f->dim,
                        f->buf >= 0 ? b->name : "(intermediate)", (long long)f->value,
                        (long long)b->shape[f->dim], shape);
}

/* Evaluate index-free integer IR (range bounds that depend on nothing). */
static int eval_scalar(util_arena *a, const plan *p, const core_buf *bufs, const plan_value *scalars,
                       core_buf *temps, ir *x, int64_t *out, util_diag *diag)
{
    vm_prog *prog;
    int rc = vm_compile(a, p, 1, &x, &prog);
    if (rc) return util_diag_set(diag, rc, "cannot compile a range bound");
    vm_state st;
    if (vm_state_init(&st, prog, p->nvars)) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    st.bufs = bufs;
    st.temps = temps;
    st.scalars = scalars;
    st.scalar_info = p->scalars;
    vm_prologue(&st);
    rc = vm_run(&st, 1);
    if (!rc) *out = *(int64_t *)vm_reg(&st, prog->out[0]);
    if (rc == RED_ERR_INDEX) rc = cpu_report_fault(p, bufs, temps, &st.fault, diag);
    else if (rc) rc = util_diag_set(diag, rc, "cannot evaluate a range bound");
    vm_state_free(&st);
    return rc;
}

/* ---- temporaries and range bounds ------------------------------------------------------ */

static int alloc_temp(const plan *p, int ti, const core_vars *vars, core_results *temps, util_diag *diag)
{
    size_t bytes;
    core_buf *out = &temps->t[ti];
    int rc = core_temp_shape(p, ti, vars, out, &bytes, diag);
    if (rc) return rc;
    out->data = core_results_alloc(temps, bytes, 1, NULL);
    if (!out->data) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory for a result of %zu bytes", bytes);
    return 0;
}

/* The first load in x that a bound evaluated on the host cannot read: of a
 * device array, or of a temporary where none are given. */
static const ir *unreadable_load(const ir *x, const cpu_bound_arg *b)
{
    if (x->kind == IR_LOAD && (x->slot < 0 ? !b->temps : b->on_device && b->on_device[x->slot])) return x;
    for (int i = 0; i < x->nargs; i++) {
        const ir *l = unreadable_load(x->args[i], b);
        if (l) return l;
    }
    return NULL;
}

int cpu_eval_bound(void *arg, const plan *p, ir *x, int64_t *out, util_diag *diag)
{
    const cpu_bound_arg *b = arg;
    const ir *l = unreadable_load(x, b);
    if (l)
        return util_diag_at(diag, p->src, l->pos, RED_ERR_UNSUPPORTED,
                            "a range bound that reads %s is not supported on this backend",
                            l->slot < 0 ? "an intermediate result" : "an array in device memory");
    util_arena a;
    util_arena_init(&a);
    int rc = eval_scalar(&a, p, b->bufs, b->scalars, b->temps, x, out, diag);
    util_arena_free(&a);
    return rc;
}

/* ---- one pass ----------------------------------------------------------------------------- */

/* The pass's domain: free and reduced extents resolved for this run, and,
 * where the reduced ranges differ per output, each output's range. */
static int pass_domain(pass_ctx *pc, int pi, core_bounds *bounds, core_vars *vars, util_arena *a,
                       util_diag *diag)
{
    int rc = core_resolve_pass(pc->p, pi, pc->bufs, bounds, CORE_EVAL_UNIFORM_RANGES, vars, &pc->dom, diag);
    if (rc) return rc;
    pc->tiled = plan_scan_ranged(pc->p, pc->ps);
    pc->tile_len = pc->tiled ? vars->hi[pc->ps->red[0]] : 0;
    if (pc->dom.ranged) rc = cpu_eval_ranges(pc, a, diag);
    if (!pc->ps->nreds) {
        pc->dom.L = 1;
        pc->dom.N = pc->dom.nout;
    }
    return rc;
}

/* The pass's program: every reduction's map components, then the key; and
 * the combine program of each user operator. */
static int pass_program(pass_ctx *pc, int pi, util_arena *a, util_diag *diag)
{
    const plan *p = pc->p;
    const plan_pass *ps = pc->ps;
    ir *roots[PLAN_MAX_COMP * 4];
    int nroots = 0;
    if (ps->nreds > 60) return util_diag_set(diag, RED_ERR_LIMIT, "too many reductions in one pass");
    if (!ps->nreds) {
        roots[nroots++] = ps->map;
    } else {
        for (int q = 0; q < ps->nreds; q++) {
            pc->root_of[q] = nroots;
            for (int c = 0; c < ps->reds[q].ncomp; c++) {
                if (nroots >= (int)(sizeof roots / sizeof roots[0]) - 1)
                    return util_diag_set(diag, RED_ERR_LIMIT, "too many reductions in one pass");
                roots[nroots++] = ps->reds[q].map[c];
            }
        }
        if (ps->key || ps->reset) {
            pc->key_root = nroots;
            roots[nroots++] = ps->key ? ps->key : ps->reset;
        }
    }
    int rc = vm_compile(a, p, nroots, roots, &pc->prog);
    if (rc) return util_diag_set(diag, rc, "cannot compile pass %d", pi);
    pc->nreds = ps->nreds;
    pc->reds = ps->reds;
    pc->comb = util_arena_alloc(a, (size_t)(ps->nreds + 1) * sizeof *pc->comb);
    if (!pc->comb) rc = RED_ERR_NOMEM;
    for (int q = 0; !rc && q < ps->nreds; q++)
        if (ps->reds[q].rop == ROP_USER) rc = vm_compile(a, p, ps->reds[q].ncomp, ps->reds[q].combine, &pc->comb[q]);
    if (rc) return util_diag_set(diag, rc, "cannot compile a user operator");
    return 0;
}

/* The temporaries this pass writes. */
static int pass_temps(const pass_ctx *pc, const core_vars *vars, core_results *out, util_diag *diag)
{
    const plan_pass *ps = pc->ps;
    if (!ps->nreds) return alloc_temp(pc->p, ps->map_temp, vars, out, diag);
    int rc = 0;
    for (int q = 0; !rc && q < ps->nreds; q++)
        for (int c = 0; !rc && c < ps->reds[q].ncomp; c++) rc = alloc_temp(pc->p, ps->reds[q].temp[c], vars, out, diag);
    return rc;
}

/* The walk that fits the pass. */
static int pass_walk(pass_ctx *pc, util_diag *diag)
{
    const plan_pass *ps = pc->ps;
    int rc;
    if (!ps->nreds) {
        rc = cpu_run_map(pc, diag);
    } else if (ps->scan) {
        rc = cpu_run_scan(pc, diag);
    } else if (ps->key) {
        /* the key pass walks its reduced domain as one output */
        int64_t nk = pc->nkeys;
        pc->dom.nout = 1;
        rc = cpu_run_keyed(pc, diag);
        pc->dom.nout = nk;
    } else {
        int done = 0;   /* a matrix product, blocked (gemm.c) */
        rc = cpu_try_gemm(pc, diag, &done);
        if (!rc && !done && cpu_column_layout(pc)) {
            rc = cpu_run_columns(pc, diag);
            if (rc == RED_ERR_INDEX) rc = cpu_run_reduction(pc, diag);
        } else if (!rc && !done) {
            rc = cpu_run_reduction(pc, diag);
        }
    }
    return rc;
}

/* Whether element i of temporary t (C order) lies below a free index's start:
 * padding that no output of the pass writes (a nested ranged result is
 * stored from index 0 up). */
static int below_free_lo(const pass_ctx *pc, const core_buf *t, int64_t i)
{
    if (t->ndim != pc->dom.nf) return 0;   /* keyed: one dimension of keys, from 0 */
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t ext = t->shape[d];
        if (ext && i % ext < pc->dom.flo[d]) return 1;
        i = ext ? i / ext : 0;
    }
    return 0;
}

/* argmin/argmax over nothing */
static int check_args_found(const pass_ctx *pc, const core_results *out, util_diag *diag)
{
    const plan_pass *ps = pc->ps;
    for (int q = 0; q < ps->nreds; q++) {
        const plan_red *rd = &ps->reds[q];
        if (rd->rop != ROP_ARGMIN && rd->rop != ROP_ARGMAX) continue;
        const core_buf *t = &out->t[rd->temp[0]];
        int64_t n = 1;
        for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
        for (int64_t i = 0; i < n; i++)
            if (((const int64_t *)t->data)[i] < 0) {
                if (below_free_lo(pc, t, i)) continue;
                return util_diag_at(diag, pc->p->src, rd->pos, RED_ERR_EMPTY,
                                    "%s of an empty set%s: there is no index to return", plan_red_name(rd),
                                    rd->skipnan ? " (or of NaN only)" : "");
            }
    }
    return 0;
}

/* Pass pi's context in pc, up to its walk: domain, program, keys, temporaries. */
static int pass_setup(pass_ctx *pc, int pi, core_bounds *bounds, core_vars *vars, util_arena *a, core_results *out,
                      const core_pass_hook *hook, util_diag *diag)
{
    const plan *p = pc->p;
    const plan_pass *ps = &p->passes[pi];
    pc->ps = ps;
    pc->key_root = -1;
    int rc = 0;
    if (core_cancelled(pc->cancel)) rc = util_diag_set(diag, RED_ERR_INTERRUPTED, "interrupted");
    if (!rc) rc = pass_domain(pc, pi, bounds, vars, a, diag);
    if (!rc) rc = pass_program(pc, pi, a, diag);
    if (ps->key) {
        if (!rc) rc = cpu_scan_keys(pc, diag);
        if (hook && hook->keys)
            rc = hook->keys(hook->arg, p, pi, rc, &pc->nkeys, !rc && pc->dom.N > 0 ? pc->key_span : NULL, diag);
        if (rc) return rc;
        core_set_key_count(p, pi, vars, pc->nkeys);
        pc->dom.nout = pc->nkeys;
    }
    if (!rc) rc = pass_temps(pc, vars, out, diag);
    return rc;
}

/* After a pass's walk: an interrupted pass skipped chunks, so its outputs mean
 * nothing (an argmax would look empty) and the interrupt is the answer. */
static int pass_end(const pass_ctx *pc, int rc, const core_results *out, util_diag *diag)
{
    if (!rc && core_cancelled(pc->cancel)) rc = util_diag_set(diag, RED_ERR_INTERRUPTED, "interrupted");
    if (!rc) rc = check_args_found(pc, out, diag);
    if (!rc && core_cancelled(pc->cancel)) rc = util_diag_set(diag, RED_ERR_INTERRUPTED, "interrupted");
    return rc;
}

/* Run pass pi, its context in pc (set up here); `hook` may be NULL. */
static int run_pass(pass_ctx *pc, int pi, core_bounds *bounds, core_vars *vars, util_arena *a, core_results *out,
                    const core_pass_hook *hook, util_diag *diag)
{
    int rc = pass_setup(pc, pi, bounds, vars, a, out, hook, diag);
    if (!rc) rc = pass_walk(pc, diag);
    if (hook) rc = hook->walked(hook->arg, pc->p, pi, rc, vars, out, NULL, diag);
    rc = pass_end(pc, rc, out, diag);
    if (hook) rc = hook->ended(hook->arg, pc->p, pi, rc, diag);
    return rc;
}

/* Elements of a reduction pass's rows that a block of rows holds, about: reduced and
 * then mapped while they are in a core's cache (run_with_epilogue). */
#define EPI_BLOCK ((int64_t)1 << 18)

/* `d` cut to rows r0 .. r1 - 1 of its outermost free index (whole: `base`). */
static void cut_rows(core_domain *d, const core_domain *base, int64_t r0, int64_t r1)
{
    *d = *base;
    d->flo[0] = base->flo[0] + r0;
    d->fext[0] = r1 - r0;
    d->nout = base->nout / base->fext[0] * (r1 - r0);
    d->N = d->nout * d->L;
}

/* Pass pi, a reduction, and pass pi + 1, the map that is its epilogue
 * (plan_pass.epilogue), walked block of rows by block of rows: each block's
 * rows are reduced, then mapped while still in cache, as the GPU runs the map
 * per row inside the reduction's kernel.  The contexts are set up here. */
static int run_with_epilogue(pass_ctx *pc, pass_ctx *qc, int pi, core_bounds *bounds, core_vars *vars, util_arena *a,
                             core_results *out, util_diag *diag)
{
    int rc = pass_setup(pc, pi, bounds, vars, a, out, NULL, diag);
    if (!rc) rc = pass_setup(qc, pi + 1, bounds, vars, a, out, NULL, diag);
    if (rc) return rc;
    core_domain dp = pc->dom, dq = qc->dom;
    int64_t rows = dp.fext[0], row = dp.N / (rows > 0 ? rows : 1);
    /* blocks that start where the reduction's CHUNKs do unfused, so that every partial,
     * and every bit of the result, is the same: EPI_BLOCK elements (a multiple of CHUNK) of
     * rows that divide it, or one row of whole CHUNKs; else (and for empty rows) one block
     * of all the rows, the two passes one after the other */
    int64_t per = row <= 0 ? rows : row <= EPI_BLOCK ? (EPI_BLOCK % row ? rows : EPI_BLOCK / row)
                                                     : (row % CHUNK ? rows : 1);
    for (int64_t r0 = 0; !rc && r0 < rows; r0 += per) {
        int64_t r1 = rows - r0 > per ? r0 + per : rows;
        cut_rows(&pc->dom, &dp, r0, r1);
        cut_rows(&qc->dom, &dq, r0, r1);
        qc->dom.N = qc->dom.nout;   /* a map: one element an output */
        rc = pass_walk(pc, diag);
        if (!rc && core_cancelled(pc->cancel)) break;
        if (!rc) rc = pass_walk(qc, diag);
    }
    pc->dom = dp;
    qc->dom = dq;
    rc = pass_end(pc, rc, out, diag);
    return pass_end(qc, rc, out, diag);
}

/* Does pass pi + 1 run as pass pi's epilogue here (whole rows of a partial
 * reduction over uniform ranges, read in row order)?  Not after argmin or
 * argmax, whose empty rows are an error found once the pass is walked: a map
 * reading their -1 first would report an index fault instead. */
static int epilogue_pair(const plan *p, int pi)
{
    if (pi + 1 >= p->npasses || !p->passes[pi + 1].epilogue) return 0;
    const plan_pass *ps = &p->passes[pi];
    if (ps->key || !ps->nreds || !ps->nfree) return 0;
    for (int d = 0; d < ps->nred; d++)
        if (p->vars[ps->red[d]].lo) return 0;
    for (int q = 0; q < ps->nreds; q++)
        if (ps->reds[q].rop == ROP_ARGMIN || ps->reds[q].rop == ROP_ARGMAX) return 0;
    return 1;
}

/* ---- the driver --------------------------------------------------------------------------- */

/* A pass's per-output ranges, kept for the next run (freed where its store is full). */
static void ctx_free(pass_ctx *c)
{
    core_scratch_put(c->scratch_out, c->olo, c->range_bytes);
    core_scratch_put(c->scratch_out, c->osz, c->range_bytes);
    core_scratch_put(c->scratch_out, c->offs, c->offs_bytes);
    c->olo = c->osz = c->offs = NULL;
}

int cpu_execute(const plan *p, const core_buf *bufs, const plan_value *scalars, int nthreads,
                const core_cancel *cancel, core_results *out, util_diag *diag)
{
    return cpu_execute_hooked(p, bufs, scalars, nthreads, cancel, NULL, out, diag);
}

int cpu_execute_hooked(const plan *p, const core_buf *bufs, const plan_value *scalars, int nthreads,
                       const core_cancel *cancel, const core_pass_hook *hook, core_results *out,
                       util_diag *diag)
{
    out->n = p->ntemps;
    out->t = calloc((size_t)p->ntemps + 1, sizeof *out->t);
    int64_t *vlo = calloc((size_t)p->nvars + 1, sizeof *vlo), *vhi = calloc((size_t)p->nvars + 1, sizeof *vhi);
    int *done = calloc((size_t)p->nvars + 1, sizeof *done);
    util_arena a;
    util_arena_init(&a);
    int rc = 0;
    if (!out->t || !vlo || !vhi || !done) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    if (nthreads <= 0) nthreads = omp_get_max_threads();
    core_vars vars = {vlo, vhi, done};
    cpu_bound_arg barg = {bufs, scalars, out->t, NULL};
    core_bounds bounds = {cpu_eval_bound, &barg};

    /* a pass's per-output ranges (olo, osz, offs) are let go before the next
     * pass and after the last, whatever way it ends: kept for the next run,
     * which takes back those of its sizes (the run before's, in prev; the
     * ones it does not take are freed at its end) */
    core_scratch prev = out->scratch;
    memset(&out->scratch, 0, sizeof out->scratch);
    pass_ctx pc, qc;   /* (qc: an epilogue's map) */
    memset(&pc, 0, sizeof pc);
    memset(&qc, 0, sizeof qc);
    if (rc) rc = core_hook_failed_early(hook, p, rc, 1, diag);
    for (int pi = 0; !rc && pi < p->npasses; pi++) {
        pass_ctx base = {.p = p, .bufs = bufs, .scalars = scalars, .temps = out->t, .nthreads = nthreads,
                         .cancel = cancel, .scratch_in = &prev, .scratch_out = &out->scratch};
        ctx_free(&pc);
        ctx_free(&qc);
        pc = qc = base;
        if (!hook && epilogue_pair(p, pi)) {
            rc = run_with_epilogue(&pc, &qc, pi, &bounds, &vars, &a, out, diag);
            pi++;
        } else {
            rc = run_pass(&pc, pi, &bounds, &vars, &a, out, hook, diag);
        }
    }
    ctx_free(&pc);
    ctx_free(&qc);
    core_scratch_free(&prev);
    util_arena_free(&a);
    free(vlo);
    free(vhi);
    free(done);
    if (rc) core_results_free(out);
    core_results_trim(out);
    return rc;
}
