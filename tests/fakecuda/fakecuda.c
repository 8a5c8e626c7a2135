/*
 * fakecuda.c -- a stand-in for libcuda.so.1 that runs no kernel, for testing
 * the GPU backend's host side where there is no GPU (CI).
 *
 * It implements the driver functions redjit resolves (src/gpu/cu_api.h)
 * on host memory: "device" allocations are host blocks it keeps a table of,
 * copies are memcpy, launches are checked (a live module's function, a grid
 * and block the hardware allows, arguments given) and counted but do nothing.
 * Results are therefore meaningless; what a test can check is the traffic
 * between redjit and the driver: which calls a run makes, that every
 * allocation, module, event and pinned block is given back, that device
 * pointers are told from host ones, and how much host time redjit itself
 * spends per call when the driver costs nothing.
 *
 * A test reaches it by putting its folder first on LD_LIBRARY_PATH (the file
 * is named libcuda.so.1) and reads its counters through fakecuda_* below,
 * found with dlsym on the same library.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
    OK = 0,
    ERR_INVALID_VALUE = 1,
    ERR_OUT_OF_MEMORY = 2,
    ERR_NOT_INITIALIZED = 3,
    ERR_INVALID_DEVICE = 101,
    ERR_INVALID_IMAGE = 200,
    ERR_INVALID_CONTEXT = 201,
    ERR_INVALID_HANDLE = 400,
    ERR_NOT_FOUND = 500,
    ERR_LAUNCH_OUT_OF_RESOURCES = 701,
};

/* One counter per entry point, in this order (fakecuda_count takes the name). */
#define FAKE_CALLS(X)                                                                              \
    X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetAttribute)                           \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent)                    \
    X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)               \
    X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8)     \
    X(cuGetErrorName) X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuPointerGetAttribute)      \
    X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoD) X(cuMemsetD8Async)                   \
    X(cuStreamCreate) X(cuStreamSynchronize) X(cuStreamQuery) X(cuMemHostAlloc) X(cuMemFreeHost)   \
    X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)                  \
    X(cuEventDestroy) X(cuMemHostRegister) X(cuMemHostUnregister) X(cuFuncSetAttribute) X(cuFuncGetAttribute)
#define AS_ENUM(f) C_##f,
#define AS_NAME(f) #f,
enum { FAKE_CALLS(AS_ENUM) NCALLS };
static const char *const call_names[NCALLS] = {FAKE_CALLS(AS_NAME)};

/* What the fake holds: blocks of "device" memory, pinned host blocks,
 * modules (a copy of each image), functions, events. */
typedef struct block {
    void *p;
    size_t size;
    int kind;   /* 0 device, 1 pinned host, 2 module image, 3 event, 5 registered host range (not ours) */
} block;

typedef struct fake_fn {
    void *mod;   /* its module's image (a kind-2 block while loaded) */
    char name[128];
    int max_dyn_smem;   /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: 48 KiB until raised */
} fake_fn;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long long counts[NCALLS];
static block *blocks;
static int nblocks, capblocks;
static fake_fn *fns;
static int nfns, capfns;
static int initialised, ctx_refs;
static char ctx_token, stream_token;
static char last_launch[128];
/* The kernels launched since fakecuda_launch_log last cleared it, each
 * followed by a space (what fits). */
static char launch_log[1024];
static unsigned last_grid, last_block, last_smem;
/* The reserved slots of the last launch's parameter block (rj_abi.h's RJ_NRESERVED). */
static long long last_params[14];
/* A device fault to report at the next launch (fakecuda_fault_next_launch). */
static int fault_armed;
static unsigned long long fault_record[4];
/* Bytes a "kernel" writes at an offset from the fault record at the next
 * launch (fakecuda_store_next_launch). */
static int store_armed;
static size_t store_off, store_n;
static unsigned char store_bytes[64];

/* rj_publish at launch (parameter 10 nonzero), unless drop_publish says to
 * leave it out (fakecuda_drop_publish); published counts them. */
