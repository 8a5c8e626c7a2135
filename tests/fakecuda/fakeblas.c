/*
 * fakeblas.c -- a stand-in for libcublasLt.so.13 beside the stand-in driver
 * (fakecuda.c, whose device memory is host memory): the functions
 * src/gpu/blas.c calls, with descriptors of its own, and cublasLtMatmul
 * computed here on the host in the compute type, batch by batch, from the
 * layouts it was given.  So a test without a GPU checks what blas.c asks
 * for (which operand, which transposition, leading dimensions and batch
 * strides) by the product's values.  fakeblas_calls() counts the products
 * run; FAKEBLAS_NO_ALGO=1 makes the heuristic find none.  As cuBLASLt, it
 * takes every matrix to start on 256 bytes unless the preference says less
 * (MIN_ALIGNMENT_*), and a product whose starts are not so aligned is
 * NOT_SUPPORTED.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct fk_desc {
    int compute, scale, transa, transb;
} fk_desc;
typedef struct fk_layout {
    int type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;
    int64_t stride;
} fk_layout;
typedef struct {
    uint64_t data[8];
} fk_algo;
typedef struct {
    fk_algo algo;
    size_t workspace;
    int state;
    float waves;
    int reserved[4];
} fk_heuristic;

enum { OK = 0, NOT_INITIALIZED = 1, INVALID_VALUE = 7, NOT_SUPPORTED = 15 };

static int calls;

EXPORT int fakeblas_calls(void) { return calls; }

EXPORT int cublasLtCreate(void **h)
{
    *h = malloc(16);
    return *h ? OK : NOT_INITIALIZED;
}

EXPORT int cublasLtDestroy(void *h)
{
    free(h);
    return OK;
}

EXPORT int cublasLtMatmulDescCreate(fk_desc **d, int compute, int scale)
{
    if ((compute != 68 || scale != 0) && (compute != 70 || scale != 1)) return NOT_SUPPORTED;
    *d = calloc(1, sizeof **d);
    if (!*d) return NOT_INITIALIZED;
    (*d)->compute = compute;
    (*d)->scale = scale;
    return OK;
}

EXPORT int cublasLtMatmulDescDestroy(fk_desc *d)
{
    free(d);
    return OK;
}

EXPORT int cublasLtMatmulDescSetAttribute(fk_desc *d, int attr, const void *buf, size_t n)
{
    int32_t v;
    if (n != sizeof v || (attr != 3 && attr != 4)) return INVALID_VALUE;
    memcpy(&v, buf, sizeof v);
    if (v != 0 && v != 1) return INVALID_VALUE;
    if (attr == 3) d->transa = v;
    else d->transb = v;
    return OK;
}

EXPORT int cublasLtMatrixLayoutCreate(fk_layout **l, int type, uint64_t rows, uint64_t cols, int64_t ld)
{
    if ((type != 0 && type != 1) || ld < (int64_t)(rows ? rows : 1)) return INVALID_VALUE;
    *l = calloc(1, sizeof **l);
    if (!*l) return NOT_INITIALIZED;
    **l = (fk_layout){type, rows, cols, ld, 1, 0};
    return OK;
}

EXPORT int cublasLtMatrixLayoutDestroy(fk_layout *l)
{
    free(l);
    return OK;
}

EXPORT int cublasLtMatrixLayoutSetAttribute(fk_layout *l, int attr, const void *buf, size_t n)
{
    if (attr == 5 && n == sizeof(int32_t)) {
        memcpy(&l->batch, buf, n);
        return l->batch >= 1 ? OK : INVALID_VALUE;
    }
    if (attr == 6 && n == sizeof(int64_t)) {
        memcpy(&l->stride, buf, n);
        return OK;
    }
    return INVALID_VALUE;
}

typedef struct fk_pref {
    uint32_t align[4];   /* A, B, C, D */
} fk_pref;

EXPORT int cublasLtMatmulPreferenceCreate(fk_pref **p)
{
    *p = malloc(sizeof **p);
    if (!*p) return NOT_INITIALIZED;
    for (int i = 0; i < 4; i++) (*p)->align[i] = 256;
    return OK;
}

