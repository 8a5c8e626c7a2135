/*
 * scan.c -- a scan pass: every element's running fold, written where the
 * element lies.  The domain (each output's reduced box in row-major order,
 * the outputs one after another) is cut into the fixed chunks of every pass.
 * Three steps: each chunk's fold since its last restart (a row's start, or a
 * change of the reset key) in parallel; the fold carried into each chunk, in
 * chunk order; each chunk walked again from its carry, writing.  The chunks
 * are the same for any number of threads, so are the bits.
 */
#include "exec_internal.h"

#include <stdlib.h>

/* A chunk's summary after step 1. */
typedef struct chunk {
    cacc *acc;          /* nreds: the fold since the chunk's last restart  */
    int restarts;       /* some element after its first restarts the fold  */
    int first_row;      /* its first element starts a row                  */
    int64_t first_key, last_key;   /* reset key of its first and last element */
} chunk;

/* One element (register j of the block, at output o, box position t) folded into a. */
static void fold_one(const pass_ctx *pc, tstate *ts, int q, int j, int64_t o, int64_t t, cacc *a)
{
    run r1 = {o, t, j, 1};
    cpu_acc_fold_run(&pc->reds[q], &ts->us[q], &ts->st, pc->root_of[q], &r1, arg_index(pc, o, t), a);
}

/* A run of n elements (values `v`, in the accumulator's type) scanned into `out`
 * (the temporary's elements of the run) from `a`, for the commonest built-in
 * folds: a typed loop that gives the bits the element-by-element path would
 * (cpu_acc_fold_run's: the first element taken as it is, then combined as
 * cpu_combine_builtin combines; f32 sums carry an f64 total).  0 where the
 * reduction has none. */
#define SCAN_RUN(T, ACC, GET, PUT, OPX)                                        \
    do {                                                                       \
        const T *x = (const T *)v;                                             \
        T *y = (T *)out;                                                       \
        int has = a->has;                                                      \
        ACC s = has ? (ACC)a->v[0].GET : (ACC)0;                               \
        for (int j = 0; j < n; j++) {                                          \
            if (excl) y[j] = has ? (T)s : (T)a->v[0].GET;                      \
            s = has ? (ACC)OPX(s, (ACC)x[j]) : (ACC)x[j];                      \
            has = 1;                                                           \
            if (!excl) y[j] = (T)s;                                            \
        }                                                                      \
        if (n > 0) {                                                           \
            a->v[0].PUT = s;                                                   \
            a->has = 1;                                                        \
        }                                                                      \
    } while (0)
#define PRODF32(a, b) ((double)((float)(a) * (float)(b)))

static int scan_run_builtin(const plan_red *rd, int excl, const void *v, int n, void *out, cacc *a)
{
    int ct = rd->acc[0];
    switch (rd->rop) {
    case ROP_SUM:
        if (ct == CT_F32) SCAN_RUN(float, double, f, f, ADDF);
        else if (ct == CT_F64) SCAN_RUN(double, double, f, f, ADDF);
        else if (ct == CT_I64) SCAN_RUN(int64_t, uint64_t, u, u, ADDU);
        else if (ct == CT_U64) SCAN_RUN(uint64_t, uint64_t, u, u, ADDU);
        else return 0;
        return 1;
    case ROP_PROD:
        if (ct == CT_F32) SCAN_RUN(float, double, f, f, PRODF32);
        else if (ct == CT_F64) SCAN_RUN(double, double, f, f, MULF);
        else if (ct == CT_I64) SCAN_RUN(int64_t, uint64_t, u, u, MULU);
        else if (ct == CT_U64) SCAN_RUN(uint64_t, uint64_t, u, u, MULU);
        else return 0;
        return 1;
    case ROP_MIN:
        if (ct == CT_F32) SCAN_RUN(float, double, f, f, MINF);
        else if (ct == CT_F64) SCAN_RUN(double, double, f, f, MINF);
        else if (ct == CT_I64) SCAN_RUN(int64_t, int64_t, i, i, MINI);
        else if (ct == CT_I32) SCAN_RUN(int32_t, int64_t, i, i, MINI);
        else return 0;
        return 1;
    case ROP_MAX:
        if (ct == CT_F32) SCAN_RUN(float, double, f, f, MAXF);
        else if (ct == CT_F64) SCAN_RUN(double, double, f, f, MAXF);
        else if (ct == CT_I64) SCAN_RUN(int64_t, int64_t, i, i, MAXI);
        else if (ct == CT_I32) SCAN_RUN(int32_t, int64_t, i, i, MAXI);
        else return 0;
        return 1;
    default:
        return 0;
    }
}