#define P_PUB(params) (((const long long *)(params)[0])[10] != 0)
static int drop_publish;
static long long published;
/* cuStreamQuery answers "not ready" this many more times (fakecuda_busy) */
static int busy_queries;

static void count(int c)
{
    __atomic_fetch_add(&counts[c], 1, __ATOMIC_RELAXED);
}

/* Add a block; 0 or ERR_OUT_OF_MEMORY.  Called with the lock held. */
static int add_block(void *p, size_t size, int kind)
{
    if (nblocks == capblocks) {
        int cap = capblocks ? 2 * capblocks : 64;
        block *nb = realloc(blocks, (size_t)cap * sizeof *nb);
        if (!nb) return ERR_OUT_OF_MEMORY;
        blocks = nb;
        capblocks = cap;
    }
    blocks[nblocks++] = (block){p, size, kind};
    return OK;
}

/* The block of `kind` that contains [p, p + n), or -1.  Lock held. */
static int find_block(const void *p, size_t n, int kind)
{
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < nblocks; i++) {
        uintptr_t b = (uintptr_t)blocks[i].p;
        if (blocks[i].kind == kind && a >= b && a - b <= blocks[i].size && n <= blocks[i].size - (a - b))
            return i;
    }
    return -1;
}

/* Forget the block of `kind` at p (freeing it unless it is a registered
 * host range, which is the caller's memory).  Takes the lock. */
static int drop_block(const void *p, int kind)
{
    int rc = ERR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].p == p && blocks[i].kind == kind) {
            if (kind != 5) free(blocks[i].p);
            blocks[i] = blocks[--nblocks];
            rc = OK;
            break;
        }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* A copy's device side must lie inside one allocation. */
static int device_range(CUdeviceptr p, size_t n)
{
    pthread_mutex_lock(&lock);
    int i = find_block((const void *)(uintptr_t)p, n, 0);
    pthread_mutex_unlock(&lock);
    return i >= 0 ? OK : ERR_INVALID_VALUE;
}

/* ---- the driver API ----------------------------------------------------------------- */

EXPORT CUresult cuInit(unsigned flags)
{
    count(C_cuInit);
    if (flags) return ERR_INVALID_VALUE;
    initialised = 1;
    return OK;
}

EXPORT CUresult cuDeviceGetCount(int *n)
{
    count(C_cuDeviceGetCount);
    if (!initialised) return ERR_NOT_INITIALIZED;
    *n = 1;
    return OK;
}

EXPORT CUresult cuDeviceGet(int *dev, int ordinal)
{
    count(C_cuDeviceGet);
    if (ordinal != 0) return ERR_INVALID_DEVICE;
    *dev = 0;
    return OK;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
    count(C_cuDeviceGetAttribute);
    if (dev != 0) return ERR_INVALID_DEVICE;
    switch (attr) {
    case 16: *v = 132; return OK;   /* multiprocessors, as on an H100/H200 SXM */
    case 75: *v = 9; return OK;     /* compute capability 9.0 */
    case 76: *v = 0; return OK;
    case 41: *v = 1; return OK;     /* unified addressing: pinned memory is at its host address */
    case 97: *v = 227 * 1024; return OK;   /* shared memory a block may opt in to */
    default: return ERR_INVALID_VALUE;
    }
}

EXPORT CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    count(C_cuDevicePrimaryCtxRetain);
    if (dev != 0) return ERR_INVALID_DEVICE;
    __atomic_fetch_add(&ctx_refs, 1, __ATOMIC_RELAXED);
    *ctx = &ctx_token;
    return OK;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int dev)
{
    count(C_cuDevicePrimaryCtxRelease);
    if (dev != 0) return ERR_INVALID_DEVICE;
    if (__atomic_sub_fetch(&ctx_refs, 1, __ATOMIC_RELAXED) < 0) return ERR_INVALID_CONTEXT;
    return OK;
}

EXPORT CUresult cuCtxSetCurrent(void *ctx)
{
    count(C_cuCtxSetCurrent);
    return ctx == NULL || ctx == &ctx_token ? OK : ERR_INVALID_CONTEXT;
}

EXPORT CUresult cuCtxSynchronize(void)
{
    count(C_cuCtxSynchronize);
    return OK;
}

