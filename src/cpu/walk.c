/*
 * walk.c -- the domain walk: a pass's linear positions cut into blocks for
 * the VM (flat across rows, along a row, or element by element), the
 * per-thread state that walks them, and the map passes built on it.
 */
#include "exec_internal.h"

#include <stdlib.h>

/* ---- blocks ---------------------------------------------------------------------------- */

/* Every index of the pass held at its value at output o, element t of its
 * reduced box (lo, sz): the first element of a block that then ramps one. */
static void set_indices(const pass_ctx *pc, vm_state *st, int64_t o, int64_t t, const int64_t *lo,
                        const int64_t *sz)
{
    for (int d = pc->dom.nf - 1; d >= 0; d--) {
        vm_var *v = &st->vars[pc->dom.fvar[d]];
        v->mode = VAR_CONST;
        v->base = pc->dom.flo[d] + (pc->dom.fext[d] ? o % pc->dom.fext[d] : 0);
        o = pc->dom.fext[d] ? o / pc->dom.fext[d] : 0;
    }
    for (int d = pc->dom.nr - 1; d >= 0; d--) {
        vm_var *v = &st->vars[pc->dom.rvar[d]];
        v->mode = VAR_CONST;
        v->base = lo[d] + (sz[d] ? t % sz[d] : 0);
        t = sz[d] ? t / sz[d] : 0;
    }
}

/* Fill the block starting at linear position `pos` (< end).  Sets the
 * variables in `st`, the runs, and returns the number of elements. */
