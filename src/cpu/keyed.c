/*
 * keyed.c -- keyed passes (sum(x[i]) by k[i]): the keys scanned for their
 * count and order, then folded in fixed partitions of the element range,
 * each with per-key accumulators, combined in partition order.
 */
#include "exec_internal.h"

#include <stdlib.h>

/* ---- keyed passes ------------------------------------------------------------------------- */

/* A keyed pass keeps an accumulator per key and reduction for each
 * partition.  Built-in operators need one value of it (a kslot, 24 bytes),
 * not a whole cacc (144: room for a user operator's 16 components), which
 * with millions of keys is hundreds of MB to clear on every run
 * (bench/TUNING.md). */
typedef struct kslot {
    plan_value v;
    int64_t idx;
    int has;
} kslot;

typedef struct kaccs {
    unsigned char *mem;
    size_t slot;        /* sizeof(kslot) or sizeof(cacc) */
    int compact;
    int64_t nk;
    int nreds;
} kaccs;

static void *kslot_at(const kaccs *ka, int part, int64_t k, int q)
{
    return ka->mem + (((size_t)part * (size_t)ka->nk + (size_t)k) * (size_t)ka->nreds + (size_t)q) * ka->slot;
}

/* The accumulator of (part, k, q): the slot itself, or `tmp` filled from it. */
static cacc *kslot_get(const kaccs *ka, int part, int64_t k, int q, cacc *tmp)
{
    void *s = kslot_at(ka, part, k, q);
    if (!ka->compact) return s;
    const kslot *ks = s;
    tmp->v[0] = ks->v;
    tmp->idx = ks->idx;
    tmp->has = ks->has;
    return tmp;
}

static void kslot_put(const kaccs *ka, int part, int64_t k, int q, const cacc *a)
{
    void *s = kslot_at(ka, part, k, q);
    if (!ka->compact) {
        if (s != (const void *)a) memcpy(s, a, sizeof *a);
        return;
    }
    kslot *ks = s;
    ks->v = a->v[0];
    ks->idx = a->idx;
    ks->has = a->has;
}

/* Folds the elements [cs, ce) of a keyed pass, a run of equal keys at a
 * time.  With `first` NULL, key k goes to its slot in partition `part` of
 * `ka`.  Otherwise (sorted keys, see run_keyed_sorted) the range's first key
 * goes to slot `part` of `own`, every other key to its slot of `ka`, and
 * *first is set to that first key.  Returns the VM's error (its fault in
 * ts->st.fault), 0 when done. */
static int fold_keyed_range(pass_ctx *pc, tstate *ts, int64_t cs, int64_t ce, const kaccs *ka, int part,
                            const kaccs *own, int64_t *first)
{
    for (int64_t pos = cs; pos < ce;) {
        int nruns;
        int n = cpu_fill_block(pc, &ts->st, &ts->w, pos, ce, ts->runs, &nruns);
        if (n <= 0) break;
        int r = vm_run(&ts->st, n);
        if (r) return r;
        const int64_t *key = vm_reg(&ts->st, ts->st.prog->out[pc->key_root]);
        if (first && *first < 0) *first = key[0];
        /* runs of equal keys fold together */
        for (int j = 0; j < n;) {
            int e = j + 1;
            while (e < n && key[e] == key[j]) e++;
            run rr = {0, pos + j, j, e - j};
            int mine = first && key[j] == *first;   /* the range's first key, sorted keys */
            const kaccs *to = mine ? own : ka;
            int in = first ? 0 : part;
            int64_t at = mine ? part : key[j];
            for (int q = 0; q < pc->nreds; q++) {
                cacc tmp, *a = kslot_get(to, in, at, q, &tmp);
                cpu_acc_fold_run(&pc->reds[q], &ts->us[q], &ts->st, pc->root_of[q], &rr, arg_index(pc, 0, rr.t0), a);
                kslot_put(to, in, at, q, a);
            }
            j = e;
        }
        pos += n;
    }
    return 0;
}

/* cpu_run_keyed over keys cpu_scan_keys found sorted, built-in operators: the same
 * partitions, folded in the same order, but a partition's keys are a run of
 * their own, so only the first key of each partition can have been seen by
 * partitions before it.  That one goes to a slot of the partition's own;
 * every other key is this partition's alone and is folded straight into
 * the one slot per key, which after the pass holds the partial of the
 * first partition holding the key; the partitions' own slots are then
 * combined into their first keys' slots in partition order.  A key's
 * partials are combined in partition order, from nk + P slots instead of
 * P * nk (memory to fault in and write on every run: bench/TUNING.md), so
 * P no longer depends on the key count. */