/* A CUBIN is an ELF file: its size is where the section headers end. */
static size_t elf_size(const unsigned char *img)
{
    if (memcmp(img, "\177ELF", 4) != 0 || img[4] != 2) return 0;
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, img + 0x28, 8);
    memcpy(&shentsize, img + 0x3a, 2);
    memcpy(&shnum, img + 0x3c, 2);
    if (shoff == 0 || shoff > ((uint64_t)1 << 30)) return 0;
    return (size_t)(shoff + (uint64_t)shentsize * shnum);
}

EXPORT CUresult cuModuleLoadData(void **mod, const void *image)
{
    count(C_cuModuleLoadData);
    if (!mod || !image) return ERR_INVALID_VALUE;
    size_t n = elf_size(image);
    if (!n) return ERR_INVALID_IMAGE;
    void *copy = malloc(n);
    if (!copy) return ERR_OUT_OF_MEMORY;
    memcpy(copy, image, n);
    pthread_mutex_lock(&lock);
    int rc = add_block(copy, n, 2);
    pthread_mutex_unlock(&lock);
    if (rc) {
        free(copy);
        return rc;
    }
    *mod = copy;
    return OK;
}

EXPORT CUresult cuModuleUnload(void *mod)
{
    count(C_cuModuleUnload);
    int rc = drop_block(mod, 2);
    return rc ? ERR_INVALID_HANDLE : OK;
}

