/*
 * blas.c -- matrix products through cuBLASLt (cg_kernel.gemm).  A pass that is
 * exactly C[i,j] = sum(A[i,k]*B[k,j]) over k, or a batch C[b,i,j] of them, in
 * f32 or f64, runs as one cublasLtMatmul under the automatic strategy where
 * each matrix has a stride of one element along i, j or k and the other no
 * smaller than that extent (any batch stride), every index starts at 0, and
 * the run allows it (RED_OPT_BLAS); elsewhere the generated kernels run.
 * libcublasLt is loaded with dlopen on first use, like the driver and NVRTC
 * (REDJIT_CUBLASLT_LIB names the file; else libcublasLt.so.13, .so.12 or
 * .so on the loader's path or in /usr/local/cuda/lib64), and declared here
 * by hand: nothing needs its headers to build.  Without it, where it finds
 * no algorithm for the layouts and the matrices' alignment (told to it: a
 * view may start 4 bytes past 16), or where cublasLtMatmul refuses them
 * before running, the generated kernels run.
 *
 * Products are FP32 (CUBLAS_COMPUTE_32F, never TF32) or FP64 and
 * deterministic: the algorithm the heuristic picks for a pass and a layout
 * is kept in the pass (pass_entry.blas_*) and used again, and every cuBLASLt
 * reduction scheme sums in a fixed order.  The bits may differ from the
 * generated kernels' (another order of the sum over k), within the same
 * rounding bounds.
 *
 * cuBLASLt is column-major: D (m x n) = op(X) (m x k) * op(Y) (k x n).  A
 * result with unit stride along i is D = C, X = A, Y = B; one with unit
 * stride along j is D = C^T, X = B^T, Y = A^T.  Each operand is stored as
 * itself (op N) or as its transpose (op T), whichever has the unit stride.
 */
#include "gpu_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cuBLASLt's types and constants (cublasLt.h, cublas_api.h, library_types.h) */
typedef int lt_status;
typedef struct lt_ctx *lt_handle;
typedef struct lt_opaque *lt_desc, *lt_layout, *lt_pref;
typedef struct {
    uint64_t data[8];
} lt_algo;
typedef struct {
    lt_algo algo;
    size_t workspace;
    lt_status state;
    float waves;
    int reserved[4];
} lt_heuristic;

enum {
    LT_R_32F = 0, LT_R_64F = 1,             /* cudaDataType_t */
    LT_COMPUTE_32F = 68, LT_COMPUTE_64F = 70, /* cublasComputeType_t */
    LT_OP_N = 0, LT_OP_T = 1,                /* cublasOperation_t */
    LT_DESC_TRANSA = 3, LT_DESC_TRANSB = 4,  /* int32_t */
    LT_LAYOUT_BATCH_COUNT = 5,               /* int32_t */
    LT_LAYOUT_BATCH_STRIDE = 6,              /* int64_t, elements */
    LT_PREF_MAX_WORKSPACE = 1,               /* uint64_t */
    LT_PREF_MIN_ALIGN_A = 5,                 /* uint32_t, bytes; then B, C, D: 6, 7, 8 */
    LT_NOT_SUPPORTED = 15, LT_INVALID_VALUE = 7,   /* cublasStatus_t */
};

/* the workspace a product may have */
#define LT_WORKSPACE (32u << 20)

static struct {
    lt_status (*Create)(lt_handle *);
    lt_status (*Destroy)(lt_handle);
    lt_status (*MatmulDescCreate)(lt_desc *, int compute, int scale);
    lt_status (*MatmulDescDestroy)(lt_desc);
    lt_status (*MatmulDescSetAttribute)(lt_desc, int, const void *, size_t);
    lt_status (*MatrixLayoutCreate)(lt_layout *, int type, uint64_t rows, uint64_t cols, int64_t ld);
    lt_status (*MatrixLayoutDestroy)(lt_layout);
    lt_status (*MatrixLayoutSetAttribute)(lt_layout, int, const void *, size_t);
    lt_status (*MatmulPreferenceCreate)(lt_pref *);
    lt_status (*MatmulPreferenceDestroy)(lt_pref);
    lt_status (*MatmulPreferenceSetAttribute)(lt_pref, int, const void *, size_t);
    lt_status (*MatmulAlgoGetHeuristic)(lt_handle, lt_desc, lt_layout, lt_layout, lt_layout, lt_layout, lt_pref, int,
                                        lt_heuristic *, int *);
    lt_status (*Matmul)(lt_handle, lt_desc, const void *alpha, const void *a, lt_layout, const void *b, lt_layout,
                        const void *beta, const void *c, lt_layout, void *d, lt_layout, const lt_algo *, void *ws,
                        size_t ws_size, CUstream);
    int ok;
} lt;