int cpu_fill_block(const pass_ctx *pc, vm_state *st, walker *w, int64_t pos, int64_t end,
                      run *runs, int *nruns)
{
    int64_t o = locate(pc, pos);
    int64_t t = pos - out_start(pc, o);
    const int64_t *lo = red_lo(pc, o), *sz = red_sz(pc, o);
    int64_t room = end - pos < VM_B ? end - pos : VM_B;

    st->flat = pc->flat;
    if (pc->flat) {
        /* the indices of the block's first element, the one that ramps
         * ramping on across rows; a run for each row (piece).  The free
         * indices are those of the first output, which a ranged pass's
         * loads do not read (cpu_flat_walk). */
        set_indices(pc, st, o, t, lo, sz);
        int r = pc->flat_ramp;
        st->vars[r < pc->dom.nf ? pc->dom.fvar[r] : pc->dom.rvar[r - pc->dom.nf]].mode = VAR_RAMP;
        int n = 0, k = 0;
        for (;;) {
            int64_t left = out_count(pc, o) - t;
            int m = (int)(left < room - n ? left : room - n);
            runs[k++] = (run){o, t, n, m};
            n += m;
            if (n >= room) break;
            t = 0;
            while (out_count(pc, ++o) == 0) {}   /* empty ranges have no run */
        }
        /* the block ends where a row does, unless one row fills it: a row
         * that fits in a block is folded in one piece wherever it lies,
         * so equal rows give equal bits (as a block a row did) */
        if (k > 1 && runs[k - 1].len < out_count(pc, runs[k - 1].o)) n -= runs[--k].len;
        *nruns = k;
        return n;
    }

    /* the innermost index and what remains of its current row */
    int64_t rem = 0;
    if (pc->dom.nr > 0 && sz[pc->dom.nr - 1] > 0) rem = sz[pc->dom.nr - 1] - t % sz[pc->dom.nr - 1];
    else if (pc->dom.nr == 0 && pc->ps->nreds == 0 && pc->dom.nf > 0) rem = pc->dom.fext[pc->dom.nf - 1] - o % pc->dom.fext[pc->dom.nf - 1];

    if (rem >= RAMP_MIN || rem >= room) {
        int n = (int)(rem < room ? rem : room);
        set_indices(pc, st, o, t, lo, sz);
        if (pc->dom.nr > 0) st->vars[pc->dom.rvar[pc->dom.nr - 1]].mode = VAR_RAMP;
        else if (pc->dom.nf > 0) st->vars[pc->dom.fvar[pc->dom.nf - 1]].mode = VAR_RAMP;
        runs[0] = (run){o, t, 0, n};
        *nruns = 1;
        return n;
    }

    /* element by element */
    int64_t fi[RED_MAX_DIMS], ri[RED_MAX_DIMS];
    int64_t oo = o;
    for (int d = pc->dom.nf - 1; d >= 0; d--) {
        fi[d] = pc->dom.fext[d] ? oo % pc->dom.fext[d] : 0;
        oo = pc->dom.fext[d] ? oo / pc->dom.fext[d] : 0;
    }
    int64_t tt = t;
    for (int d = pc->dom.nr - 1; d >= 0; d--) {
        ri[d] = sz[d] ? tt % sz[d] : 0;
        tt = sz[d] ? tt / sz[d] : 0;
    }
    for (int d = 0; d < pc->dom.nf; d++) {
        st->vars[pc->dom.fvar[d]].mode = VAR_VEC;
        st->vars[pc->dom.fvar[d]].vec = w->vec[d];
    }
    for (int d = 0; d < pc->dom.nr; d++) {
        st->vars[pc->dom.rvar[d]].mode = VAR_VEC;
        st->vars[pc->dom.rvar[d]].vec = w->vec[RED_MAX_DIMS + d];
    }
    int nr = 0;
    runs[0] = (run){o, t, 0, 0};
    int n = 0;
    /* per variable (free, then reduced): whether the block's values so far
     * rise by one or stay put, from the first value to the next expected */
    int64_t first[2 * RED_MAX_DIMS], next[2 * RED_MAX_DIMS];
    int ramp[2 * RED_MAX_DIMS], same[2 * RED_MAX_DIMS];
    for (int d = 0; d < 2 * RED_MAX_DIMS; d++) ramp[d] = same[d] = 1;
    int64_t cnt = pc->ps->nreds ? out_count(pc, o) : 1;
    while (n < room) {
        /* what is left of the innermost reduced row, at once: short rows
         * (CSR ranges) spent much of their time here element by element */
        int64_t m = 1;
        if (pc->dom.nr > 0) {
            int in = pc->dom.nr - 1;
            m = sz[in] - ri[in];
            if (m > cnt - t) m = cnt - t;
            if (m > room - n) m = room - n;
        }
        for (int d = 0; d < pc->dom.nf + pc->dom.nr; d++) {
            int inner = d == pc->dom.nf + pc->dom.nr - 1 && pc->dom.nr > 0;   /* rises along the row */
            int64_t v = d < pc->dom.nf ? pc->dom.flo[d] + fi[d] : lo[d - pc->dom.nf] + ri[d - pc->dom.nf];
            int64_t *vec = d < pc->dom.nf ? w->vec[d] + n : w->vec[RED_MAX_DIMS + d - pc->dom.nf] + n;
            for (int64_t i = 0; i < m; i++) vec[i] = inner ? v + i : v;
            if (n == 0) first[d] = next[d] = v;
            ramp[d] &= v == next[d] && (inner || m == 1);
            same[d] &= v == first[d] && (!inner || m == 1);
            next[d] = v + m;
        }
        runs[nr].len += (int)m;
        n += (int)m;
        t += m;
        /* advance the reduced odometer, then the output */
        int d = pc->dom.nr - 1;
        if (d >= 0 && (ri[d] += m) == sz[d]) {
            ri[d--] = 0;
            while (d >= 0 && ++ri[d] == sz[d]) ri[d--] = 0;
        }
        if (t < cnt) continue;
        /* next output with a non-empty domain */
        do {
            o++;
            for (int e = pc->dom.nf - 1; e >= 0 && ++fi[e] == pc->dom.fext[e]; e--) fi[e] = 0;
        } while (o < pc->dom.nout && pc->ps->nreds && out_count(pc, o) == 0);
        if (o >= pc->dom.nout || n >= room) break;
        t = 0;
        cnt = pc->ps->nreds ? out_count(pc, o) : 1;
        lo = red_lo(pc, o);
        sz = red_sz(pc, o);
        for (int e = 0; e < pc->dom.nr; e++) ri[e] = 0;
        runs[++nr] = (run){o, 0, n, 0};
    }
    *nruns = nr + 1;
    /* a variable that rises by one along the whole block (short CSR ranges
     * that follow each other) or stays put reads as a ramp or a constant:
     * contiguous loads instead of gathers */
    for (int d = 0; d < pc->dom.nf + pc->dom.nr; d++)
        if (ramp[d] || same[d]) {
            vm_var *v = &st->vars[d < pc->dom.nf ? pc->dom.fvar[d] : pc->dom.rvar[d - pc->dom.nf]];
            v->mode = ramp[d] ? VAR_RAMP : VAR_CONST;
            v->base = first[d];
        }
    return n;
}