/* A function handle is 1 + its index in fns. */
EXPORT CUresult cuModuleGetFunction(void **f, void *mod, const char *name)
{
    count(C_cuModuleGetFunction);
    if (!f || !name || strlen(name) >= sizeof fns[0].name) return ERR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    int m = -1;
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].p == mod && blocks[i].kind == 2) m = i;
    CUresult rc = OK;
    if (m < 0) rc = ERR_INVALID_HANDLE;
    /* the name must be in the image (its symbol table) */
    else if (!memmem(blocks[m].p, blocks[m].size, name, strlen(name) + 1)) rc = ERR_NOT_FOUND;
    if (!rc && nfns == capfns) {
        int cap = capfns ? 2 * capfns : 64;
        fake_fn *nf = realloc(fns, (size_t)cap * sizeof *nf);
        if (!nf) rc = ERR_OUT_OF_MEMORY;
        else fns = nf, capfns = cap;
    }
    if (!rc) {
        fns[nfns].mod = mod;
        strcpy(fns[nfns].name, name);
        fns[nfns].max_dyn_smem = 0;
        *f = (void *)(uintptr_t)(++nfns);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shmem, void *stream, void **params, void **extra)
{
    count(C_cuLaunchKernel);
    (void)stream;
    pthread_mutex_lock(&lock);
    uintptr_t k = (uintptr_t)f;
    CUresult rc = OK;
    if (k == 0 || k > (uintptr_t)nfns) rc = ERR_INVALID_HANDLE;
    else {
        int live = 0;
        for (int i = 0; i < nblocks; i++)
            if (blocks[i].p == fns[k - 1].mod && blocks[i].kind == 2) live = 1;
        if (!live) rc = ERR_INVALID_HANDLE;   /* its module was unloaded */
    }
    if (!rc && (gx == 0 || gy == 0 || gz == 0 || gx > 0x7fffffffu || gy > 65535 || gz > 65535))
        rc = ERR_INVALID_VALUE;
    if (!rc && (bx == 0 || by == 0 || bz == 0 || (unsigned long long)bx * by * bz > 1024 || bz > 64))
        rc = ERR_INVALID_VALUE;
    if (!rc && shmem > (unsigned)(fns[k - 1].max_dyn_smem ? fns[k - 1].max_dyn_smem : 48 * 1024))
        rc = ERR_INVALID_VALUE;
    if (!rc && (!params || extra)) rc = ERR_INVALID_VALUE;   /* redjit passes kernelParams only */
    if (!rc) {
        strcpy(last_launch, fns[k - 1].name);
        size_t at = strlen(launch_log), n = strlen(last_launch);
        if (at + n + 2 <= sizeof launch_log) {
            memcpy(launch_log + at, last_launch, n);
            launch_log[at + n] = ' ';
            launch_log[at + n + 1] = 0;
        }
        last_grid = gx;
        last_block = bx;
        last_smem = shmem;
        memcpy(last_params, params[0], sizeof last_params);
    }
    if (!rc && fault_armed) {
        /* what a kernel's rj_fault does: the first fault claims the record
         * whose address is parameter RJ_ERR (4) of the block */
        const long long *P = params[0];
        unsigned long long *rec = (unsigned long long *)(uintptr_t)P[4];
        if (find_block(rec, 32, 0) < 0) {
            rc = ERR_INVALID_VALUE;   /* a kernel would fault on this address */
        } else if (rec[0] == 0) {
            memcpy(rec, fault_record, sizeof fault_record);
        }
        fault_armed = 0;
    }
    if (!rc && store_armed) {
        const long long *P = params[0];
        unsigned char *at = (unsigned char *)(uintptr_t)P[4] + store_off;
        if (find_block(at, store_n, 0) < 0) rc = ERR_INVALID_VALUE;
        else memcpy(at, store_bytes, store_n);
        store_armed = 0;
    }
    if (!rc && P_PUB(params) && drop_publish > 0) {
        drop_publish--;   /* a kernel that ends without publishing */
    } else if (!rc && P_PUB(params)) {
        /* what rj_publish does: the workspace's first RJ_PUBN (11) words
         * after the word at RJ_PUB (10), then RJ_SEQ (12) into that word */
        const long long *P = params[0];
        unsigned long long *dst = (unsigned long long *)(uintptr_t)P[10];
        const unsigned long long *ws = (const unsigned long long *)(uintptr_t)P[4];
        if (P[11] < 0 || find_block(dst, 8 * (size_t)(P[11] + 1), 1) < 0 || find_block(ws, 8 * (size_t)P[11], 0) < 0) {
            rc = ERR_INVALID_VALUE;   /* a kernel would fault on these addresses */
        } else {
            memcpy(dst + 1, ws, 8 * (size_t)P[11]);
            __atomic_store_n(dst, (unsigned long long)P[12], __ATOMIC_RELEASE);
            published++;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static CUresult alloc_block(void **p, size_t n, int kind)
{
    if (!p || n == 0) return ERR_INVALID_VALUE;
    if (n > ((size_t)1 << 34)) return ERR_OUT_OF_MEMORY;   /* 16 GiB: more than a test needs */
    size_t rounded = (n + 255) & ~(size_t)255;
    void *m = aligned_alloc(256, rounded);
    if (!m) return ERR_OUT_OF_MEMORY;
    memset(m, 0xa5, rounded);   /* not zeros: device memory starts as anything */
    pthread_mutex_lock(&lock);
    int rc = add_block(m, n, kind);
    pthread_mutex_unlock(&lock);
    if (rc) {
        free(m);
        return rc;
    }
    *p = m;
    return OK;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    count(C_cuMemAlloc);
    void *m = NULL;
    CUresult rc = alloc_block(&m, n, 0);
    if (!rc) *p = (CUdeviceptr)(uintptr_t)m;
    return rc;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
    count(C_cuMemFree);
    int rc = drop_block((void *)(uintptr_t)p, 0);
    return rc;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    count(C_cuMemcpyHtoD);
    if (device_range(dst, n)) return ERR_INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    count(C_cuMemcpyDtoH);
    if (device_range(src, n)) return ERR_INVALID_VALUE;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return OK;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n)
{
    count(C_cuMemsetD8);
    if (device_range(dst, n)) return ERR_INVALID_VALUE;
    memset((void *)(uintptr_t)dst, v, n);
    return OK;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char **name)
{
    count(C_cuGetErrorName);
    switch (r) {
    case OK: *name = "CUDA_SUCCESS"; return OK;
    case ERR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; return OK;
    case ERR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
    case ERR_INVALID_IMAGE: *name = "CUDA_ERROR_INVALID_IMAGE"; return OK;
    case ERR_INVALID_HANDLE: *name = "CUDA_ERROR_INVALID_HANDLE"; return OK;
    case ERR_NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; return OK;
    case ERR_LAUNCH_OUT_OF_RESOURCES: *name = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"; return OK;
    default: *name = NULL; return ERR_INVALID_VALUE;
    }
}

/* An H100's limit: 227 KiB of dynamic shared memory a block once raised. */
EXPORT CUresult cuFuncSetAttribute(void *f, int attr, int value)
{
    count(C_cuFuncSetAttribute);
    pthread_mutex_lock(&lock);
    uintptr_t k = (uintptr_t)f;
    CUresult rc = OK;
    if (k == 0 || k > (uintptr_t)nfns) rc = ERR_INVALID_HANDLE;
    else if (attr != 8 || value < 0 || value > 227 * 1024) rc = ERR_INVALID_VALUE;
    else fns[k - 1].max_dyn_smem = value;
    pthread_mutex_unlock(&lock);
    return rc;
}

/* A kernel's static shared memory: 1 KiB for every function (attribute 1 only). */
EXPORT CUresult cuFuncGetAttribute(int *v, int attr, void *f)
{
    count(C_cuFuncGetAttribute);
    pthread_mutex_lock(&lock);
    uintptr_t k = (uintptr_t)f;
    CUresult rc = OK;
    if (!v || k == 0 || k > (uintptr_t)nfns) rc = ERR_INVALID_HANDLE;
    else if (attr != 1) rc = ERR_INVALID_VALUE;
    else *v = 1024;
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *f, int block_size, size_t shmem)
{
    count(C_cuOccupancyMaxActiveBlocksPerMultiprocessor);
    if (!f || block_size <= 0 || block_size > 1024 || shmem > 227 * 1024) return ERR_INVALID_VALUE;
    *n = 2048 / block_size;
    return OK;
}

EXPORT CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p)
{
    count(C_cuPointerGetAttribute);
    if (attr != 2 && attr != 8) return ERR_INVALID_VALUE;   /* memory type, is-managed */
    pthread_mutex_lock(&lock);
    int dev = find_block((const void *)(uintptr_t)p, 0, 0) >= 0;
    int pinned = !dev && find_block((const void *)(uintptr_t)p, 0, 1) >= 0;
    pthread_mutex_unlock(&lock);
    if (!dev && !pinned) return ERR_INVALID_VALUE;   /* memory the driver does not know */
    if (attr == 8) *(int *)data = 0;   /* nothing here is managed */
    else *(unsigned *)data = dev ? 2u : 1u;   /* CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST */
    return OK;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *s)
{
    (void)s;
    count(C_cuMemcpyHtoDAsync);
    if (device_range(dst, n)) return ERR_INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *s)
{
    (void)s;
    count(C_cuMemcpyDtoHAsync);
    if (device_range(src, n)) return ERR_INVALID_VALUE;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return OK;
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    count(C_cuMemcpyDtoD);
    if (device_range(dst, n) || device_range(src, n)) return ERR_INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return OK;
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, void *s)
{
    (void)s;
    count(C_cuMemsetD8Async);
    if (device_range(dst, n)) return ERR_INVALID_VALUE;
    memset((void *)(uintptr_t)dst, v, n);
    return OK;
}

EXPORT CUresult cuStreamCreate(void **s, unsigned flags)
{
    (void)flags;
    count(C_cuStreamCreate);
    *s = &stream_token;
    return OK;
}

EXPORT CUresult cuStreamSynchronize(void *s)
{
    (void)s;
    count(C_cuStreamSynchronize);
    __atomic_store_n(&busy_queries, 0, __ATOMIC_RELAXED);
    return OK;
}

EXPORT CUresult cuStreamQuery(void *s)
{
    (void)s;
    count(C_cuStreamQuery);
    /* everything is done (launches do nothing), unless told to look busy */
    return __atomic_fetch_sub(&busy_queries, 1, __ATOMIC_RELAXED) > 0 ? 600 /* CUDA_ERROR_NOT_READY */ : OK;
}

/* The next n cuStreamQuery calls say the stream is still working, as for a
 * long kernel; cuStreamSynchronize clears it. */
EXPORT void fakecuda_busy(int n)
{
    __atomic_store_n(&busy_queries, n, __ATOMIC_RELAXED);
}

EXPORT CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
    (void)flags;
    count(C_cuMemHostAlloc);
    return alloc_block(p, n, 1);
}

EXPORT CUresult cuMemFreeHost(void *p)
{
    count(C_cuMemFreeHost);
    int rc = drop_block(p, 1);
    return rc;
}

/* A host range page-locked for the driver: recorded, never freed here.  A
 * range that overlaps one registered already is refused, as the driver
 * does (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED); unregistering what is
 * not registered too (..._NOT_REGISTERED). */
EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags)
{
    (void)flags;
    count(C_cuMemHostRegister);
    if (!p || n == 0) return ERR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    int rc = OK;
    for (int i = 0; i < nblocks && !rc; i++)
        if (blocks[i].kind == 5 && (uintptr_t)p < (uintptr_t)blocks[i].p + blocks[i].size &&
            (uintptr_t)blocks[i].p < (uintptr_t)p + n)
            rc = 712;
    if (!rc) rc = add_block(p, n, 5);
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
    count(C_cuMemHostUnregister);
    int rc = drop_block(p, 5);
    return rc ? 713 : OK;
}

