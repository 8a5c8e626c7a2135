/*
 * reduce.c -- a regular reduction pass: fixed chunks of the linear domain in
 * parallel, outputs wholly inside a chunk written as they end, the partials
 * of outputs crossing chunk boundaries combined afterwards in chunk order.
 */
#include "exec_internal.h"

#include <math.h>
#include <stdlib.h>

/* ---- reduction passes ------------------------------------------------------------------- */

typedef struct partial {
    int64_t o;          /* -1: none */
    cacc *acc;          /* nreds */
} partial;


/* Output o's accumulators are complete as far as the chunk starting at cs
 * goes: write them, or keep them as the chunk's head partial if o began
 * before it. */
static void finish_output(const pass_ctx *pc, const tstate *ts, int64_t cs, int64_t o, partial *head)
{
    if (out_start(pc, o) < cs) {
        head->o = o;
        memcpy(head->acc, ts->cur, pc->nreds * sizeof *ts->cur);
    } else {
        const core_buf *t0 = &pc->temps[pc->reds[0].temp[0]];
        int64_t off = out_offset(pc, t0, o);
        for (int q = 0; q < pc->nreds; q++) acc_write(pc, &pc->reds[q], &ts->cur[q], off);
    }
}

/* Whether every reduction of the pass folds with a built-in operator: an
 * output whose elements all lie in one run is then that run's fold, written
 * as it comes (run_chunk). */
static int plain_folds(const pass_ctx *pc)
{
    for (int q = 0; q < pc->nreds; q++)
        if (pc->reds[q].rop == ROP_USER) return 0;
    return pc->nreds > 0;
}

/* Short runs folded in the loop that writes them, for the commonest folds;
 * the same order as cpu_fold_values for fewer than LANES values, so the same
 * bits.  T: the values' type; ACC, init, OPX as in FOLD_SUM (integer sums
 * wrap in uint64_t); NANS: min/max of floats, where a NaN wins (as in
 * DEF_EXTREME_F). */
#define WHOLE_SHORT(T, ACC, init, OPX, NANS)                                     \
    do {                                                                       \
        const T *x = (const T *)v;                                             \
        for (int k = 0; k < nr; k++) {                                         \
            const T *y = x + runs[k].start;                                    \
            int n = runs[k].len;                                               \
            if (n >= LANES) {                                                  \
                core_write_ct(dst, ct, out_offset(pc, t0, runs[k].o), cpu_fold_values(rd->rop, ct, y, n)); \
                continue;                                                      \
            }                                                                  \
            ACC a = init;                                                      \
            int nan = 0;                                                       \
            for (int j = 0; j < n; j++) {                                      \
                a = OPX(a, (ACC)y[j]);                                         \
                if (NANS) nan |= y[j] != y[j];                                 \
            }                                                                  \
            ((T *)dst)[out_offset(pc, t0, runs[k].o)] = NANS && nan ? (T)NAN : (T)a; \
        }                                                                      \
    } while (0)
#define GTF(a, b) ((b) > (a) ? (b) : (a))
#define LTF(a, b) ((b) < (a) ? (b) : (a))