/* Whether the pass can run its blocks flat (vm_state.flat): each block a
 * stretch of VM_B positions across rows, one index ramping, instead of
 * element by element (rows shorter than RAMP_MIN) or a block a row.  Two
 * kinds of pass qualify:
 *   - a regular one whose affine loads each read their array at one fixed
 *     step a position, so that a load's address at position pos is
 *     a + s * pos: A[i,j] over a row-major A's rows, not x[j] beside it;
 *   - one with a range per output (CSR: k in ptr[r]..ptr[r+1]) whose
 *     ranges follow each other, the reduced index then being the first
 *     range's start + pos, and whose loads read no free index (v[k], not
 *     w[r]).
 * Either way every affine subscript must lie inside its array over the
 * whole walk, so that none need be checked, and no index value may be read
 * (it would be wrong past a row's end).  Sets pc->flat and pc->flat_ramp.
 * Short rows walked element by element ran 2.5 to 36 times slower than
 * flat (bench/TUNING.md, "CPU executor"). */
void cpu_flat_walk(pass_ctx *pc)
{
    pc->flat = 0;
    int m = pc->dom.nf + pc->dom.nr;
    if (pc->dom.nr == 0 || pc->dom.N < 2 || (pc->dom.ranged && pc->dom.nr != 1)) return;
    int id[2 * RED_MAX_DIMS];
    int64_t lo[2 * RED_MAX_DIMS], ext[2 * RED_MAX_DIMS], step[2 * RED_MAX_DIMS];
    int last = -1;
    for (int w = 0; w < m; w++) {
        id[w] = w < pc->dom.nf ? pc->dom.fvar[w] : pc->dom.rvar[w - pc->dom.nf];
        lo[w] = w < pc->dom.nf ? pc->dom.flo[w] : pc->dom.rlo[w - pc->dom.nf];
        ext[w] = w < pc->dom.nf ? pc->dom.fext[w] : pc->dom.rsz[w - pc->dom.nf];
        if (ext[w] > 1) last = w;
    }
    if (pc->dom.ranged) {
        /* the reduced index over all ranges, end to end; rows of VM_B
         * and up fill their blocks on their own */
        int64_t next = 0, longest = 0;
        int seen = 0;
        for (int64_t o = 0; o < pc->dom.nout; o++) {
            int64_t sz = pc->osz[o];
            if (sz == 0) continue;
            if (seen && pc->olo[o] != next) return;
            if (!seen) lo[m - 1] = pc->olo[o];
            seen = 1;
            if (__builtin_add_overflow(pc->olo[o], sz, &next)) return;
            longest = sz > longest ? sz : longest;
        }
        if (longest >= VM_B) return;
        ext[m - 1] = pc->dom.N;
        last = m - 1;
    } else {
        if (last < 0 || ext[m - 1] >= VM_B) return;
        step[m - 1] = 1;   /* positions a step of index w moves (N < 2^40: no overflow) */
        for (int w = m - 2; w >= 0; w--) step[w] = step[w + 1] * ext[w + 1];
    }

    const vm_prog *prog = pc->prog;
    for (int i = 0; i < prog->ninstr; i++) {
        const vm_instr *in = &prog->instr[i];
        if (in->kind == VI_INDEX) return;
        if (in->kind != VI_LOAD || !in->affine || in->nsub == 0) continue;
        const core_buf *b = in->slot >= 0 ? &pc->bufs[in->slot] : &pc->temps[-1 - in->slot];
        int64_t c[2 * RED_MAX_DIMS] = {0};   /* elements of b a step of index w moves */
        for (int d = 0; d < in->nsub; d++) {
            const vm_affine *af = &in->aff[d];
            int64_t mn = af->c0, mx = af->c0, kr = 0;   /* kr: the ramping index's coefficient */
            for (int t = 0; t < af->nterm; t++) {
                int w = 0;
                while (w < m && id[w] != af->var[t]) w++;
                if (w == m) return;
                int64_t k = af->coef[t], a, z, ks, hi;
                if (__builtin_add_overflow(lo[w], ext[w] - 1, &hi) ||
                    __builtin_mul_overflow(k, lo[w], &a) || __builtin_mul_overflow(k, hi, &z) ||
                    __builtin_add_overflow(mn, a < z ? a : z, &mn) || __builtin_add_overflow(mx, a < z ? z : a, &mx) ||
                    __builtin_mul_overflow(k, b->strides[d], &ks) || __builtin_add_overflow(c[w], ks, &c[w]))
                    return;
                if (w == last && __builtin_add_overflow(kr, k, &kr)) return;
            }
            /* the ramping index runs past its row by up to VM_B in a block:
             * run_load's ends of the block must not wrap */
            int64_t a, z;
            if (kr == INT64_MIN || __builtin_mul_overflow(kr < 0 ? -kr : kr, (int64_t)VM_B, &a) ||
                __builtin_sub_overflow(mn, a, &z) || __builtin_add_overflow(mx, a, &z))
                return;
            if (mn < 0 || mx >= b->shape[d]) return;
        }
        for (int w = 0; w < m; w++) {
            int64_t want = 0;
            if (pc->dom.ranged ? w < pc->dom.nf && c[w] != 0
                           : ext[w] > 1 && (__builtin_mul_overflow(c[last], step[w], &want) || c[w] != want))
                return;
        }
    }
    pc->flat = 1;
    pc->flat_ramp = last;
}