EXPORT CUresult cuEventCreate(void **ev, unsigned flags)
{
    (void)flags;
    count(C_cuEventCreate);
    return alloc_block(ev, 16, 3);
}

EXPORT CUresult cuEventRecord(void *ev, void *s)
{
    (void)s;
    count(C_cuEventRecord);
    pthread_mutex_lock(&lock);
    int i = find_block(ev, 0, 3);
    pthread_mutex_unlock(&lock);
    return i >= 0 ? OK : ERR_INVALID_HANDLE;
}

EXPORT CUresult cuEventSynchronize(void *ev)
{
    (void)ev;
    count(C_cuEventSynchronize);
    return OK;
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, void *a, void *b)
{
    count(C_cuEventElapsedTime);
    if (!a || !b) return ERR_INVALID_HANDLE;
    *ms = 0.001f;
    return OK;
}

EXPORT CUresult cuEventDestroy_v2(void *ev)
{
    count(C_cuEventDestroy);
    int rc = drop_block(ev, 3);
    return rc ? ERR_INVALID_HANDLE : OK;
}

/* NVRTC opens libcuda.so.1 itself and asks for the driver's private tables;
 * the stand-in has none, and NVRTC carries on without them (as it does with
 * no driver at all).  Not counted: redjit never calls it. */