static pthread_once_t lt_once = PTHREAD_ONCE_INIT;

static void lt_load(void)
{
    static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
                                        "/usr/local/cuda/lib64/libcublasLt.so.13",
                                        "/usr/local/cuda/lib64/libcublasLt.so.12", NULL};
    const char *env = getenv("REDJIT_CUBLASLT_LIB");
    void *h = env && *env ? dlopen(env, RTLD_NOW | RTLD_LOCAL) : NULL;
    for (int i = 0; !(env && *env) && names[i] && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
#define LT(f) *(void **)&lt.f = dlsym(h, "cublasLt" #f)
    LT(Create); LT(Destroy); LT(MatmulDescCreate); LT(MatmulDescDestroy); LT(MatmulDescSetAttribute);
    LT(MatrixLayoutCreate); LT(MatrixLayoutDestroy); LT(MatrixLayoutSetAttribute); LT(MatmulPreferenceCreate);
    LT(MatmulPreferenceDestroy); LT(MatmulPreferenceSetAttribute); LT(MatmulAlgoGetHeuristic); LT(Matmul);
#undef LT
    lt.ok = lt.Create && lt.Destroy && lt.MatmulDescCreate && lt.MatmulDescDestroy && lt.MatmulDescSetAttribute &&
            lt.MatrixLayoutCreate && lt.MatrixLayoutDestroy && lt.MatrixLayoutSetAttribute &&
            lt.MatmulPreferenceCreate && lt.MatmulPreferenceDestroy && lt.MatmulPreferenceSetAttribute &&
            lt.MatmulAlgoGetHeuristic && lt.Matmul;
    if (!lt.ok) dlclose(h);
}

/* gpu_close's part: the handle given back (gpu_dev.blas_close) */
static void lt_close(void *h)
{
    lt.Destroy(h);
}

/* The device's handle, made on first use; NULL where cuBLASLt is missing or
 * would not start.  (Runs hold g->lock, as for everything here.) */
static lt_handle lt_handle_of(gpu_dev *g)
{
    pthread_once(&lt_once, lt_load);
    if (!lt.ok) return NULL;
    if (!g->blas_tried) {
        lt_handle h = NULL;
        g->blas_tried = 1;
        if (!lt.Create(&h)) {
            g->blas = h;
            g->blas_close = lt_close;
        }
    }
    return g->blas;
}

/* A rows x cols operand whose element (r, c) is at r * sr + c * sc: stored
 * column-major as itself (op N) or as its transpose (op T), rows x cols of
 * the stored matrix and its leading dimension ld.  0 where neither has unit
 * stride with the other no smaller than its extent. */
typedef struct lt_mat {
    long long rows, cols, ld, batch;
    int op;
} lt_mat;

static int as_operand(long long rows, long long cols, long long sr, long long sc, long long batch, lt_mat *m)
{
    if (rows < 1 || cols < 1 || sr < 0 || sc < 0 || batch < 0) return 0;
    if (rows == 1) sr = 1;       /* a stride never used */
    if (cols == 1) sc = rows;
    if (sr == 1 && sc >= rows) {
        *m = (lt_mat){rows, cols, sc, batch, LT_OP_N};
        return 1;
    }
    if (sc == 1 && sr >= cols) {
        *m = (lt_mat){cols, rows, sr, batch, LT_OP_T};
        return 1;
    }
    return 0;
}

/* The product's shape: D = op(X) * op(Y), m x n over k, nb of them; X, Y, D's
 * device pointers and layouts; the key of the algorithm's choice. */
typedef struct lt_gemm {
    long long m, n, k, nb;
    lt_mat x, y, d;
    CUdeviceptr px, py, pd;
    int f64;
} lt_gemm;

/* From the pass's parameters (cg_kernel.gemm): 0 where cuBLASLt cannot take
 * them as they are. */