static void restart(const pass_ctx *pc, cacc *acc)
{
    for (int q = 0; q < pc->nreds; q++) acc_init(&pc->reds[q], &acc[q]);
}

/* A piece of a run: elements that no restart separates, folded (write 0) or
 * scanned into the temporaries at `at` on (write 1). */
static void scan_piece(const pass_ctx *pc, tstate *ts, const run *r, int write, int64_t at, cacc *acc)
{
    const int excl = pc->ps->scan == 2;
    for (int q = 0; q < pc->nreds; q++) {
        const plan_red *rd = &pc->reds[q];
        if (!write) {   /* step 1: the piece's fold only */
            cpu_acc_fold_run(rd, &ts->us[q], &ts->st, pc->root_of[q], r, arg_index(pc, r->o, r->t0), &acc[q]);
            continue;
        }
        size_t sz = plan_ct_size(rd->acc[0]);
        const unsigned char *v = (const unsigned char *)vm_reg(&ts->st, ts->st.prog->out[pc->root_of[q]]) +
                                 (size_t)r->start * sz;
        void *out = (unsigned char *)pc->temps[rd->temp[0]].data + (size_t)at * sz;
        if (rd->ncomp == 1 && scan_run_builtin(rd, excl, v, r->len, out, &acc[q])) continue;
        for (int e = 0; e < r->len; e++) {
            if (excl) acc_write(pc, rd, &acc[q], at + e);
            fold_one(pc, ts, q, r->start + e, r->o, r->t0 + e, &acc[q]);
            if (!excl) acc_write(pc, rd, &acc[q], at + e);
        }
    }
}

/* Walk chunk [cs, ce).  Step 1 (write 0): the chunk's summary in *ch.  Step 3
 * (write 1): from the carry `acc` and the key of the element before the chunk
 * (prev_key, has_prev), every element's result into the temporaries.  A run of
 * the block (one row's elements) is cut where the key changes, and each piece
 * goes through scan_piece. */
static int walk_chunk(const pass_ctx *pc, tstate *ts, int64_t cs, int64_t ce, int write, cacc *acc,
                      int has_prev, int64_t prev_key, chunk *ch)
{
    const core_buf *t0 = &pc->temps[pc->reds[0].temp[0]];
    int keyed = pc->key_root >= 0;
    int64_t key_before = prev_key;
    for (int64_t pos = cs; pos < ce;) {
        int nruns;
        int n = cpu_fill_block(pc, &ts->st, &ts->w, pos, ce, ts->runs, &nruns);
        if (n <= 0) break;
        int rc = vm_run(&ts->st, n);
        if (rc) return rc;
        const int64_t *key = keyed ? vm_reg(&ts->st, ts->st.prog->out[pc->key_root]) : NULL;
        for (int k = 0; k < nruns; k++) {
            const run *r = &ts->runs[k];
            /* over ranged rows the result is indexed by k alone: a row's results at its range */
            int64_t base = pc->tiled ? pc->olo[r->o] * t0->strides[0] : out_offset(pc, t0, r->o);
            for (int e0 = 0, e1; e0 < r->len; e0 = e1) {
                int j = r->start + e0;
                int64_t at = pos + j;
                int fresh = (r->t0 + e0 == 0) || (keyed && (at > cs || has_prev) && key[j] != key_before);
                if (!write && at == cs) {
                    ch->first_row = r->t0 + e0 == 0;
                    ch->first_key = keyed ? key[j] : 0;
                } else if (fresh) {
                    if (!write) ch->restarts = 1;
                    restart(pc, acc);
                }
                e1 = e0 + 1;
                if (keyed)
                    while (e1 < r->len && key[r->start + e1] == key[r->start + e1 - 1]) e1++;
                else
                    e1 = r->len;
                if (keyed) key_before = key[r->start + e1 - 1];
                run piece = {r->o, r->t0 + e0, j, e1 - e0};
                scan_piece(pc, ts, &piece, write, base + r->t0 + e0, acc);
            }
        }
        pos += n;
    }
    if (!write && keyed) ch->last_key = key_before;
    return 0;
}

/* Step 2: the fold carried into each chunk (carry[c * nreds ..]), in chunk order; a chunk
 * that restarts (its first element, or one after) carries only what follows the restart.
 * 0 or RED_ERR_NOMEM. */