/* ---- per-thread state -------------------------------------------------------------------- */

int cpu_tstate_init(tstate *ts, const pass_ctx *pc)
{
    memset(ts, 0, sizeof *ts);
    if (vm_state_init(&ts->st, pc->prog, pc->p->nvars)) return RED_ERR_NOMEM;
    ts->st.bufs = pc->bufs;
    ts->st.temps = pc->temps;
    ts->st.scalars = pc->scalars;
    ts->st.scalar_info = pc->p->scalars;
    int nv = pc->dom.nf + pc->dom.nr;
    ts->w.mem = malloc((size_t)(nv > 0 ? nv : 1) * VM_B * sizeof(int64_t));
    if (!ts->w.mem) return RED_ERR_NOMEM;
    for (int d = 0; d < pc->dom.nf; d++) ts->w.vec[d] = ts->w.mem + (size_t)d * VM_B;
    for (int d = 0; d < pc->dom.nr; d++) ts->w.vec[RED_MAX_DIMS + d] = ts->w.mem + (size_t)(pc->dom.nf + d) * VM_B;
    ts->runs = malloc((VM_B + 1) * sizeof *ts->runs);
    ts->cur = calloc((size_t)pc->nreds + 1, sizeof *ts->cur);
    ts->us = calloc((size_t)pc->nreds + 1, sizeof *ts->us);
    if (!ts->runs || !ts->cur || !ts->us) return RED_ERR_NOMEM;
    for (int r = 0; r < pc->nreds; r++) {
        if (pc->reds[r].rop != ROP_USER) continue;
        if (vm_state_init(&ts->us[r].st, pc->comb[r], pc->p->nvars)) return RED_ERR_NOMEM;
        ts->us[r].st.scalar_info = pc->p->scalars;
        vm_prologue(&ts->us[r].st);
        ts->us[r].work = malloc((size_t)pc->reds[r].ncomp * VM_B * 8);
        if (!ts->us[r].work) return RED_ERR_NOMEM;
    }
    vm_prologue(&ts->st);
    ts->ok = 1;
    return 0;
}

