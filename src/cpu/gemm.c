/*
 * gemm.c -- a pass that is a matrix product, C[i,j] = sum(A[i,k] * B[k,j]) over k
 * with A and B bound arrays of the accumulator's type (f32 or f64), in any layout:
 * the operands packed into panels that stay in cache and an MR x NR tile of C
 * kept in vector registers while a panel of k goes by (the register-blocked
 * scheme of every BLAS), the rows of C shared among the threads.
 *
 * Order of the sums: each element of C adds its products in order of k, KC of
 * them at a time in the accumulator type, and carries its total across those
 * blocks in f64, as the CPU's f32 sums carry theirs (docs/language.md); the
 * blocks and their order do not depend on the number of threads, so neither
 * do the bits.  Where the CPU has AVX2 and FMA the tile is computed with
 * fused multiply-adds, elsewhere with SSE2's multiplies and adds: two machines
 * may differ in the last bits, one machine does not.
 */
#include "exec_internal.h"

#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GEMM_X86 1
#else
#define GEMM_X86 0
#endif

enum { MR = 6, KC = 512, MC = 96 };   /* MC a multiple of MR */

/* A pass this file runs: the operands and the result, for one matrix of a batch. */
typedef struct gemm_op {
    int ct;                     /* CT_F32 or CT_F64 */
    const unsigned char *a, *b; /* A[i,k], B[k,j] of the batch's first matrix */
    int64_t as_i, as_k, bs_k, bs_j;   /* strides, in elements */
    int64_t M, N, K, i0;        /* i0: the first row (a block of an epilogue's rows) */
    unsigned char *c;
    int64_t cs_i, cs_j;
    /* a batch, C[b,i,j] = sum(A[b,i,k] * B[b,k,j]) over k: nb matrices from b0 (1 and 0
     * for one), each operand's and the result's stride along b */
    int64_t nb, b0, as_b, bs_b, cs_b;
} gemm_op;

/* Does pass pc walk a matrix product, or a batch of them (plan_find_product; gemm_op
 * filled in), with no offset on its indices but the rows'? */
static int gemm_layout(const pass_ctx *pc, gemm_op *g)
{
    const plan_pass *ps = pc->ps;
    plan_product m;
    if (pc->nreds != 1 || pc->reds != ps->reds || pc->dom.ranged || !plan_find_product(pc->p, ps, &m)) return 0;
    int nf = ps->nfree, ct = m.ct;
    for (int d = 1; d < nf; d++)
        if (pc->dom.flo[d]) return 0;
    if (pc->dom.rlo[0]) return 0;
    red_dtype want = ct == CT_F32 ? RED_F32 : RED_F64;
    if (pc->bufs[m.a->slot].dtype != want || pc->bufs[m.b->slot].dtype != want) return 0;
    const core_buf *ab = &pc->bufs[m.a->slot], *bb = &pc->bufs[m.b->slot];
    const core_buf *cb = &pc->temps[pc->reds[0].temp[0]];
    g->ct = ct;
    g->a = ab->data;
    g->b = bb->data;
    g->as_i = ab->strides[m.adim[1]];
    g->as_k = ab->strides[m.adim[3]];
    g->bs_k = bb->strides[m.bdim[3]];
    g->bs_j = bb->strides[m.bdim[2]];
    g->c = (unsigned char *)cb->data;
    g->cs_i = cb->strides[nf - 2];
    g->cs_j = cb->strides[nf - 1];
    g->N = pc->dom.fext[nf - 1];
    g->K = pc->dom.rsz[0];
    if (nf == 3) {
        g->nb = pc->dom.fext[0];
        g->b0 = pc->dom.flo[0];
        g->as_b = ab->strides[m.adim[0]];
        g->bs_b = bb->strides[m.bdim[0]];
        g->cs_b = cb->strides[0];
        g->M = pc->dom.fext[1];
        g->i0 = 0;
    } else {
        g->nb = 1;
        g->b0 = g->as_b = g->bs_b = g->cs_b = 0;
        g->M = pc->dom.fext[0];
        g->i0 = pc->dom.flo[0];
    }
    return g->nb > 0 && g->M > 0 && g->N > 0;
}

