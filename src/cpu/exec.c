/*
 * exec.c -- runs a plan's passes on the CPU.
 *
 * A pass's domain is linearised: outputs (free indices, row-major) outermost,
 * each output's reduced box (row-major) inside.  The linear range is cut into
 * fixed CHUNK-element chunks processed in parallel; within a chunk, blocks of
 * up to VM_B elements go through the VM.  A block runs flat across short
 * rows where every load steps evenly with the position (flat_walk: one index
 * ramping past the rows' ends), else lies along one row of the innermost
 * index (RAMP: loads become contiguous or strided) or is walked element by
 * element (VEC: short rows, gathers).  Outputs wholly
 * inside a chunk are written directly; outputs crossing chunk boundaries
 * leave partial accumulators that are combined afterwards in chunk order.
 * Nothing depends on the number of threads, so results are bit-identical.
 */
#define _DEFAULT_SOURCE   /* madvise */
#include "exec.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define CHUNK ((int64_t)1 << 16)
#define RAMP_MIN 32     /* rows shorter than this are walked element-wise */
typedef struct cacc {
    plan_value v[PLAN_MAX_COMP];
    int64_t idx;
    int has;
} cacc;

typedef struct run {
    int64_t o, t0;      /* output and in-output offset of the first element */
    int start, len;
} run;

typedef struct pass_ctx {
    const plan *p;
    const plan_pass *ps;
    const core_buf *bufs;
    const plan_value *scalars;
    core_buf *temps;
    int nf, fvar[RED_MAX_DIMS];
    int64_t flo[RED_MAX_DIMS], fext[RED_MAX_DIMS];
    int nr, rvar[RED_MAX_DIMS];
    int ranged;                     /* per-output reduced ranges          */
    int64_t rlo[RED_MAX_DIMS], rsz[RED_MAX_DIMS];
    int64_t *olo, *osz;             /* ranged: [o * nr + d]               */
    int64_t *offs;                  /* ranged: prefix of counts, nout + 1 */
    int64_t nout, L, N;
    int flat, flat_ramp;            /* blocks run flat (flat_walk), the
                                       index at walk position flat_ramp
                                       ramping                            */
    vm_prog *prog;
    int nthreads;
    /* reductions */
    int nreds;
    const plan_red *reds;
    vm_prog **comb;                 /* user operators' combine programs   */
    int root_of[64];                /* first root register of reduction r */
    int key_root;
    int64_t nkeys;
    int keys_sorted;                /* scan_keys found them non-decreasing */
    const core_cancel *cancel;
} pass_ctx;

/* ---- helpers ------------------------------------------------------------------ */

static int mul_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }

/* ---- index errors ----------------------------------------------------------------- */

static int report_fault(const plan *p, const core_buf *bufs, const core_buf *temps, const vm_fault *f,
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
    if (rc == RED_ERR_INDEX) rc = report_fault(p, bufs, temps, &st.fault, diag);
    else if (rc) rc = util_diag_set(diag, rc, "cannot evaluate a range bound");
    vm_state_free(&st);
    return rc;
}

/* ---- the domain walk ------------------------------------------------------------ */

static int64_t out_count(const pass_ctx *pc, int64_t o)
{
    return pc->ranged ? pc->offs[o + 1] - pc->offs[o] : pc->L;
}

static int64_t out_start(const pass_ctx *pc, int64_t o)
{
    return pc->ranged ? pc->offs[o] : o * pc->L;
}

/* the output holding linear position `pos` (ranged: binary search) */
static int64_t locate(const pass_ctx *pc, int64_t pos)
{
    if (!pc->ranged) return pc->L ? pos / pc->L : 0;
    int64_t lo = 0, hi = pc->nout; /* offs[lo] <= pos < offs[hi] */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (pc->offs[mid] <= pos) lo = mid;
        else hi = mid;
    }
    return lo;
}

static const int64_t *red_lo(const pass_ctx *pc, int64_t o)
{
    return pc->ranged ? pc->olo + o * pc->nr : pc->rlo;
}
static const int64_t *red_sz(const pass_ctx *pc, int64_t o)
{
    return pc->ranged ? pc->osz + o * pc->nr : pc->rsz;
}

/* Offset of output o in the output temporary (strided by free var values). */
static int64_t out_offset(const pass_ctx *pc, const core_buf *t, int64_t o)
{
    if (pc->nf == 1) return (pc->flo[0] + o) * t->strides[0];   /* no division: one a row of short rows */
    int64_t off = 0;
    for (int d = pc->nf - 1; d >= 0; d--) {
        int64_t idx = pc->fext[d] ? o % pc->fext[d] : 0;
        o = pc->fext[d] ? o / pc->fext[d] : 0;
        off += (pc->flo[d] + idx) * t->strides[d];
    }
    return off;
}

typedef struct walker {
    int64_t *vec[2 * RED_MAX_DIMS];   /* free indices at 0.., reduced at RED_MAX_DIMS.. */
    int64_t *mem;                     /* one allocation for the ones the pass uses      */
} walker;

/* Every index of the pass held at its value at output o, element t of its
 * reduced box (lo, sz): the first element of a block that then ramps one. */
static void set_indices(const pass_ctx *pc, vm_state *st, int64_t o, int64_t t, const int64_t *lo,
                        const int64_t *sz)
{
    for (int d = pc->nf - 1; d >= 0; d--) {
        vm_var *v = &st->vars[pc->fvar[d]];
        v->mode = VAR_CONST;
        v->base = pc->flo[d] + (pc->fext[d] ? o % pc->fext[d] : 0);
        o = pc->fext[d] ? o / pc->fext[d] : 0;
    }
    for (int d = pc->nr - 1; d >= 0; d--) {
        vm_var *v = &st->vars[pc->rvar[d]];
        v->mode = VAR_CONST;
        v->base = lo[d] + (sz[d] ? t % sz[d] : 0);
        t = sz[d] ? t / sz[d] : 0;
    }
}

/* Fill the block starting at linear position `pos` (< end).  Sets the
 * variables in `st`, the runs, and returns the number of elements. */