void cpu_tstate_free(tstate *ts, const pass_ctx *pc)
{
    vm_state_free(&ts->st);
    free(ts->w.mem);
    free(ts->runs);
    if (ts->us)
        for (int r = 0; r < pc->nreds; r++) {
            vm_state_free(&ts->us[r].st);
            free(ts->us[r].work);
        }
    free(ts->us);
    free(ts->cur);
}

/* ---- chunks in parallel ------------------------------------------------------------------ */

int cpu_each_chunk(const pass_ctx *pc, int64_t nchunks, size_t scratch, cpu_chunk_fn *each, void *arg,
                   int64_t *fault_chunk, vm_fault *fault)
{
    int rc = 0;
    *fault_chunk = INT64_MAX;
    int nt = pc->nthreads;
    if (nchunks < nt) nt = (int)(nchunks > 0 ? nchunks : 1);
    if (nchunks <= 0) return 0;
#pragma omp parallel num_threads(nt)
    {
        tstate ts;
        int lrc = cpu_tstate_init(&ts, pc);
        void *mine = scratch ? malloc(scratch) : NULL;
        if (!lrc && scratch && !mine) lrc = RED_ERR_NOMEM;
        if (lrc) {
#pragma omp critical(redjit_fault)
            if (!rc) rc = lrc;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t c = 0; c < nchunks; c++) {
            if (lrc || core_cancelled(pc->cancel)) continue;
            int r = each(pc, &ts, mine, c, arg);
            if (r) keep_first_fault(c, r, &ts.st.fault, fault_chunk, fault);
        }
        free(mine);
        cpu_tstate_free(&ts, pc);
    }
    return rc;
}

/* ---- map passes ------------------------------------------------------------------------ */

/* A map pass's walk: the blocks of [0, pc->dom.N), CHUNK positions a task, in
 * parallel; take(pc, st, pos, n, arg) gets each block once the VM has run
 * it (its values in st's registers).  Returns 0, or an error reported in
 * diag: out of memory, or the fault of the first chunk that had one. */
typedef void take_fn(const pass_ctx *pc, const vm_state *st, int64_t pos, int n, void *arg);

typedef struct taking {
    take_fn *take;
    void *arg;
} taking;

static int map_chunk(const pass_ctx *pc, tstate *ts, void *scratch, int64_t c, void *arg)
{
    const taking *tk = arg;
    int64_t cs = c * CHUNK, ce = cs + CHUNK < pc->dom.N ? cs + CHUNK : pc->dom.N;
    for (int64_t pos = cs; pos < ce;) {
        int nruns;
        int n = cpu_fill_block(pc, &ts->st, &ts->w, pos, ce, ts->runs, &nruns);
        int r = vm_run(&ts->st, n);
        if (r) return r;
        tk->take(pc, &ts->st, pos, n, tk->arg);
        pos += n;
    }
    return 0;
}

static int map_blocks(const pass_ctx *pc, take_fn *take, void *arg, util_diag *diag)
{
    int64_t nchunks = (pc->dom.N / CHUNK + (pc->dom.N % CHUNK != 0)), fault_chunk;
    vm_fault fault = {0};
    taking tk = {take, arg};
    int rc = cpu_each_chunk(pc, nchunks, 0, map_chunk, &tk, &fault_chunk, &fault);
    if (rc) return util_diag_set(diag, rc, "out of memory");
    if (fault_chunk != INT64_MAX) return cpu_report_fault(pc->p, pc->bufs, pc->temps, &fault, diag);
    return 0;
}