/* ---- the tile kernels: an MR x NR tile over kc products, from packed panels ---------- */

typedef float v4f __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));



/* An MR x NR tile (NR two vectors of LANES) over kc products, its twelve accumulators in
 * named variables: held in an array, GCC 12 stored the whole array to the stack at every
 * step of k (twelve stores a step: the kernel ran at half speed, store-bound). */
#define TILE_NAMED(ATTR, NAME, T, V, LANES, SETZERO, LOADU, BCAST, FMA, STOREU)                          \
    ATTR static void NAME(int kc, const T *a, const T *b, T *c)                                  \
    {                                                                                          \
        V c00 = SETZERO(), c01 = SETZERO(), c10 = SETZERO(), c11 = SETZERO();                  \
        V c20 = SETZERO(), c21 = SETZERO(), c30 = SETZERO(), c31 = SETZERO();                  \
        V c40 = SETZERO(), c41 = SETZERO(), c50 = SETZERO(), c51 = SETZERO();                  \
        for (int p = 0; p < kc; p++, a += MR, b += 2 * LANES) {                                \
            V b0 = LOADU(b), b1 = LOADU(b + LANES), av;                                        \
            av = BCAST(a + 0); c00 = FMA(av, b0, c00); c01 = FMA(av, b1, c01);                 \
            av = BCAST(a + 1); c10 = FMA(av, b0, c10); c11 = FMA(av, b1, c11);                 \
            av = BCAST(a + 2); c20 = FMA(av, b0, c20); c21 = FMA(av, b1, c21);                 \
            av = BCAST(a + 3); c30 = FMA(av, b0, c30); c31 = FMA(av, b1, c31);                 \
            av = BCAST(a + 4); c40 = FMA(av, b0, c40); c41 = FMA(av, b1, c41);                 \
            av = BCAST(a + 5); c50 = FMA(av, b0, c50); c51 = FMA(av, b1, c51);                 \
        }                                                                                      \
        STOREU(c + 0 * 2 * LANES, c00); STOREU(c + 0 * 2 * LANES + LANES, c01);                \
        STOREU(c + 1 * 2 * LANES, c10); STOREU(c + 1 * 2 * LANES + LANES, c11);                \
        STOREU(c + 2 * 2 * LANES, c20); STOREU(c + 2 * 2 * LANES + LANES, c21);                \
        STOREU(c + 3 * 2 * LANES, c30); STOREU(c + 3 * 2 * LANES + LANES, c31);                \
        STOREU(c + 4 * 2 * LANES, c40); STOREU(c + 4 * 2 * LANES + LANES, c41);                \
        STOREU(c + 5 * 2 * LANES, c50); STOREU(c + 5 * 2 * LANES + LANES, c51);                \
    }

/* SSE2 (every x86-64) and other targets: GCC's vector extension, multiply then add */
static inline v4f v4f_zero(void) { return (v4f){0, 0, 0, 0}; }
static inline v4f v4f_load(const float *p) { v4f v; memcpy(&v, p, sizeof v); return v; }
static inline v4f v4f_bcast(const float *p) { return (v4f){*p, *p, *p, *p}; }
static inline v4f v4f_fma(v4f a, v4f b, v4f c) { return c + a * b; }
static inline void v4f_store(float *p, v4f v) { memcpy(p, &v, sizeof v); }
static inline v2d v2d_zero(void) { return (v2d){0, 0}; }
static inline v2d v2d_load(const double *p) { v2d v; memcpy(&v, p, sizeof v); return v; }
static inline v2d v2d_bcast(const double *p) { return (v2d){*p, *p}; }
static inline v2d v2d_fma(v2d a, v2d b, v2d c) { return c + a * b; }
static inline void v2d_store(double *p, v2d v) { memcpy(p, &v, sizeof v); }
TILE_NAMED(, tile_f32_sse, float, v4f, 4, v4f_zero, v4f_load, v4f_bcast, v4f_fma, v4f_store)
TILE_NAMED(, tile_f64_sse, double, v2d, 2, v2d_zero, v2d_load, v2d_bcast, v2d_fma, v2d_store)