/* Write the folds of nr runs that are each a whole output (a plain pass). */
static void write_whole(const pass_ctx *pc, const tstate *ts, const run *runs, int nr)
{
    const core_buf *t0 = &pc->temps[pc->reds[0].temp[0]];
    for (int q = 0; q < pc->nreds; q++) {
        const plan_red *rd = &pc->reds[q];
        int ct = rd->acc[0];
        const unsigned char *v = vm_reg(&ts->st, ts->st.prog->out[pc->root_of[q]]);
        void *dst = (void *)pc->temps[rd->temp[0]].data;
        if (rd->rop == ROP_SUM && ct == CT_F32) WHOLE_SHORT(float, float, 0.0f, ADDF, 0);
        else if (rd->rop == ROP_SUM && ct == CT_F64) WHOLE_SHORT(double, double, 0.0, ADDF, 0);
        else if (rd->rop == ROP_SUM && ct == CT_I64) WHOLE_SHORT(int64_t, uint64_t, 0, ADDU, 0);
        else if (rd->rop == ROP_SUM && ct == CT_U64) WHOLE_SHORT(uint64_t, uint64_t, 0, ADDU, 0);
        else if (rd->rop == ROP_MAX && ct == CT_F32) WHOLE_SHORT(float, float, -INFINITY, GTF, 1);
        else if (rd->rop == ROP_MIN && ct == CT_F32) WHOLE_SHORT(float, float, INFINITY, LTF, 1);
        else if (rd->rop == ROP_MAX && ct == CT_F64) WHOLE_SHORT(double, double, -INFINITY, GTF, 1);
        else if (rd->rop == ROP_MIN && ct == CT_F64) WHOLE_SHORT(double, double, INFINITY, LTF, 1);
        else {
            size_t sz = plan_ct_size(ct);
            for (int k = 0; k < nr; k++) {
                const unsigned char *y = v + (size_t)runs[k].start * sz;
                int64_t off = out_offset(pc, t0, runs[k].o);
                if (rd->rop == ROP_ARGMIN || rd->rop == ROP_ARGMAX) {
                    cacc a;
                    a.has = 0;   /* cpu_fold_arg sets the rest, unless nothing but NaN is skipped */
                    cpu_fold_arg(rd->rop, rd->skipnan, ct, y, runs[k].len, arg_index(pc, runs[k].o, 0), &a);
                    ((int64_t *)dst)[off] = a.has ? a.idx : -1;   /* nanargmin of NaN only: none */
                } else {
                    core_write_ct(dst, ct, off, cpu_fold_values(rd->rop, ct, y, runs[k].len));
                }
            }
        }
    }
}

/* Process chunk [cs, ce): write complete outputs, return partials. */
static int run_chunk(const pass_ctx *pc, tstate *ts, int64_t cs, int64_t ce, partial *head, partial *tail)
{
    int64_t pos = cs;
    int64_t cur_o = -1;
    head->o = tail->o = -1;
    const int plain = plain_folds(pc);
    while (pos < ce) {
        int nruns;
        int n = cpu_fill_block(pc, &ts->st, &ts->w, pos, ce, ts->runs, &nruns);
        if (n <= 0) break;
        int rc = vm_run(&ts->st, n);
        if (rc) return rc;
        for (int k = 0; k < nruns; k++) {
            const run *r = &ts->runs[k];
            if (plain && r->t0 == 0 && r->len == out_count(pc, r->o)) {
                /* runs that are whole outputs (short rows: one output every
                 * few elements), as many as follow each other */
                if (cur_o >= 0) finish_output(pc, ts, cs, cur_o, head);
                cur_o = -1;
                int k1 = k + 1;
                while (k1 < nruns && ts->runs[k1].t0 == 0 && ts->runs[k1].len == out_count(pc, ts->runs[k1].o)) k1++;
                write_whole(pc, ts, r, k1 - k);
                k = k1 - 1;
                continue;
            }
            if (r->o != cur_o) {
                if (cur_o >= 0) finish_output(pc, ts, cs, cur_o, head);   /* it ended in this chunk */
                cur_o = r->o;
                for (int q = 0; q < pc->nreds; q++) acc_init(&pc->reds[q], &ts->cur[q]);
            }
            for (int q = 0; q < pc->nreds; q++)
                cpu_acc_fold_run(&pc->reds[q], &ts->us[q], &ts->st, pc->root_of[q], r,
                             arg_index(pc, r->o, r->t0), &ts->cur[q]);
        }
        pos += n;
    }
    if (cur_o >= 0) {
        int64_t end_o = out_start(pc, cur_o) + out_count(pc, cur_o);
        if (end_o > ce) {
            /* it goes on in the next chunk: the tail partial, or the head
             * if it also began before this one */
            partial *pt = out_start(pc, cur_o) < cs ? head : tail;
            pt->o = cur_o;
            memcpy(pt->acc, ts->cur, pc->nreds * sizeof *ts->cur);
        } else {
            finish_output(pc, ts, cs, cur_o, head);
        }
    }
    return 0;
}