/* cpu_run_map's take: the block's values into the pass's temporary */
static void take_map(const pass_ctx *pc, const vm_state *st, int64_t pos, int n, void *arg)
{
    (void)arg;
    core_buf *t = &pc->temps[pc->ps->map_temp];
    int sz = plan_ct_size(pc->p->temps[pc->ps->map_temp].type);
    const unsigned char *v = vm_reg(st, st->prog->out[0]);
    for (int j = 0; j < n; j++)
        memcpy((unsigned char *)t->data + (size_t)out_offset(pc, t, pos + j) * sz, v + (size_t)j * sz, (size_t)sz);
}

int cpu_run_map(pass_ctx *pc, util_diag *diag) { return map_blocks(pc, take_map, NULL, diag); }

/* ---- per-output ranges ------------------------------------------------------------------- */

/* cpu_eval_ranges' take: the block's outputs' ranges into pc->olo and pc->osz */
struct take_ranges_arg {
    pass_ctx *pc;               /* the ranged pass (the walk is a sweep over its outputs) */
    const vm_prog *prog;
    ir *const *roots;           /* per reduced index: lo, hi; NULL where its range is uniform */
    const int *where;           /* the roots' registers */
};
static void take_ranges(const pass_ctx *sweep, const vm_state *st, int64_t pos, int n, void *arg)
{
    (void)sweep;
    const struct take_ranges_arg *ta = arg;
    pass_ctx *pc = ta->pc;
    for (int d = 0; d < pc->dom.nr; d++) {
        for (int j = 0; j < n; j++) {
            int64_t lo, hi;
            if (ta->roots[2 * d]) {
                lo = ((const int64_t *)vm_reg(st, ta->prog->out[ta->where[2 * d]]))[j];
                hi = ((const int64_t *)vm_reg(st, ta->prog->out[ta->where[2 * d + 1]]))[j];
            } else {
                lo = pc->dom.rlo[d];
                hi = pc->dom.rlo[d] + pc->dom.rsz[d];
            }
            pc->olo[(pos + j) * pc->dom.nr + d] = lo;
            int64_t ext = 0;
            if (hi > lo && __builtin_sub_overflow(hi, lo, &ext)) ext = INT64_MAX;
            pc->osz[(pos + j) * pc->dom.nr + d] = ext;
        }
    }
}

/* Ranged rows (plan_scan_ranged) tile the result's 0..K in order: the first
 * broken rule, in row order (core_scan_tile_error; the GPU checks the same
 * rules in out_range, one fault for one bad offset).  Row o ends where row
 * o + 1 starts (CSR bounds); the last row's end is its start and its count.
 * Where no rule is broken every row lies inside 0..K; the second loop holds
 * the walk to that all the same. */
static int check_tiling(const pass_ctx *pc, util_diag *diag)
{
    const int64_t nout = pc->dom.nout, K = pc->tile_len;
    const int pi = (int)(pc->ps - pc->p->passes);
    for (int64_t o = 0; o < nout; o++) {
        int64_t lo = pc->olo[o], e = lo + pc->osz[o];
        if (o == 0 && lo != 0) return core_scan_tile_error(pc->p, pi, CORE_TILE_START, o, lo, K, diag);
        if (o < nout - 1 && pc->olo[o + 1] < lo)
            return core_scan_tile_error(pc->p, pi, CORE_TILE_BACK, o, pc->olo[o + 1], K, diag);
        if (o == nout - 1 && e != K) return core_scan_tile_error(pc->p, pi, CORE_TILE_END, o, e, K, diag);
    }
    for (int64_t o = 0; o < nout; o++)
        if (pc->olo[o] < 0 || pc->olo[o] + pc->osz[o] > K)
            return util_diag_set(diag, RED_ERR_INTERNAL, "scan row %lld outside its result", (long long)o);
    return 0;
}