static int gemm_shape(const run_ctx *r, const cg_kernel *k, lt_gemm *q)
{
    const long long *P = r->params;
    long long ext[4];   /* b, i, j, k */
    for (int v = 0; v < 4; v++) {
        if (k->gm_sz[v] < 0) {
            ext[v] = 1;
            continue;
        }
        if (P[k->gm_lo[v]] != 0) return 0;
        ext[v] = P[k->gm_sz[v]];
    }
    if (ext[0] < 1 || ext[1] < 1 || ext[2] < 1 || ext[3] < 1 || ext[0] > 0x7fffffff) return 0;
    long long st[3][4];   /* A, B, C's strides along b, i, j, k (0 where it has no such dimension) */
    for (int s = 0; s < 3; s++)
        for (int v = 0; v < 4; v++) {
            int d = k->gm_dim[s][v];
            st[s][v] = d < 0 ? 0 : P[k->gm_base[s] + 1 + k->gm_nd[s] + d];
        }
    CUdeviceptr pa = (CUdeviceptr)P[k->gm_base[0]], pb = (CUdeviceptr)P[k->gm_base[1]], pc = (CUdeviceptr)P[k->gm_base[2]];
    long long M = ext[1], N = ext[2], K = ext[3], nb = ext[0];
    q->nb = nb;
    q->k = K;
    q->f64 = k->gemm == CT_F64 + 1;
    if (as_operand(M, N, st[2][1], st[2][2], st[2][0], &q->d) && q->d.op == LT_OP_N) {
        /* C column-major: D = C = A * B */
        q->m = M, q->n = N, q->px = pa, q->py = pb;
        return as_operand(M, K, st[0][1], st[0][3], st[0][0], &q->x) &&
               as_operand(K, N, st[1][3], st[1][2], st[1][0], &q->y) && (q->pd = pc, 1);
    }
    if (as_operand(N, M, st[2][2], st[2][1], st[2][0], &q->d) && q->d.op == LT_OP_N) {
        /* C row-major: D = C^T = B^T * A^T */
        q->m = N, q->n = M, q->px = pb, q->py = pa;
        return as_operand(N, K, st[1][2], st[1][3], st[1][0], &q->x) &&
               as_operand(K, M, st[0][3], st[0][1], st[0][0], &q->y) && (q->pd = pc, 1);
    }
    return 0;
}

static lt_status make_layout(lt_layout *l, const lt_mat *m, int type, long long nb)
{
    lt_status s = lt.MatrixLayoutCreate(l, type, (uint64_t)m->rows, (uint64_t)m->cols, m->ld);
    if (s || nb == 1) return s;
    int32_t count = (int32_t)nb;
    int64_t stride = m->batch;
    if ((s = lt.MatrixLayoutSetAttribute(*l, LT_LAYOUT_BATCH_COUNT, &count, sizeof count))) return s;
    return lt.MatrixLayoutSetAttribute(*l, LT_LAYOUT_BATCH_STRIDE, &stride, sizeof stride);
}

/* The alignment in bytes (a power of two, at most 256) of every start of a
 * column of every matrix of the batch: cuBLASLt takes 256 unless told
 * (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*), and an algorithm for 16-byte
 * starts refuses, or faults on, a view 4 bytes in. */
static uint32_t align_of(CUdeviceptr p, const lt_mat *m, long long nb, int esz)
{
    unsigned long long v = (unsigned long long)p | (unsigned long long)m->ld * (unsigned long long)esz;
    if (nb > 1) v |= (unsigned long long)m->batch * (unsigned long long)esz;
    unsigned long long a = v & (~v + 1);   /* the lowest bit set */
    return !v || a > 256 ? 256 : (uint32_t)a;
}

/* The key of a product's choice: its shape, layouts and alignments. */
static uint64_t gemm_key(const lt_gemm *q, const uint32_t al[3])
{
    long long v[] = {q->m, q->n, q->k, q->nb, q->f64, q->x.rows, q->x.ld, q->x.op, q->x.batch,
                     q->y.rows, q->y.ld, q->y.op, q->y.batch, q->d.ld, q->d.batch, al[0], al[1], al[2]};
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        h ^= (uint64_t)v[i];
        h *= 1099511628211ull;
    }
    return h | 1;
}