#if GEMM_X86
TILE_NAMED(__attribute__((target("avx2,fma"))), tile_f32_avx2, float, __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_broadcast_ss, _mm256_fmadd_ps,
          _mm256_storeu_ps)
TILE_NAMED(__attribute__((target("avx2,fma"))), tile_f64_avx2, double, __m256d, 4, _mm256_setzero_pd, _mm256_loadu_pd, _mm256_broadcast_sd,
          _mm256_fmadd_pd, _mm256_storeu_pd)
#endif

/* The kernels of one element type: the tile, its width NR. */
typedef struct gemm_kernel {
    void (*tile)(int kc, const void *a, const void *b, void *c);
    int nr;
} gemm_kernel;

static gemm_kernel pick_kernel(int ct)
{
    gemm_kernel k;
#if GEMM_X86
    /* REDJIT_GEMM_PORTABLE=1: the SSE2 kernels anyway (tests/CMakeLists.txt runs them so) */
    const char *portable = getenv("REDJIT_GEMM_PORTABLE");
    if (!(portable && *portable == '1') && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        k.tile = ct == CT_F32 ? (void (*)(int, const void *, const void *, void *))tile_f32_avx2
                              : (void (*)(int, const void *, const void *, void *))tile_f64_avx2;
        k.nr = ct == CT_F32 ? 16 : 8;
        return k;
    }
#endif
    k.tile = ct == CT_F32 ? (void (*)(int, const void *, const void *, void *))tile_f32_sse
                          : (void (*)(int, const void *, const void *, void *))tile_f64_sse;
    k.nr = ct == CT_F32 ? 8 : 4;
    return k;
}

/* ---- packing and the blocked loops ------------------------------------------------------ */

/* A's rows i0..i0+mc-1, k0..k0+kc-1, in micro-panels of MR rows: [rp][p][r] (rows past mc zero),
 * read along each row. */
#define PACK_A(T)                                                                                  \
    do {                                                                                           \
        const T *a = (const T *)g->a;                                                              \
        for (int rp = 0; rp < mc; rp += MR) {                                                      \
            T *d = (T *)dst + (size_t)rp * kc;                                                     \
            for (int r = 0; r < MR; r++) {                                                         \
                if (rp + r >= mc) {                                                                \
                    for (int p = 0; p < kc; p++) d[(size_t)p * MR + r] = (T)0;                     \
                    continue;                                                                      \
                }                                                                                  \
                const T *src = a + (g->i0 + i0 + rp + r) * g->as_i + k0 * g->as_k;                 \
                for (int p = 0; p < kc; p++) d[(size_t)p * MR + r] = src[p * g->as_k];             \
            }                                                                                      \
        }                                                                                          \
    } while (0)
static void pack_a(const gemm_op *g, int64_t i0, int mc, int64_t k0, int kc, void *dst)
{
    if (g->ct == CT_F32) PACK_A(float);
    else PACK_A(double);
}

/* B's k0..k0+kc-1 x j0..j0+nc-1, micro-panel jp (nr columns): [p][j] (columns past nc zero). */
#define PACK_B(T)                                                                                  \
    do {                                                                                           \
        T *d = (T *)dst + (size_t)jp * kc;                                                         \
        const T *b = (const T *)g->b;                                                              \
        int w = nc - jp < nr ? nc - jp : nr;                                                       \
        for (int p = 0; p < kc; p++, d += nr) {                                                    \
            const T *row = b + (k0 + p) * g->bs_k + (j0 + jp) * g->bs_j;                           \
            for (int j = 0; j < w; j++) d[j] = row[j * g->bs_j];                                   \
            for (int j = w; j < nr; j++) d[j] = (T)0;                                              \
        }                                                                                          \
    } while (0)
