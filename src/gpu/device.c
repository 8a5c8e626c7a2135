/*
 * device.c -- the device and its memory: opening and closing it, statistics, the pool of
 * device buffers and run workspaces, timing events, host memory page-locked for copies, and
 * the synchronous allocations and copies the API offers (gpu_alloc, gpu_copy).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"

int gpu_open(gpu_dev **out, util_diag *diag)
{
    *out = NULL;
    gpu_dev *g = calloc(1, sizeof *g);
    if (!g) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    cu_api *c = &g->cu;
    int lr = cu_api_load(c);
    if (lr) {
        free(g);
        return util_diag_set(diag, RED_ERR_DEVICE, lr == -1 ? "no GPU: the CUDA driver (libcuda.so.1) is not installed"
                                                             : "the CUDA driver lacks a needed function (too old?)");
    }
    int n = 0, rc;
    CUresult r = c->Init(0);
    if (!r) r = c->DeviceGetCount(&n);
    if (r || n <= 0) {
        rc = r ? gpu_cu_fail(g, r, "cuInit", diag) : util_diag_set(diag, RED_ERR_DEVICE, "no GPU: the CUDA driver sees no device");
        free(g);
        return rc ? rc : RED_ERR_DEVICE;
    }
    g->preloading = gpu_nvrtc_preload(&g->preload);
    /* the device of the context current on this thread (cudaSetDevice's, a framework's), as
     * CUDA's libraries do; device 0 where none is */
    CUdevice cur;
    int ordinal = c->CtxGetDevice && !c->CtxGetDevice(&cur) ? (int)cur : 0;
    if ((r = c->DeviceGet(&g->dev, ordinal)) || (r = c->DevicePrimaryCtxRetain(&g->ctx, g->dev)) ||
        (r = c->CtxSetCurrent(g->ctx)) ||
        (r = c->DeviceGetAttribute(&g->nsm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g->dev)) ||
        (r = c->DeviceGetAttribute(&g->sm_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g->dev)) ||
        (r = c->DeviceGetAttribute(&g->sm_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g->dev))) {
        rc = gpu_cu_fail(g, r, "device setup", diag);
        if (g->preloading) pthread_join(g->preload, NULL);
        free(g);
        return rc;
    }
    /* every 64-bit Linux system with a GPU redjit supports has it; a
     * driver (or the stand-in) that does not say so gets the copy instead */
    if (c->DeviceGetAttribute(&g->uva, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, g->dev)) g->uva = 0;
    /* the dynamic shared memory a block may ask for (rj_segbs); 48 KiB where unknown */
    if (c->DeviceGetAttribute(&g->smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, g->dev) ||
        g->smem_optin < 48 * 1024)
        g->smem_optin = 48 * 1024;
    snprintf(g->arch, sizeof g->arch, "sm_%d%d", g->sm_major, g->sm_minor);
    pthread_mutex_init(&g->lock, NULL);
    *out = g;
    return 0;
}

const cu_api *gpu_driver(gpu_dev *g, CUcontext *ctx, int *ordinal)
{
    *ctx = g->ctx;
    *ordinal = (int)g->dev;
    return &g->cu;
}

void gpu_close(gpu_dev *g)
{
    if (!g) return;
    g->cu.CtxSetCurrent(g->ctx);
    gpu_modules_free(g);
    if (g->blas_close) g->blas_close(g->blas);
    for (int i = 0; i < g->npool; i++) g->cu.MemFree(g->pool[i].ptr);
    free(g->pool);
    for (int i = 0; i < g->nevents; i++)
        for (int k = 0; k < 4; k++) g->cu.EventDestroy(g->events[i][k]);
    free(g->events);
    if (g->pinned) g->cu.MemFreeHost(g->pinned);
    free(g->locked);   /* empty: red_close finalized every expression first */
    g->cu.DevicePrimaryCtxRelease(g->dev);
    if (g->preloading) pthread_join(g->preload, NULL);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

void gpu_get_stats(gpu_dev *g, gpu_stats *s)
{
    pthread_mutex_lock(&g->lock);
    *s = g->stats;
    s->pool_bytes = s->pool_live = 0;
    for (int i = 0; i < g->npool; i++) {
        s->pool_bytes += (long long)g->pool[i].size;
        if (g->pool[i].live) s->pool_live += (long long)g->pool[i].size;
    }
    pthread_mutex_unlock(&g->lock);
}

int gpu_is_device_pointer(gpu_dev *g, const void *ptr)
{
    unsigned type = 0;
    if (!g || !ptr) return 0;
    if (g->cu.PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)ptr)) return 0;
    return type == CU_MEMORYTYPE_DEVICE;
}

/* ---- the buffer pool: freed buffers are kept and reused ---------------------------- */