static int run_keyed_sorted(pass_ctx *pc, int P, util_diag *diag)
{
    const plan *p = pc->p;
    int64_t nk = pc->nkeys;
    kaccs S = {.compact = 1, .nk = nk, .nreds = pc->nreds, .slot = sizeof(kslot)};
    kaccs A = {.compact = 1, .nk = P, .nreds = pc->nreds, .slot = sizeof(kslot)};
    S.mem = malloc(((size_t)nk * (size_t)pc->nreds + 1) * S.slot);
    A.mem = malloc(((size_t)P * (size_t)pc->nreds + 1) * A.slot);
    int64_t *kfirst = malloc(((size_t)P + 1) * sizeof *kfirst);
    if (!S.mem || !A.mem || !kfirst) {
        free(S.mem);
        free(A.mem);
        free(kfirst);
        return util_diag_at(diag, p->src, pc->ps->key_pos, RED_ERR_NOMEM, "out of memory for %lld keys",
                            (long long)nk);
    }
    int rc = 0;
    vm_fault fault = {0};
    int64_t fault_part = INT64_MAX;
    int nt = pc->nthreads;
#pragma omp parallel num_threads(nt)
    {
        tstate ts;
        int lrc = cpu_tstate_init(&ts, pc);
        if (lrc) {
#pragma omp critical(redjit_fault)
            if (!rc) rc = lrc;
        }
        /* every key's slot empty, the keys split between the threads (an
         * acc_init per slot, a 144-byte clear and a call, cost a large part
         * of a run with few values a key) */
        kslot empty[64];
        for (int q = 0; q < pc->nreds && q < 64; q++) {
            cacc id;
            acc_init(&pc->reds[q], &id);
            empty[q] = (kslot){.v = id.v[0], .idx = id.idx, .has = id.has};
        }
#pragma omp for schedule(static)
        for (int64_t k = 0; k < nk; k++)
            for (int q = 0; q < pc->nreds; q++) *(kslot *)kslot_at(&S, 0, k, q) = empty[q];
#pragma omp for schedule(static, 1)
        for (int part = 0; part < P; part++) {
            kfirst[part] = -1;
            if (lrc || core_cancelled(pc->cancel)) continue;
            for (int q = 0; q < pc->nreds; q++) *(kslot *)kslot_at(&A, 0, part, q) = empty[q];
            int64_t cs = pc->dom.N * part / P, ce = pc->dom.N * (part + 1) / P;
            int r = fold_keyed_range(pc, &ts, cs, ce, &S, part, &A, &kfirst[part]);
            if (r) keep_first_fault(part, r, &ts.st.fault, &fault_part, &fault);
        }
        cpu_tstate_free(&ts, pc);
    }
    if (!rc && fault.code)
        rc = fault.code == RED_ERR_INDEX ? cpu_report_fault(p, pc->bufs, pc->temps, &fault, diag) : fault.code;
    if (!rc && !core_cancelled(pc->cancel)) {
        /* the first keys' partials, in partition order, after the partial
         * of the partition where the key began */
        for (int part = 0; part < P; part++) {
            if (kfirst[part] < 0) continue;
            for (int q = 0; q < pc->nreds; q++) {
                cacc a, b;
                kslot_get(&S, 0, kfirst[part], q, &a);
                cpu_acc_combine(&pc->reds[q], NULL, &a, kslot_get(&A, 0, part, q, &b));
                kslot_put(&S, 0, kfirst[part], q, &a);
            }
        }
        int nt2 = nk >= 65536 ? pc->nthreads : 1;
#pragma omp parallel for num_threads(nt2) schedule(static)
        for (int64_t k = 0; k < nk; k++)
            for (int q = 0; q < pc->nreds; q++) {
                cacc a;
                acc_write(pc, &pc->reds[q], kslot_get(&S, 0, k, q, &a), k);
            }
    }
    free(S.mem);
    free(A.mem);
    free(kfirst);
    if (rc && !diag->code) util_diag_set(diag, rc, rc == RED_ERR_NOMEM ? "out of memory" : "evaluation failed");
    return rc;
}