int cpu_run_reduction(pass_ctx *pc, util_diag *diag)
{
    const plan *p = pc->p;
    /* an output with an empty domain is the identity; the walk writes every
     * other (a regular pass: all of them, unless L is 0) */
    for (int q = 0; (pc->dom.ranged || pc->dom.L == 0) && q < pc->nreds; q++) {
        cacc a;
        acc_init(&pc->reds[q], &a);
        const core_buf *t = &pc->temps[pc->reds[q].temp[0]];
        for (int64_t o = 0; o < pc->dom.nout; o++)
            if (out_count(pc, o) == 0) acc_write(pc, &pc->reds[q], &a, out_offset(pc, t, o));
    }
    cpu_flat_walk(pc);
    int64_t nchunks = (pc->dom.N / CHUNK + (pc->dom.N % CHUNK != 0));
    partial *parts = calloc((size_t)(2 * nchunks + 1), sizeof *parts);
    cacc *pacc = calloc((size_t)(2 * nchunks + 1) * (pc->nreds + 1), sizeof *pacc);
    int rc = 0;
    if (!parts || !pacc) rc = RED_ERR_NOMEM;
    for (int64_t i = 0; !rc && i < 2 * nchunks; i++) parts[i].acc = pacc + i * pc->nreds;

    int64_t fault_chunk = INT64_MAX;
    vm_fault fault = {0};
    int nt = pc->nthreads;
    if (nchunks < nt) nt = (int)(nchunks > 0 ? nchunks : 1);
    if (!rc && nchunks > 0) {
#pragma omp parallel num_threads(nt)
        {
            tstate ts;
            int lrc = cpu_tstate_init(&ts, pc);
            if (lrc) {
#pragma omp critical(redjit_fault)
                if (!rc) rc = lrc;
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t c = 0; c < nchunks; c++) {
                if (lrc || core_cancelled(pc->cancel)) continue;
                int64_t cs = c * CHUNK, ce = cs + CHUNK < pc->dom.N ? cs + CHUNK : pc->dom.N;
                int r = run_chunk(pc, &ts, cs, ce, &parts[2 * c], &parts[2 * c + 1]);
                if (r) keep_first_fault(c, r, &ts.st.fault, &fault_chunk, &fault);
            }
            cpu_tstate_free(&ts, pc);
        }
    }
    if (!rc && fault_chunk != INT64_MAX)
        rc = fault.code == RED_ERR_INDEX ? cpu_report_fault(p, pc->bufs, pc->temps, &fault, diag) : fault.code;

    if (!rc) {
        /* partials in chunk order: consecutive entries of one output combine */
        ustate *us = calloc((size_t)pc->nreds + 1, sizeof *us);
        cacc *acc = calloc((size_t)pc->nreds + 1, sizeof *acc);
        if (!us || !acc) rc = RED_ERR_NOMEM;
        for (int q = 0; !rc && q < pc->nreds; q++) {
            if (pc->reds[q].rop != ROP_USER) continue;
            if (vm_state_init(&us[q].st, pc->comb[q], p->nvars)) {
                rc = RED_ERR_NOMEM;
                break;
            }
            us[q].st.scalar_info = p->scalars;
            vm_prologue(&us[q].st);
        }
        int64_t cur = -1;
        for (int64_t i = 0; !rc && i <= 2 * nchunks; i++) {
            int64_t o = i < 2 * nchunks ? parts[i].o : -2;
            if (o == -1) continue;
            if (o != cur && cur >= 0) {
                const core_buf *t0 = &pc->temps[pc->reds[0].temp[0]];
                int64_t off = out_offset(pc, t0, cur);
                for (int q = 0; q < pc->nreds; q++) acc_write(pc, &pc->reds[q], &acc[q], off);
            }
            if (o == -2) break;
            if (o != cur) {
                cur = o;
                memcpy(acc, parts[i].acc, pc->nreds * sizeof *acc);
            } else {
                for (int q = 0; q < pc->nreds; q++) cpu_acc_combine(&pc->reds[q], &us[q], &acc[q], &parts[i].acc[q]);
            }
        }
        if (us)
            for (int q = 0; q < pc->nreds; q++) vm_state_free(&us[q].st);
        free(us);
        free(acc);
    }
    free(parts);
    free(pacc);
    if (rc && !diag->code) util_diag_set(diag, rc, rc == RED_ERR_NOMEM ? "out of memory" : "evaluation failed");
    return rc;
}