EXPORT int cublasLtMatmulPreferenceDestroy(void *p)
{
    free(p);
    return OK;
}

EXPORT int cublasLtMatmulPreferenceSetAttribute(fk_pref *p, int attr, const void *buf, size_t n)
{
    if (attr == 1) return n == sizeof(uint64_t) ? OK : INVALID_VALUE;
    if (attr >= 5 && attr <= 8 && n == sizeof(uint32_t)) {
        memcpy(&p->align[attr - 5], buf, n);
        return OK;
    }
    return INVALID_VALUE;
}

EXPORT int cublasLtMatmulAlgoGetHeuristic(void *h, fk_desc *d, fk_layout *a, fk_layout *b, fk_layout *c, fk_layout *dd,
                                          fk_pref *pref, int want, fk_heuristic *out, int *found)
{
    (void)h, (void)d, (void)a, (void)b, (void)c, (void)dd;
    const char *no = getenv("FAKEBLAS_NO_ALGO");
    *found = 0;
    if (want < 1 || (no && *no == '1')) return OK;
    memset(out, 0, sizeof *out);
    out->algo.data[0] = 0x5eed;
    for (int i = 0; i < 4; i++) out->algo.data[1 + i] = pref->align[i];   /* what the algorithm assumes */
    out->workspace = 1 << 20;   /* so that the caller's workspace is exercised */
    *found = 1;
    return OK;
}

/* element (r, c) of op(M), M stored column-major at p with leading dimension ld */
static double at(const fk_layout *l, const void *p, int op, int64_t batch, uint64_t r, uint64_t c)
{
    uint64_t sr = op ? c : r, sc = op ? r : c;
    int64_t off = batch * l->stride + (int64_t)sr + (int64_t)sc * l->ld;
    return l->type ? ((const double *)p)[off] : ((const float *)p)[off];
}

EXPORT int cublasLtMatmul(void *h, fk_desc *d, const void *alpha, const void *A, fk_layout *la, const void *B,
                          fk_layout *lb, const void *beta, const void *C, fk_layout *lc, void *D, fk_layout *ld,
                          const fk_algo *algo, void *ws, size_t wsize, void *stream)
{
    (void)h, (void)stream;
    if (!algo || algo->data[0] != 0x5eed || (wsize && !ws) || C != D || lc != ld) return INVALID_VALUE;
    uint64_t m = ld->rows, n = ld->cols, k = d->transa ? la->rows : la->cols;
    if ((d->transa ? la->cols : la->rows) != m || (d->transb ? lb->cols : lb->rows) != k ||
        (d->transb ? lb->rows : lb->cols) != n || la->batch != ld->batch || lb->batch != ld->batch)
        return INVALID_VALUE;
    /* every matrix of the batch starts where the algorithm assumes */
    const void *ptr[4] = {A, B, C, D};
    const fk_layout *lay[4] = {la, lb, lc, ld};
    for (int i = 0; i < 4; i++)
        for (int32_t b = 0; b < ld->batch; b++) {
            uintptr_t at = (uintptr_t)ptr[i] + (uintptr_t)(b * lay[i]->stride * (lay[i]->type ? 8 : 4));
            if (at % algo->data[1 + i]) return NOT_SUPPORTED;
        }
    double al = d->scale ? *(const double *)alpha : *(const float *)alpha;
    double be = d->scale ? *(const double *)beta : *(const float *)beta;
    if (be != 0) return NOT_SUPPORTED;
    for (int32_t b = 0; b < ld->batch; b++)
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t j = 0; j < n; j++) {
                double s = 0;
                float sf = 0;
                for (uint64_t p = 0; p < k; p++) {
                    double t = at(la, A, d->transa, b, i, p) * at(lb, B, d->transb, b, p, j);
                    s += t;
                    sf += (float)t;
                }
                int64_t off = b * ld->stride + (int64_t)i + (int64_t)j * ld->ld;
                if (ld->type) ((double *)D)[off] = al * s;
                else ((float *)D)[off] = (float)al * sf;
            }
    calls++;
    return OK;
}