int cpu_run_keyed(pass_ctx *pc, util_diag *diag)
{
    const plan *p = pc->p;
    const plan_pass *ps = pc->ps;
    /* Partitions of the element range, each with private per-key
     * accumulators, combined in partition order: the count depends on the
     * data sizes only, never on threads. */
    int64_t nk = pc->nkeys;
    int64_t per = nk > 0 ? pc->dom.N / (4 * nk) : 1;
    int P = (int)(per < 1 ? 1 : per > 64 ? 64 : per);
    kaccs ka = {.compact = 1, .nk = nk, .nreds = pc->nreds};
    for (int q = 0; q < pc->nreds; q++)
        if (pc->reds[q].rop == ROP_USER) ka.compact = 0;
    ka.slot = ka.compact ? sizeof(kslot) : sizeof(cacc);
    if (ka.compact && pc->keys_sorted) {
        /* sorted keys cost no slots per partition: as many partitions as
         * 64 Ki values each allow, up to 64, however many keys there are
         * (with 4 values a key, the general rule above leaves one) */
        int64_t pn = pc->dom.N / 65536;
        return run_keyed_sorted(pc, (int)(pn < 1 ? 1 : pn > 64 ? 64 : pn), diag);
    }
    if ((double)P * (double)nk * pc->nreds * ka.slot > 2e9) P = 1;
    /* every slot is written (acc_init) before it is read */
    ka.mem = malloc(((size_t)P * (size_t)nk * (size_t)pc->nreds + 1) * ka.slot);
    if (!ka.mem)
        return util_diag_at(diag, p->src, ps->key_pos, RED_ERR_NOMEM,
                            "out of memory for %lld keys", (long long)nk);
    int rc = 0;
    vm_fault fault = {0};
    int64_t fault_part = INT64_MAX;
    int nt = pc->nthreads < P ? pc->nthreads : P;
#pragma omp parallel num_threads(nt)
    {
        tstate ts;
        int lrc = cpu_tstate_init(&ts, pc);
        if (lrc) {
#pragma omp critical(redjit_fault)
            if (!rc) rc = lrc;
        }
#pragma omp for schedule(static, 1)
        for (int part = 0; part < P; part++) {
            if (lrc || core_cancelled(pc->cancel)) continue;
            for (int q = 0; q < pc->nreds; q++) {
                cacc id;
                acc_init(&pc->reds[q], &id);
                for (int64_t k = 0; k < nk; k++) kslot_put(&ka, part, k, q, &id);
            }
            int64_t cs = pc->dom.N * part / P, ce = pc->dom.N * (part + 1) / P;
            int r = fold_keyed_range(pc, &ts, cs, ce, &ka, part, NULL, NULL);
            if (r) keep_first_fault(part, r, &ts.st.fault, &fault_part, &fault);
        }
        cpu_tstate_free(&ts, pc);
    }
    if (!rc && fault.code)
        rc = fault.code == RED_ERR_INDEX ? cpu_report_fault(p, pc->bufs, pc->temps, &fault, diag) : fault.code;
    /* an interrupt skipped partitions, whose slots were never written: the
     * caller answers with the interrupt, so nothing is combined */
    if (!rc && !core_cancelled(pc->cancel)) {
        ustate *us = calloc((size_t)pc->nreds + 1, sizeof *us);
        if (!us) rc = RED_ERR_NOMEM;
        for (int q = 0; !rc && q < pc->nreds; q++) {
            if (pc->reds[q].rop != ROP_USER) continue;
            if (vm_state_init(&us[q].st, pc->comb[q], p->nvars)) rc = RED_ERR_NOMEM;
            else {
                us[q].st.scalar_info = p->scalars;
                vm_prologue(&us[q].st);
            }
        }
        if (!rc && ka.compact) {
            /* built-in operators combine without per-thread state: the keys
             * split between threads (with millions of keys, one thread's
             * combine was a sixth of the run) */
            int nt2 = nk >= 65536 ? pc->nthreads : 1;
#pragma omp parallel for num_threads(nt2) schedule(static)
            for (int64_t k = 0; k < nk; k++)
                for (int q = 0; q < pc->nreds; q++) {
                    cacc a, tmp;
                    kslot_get(&ka, 0, k, q, &a);
                    for (int part = 1; part < P; part++)
                        cpu_acc_combine(&pc->reds[q], NULL, &a, kslot_get(&ka, part, k, q, &tmp));
                    acc_write(pc, &pc->reds[q], &a, k);
                }
        }
        for (int64_t k = 0; !rc && !ka.compact && k < nk; k++)
            for (int q = 0; q < pc->nreds; q++) {
                cacc *a = kslot_get(&ka, 0, k, q, NULL);
                for (int part = 1; part < P; part++)
                    cpu_acc_combine(&pc->reds[q], &us[q], a, kslot_get(&ka, part, k, q, NULL));
                acc_write(pc, &pc->reds[q], a, k);
            }
        if (us)
            for (int q = 0; q < pc->nreds; q++) vm_state_free(&us[q].st);
        free(us);
    }
    free(ka.mem);
    if (rc && !diag->code) util_diag_set(diag, rc, rc == RED_ERR_NOMEM ? "out of memory" : "evaluation failed");
    return rc;
}