static int fill_block(const pass_ctx *pc, vm_state *st, walker *w, int64_t pos, int64_t end,
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
         * loads do not read (flat_walk). */
        set_indices(pc, st, o, t, lo, sz);
        int r = pc->flat_ramp;
        st->vars[r < pc->nf ? pc->fvar[r] : pc->rvar[r - pc->nf]].mode = VAR_RAMP;
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
    if (pc->nr > 0 && sz[pc->nr - 1] > 0) rem = sz[pc->nr - 1] - t % sz[pc->nr - 1];
    else if (pc->nr == 0 && pc->ps->nreds == 0 && pc->nf > 0) rem = pc->fext[pc->nf - 1] - o % pc->fext[pc->nf - 1];

    if (rem >= RAMP_MIN || rem >= room) {
        int n = (int)(rem < room ? rem : room);
        set_indices(pc, st, o, t, lo, sz);
        if (pc->nr > 0) st->vars[pc->rvar[pc->nr - 1]].mode = VAR_RAMP;
        else if (pc->nf > 0) st->vars[pc->fvar[pc->nf - 1]].mode = VAR_RAMP;
        runs[0] = (run){o, t, 0, n};
        *nruns = 1;
        return n;
    }

    /* element by element */
    int64_t fi[RED_MAX_DIMS], ri[RED_MAX_DIMS];
    int64_t oo = o;
    for (int d = pc->nf - 1; d >= 0; d--) {
        fi[d] = pc->fext[d] ? oo % pc->fext[d] : 0;
        oo = pc->fext[d] ? oo / pc->fext[d] : 0;
    }
    int64_t tt = t;
    for (int d = pc->nr - 1; d >= 0; d--) {
        ri[d] = sz[d] ? tt % sz[d] : 0;
        tt = sz[d] ? tt / sz[d] : 0;
    }
    for (int d = 0; d < pc->nf; d++) {
        st->vars[pc->fvar[d]].mode = VAR_VEC;
        st->vars[pc->fvar[d]].vec = w->vec[d];
    }
    for (int d = 0; d < pc->nr; d++) {
        st->vars[pc->rvar[d]].mode = VAR_VEC;
        st->vars[pc->rvar[d]].vec = w->vec[RED_MAX_DIMS + d];
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
         * (CSR ranges of 16) spent 39% of their time here element by element */
        int64_t m = 1;
        if (pc->nr > 0) {
            int in = pc->nr - 1;
            m = sz[in] - ri[in];
            if (m > cnt - t) m = cnt - t;
            if (m > room - n) m = room - n;
        }
        for (int d = 0; d < pc->nf + pc->nr; d++) {
            int inner = d == pc->nf + pc->nr - 1 && pc->nr > 0;   /* rises along the row */
            int64_t v = d < pc->nf ? pc->flo[d] + fi[d] : lo[d - pc->nf] + ri[d - pc->nf];
            int64_t *vec = d < pc->nf ? w->vec[d] + n : w->vec[RED_MAX_DIMS + d - pc->nf] + n;
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
        int d = pc->nr - 1;
        if (d >= 0 && (ri[d] += m) == sz[d]) {
            ri[d--] = 0;
            while (d >= 0 && ++ri[d] == sz[d]) ri[d--] = 0;
        }
        if (t < cnt) continue;
        /* next output with a non-empty domain */
        do {
            o++;
            for (int e = pc->nf - 1; e >= 0 && ++fi[e] == pc->fext[e]; e--) fi[e] = 0;
        } while (o < pc->nout && pc->ps->nreds && out_count(pc, o) == 0);
        if (o >= pc->nout || n >= room) break;
        t = 0;
        cnt = pc->ps->nreds ? out_count(pc, o) : 1;
        lo = red_lo(pc, o);
        sz = red_sz(pc, o);
        for (int e = 0; e < pc->nr; e++) ri[e] = 0;
        runs[++nr] = (run){o, 0, n, 0};
    }
    *nruns = nr + 1;
    /* a variable that rises by one along the whole block (short CSR ranges
     * that follow each other) or stays put reads as a ramp or a constant:
     * contiguous loads instead of gathers */
    for (int d = 0; d < pc->nf + pc->nr; d++)
        if (ramp[d] || same[d]) {
            vm_var *v = &st->vars[d < pc->nf ? pc->fvar[d] : pc->rvar[d - pc->nf]];
            v->mode = ramp[d] ? VAR_RAMP : VAR_CONST;
            v->base = first[d];
        }
    return n;
}

/* ---- folds of built-in operators over a run ---------------------------------------- */

#define LANES 16

#define FOLD_SUM(T, ACC, init, OPX)                                            \
    do {                                                                       \
        const T *restrict x = vals;                                            \
        int j = 0;                                                             \
        if (n < LANES) { /* short runs (keys, ranges): no lanes to set up */   \
            ACC s = init;                                                      \
            for (; j < n; j++) s = OPX(s, x[j]);                               \
            r = s;                                                             \
            break;                                                             \
        }                                                                      \
        ACC l[LANES];                                                          \
        for (int k = 0; k < LANES; k++) l[k] = init;                           \
        for (; j + LANES <= n; j += LANES)                                     \
            for (int k = 0; k < LANES; k++) l[k] = OPX(l[k], x[j + k]);        \
        for (; j < n; j++) l[0] = OPX(l[0], x[j]);                             \
        for (int w = LANES / 2; w > 0; w /= 2)                                 \
            for (int k = 0; k < w; k++) l[k] = OPX(l[k], l[k + w]);            \
        r = l[0];                                                              \
    } while (0)

#define ADDF(a, b) ((a) + (b))
#define MULF(a, b) ((a) * (b))
#define ADDU(a, b) ((a) + (b))
#define MULU(a, b) ((a) * (b))
#define MINF(a, b) (((b) < (a) || (b) != (b)) ? (b) : (a))
#define MAXF(a, b) (((b) > (a) || (b) != (b)) ? (b) : (a))
#define MINI(a, b) ((b) < (a) ? (b) : (a))
#define MAXI(a, b) ((b) > (a) ? (b) : (a))
#define ANDI(a, b) ((a) & (b))
#define ORI(a, b) ((a) | (b))
#define XORI(a, b) ((a) ^ (b))

/* Combine two values of a built-in operator (a then b). */
static plan_value combine_builtin(int rop, int ct, plan_value a, plan_value b)
{
    plan_value r = a;
    int fl = CT_IS_FLOAT(ct), un = ct == CT_U32 || ct == CT_U64;
    switch (rop) {
    case ROP_SUM:
        if (fl) r.f = ct == CT_F32 ? (double)((float)a.f + (float)b.f) : a.f + b.f;
        else r.u = a.u + b.u;
        break;
    case ROP_PROD:
        if (fl) r.f = ct == CT_F32 ? (double)((float)a.f * (float)b.f) : a.f * b.f;
        else r.u = a.u * b.u;
        break;
    case ROP_MIN:
        if (fl) r.f = MINF(a.f, b.f);
        else if (un) r.u = MINI(a.u, b.u);
        else r.i = MINI(a.i, b.i);
        break;
    case ROP_MAX:
        if (fl) r.f = MAXF(a.f, b.f);
        else if (un) r.u = MAXI(a.u, b.u);
        else r.i = MAXI(a.i, b.i);
        break;
    case ROP_BAND: r.u = a.u & b.u; break;
    case ROP_BOR: r.u = a.u | b.u; break;
    case ROP_BXOR: r.u = a.u ^ b.u; break;
    case ROP_LAND: r.i = a.i && b.i; break;
    case ROP_LOR: r.i = a.i || b.i; break;
    }
    if (ct == CT_U32) r.u = (uint32_t)r.u;
    if (ct == CT_I32) r.i = (int32_t)r.i;
    return r;
}

/* The extreme of n floats and whether any of them is NaN, in 16-byte vectors
 * written out with GCC's vector extension (Clang has it too): GCC 12 kept
 * the lane-array form of this loop scalar, a maxss and a setp per element,
 * and max(x) over 2^24 f32 took 11.2 ms on the CI machine against sum(x)'s
 * 5.0.  The lanes keep `v CMP lane ? v : lane`, NaN aside in its own mask. */
typedef float vf32 __attribute__((vector_size(16)));
typedef int32_t vi32 __attribute__((vector_size(16)));
typedef double vf64 __attribute__((vector_size(16)));
typedef int64_t vi64 __attribute__((vector_size(16)));

#define DEF_EXTREME_F(name, T, VT, VI, CMP, init)                                   \
    static T name(const T *restrict x, int n, int *anynan)                          \
    {                                                                               \
        enum { W = 16 / sizeof(T), NV = 4 };                                        \
        T r = init;                                                                 \
        int nn = 0;                                                                 \
        if (n < NV * W) { /* short rows: no lanes to set up and fold */             \
            for (int j = 0; j < n; j++) {                                           \
                r = x[j] CMP r ? x[j] : r;                                          \
                nn |= x[j] != x[j];                                                 \
            }                                                                       \
            *anynan = nn;                                                           \
            return r;                                                               \
        }                                                                           \
        VT l[NV];                                                                   \
        VI nan[NV];                                                                 \
        for (int q = 0; q < NV; q++)                                                \
            for (int k = 0; k < W; k++) {                                           \
                l[q][k] = init;                                                     \
                nan[q][k] = 0;                                                      \
            }                                                                       \
        int j = 0;                                                                  \
        for (; j + NV * W <= n; j += NV * W)                                        \
            for (int q = 0; q < NV; q++) {                                          \
                VT v;                                                               \
                memcpy(&v, x + j + q * W, sizeof v);                                \
                VI m = (VI)(v CMP l[q]);                                            \
                l[q] = (VT)(((VI)v & m) | ((VI)l[q] & ~m));                         \
                nan[q] |= (VI)(v != v);                                             \
            }                                                                       \
        for (int q = 0; q < NV; q++)                                                \
            for (int k = 0; k < W; k++) {                                           \
                r = l[q][k] CMP r ? l[q][k] : r;                                    \
                nn |= nan[q][k] != 0;                                               \
            }                                                                       \
        for (; j < n; j++) {                                                        \
            r = x[j] CMP r ? x[j] : r;                                              \
            nn |= x[j] != x[j];                                                     \
        }                                                                           \
        *anynan = nn;                                                               \
        return r;                                                                   \
    }

DEF_EXTREME_F(max_f32, float, vf32, vi32, >, -INFINITY)
DEF_EXTREME_F(min_f32, float, vf32, vi32, <, INFINITY)
DEF_EXTREME_F(max_f64, double, vf64, vi64, >, -INFINITY)
DEF_EXTREME_F(min_f64, double, vf64, vi64, <, INFINITY)

/* min / max of floats: NaN wins, as in NumPy */
#define FOLD_MINMAX_F(fn)                                                      \
    do {                                                                       \
        int anynan;                                                            \
        double r = fn(vals, n, &anynan);                                       \
        out.f = anynan ? (double)NAN : r;                                      \
    } while (0)

/* Fold n values (compute type ct) into r with a built-in operator. */
static plan_value fold_values(int rop, int ct, const void *vals, int n)
{
    plan_value out = plan_identity(rop, ct);
#define CASE_T(CT, T, ACC, init, OPX, SET)   \
    case CT: {                               \
        ACC r;                               \
        FOLD_SUM(T, ACC, init, OPX);         \
        SET;                                 \
        break;                               \
    }
    switch (rop) {
    case ROP_SUM:
        switch (ct) {
            CASE_T(CT_I64, int64_t, uint64_t, 0, ADDU, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, 0, ADDU, out.u = r)
            CASE_T(CT_F32, float, float, 0.0f, ADDF, out.f = r)
            CASE_T(CT_F64, double, double, 0.0, ADDF, out.f = r)
        }
        break;
    case ROP_PROD:
        switch (ct) {
            CASE_T(CT_I64, int64_t, uint64_t, 1, MULU, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, 1, MULU, out.u = r)
            CASE_T(CT_F32, float, float, 1.0f, MULF, out.f = r)
            CASE_T(CT_F64, double, double, 1.0, MULF, out.f = r)
        }
        break;
    case ROP_MIN:
        switch (ct) {
            CASE_T(CT_BOOL, uint8_t, uint8_t, 1, MINI, out.i = r)
            CASE_T(CT_I32, int32_t, int32_t, INT32_MAX, MINI, out.i = r)
            CASE_T(CT_I64, int64_t, int64_t, INT64_MAX, MINI, out.i = r)
            CASE_T(CT_U32, uint32_t, uint32_t, UINT32_MAX, MINI, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, UINT64_MAX, MINI, out.u = r)
        case CT_F32: FOLD_MINMAX_F(min_f32); break;
        case CT_F64: FOLD_MINMAX_F(min_f64); break;
        }
        break;
    case ROP_MAX:
        switch (ct) {
            CASE_T(CT_BOOL, uint8_t, uint8_t, 0, MAXI, out.i = r)
            CASE_T(CT_I32, int32_t, int32_t, INT32_MIN, MAXI, out.i = r)
            CASE_T(CT_I64, int64_t, int64_t, INT64_MIN, MAXI, out.i = r)
            CASE_T(CT_U32, uint32_t, uint32_t, 0, MAXI, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, 0, MAXI, out.u = r)
        case CT_F32: FOLD_MINMAX_F(max_f32); break;
        case CT_F64: FOLD_MINMAX_F(max_f64); break;
        }
        break;
    case ROP_BAND:
    case ROP_LAND:
        switch (ct) {
            CASE_T(CT_BOOL, uint8_t, uint8_t, 1, ANDI, out.i = r)
            CASE_T(CT_I32, int32_t, int32_t, -1, ANDI, out.i = r)
            CASE_T(CT_I64, int64_t, int64_t, -1, ANDI, out.i = r)
            CASE_T(CT_U32, uint32_t, uint32_t, UINT32_MAX, ANDI, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, UINT64_MAX, ANDI, out.u = r)
        }
        break;
    case ROP_BOR:
    case ROP_LOR:
        switch (ct) {
            CASE_T(CT_BOOL, uint8_t, uint8_t, 0, ORI, out.i = r)
            CASE_T(CT_I32, int32_t, int32_t, 0, ORI, out.i = r)
            CASE_T(CT_I64, int64_t, int64_t, 0, ORI, out.i = r)
            CASE_T(CT_U32, uint32_t, uint32_t, 0, ORI, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, 0, ORI, out.u = r)
        }
        break;
    case ROP_BXOR:
        switch (ct) {
            CASE_T(CT_BOOL, uint8_t, uint8_t, 0, XORI, out.i = r)
            CASE_T(CT_I32, int32_t, int32_t, 0, XORI, out.i = r)
            CASE_T(CT_I64, int64_t, int64_t, 0, XORI, out.i = r)
            CASE_T(CT_U32, uint32_t, uint32_t, 0, XORI, out.u = r)
            CASE_T(CT_U64, uint64_t, uint64_t, 0, XORI, out.u = r)
        }
        break;
    }
#undef CASE_T
    return out;
}

/* argmin / argmax: the first extreme; NaN counts as the extreme. */
static int arg_better(int rop, int ct, plan_value cand, plan_value best)
{
    if (CT_IS_FLOAT(ct)) {
        if (cand.f != cand.f) return best.f == best.f;
        return rop == ROP_ARGMAX ? cand.f > best.f : cand.f < best.f;
    }
    if (ct == CT_U32 || ct == CT_U64) return rop == ROP_ARGMAX ? cand.u > best.u : cand.u < best.u;
    return rop == ROP_ARGMAX ? cand.i > best.i : cand.i < best.i;
}

/* A run's candidate for argmin / argmax, in two passes over values that are
 * in L1: the run's min or max (fold_values, vectorised; NaN where there is
 * one), then, only when it beats the best so far, the first element equal to
 * it (the first NaN).  One pass comparing each element with the best took
 * argmax(x) over 2^24 f32 to 31-45 ms on the CI machine, against max(x)'s 11. */
#define FIRST_OF(T, m)                                                         \
    do {                                                                       \
        const T *x = vals;                                                     \
        if ((m) != (m))                                                        \
            while (x[j] == x[j]) j++;                                          \
        else                                                                   \
            while (x[j] != (m)) j++;                                           \
    } while (0)

static void fold_arg(int rop, int ct, const void *vals, int n, int64_t idx0, cacc *a)
{
    if (n <= 0) return;
    plan_value m = fold_values(rop == ROP_ARGMAX ? ROP_MAX : ROP_MIN, ct, vals, n);
    if (a->has && !arg_better(rop, ct, m, a->v[0])) return;
    int j = 0;
    switch (ct) {
    case CT_BOOL: FIRST_OF(uint8_t, (uint8_t)m.i); break;
    case CT_I32: FIRST_OF(int32_t, (int32_t)m.i); break;
    case CT_I64: FIRST_OF(int64_t, m.i); break;
    case CT_U32: FIRST_OF(uint32_t, (uint32_t)m.u); break;
    case CT_U64: FIRST_OF(uint64_t, m.u); break;
    case CT_F32: FIRST_OF(float, (float)m.f); break;
    case CT_F64: FIRST_OF(double, m.f); break;
    }
    a->v[0] = core_read_ct(vals, ct, j);
    a->idx = idx0 + j;
    a->has = 1;
}

/* ---- user-defined operators ----------------------------------------------------------- */

typedef struct ustate {
    vm_state st;
    unsigned char *work;            /* ncomp * VM_B * 8 */
} ustate;

static void deinterleave(int size, const unsigned char *src, unsigned char *a, unsigned char *b, int h)
{
    for (int j = 0; j < h; j++) {
        memcpy(a + (size_t)j * size, src + (size_t)(2 * j) * size, (size_t)size);
        memcpy(b + (size_t)j * size, src + (size_t)(2 * j + 1) * size, (size_t)size);
    }
}

/* combine(acc, x) for one element pair, through the combine program */
static void user_combine1(const plan_red *rd, ustate *u, plan_value *acc, const plan_value *x)
{
    for (int c = 0; c < rd->ncomp; c++) {
        int sz = plan_ct_size(rd->acc[c]);
        void *pa = vm_param_reg(&u->st, 2 * c), *pb = vm_param_reg(&u->st, 2 * c + 1);
        plan_value va = acc[c], vb = x[c];
        unsigned char ta[8], tb[8];
        /* plan_value holds i32/u32/f32 widened: narrow through the cast path */
        core_write_ct(ta, rd->acc[c], 0, va);
        core_write_ct(tb, rd->acc[c], 0, vb);
        if (pa) memcpy(pa, ta, (size_t)sz);
        if (pb) memcpy(pb, tb, (size_t)sz);
    }
    vm_run(&u->st, 1);
    for (int c = 0; c < rd->ncomp; c++) acc[c] = core_read_ct(vm_reg(&u->st, u->st.prog->out[c]), rd->acc[c], 0);
}

/* Fold n elements (component registers vals[c]) in order into acc by a
 * pairwise tree over adjacent elements: order preserved, vectorised. */
static void fold_user(const plan_red *rd, ustate *u, void *const *vals, int n, cacc *a)
{
    if (n <= 0) return;
    int k = rd->ncomp;
    unsigned char *w[PLAN_MAX_COMP];
    for (int c = 0; c < k; c++) {
        w[c] = u->work + (size_t)c * VM_B * 8;
        memcpy(w[c], vals[c], (size_t)n * plan_ct_size(rd->acc[c]));
    }
    int m = n;
    while (m > 1) {
        int h = m / 2;
        for (int c = 0; c < k; c++) {
            int sz = plan_ct_size(rd->acc[c]);
            void *pa = vm_param_reg(&u->st, 2 * c), *pb = vm_param_reg(&u->st, 2 * c + 1);
            /* parameters not used by the combine have no register: use a
             * scratch so the layout stays the same */
            unsigned char *da = pa ? pa : (unsigned char *)u->st.scratch;
            unsigned char *db = pb ? pb : (unsigned char *)u->st.scratch2;
            deinterleave(sz, w[c], da, db, h);
        }
        vm_run(&u->st, h);
        for (int c = 0; c < k; c++) {
            int sz = plan_ct_size(rd->acc[c]);
            if (m & 1) memcpy(w[c] + (size_t)h * sz, w[c] + (size_t)(m - 1) * sz, (size_t)sz);
            memcpy(w[c], vm_reg(&u->st, u->st.prog->out[c]), (size_t)h * sz);
        }
        m = h + (m & 1);
    }
    plan_value x[PLAN_MAX_COMP];
    for (int c = 0; c < k; c++) x[c] = core_read_ct(w[c], rd->acc[c], 0);
    if (!a->has) {
        memcpy(a->v, x, sizeof(plan_value) * k);
        a->has = 1;
    } else {
        user_combine1(rd, u, a->v, x);
    }
}

/* ---- accumulators ------------------------------------------------------------------- */

static void acc_init(const plan_red *rd, cacc *a)
{
    memset(a, 0, sizeof *a);
    a->idx = -1;
    for (int c = 0; c < rd->ncomp; c++)
        a->v[c] = rd->rop == ROP_USER ? rd->identity[c] : plan_identity(rd->rop, rd->acc[c]);
}

/* The type a built-in accumulator combines in: f32 sums carry their running
 * total in f64 across blocks, chunks and partitions (each block of at most
 * VM_B values is summed in f32), and round to f32 once, when written.  A
 * keyed pass folds every element of a partition into one accumulator per
 * key, so an f32 total would stall once its ulp passes the values added:
 * 2^32 values k/16 over five keys came out 5.6% low. */
static int acc_ct(const plan_red *rd)
{
    return rd->rop == ROP_SUM && rd->acc[0] == CT_F32 ? CT_F64 : rd->acc[0];
}

static void acc_fold_run(const plan_red *rd, ustate *u, vm_state *st, int root, const run *r,
                         int64_t idx0, cacc *a)
{
    int start = r->start, n = r->len;
    if (rd->rop == ROP_USER) {
        void *vals[PLAN_MAX_COMP];
        for (int c = 0; c < rd->ncomp; c++)
            vals[c] = (unsigned char *)vm_reg(st, st->prog->out[root + c]) + (size_t)start * plan_ct_size(rd->acc[c]);
        fold_user(rd, u, vals, n, a);
        return;
    }
    const unsigned char *v = (const unsigned char *)vm_reg(st, st->prog->out[root]) + (size_t)start * plan_ct_size(rd->acc[0]);
    if (rd->rop == ROP_ARGMIN || rd->rop == ROP_ARGMAX) {
        fold_arg(rd->rop, rd->acc[0], v, n, idx0, a);
        return;
    }
    plan_value x = fold_values(rd->rop, rd->acc[0], v, n);
    a->v[0] = a->has ? combine_builtin(rd->rop, acc_ct(rd), a->v[0], x) : x;
    a->has = 1;
}

static void acc_combine(const plan_red *rd, ustate *u, cacc *a, const cacc *b)
{
    if (!b->has) return;
    if (!a->has) {
        *a = *b;
        return;
    }
    if (rd->rop == ROP_USER) {
        user_combine1(rd, u, a->v, b->v);
    } else if (rd->rop == ROP_ARGMIN || rd->rop == ROP_ARGMAX) {
        if (arg_better(rd->rop, rd->acc[0], b->v[0], a->v[0]) ||
            (!arg_better(rd->rop, rd->acc[0], a->v[0], b->v[0]) && b->idx < a->idx))
            *a = *b;
    } else {
        a->v[0] = combine_builtin(rd->rop, acc_ct(rd), a->v[0], b->v[0]);
    }
}

static void acc_write(const pass_ctx *pc, const plan_red *rd, const cacc *a, int64_t off)
{
    for (int c = 0; c < rd->ncomp; c++) {
        core_buf *t = &pc->temps[rd->temp[c]];
        if (rd->rop == ROP_ARGMIN || rd->rop == ROP_ARGMAX)
            ((int64_t *)t->data)[off] = a->has ? a->idx : -1;
        else
            core_write_ct((void *)t->data, rd->acc[c], off, a->v[c]);
    }
}

/* ---- per-thread state -------------------------------------------------------------------- */

typedef struct tstate {
    vm_state st;
    walker w;
    run *runs;
    ustate *us;         /* per reduction (user ops only) */
    cacc *cur;          /* per reduction */
    int ok;
} tstate;

static int tstate_init(tstate *ts, const pass_ctx *pc)
{
    memset(ts, 0, sizeof *ts);
    if (vm_state_init(&ts->st, pc->prog, pc->p->nvars)) return RED_ERR_NOMEM;
    ts->st.bufs = pc->bufs;
    ts->st.temps = pc->temps;
    ts->st.scalars = pc->scalars;
    ts->st.scalar_info = pc->p->scalars;
    int nv = pc->nf + pc->nr;
    ts->w.mem = malloc((size_t)(nv > 0 ? nv : 1) * VM_B * sizeof(int64_t));
    if (!ts->w.mem) return RED_ERR_NOMEM;
    for (int d = 0; d < pc->nf; d++) ts->w.vec[d] = ts->w.mem + (size_t)d * VM_B;
    for (int d = 0; d < pc->nr; d++) ts->w.vec[RED_MAX_DIMS + d] = ts->w.mem + (size_t)(pc->nf + d) * VM_B;
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

static void tstate_free(tstate *ts, const pass_ctx *pc)
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

/* ---- reduction passes ------------------------------------------------------------------- */

typedef struct partial {
    int64_t o;          /* -1: none */
    cacc *acc;          /* nreds */
} partial;

static int64_t arg_index(const pass_ctx *pc, int64_t o, int64_t t0)
{
    /* one reduced index: its value; several: row-major position in the box */
    return pc->nr == 1 ? red_lo(pc, o)[0] + t0 : t0;
}

/* A parallel pass reports the fault of its first chunk or partition that
 * had one, whichever thread found it. */
static void keep_first_fault(int64_t at, int r, const vm_fault *f, int64_t *fault_at, vm_fault *fault)
{
#pragma omp critical(redjit_fault)
    if (at < *fault_at) {
        *fault_at = at;
        *fault = *f;
        if (!fault->code) fault->code = r;
    }
}

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
 * the same order as fold_values for fewer than LANES values, so the same
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
                core_write_ct(dst, ct, out_offset(pc, t0, runs[k].o), fold_values(rd->rop, ct, y, n)); \
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
                    a.has = 0;   /* fold_arg sets the rest: the run is not empty */
                    fold_arg(rd->rop, ct, y, runs[k].len, arg_index(pc, runs[k].o, 0), &a);
                    ((int64_t *)dst)[off] = a.idx;
                } else {
                    core_write_ct(dst, ct, off, fold_values(rd->rop, ct, y, runs[k].len));
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
        int n = fill_block(pc, &ts->st, &ts->w, pos, ce, ts->runs, &nruns);
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
                acc_fold_run(&pc->reds[q], &ts->us[q], &ts->st, pc->root_of[q], r,
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
 * On the 2-core development machine (f32), element by element against flat
 * (with write_whole and the parallel eval_ranges): sums of 2^22 rows of 4,
 * 144 ms against 9.3 (NumPy's A.sum(axis=1): 38); rows of 64, 9.3 against
 * 3.7; sum(A) over 2^22 x 4, 54.6 against 1.5; CSR ranges of 3 over 2^24
 * values, 237 against 50 (np.add.reduceat: 49). */
static void flat_walk(pass_ctx *pc)
{
    pc->flat = 0;
    int m = pc->nf + pc->nr;
    if (pc->nr == 0 || pc->N < 2 || (pc->ranged && pc->nr != 1)) return;
    int id[2 * RED_MAX_DIMS];
    int64_t lo[2 * RED_MAX_DIMS], ext[2 * RED_MAX_DIMS], step[2 * RED_MAX_DIMS];
    int last = -1;
    for (int w = 0; w < m; w++) {
        id[w] = w < pc->nf ? pc->fvar[w] : pc->rvar[w - pc->nf];
        lo[w] = w < pc->nf ? pc->flo[w] : pc->rlo[w - pc->nf];
        ext[w] = w < pc->nf ? pc->fext[w] : pc->rsz[w - pc->nf];
        if (ext[w] > 1) last = w;
    }
    if (pc->ranged) {
        /* the reduced index over all ranges, end to end; rows of VM_B
         * and up fill their blocks on their own */
        int64_t next = 0, longest = 0;
        int seen = 0;
        for (int64_t o = 0; o < pc->nout; o++) {
            int64_t sz = pc->osz[o];
            if (sz == 0) continue;
            if (seen && pc->olo[o] != next) return;
            if (!seen) lo[m - 1] = pc->olo[o];
            seen = 1;
            if (__builtin_add_overflow(pc->olo[o], sz, &next)) return;
            longest = sz > longest ? sz : longest;
        }
        if (longest >= VM_B) return;
        ext[m - 1] = pc->N;
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
            if (pc->ranged ? w < pc->nf && c[w] != 0
                           : ext[w] > 1 && (__builtin_mul_overflow(c[last], step[w], &want) || c[w] != want))
                return;
        }
    }
    pc->flat = 1;
    pc->flat_ramp = last;
}

static int run_reduction(pass_ctx *pc, util_diag *diag)
{
    const plan *p = pc->p;
    /* an output with an empty domain is the identity; the walk writes every
     * other (a regular pass: all of them, unless L is 0) */
    for (int q = 0; (pc->ranged || pc->L == 0) && q < pc->nreds; q++) {
        cacc a;
        acc_init(&pc->reds[q], &a);
        const core_buf *t = &pc->temps[pc->reds[q].temp[0]];
        for (int64_t o = 0; o < pc->nout; o++)
            if (out_count(pc, o) == 0) acc_write(pc, &pc->reds[q], &a, out_offset(pc, t, o));
    }
    flat_walk(pc);
    int64_t nchunks = (pc->N / CHUNK + (pc->N % CHUNK != 0));
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
            int lrc = tstate_init(&ts, pc);
            if (lrc) {
#pragma omp critical(redjit_fault)
                if (!rc) rc = lrc;
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t c = 0; c < nchunks; c++) {
                if (lrc || core_cancelled(pc->cancel)) continue;
                int64_t cs = c * CHUNK, ce = cs + CHUNK < pc->N ? cs + CHUNK : pc->N;
                int r = run_chunk(pc, &ts, cs, ce, &parts[2 * c], &parts[2 * c + 1]);
                if (r) keep_first_fault(c, r, &ts.st.fault, &fault_chunk, &fault);
            }
            tstate_free(&ts, pc);
        }
    }
    if (!rc && fault_chunk != INT64_MAX)
        rc = fault.code == RED_ERR_INDEX ? report_fault(p, pc->bufs, pc->temps, &fault, diag) : fault.code;

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
                for (int q = 0; q < pc->nreds; q++) acc_combine(&pc->reds[q], &us[q], &acc[q], &parts[i].acc[q]);
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

/* ---- column reductions: a tile of outputs at a time -------------------------------------- */

/* Whether the pass reads across its outputs faster than along them: every
 * load's step in memory for the innermost free index is smaller than for the
 * reduced one (column sums of a row-major matrix).  Walking one output at a
 * time there touches a new page per element (sum over i of a 4096 x 4096
 * f32 matrix: 140 ms, the row sums 5.5). */
static int column_layout(const pass_ctx *pc)
{
    if (pc->ranged || pc->nr != 1 || pc->nf < 1 || pc->L < 2 || pc->fext[pc->nf - 1] < 16) return 0;
    int fv = pc->fvar[pc->nf - 1], rv = pc->rvar[0], nloads = 0;
    for (int q = 0; q < pc->nreds; q++) {
        const plan_red *rd = &pc->reds[q];
        int ct = rd->acc[0];
        if (rd->ncomp != 1) return 0;
        if (rd->rop == ROP_SUM || rd->rop == ROP_PROD) {
            if (ct != CT_I64 && ct != CT_U64 && ct != CT_F32 && ct != CT_F64) return 0;
        } else if (rd->rop == ROP_MIN || rd->rop == ROP_MAX) {
            if (ct == CT_BOOL) return 0;
        } else {
            return 0;
        }
    }
    for (int i = 0; i < pc->prog->ninstr; i++) {
        const vm_instr *in = &pc->prog->instr[i];
        if (in->kind != VI_LOAD || in->invariant) continue;
        if (!in->affine) return 0;
        const core_buf *b = in->slot >= 0 ? &pc->bufs[in->slot] : &pc->temps[-1 - in->slot];
        int64_t sf = 0, sr = 0;
        for (int d = 0; d < in->nsub; d++)
            for (int t = 0; t < in->aff[d].nterm; t++) {
                int64_t c = in->aff[d].coef[t] * b->strides[d];
                if (in->aff[d].var[t] == fv) sf += c;
                if (in->aff[d].var[t] == rv) sr += c;
            }
        if (sf < 0) sf = -sf;
        if (sr < 0) sr = -sr;
        if (sf >= sr) return 0;
        nloads++;
    }
    return nloads > 0;
}

/* acc[j] = op(acc[j], v[j]) over a tile, typed (the accumulators as
 * combine_builtin keeps them: f32 sums in f64, NaN wins min and max).  The
 * tile's accumulators are doubles, uint64s or int64s (col_kind), always read
 * and written as that type: through plan_value's union the loop stayed scalar. */
enum { COL_F, COL_U, COL_I };

static int col_kind(int rop, int ct)
{
    if (CT_IS_FLOAT(ct)) return COL_F;
    if (rop == ROP_SUM || rop == ROP_PROD || ct == CT_U32 || ct == CT_U64) return COL_U;
    return COL_I;
}

static void col_set(int kind, void *acc, int j, plan_value v)
{
    if (kind == COL_F) ((double *)acc)[j] = v.f;
    else if (kind == COL_U) ((uint64_t *)acc)[j] = v.u;
    else ((int64_t *)acc)[j] = v.i;
}

static plan_value col_get(int kind, const void *acc, int j)
{
    plan_value v = {.u = 0};
    if (kind == COL_F) v.f = ((const double *)acc)[j];
    else if (kind == COL_U) v.u = ((const uint64_t *)acc)[j];
    else v.i = ((const int64_t *)acc)[j];
    return v;
}

#define COL_LOOP(T, TA, EXPR)                                                  \
    do {                                                                       \
        const T *restrict v = vals;                                            \
        TA *restrict a = acc;                                                  \
        for (int j = 0; j < n; j++) {                                          \
            T x = v[j];                                                        \
            a[j] = EXPR;                                                       \
        }                                                                      \
    } while (0)

#define COL_EXTREME(OPI, OPF)                                                             \
    switch (ct) {                                                                         \
    case CT_I32: COL_LOOP(int32_t, int64_t, OPI(a[j], (int64_t)x)); break;                \
    case CT_I64: COL_LOOP(int64_t, int64_t, OPI(a[j], x)); break;                         \
    case CT_U32: COL_LOOP(uint32_t, uint64_t, OPI(a[j], (uint64_t)x)); break;             \
    case CT_U64: COL_LOOP(uint64_t, uint64_t, OPI(a[j], x)); break;                       \
    case CT_F32: COL_LOOP(float, double, OPF(a[j], (double)x)); break;                    \
    case CT_F64: COL_LOOP(double, double, OPF(a[j], x)); break;                           \
    }

static void col_fold(int rop, int ct, const void *vals, int n, void *acc)
{
    switch (rop) {
    case ROP_SUM:
        switch (ct) {
        case CT_I64: COL_LOOP(int64_t, uint64_t, a[j] + (uint64_t)x); break;
        case CT_U64: COL_LOOP(uint64_t, uint64_t, a[j] + x); break;
        case CT_F32: COL_LOOP(float, double, a[j] + (double)x); break;
        case CT_F64: COL_LOOP(double, double, a[j] + x); break;
        }
        break;
    case ROP_PROD:
        switch (ct) {
        case CT_I64: COL_LOOP(int64_t, uint64_t, a[j] * (uint64_t)x); break;
        case CT_U64: COL_LOOP(uint64_t, uint64_t, a[j] * x); break;
        case CT_F32: COL_LOOP(float, double, (double)((float)a[j] * x)); break;
        case CT_F64: COL_LOOP(double, double, a[j] * x); break;
        }
        break;
    case ROP_MIN: COL_EXTREME(MINI, MINF); break;
    case ROP_MAX: COL_EXTREME(MAXI, MAXF); break;
    }
}

/* Two reduced positions at once, a[j] = (a[j] + x0[j]) + x1[j]: the same
 * values as two col_folds (NaN's sign aside: the compiler may swap an
 * addition's operands, which decides which NaN comes out), with half the
 * accumulator's loads and stores (a row of 4096 f64 accumulators is 32 KiB,
 * more than L1 beside the data).  Sums of floats only; returns 0 where it
 * has no loop (fold one at a time). */
static int col_fold2(int rop, int ct, const void *v0, const void *v1, int n, void *acc)
{
    if (rop != ROP_SUM) return 0;
    if (ct == CT_F32) {
        const float *restrict x0 = v0, *restrict x1 = v1;
        double *restrict a = acc;
        for (int j = 0; j < n; j++) a[j] = (a[j] + (double)x0[j]) + (double)x1[j];
        return 1;
    }
    if (ct == CT_F64) {
        const double *restrict x0 = v0, *restrict x1 = v1;
        double *restrict a = acc;
        for (int j = 0; j < n; j++) a[j] = (a[j] + x0[j]) + x1[j];
        return 1;
    }
    return 0;
}

#define COL_TILE VM_B

/* The outputs in tiles of COL_TILE along the innermost free index; for each
 * reduced position in order, the tile's elements as one block (the free index
 * a ramp), folded element-wise.  A task takes a group of up to COL_GROUP
 * neighbouring tiles and, at each reduced position, runs them one after
 * the other, so it reads a longer contiguous stretch of each row (a tile at
 * a time, 4 KiB of f32 and each a page of its own, left the hardware
 * prefetcher starting over at every one).  The reduced positions are cut
 * into chunks of COL_RCHUNK, a task each, whose partial folds are combined
 * in chunk order afterwards: the same bits on any number of threads, and
 * threads that share a matrix's rows instead of its columns, each reading
 * whole rows (two threads each summing half the columns of a 4096 x 4096
 * f32 matrix read 8 KiB a row and jumped 16: 5.4 ms, NumPy 4.2).  Returns
 * RED_ERR_INDEX on an index error without a message (the caller reruns the
 * pass one output at a time, which reports it as ever). */
#define COL_GROUP 16
#define COL_RCHUNK 256
#define COL_PART_MAX ((int64_t)256 << 20)

static int run_columns_chunks(pass_ctx *pc, util_diag *diag, int one_chunk);
static int run_columns(pass_ctx *pc, util_diag *diag) { return run_columns_chunks(pc, diag, 0); }

static int run_columns_chunks(pass_ctx *pc, util_diag *diag, int one_chunk)
{
    int64_t F = pc->fext[pc->nf - 1];
    int64_t nrow = pc->nout / F, rchunk = one_chunk ? pc->L : COL_RCHUNK;
    int64_t nrch = (pc->L + rchunk - 1) / rchunk;
    int64_t tw = COL_TILE, gsz;
    if (nrch > 1) {
        /* the chunks share the work out: a group is a whole row of tiles */
        gsz = (F + tw - 1) / tw;
    } else {
        /* tiles as wide as a block, fewer vm_run calls per element, unless
         * that leaves fewer than 4 tiles per thread; a row's tiles shared
         * out evenly among the threads (the grouping changes no output's
         * order) */
        while (tw > 16 && nrow * ((F + tw - 1) / tw) < 4 * (int64_t)pc->nthreads) tw /= 2;
        int64_t per_thread = (nrow * ((F + tw - 1) / tw) + pc->nthreads - 1) / pc->nthreads;
        gsz = per_thread < (F + tw - 1) / tw ? per_thread : (F + tw - 1) / tw;
    }
    int64_t tiles_per_row = (F + tw - 1) / tw;
    if (gsz > COL_GROUP) gsz = COL_GROUP;
    if (gsz < 1) gsz = 1;
    int64_t groups_per_row = (tiles_per_row + gsz - 1) / gsz;
    int64_t ntasks = nrow * groups_per_row * nrch;
    /* chunks' partial folds, [q][row][chunk][column], when there are chunks:
     * N / 32 bytes for a real matrix, but a view with a zero stride can have
     * many more outputs than elements; past COL_PART_MAX the pass folds each
     * output in one chunk, as it did before chunks */
    uint64_t *part = NULL;
    int64_t pbytes;
    if (nrch > 1 && (!mul_ok(nrow * F, nrch * 8, &pbytes) || !mul_ok(pbytes, pc->nreds, &pbytes) ||
                     pbytes > COL_PART_MAX))
        return run_columns_chunks(pc, diag, 1);
    if (nrch > 1) {
        part = malloc((size_t)pbytes);
        if (!part) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    }
    int rc = 0, bad = 0, combine = 0;
    int nt = pc->nthreads;
    if (ntasks < nt) nt = (int)(ntasks > 0 ? ntasks : 1);
#pragma omp parallel num_threads(nt)
    {
        tstate ts;
        int lrc = tstate_init(&ts, pc);
        /* per reduction, gsz tiles of accumulators */
        size_t per_red = (size_t)gsz * COL_TILE;
        uint64_t *acc = malloc((size_t)pc->nreds * per_red * sizeof *acc);
        if (!lrc && !acc) lrc = RED_ERR_NOMEM;
        if (lrc) {
#pragma omp critical(redjit_fault)
            if (!rc) rc = lrc;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < ntasks; task++) {
            if (lrc || __atomic_load_n(&bad, __ATOMIC_RELAXED) || core_cancelled(pc->cancel)) continue;
            int64_t grp = task / nrch, ch = task % nrch;
            int64_t row = grp / groups_per_row, first = grp % groups_per_row * gsz;
            int64_t last = first + gsz < tiles_per_row ? first + gsz : tiles_per_row;   /* tiles [first, last) */
            int64_t t0 = ch * rchunk, t1 = t0 + rchunk < pc->L ? t0 + rchunk : pc->L;
            int64_t oo = row;
            for (int d = pc->nf - 2; d >= 0; d--) {
                vm_var *v = &ts.st.vars[pc->fvar[d]];
                v->mode = VAR_CONST;
                v->base = pc->flo[d] + (pc->fext[d] ? oo % pc->fext[d] : 0);
                oo = pc->fext[d] ? oo / pc->fext[d] : 0;
            }
            vm_var *vf = &ts.st.vars[pc->fvar[pc->nf - 1]], *vr = &ts.st.vars[pc->rvar[0]];
            vf->mode = VAR_RAMP;
            vr->mode = VAR_CONST;
            int64_t c0 = first * tw, c1 = last * tw < F ? last * tw : F;   /* the group's columns */
            for (int q = 0; q < pc->nreds; q++) {
                const plan_red *rd = &pc->reds[q];
                plan_value id = plan_identity(rd->rop, acc_ct(rd));
                int kind = col_kind(rd->rop, rd->acc[0]);
                for (int64_t j = 0; j < c1 - c0; j++) col_set(kind, acc + q * per_red, (int)j, id);
            }
            int r = 0;
            for (int64_t t = t0; t < t1 && !r; t += 2) {
                for (int64_t f0 = c0; f0 < c1 && !r; f0 += tw) {
                    int n = (int)(c1 - f0 < tw ? c1 - f0 : tw);
                    vf->base = pc->flo[pc->nf - 1] + f0;
                    vr->base = pc->rlo[0] + t;
                    r = vm_run(&ts.st, n);
                    /* positions t and t + 1 of the tile, in order; together
                     * where position t's values are read in place (the next
                     * vm_run does not overwrite them) */
                    int both = !r && t + 1 < t1 && pc->nreds == 1;
                    const void *x0 = r ? NULL : vm_reg(&ts.st, ts.st.prog->out[pc->root_of[0]]);
                    both = both && x0 != vm_own(&ts.st, ts.st.prog->out[pc->root_of[0]]);
                    if (both) {
                        vr->base = pc->rlo[0] + t + 1;
                        r = vm_run(&ts.st, n);
                        if (!r && col_fold2(pc->reds[0].rop, pc->reds[0].acc[0], x0,
                                            vm_reg(&ts.st, ts.st.prog->out[pc->root_of[0]]), n, acc + (f0 - c0)))
                            continue;
                        if (!r) {
                            col_fold(pc->reds[0].rop, pc->reds[0].acc[0], x0, n, acc + (f0 - c0));
                            col_fold(pc->reds[0].rop, pc->reds[0].acc[0], vm_reg(&ts.st, ts.st.prog->out[pc->root_of[0]]),
                                     n, acc + (f0 - c0));
                        }
                        continue;
                    }
                    for (int u = 0; u < 2 && !r && t + u < t1; u++) {
                        if (u) {
                            vr->base = pc->rlo[0] + t + 1;
                            r = vm_run(&ts.st, n);
                        }
                        for (int q = 0; !r && q < pc->nreds; q++)
                            col_fold(pc->reds[q].rop, pc->reds[q].acc[0], vm_reg(&ts.st, ts.st.prog->out[pc->root_of[q]]),
                                     n, acc + q * per_red + (f0 - c0));
                    }
                }
            }
            if (r) {
#pragma omp critical(redjit_fault)
                if (!rc) rc = r;
                __atomic_store_n(&bad, 1, __ATOMIC_RELAXED);   /* read by the other threads' tasks */
                continue;
            }
            if (part) {
                for (int q = 0; q < pc->nreds; q++)
                    memcpy(part + (((size_t)q * nrow + row) * nrch + ch) * F + c0, acc + q * per_red,
                           (size_t)(c1 - c0) * sizeof *part);
                continue;
            }
            const core_buf *tb = &pc->temps[pc->reds[0].temp[0]];
            for (int64_t j = 0; j < c1 - c0; j++) {
                int64_t off = out_offset(pc, tb, row * F + c0 + j);
                for (int q = 0; q < pc->nreds; q++) {
                    cacc a;
                    a.v[0] = col_get(col_kind(pc->reds[q].rop, pc->reds[q].acc[0]), acc + q * per_red, (int)j);
                    a.has = 1;
                    a.idx = -1;
                    acc_write(pc, &pc->reds[q], &a, off);
                }
            }
        }
        /* the chunks' partials of each output, combined in chunk order
         * (unless a chunk failed or was skipped: decided once, for every
         * thread, so that all of them meet the omp for or none does) */
#pragma omp single
        combine = part && !rc && !bad && !core_cancelled(pc->cancel);
        if (combine) {
            const core_buf *tb = &pc->temps[pc->reds[0].temp[0]];
#pragma omp for schedule(static)
            for (int64_t o = 0; o < nrow * F; o++) {
                int64_t row = o / F, j = o % F, off = out_offset(pc, tb, o);
                for (int q = 0; q < pc->nreds; q++) {
                    const plan_red *rd = &pc->reds[q];
                    int kind = col_kind(rd->rop, rd->acc[0]);
                    const uint64_t *pp = part + ((size_t)q * nrow + row) * nrch * F + j;
                    cacc a;
                    a.v[0] = col_get(kind, pp, 0);
                    for (int64_t ch = 1; ch < nrch; ch++)
                        a.v[0] = combine_builtin(rd->rop, acc_ct(rd), a.v[0], col_get(kind, pp + ch * F, 0));
                    a.has = 1;
                    a.idx = -1;
                    acc_write(pc, rd, &a, off);
                }
            }
        }
        free(acc);
        tstate_free(&ts, pc);
    }
    free(part);
    if (rc && rc != RED_ERR_INDEX && !diag->code)
        util_diag_set(diag, rc, rc == RED_ERR_NOMEM ? "out of memory" : "evaluation failed");
    return rc;
}

/* ---- keyed passes ------------------------------------------------------------------------- */

/* A keyed pass keeps an accumulator per key and reduction for each
 * partition.  Built-in operators need one value of it (a kslot, 24 bytes),
 * not a whole cacc (144: room for a user operator's 16 components), which
 * for sum(x[i]) by k[i] over 2^24 values with 5.6 M keys was 800 MB to
 * clear on every run. */
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
        int n = fill_block(pc, &ts->st, &ts->w, pos, ce, ts->runs, &nruns);
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
                acc_fold_run(&pc->reds[q], &ts->us[q], &ts->st, pc->root_of[q], &rr, arg_index(pc, 0, rr.t0), a);
                kslot_put(to, in, at, q, a);
            }
            j = e;
        }
        pos += n;
    }
    return 0;
}