EXPORT CUresult cuGetExportTable(const void **table, const void *id)
{
    (void)id;
    if (table) *table = NULL;
    return 801;   /* CUDA_ERROR_NOT_SUPPORTED */
}

/* ---- for tests -------------------------------------------------------------------- */

/* Calls of driver function `name` (as in the API: "cuLaunchKernel",
 * "cuMemAlloc") since the start or the last fakecuda_reset; -1 if unknown. */
EXPORT long long fakecuda_count(const char *name)
{
    for (int i = 0; i < NCALLS; i++)
        if (strcmp(call_names[i], name) == 0) return __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
    return -1;
}

/* The sum over all driver functions. */
EXPORT long long fakecuda_total(void)
{
    long long t = 0;
    for (int i = 0; i < NCALLS; i++) t += __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
    return t;
}

EXPORT void fakecuda_reset(void)
{
    for (int i = 0; i < NCALLS; i++) __atomic_store_n(&counts[i], 0, __ATOMIC_RELAXED);
}

/* The name of function i (0 ..), or NULL past the last: for printing. */
EXPORT const char *fakecuda_name(int i)
{
    return i >= 0 && i < NCALLS ? call_names[i] : NULL;
}

/* What is held now: kind 0 device allocations, 1 pinned host blocks,
 * 2 loaded modules, 3 events, 4 primary-context references, 5 registered
 * host ranges. */