int gpu_pool_get(gpu_dev *g, size_t size, CUdeviceptr *out, util_diag *diag)
{
    if (size == 0) size = 1;
    size = (size + 255) & ~(size_t)255;
    int best = -1;
    for (int i = 0; i < g->npool; i++)
        if (!g->pool[i].live && g->pool[i].size >= size && g->pool[i].size <= 2 * size + (1 << 20) &&
            (best < 0 || g->pool[i].size < g->pool[best].size))
            best = i;
    if (best >= 0) {
        g->pool[best].live = 1;
        g->pool[best].clean = 0;
        *out = g->pool[best].ptr;
        return 0;
    }
    CUdeviceptr p;
    int injected = gpu_fault_now(GPU_FAULT_ALLOC);
    CUresult r = injected ? CUDA_ERROR_OUT_OF_MEMORY : g->cu.MemAlloc(&p, size);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        /* give the idle buffers back and try once more */
        int k = 0;
        for (int i = 0; i < g->npool; i++) {
            if (!g->pool[i].live) g->cu.MemFree(g->pool[i].ptr);
            else g->pool[k++] = g->pool[i];
        }
        g->npool = k;
        r = injected ? CUDA_ERROR_OUT_OF_MEMORY : g->cu.MemAlloc(&p, size);
    }
    if (r) return gpu_cu_fail(g, r, "cuMemAlloc", diag);
    if (g->npool == g->cappool) {
        int cap = g->cappool ? 2 * g->cappool : 32;
        pool_buf *np = realloc(g->pool, (size_t)cap * sizeof *np);
        if (!np) {
            g->cu.MemFree(p);
            return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
        }
        g->pool = np;
        g->cappool = cap;
    }
    g->pool[g->npool++] = (pool_buf){p, size, 1, 0};
    *out = p;
    return 0;
}

void gpu_pool_put(gpu_dev *g, CUdeviceptr p)
{
    for (int i = 0; i < g->npool; i++)
        if (g->pool[i].ptr == p) g->pool[i].live = 0;
}

/* A run's workspace (fault record at 0, persistent-grid counter at 32, key
 * statistics at 64), which must start with the first 40 bytes and the key
 * flag word at 80 zero.  A run that ends without a fault and with that word
 * zero leaves them so (the persistent kernel resets its counter), and gives
 * the buffer back marked clean; taking a clean one saves
 * a memset, a GPU operation of its own on every call.  From RJ_WS_HEAD on it
 * holds the run's small results bound for the host: written there by the
 * kernels, they come back in the same copy as the fault record (one copy a
 * run, not one per result and one for the record; each costs about 1.5 us
 * of host time on an H200).  Nothing reads that part before it is written. */
int gpu_ws_get(gpu_dev *g, CUstream s, CUdeviceptr *out, util_diag *diag)
{
    for (int i = 0; i < g->npool; i++)
        if (!g->pool[i].live && g->pool[i].clean) {
            g->pool[i].live = 1;
            g->pool[i].clean = 0;
            *out = g->pool[i].ptr;
            return 0;
        }
    int rc = gpu_pool_get(g, RJ_WS_BYTES, out, diag);
    if (!rc && g->cu.MemsetD8Async(*out, 0, RJ_WS_HEAD, s)) {
        gpu_pool_put(g, *out);
        rc = util_diag_set(diag, RED_ERR_DEVICE, "cuMemsetD8Async failed");
    }
    return rc;
}

/* The host's staging area for the workspace and small results (and rj_publish's area after
 * it, where addresses are unified), allocated by the first run that needs it: a run without
 * it copies its results one by one. */
void gpu_pinned_ensure(gpu_dev *g)
{
    if (!g->pinned && !g->cu.MemHostAlloc((void **)&g->pinned, PINNED_SIZE + RJ_PUB_IMAGE + RJ_WS_BYTES, 0)) {
        g->pinned_size = PINNED_SIZE;
        if (g->uva) g->pub = g->pinned + PINNED_SIZE;
        memset(g->pinned + PINNED_SIZE, 0, RJ_PUB_IMAGE);
    }
}

void gpu_ws_put_clean(gpu_dev *g, CUdeviceptr p)
{
    for (int i = 0; i < g->npool; i++)
        if (g->pool[i].ptr == p) {
            g->pool[i].live = 0;
            g->pool[i].clean = 1;
        }
}

/* A run's four timing events, reused from run to run (creating and destroying
 * them every call costs more than recording them).  All four or none: a run
 * without them just has no device timings.  Under g->lock. */
void gpu_events_take(gpu_dev *g, void *ev[4])
{
    if (g->nevents > 0) {
        memcpy(ev, g->events[--g->nevents], 4 * sizeof *ev);
        return;
    }
    for (int k = 0; k < 4; k++)
        if (g->cu.EventCreate(&ev[k], 0)) {
            while (k-- > 0) g->cu.EventDestroy(ev[k]);
            memset(ev, 0, 4 * sizeof *ev);
            return;
        }
}