static int carry_in(const pass_ctx *pc, const chunk *ch, int64_t nchunks, cacc *carry)
{
    int nr = pc->nreds, rc = 0;
    ustate *us = calloc((size_t)nr + 1, sizeof *us);   /* user operators' combine programs */
    if (!us) return RED_ERR_NOMEM;
    for (int q = 0; !rc && q < nr; q++) {
        if (pc->reds[q].rop != ROP_USER) continue;
        if (vm_state_init(&us[q].st, pc->comb[q], pc->p->nvars)) rc = RED_ERR_NOMEM;
        us[q].st.scalar_info = pc->p->scalars;
        if (!rc) vm_prologue(&us[q].st);
    }
    restart(pc, carry);
    for (int64_t c = 1; !rc && c < nchunks; c++) {
        const chunk *b = &ch[c - 1];
        int first_fresh = b->first_row || (pc->key_root >= 0 && c >= 2 && b->first_key != ch[c - 2].last_key);
        for (int q = 0; q < nr; q++) {
            cacc *to = &carry[c * nr + q];
            *to = b->restarts || first_fresh ? b->acc[q] : carry[(c - 1) * nr + q];
            if (!b->restarts && !first_fresh) cpu_acc_combine(&pc->reds[q], &us[q], to, &b->acc[q]);
        }
    }
    for (int q = 0; q < nr; q++) vm_state_free(&us[q].st);
    free(us);
    return rc;
}

/* One step over the chunks (cpu_each_chunk): 1, each chunk's fold since its last restart;
 * 3, each chunk again from its carry, writing. */
typedef struct stepping {
    chunk *ch;
    const cacc *carry;
    int nr;
    int64_t N;
    int step;
} stepping;

static int scan_chunk(const pass_ctx *pc, tstate *ts, void *scratch, int64_t c, void *arg)
{
    const stepping *sp = arg;
    chunk *ch = sp->ch;
    int64_t cs = c * CHUNK, ce = cs + CHUNK < sp->N ? cs + CHUNK : sp->N;
    if (sp->step == 1) {
        restart(pc, ch[c].acc);
        return walk_chunk(pc, ts, cs, ce, 0, ch[c].acc, 0, 0, &ch[c]);
    }
    cacc *acc = scratch;   /* the carry, folded on */
    memcpy(acc, sp->carry + c * sp->nr, (size_t)sp->nr * sizeof *acc);
    return walk_chunk(pc, ts, cs, ce, 1, acc, c > 0, c > 0 ? ch[c - 1].last_key : 0, NULL);
}

int cpu_run_scan(pass_ctx *pc, util_diag *diag)
{
    const plan *p = pc->p;
    int64_t N = pc->dom.N;
    int64_t nchunks = N / CHUNK + (N % CHUNK != 0);
    if (nchunks == 0) return 0;
    int nr = pc->nreds;
    chunk *ch = calloc((size_t)nchunks, sizeof *ch);
    cacc *accs = calloc((size_t)(2 * nchunks) * nr, sizeof *accs);   /* summaries, then carries */
    if (!ch || !accs) {
        free(ch);
        free(accs);
        return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    }
    for (int64_t c = 0; c < nchunks; c++) ch[c].acc = accs + c * nr;
    cacc *carry = accs + nchunks * nr;

    int rc = 0;
    int64_t fault_chunk = INT64_MAX;
    vm_fault fault = {0};
    stepping sp = {ch, carry, nr, N, 0};
    for (int step = nchunks > 1 ? 1 : 3; !rc && step <= 3; step += 2) {
        if (step == 3) rc = carry_in(pc, ch, nchunks, carry);
        if (rc) break;
        sp.step = step;
        rc = cpu_each_chunk(pc, nchunks, (size_t)(nr + 1) * sizeof(cacc), scan_chunk, &sp, &fault_chunk, &fault);
        if (!rc && fault_chunk != INT64_MAX) break;
    }
    free(ch);
    free(accs);
    if (!rc && fault_chunk != INT64_MAX)
        return fault.code == RED_ERR_INDEX ? cpu_report_fault(p, pc->bufs, pc->temps, &fault, diag)
                                           : util_diag_set(diag, fault.code, "evaluation failed");
    if (rc) return util_diag_set(diag, rc, rc == RED_ERR_NOMEM ? "out of memory" : "evaluation failed");
    return 0;
}
