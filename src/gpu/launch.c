/*
 * launch.c -- what every pass of a run does on the device: buffers taken for the run and
 * given back at its end, uploads of host arrays, the parameter block's arrays, kernel
 * launches and occupancy-sized grids, and the last kernel publishing the run's workspace.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_internal.h"


/* Give `p` back to the pool when the run is over (its kernels may still be
 * queued on the caller's stream). */
int gpu_defer_release(run_ctx *r, CUdeviceptr p)
{
    gpu_run *run = r->run;
    if (!run->caprelease) {   /* the inline array first: most runs need no more */
        run->release = run->release_inl;
        run->caprelease = (int)(sizeof run->release_inl / sizeof run->release_inl[0]);
    }
    if (run->nrelease == run->caprelease) {
        int cap = 2 * run->caprelease;
        unsigned long long *n = malloc((size_t)cap * sizeof *n);
        if (!n) {
            r->g->cu.StreamSynchronize(r->s);   /* cannot defer: wait instead */
            gpu_pool_put(r->g, p);
            return 0;
        }
        memcpy(n, run->release, (size_t)run->nrelease * sizeof *n);
        if (run->release != run->release_inl) free(run->release);
        run->release = n;
        run->caprelease = cap;
    }
    run->release[run->nrelease++] = p;
    return 0;
}

/* A buffer of at least `size` bytes for this run: one an earlier run on the
 * same stream left to it (gpu_rechain), taken as gpu_pool_get would take it from
 * the pool, else from the pool.  `release`: given back at the run's end
 * (partials, uploads), else handed to the caller (results). */
int gpu_run_get(run_ctx *r, size_t size, CUdeviceptr *out, int release)
{
    gpu_run *run = r->run;
    gpu_dev *g = r->g;
    size_t want = ((size ? size : 1) + 255) & ~(size_t)255;
    for (int i = 0; i < run->nreuse; i++)
        for (int k = 0; k < g->npool; k++)
            if (g->pool[k].ptr == run->reuse[i] && g->pool[k].size >= want && g->pool[k].size <= 2 * want + (1 << 20)) {
                *out = run->reuse[i];
                run->reuse[i] = run->reuse[--run->nreuse];
                return release ? gpu_defer_release(r, *out) : 0;
            }
    int rc = gpu_pool_get(g, size, out, r->diag);
    if (!rc && release) gpu_defer_release(r, *out);
    return rc;
}

int gpu_launch(run_ctx *r, pass_entry *e, int entry, long long grid)
{
    return gpu_launch_smem(r, e, entry, grid, 0);
}

int gpu_launch_smem(run_ctx *r, pass_entry *e, int entry, long long grid, int smem)
{
    return gpu_launch_block(r, e, entry, grid, smem, BLOCK);
}

int gpu_launch_block(run_ctx *r, pass_entry *e, int entry, long long grid, int smem, int threads)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    int k;
    int rc = gpu_get_fn(r, e, entry, &k);
    if (rc) return rc;
    CUfunction f = e->fn[k].f;
    if (grid < 1) grid = 1;
    if (grid > 0x7fffffff) grid = 0x7fffffff;
    if (smem > 0 && e->fn[k].smem_static < 0) {
        int st = 0;
        CU(g->cu.FuncGetAttribute(&st, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f), "cuFuncGetAttribute");
        e->fn[k].smem_static = st;
    }
    /* past 48 KiB, static and dynamic together, a kernel must ask for it first:
     * once, for all that the device allows beside the kernel's static shared
     * memory, so that passes sharing the function (one module for equal sources)
     * all set the same value and none lowers it under another */
    int over = smem > 0 && smem + e->fn[k].smem_static > 48 * 1024;
    if (over && !e->fn[k].smem) {
        int most = g->smem_optin - e->fn[k].smem_static;
        CU(g->cu.FuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, most), "cuFuncSetAttribute");
        e->fn[k].smem = most;
    }
    if (over && smem > e->fn[k].smem)
        return util_diag_set(diag, RED_ERR_INTERNAL, "%s: %d bytes of shared memory, %d allowed", gpu_entry_name[entry],
                             smem, e->fn[k].smem);
    void *args[] = {r->params};
    CU(gpu_fault_now(GPU_FAULT_LAUNCH)
           ? CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
           : g->cu.LaunchKernel(f, (unsigned)grid, 1, 1, (unsigned)threads, 1, 1, (unsigned)smem, r->s, args, NULL),
       gpu_entry_name[entry]);
    return 0;
}