/* run_keyed over keys scan_keys found sorted, built-in operators: the same
 * partitions, folded in the same order, but a partition's keys are a run of
 * their own, so only the first key of each partition can have been seen by
 * partitions before it.  That one goes to a slot of the partition's own;
 * every other key is this partition's alone and is folded straight into
 * the one slot per key, which after the pass holds the partial of the
 * first partition holding the key; the partitions' own slots are then
 * combined into their first keys' slots in partition order.  A key's
 * partials are combined in partition order, from nk + P slots instead of
 * P * nk (at 2^26 values in runs of 30, 7 partitions: 94 MB to fault in and
 * write on every run), so P no longer depends on the key count. */
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
        int lrc = tstate_init(&ts, pc);
        if (lrc) {
#pragma omp critical(redjit_fault)
            if (!rc) rc = lrc;
        }
        /* every key's slot empty, the keys split between the threads (an
         * acc_init per slot, a 144-byte clear and a call, was a fifth of a
         * run with 4 values a key) */
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
            int64_t cs = pc->N * part / P, ce = pc->N * (part + 1) / P;
            int r = fold_keyed_range(pc, &ts, cs, ce, &S, part, &A, &kfirst[part]);
            if (r) keep_first_fault(part, r, &ts.st.fault, &fault_part, &fault);
        }
        tstate_free(&ts, pc);
    }
    if (!rc && fault.code)
        rc = fault.code == RED_ERR_INDEX ? report_fault(p, pc->bufs, pc->temps, &fault, diag) : fault.code;
    if (!rc && !core_cancelled(pc->cancel)) {
        /* the first keys' partials, in partition order, after the partial
         * of the partition where the key began */
        for (int part = 0; part < P; part++) {
            if (kfirst[part] < 0) continue;
            for (int q = 0; q < pc->nreds; q++) {
                cacc a, b;
                kslot_get(&S, 0, kfirst[part], q, &a);
                acc_combine(&pc->reds[q], NULL, &a, kslot_get(&A, 0, part, q, &b));
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

static int run_keyed(pass_ctx *pc, util_diag *diag)
{
    const plan *p = pc->p;
    const plan_pass *ps = pc->ps;
    /* Partitions of the element range, each with private per-key
     * accumulators, combined in partition order: the count depends on the
     * data sizes only, never on threads. */
    int64_t nk = pc->nkeys;
    int64_t per = nk > 0 ? pc->N / (4 * nk) : 1;
    int P = (int)(per < 1 ? 1 : per > 64 ? 64 : per);
    kaccs ka = {.compact = 1, .nk = nk, .nreds = pc->nreds};
    for (int q = 0; q < pc->nreds; q++)
        if (pc->reds[q].rop == ROP_USER) ka.compact = 0;
    ka.slot = ka.compact ? sizeof(kslot) : sizeof(cacc);
    if (ka.compact && pc->keys_sorted) {
        /* sorted keys cost no slots per partition: as many partitions as
         * 64 Ki values each allow, up to 64, however many keys there are
         * (with 4 values a key, the general rule above leaves one) */
        int64_t pn = pc->N / 65536;
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
        int lrc = tstate_init(&ts, pc);
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
            int64_t cs = pc->N * part / P, ce = pc->N * (part + 1) / P;
            int r = fold_keyed_range(pc, &ts, cs, ce, &ka, part, NULL, NULL);
            if (r) keep_first_fault(part, r, &ts.st.fault, &fault_part, &fault);
        }
        tstate_free(&ts, pc);
    }
    if (!rc && fault.code)
        rc = fault.code == RED_ERR_INDEX ? report_fault(p, pc->bufs, pc->temps, &fault, diag) : fault.code;
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
             * split between threads (one thread took 16% of the run with 5.6 M keys) */
            int nt2 = nk >= 65536 ? pc->nthreads : 1;
#pragma omp parallel for num_threads(nt2) schedule(static)
            for (int64_t k = 0; k < nk; k++)
                for (int q = 0; q < pc->nreds; q++) {
                    cacc a, tmp;
                    kslot_get(&ka, 0, k, q, &a);
                    for (int part = 1; part < P; part++)
                        acc_combine(&pc->reds[q], NULL, &a, kslot_get(&ka, part, k, q, &tmp));
                    acc_write(pc, &pc->reds[q], &a, k);
                }
        }
        for (int64_t k = 0; !rc && !ka.compact && k < nk; k++)
            for (int q = 0; q < pc->nreds; q++) {
                cacc *a = kslot_get(&ka, 0, k, q, NULL);
                for (int part = 1; part < P; part++)
                    acc_combine(&pc->reds[q], &us[q], a, kslot_get(&ka, part, k, q, NULL));
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
static int scan_keys(pass_ctx *pc, util_diag *diag)
{
    const plan *p = pc->p;
    int64_t nchunks = (pc->N / CHUNK + (pc->N % CHUNK != 0));
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
            int lrc = tstate_init(&ts, pc);
#pragma omp for schedule(static)
            for (int64_t c = 0; c < nchunks; c++) {
                if (lrc) continue;
                int64_t cs = c * CHUNK, ce = cs + CHUNK < pc->N ? cs + CHUNK : pc->N;
                int64_t prev = INT64_MIN;
                for (int64_t pos = cs; pos < ce;) {
                    int nruns;
                    int n = fill_block(pc, &ts.st, &ts.w, pos, ce, ts.runs, &nruns);
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
            tstate_free(&ts, pc);
        }
    }
    for (int64_t c = 1; c < nchunks; c++) sorted &= first[c] >= last[c - 1];
    free(first);
    free(last);
    if (rc) return util_diag_set(diag, rc, "out of memory");
    if (fault.code) return report_fault(p, pc->bufs, pc->temps, &fault, diag);
    if (pc->N > 0 && kmin < 0)
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
    pc->nkeys = pc->N > 0 ? kmax + 1 : 0;
    pc->keys_sorted = sorted;
    return 0;
}

/* ---- map passes ------------------------------------------------------------------------ */

/* A map pass's walk: the blocks of [0, pc->N), CHUNK positions a task, in
 * parallel; take(pc, st, pos, n, arg) gets each block once the VM has run
 * it (its values in st's registers).  Returns 0, or an error reported in
 * diag: out of memory, or the fault of the first chunk that had one. */
typedef void take_fn(const pass_ctx *pc, const vm_state *st, int64_t pos, int n, void *arg);
static int map_blocks(const pass_ctx *pc, take_fn *take, void *arg, util_diag *diag)
{
    int64_t nchunks = (pc->N / CHUNK + (pc->N % CHUNK != 0));
    int rc = 0;
    int64_t fault_chunk = INT64_MAX;
    vm_fault fault = {0};
    int nt = pc->nthreads;
    if (nchunks < nt) nt = (int)(nchunks > 0 ? nchunks : 1);
    if (nchunks > 0) {
#pragma omp parallel num_threads(nt)
        {
            tstate ts;
            int lrc = tstate_init(&ts, pc);
            if (lrc) {
#pragma omp critical(redjit_fault)
                if (!rc) rc = lrc;
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t c = 0; c < nchunks; c++) {
                if (lrc || core_cancelled(pc->cancel)) continue;
                int64_t cs = c * CHUNK, ce = cs + CHUNK < pc->N ? cs + CHUNK : pc->N;
                for (int64_t pos = cs; pos < ce;) {
                    int nruns;
                    int n = fill_block(pc, &ts.st, &ts.w, pos, ce, ts.runs, &nruns);
                    int r = vm_run(&ts.st, n);
                    if (r) {
                        keep_first_fault(c, r, &ts.st.fault, &fault_chunk, &fault);
                        break;
                    }
                    take(pc, &ts.st, pos, n, arg);
                    pos += n;
                }
            }
            tstate_free(&ts, pc);
        }
    }
    if (rc) return util_diag_set(diag, rc, "out of memory");
    if (fault_chunk != INT64_MAX) return report_fault(pc->p, pc->bufs, pc->temps, &fault, diag);
    return 0;
}

/* run_map's take: the block's values into the pass's temporary */
static void take_map(const pass_ctx *pc, const vm_state *st, int64_t pos, int n, void *arg)
{
    (void)arg;
    core_buf *t = &pc->temps[pc->ps->map_temp];
    int sz = plan_ct_size(pc->p->temps[pc->ps->map_temp].type);
    const unsigned char *v = vm_reg(st, st->prog->out[0]);
    for (int j = 0; j < n; j++)
        memcpy((unsigned char *)t->data + (size_t)out_offset(pc, t, pos + j) * sz, v + (size_t)j * sz, (size_t)sz);
}

static int run_map(pass_ctx *pc, util_diag *diag) { return map_blocks(pc, take_map, NULL, diag); }

/* ---- per-output ranges ------------------------------------------------------------------- */

/* eval_ranges' take: the block's outputs' ranges into pc->olo and pc->osz */
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
    for (int d = 0; d < pc->nr; d++) {
        for (int j = 0; j < n; j++) {
            int64_t lo, hi;
            if (ta->roots[2 * d]) {
                lo = ((const int64_t *)vm_reg(st, ta->prog->out[ta->where[2 * d]]))[j];
                hi = ((const int64_t *)vm_reg(st, ta->prog->out[ta->where[2 * d + 1]]))[j];
            } else {
                lo = pc->rlo[d];
                hi = pc->rlo[d] + pc->rsz[d];
            }
            pc->olo[(pos + j) * pc->nr + d] = lo;
            int64_t ext = 0;
            if (hi > lo && __builtin_sub_overflow(hi, lo, &ext)) ext = INT64_MAX;
            pc->osz[(pos + j) * pc->nr + d] = ext;
        }
    }
}

/* Evaluate the ranged reduced variables' bounds for every output. */
static int eval_ranges(pass_ctx *pc, util_arena *a, util_diag *diag)
{
    const plan *p = pc->p;
    ir *roots[2 * RED_MAX_DIMS];
    for (int d = 0; d < pc->nr; d++) {
        roots[2 * d] = p->vars[pc->rvar[d]].lo;
        roots[2 * d + 1] = p->vars[pc->rvar[d]].hi;
        if (!roots[2 * d]) {
            roots[2 * d] = roots[2 * d + 1] = NULL;
        }
    }
    /* a map-like sweep over the outputs computing every bound */
    int nroots = 0;
    ir *live[2 * RED_MAX_DIMS];
    int where[2 * RED_MAX_DIMS];
    for (int k = 0; k < 2 * pc->nr; k++)
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
    sweep.nr = 0;
    sweep.ranged = 0;
    sweep.L = 1;
    sweep.N = pc->nout;
    sweep.prog = prog;
    sweep.nreds = 0;
    pc->olo = core_big_alloc((size_t)pc->nout * pc->nr * sizeof(int64_t) + 8);
    pc->osz = core_big_alloc((size_t)pc->nout * pc->nr * sizeof(int64_t) + 8);
    pc->offs = core_big_alloc((size_t)(pc->nout + 1) * sizeof(int64_t));
    if (!pc->olo || !pc->osz || !pc->offs) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    /* in parallel (map_blocks): CSR ranges of 3 over 2^24 values (5.6
     * million rows) took 67 ms here on one thread, as long as the
     * reduction after them */
    struct take_ranges_arg ta = {pc, prog, roots, where};
    rc = map_blocks(&sweep, take_ranges, &ta, diag);
    if (rc) return rc;
    if (core_cancelled(pc->cancel)) return util_diag_set(diag, RED_ERR_INTERRUPTED, "interrupted");
    pc->offs[0] = 0;
    for (int64_t o = 0; o < pc->nout; o++) {
        int64_t c = 1;
        for (int d = 0; d < pc->nr; d++)
            if (!mul_ok(c, pc->osz[o * pc->nr + d], &c))
                return util_diag_set(diag, RED_ERR_LIMIT, "reduction domain too large");
        if (__builtin_add_overflow(pc->offs[o], c, &pc->offs[o + 1]))
            return util_diag_set(diag, RED_ERR_LIMIT, "reduction domain too large");
    }
    pc->N = pc->offs[pc->nout];
    if (pc->N > CORE_MAX_DOMAIN)
        return util_diag_set(diag, RED_ERR_LIMIT, "reduction domain too large: %lld elements (at most 2^40)",
                             (long long)pc->N);
    return 0;
}

/* ---- driver --------------------------------------------------------------------------- */

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

int cpu_execute(const plan *p, const core_buf *bufs, const plan_value *scalars, int nthreads,
                const core_cancel *cancel, core_results *out, util_diag *diag)
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

    /* a pass's per-output ranges (olo, osz, offs) are freed before the next
     * pass and after the last, whatever way it ends */
    pass_ctx pc;
    memset(&pc, 0, sizeof pc);
    for (int pi = 0; !rc && pi < p->npasses; pi++) {
        const plan_pass *ps = &p->passes[pi];
        free(pc.olo);
        free(pc.osz);
        free(pc.offs);
        memset(&pc, 0, sizeof pc);
        pc.p = p;
        pc.ps = ps;
        pc.bufs = bufs;
        pc.scalars = scalars;
        pc.temps = out->t;
        pc.nthreads = nthreads;
        pc.key_root = -1;
        pc.cancel = cancel;
        if (core_cancelled(cancel)) {
            rc = util_diag_set(diag, RED_ERR_INTERRUPTED, "interrupted");
            break;
        }

        core_domain dom;
        rc = core_resolve_pass(p, pi, bufs, &bounds, CORE_EVAL_UNIFORM_RANGES, &vars, &dom, diag);
        if (rc) break;
        pc.nf = dom.nf;
        pc.nout = dom.nout;
        pc.nr = dom.nr;
        pc.ranged = dom.ranged;
        memcpy(pc.fvar, dom.fvar, sizeof pc.fvar);
        memcpy(pc.flo, dom.flo, sizeof pc.flo);
        memcpy(pc.fext, dom.fext, sizeof pc.fext);
        memcpy(pc.rvar, dom.rvar, sizeof pc.rvar);
        memcpy(pc.rlo, dom.rlo, sizeof pc.rlo);
        memcpy(pc.rsz, dom.rsz, sizeof pc.rsz);
        pc.L = dom.L;
        pc.N = dom.N;
        if (pc.ranged) rc = eval_ranges(&pc, &a, diag);
        if (!ps->nreds) {
            pc.L = 1;
            pc.N = pc.nout;
        }
        if (rc) break;

        /* the program: every reduction's map components, then the key */
        ir *roots[PLAN_MAX_COMP * 4];
        int nroots = 0;
        if (ps->nreds > 60) {
            rc = util_diag_set(diag, RED_ERR_LIMIT, "too many reductions in one pass");
            break;
        }
        if (!ps->nreds) {
            roots[nroots++] = ps->map;
        } else {
            for (int q = 0; q < ps->nreds; q++) {
                pc.root_of[q] = nroots;
                for (int c = 0; c < ps->reds[q].ncomp; c++) {
                    if (nroots >= (int)(sizeof roots / sizeof roots[0]) - 1) {
                        rc = util_diag_set(diag, RED_ERR_LIMIT, "too many reductions in one pass");
                        break;
                    }
                    roots[nroots++] = ps->reds[q].map[c];
                }
            }
            if (ps->key) {
                pc.key_root = nroots;
                roots[nroots++] = ps->key;
            }
        }
        if (rc) break;
        rc = vm_compile(&a, p, nroots, roots, &pc.prog);
        if (rc) {
            util_diag_set(diag, rc, "cannot compile pass %d", pi);
            break;
        }
        pc.nreds = ps->nreds;
        pc.reds = ps->reds;
        pc.comb = util_arena_alloc(&a, (size_t)(ps->nreds + 1) * sizeof *pc.comb);
        if (!pc.comb) rc = RED_ERR_NOMEM;
        for (int q = 0; !rc && q < ps->nreds; q++)
            if (ps->reds[q].rop == ROP_USER)
                rc = vm_compile(&a, p, ps->reds[q].ncomp, ps->reds[q].combine, &pc.comb[q]);
        if (rc) {
            util_diag_set(diag, rc, "cannot compile a user operator");
            break;
        }

        if (ps->key) {
            rc = scan_keys(&pc, diag);
            if (rc) break;
            core_set_key_count(p, pi, &vars, pc.nkeys);
            pc.nout = pc.nkeys;
        }
        /* the temporaries this pass writes */
        if (!ps->nreds) {
            rc = alloc_temp(p, ps->map_temp, &vars, out, diag);
        } else {
            for (int q = 0; !rc && q < ps->nreds; q++)
                for (int c = 0; !rc && c < ps->reds[q].ncomp; c++)
                    rc = alloc_temp(p, ps->reds[q].temp[c], &vars, out, diag);
        }
        if (rc) break;

        if (!ps->nreds) {
            rc = run_map(&pc, diag);
        } else if (ps->key) {
            /* the key pass walks its reduced domain as one output */
            int64_t nk = pc.nkeys;
            pc.nout = 1;
            rc = run_keyed(&pc, diag);
            pc.nout = nk;
        } else if (column_layout(&pc)) {
            rc = run_columns(&pc, diag);
            if (rc == RED_ERR_INDEX) rc = run_reduction(&pc, diag);
        } else {
            rc = run_reduction(&pc, diag);
        }
        /* an interrupted pass skipped chunks: its outputs mean nothing (an
         * argmax would look empty), so the interrupt is the answer */
        if (!rc && core_cancelled(cancel)) rc = util_diag_set(diag, RED_ERR_INTERRUPTED, "interrupted");
        /* argmin/argmax over nothing */
        for (int q = 0; !rc && q < ps->nreds; q++) {
            const plan_red *rd = &ps->reds[q];
            if (rd->rop != ROP_ARGMIN && rd->rop != ROP_ARGMAX) continue;
            const core_buf *t = &out->t[rd->temp[0]];
            int64_t n = 1;
            for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
            for (int64_t i = 0; i < n; i++)
                if (((const int64_t *)t->data)[i] < 0) {
                    int is_free_lo = 0;
                    /* positions below a free index's start are padding */
                    for (int d = 0; d < pc.nf; d++) is_free_lo |= pc.flo[d] > 0;
                    if (is_free_lo) continue;
                    rc = util_diag_at(diag, p->src, rd->pos, RED_ERR_EMPTY,
                                 "%s of an empty set: there is no index to return",
                                 plan_rop_name(rd->rop));
                    break;
                }
        }
        if (!rc && core_cancelled(cancel)) rc = util_diag_set(diag, RED_ERR_INTERRUPTED, "interrupted");
    }
    free(pc.olo);
    free(pc.osz);
    free(pc.offs);
    util_arena_free(&a);
    free(vlo);
    free(vhi);
    free(done);
    if (rc) core_results_free(out);
    core_results_trim(out);
    return rc;
}
