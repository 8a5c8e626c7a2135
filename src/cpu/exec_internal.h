/*
 * exec_internal.h -- what the CPU executor's files share: the pass context,
 * the walk's position arithmetic and the accumulators.  Helpers the hot loops
 * call are static inline here, so every file that walks still inlines them.
 */
#ifndef RED_EXEC_INTERNAL_H
#define RED_EXEC_INTERNAL_H

#include "cpu/exec.h"

#include <stdint.h>
#include <string.h>

#define CHUNK ((int64_t)1 << 16)
#define RAMP_MIN 32     /* rows shorter than this are walked element-wise */
#define LANES 16        /* accumulators a fold keeps side by side (FOLD_SUM) */

/* One reduction's accumulator: up to PLAN_MAX_COMP components (a user
 * operator), the index argmin / argmax keep, and whether anything was folded. */
typedef struct cacc {
    plan_value v[PLAN_MAX_COMP];
    int64_t idx;
    int has;
} cacc;

typedef struct run {
    int64_t o, t0;      /* output and in-output offset of the first element */
    int start, len;
} run;

/* Everything a pass's walk needs: its domain (free indices outermost, the
 * reduced box or per-output ranges inside), its program and reductions. */
typedef struct pass_ctx {
    const plan *p;
    const plan_pass *ps;
    const core_buf *bufs;
    const plan_value *scalars;
    core_buf *temps;
    core_domain dom;                /* outputs and reduced box (core_resolve_pass);
                                       the walk changes nout, L and N where a
                                       pass is walked as one output (keys) or
                                       ranged (N: the sum of the ranges)   */
    int64_t *olo, *osz;             /* ranged: [o * nr + d]               */
    size_t range_bytes, offs_bytes; /* olo's and osz's size, offs'        */
    core_scratch *scratch_in,       /* where they are taken from (the run */
                 *scratch_out;      /* before's) and kept for the next    */
    int tiled;                      /* a scan over ranged rows, whose results
                                       lie at their ranges (plan_scan_ranged) */
    int64_t tile_len;               /* and the length K its rows tile      */
    int64_t *offs;                  /* ranged: prefix of counts, nout + 1 */
    int flat, flat_ramp;            /* blocks run flat (cpu_flat_walk), the
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
    int keys_sorted;                /* cpu_scan_keys found them non-decreasing */
    int64_t key_span[2];            /* the first and the last element's keys (N > 0) */
    const core_cancel *cancel;
} pass_ctx;

/* ---- the domain walk: where a linear position lies --------------------------------- */

static inline int mul_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }

static inline int64_t out_count(const pass_ctx *pc, int64_t o)
{
    return pc->dom.ranged ? pc->offs[o + 1] - pc->offs[o] : pc->dom.L;
}

static inline int64_t out_start(const pass_ctx *pc, int64_t o)
{
    return pc->dom.ranged ? pc->offs[o] : o * pc->dom.L;
}

/* the output holding linear position `pos` (ranged: binary search) */
static inline int64_t locate(const pass_ctx *pc, int64_t pos)
{
    if (!pc->dom.ranged) return pc->dom.L ? pos / pc->dom.L : 0;
    int64_t lo = 0, hi = pc->dom.nout; /* offs[lo] <= pos < offs[hi] */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (pc->offs[mid] <= pos) lo = mid;
        else hi = mid;
    }
    return lo;
}

static inline const int64_t *red_lo(const pass_ctx *pc, int64_t o)
{
    return pc->dom.ranged ? pc->olo + o * pc->dom.nr : pc->dom.rlo;
}
static inline const int64_t *red_sz(const pass_ctx *pc, int64_t o)
{
    return pc->dom.ranged ? pc->osz + o * pc->dom.nr : pc->dom.rsz;
}

/* Offset of output o in the output temporary (strided by free var values). */
static inline int64_t out_offset(const pass_ctx *pc, const core_buf *t, int64_t o)
{
    if (pc->dom.nf == 1) return (pc->dom.flo[0] + o) * t->strides[0];   /* no division: one a row of short rows */
    int64_t off = 0;
    for (int d = pc->dom.nf - 1; d >= 0; d--) {
        int64_t idx = pc->dom.fext[d] ? o % pc->dom.fext[d] : 0;
        o = pc->dom.fext[d] ? o / pc->dom.fext[d] : 0;
        off += (pc->dom.flo[d] + idx) * t->strides[d];
    }
    return off;
}

typedef struct walker {
    int64_t *vec[2 * RED_MAX_DIMS];   /* free indices at 0.., reduced at RED_MAX_DIMS.. */
    int64_t *mem;                     /* one allocation for the ones the pass uses      */
} walker;


/* A user operator's combine program, per thread and reduction. */
typedef struct ustate {
    vm_state st;
    unsigned char *work;            /* ncomp * VM_B * 8 */
} ustate;

/* Per-thread state of a walk: the VM, the block's index vectors and runs,
 * and one accumulator per reduction. */
typedef struct tstate {
    vm_state st;
    walker w;
    run *runs;
    ustate *us;         /* per reduction (user ops only) */
    cacc *cur;          /* per reduction */
    int ok;
} tstate;