/* Evaluate the ranged reduced variables' bounds for every output. */
int cpu_eval_ranges(pass_ctx *pc, util_arena *a, util_diag *diag)
{
    const plan *p = pc->p;
    ir *roots[2 * RED_MAX_DIMS];
    for (int d = 0; d < pc->dom.nr; d++) {
        roots[2 * d] = p->vars[pc->dom.rvar[d]].lo;
        roots[2 * d + 1] = p->vars[pc->dom.rvar[d]].hi;
        if (!roots[2 * d]) {
            roots[2 * d] = roots[2 * d + 1] = NULL;
        }
    }
    /* a map-like sweep over the outputs computing every bound */
    int nroots = 0;
    ir *live[2 * RED_MAX_DIMS];
    int where[2 * RED_MAX_DIMS];
    for (int k = 0; k < 2 * pc->dom.nr; k++)
        if (roots[k]) {
            where[k] = nroots;
            live[nroots++] = roots[k];
        }
    vm_prog *prog;
    int rc = vm_compile(a, p, nroots, live, &prog);
    if (rc) return util_diag_set(diag, rc, "cannot compile range bounds");
    pass_ctx sweep = *pc;
    plan_pass fake = *pc->ps;
    fake.nreds = 0;
    sweep.ps = &fake;
    sweep.dom.nr = 0;
    sweep.dom.ranged = 0;
    sweep.dom.L = 1;
    sweep.dom.N = pc->dom.nout;
    sweep.prog = prog;
    sweep.nreds = 0;
    /* the run before's where it left them (each written whole below) */
    pc->range_bytes = (size_t)pc->dom.nout * pc->dom.nr * sizeof(int64_t) + 8;
    pc->offs_bytes = (size_t)(pc->dom.nout + 1) * sizeof(int64_t);
    pc->olo = core_scratch_take(pc->scratch_in, pc->range_bytes);
    pc->osz = core_scratch_take(pc->scratch_in, pc->range_bytes);
    pc->offs = core_scratch_take(pc->scratch_in, pc->offs_bytes);
    if (!pc->olo || !pc->osz || !pc->offs) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    /* in parallel (map_blocks): on one thread, short CSR ranges took as
     * long as the reduction after them */
    struct take_ranges_arg ta = {pc, prog, roots, where};
    rc = map_blocks(&sweep, take_ranges, &ta, diag);
    if (rc) return rc;
    if (core_cancelled(pc->cancel)) return util_diag_set(diag, RED_ERR_INTERRUPTED, "interrupted");
    if (pc->tiled && (rc = check_tiling(pc, diag))) return rc;
    /* the counts' prefix, pc's fields read once: the stores into offs could
     * alias them, a load each per output (cachegrind) */
    const int64_t nout = pc->dom.nout, *osz = pc->osz;
    const int nr = pc->dom.nr;
    int64_t *offs = pc->offs;
    offs[0] = 0;
    for (int64_t o = 0; o < nout; o++) {
        int64_t c = 1;
        for (int d = 0; d < nr; d++)
            if (!mul_ok(c, osz[o * nr + d], &c))
                return util_diag_set(diag, RED_ERR_LIMIT, "reduction domain too large");
        if (__builtin_add_overflow(offs[o], c, &offs[o + 1]))
            return util_diag_set(diag, RED_ERR_LIMIT, "reduction domain too large");
    }
    pc->dom.N = pc->offs[pc->dom.nout];
    if (pc->dom.N > CORE_MAX_DOMAIN)
        return util_diag_set(diag, RED_ERR_LIMIT, "reduction domain too large: %lld elements (at most 2^40)",
                             (long long)pc->dom.N);
    return 0;
}

