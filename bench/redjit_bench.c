/*
 * redjit_bench.c -- the redjit side of the GPU benchmark (bench/run.sh): the inputs of
 * bench_data.h built on the host and copied to device memory, every case run through redjit on
 * arrays bound with RED_MEM_CUDA under each strategy, timed with CUDA events, and the JIT and
 * per-call figures.  One JSON object per line on stdout; bench/report.py reads them.
 *
 *   redjit_bench [--log2n 28] [--curve 10,20,24,26,28,30] [--log2s 26] [--rows 16384 --cols 16384]
 *                [--short-rows 33554432 --short-cols 8] [--reps 50] [--warmup 5] [--budget-ms 2000]
 *                [--calls 100000] [--cases id,id,...] [--strategies auto,tree,...] [--no-jit] [--held]
 *                [--cube 1024,512,512] [--comp-strategies auto] [--spmv-log2nnz 26] [--spmv-grid 4096]
 *                [--types-log2n 30] [--types-image 16384,16384] [--pair-log2n 16] [--pair-bilinear 16384]
 *                [--pair-bmm 64,512] [--pair-matmul 4096]
 *
 * Timing: the expression runs on a stream of ours with RED_RESULTS_DEVICE, so red_run returns
 * once its work is queued; events recorded on that stream before and after the call measure the
 * GPU time including any gap the host leaves while launching (as for CUB, whose calls are timed
 * the same way).  Median of --reps runs after --warmup, fewer when one run is slow (--budget-ms
 * per measurement).  Inputs smaller than BD_ROT_BYTES are rotated among copies (bench_data.h).
 * "sync_us" is the host wall time of a plain synchronous red_run with the result on the host.
 * --held: a host function holds the stream for BD_HOLD_US before each timed call, until the call
 * and the closing event are queued behind it, so that the span is the GPU's work alone, not the
 * host's time to get the first kernel going (cub_bench --held does the same); the records say
 * "held": 1.
 *
 * The composition cases (ids comp_*: several reductions, or reductions and a map, over one input)
 * run under --comp-strategies only (default auto), and their records carry every result's
 * checksums ("outs"), the plan's pass count and the first run of the expression in a fresh
 * context ("cold_ms").  --cube gives the shape of the 3-D case.
 *
 * The sparse cases (ids spmv_*: sum(v[k]*x[col[k]]) over k in ptr[r]..ptr[r+1], a CSR matrix times
 * a vector, the result an array of nrows; gather_all: the same products summed whole) run under
 * every strategy like the single reductions, and their records carry nrows and ncols.  Their
 * matrices (bench_data.h) scale with --spmv-log2nnz L: 2^(L-5) rows of 32 and as many power-law
 * rows, 2^(L-1) rows of 1..3, random columns over 2^(L-4); spmv_rand and gather_all take the layout
 * rand over 2^--log2s values; the 2-D Poisson matrix has --spmv-grid G squared rows.  Their inputs
 * are built only where one of them is asked for.
 *
 * The element-type cases (ids types_*: 8- and 16-bit integers, complex c64, the NaN-skipping
 * reductions) run only when --cases names them, never in a run without --cases (bench/run.sh
 * types), and under every strategy like the single reductions.  Their inputs (bench_data.h) scale
 * with --types-log2n L: sum(x) over 2^L u8 and over 2^(L-1) i16, sum(z) and max(abs(z)) over 2^(L-3)
 * c64, sum(conj(w[i]) * z[i]) over i over 2^(L-4) each, nanargmax(x) and nansum(x) over 2^(L-2) f32
 * with about 1% NaN (1 GiB each at L = 30, the dot product's two 512 MiB); the row sums over a u8
 * image of --types-image R,C.  A complex result is reported as "value" (real part) and "imag".
 *
 * The pairwise cases (ids pair_*: a reduction over j of a term of x[i] and y[j], Gaussian kernel
 * sums and nearest neighbours, and the contractions: a bilinear form, batched and plain matrix
 * products) likewise run only when --cases names them (bench/run.sh pairwise), under every
 * strategy, with a cold first run as the compositions have; their records carry "shape", the
 * extents of the expression's indices (n is their product: the terms evaluated).  Their inputs
 * (bench_data.h's normal values) scale with --pair-log2n P: 2^P points and 2^(P-2) (the ids name
 * the sizes at P = 16), 1-D and 3-D alike; the bilinear form's K is --pair-bilinear K squared, the
 * batched product --pair-bmm B,M (B products of M x M matrices), the plain one --pair-matmul M
 * squared.  The products' forced strategies get PAIR_SLOW_REPS runs after PAIR_SLOW_WARMUP, and one
 * whose single run takes longer than PAIR_SKIP_MS is recorded as "skipped", not timed.  A nearest-
 * neighbour record carries, besides its indices' checksums, those of the distances at them ("dist",
 * "dist_check": |x[i] - y[idx[i]]| in 1-D, the Euclidean distance in 3-D), which agree with a peer's
 * where tied distances make the indices differ.
 *
 * The CUDA driver is loaded with dlopen through the library's src/gpu/cu_api.h, so this
 * builds without CUDA headers; without a GPU it prints a notice and exits 0.
 */
#define _GNU_SOURCE
#include <redjit.h>

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_data.h"
#include "bench_time.h"
#include "gpu/cu_api.h"

