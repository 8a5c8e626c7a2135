/*
 * columns.c -- reductions that read across their outputs faster than along
 * them (column sums of a row-major matrix): a tile of outputs at a time, each
 * reduced position a block, folded element-wise into the tile's accumulators.
 */
#include "exec_internal.h"

#include <stdlib.h>

/* ---- column reductions: a tile of outputs at a time -------------------------------------- */

/* Whether the pass reads across its outputs faster than along them: every
 * load's step in memory for the innermost free index is smaller than for the
 * reduced one (column sums of a row-major matrix).  Walking one output at a
 * time there touches a new page per element (bench/TUNING.md, "CPU
 * executor"). */
int cpu_column_layout(const pass_ctx *pc)
{
    if (pc->dom.ranged || pc->dom.nr != 1 || pc->dom.nf < 1 || pc->dom.L < 2 || pc->dom.fext[pc->dom.nf - 1] < 16) return 0;
    int fv = pc->dom.fvar[pc->dom.nf - 1], rv = pc->dom.rvar[0], nloads = 0;
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
 * cpu_combine_builtin keeps them: f32 sums in f64, NaN wins min and max).  The
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
 * whole rows (two threads each summing half the columns would each read
 * half a row and jump over the other half: bench/TUNING.md).  Returns
 * RED_ERR_INDEX on an index error without a message (the caller reruns the
 * pass one output at a time, which reports it as ever). */
#define COL_GROUP 16
#define COL_RCHUNK 256
#define COL_PART_MAX ((int64_t)256 << 20)

/* How a column pass is cut into tasks. */
typedef struct col_cut {
    int64_t F, nrow;                /* the outputs: nrow rows of F columns  */
    int64_t rchunk, nrch;           /* reduced positions a chunk; chunks    */
    int64_t tw, gsz;                /* tile width; tiles a group            */
    int64_t tiles_per_row, groups_per_row, ntasks;
    uint64_t *part;                 /* chunks' partial folds, or NULL       */
    const struct col_prod *prod;    /* a product of two loads (col_product) */
} col_cut;

static void col_plan(const pass_ctx *pc, int one_chunk, col_cut *cc)
{
    int64_t F = pc->dom.fext[pc->dom.nf - 1];
    int64_t nrow = pc->dom.nout / F, rchunk = one_chunk ? pc->dom.L : COL_RCHUNK;
    int64_t nrch = (pc->dom.L + rchunk - 1) / rchunk;
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
    *cc = (col_cut){.F = F, .nrow = nrow, .rchunk = rchunk, .nrch = nrch, .tw = tw, .gsz = gsz,
                    .tiles_per_row = tiles_per_row, .groups_per_row = groups_per_row,
                    .ntasks = nrow * groups_per_row * nrch};
}

/* A task's folds, kept as chunk ch's partials, or (one chunk) written as
 * the outputs of row `row`, columns [c0, c1). */