EXPORT long long fakecuda_live(int kind)
{
    if (kind == 4) return __atomic_load_n(&ctx_refs, __ATOMIC_RELAXED);
    pthread_mutex_lock(&lock);
    long long n = 0;
    for (int i = 0; i < nblocks; i++) n += blocks[i].kind == kind;
    pthread_mutex_unlock(&lock);
    return n;
}

/* With FAKECUDA_REPORT=FILE in the environment, what is still held when the
 * process exits is written to FILE as one line, "device D pinned P modules M
 * events E contexts C launches L" (D..C counts of kind 0..4 as in
 * fakecuda_live): a test of a whole program (the REPL) reads it.  The
 * library is never unloaded (redjit keeps its handle), so this runs after
 * main has returned and red_close has given everything back. */
__attribute__((destructor)) static void report_at_exit(void)
{
    const char *path = getenv("FAKECUDA_REPORT");
    if (!path || !*path) return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "device %lld pinned %lld modules %lld events %lld contexts %lld registered %lld launches %lld\n",
            fakecuda_live(0), fakecuda_live(1), fakecuda_live(2), fakecuda_live(3), fakecuda_live(4), fakecuda_live(5),
            counts[C_cuLaunchKernel]);
    fclose(f);
}

/* Make the next launch report a device fault as a kernel would: the record
 * (code, IR node, dimension, value; see rj_fault in rj_prelude.cuh) is
 * written to the launch's fault-record pointer unless one is there. */
EXPORT void fakecuda_fault_next_launch(unsigned long long code, unsigned long long node, unsigned long long dim,
                                       long long value)
{
    pthread_mutex_lock(&lock);
    fault_record[0] = code;
    fault_record[1] = node;
    fault_record[2] = dim;
    fault_record[3] = (unsigned long long)value;
    fault_armed = 1;
    pthread_mutex_unlock(&lock);
}

/* The next n launches that should publish their workspace do not (as a
 * kernel that fails to would); returns how many have published so far. */
EXPORT long long fakecuda_drop_publish(int n)
{
    pthread_mutex_lock(&lock);
    drop_publish = n;
    long long k = published;
    pthread_mutex_unlock(&lock);
    return k;
}

/* Make the next launch write `n` bytes (at most 64) at `offset` from its
 * fault record's address, as a kernel writes a result that lies in the run's
 * workspace: what comes back to the host can then be checked. */
EXPORT void fakecuda_store_next_launch(size_t offset, const void *bytes, size_t n)
{
    pthread_mutex_lock(&lock);
    if (n <= sizeof store_bytes) {
        memcpy(store_bytes, bytes, n);
        store_off = offset;
        store_n = n;
        store_armed = 1;
    }
    pthread_mutex_unlock(&lock);
}

/* The last kernel launched: its name, grid and block size. */
/* The kernels launched since the last call with clear set (names, each
 * followed by a space), copied into out (n bytes). */
EXPORT void fakecuda_launch_log(char *out, size_t n, int clear)
{
    pthread_mutex_lock(&lock);
    if (out && n) snprintf(out, n, "%s", launch_log);
    if (clear) launch_log[0] = 0;
    pthread_mutex_unlock(&lock);
}

/* The last launch's dynamic shared memory, and its parameter block's reserved
 * slot `slot` (0 outside them). */
EXPORT unsigned fakecuda_last_smem(void)
{
    pthread_mutex_lock(&lock);
    unsigned s = last_smem;
    pthread_mutex_unlock(&lock);
    return s;
}

EXPORT long long fakecuda_last_param(int slot)
{
    pthread_mutex_lock(&lock);
    long long v = slot >= 0 && slot < (int)(sizeof last_params / sizeof last_params[0]) ? last_params[slot] : 0;
    pthread_mutex_unlock(&lock);
    return v;
}

EXPORT const char *fakecuda_last_launch(unsigned *grid, unsigned *blk)
{
    pthread_mutex_lock(&lock);
    if (grid) *grid = last_grid;
    if (blk) *blk = last_block;
    pthread_mutex_unlock(&lock);
    return last_launch;
}