/* ---- the driver API: the library's own declarations (src/gpu/cu_api.h) ---------------- */
static cu_api cu;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fprintf(stderr, "redjit_bench: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static void cu_check(CUresult r, const char *what)
{
    if (!r) return;
    const char *name = NULL;
    if (cu.GetErrorName) cu.GetErrorName(r, &name);
    die("%s failed: %s (%d)", what, name ? name : "?", r);
}

static void cu_load(void)
{
    int r = cu_api_load(&cu);
    if (r) die(r == -1 ? "libcuda.so.1: %s" : "the CUDA driver lacks a needed function%s", r == -1 ? dlerror() : "");
}




/* --cpu-check: host arrays and the CPU executor at whatever sizes are given, wall-clock times;
 * checks the cases, inputs and checksums against peers.py --numpy-check where there is no GPU. */
static int cpu_mode;

/* ---- options ------------------------------------------------------------------------------ */

static struct {
    int log2n, log2s, reps, warmup;
    long long rows, cols, srows, scols, calls;
    double budget_ms;
    int curve[16], ncurve;
    const char *cases, *strategies;
    int jit, held;
    const char *comp_strategies;
    long long cube[3];
    int spmv_log2nnz;
    long long spmv_grid;
    int types_log2n;
    long long types_image[2];
    int pair_log2n;
    long long pair_bilinear, pair_bmm[2], pair_matmul;
} opt = {28, 26, 50, 5, 16384, 16384, 1LL << 25, 8, 100000, 2000, {10, 20, 24, 26, 28, 30}, 6, NULL,
         "auto,tree,sequential,persistent,segmented", 1, 0, "auto", {1024, 512, 512}, 26, 4096, 30, {16384, 16384},
         16, 16384, {64, 512}, 4096};

static int in_list(const char *list, const char *name)
{
    if (!list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

/* Whether --cases names a case (the types_* and pair_* cases run only when named). */
static int named(const char *name)
{
    return opt.cases && in_list(opt.cases, name);
}

/* ---- device inputs ------------------------------------------------------------------------ */

/* G_COL, G_COL64: the random columns bd_col(k, ncols), as int32 or int64; G_U8, G_I16, G_C64
 * (parts of seeds seed and seed + 1), G_F32NAN (about 1% NaN): the types_* cases'; G_NORMAL (seeds
 * seed to seed + 3): the pair_* cases' */
enum { G_F32, G_F64, G_I32, G_COL, G_COL64, G_U8, G_I16, G_C64, G_F32NAN, G_NORMAL };

/* Device array of n elements of generator `g`, built on the host in chunks (ncols: G_COL's). */
static CUdeviceptr make_gen(int g, int64_t n, uint32_t seed, uint32_t ncols)
{
    size_t esz = g == G_F64 || g == G_COL64 || g == G_C64 ? 8 : g == G_U8 ? 1 : g == G_I16 ? 2 : 4;
    CUdeviceptr d;
    if (cpu_mode) {
        void *p = malloc((size_t)n * esz);
        if (!p) die("out of memory");
        d = (CUdeviceptr)(uintptr_t)p;
    } else
        cu_check(cu.MemAlloc(&d, (size_t)n * esz), "cuMemAlloc");
    const int64_t chunk = (int64_t)1 << 24;
    void *h = malloc((size_t)chunk * esz);
    if (!h) die("out of memory");
    for (int64_t c0 = 0; c0 < n; c0 += chunk) {
        int64_t m = n - c0 < chunk ? n - c0 : chunk;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < m; i++) {
            uint64_t k = (uint64_t)(c0 + i);
            if (g == G_F32) ((float *)h)[i] = bd_f32(k, seed);
            else if (g == G_F64) ((double *)h)[i] = bd_f64(k, seed);
            else if (g == G_COL) ((int32_t *)h)[i] = (int32_t)bd_col(k, ncols);
            else if (g == G_COL64) ((int64_t *)h)[i] = bd_col(k, ncols);
            else if (g == G_U8) ((uint8_t *)h)[i] = bd_u8(k, seed);
            else if (g == G_I16) ((int16_t *)h)[i] = bd_i16(k, seed);
            else if (g == G_C64) bd_c64(k, seed, (float *)h + 2 * i);
            else if (g == G_F32NAN) ((float *)h)[i] = bd_f32_nan(k, seed);
            else if (g == G_NORMAL) ((float *)h)[i] = bd_normal(k, seed);
            else ((int32_t *)h)[i] = bd_i32(k, seed);
        }
        if (cpu_mode) memcpy((char *)(uintptr_t)d + c0 * esz, h, (size_t)m * esz);
        else cu_check(cu.MemcpyHtoD(d + (CUdeviceptr)c0 * esz, h, (size_t)m * esz), "cuMemcpyHtoD");
    }
    free(h);
    return d;
}

static CUdeviceptr make_array(int g, int64_t n, uint32_t seed)
{
    return make_gen(g, n, seed, 0);
}

static CUdeviceptr upload(const void *h, size_t bytes)
{
    CUdeviceptr d;
    if (cpu_mode) {
        void *p = malloc(bytes ? bytes : 4);
        if (!p) die("out of memory");
        memcpy(p, h, bytes);
        return (CUdeviceptr)(uintptr_t)p;
    }
    cu_check(cu.MemAlloc(&d, bytes ? bytes : 4), "cuMemAlloc");
    if (bytes) cu_check(cu.MemcpyHtoD(d, h, bytes), "cuMemcpyHtoD");
    return d;
}

/* ---- cases -------------------------------------------------------------------------------- */

/* K_OUTS: any number of results, scalars or arrays, each reported by its checksums; K_COMPLEX: a
 * complex scalar, "value" (real part) and "imag"; K_NEAREST: an array of indices into the second
 * input, with the checksums of the distances at them (print_nearest) */
enum { K_SCALAR, K_PAIR, K_INDEX, K_ARRAY, K_OUTS, K_COMPLEX, K_NEAREST };

typedef struct bind_spec {
    const char *name;
    red_dtype dtype;
    int ndim;
    int64_t shape[3];
    CUdeviceptr base;
    CUdeviceptr *copies;   /* rotation copies (copies[0] = base) */
} bind_spec;

typedef struct bench_case {
    char id[32];
    const char *text;
    int64_t n;        /* elements reduced (the table's n) */
    double bytes;     /* bytes that must be read */
    int kind;
    int comp;         /* a composition case: --comp-strategies, a cold first run, "outs" */
    int64_t nrows, ncols;   /* a sparse matrix's shape (spmv_*; gather_all: ncols alone), else 0 */
    int pair;         /* a pairwise case: a cold first run; dom: its indices' extents (idx names them) */
    int slow;         /* a product: its forced strategies get fewer runs, and are skipped past PAIR_SKIP_MS */
    int ndom;
    int64_t dom[4];
    const char *idx;
    int nb;
    bind_spec b[4];
} bench_case;

static bench_case cases[64];
static int ncases;

static bench_case *add_case(const char *id, const char *text, int64_t n, int kind)
{
    if (ncases == 64) die("too many cases");
    bench_case *c = &cases[ncases++];
    memset(c, 0, sizeof *c);
    snprintf(c->id, sizeof c->id, "%s", id);
    c->text = text;
    c->n = n;
    c->kind = kind;
    return c;
}

/* An input of shape d0, d0 x d1 or d0 x d1 x d2 (a 0 ends the shape). */
static void add_bind3(bench_case *c, const char *name, red_dtype dt, CUdeviceptr base, int64_t d0, int64_t d1,
                      int64_t d2)
{
    bind_spec *b = &c->b[c->nb++];
    b->name = name;
    b->dtype = dt;
    b->base = base;
    b->ndim = !d1 ? 1 : !d2 ? 2 : 3;
    b->shape[0] = d0;
    b->shape[1] = d1;
    b->shape[2] = d2;
    c->bytes += (double)d0 * (double)(d1 ? d1 : 1) * (double)(d1 && d2 ? d2 : 1) * (double)red_dtype_size(dt);
}

static void add_bind(bench_case *c, const char *name, red_dtype dt, CUdeviceptr base, int64_t d0, int64_t d1)
{
    add_bind3(c, name, dt, base, d0, d1, 0);
}

static void bind_one(red_expr *e, const bind_spec *b, CUdeviceptr ptr)
{
    red_array a;
    red_array_init(&a, (void *)(uintptr_t)ptr, b->dtype, b->ndim, b->shape, NULL);
    a.memory = cpu_mode ? RED_MEM_HOST : RED_MEM_CUDA;
    a.device_id = 0;
    int rc = red_bind_array(e, b->name, &a);
    if (rc) die("bind %s: %s", b->name, red_expr_errmsg(e));
}

static void bind_case(red_expr *e, const bench_case *c, int rot)
{
    for (int i = 0; i < c->nb; i++) bind_one(e, &c->b[i], c->b[i].copies ? c->b[i].copies[rot] : c->b[i].base);
}

static int rotation_of(bench_case *c)
{
    return cpu_mode ? 1 : bd_rotation(c->bytes);
}

static void make_copies(bench_case *c, int k)
{
    for (int i = 0; i < c->nb && k > 1; i++) {
        bind_spec *b = &c->b[i];
        int64_t elems = 1;
        for (int d = 0; d < b->ndim; d++) elems *= b->shape[d];
        size_t bytes = (size_t)elems * red_dtype_size(b->dtype);
        b->copies = calloc((size_t)k, sizeof *b->copies);
        if (!b->copies) die("out of memory");
        b->copies[0] = b->base;
        for (int r = 1; r < k; r++) {
            cu_check(cu.MemAlloc(&b->copies[r], bytes), "cuMemAlloc");
            cu_check(cu.MemcpyDtoD(b->copies[r], b->base, bytes), "cuMemcpyDtoD");
        }
    }
}

static void free_copies(bench_case *c, int k)
{
    for (int i = 0; i < c->nb; i++) {
        bind_spec *b = &c->b[i];
        if (!b->copies) continue;
        for (int r = 1; r < k; r++) cu.MemFree(b->copies[r]);
        free(b->copies);
        b->copies = NULL;
    }
}

/* ---- results and their JSON ----------------------------------------------------------------- */

/* ", key: v" with NaN and the infinities spelled as Python's json reads them (NaN, Infinity) */
static void json_f64(const char *key, double v)
{
    if (isnan(v)) printf(", \"%s\": NaN", key);
    else if (isinf(v)) printf(", \"%s\": %sInfinity", key, v < 0 ? "-" : "");
    else printf(", \"%s\": %.17g", key, v);
}

/* A complex scalar result (c64 or c128), copied to the host as c128: its parts into v[0], v[1]. */
static int result_complex(red_expr *e, int i, double v[2])
{
    red_array r;
    int rc = red_result(e, i, &r, NULL);
    if (rc) return rc;
    if ((r.dtype != RED_C64 && r.dtype != RED_C128) || red_array_size(&r) != 1) return RED_ERR_ARG;
    red_array ha;
    red_array_init(&ha, v, RED_C128, r.ndim, r.shape, NULL);
    return red_result_copy(e, i, &ha);
}

/* Checksums of result i, copied to the host as f64: sum out[k], sum ((k % 16) - 7.5) out[k] and
 * sum |out[k]| in v[0..2], its element count in *m (a scalar is one element). */
static int result_sums(red_expr *e, int i, double v[3], int64_t *m)
{
    red_array r;
    int rc = red_result(e, i, &r, NULL);
    if (rc) return rc;
    *m = red_array_size(&r);
    double *h = malloc((size_t)(*m ? *m : 1) * sizeof *h);
    if (!h) die("out of memory");
    red_array ha;
    red_array_init(&ha, h, RED_F64, r.ndim, r.shape, NULL);
    if ((rc = red_result_copy(e, i, &ha))) {
        free(h);
        return rc;
    }
    v[0] = v[1] = v[2] = 0;
    for (int64_t k = 0; k < *m; k++) {
        v[0] += h[k];
        v[1] += ((double)(k % 16) - 7.5) * h[k];
        v[2] += fabs(h[k]);
    }
    free(h);
    return 0;
}

/* "outs": the checksums of every result, in order. */
static int print_outs(red_expr *e)
{
    int n = red_result_count(e);
    printf(", \"outs\": [");
    for (int i = 0; i < n; i++) {
        double v[3];
        int64_t m;
        int rc = result_sums(e, i, v, &m);
        if (rc) {
            printf("]");
            return rc;
        }
        printf("%s{\"value\": %.17g, \"check\": %.17g, \"mag\": %.17g, \"nout\": %lld}", i ? ", " : "", v[0], v[1],
               v[2], (long long)m);
    }
    printf("]");
    return 0;
}

/* A nearest-neighbour result (K_NEAREST: argmin(abs(x[i]-y[j])) over j over 1-D points, or
 * argmin(sum((x[i,d]-y[j,d])*(x[i,d]-y[j,d])) over d) over j over points of dim coordinates, x and y
 * bound first, f32, as n or n x dim): the checksums of its indices, as of an array, and "dist",
 * "dist_check": sum d[i] and sum ((i % 16) - 7.5) d[i] of the distances from x[i] to y[idx[i]] in
 * f64, x and y read back from the device: d[i] = |x[i] - y[idx[i]]| in 1-D, the Euclidean distance
 * sqrt(sum over d of (x[i,d] - y[idx[i],d])^2) (the squares summed in the order of d, then the
 * root) otherwise; peers_pairwise.py's nearest_dist computes the same.  Where two distances tie in
 * f32 the peers may take another index, but not another distance: the report compares these. */
static int print_nearest(red_expr *e, const bench_case *c)
{
    red_array r;
    int rc = red_result(e, 0, &r, NULL);
    if (rc) return rc;
    int64_t m = red_array_size(&r), nx = c->b[0].shape[0], ny = c->b[1].shape[0];
    int64_t dim = c->b[0].ndim == 2 ? c->b[0].shape[1] : 1;   /* coordinates a point */
    if (m != nx || (c->b[1].ndim == 2 ? c->b[1].shape[1] : 1) != dim) return RED_ERR_ARG;
    int64_t *idx = malloc((size_t)(m ? m : 1) * sizeof *idx);
    float *x = malloc((size_t)(nx ? nx * dim : 1) * 4), *y = malloc((size_t)(ny ? ny * dim : 1) * 4);
    if (!idx || !x || !y) die("out of memory");
    red_array ha;
    red_array_init(&ha, idx, RED_I64, r.ndim, r.shape, NULL);
    if (!(rc = red_result_copy(e, 0, &ha))) {
        if (cpu_mode) {
            memcpy(x, (void *)(uintptr_t)c->b[0].base, (size_t)(nx * dim) * 4);
            memcpy(y, (void *)(uintptr_t)c->b[1].base, (size_t)(ny * dim) * 4);
        } else {
            cu_check(cu.MemcpyDtoH(x, c->b[0].base, (size_t)(nx * dim) * 4), "cuMemcpyDtoH");
            cu_check(cu.MemcpyDtoH(y, c->b[1].base, (size_t)(ny * dim) * 4), "cuMemcpyDtoH");
        }
        double v[3] = {0, 0, 0}, d[2] = {0, 0};
        for (int64_t k = 0; k < m; k++) {
            double w = (double)(k % 16) - 7.5;
            v[0] += (double)idx[k];
            v[1] += w * (double)idx[k];
            v[2] += fabs((double)idx[k]);
            if (idx[k] < 0 || idx[k] >= ny) {   /* not an index of y: no distance, no agreement */
                d[0] = d[1] = NAN;
                continue;
            }
            double dk;
            if (dim == 1) dk = fabs((double)x[k] - (double)y[idx[k]]);
            else {
                double s = 0;
                for (int64_t q = 0; q < dim; q++) {
                    double t = (double)x[k * dim + q] - (double)y[idx[k] * dim + q];
                    s += t * t;
                }
                dk = sqrt(s);
            }
            d[0] += dk;
            d[1] += w * dk;
        }
        printf(", \"value\": %.17g, \"check\": %.17g, \"mag\": %.17g, \"nout\": %lld", v[0], v[1], v[2], (long long)m);
        json_f64("dist", d[0]);
        json_f64("dist_check", d[1]);
    }
    free(idx);
    free(x);
    free(y);
    return rc;
}

/* The value fields of a record: scalar value(s), for an array result its checksums
 * value = sum out[k], check = sum ((k % 16) - 7.5) out[k], mag = sum |out[k]|, or (K_OUTS) the
 * checksums of every result. */
static int print_values(red_expr *e, const bench_case *c)
{
    int rc = 0;
    if (c->kind == K_SCALAR || c->kind == K_PAIR) {
        red_array r;
        if ((rc = red_result(e, 0, &r, NULL))) return rc;
        if (r.dtype == RED_F32 || r.dtype == RED_F64) {
            double v;
            if ((rc = red_result_f64(e, 0, &v))) return rc;
            json_f64("value", v);
        } else {
            int64_t v;
            if ((rc = red_result_i64(e, 0, &v))) return rc;
            printf(", \"value\": %lld", (long long)v);
        }
        if (c->kind == K_PAIR) {
            double v2;
            if ((rc = red_result_f64(e, 1, &v2))) return rc;
            printf(", \"value2\": %.17g", v2);
        }
    } else if (c->kind == K_INDEX) {
        int64_t v;
        if ((rc = red_result_i64(e, 0, &v))) return rc;
        printf(", \"value\": %lld", (long long)v);
    } else if (c->kind == K_OUTS) {
        return print_outs(e);
    } else if (c->kind == K_NEAREST) {
        return print_nearest(e, c);
    } else if (c->kind == K_COMPLEX) {
        double v[2];
        if ((rc = result_complex(e, 0, v))) return rc;
        json_f64("value", v[0]);
        json_f64("imag", v[1]);
    } else {
        double v[3];
        int64_t m;
        if ((rc = result_sums(e, 0, v, &m))) return rc;
        printf(", \"value\": %.17g, \"check\": %.17g, \"mag\": %.17g, \"nout\": %lld", v[0], v[1], v[2], (long long)m);
    }
    return 0;
}

static void json_str(const char *key, const char *s)
{
    printf(", \"%s\": \"", key);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", (unsigned char)*s);
        else putchar(*s);
    }
    putchar('"');
}

static void print_head(const bench_case *c, const char *system)
{
    printf("{\"case\": \"%s\", \"n\": %lld, \"system\": \"%s\", \"bytes\": %.0f", c->id, (long long)c->n, system,
           c->bytes);
    if (c->ncols) printf(", \"nrows\": %lld, \"ncols\": %lld", (long long)c->nrows, (long long)c->ncols);
    if (c->ndom) {
        printf(", \"shape\": [");
        for (int d = 0; d < c->ndom; d++) printf("%s%lld", d ? ", " : "", (long long)c->dom[d]);
        printf("], \"indices\": \"%s\"", c->idx);
    }
    if (opt.held) printf(", \"held\": 1");
}

/* ---- timing ------------------------------------------------------------------------------- */

static CUstream stream;
static CUevent ev0, ev1;
/* "generated": auto with RED_OPT_BLAS 0, for the products (bench_case.slow), whose auto is cuBLASLt's */
static const char *const strategy_names[] = {"auto", "tree", "sequential", "persistent", "segmented", "generated"};

/* --held: cuLaunchHostFunc (not in cu_api.h: the library does not use it), and the host
 * function that holds the stream for BD_HOLD_US */
static CUresult (*launch_host_func)(CUstream, void (*)(void *), void *);

static void hold_stream(void *arg)
{
    (void)arg;
    double t0 = now_ms();
    while ((now_ms() - t0) * 1e3 < BD_HOLD_US) {
    }
}

typedef struct timing {
    double med_us, min_us;
    int reps;
    double over_ms;   /* a run past PAIR_SKIP_MS that ended the measurement (slow), else 0 */
} timing;

/* The products' forced strategies (bench_case.slow): at 4096^3 a run of each took 0.16 to 0.52 s
 * on the H200, so 3 runs after one warm-up, and none for a strategy whose one run
 * passes 2 s */
#define PAIR_SLOW_REPS 3
#define PAIR_SLOW_WARMUP 1
#define PAIR_SKIP_MS 2000.0

static int run_once(red_expr *e, const bench_case *c, int rot, double *us)
{
    bind_case(e, c, rot);
    if (cpu_mode) {
        double t0 = now_ms();
        int rc = red_run(e);
        *us = (now_ms() - t0) * 1e3;
        return rc;
    }
    if (opt.held) cu_check(launch_host_func(stream, hold_stream, NULL), "cuLaunchHostFunc");
    cu_check(cu.EventRecord(ev0, stream), "cuEventRecord");
    int rc = red_run(e);
    cu_check(cu.EventRecord(ev1, stream), "cuEventRecord");
    cu_check(cu.EventSynchronize(ev1), "cuEventSynchronize");
    int rs = red_sync(e);
    if (rc || rs) return rc ? rc : rs;
    float ms = 0;
    cu_check(cu.EventElapsedTime(&ms, ev0, ev1), "cuEventElapsedTime");
    *us = ms * 1e3;
    return 0;
}

/* Runs per measurement: all of max_reps (after warmup) unless one run is slow, then what fits the
 * budget. */
static int plan_reps(double probe_us, int max_reps, int warmup, int *warm)
{
    int reps = max_reps;
    double per = probe_us > 1 ? probe_us : 1;
    if (per * 1e-3 * (max_reps + warmup) > opt.budget_ms) {
        reps = (int)(opt.budget_ms / (per * 1e-3)) - 1;
        if (reps < 3) reps = 3;
        if (per * 1e-3 > opt.budget_ms) reps = 1;
        if (reps > max_reps) reps = max_reps;
    }
    *warm = reps < max_reps ? 0 : warmup;
    return reps;
}

/* slow: PAIR_SLOW_REPS runs after PAIR_SLOW_WARMUP, and none where the first run (NVRTC's time
 * aside, from ctx's statistics) or the second takes longer than PAIR_SKIP_MS: t->over_ms. */
static int time_gpu(red_ctx *ctx, red_expr *e, const bench_case *c, int k, int slow, timing *t)
{
    double probe, *v;
    red_cache_info a, b;
    red_cache_stats(ctx, &a);
    int rc = run_once(e, c, 0, &probe);     /* first run: may compile */
    red_cache_stats(ctx, &b);
    if (!rc && slow && probe * 1e-3 - (b.compile_ms - a.compile_ms) > PAIR_SKIP_MS) {
        t->over_ms = probe * 1e-3 - (b.compile_ms - a.compile_ms);
        return 0;
    }
    if (!rc) rc = run_once(e, c, k > 1 ? 1 : 0, &probe);
    if (rc) return rc;
    if (slow && probe * 1e-3 > PAIR_SKIP_MS) {
        t->over_ms = probe * 1e-3;
        return 0;
    }
    int warm, reps = slow ? plan_reps(probe, PAIR_SLOW_REPS, PAIR_SLOW_WARMUP, &warm)
                          : plan_reps(probe, opt.reps, opt.warmup, &warm);
    v = malloc((size_t)reps * sizeof *v);
    if (!v) die("out of memory");
    int rot = 2;
    for (int i = 0; i < warm && !rc; i++, rot++) rc = run_once(e, c, rot % k, &probe);
    for (int i = 0; i < reps && !rc; i++, rot++) rc = run_once(e, c, rot % k, &v[i]);
    if (!rc) {
        t->reps = reps;
        t->med_us = median(v, reps);
        t->min_us = v[0];
    }
    free(v);
    return rc;
}

/* Host wall time of a synchronous run with host results (the default configuration). */
static int time_sync(red_ctx *ctx, const bench_case *c, int k, int reps, double *us)
{
    red_expr *e;
    int rc = red_prepare(ctx, c->text, &e);
    if (rc) return rc;
    double *v = malloc((size_t)reps * sizeof *v);
    if (!v) die("out of memory");
    for (int i = -2; i < reps && !rc; i++) {
        bind_case(e, c, ((i + 2) % k));
        double t0 = now_ms();
        rc = red_run(e);
        if (!rc && c->kind != K_ARRAY) {
            red_array r;
            rc = red_result(e, 0, &r, NULL);
        }
        double t1 = now_ms();
        if (i >= 0) v[i] = (t1 - t0) * 1e3;
    }
    if (!rc) *us = median(v, reps);
    free(v);
    red_finalize(e);
    return rc;
}

/* A composition's first result in a fresh context, with the disk cache emptied first: prepare,
 * bind, run and the result on the host, every kernel compiled (the driver and NVRTC are loaded
 * already, as for the peers' first compiles after their warm-up). */
typedef struct cold_run {
    int rc;
    double ms, compile_ms;
    long long compiles;
} cold_run;

static cold_run first_run_cold(const bench_case *c)
{
    cold_run cr = {0};
    red_ctx *ctx;
    if ((cr.rc = red_open(&ctx))) return cr;
    red_set_option(ctx, RED_OPT_DEVICE, cpu_mode ? RED_DEVICE_CPU : RED_DEVICE_GPU);
    red_cache_clear(ctx);
    red_expr *e = NULL;
    double t0 = now_ms();
    cr.rc = red_prepare(ctx, c->text, &e);
    if (!cr.rc) {
        bind_case(e, c, 0);
        cr.rc = red_run(e);
    }
    if (!cr.rc) {
        red_array r;
        cr.rc = red_result(e, 0, &r, NULL);
    }
    cr.ms = now_ms() - t0;
    red_cache_info ci;
    red_cache_stats(ctx, &ci);
    cr.compiles = ci.compiles;
    cr.compile_ms = ci.compile_ms;
    red_finalize(e);
    red_close(ctx);
    return cr;
}

/* The number of passes of e's plan for its bindings ("plan: N passes" in red_explain), less
 * those run as a reduction's epilogue (inside its kernel), or -1. */
static int plan_passes(red_expr *e)
{
    const char *text = NULL, *p;
    int n = -1;
    if (red_explain_ex(e, RED_EXPLAIN_PLAN, &text) || !text) return -1;
    if ((p = strstr(text, "\nplan: ")) && sscanf(p + 7, "%d", &n) != 1) n = -1;
    for (p = text; n > 0 && (p = strstr(p, "the epilogue of pass")) != NULL; p++) n--;
    return n;
}

/* A composition's or a pairwise case's fields in its automatic strategy's record: a composition's
 * first input's shape (a pairwise case's is in every record: print_head), the plan's passes and
 * the cold first run. */
static void print_comp_fields(red_expr *e, const bench_case *c, const cold_run *cr)
{
    const bind_spec *b = &c->b[0];
    if (c->comp) {
        printf(", \"shape\": [");
        for (int d = 0; d < b->ndim; d++) printf("%s%lld", d ? ", " : "", (long long)b->shape[d]);
        printf("]");
    }
    printf(", \"passes\": %d", plan_passes(e));
    if (cr->rc) json_str("cold_error", red_errstr(cr->rc));
    else
        printf(", \"cold_ms\": %.3f, \"cold_compiles\": %lld, \"cold_compile_ms\": %.3f", cr->ms, cr->compiles,
               cr->compile_ms);
}

static void run_case(red_ctx *ctx, bench_case *c)
{
    int k = rotation_of(c);
    make_copies(c, k);
    cold_run cr = {0};
    if (c->comp || c->pair) cr = first_run_cold(c);
    double sync_us = -1;
    /* not for the pairwise cases: their table has no column for it, and a product's run takes
     * up to half a second */
    int rcs = c->pair ? 1 : time_sync(ctx, c, k, opt.reps < 20 ? opt.reps : 20, &sync_us);
    for (int s = 0; s < 6; s++) {
        if (!in_list(c->comp ? opt.comp_strategies : opt.strategies, strategy_names[s == 5 ? 0 : s])) continue;
        if (s == 5 && !c->slow) continue;
        red_expr *e;
        int rc = red_prepare(ctx, c->text, &e);
        if (rc) die("prepare %s: %s", c->text, red_errmsg(ctx));
        red_expr_set_option(e, RED_OPT_STRATEGY, s == 5 ? RED_STRATEGY_AUTO : s);
        if (s == 5) red_expr_set_option(e, RED_OPT_BLAS, 0);
        red_expr_set_option(e, RED_OPT_RESULTS, RED_RESULTS_DEVICE);
        if (!cpu_mode) red_expr_set_stream(e, stream);
        timing t = {0};
        rc = time_gpu(ctx, e, c, k, c->slow && s != 0 && s != 5, &t);
        print_head(c, "redjit");
        printf(", \"strategy\": \"%s\", \"expr\": \"%s\", \"rot\": %d", strategy_names[s], c->text, k);
        if (!rc && t.over_ms > 0) {   /* not a failure: too slow to time in the run's budget */
            char msg[120];
            snprintf(msg, sizeof msg, "one run took %.1f s, over the %.0f s allowed a product's forced strategy",
                     t.over_ms * 1e-3, PAIR_SKIP_MS * 1e-3);
            json_str("skipped", msg);
        } else if (!rc) {
            printf(", \"us\": %.3f, \"min_us\": %.3f, \"reps\": %d", t.med_us, t.min_us, t.reps);
            if (s == 0 && !rcs) printf(", \"sync_us\": %.3f", sync_us);
            if (s == 0 && (c->comp || c->pair)) print_comp_fields(e, c, &cr);
            rc = print_values(e, c);
        }
        if (rc) {
            char msg[600];
            snprintf(msg, sizeof msg, "%s: %s", red_errstr(rc), red_expr_errmsg(e));
            json_str("error", msg);
            if (!cpu_mode) cu.CtxSynchronize();
        }
        printf("}\n");
        fflush(stdout);
        red_finalize(e);
    }
    free_copies(c, k);
}

/* ---- JIT and per-call figures --------------------------------------------------------------- */

static void jit_new_expressions(red_ctx *ctx)
{
    /* the driver and NVRTC initialised by an expression no case uses */
    {
        CUdeviceptr w = make_array(G_F64, 1000, 99);
        bench_case tmp = {0};
        add_bind(&tmp, "w", RED_F64, w, 1000, 0);
        red_expr *e;
        if (red_prepare(ctx, "any(w > 0.75)", &e)) die("prepare: %s", red_errmsg(ctx));
        bind_case(e, &tmp, 0);
        if (red_run(e)) die("warm-up expression: %s", red_expr_errmsg(e));
        red_finalize(e);
        cu.MemFree(w);
    }
    double ms[64];
    int nms = 0;
    for (int i = 0; i < ncases; i++) {
        bench_case *c = &cases[i];
        if (c->comp || c->pair) continue;   /* their records carry their own first run (cold_ms) */
        int seen = 0;   /* one per expression text and input types */
        for (int j = 0; j < i && !seen; j++) {
            int same = !strcmp(cases[j].text, c->text) && cases[j].nb == c->nb;
            for (int b = 0; same && b < c->nb; b++)
                same = cases[j].b[b].dtype == c->b[b].dtype && cases[j].b[b].ndim == c->b[b].ndim;
            seen = same;
        }
        if (seen) continue;
        red_cache_info a, b;
        red_cache_stats(ctx, &a);
        double t0 = now_ms();
        red_expr *e = NULL;
        int rc = red_prepare(ctx, c->text, &e);
        if (!rc) {
            bind_case(e, c, 0);
            rc = red_run(e);
        }
        if (!rc) {
            red_array r;
            rc = red_result(e, 0, &r, NULL);
        }
        double t1 = now_ms();
        red_cache_stats(ctx, &b);
        printf("{\"case\": \"jit_new\", \"system\": \"redjit\", \"expr\": \"%s\", \"of\": \"%s\", \"n\": %lld", c->text,
               c->id, (long long)c->n);
        if (rc) json_str("error", red_expr_errmsg(e));
        else {
            printf(", \"ms\": %.3f, \"compiles\": %lld, \"compile_ms\": %.3f", t1 - t0, b.compiles - a.compiles,
                   b.compile_ms - a.compile_ms);
            ms[nms++] = t1 - t0;
        }
        printf("}\n");
        red_finalize(e);
    }
    if (nms) printf("{\"case\": \"jit_new_median\", \"system\": \"redjit\", \"ms\": %.3f, \"count\": %d}\n", median(ms, nms), nms);
    fflush(stdout);
}

/* Child process: context creation, then the first result of sum(x) over 2^20 values in device
 * memory, its kernel found in the disk cache the parent filled (or compiled: REDJIT_CACHE=0). */
static int jit_child(const char *label)
{
    double t0 = now_ms();
    red_ctx *ctx;
    if (red_open(&ctx)) return 3;
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_GPU);
    if (!red_gpu_available(ctx)) return 4;
    double t1 = now_ms();
    cu_load();
    int64_t n = 1 << 20;
    CUdeviceptr x = make_array(G_F32, n, BD_SEED_X);
    double t2 = now_ms();
    red_expr *e = NULL;
    double v = 0;
    int rc = red_prepare(ctx, "sum(x)", &e);
    if (!rc) {
        red_array a;
        red_array_init(&a, (void *)(uintptr_t)x, RED_F32, 1, &n, NULL);
        a.memory = RED_MEM_CUDA;
        rc = red_bind_array(e, "x", &a);
    }
    if (!rc) rc = red_run(e);
    if (!rc) rc = red_result_f64(e, 0, &v);
    double t3 = now_ms();
    red_cache_info ci;
    red_cache_stats(ctx, &ci);
    printf("{\"case\": \"%s\", \"system\": \"redjit\", \"expr\": \"sum(x)\", \"n\": %lld, \"ctx_ms\": %.3f, "
           "\"ms\": %.3f, \"compiles\": %lld, \"disk_hits\": %lld, \"value\": %.17g",
           label, (long long)n, t1 - t0, t3 - t2, ci.compiles, ci.disk_hits, v);
    if (rc) json_str("error", red_expr_errmsg(e));
    printf("}\n");
    fflush(stdout);
    red_finalize(e);
    cu.MemFree(x);
    red_close(ctx);
    return rc ? 5 : 0;
}