int gpu_blas_gemm(run_ctx *r, pass_entry *e)
{
    gpu_dev *g = r->g;
    lt_gemm q;
    if (!e->k.gemm || !r->run || !r->run->blas || !gemm_shape(r, &e->k, &q)) return GPU_BLAS_NOT_TAKEN;
    lt_handle h = lt_handle_of(g);
    if (!h) return GPU_BLAS_NOT_TAKEN;
    int type = q.f64 ? LT_R_64F : LT_R_32F;
    lt_desc desc = NULL;
    lt_layout lx = NULL, ly = NULL, ld = NULL;
    lt_pref pref = NULL;
    int32_t opx = q.x.op, opy = q.y.op;
    lt_status s = lt.MatmulDescCreate(&desc, q.f64 ? LT_COMPUTE_64F : LT_COMPUTE_32F, type);
    if (!s) s = lt.MatmulDescSetAttribute(desc, LT_DESC_TRANSA, &opx, sizeof opx);
    if (!s) s = lt.MatmulDescSetAttribute(desc, LT_DESC_TRANSB, &opy, sizeof opy);
    if (!s) s = make_layout(&lx, &q.x, type, q.nb);
    if (!s) s = make_layout(&ly, &q.y, type, q.nb);
    if (!s) s = make_layout(&ld, &q.d, type, q.nb);
    int rc = GPU_BLAS_NOT_TAKEN;   /* until it runs */
    int esz = q.f64 ? 8 : 4;
    uint32_t al[3] = {align_of(q.px, &q.x, q.nb, esz), align_of(q.py, &q.y, q.nb, esz), align_of(q.pd, &q.d, q.nb, esz)};
    uint64_t key = gemm_key(&q, al);
    lt_algo algo;
    size_t wsize = 0;
    int have = 0;
    /* the algorithm this layout had before (the run holds g->lock) */
    if (e->blas_key == key) {
        memcpy(&algo, e->blas_algo, sizeof algo);
        wsize = e->blas_ws;
        have = 1;
    }
    if (!s && !have) {
        /* else the heuristic's first choice, kept for every run of this layout */
        uint64_t max_ws = LT_WORKSPACE;
        lt_heuristic best;
        int found = 0;
        memset(&best, 0, sizeof best);
        s = lt.MatmulPreferenceCreate(&pref);
        if (!s) s = lt.MatmulPreferenceSetAttribute(pref, LT_PREF_MAX_WORKSPACE, &max_ws, sizeof max_ws);
        for (int i = 0; i < 4 && !s; i++)   /* A, B, C, D: X, Y, D, D */
            s = lt.MatmulPreferenceSetAttribute(pref, LT_PREF_MIN_ALIGN_A + i, &al[i < 2 ? i : 2], sizeof al[0]);
        if (!s) s = lt.MatmulAlgoGetHeuristic(h, desc, lx, ly, ld, ld, pref, 1, &best, &found);
        if (!s && found >= 1 && !best.state) {
            algo = best.algo;
            wsize = best.workspace;
            have = 1;
            memcpy(e->blas_algo, &algo, sizeof algo);
            e->blas_ws = wsize;
            e->blas_key = key;
        }
    }
    if (!s && have) {
        CUdeviceptr ws = 0;
        rc = wsize ? gpu_run_get(r, wsize, &ws, 1) : 0;
        if (!rc) {
            double one = 1, zero = 0;
            float onef = 1, zerof = 0;
            const void *alpha = q.f64 ? (const void *)&one : (const void *)&onef;
            const void *beta = q.f64 ? (const void *)&zero : (const void *)&zerof;
            s = lt.Matmul(h, desc, alpha, (const void *)(uintptr_t)q.px, lx, (const void *)(uintptr_t)q.py, ly, beta,
                          (const void *)(uintptr_t)q.pd, ld, (void *)(uintptr_t)q.pd, ld, &algo,
                          (void *)(uintptr_t)ws, wsize, r->s);
            if (s == LT_NOT_SUPPORTED || s == LT_INVALID_VALUE) {
                /* refused before running: the generated kernels, and no choice kept */
                e->blas_key = 0;
                rc = GPU_BLAS_NOT_TAKEN;
            } else if (s) {
                rc = util_diag_set(r->diag, RED_ERR_DEVICE,
                                   "cuBLASLt: cublasLtMatmul failed (status %d) on a %lld x %lld x %lld product", s, q.m,
                                   q.n, q.k);
            }
        }
    }
    if (pref) lt.MatmulPreferenceDestroy(pref);
    if (lx) lt.MatrixLayoutDestroy(lx);
    if (ly) lt.MatrixLayoutDestroy(ly);
    if (ld) lt.MatrixLayoutDestroy(ld);
    if (desc) lt.MatmulDescDestroy(desc);
    return rc;
}