/* Scan the keys: their count (max + 1), negatives, and order. */
int cpu_scan_keys(pass_ctx *pc, util_diag *diag)
{
    const plan *p = pc->p;
    int64_t nchunks = (pc->dom.N / CHUNK + (pc->dom.N % CHUNK != 0));
    int64_t kmax = -1, kmin = INT64_MAX;
    int sorted = 1, rc = 0;
    int64_t *first = calloc((size_t)nchunks + 1, sizeof *first), *last = calloc((size_t)nchunks + 1, sizeof *last);
    if (!first || !last) rc = RED_ERR_NOMEM;
    vm_fault fault = {0};
    if (!rc && nchunks > 0) {
        int nt = pc->nthreads;
#pragma omp parallel num_threads(nt) reduction(max : kmax) reduction(min : kmin) reduction(& : sorted)
        {
            tstate ts;
            int lrc = cpu_tstate_init(&ts, pc);
#pragma omp for schedule(static)
            for (int64_t c = 0; c < nchunks; c++) {
                if (lrc) continue;
                int64_t cs = c * CHUNK, ce = cs + CHUNK < pc->dom.N ? cs + CHUNK : pc->dom.N;
                int64_t prev = INT64_MIN;
                for (int64_t pos = cs; pos < ce;) {
                    int nruns;
                    int n = cpu_fill_block(pc, &ts.st, &ts.w, pos, ce, ts.runs, &nruns);
                    if (vm_run(&ts.st, n)) {
#pragma omp critical(redjit_fault)
                        if (!fault.code) fault = ts.st.fault;
                        break;
                    }
                    const int64_t *key = vm_reg(&ts.st, ts.st.prog->out[pc->key_root]);
                    if (pos == cs) first[c] = key[0];
                    for (int j = 0; j < n; j++) {
                        int64_t k = key[j];
                        if (k > kmax) kmax = k;
                        if (k < kmin) kmin = k;
                        sorted &= k >= prev;
                        prev = k;
                    }
                    last[c] = key[n - 1];
                    pos += n;
                }
            }
            if (lrc) {
#pragma omp critical(redjit_fault)
                if (!rc) rc = lrc;
            }
            cpu_tstate_free(&ts, pc);
        }
    }
    for (int64_t c = 1; c < nchunks; c++) sorted &= first[c] >= last[c - 1];
    if (nchunks > 0) {
        pc->key_span[0] = first[0];
        pc->key_span[1] = last[nchunks - 1];
    }
    free(first);
    free(last);
    if (rc) return util_diag_set(diag, rc, "out of memory");
    if (fault.code) return cpu_report_fault(p, pc->bufs, pc->temps, &fault, diag);
    if (pc->dom.N > 0 && kmin < 0)
        return util_diag_at(diag, p->src, pc->ps->key_pos, RED_ERR_KEYS,
                            "keys must be non-negative, but this key is %lld for some element",
                            (long long)kmin);
    for (int q = 0; q < pc->nreds; q++)
        if (pc->reds[q].rop == ROP_USER && pc->reds[q].ordered && !sorted)
            return util_diag_at(diag, p->src, pc->ps->key_pos, RED_ERR_KEYS,
                                "ordered operator '%s' needs keys in non-decreasing order, and "
                                "these are not sorted", pc->reds[q].uname);
    if (kmax >= ((int64_t)1 << 40))
        return util_diag_at(diag, p->src, pc->ps->key_pos, RED_ERR_LIMIT,
                            "key %lld is too large: the result would have that many elements",
                            (long long)kmax);
    pc->nkeys = pc->dom.N > 0 ? kmax + 1 : 0;
    pc->keys_sorted = sorted;
    return 0;
}