static void spawn_child(const char *label, int cache_on)
{
    fflush(stdout);
    double t0 = now_ms();
    pid_t pid = fork();
    if (pid < 0) die("fork failed");
    if (pid == 0) {
        if (!cache_on) setenv("REDJIT_CACHE", "0", 1);
        execl("/proc/self/exe", "redjit_bench", "--jit-child", label, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    double t1 = now_ms();
    if (!WIFEXITED(st) || WEXITSTATUS(st))
        printf("{\"case\": \"%s\", \"system\": \"redjit\", \"error\": \"child exited with status %d\"}\n", label,
               WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    else
        printf("{\"case\": \"%s_process\", \"system\": \"redjit\", \"ms\": %.3f}\n", label, t1 - t0);
    fflush(stdout);
}

/* Host time per call of red_eval (and of red_run + red_result on a prepared expression) for
 * sum(x) over 1024 values already in device memory. */
static void call_overhead(red_ctx *ctx, CUdeviceptr x)
{
    int64_t n = 1024;
    red_binding b = {"x", {0}};
    red_array_init(&b.array, (void *)(uintptr_t)x, RED_F32, 1, &n, NULL);
    b.array.memory = RED_MEM_CUDA;
    double v = 0;
    int rc = 0;
    for (int i = 0; i < 100 && !rc; i++) rc = red_eval_f64(ctx, "sum(x)", &b, 1, &v);
    double t0 = now_ms();
    for (long long i = 0; i < opt.calls && !rc; i++) rc = red_eval_f64(ctx, "sum(x)", &b, 1, &v);
    double t1 = now_ms();
    printf("{\"case\": \"overhead\", \"n\": %lld, \"system\": \"redjit\", \"variant\": \"red_eval_f64\", "
           "\"calls\": %lld, \"us\": %.3f, \"value\": %.17g", (long long)n, opt.calls, (t1 - t0) * 1e3 / opt.calls, v);
    if (rc) json_str("error", red_errmsg(ctx));
    printf("}\n");

    red_expr *e;
    rc = red_prepare(ctx, "sum(x)", &e);
    if (!rc) rc = red_bind_array(e, "x", &b.array);
    for (int i = 0; i < 100 && !rc; i++)
        if (!(rc = red_run(e))) rc = red_result_f64(e, 0, &v);
    t0 = now_ms();
    for (long long i = 0; i < opt.calls && !rc; i++)
        if (!(rc = red_run(e))) rc = red_result_f64(e, 0, &v);
    t1 = now_ms();
    printf("{\"case\": \"overhead\", \"n\": %lld, \"system\": \"redjit_prepared\", \"variant\": \"red_run+red_result_f64\", "
           "\"calls\": %lld, \"us\": %.3f, \"value\": %.17g", (long long)n, opt.calls, (t1 - t0) * 1e3 / opt.calls, v);
    if (rc) json_str("error", red_expr_errmsg(e));
    printf("}\n");
    red_finalize(e);

    /* the asynchronous path: the result left on the device and every run
     * queued on the caller's stream, with one red_sync after the last: the
     * host time a call costs a program that keeps its data on the GPU */
    e = NULL;
    rc = red_prepare(ctx, "sum(x)", &e);
    if (!rc) rc = red_bind_array(e, "x", &b.array);
    if (!rc) rc = red_expr_set_option(e, RED_OPT_RESULTS, RED_RESULTS_DEVICE);
    if (!rc) rc = red_expr_set_stream(e, (void *)stream);
    for (int i = 0; i < 100 && !rc; i++) rc = red_run(e);
    if (!rc) rc = red_sync(e);
    t0 = now_ms();
    for (long long i = 0; i < opt.calls && !rc; i++) rc = red_run(e);
    if (!rc) rc = red_sync(e);
    t1 = now_ms();
    printf("{\"case\": \"overhead\", \"n\": %lld, \"system\": \"redjit_async\", "
           "\"variant\": \"red_run, result on the device, caller's stream\", \"calls\": %lld, \"us\": %.3f",
           (long long)n, opt.calls, (t1 - t0) * 1e3 / opt.calls);
    if (rc) json_str("error", e ? red_expr_errmsg(e) : red_errmsg(ctx));
    printf("}\n");
    if (e) {
        red_expr_set_stream(e, NULL);
        red_finalize(e);
    }
    fflush(stdout);
}

/* ---- main --------------------------------------------------------------------------------- */

static void parse_curve(const char *s)
{
    opt.ncurve = 0;
    while (*s && opt.ncurve < 16) {
        opt.curve[opt.ncurve++] = atoi(s);
        s = strchr(s, ',');
        if (!s) break;
        s++;
    }
}

static void parse_cube(const char *s)
{
    if (sscanf(s, "%lld,%lld,%lld", &opt.cube[0], &opt.cube[1], &opt.cube[2]) != 3 || opt.cube[0] < 1 ||
        opt.cube[1] < 1 || opt.cube[2] < 1)
        die("--cube takes three positive extents, D0,D1,D2");
}

/* The composition cases: reductions that share their input, and a map over reductions' results,
 * each one redjit expression over a prefix of x (the segment statistics over the sorted keys of
 * layout "rand", lengths 10..50). */
static bench_case *add_comp(const char *id, const char *text, int64_t n)
{
    bench_case *c = add_case(id, text, n, K_OUTS);
    c->comp = 1;
    return c;
}

static void add_compositions(CUdeviceptr x, CUdeviceptr seg, int64_t ns)
{
    int64_t R = opt.rows, C = opt.cols, N = (int64_t)1 << opt.log2n;
    bench_case *c = add_comp("comp_rowstats", "sum(A[i,j]) over j, sum(A[i,j]*A[i,j]) over j", R * C);
    add_bind(c, "A", RED_F32, x, R, C);
    c = add_comp("comp_lse", "m = max(A[i,j]) over j; log(sum(exp(A[i,j] - m)) over j) + m", R * C);
    add_bind(c, "A", RED_F32, x, R, C);
    c = add_comp("comp_softmax", "m = max(A[i,j]) over j; s = sum(exp(A[i,j] - m)) over j; P[i,j] = exp(A[i,j] - m) / s",
                 R * C);
    add_bind(c, "A", RED_F32, x, R, C);
    c = add_comp("comp_cssq", "sum((x - mean(x)) * (x - mean(x)))", N);
    add_bind(c, "x", RED_F32, x, N, 0);
    c = add_comp("comp_segstats", "sum(v[i]) by seg[i], max(v[i]) by seg[i], count(true) by seg[i]", ns);
    add_bind(c, "v", RED_F32, x, ns, 0);
    add_bind(c, "seg", RED_I32, seg, ns, 0);
    int64_t D = opt.cube[0] * opt.cube[1] * opt.cube[2];
    c = add_comp("comp_3d", "sum(A[i,j,k]) over j,k, sum(A[i,j,k]*A[i,j,k]) over j,k", D);
    add_bind3(c, "A", RED_F32, x, opt.cube[0], opt.cube[1], opt.cube[2]);
}

/* ---- the sparse cases ---------------------------------------------------------------------- */

#define SPMV_TEXT "sum(v[k]*x[col[k]]) over k in ptr[r]..ptr[r+1]"

/* the sparse and types inputs' device arrays, freed at the end */
static CUdeviceptr sparse_mem[32];
static int nsparse_mem;

static CUdeviceptr keep(CUdeviceptr d)
{
    if (nsparse_mem == (int)(sizeof sparse_mem / sizeof sparse_mem[0])) die("too many input arrays");
    sparse_mem[nsparse_mem++] = d;
    return d;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* A CSR matrix times a vector: v and col of nnz, ptr of nrows + 1, x of ncols; the bytes are each
 * input once and the result written. */
static void add_matrix(const char *id, CUdeviceptr v, CUdeviceptr col, red_dtype col_dtype, CUdeviceptr ptr,
                       CUdeviceptr x, int64_t nrows, int64_t nnz, int64_t ncols)
{
    bench_case *c = add_case(id, SPMV_TEXT, nnz, K_ARRAY);
    add_bind(c, "v", RED_F32, v, nnz, 0);
    add_bind(c, "col", col_dtype, col, nnz, 0);
    add_bind(c, "ptr", RED_I32, ptr, nrows + 1, 0);
    add_bind(c, "x", RED_F32, x, ncols, 0);
    c->bytes += (double)nrows * 4;
    c->nrows = nrows;
    c->ncols = ncols;
}

/* The G x G Poisson matrix's offsets and columns, on the host; returns its nonzero count. */
static int64_t poisson_host(int64_t g, int32_t **ptr_out, int32_t **col_out)
{
    int64_t n = g * g, cols[5];
    int32_t *ptr = malloc((size_t)(n + 1) * 4);
    if (!ptr) die("out of memory");
    ptr[0] = 0;
    for (int64_t r = 0; r < n; r++) ptr[r + 1] = ptr[r] + bd_poisson_row(r, g, cols);
    int32_t *col = malloc((size_t)ptr[n] * 4);
    if (!col) die("out of memory");
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; r++) {
        int64_t rc[5];
        int m = bd_poisson_row(r, g, rc);
        for (int i = 0; i < m; i++) col[ptr[r] + i] = (int32_t)rc[i];
    }
    *ptr_out = ptr;
    *col_out = col;
    return ptr[n];
}

static CUdeviceptr upload_i32(int32_t *h, int64_t n)
{
    CUdeviceptr d = keep(upload(h, (size_t)n * 4));
    free(h);
    return d;
}

/* The SpMV cases, in table order, over the matrices of bench_data.h (those asked for): values,
 * vector and random columns are prefixes of one array each, so they are built once at the largest
 * size; spmv_rand and gather_all take layout rand's offsets (rand_ptr, over ns values). */
static void add_sparse(CUdeviceptr rand_ptr, int64_t rand_rows, int64_t ns)
{
    static const struct {
        const char *id;
        int rule, shift;   /* 2^(L - shift) rows */
    } ruled[3] = {{"spmv_r32", BD_ROWS_R32, 5}, {"spmv_power", BD_ROWS_POWER, 5}, {"spmv_len13", BD_ROWS_LEN13, 1}};
    int L = opt.spmv_log2nnz;
    int64_t ncols = (int64_t)1 << (L - 4), g = opt.spmv_grid, rows[3] = {0}, nnz[3] = {0};
    int32_t *ptr_h[3] = {NULL};
    int64_t nv = 0, ncol = 0;
    double t0 = now_ms();
    for (int i = 0; i < 3; i++) {
        if (!in_list(opt.cases, ruled[i].id)) continue;
        rows[i] = (int64_t)1 << (L - ruled[i].shift);
        if (!(ptr_h[i] = malloc((size_t)(rows[i] + 1) * 4))) die("out of memory");
        if ((nnz[i] = bd_row_offsets(ruled[i].rule, rows[i], ptr_h[i])) < 0)
            die("%s: more than 2^31 - 1 nonzeros (--spmv-log2nnz)", ruled[i].id);
        nv = ncol = max64(ncol, nnz[i]);
    }
    int want_rand = in_list(opt.cases, "spmv_rand") || in_list(opt.cases, "gather_all");
    int want_i64 = in_list(opt.cases, "spmv_rand_i64"), want_poisson = in_list(opt.cases, "spmv_poisson");
    if (want_rand) ncol = max64(ncol, ns);
    if (want_rand || want_i64) nv = max64(nv, ns);
    int32_t *pptr = NULL, *pcol = NULL;
    int64_t pnnz = want_poisson ? poisson_host(g, &pptr, &pcol) : 0;
    nv = max64(nv, pnnz);
    if (!nv) return;   /* none asked for */

    CUdeviceptr v = keep(make_array(G_F32, nv, BD_SEED_SPV));
    CUdeviceptr x = keep(make_array(G_F32, max64(ncols, want_poisson ? g * g : 0), BD_SEED_SPX));
    CUdeviceptr col = ncol ? keep(make_gen(G_COL, ncol, 0, (uint32_t)ncols)) : 0;
    if (ptr_h[0]) add_matrix("spmv_r32", v, col, RED_I32, upload_i32(ptr_h[0], rows[0] + 1), x, rows[0], nnz[0], ncols);
    if (in_list(opt.cases, "spmv_rand")) add_matrix("spmv_rand", v, col, RED_I32, rand_ptr, x, rand_rows, ns, ncols);
    if (want_i64)
        add_matrix("spmv_rand_i64", v, keep(make_gen(G_COL64, ns, 0, (uint32_t)ncols)), RED_I64, rand_ptr, x,
                   rand_rows, ns, ncols);
    if (want_poisson)
        add_matrix("spmv_poisson", v, upload_i32(pcol, pnnz), RED_I32, upload_i32(pptr, g * g + 1), x, g * g, pnnz,
                   g * g);
    for (int i = 1; i < 3; i++)
        if (ptr_h[i])
            add_matrix(ruled[i].id, v, col, RED_I32, upload_i32(ptr_h[i], rows[i] + 1), x, rows[i], nnz[i], ncols);
    if (in_list(opt.cases, "gather_all")) {
        bench_case *c = add_case("gather_all", "sum(v[k]*x[col[k]])", ns, K_SCALAR);
        add_bind(c, "v", RED_F32, v, ns, 0);
        add_bind(c, "col", RED_I32, col, ns, 0);
        add_bind(c, "x", RED_F32, x, ncols, 0);
        c->ncols = ncols;
    }
    if (!cpu_mode) cu_check(cu.CtxSynchronize(), "cuCtxSynchronize");
    fprintf(stderr, "redjit_bench: sparse inputs ready in %.1f s (values: %lld, vector: %lld)\n",
            (now_ms() - t0) * 1e-3, (long long)nv, (long long)max64(ncols, want_poisson ? g * g : 0));
}

/* ---- the element-type cases ---------------------------------------------------------------- */

/* The types_* cases named in --cases, in table order, over the arrays of bench_data.h (each built
 * once, at the largest size a named case reads: the image's rows are a prefix of the u8 array,
 * the dot product's z a prefix of z).  Bytes: each input once. */
static void add_types(void)
{
    int L = opt.types_log2n;
    int64_t R = opt.types_image[0], C = opt.types_image[1];
    int64_t n8 = (int64_t)1 << L, n16 = n8 >> 1, nz = n8 >> 3, nw = n8 >> 4, nnan = n8 >> 2;
    int64_t u8n = max64(named("types_sum_u8") ? n8 : 0, named("types_rowsum_u8") ? R * C : 0);
    int64_t zn = max64(named("types_sum_c64") || named("types_absmax_c64") ? nz : 0, named("types_dot_c64") ? nw : 0);
    int want_i16 = named("types_sum_i16"), want_nan = named("types_nanargmax_f32") || named("types_nansum_f32");
    if (!u8n && !zn && !want_i16 && !want_nan) return;   /* none asked for */
    double t0 = now_ms();
    CUdeviceptr u8 = u8n ? keep(make_array(G_U8, u8n, BD_SEED_U8)) : 0;
    CUdeviceptr i16 = want_i16 ? keep(make_array(G_I16, n16, BD_SEED_I16)) : 0;
    CUdeviceptr z = zn ? keep(make_array(G_C64, zn, BD_SEED_Z)) : 0;
    CUdeviceptr w = named("types_dot_c64") ? keep(make_array(G_C64, nw, BD_SEED_W)) : 0;
    CUdeviceptr xn = want_nan ? keep(make_array(G_F32NAN, nnan, BD_SEED_XNAN)) : 0;
    bench_case *c;
    if (named("types_sum_u8")) {
        c = add_case("types_sum_u8", "sum(x)", n8, K_SCALAR);
        add_bind(c, "x", RED_U8, u8, n8, 0);
    }
    if (named("types_rowsum_u8")) {
        c = add_case("types_rowsum_u8", "sum(A[i,j]) over j", R * C, K_ARRAY);
        add_bind(c, "A", RED_U8, u8, R, C);
    }
    if (want_i16) {
        c = add_case("types_sum_i16", "sum(x)", n16, K_SCALAR);
        add_bind(c, "x", RED_I16, i16, n16, 0);
    }
    if (named("types_sum_c64")) {
        c = add_case("types_sum_c64", "sum(z)", nz, K_COMPLEX);
        add_bind(c, "z", RED_C64, z, nz, 0);
    }
    if (named("types_absmax_c64")) {
        c = add_case("types_absmax_c64", "max(abs(z))", nz, K_SCALAR);
        add_bind(c, "z", RED_C64, z, nz, 0);
    }
    if (named("types_dot_c64")) {
        c = add_case("types_dot_c64", "sum(conj(w[i]) * z[i]) over i", nw, K_COMPLEX);
        add_bind(c, "w", RED_C64, w, nw, 0);
        add_bind(c, "z", RED_C64, z, nw, 0);
    }
    if (named("types_nanargmax_f32")) {
        c = add_case("types_nanargmax_f32", "nanargmax(x)", nnan, K_INDEX);
        add_bind(c, "x", RED_F32, xn, nnan, 0);
    }
    if (named("types_nansum_f32")) {
        c = add_case("types_nansum_f32", "nansum(x)", nnan, K_SCALAR);
        add_bind(c, "x", RED_F32, xn, nnan, 0);
    }
    if (!cpu_mode) cu_check(cu.CtxSynchronize(), "cuCtxSynchronize");
    fprintf(stderr,
            "redjit_bench: types inputs ready in %.1f s (u8: %lld, i16: %lld, c64: %lld + %lld, f32 with NaN: %lld)\n",
            (now_ms() - t0) * 1e-3, (long long)u8n, (long long)(want_i16 ? n16 : 0), (long long)zn,
            (long long)(w ? nw : 0), (long long)(want_nan ? nnan : 0));
}

/* ---- the pairwise cases ------------------------------------------------------------------- */

/* A pairwise case over the domain d0 x d1 x ... (0 ends it) of the indices named in idx: n, the
 * terms evaluated, is the domain's size. */
static bench_case *add_pair(const char *id, const char *text, int kind, const char *idx, int64_t d0, int64_t d1,
                            int64_t d2, int64_t d3)
{
    int64_t d[4] = {d0, d1, d2, d3}, n = 1;
    bench_case *c = add_case(id, text, 0, kind);
    c->pair = 1;
    c->idx = idx;
    for (; c->ndom < 4 && d[c->ndom]; c->ndom++) {
        c->dom[c->ndom] = d[c->ndom];
        n *= d[c->ndom];
    }
    c->n = n;
    return c;
}

#define PAIR_GAUSS "sum(exp(-(x[i]-y[j])*(x[i]-y[j]))) over j"
#define PAIR_NN "argmin(abs(x[i]-y[j])) over j"
#define PAIR_GAUSS3D "sum(exp(-sum((x[i,d]-y[j,d])*(x[i,d]-y[j,d])) over d)) over j"
#define PAIR_NN3D "argmin(sum((x[i,d]-y[j,d])*(x[i,d]-y[j,d])) over d) over j"

/* The pair_* cases named in --cases, in table order, over four arrays of bench_data.h's normal
 * values, each built once at the largest size a named case reads: the points x and y (the 3-D
 * points their first 3 n values as n x 3, the bilinear form's vectors prefixes too) and a and b
 * (the bilinear form's K a prefix of a, the products' factors prefixes of a and b).  Bytes: each
 * input once. */
static void add_pairwise(void)
{
    int64_t n16 = (int64_t)1 << opt.pair_log2n, n14 = n16 >> 2, nk = opt.pair_bilinear;
    int64_t nb = opt.pair_bmm[0], nm = opt.pair_bmm[1], mm = opt.pair_matmul;
    int want16 = named("pair_gauss_16") || named("pair_nn_16"), want14 = named("pair_gauss_14") || named("pair_nn_14");
    int want3d16 = named("pair_gauss3d_16") || named("pair_nn3d_16");
    int want3d14 = named("pair_gauss3d_14") || named("pair_nn3d_14");
    int want_bmm = named("pair_bmm"), want_mm = named("pair_matmul_4096");
    int64_t pn = max64(max64(want16 ? n16 : 0, want14 ? n14 : 0),
                       max64(max64(want3d16 ? 3 * n16 : 0, want3d14 ? 3 * n14 : 0), named("pair_bilinear") ? nk : 0));
    int64_t an = max64(named("pair_bilinear") ? nk * nk : 0, max64(want_bmm ? nb * nm * nm : 0, want_mm ? mm * mm : 0));
    int64_t bn = max64(want_bmm ? nb * nm * nm : 0, want_mm ? mm * mm : 0);
    if (!pn && !an) return;   /* none asked for */
    double t0 = now_ms();
    CUdeviceptr x = pn ? keep(make_array(G_NORMAL, pn, BD_SEED_PX)) : 0;
    CUdeviceptr y = pn ? keep(make_array(G_NORMAL, pn, BD_SEED_PY)) : 0;
    CUdeviceptr a = an ? keep(make_array(G_NORMAL, an, BD_SEED_PA)) : 0;
    CUdeviceptr b = bn ? keep(make_array(G_NORMAL, bn, BD_SEED_PB)) : 0;
    bench_case *c;
    /* the kernel sums, then the nearest neighbours, in 1-D and then in 3-D (the sum over d written
     * out into the pass over j, core/unroll.h: no n x n temporary), each at 2^14 and 2^16 points */
    const struct {
        const char *name[2];
        const char *text;
        int kind, dim;
    } points[] = {{{"pair_gauss_14", "pair_gauss_16"}, PAIR_GAUSS, K_ARRAY, 1},
                  {{"pair_nn_14", "pair_nn_16"}, PAIR_NN, K_NEAREST, 1},
                  {{"pair_gauss3d_14", "pair_gauss3d_16"}, PAIR_GAUSS3D, K_ARRAY, 3},
                  {{"pair_nn3d_14", "pair_nn3d_16"}, PAIR_NN3D, K_NEAREST, 3}};
    for (size_t f = 0; f < sizeof points / sizeof points[0]; f++)
        for (int big = 0; big < 2; big++) {
            int64_t m = big ? n16 : n14, d = points[f].dim > 1 ? points[f].dim : 0;
            if (!named(points[f].name[big])) continue;
            c = add_pair(points[f].name[big], points[f].text, points[f].kind, d ? "i,j,d" : "i,j", m, m, d, 0);
            add_bind(c, "x", RED_F32, x, m, d);
            add_bind(c, "y", RED_F32, y, m, d);
        }
    if (named("pair_bilinear")) {
        c = add_pair("pair_bilinear", "sum(x[i]*K[i,j]*y[j]) over i, j", K_SCALAR, "i,j", nk, nk, 0, 0);
        add_bind(c, "x", RED_F32, x, nk, 0);
        add_bind(c, "K", RED_F32, a, nk, nk);
        add_bind(c, "y", RED_F32, y, nk, 0);
    }
    if (want_bmm) {
        c = add_pair("pair_bmm", "C[b,i,j] = sum(A[b,i,k]*B[b,k,j]) over k", K_ARRAY, "b,i,j,k", nb, nm, nm, nm);
        add_bind3(c, "A", RED_F32, a, nb, nm, nm);
        add_bind3(c, "B", RED_F32, b, nb, nm, nm);
        c->slow = 1;
    }
    if (want_mm) {
        c = add_pair("pair_matmul_4096", "C[i,j] = sum(A[i,k]*B[k,j]) over k", K_ARRAY, "i,j,k", mm, mm, mm, 0);
        add_bind(c, "A", RED_F32, a, mm, mm);
        add_bind(c, "B", RED_F32, b, mm, mm);
        c->slow = 1;
    }
    if (!cpu_mode) cu_check(cu.CtxSynchronize(), "cuCtxSynchronize");
    fprintf(stderr, "redjit_bench: pairwise inputs ready in %.1f s (x, y: %lld each, a: %lld, b: %lld normal f32)\n",
            (now_ms() - t0) * 1e-3, (long long)pn, (long long)an, (long long)bn);
}

static void parse_types_image(const char *s)
{
    if (sscanf(s, "%lld,%lld", &opt.types_image[0], &opt.types_image[1]) != 2 || opt.types_image[0] < 1 ||
        opt.types_image[1] < 1 || opt.types_image[0] * opt.types_image[1] > (1LL << 31))
        die("--types-image takes two positive extents, R,C, of at most 2^31 elements in all");
}

static void parse_options(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--held")) {
            opt.held = 1;
            continue;
        }
        if (!strcmp(k, "--no-jit") || !strcmp(k, "--cpu-check")) {
            opt.jit = 0;
            cpu_mode |= !strcmp(k, "--cpu-check");
            continue;
        }
        if (!v) die("option %s needs a value", k);
        i++;
        if (!strcmp(k, "--log2n")) opt.log2n = atoi(v);
        else if (!strcmp(k, "--log2s")) opt.log2s = atoi(v);
        else if (!strcmp(k, "--curve")) parse_curve(v);
        else if (!strcmp(k, "--rows")) opt.rows = atoll(v);
        else if (!strcmp(k, "--cols")) opt.cols = atoll(v);
        else if (!strcmp(k, "--short-rows")) opt.srows = atoll(v);
        else if (!strcmp(k, "--short-cols")) opt.scols = atoll(v);
        else if (!strcmp(k, "--reps")) opt.reps = atoi(v);
        else if (!strcmp(k, "--warmup")) opt.warmup = atoi(v);
        else if (!strcmp(k, "--budget-ms")) opt.budget_ms = atof(v);
        else if (!strcmp(k, "--calls")) opt.calls = atoll(v);
        else if (!strcmp(k, "--cases")) opt.cases = v;
        else if (!strcmp(k, "--strategies")) opt.strategies = v;
        else if (!strcmp(k, "--comp-strategies")) opt.comp_strategies = v;
        else if (!strcmp(k, "--cube")) parse_cube(v);
        else if (!strcmp(k, "--spmv-log2nnz")) opt.spmv_log2nnz = atoi(v);
        else if (!strcmp(k, "--spmv-grid")) opt.spmv_grid = atoll(v);
        else if (!strcmp(k, "--types-log2n")) opt.types_log2n = atoi(v);
        else if (!strcmp(k, "--types-image")) parse_types_image(v);
        else if (!strcmp(k, "--pair-log2n")) opt.pair_log2n = atoi(v);
        else if (!strcmp(k, "--pair-bilinear")) opt.pair_bilinear = atoll(v);
        else if (!strcmp(k, "--pair-bmm")) {
            if (sscanf(v, "%lld,%lld", &opt.pair_bmm[0], &opt.pair_bmm[1]) != 2) die("--pair-bmm takes B,M");
        } else if (!strcmp(k, "--pair-matmul")) opt.pair_matmul = atoll(v);
        else die("unknown option %s (see the comment at the top of bench/redjit_bench.c)", k);
    }
    if (opt.reps < 1 || opt.warmup < 0 || opt.calls < 1) die("bad --reps, --warmup or --calls");
    if (opt.spmv_log2nnz < 6 || opt.spmv_log2nnz > 30 || opt.spmv_grid < 2 || opt.spmv_grid > 20000)
        die("--spmv-log2nnz takes 6..30 and --spmv-grid 2..20000");
    if (opt.types_log2n < 8 || opt.types_log2n > 31) die("--types-log2n takes 8..31");
    if (opt.pair_log2n < 2 || opt.pair_log2n > 24) die("--pair-log2n takes 2..24");
    if (opt.pair_bilinear < 1 || opt.pair_bilinear > 65536 || opt.pair_bmm[0] < 1 || opt.pair_bmm[1] < 1 ||
        opt.pair_bmm[0] * opt.pair_bmm[1] * opt.pair_bmm[1] > (1LL << 31) || opt.pair_matmul < 1 ||
        opt.pair_matmul > 46340)
        die("--pair-bilinear takes 1..65536, --pair-bmm B,M at most 2^31 elements, --pair-matmul 1..46340");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && !strcmp(argv[1], "--jit-child")) return jit_child(argv[2]);
    parse_options(argc, argv);

    /* the JIT figures need an empty disk cache: a directory of our own, removed at the end */
    char cachedir[] = "/tmp/redjit-bench-cache.XXXXXX";
    if (!mkdtemp(cachedir)) die("mkdtemp failed");
    setenv("REDJIT_CACHE_DIR", cachedir, 1);
    setenv("REDJIT_CACHE", "1", 1);

    red_ctx *ctx;
    if (red_open(&ctx)) die("red_open failed");
    red_set_option(ctx, RED_OPT_DEVICE, cpu_mode ? RED_DEVICE_CPU : RED_DEVICE_GPU);
    if (!cpu_mode && !red_gpu_available(ctx)) {
        fprintf(stderr, "redjit_bench: no usable GPU (%s): nothing to measure\n", red_errmsg(ctx));
        printf("{\"case\": \"none\", \"system\": \"redjit\", \"note\": \"no GPU\"}\n");
        red_close(ctx);
        rmdir(cachedir);
        return 0;
    }
    /* red_gpu_available made redjit's context (the device's primary one) current here */
    if (!cpu_mode) {
        cu_load();
        cu_check(cu.StreamCreate(&stream, 0), "cuStreamCreate");
        cu_check(cu.EventCreate(&ev0, 0), "cuEventCreate");
        cu_check(cu.EventCreate(&ev1, 0), "cuEventCreate");
        if (opt.held) {
            void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
            *(void **)&launch_host_func = h ? dlsym(h, "cuLaunchHostFunc") : NULL;
            if (!launch_host_func) die("--held: the CUDA driver has no cuLaunchHostFunc");
        }
    }

    /* inputs: every f32 case reads a prefix of x */
    int64_t N = (int64_t)1 << opt.log2n, NS = (int64_t)1 << opt.log2s, NX = N;
    for (int i = 0; i < opt.ncurve; i++)
        if (((int64_t)1 << opt.curve[i]) > NX) NX = (int64_t)1 << opt.curve[i];
    if (NS > NX) NX = NS;
    if (opt.rows * opt.cols > NX) NX = opt.rows * opt.cols;
    if (opt.srows * opt.scols > NX) NX = opt.srows * opt.scols;
    if (opt.cube[0] * opt.cube[1] * opt.cube[2] > NX) NX = opt.cube[0] * opt.cube[1] * opt.cube[2];
    double t0 = now_ms();
    CUdeviceptr x = make_array(G_F32, NX, BD_SEED_X);
    CUdeviceptr bf = make_array(G_F32, N, BD_SEED_B);
    CUdeviceptr xd = make_array(G_F64, N, BD_SEED_F64);
    CUdeviceptr xi = make_array(G_I32, N, BD_SEED_I32);
    static const char *const layout_names[BD_NLAYOUTS] = {"one", "rand", "len3", "rows1024"};
    CUdeviceptr ptr_d[BD_NLAYOUTS], key_d[BD_NLAYOUTS];
    int64_t nseg[BD_NLAYOUTS];
    for (int l = 0; l < BD_NLAYOUTS; l++) {
        nseg[l] = bd_nseg(l, NS);
        int32_t *ptr = malloc((size_t)(nseg[l] + 1) * 4), *key = malloc((size_t)NS * 4);
        if (!ptr || !key) die("out of memory");
        bd_offsets(l, NS, ptr);
        for (int64_t s = 0; s < nseg[l]; s++)
            for (int64_t i = ptr[s]; i < ptr[s + 1]; i++) key[i] = (int32_t)s;
        ptr_d[l] = upload(ptr, (size_t)(nseg[l] + 1) * 4);
        key_d[l] = upload(key, (size_t)NS * 4);
        free(ptr);
        free(key);
    }
    if (!cpu_mode) cu_check(cu.CtxSynchronize(), "cuCtxSynchronize");
    fprintf(stderr, "redjit_bench: inputs ready in %.1f s (x: %lld f32)\n", (now_ms() - t0) * 1e-3, (long long)NX);

    /* the cases, in table order */
    bench_case *c;
    for (int i = 0; i < opt.ncurve; i++) {
        int64_t n = (int64_t)1 << opt.curve[i];
        c = add_case("sum_f32", "sum(x)", n, K_SCALAR);
        add_bind(c, "x", RED_F32, x, n, 0);
    }
    c = add_case("sum_f64", "sum(x)", N, K_SCALAR);
    add_bind(c, "x", RED_F64, xd, N, 0);
    c = add_case("sum_i32", "sum(x)", N, K_SCALAR);
    add_bind(c, "x", RED_I32, xi, N, 0);
    c = add_case("max_f32", "max(x)", N, K_SCALAR);
    add_bind(c, "x", RED_F32, x, N, 0);
    c = add_case("dot_f32", "sum(a*b)", N, K_SCALAR);
    add_bind(c, "a", RED_F32, x, N, 0);
    add_bind(c, "b", RED_F32, bf, N, 0);
    c = add_case("maxabs_f32", "max(abs(a-b))", N, K_SCALAR);
    add_bind(c, "a", RED_F32, x, N, 0);
    add_bind(c, "b", RED_F32, bf, N, 0);
    c = add_case("sumsq_f32", "sum(x), sum(x*x)", N, K_PAIR);
    add_bind(c, "x", RED_F32, x, N, 0);
    c = add_case("argmax_f32", "argmax(x)", N, K_INDEX);
    add_bind(c, "x", RED_F32, x, N, 0);
    for (int l = 0; l < BD_NLAYOUTS; l++) {
        char id[32];
        snprintf(id, sizeof id, "csr_%s", layout_names[l]);
        c = add_case(id, "sum(v[k]) over k in ptr[r]..ptr[r+1]", NS, K_ARRAY);
        add_bind(c, "v", RED_F32, x, NS, 0);
        add_bind(c, "ptr", RED_I32, ptr_d[l], nseg[l] + 1, 0);
    }
    for (int l = 0; l < BD_NLAYOUTS; l++) {
        char id[32];
        snprintf(id, sizeof id, "keys_%s", layout_names[l]);
        c = add_case(id, "sum(v[i]) by seg[i]", NS, K_ARRAY);
        add_bind(c, "v", RED_F32, x, NS, 0);
        add_bind(c, "seg", RED_I32, key_d[l], NS, 0);
    }
    c = add_case("rowsum", "sum(A[i,j]) over j", opt.rows * opt.cols, K_ARRAY);
    add_bind(c, "A", RED_F32, x, opt.rows, opt.cols);
    c = add_case("colsum", "sum(A[i,j]) over i", opt.rows * opt.cols, K_ARRAY);
    add_bind(c, "A", RED_F32, x, opt.rows, opt.cols);
    c = add_case("rowsum_short", "sum(A[i,j]) over j", opt.srows * opt.scols, K_ARRAY);
    add_bind(c, "A", RED_F32, x, opt.srows, opt.scols);
    /* whole-array reductions of a matrix: the same bytes as sum_f32 and maxabs_f32 at
     * rows * cols, but two reduced indices, so no 16-byte-load kernel and a 64-bit divide
     * an element to split the index (2026-11-23: not yet measured) */
    c = add_case("sum2d_f32", "sum(A)", opt.rows * opt.cols, K_SCALAR);
    add_bind(c, "A", RED_F32, x, opt.rows, opt.cols);
    if (opt.rows * opt.cols <= N) {   /* b has N elements */
        c = add_case("maxabs2d_f32", "max(abs(A-B))", opt.rows * opt.cols, K_SCALAR);
        add_bind(c, "A", RED_F32, x, opt.rows, opt.cols);
        add_bind(c, "B", RED_F32, bf, opt.rows, opt.cols);
    }
    add_compositions(x, key_d[BD_LAYOUT_RAND], NS);
    add_sparse(ptr_d[BD_LAYOUT_RAND], nseg[BD_LAYOUT_RAND], NS);
    add_types();
    add_pairwise();

    printf("{\"case\": \"config\", \"system\": \"redjit\", \"version\": \"%s\", \"reps\": %d, \"warmup\": %d, "
           "\"budget_ms\": %.0f}\n", red_version_string(), opt.reps, opt.warmup, opt.budget_ms);
    if (opt.jit && in_list(opt.cases, "jit")) {
        jit_new_expressions(ctx);
        for (int i = 0; i < 3; i++) spawn_child("jit_disk", 1);
        for (int i = 0; i < 3; i++) spawn_child("jit_cold", 0);
    }
    if (!cpu_mode && in_list(opt.cases, "overhead")) call_overhead(ctx, x);
    for (int i = 0; i < ncases; i++)
        if (in_list(opt.cases, cases[i].id)) run_case(ctx, &cases[i]);

    CUdeviceptr all[4 + 2 * BD_NLAYOUTS] = {x, bf, xd, xi};
    for (int l = 0; l < BD_NLAYOUTS; l++) {
        all[4 + 2 * l] = ptr_d[l];
        all[5 + 2 * l] = key_d[l];
    }
    for (int i = 0; i < 4 + 2 * BD_NLAYOUTS; i++)
        if (cpu_mode) free((void *)(uintptr_t)all[i]);
        else cu.MemFree(all[i]);
    for (int i = 0; i < nsparse_mem; i++)
        if (cpu_mode) free((void *)(uintptr_t)sparse_mem[i]);
        else cu.MemFree(sparse_mem[i]);
    red_cache_clear(ctx);
    red_close(ctx);
    rmdir(cachedir);
    return 0;
}