static void col_store(const pass_ctx *pc, const col_cut *cc, const uint64_t *acc, size_t per_red, int64_t row,
                      int64_t ch, int64_t c0, int64_t c1)
{
    int64_t F = cc->F;
    if (cc->part) {
        for (int q = 0; q < pc->nreds; q++)
            memcpy(cc->part + (((size_t)q * cc->nrow + row) * cc->nrch + ch) * F + c0, acc + q * per_red,
                   (size_t)(c1 - c0) * sizeof *cc->part);
        return;
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

/* ---- products of two loads: a register tile along the columns ----------------------------- */

/* A column pass whose one reduction is a sum of x * y, x and y loads of
 * floats of the compute type, x the same for every column of a row (A[i,k]
 * in a matrix product), y stepping along them (B[k,j]): col_product runs its
 * tasks without the VM, eight columns' accumulators in registers over the
 * task's reduced positions, in the same order and with the same roundings
 * (the product in the compute type, the sum in f64), so the same bits. */
typedef struct col_prod {
    const vm_instr *x, *y;          /* the loads: x constant along the columns */
    int ct;                         /* CT_F32 or CT_F64                       */
} col_prod;

static int col_product_form(const pass_ctx *pc, col_prod *pp)
{
    const vm_prog *pr = pc->prog;
    if (pc->nreds != 1 || pc->reds[0].rop != ROP_SUM || pc->reds[0].ncomp != 1) return 0;
    int ct = pc->reds[0].acc[0], fv = pc->dom.fvar[pc->dom.nf - 1];
    if (ct != CT_F32 && ct != CT_F64) return 0;
    const vm_instr *ld[2] = {NULL, NULL}, *mul = NULL;
    int nl = 0;
    for (int i = 0; i < pr->ninstr; i++) {
        const vm_instr *in = &pr->instr[i];
        if (in->invariant) continue;
        if (in->kind == VI_LOAD && nl < 2) ld[nl++] = in;
        else if (in->kind == VI_OP && !mul) mul = in;
        else return 0;
    }
    if (nl != 2 || !mul || mul->op != OP_MUL || mul->type != ct || mul->dst != pr->out[pc->root_of[0]]) return 0;
    if (!((mul->a == ld[0]->dst && mul->b == ld[1]->dst) || (mul->a == ld[1]->dst && mul->b == ld[0]->dst))) return 0;
    for (int l = 0; l < 2; l++) {
        const vm_instr *in = ld[l];
        if (!in->affine || in->slot < 0 || in->type != ct) return 0;
        if (plan_ct_of_dtype(pc->bufs[in->slot].dtype) != ct) return 0;   /* no conversion on the load */
    }
    /* x: no term in the column index */
    int ycol[2] = {0, 0};
    for (int l = 0; l < 2; l++)
        for (int d = 0; d < ld[l]->nsub; d++)
            for (int t = 0; t < ld[l]->aff[d].nterm; t++) ycol[l] |= ld[l]->aff[d].var[t] == fv;
    if (ycol[0] == ycol[1]) return 0;
    pp->x = ycol[0] ? ld[1] : ld[0];
    pp->y = ycol[0] ? ld[0] : ld[1];
    pp->ct = ct;
    return 1;
}

/* A load's element offset at the state's variables, with the column index at
 * c and the reduced one at t; its steps along both; 0 where a subscript
 * leaves the array anywhere in [c0, c1) x [t0, t1) (the VM then runs the task
 * and reports it). */
static int prod_load(const pass_ctx *pc, const tstate *ts, const vm_instr *in, int64_t c0, int64_t c1, int64_t t0,
                     int64_t t1, int64_t *off, int64_t *sc, int64_t *st)
{
    const core_buf *b = &pc->bufs[in->slot];
    int fv = pc->dom.fvar[pc->dom.nf - 1], rv = pc->dom.rvar[0];
    int64_t fb = pc->dom.flo[pc->dom.nf - 1], rb = pc->dom.rlo[0];
    *off = *sc = *st = 0;
    for (int d = 0; d < in->nsub; d++) {
        const vm_affine *af = &in->aff[d];
        int64_t v = af->c0, kc = 0, kr = 0;
        for (int t = 0; t < af->nterm; t++) {
            int64_t x;
            if (af->var[t] == fv) kc += af->coef[t], x = fb + c0;
            else if (af->var[t] == rv) kr += af->coef[t], x = rb + t0;
            else x = ts->st.vars[af->var[t]].base;
            int64_t m;
            if (!mul_ok(af->coef[t], x, &m) || __builtin_add_overflow(v, m, &v)) return 0;
        }
        /* the corners: affine, so the extremes are there */
        int64_t lo = v, hi = v, ec, er;
        if (!mul_ok(kc, c1 - 1 - c0, &ec) || !mul_ok(kr, t1 - 1 - t0, &er)) return 0;
        if (ec < 0) lo += ec; else hi += ec;
        if (er < 0) lo += er; else hi += er;
        if (lo < 0 || hi >= b->shape[d]) return 0;
        *off += v * b->strides[d];
        *sc += kc * b->strides[d];
        *st += kr * b->strides[d];
    }
    return 1;
}

#define PROD_LOOP(T)                                                                       \
    do {                                                                                   \
        const T *X = (const T *)pc->bufs[pp->x->slot].data + xo;                           \
        const T *Y = (const T *)pc->bufs[pp->y->slot].data + yo;                           \
        for (int64_t j = 0; j < n; j += 8) {                                               \
            int w = n - j < 8 ? (int)(n - j) : 8;                                          \
            double s[8];                                                                   \
            for (int u = 0; u < w; u++) s[u] = acc[j + u];                                 \
            const T *xp = X, *yp = Y + j * ysc;                                            \
            if (w == 8 && ysc == 1) {                                                      \
                for (int64_t t = t0; t < t1; t++, xp += xst, yp += yst) {                  \
                    T xv = *xp;                                                            \
                    for (int u = 0; u < 8; u++) {                                          \
                        T pr = xv * yp[u];                                                 \
                        s[u] = s[u] + (double)pr;                                          \
                    }                                                                      \
                }                                                                          \
            } else {                                                                       \
                for (int64_t t = t0; t < t1; t++, xp += xst, yp += yst) {                  \
                    T xv = *xp;                                                            \
                    for (int u = 0; u < w; u++) {                                          \
                        T pr = xv * yp[u * ysc];                                           \
                        s[u] = s[u] + (double)pr;                                          \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
            for (int u = 0; u < w; u++) acc[j + u] = s[u];                                 \
        }                                                                                  \
    } while (0)

/* Task columns [c0, c1) over positions [t0, t1) into acc (f64, from the
 * identity); 0 where a load's bounds need the VM. */
static int col_product(const pass_ctx *pc, const col_prod *pp, const tstate *ts, double *acc, int64_t c0, int64_t c1,
                       int64_t t0, int64_t t1)
{
    int64_t xo, xsc, xst, yo, ysc, yst, n = c1 - c0;
    if (t1 <= t0 || n <= 0) return 1;
    if (!prod_load(pc, ts, pp->x, c0, c1, t0, t1, &xo, &xsc, &xst) ||
        !prod_load(pc, ts, pp->y, c0, c1, t0, t1, &yo, &ysc, &yst))
        return 0;
    (void)xsc;   /* 0: x has no term in the column index */
    if (pp->ct == CT_F32) PROD_LOOP(float);
    else PROD_LOOP(double);
    return 1;
}

/* One task: a group of tiles of one row of outputs over one chunk of the
 * reduced positions, folded into acc (per reduction, gsz tiles).  Returns
 * the VM's error, 0 when done. */
static int col_task(const pass_ctx *pc, const col_cut *cc, tstate *ts, uint64_t *acc, int64_t task)
{
    const int64_t F = cc->F, nrch = cc->nrch, rchunk = cc->rchunk, tw = cc->tw, gsz = cc->gsz;
    const size_t per_red = (size_t)gsz * COL_TILE;
    int64_t grp = task / nrch, ch = task % nrch;
    int64_t row = grp / cc->groups_per_row, first = grp % cc->groups_per_row * gsz;
    int64_t last = first + gsz < cc->tiles_per_row ? first + gsz : cc->tiles_per_row;   /* tiles [first, last) */
    int64_t t0 = ch * rchunk, t1 = t0 + rchunk < pc->dom.L ? t0 + rchunk : pc->dom.L;
    int64_t oo = row;
    for (int d = pc->dom.nf - 2; d >= 0; d--) {
        vm_var *v = &ts->st.vars[pc->dom.fvar[d]];
        v->mode = VAR_CONST;
        v->base = pc->dom.flo[d] + (pc->dom.fext[d] ? oo % pc->dom.fext[d] : 0);
        oo = pc->dom.fext[d] ? oo / pc->dom.fext[d] : 0;
    }
    vm_var *vf = &ts->st.vars[pc->dom.fvar[pc->dom.nf - 1]], *vr = &ts->st.vars[pc->dom.rvar[0]];
    vf->mode = VAR_RAMP;
    vr->mode = VAR_CONST;
    int64_t c0 = first * tw, c1 = last * tw < F ? last * tw : F;   /* the group's columns */
    for (int q = 0; q < pc->nreds; q++) {
        const plan_red *rd = &pc->reds[q];
        plan_value id = plan_identity(rd->rop, acc_ct(rd));
        int kind = col_kind(rd->rop, rd->acc[0]);
        for (int64_t j = 0; j < c1 - c0; j++) col_set(kind, acc + q * per_red, (int)j, id);
    }
    if (cc->prod && col_product(pc, cc->prod, ts, (double *)acc, c0, c1, t0, t1)) {
        col_store(pc, cc, acc, per_red, row, ch, c0, c1);
        return 0;
    }
    int r = 0;
    for (int64_t t = t0; t < t1 && !r; t += 2) {
        for (int64_t f0 = c0; f0 < c1 && !r; f0 += tw) {
            int n = (int)(c1 - f0 < tw ? c1 - f0 : tw);
            vf->base = pc->dom.flo[pc->dom.nf - 1] + f0;
            vr->base = pc->dom.rlo[0] + t;
            r = vm_run(&ts->st, n);
            /* positions t and t + 1 of the tile, in order; together
             * where position t's values are read in place (the next
             * vm_run does not overwrite them) */
            int both = !r && t + 1 < t1 && pc->nreds == 1;
            const void *x0 = r ? NULL : vm_reg(&ts->st, ts->st.prog->out[pc->root_of[0]]);
            both = both && x0 != vm_own(&ts->st, ts->st.prog->out[pc->root_of[0]]);
            if (both) {
                vr->base = pc->dom.rlo[0] + t + 1;
                r = vm_run(&ts->st, n);
                if (!r && col_fold2(pc->reds[0].rop, pc->reds[0].acc[0], x0,
                                    vm_reg(&ts->st, ts->st.prog->out[pc->root_of[0]]), n, acc + (f0 - c0)))
                    continue;
                if (!r) {
                    col_fold(pc->reds[0].rop, pc->reds[0].acc[0], x0, n, acc + (f0 - c0));
                    col_fold(pc->reds[0].rop, pc->reds[0].acc[0], vm_reg(&ts->st, ts->st.prog->out[pc->root_of[0]]),
                             n, acc + (f0 - c0));
                }
                continue;
            }
            for (int u = 0; u < 2 && !r && t + u < t1; u++) {
                if (u) {
                    vr->base = pc->dom.rlo[0] + t + 1;
                    r = vm_run(&ts->st, n);
                }
                for (int q = 0; !r && q < pc->nreds; q++)
                    col_fold(pc->reds[q].rop, pc->reds[q].acc[0], vm_reg(&ts->st, ts->st.prog->out[pc->root_of[q]]),
                             n, acc + q * per_red + (f0 - c0));
            }
        }
    }
    if (!r) col_store(pc, cc, acc, per_red, row, ch, c0, c1);
    return r;
}

/* Output o from its chunks' partials, combined in chunk order. */
static void col_combine(const pass_ctx *pc, const col_cut *cc, int64_t o)
{
    const core_buf *tb = &pc->temps[pc->reds[0].temp[0]];
    int64_t F = cc->F, nrch = cc->nrch;
    int64_t row = o / F, j = o % F, off = out_offset(pc, tb, o);
    for (int q = 0; q < pc->nreds; q++) {
        const plan_red *rd = &pc->reds[q];
        int kind = col_kind(rd->rop, rd->acc[0]);
        const uint64_t *pp = cc->part + ((size_t)q * cc->nrow + row) * nrch * F + j;
        cacc a;
        a.v[0] = col_get(kind, pp, 0);
        for (int64_t ch = 1; ch < nrch; ch++)
            a.v[0] = cpu_combine_builtin(rd->rop, acc_ct(rd), a.v[0], col_get(kind, pp + ch * F, 0));
        a.has = 1;
        a.idx = -1;
        acc_write(pc, rd, &a, off);
    }
}

static int run_columns_chunks(pass_ctx *pc, util_diag *diag, int one_chunk)
{
    col_cut cc;
    col_plan(pc, one_chunk, &cc);
    /* chunks' partial folds, [q][row][chunk][column], when there are chunks:
     * N / 32 bytes for a real matrix, but a view with a zero stride can have
     * many more outputs than elements; past COL_PART_MAX the pass folds each
     * output in one chunk, as it did before chunks */
    int64_t pbytes = 0;
    if (cc.nrch > 1 && (!mul_ok(cc.nrow * cc.F, cc.nrch * 8, &pbytes) || !mul_ok(pbytes, pc->nreds, &pbytes) ||
                        pbytes > COL_PART_MAX))
        return run_columns_chunks(pc, diag, 1);
    cc.part = NULL;
    struct col_prod prod;
    cc.prod = col_product_form(pc, &prod) ? &prod : NULL;
    if (cc.nrch > 1) {
        cc.part = malloc((size_t)pbytes);
        if (!cc.part) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    }
    int rc = 0, bad = 0, combine = 0;
    int nt = pc->nthreads;
    if (cc.ntasks < nt) nt = (int)(cc.ntasks > 0 ? cc.ntasks : 1);
#pragma omp parallel num_threads(nt)
    {
        tstate ts;
        int lrc = cpu_tstate_init(&ts, pc);
        /* per reduction, gsz tiles of accumulators */
        uint64_t *acc = malloc((size_t)pc->nreds * (size_t)cc.gsz * COL_TILE * sizeof *acc);
        if (!lrc && !acc) lrc = RED_ERR_NOMEM;
        if (lrc) {
#pragma omp critical(redjit_fault)
            if (!rc) rc = lrc;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < cc.ntasks; task++) {
            if (lrc || __atomic_load_n(&bad, __ATOMIC_RELAXED) || core_cancelled(pc->cancel)) continue;
            int r = col_task(pc, &cc, &ts, acc, task);
            if (r) {
#pragma omp critical(redjit_fault)
                if (!rc) rc = r;
                __atomic_store_n(&bad, 1, __ATOMIC_RELAXED);   /* read by the other threads' tasks */
            }
        }
        /* the chunks' partials of each output, combined in chunk order
         * (unless a chunk failed or was skipped: decided once, for every
         * thread, so that all of them meet the omp for or none does) */
#pragma omp single
        combine = cc.part && !rc && !bad && !core_cancelled(pc->cancel);
        if (combine) {
#pragma omp for schedule(static)
            for (int64_t o = 0; o < cc.nrow * cc.F; o++) col_combine(pc, &cc, o);
        }
        free(acc);
        cpu_tstate_free(&ts, pc);
    }
    free(cc.part);
    if (rc && rc != RED_ERR_INDEX && !diag->code)
        util_diag_set(diag, rc, rc == RED_ERR_NOMEM ? "out of memory" : "evaluation failed");
    return rc;
}

int cpu_run_columns(pass_ctx *pc, util_diag *diag) { return run_columns_chunks(pc, diag, 0); }