static void pack_b(const gemm_op *g, int64_t k0, int kc, int64_t j0, int nc, int jp, int nr, void *dst)
{
    if (g->ct == CT_F32) PACK_B(float);
    else PACK_B(double);
}

enum { NC = 256 };   /* columns of B a packed panel holds (a multiple of every NR) */
#define ACC_MAX ((int64_t)1 << 20)   /* f64 accumulators at once: 8 MiB, which stay in L3 */

/* The tiles of rows i0..i0+mc-1 (packed in ap) and the packed B panel (columns j0..j0+nc-1,
 * kc products), each tile's panel sum added into the f64 rows `acc` (row stride N, row 0 at i0). */
static void panel_rows(const gemm_op *g, gemm_kernel kn, int mc, int kc, int64_t j0, int nc, const void *ap,
                       const void *bp, double *acc, void *tile, int64_t i0)
{
    int nr = kn.nr, sz = g->ct == CT_F32 ? 4 : 8;
    for (int jp = 0; jp < nc; jp += nr)
        for (int rp = 0; rp < mc; rp += MR) {
            kn.tile(kc, (const unsigned char *)ap + (size_t)rp * kc * sz, (const unsigned char *)bp + (size_t)jp * kc * sz,
                    tile);
            int h = mc - rp < MR ? mc - rp : MR, w = nc - jp < nr ? nc - jp : nr;
            for (int r = 0; r < h; r++) {
                if (!acc) {   /* one panel of k: the tile is the result */
                    int64_t at = (g->i0 + i0 + rp + r) * g->cs_i + (j0 + jp) * g->cs_j;
                    if (g->ct == CT_F32)
                        for (int j = 0; j < w; j++) ((float *)g->c)[at + j * g->cs_j] = ((const float *)tile)[r * nr + j];
                    else
                        for (int j = 0; j < w; j++) ((double *)g->c)[at + j * g->cs_j] = ((const double *)tile)[r * nr + j];
                    continue;
                }
                double *row = acc + (size_t)(rp + r) * g->N + j0 + jp;
                if (g->ct == CT_F32)
                    for (int j = 0; j < w; j++) row[j] += ((const float *)tile)[r * nr + j];
                else
                    for (int j = 0; j < w; j++) row[j] += ((const double *)tile)[r * nr + j];
            }
        }
}

/* One matrix of the batch (gp's operands and result), its rows `rows` at a time through the
 * f64 accumulators `acc`, B's panels packed into bp; 0 or RED_ERR_NOMEM. */