void gpu_events_give(gpu_dev *g, void *ev[4])
{
    if (!ev[0]) return;
    if (g->nevents == g->capevents) {
        int cap = g->capevents ? 2 * g->capevents : 8;
        void *(*n)[4] = cap <= 1024 ? realloc(g->events, (size_t)cap * sizeof *n) : NULL;
        if (!n) {
            for (int k = 0; k < 4; k++) g->cu.EventDestroy(ev[k]);
            memset(ev, 0, 4 * sizeof *ev);
            return;
        }
        g->events = n;
        g->capevents = cap;
    }
    memcpy(g->events[g->nevents++], ev, 4 * sizeof *ev);
    memset(ev, 0, 4 * sizeof *ev);
}

/* The phases of a finished run, from its events (the stream is idle by now).
 * Under g->lock. */
void gpu_read_timings(gpu_dev *g, gpu_run *run)
{
    if (run->ev[0] && run->ev[1] && run->ev[2] && run->ev[3] && !run->timing_failed &&
        !g->cu.StreamSynchronize((CUstream)run->stream)) {
        float a = 0, b = 0, c = 0;
        if (!g->cu.EventElapsedTime(&a, run->ev[0], run->ev[1])) run->upload_ms = a;
        if (!g->cu.EventElapsedTime(&b, run->ev[1], run->ev[2])) run->kernel_ms = b;
        if (!g->cu.EventElapsedTime(&c, run->ev[2], run->ev[3])) run->download_ms = c;
    }
}

int gpu_alloc(gpu_dev *g, size_t bytes, void **ptr, util_diag *diag)
{
    pthread_mutex_lock(&g->lock);
    CUresult cr = g->cu.CtxSetCurrent(g->ctx);
    CUdeviceptr p = 0;
    int rc = cr ? gpu_cu_fail(g, cr, "cuCtxSetCurrent", diag) : gpu_pool_get(g, bytes, &p, diag);
    pthread_mutex_unlock(&g->lock);
    *ptr = rc ? NULL : (void *)(uintptr_t)p;
    return rc;
}

void gpu_release(gpu_dev *g, void *ptr)
{
    if (!g || !ptr) return;
    pthread_mutex_lock(&g->lock);
    gpu_pool_put(g, (CUdeviceptr)(uintptr_t)ptr);
    pthread_mutex_unlock(&g->lock);
}

int gpu_copy(gpu_dev *g, void *dst, int dst_dev, const void *src, int src_dev, size_t bytes, util_diag *diag)
{
    if (!bytes) return 0;
    pthread_mutex_lock(&g->lock);
    CUresult r = g->cu.CtxSetCurrent(g->ctx);
    if (r) {
        int rc = gpu_cu_fail(g, r, "cuCtxSetCurrent", diag);
        pthread_mutex_unlock(&g->lock);
        return rc;
    }
    const char *what;
    if (dst_dev && src_dev) {
        r = g->cu.MemcpyDtoD((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes);
        what = "cuMemcpyDtoD";
    } else if (dst_dev) {
        r = g->cu.MemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes);
        what = "cuMemcpyHtoD";
    } else if (src_dev) {
        r = g->cu.MemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes);
        what = "cuMemcpyDtoH";
    } else {
        memcpy(dst, src, bytes);
        r = 0;
        what = "memcpy";
    }
    pthread_mutex_unlock(&g->lock);
    return r ? gpu_cu_fail(g, r, what, diag) : 0;
}


/* The entry of g->locked that starts at p, or -1.  g->lock held. */
static int locked_at(const gpu_dev *g, const void *p)
{
    for (int i = 0; i < g->nlocked; i++)
        if (g->locked[i].p == p) return i;
    return -1;
}

/* core_results' leave hook: a large buffer is freed or handed over; unlocked
 * first if gpu_host_pin locked it.  g->lock not held. */
static void host_unpin(void *arg, void *p)
{
    gpu_dev *g = arg;
    pthread_mutex_lock(&g->lock);
    int i = locked_at(g, p);
    if (i >= 0) {
        g->locked[i] = g->locked[--g->nlocked];
        g->cu.CtxSetCurrent(g->ctx);
        g->cu.MemHostUnregister(p);
    }
    pthread_mutex_unlock(&g->lock);
}

void gpu_host_pin(gpu_dev *g, core_results *out, void *h, size_t bytes)   /* g->lock held */
{
    if (locked_at(g, h) >= 0) return;
    if (g->nlocked == g->caplocked) {
        int cap = g->caplocked ? 2 * g->caplocked : 8;
        void *nl = realloc(g->locked, (size_t)cap * sizeof *g->locked);
        if (!nl) return;   /* pageable, as before */
        g->locked = nl;
        g->caplocked = cap;
    }
    if (g->cu.MemHostRegister(h, bytes, 0)) return;
    g->locked[g->nlocked].p = h;
    g->locked[g->nlocked++].n = bytes;
    out->leave = host_unpin;
    out->leave_arg = g;
}