int gpu_occupancy_grid(run_ctx *r, pass_entry *e, int entry, long long *grid)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    int k;
    int rc = gpu_get_fn(r, e, entry, &k);
    if (rc) return rc;
    if (!e->fn[k].occupancy) {
        int nb = 0;
        CU(g->cu.OccupancyMaxActiveBlocksPerMultiprocessor(&nb, e->fn[k].f, BLOCK, 0),
           "cuOccupancyMaxActiveBlocksPerMultiprocessor");
        e->fn[k].occupancy = nb > 0 ? nb : 1;
    }
    *grid = (long long)e->fn[k].occupancy * g->nsm;
    return 0;
}


/* Host copy of a host array's touched span; device pointer adjusted so the
 * kernel's offsets (which may be negative with negative strides) work. */
int gpu_upload(run_ctx *r, const core_buf *b, CUdeviceptr *adj)
{
    gpu_dev *g = r->g;
    CUstream s = r->s;
    util_diag *diag = r->diag;
    CUdeviceptr base_, *base = &base_;
    int64_t lo = 0, hi = 0, esz = (int64_t)red_dtype_size(b->dtype);
    int empty = 0;
    for (int d = 0; d < b->ndim; d++) {
        if (b->shape[d] == 0) empty = 1;
        int64_t ext = (b->shape[d] - 1) * b->strides[d];
        if (ext < 0) lo += ext;
        else hi += ext;
    }
    size_t bytes = empty ? 1 : (size_t)((hi - lo + 1) * esz);
    int rc = gpu_run_get(r, bytes, base, 1);   /* given back at the run's end */
    if (rc) return rc;
    if (!empty) {
        /* pageable host memory: the call returns once the data is staged;
         * from a range redjit page-locked (another expression's result) it
         * returns at once, and the run waits for it before red_run returns
         * (the range's owner may write it again on its next run) */
        const char *src = (const char *)b->data + lo * esz;
        CUresult cr = g->cu.MemcpyHtoDAsync(*base, src, bytes, s);
        if (cr) return gpu_cu_fail(g, cr, "cuMemcpyHtoD", diag);
        for (int i = 0; i < g->nlocked; i++)
            if ((uintptr_t)src < (uintptr_t)g->locked[i].p + g->locked[i].n &&
                (uintptr_t)g->locked[i].p < (uintptr_t)src + bytes)
                r->locked_input = 1;
    }
    *adj = *base - (CUdeviceptr)(lo * esz);
    return 0;
}

void gpu_set_array(long long *P, int base, CUdeviceptr ptr, const core_buf *b)
{
    P[base] = (long long)ptr;
    for (int d = 0; d < b->ndim; d++) {
        P[base + 1 + d] = b->shape[d];
        P[base + 1 + b->ndim + d] = b->strides[d];
    }
}

/* The kernel launched next ends the run and publishes its workspace, when
 * the run asked for that (r->pub_words); gpu_publish_disarm after the launch
 * notes whether it went out. */
void gpu_publish_arm(run_ctx *r)
{
    if (r->pub_words <= 0) return;
    r->params[RJ_PUB] = (long long)(uintptr_t)(r->g->pub + RJ_PUB_SEQ);
    r->params[RJ_PUBN] = r->pub_words;
    r->params[RJ_SEQ] = (long long)++r->g->pub_seq;
}

void gpu_publish_disarm(run_ctx *r, int rc)
{
    if (r->pub_words <= 0 || !r->params[RJ_PUB]) return;
    if (!rc) r->pub_seq = (unsigned long long)r->params[RJ_SEQ];
    r->params[RJ_PUB] = 0;
    r->pub_words = 0;
}

/* Waits for rj_publish's sequence number `seq`, watching the stream for a
 * fault: *seen is 1 when it came, 0 when the stream finished without it
 * (the caller then copies the workspace back as usual).  It spins, as the
 * driver's own synchronisation does by default, for a millisecond; a longer
 * run is left to cuStreamSynchronize, which honours a context made to
 * block instead (CU_CTX_SCHED_BLOCKING_SYNC). */
CUresult gpu_publish_wait(gpu_dev *g, CUstream s, unsigned long long seq, int *seen)
{
    const unsigned long long *w = (const unsigned long long *)(g->pub + RJ_PUB_SEQ);
    struct timespec t0 = {0}, t;
    for (unsigned spins = 1;; spins++) {
        if (__atomic_load_n(w, __ATOMIC_ACQUIRE) == seq) {
            *seen = 1;
            return 0;
        }
        if (spins % 256 == 0) {   /* ~0.3 us a query: a few percent of the spinning */
            /* the millisecond counts from the first query: a call whose
             * result comes sooner reads no clock */
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (spins == 256) t0 = t;
            long long ns = (long long)(t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec);
            CUresult q = ns < 1000000 ? g->cu.StreamQuery(s) : g->cu.StreamSynchronize(s);
            if (q == CUDA_ERROR_NOT_READY) continue;
            *seen = __atomic_load_n(w, __ATOMIC_ACQUIRE) == seq;
            return q;
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