int cpu_tstate_init(tstate *ts, const pass_ctx *pc);
void cpu_tstate_free(tstate *ts, const pass_ctx *pc);

/* Chunks 0 .. nchunks-1 of a pass in parallel on up to pc->nthreads threads, one at a time
 * (dynamic), each thread with its state and `scratch` bytes of its own: each(pc, ts, scratch,
 * c, arg) returns 0 or the VM's status, its fault in ts->st.fault.  No chunk starts once the
 * run is cancelled.  Returns 0, RED_ERR_NOMEM (a thread's state), or with *fault_chunk set
 * (INT64_MAX: none) the first chunk's fault in *fault. */
typedef int cpu_chunk_fn(const pass_ctx *pc, tstate *ts, void *scratch, int64_t c, void *arg);
int cpu_each_chunk(const pass_ctx *pc, int64_t nchunks, size_t scratch, cpu_chunk_fn *each, void *arg,
                   int64_t *fault_chunk, vm_fault *fault);

/* Fill the block starting at linear position `pos` (< end).  Sets the
 * variables in `st`, the runs, and returns the number of elements. */
int cpu_fill_block(const pass_ctx *pc, vm_state *st, walker *w, int64_t pos, int64_t end, run *runs, int *nruns);
/* Whether the pass's blocks can run flat across rows: sets pc->flat and pc->flat_ramp. */
void cpu_flat_walk(pass_ctx *pc);

/* ---- built-in operators and accumulators (fold.c) ---------------------------------------- */

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

static inline void acc_init(const plan_red *rd, cacc *a)
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
 * key, so an f32 total would stall once its ulp passes the values added
 * (bench/TUNING.md). */
static inline int acc_ct(const plan_red *rd)
{
    return rd->rop == ROP_SUM && rd->acc[0] == CT_F32 ? CT_F64 : rd->acc[0];
}

/* An accumulator into its output temporaries at offset off.  Inline: a
 * keyed pass's last loop calls it once a key. */
static inline void acc_write(const pass_ctx *pc, const plan_red *rd, const cacc *a, int64_t off)
{
    for (int c = 0; c < rd->ncomp; c++) {
        core_buf *t = &pc->temps[rd->temp[c]];
        if (rd->rop == ROP_ARGMIN || rd->rop == ROP_ARGMAX)
            ((int64_t *)t->data)[off] = a->has ? a->idx : -1;
        else
            core_write_ct((void *)t->data, rd->acc[c], off, a->v[c]);
    }
}

plan_value cpu_combine_builtin(int rop, int ct, plan_value a, plan_value b);
plan_value cpu_fold_values(int rop, int ct, const void *vals, int n);
/* online.c: n elements of a planner-made online operator (plan_red.online)
 * folded into a by a typed loop; 0 where it has none (the combine program then) */
int cpu_fold_online(const plan_red *rd, void *const *vals, int n, cacc *a);
void cpu_fold_arg(int rop, int skipnan, int ct, const void *vals, int n, int64_t idx0, cacc *a);
void cpu_acc_fold_run(const plan_red *rd, ustate *u, vm_state *st, int root, const run *r, int64_t idx0, cacc *a);
void cpu_acc_combine(const plan_red *rd, ustate *u, cacc *a, const cacc *b);

static inline int64_t arg_index(const pass_ctx *pc, int64_t o, int64_t t0)
{
    /* one reduced index: its value; several: row-major position in the box */
    return pc->dom.nr == 1 ? red_lo(pc, o)[0] + t0 : t0;
}

/* A parallel pass reports the fault of its first chunk or partition that
 * had one, whichever thread found it. */
static inline void keep_first_fault(int64_t at, int r, const vm_fault *f, int64_t *fault_at, vm_fault *fault)
{
#pragma omp critical(redjit_fault)
    if (at < *fault_at) {
        *fault_at = at;
        *fault = *f;
        if (!fault->code) fault->code = r;
    }
}

/* The message for an index error, pointing at the subscript. */
int cpu_report_fault(const plan *p, const core_buf *bufs, const core_buf *temps, const vm_fault *f, util_diag *diag);

/* ---- the passes, one kind a file ------------------------------------------------------------ */

int cpu_run_map(pass_ctx *pc, util_diag *diag);                         /* walk.c    */
int cpu_eval_ranges(pass_ctx *pc, util_arena *a, util_diag *diag);     /* walk.c    */
int cpu_run_reduction(pass_ctx *pc, util_diag *diag);                   /* reduce.c  */
int cpu_column_layout(const pass_ctx *pc);                              /* columns.c */
int cpu_run_columns(pass_ctx *pc, util_diag *diag);                     /* columns.c */
int cpu_scan_keys(pass_ctx *pc, util_diag *diag);                       /* keyed.c   */
int cpu_run_keyed(pass_ctx *pc, util_diag *diag);                       /* keyed.c   */
int cpu_run_scan(pass_ctx *pc, util_diag *diag);                        /* scan.c    */
/* gemm.c: a matrix product's pass run blocked (*done = 1), or left to the others */
int cpu_try_gemm(pass_ctx *pc, util_diag *diag, int *done);

#endif