static int gemm_matrix(const gemm_op *gp, gemm_kernel kn, const pass_ctx *pc, int64_t rows, double *acc, void *bp)
{
    const gemm_op g = *gp;
    int rc = 0, sz = g.ct == CT_F32 ? 4 : 8, nr = kn.nr;
#pragma omp parallel num_threads(pc->nthreads)
    {
        void *ap = malloc((size_t)MC * KC * sz), *tile = malloc((size_t)MR * 16 * sz);
        int ok = ap && tile;
        if (!ok) {
#pragma omp critical(redjit_fault)
            rc = RED_ERR_NOMEM;
        }
#pragma omp barrier
        /* f64 results whose rows are N apart are their own accumulators; with one panel of k
         * (K <= KC) each tile is written as it is, as a sum of at most KC terms */
        const int single = g.K <= KC, direct = single || (g.ct == CT_F64 && g.cs_j == 1 && g.cs_i == g.N);
        for (int64_t R0 = 0; !rc && R0 < g.M; R0 += rows) {
            int64_t nrows = g.M - R0 < rows ? g.M - R0 : rows, nblk = (nrows + MC - 1) / MC;
            double *acc_r = single ? NULL : direct ? (double *)g.c + (g.i0 + R0) * g.cs_i : acc;
#pragma omp for schedule(static)
            for (int64_t i = 0; i < (single ? 0 : nrows * g.N); i++) acc_r[i] = 0.0;
            /* every thread meets every worksharing loop: an interrupt only skips their work */
            for (int64_t k0 = 0; k0 < g.K; k0 += KC) {
                int kc = (int)(g.K - k0 < KC ? g.K - k0 : KC);
                for (int64_t j0 = 0; j0 < g.N; j0 += NC) {
                    int nc = (int)(g.N - j0 < NC ? g.N - j0 : NC);
#pragma omp for schedule(static)
                    for (int jp = 0; jp < nc; jp += nr)
                        if (!core_cancelled(pc->cancel)) pack_b(gp, k0, kc, j0, nc, jp, nr, bp);
#pragma omp for schedule(dynamic, 1)
                    for (int64_t b = 0; b < nblk; b++) {
                        if (!ok || core_cancelled(pc->cancel)) continue;
                        int64_t i0 = R0 + b * MC;
                        int mc = (int)(g.M - i0 < MC ? g.M - i0 : MC);
                        pack_a(gp, i0, mc, k0, kc, ap);
                        panel_rows(gp, kn, mc, kc, j0, nc, ap, bp, acc_r ? acc_r + (size_t)(b * MC) * g.N : NULL,
                                   tile, i0);
                    }
                }
            }
            if (direct) continue;
#pragma omp for schedule(static)
            for (int64_t r = 0; r < nrows; r++)
                for (int64_t j = 0; j < g.N; j++) {
                    size_t off = (size_t)((g.i0 + R0 + r) * g.cs_i + j * g.cs_j);
                    double v = acc[(size_t)r * g.N + j];
                    if (g.ct == CT_F32) ((float *)g.c)[off] = (float)v;
                    else ((double *)g.c)[off] = v;
                }
        }
        free(ap);
        free(tile);
    }
    return rc;
}

int cpu_try_gemm(pass_ctx *pc, util_diag *diag, int *done)
{
    gemm_op g;
    *done = 0;
    if (!gemm_layout(pc, &g)) return 0;
    /* worth it where the operands are reused: a product of 16 or more along each side */
    if (g.M < 16 || g.N < 16 || g.K < 16) return 0;
    gemm_kernel kn = pick_kernel(g.ct);
    int sz = g.ct == CT_F32 ? 4 : 8;
    /* rows at a time: as many as ACC_MAX f64 accumulators hold, whole blocks of MC */
    int64_t rows = ACC_MAX / g.N / MC * MC;
    if (rows < MC) rows = MC;
    if (rows > (g.M + MC - 1) / MC * MC) rows = (g.M + MC - 1) / MC * MC;
    /* f64 accumulators where results are summed over several panels of k and are not
     * their own (gemm_matrix's `direct`) */
    int need_acc = g.K > KC && !(g.ct == CT_F64 && g.cs_j == 1 && g.cs_i == g.N);
    double *acc = need_acc ? malloc((size_t)rows * (size_t)g.N * sizeof *acc) : NULL;
    void *bp = malloc((size_t)NC * KC * sz);
    int rc = (acc || !need_acc) && bp ? 0 : RED_ERR_NOMEM;
    for (int64_t bt = 0; bt < g.nb && !rc; bt++) {
        /* matrix bt of the batch: its operands and result from where they start */
        gemm_op one = g;
        int64_t at = g.b0 + bt;
        one.a = g.a + at * g.as_b * sz;
        one.b = g.b + at * g.bs_b * sz;
        one.c = g.c + at * g.cs_b * sz;
        rc = gemm_matrix(&one, kn, pc, rows, acc, bp);
    }
    free(acc);
    free(bp);
    if (rc) return util_diag_set(diag, rc, "out of memory");
    *done = 1;
    return 0;
}
