/*
 * gpu.c -- the GPU backend (see gpu.h).  The driver API (cu_api.h) and NVRTC
 * are declared by hand and resolved with dlsym, so building redjit needs no
 * CUDA headers and running it needs no CUDA install unless a GPU is used.
 * Every driver call is checked; a failure becomes RED_ERR_DEVICE carrying
 * the driver's name for the error.
 */
#include "gpu.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/cuda.h"
#include "cu_api.h"
#include "kcache.h"

/* ---- NVRTC, declared by hand ----------------------------------------------------- */
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
typedef struct nvrtc_api {
    nvrtcResult (*Version)(int *, int *);
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                                 const char *const *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    const char *(*GetErrorString)(nvrtcResult);
    int major, minor;
} nvrtc_api;

static nvrtc_api nvrtc;
static int nvrtc_ok;
static char nvrtc_err[256];
static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;

/* NVRTC's options after the architecture, set once NVRTC's version is known,
 * and the same joined into one string, which the disk cache's key includes
 * (load_module): a change of options is a new key.  -minimal (NVRTC 12.4 on)
 * leaves out the texture, device-runtime and device-launch declarations, which
 * no kernel uses: the front end's time falls by a third (13 ms of 41 for
 * sum(x) on the CI machine, bench/jit_compile) and the CUBIN is the same.
 * --no-cache (NVRTC 12.9 on) turns off NVRTC's own compile cache: on the
 * H200 machine a kernel compiled earlier by another process came back in 15
 * to 28 ms instead of 100 to 330, unseen by red_cache_stats, so the JIT
 * benchmark's "new expression" rows measured that cache, not a compile.
 * redjit keeps its own cache, in memory and on disk, bounded and keyed by
 * NVRTC's version and these options. */
static const char *nvrtc_opts[9];
static int nvrtc_nopts;
static char nvrtc_optstr[400];

/* REDJIT_NVRTC_OPTS: up to 4 more NVRTC options, separated by spaces, for
 * measuring what an option does to compile time and kernel speed together
 * (bench/sweep.sh, e.g. "--Ofast-compile=min").  They are part of the cache
 * key like the others, so kernels compiled without them are not reused. */
static char nvrtc_extra[256];

static void nvrtc_extra_opts(void)
{
    const char *e = getenv("REDJIT_NVRTC_OPTS");
    if (!e) return;
    snprintf(nvrtc_extra, sizeof nvrtc_extra, "%s", e);
    int cap = (int)(sizeof nvrtc_opts / sizeof nvrtc_opts[0]);
    for (char *t = nvrtc_extra; *t && nvrtc_nopts < cap;) {   /* not strtok: the caller's may be running */
        while (*t == ' ') *t++ = 0;
        if (!*t) break;
        nvrtc_opts[nvrtc_nopts++] = t;
        while (*t && *t != ' ') t++;
    }
}

static void nvrtc_load(void)
{
    static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                        "/usr/local/cuda/lib64/libnvrtc.so", NULL};
    void *h = NULL;
    for (int i = 0; names[i] && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(nvrtc_err, sizeof nvrtc_err, "NVRTC (libnvrtc.so) was not found: install the CUDA toolkit");
        return;
    }
#define NV(f) *(void **)&nvrtc.f = cu_api_sym(h, "nvrtc" #f, NULL)
    NV(Version); NV(CreateProgram); NV(CompileProgram); NV(GetCUBINSize); NV(GetCUBIN);
    NV(GetProgramLogSize); NV(GetProgramLog); NV(DestroyProgram); NV(GetErrorString);
#undef NV
    if (!nvrtc.Version || !nvrtc.CreateProgram || !nvrtc.CompileProgram || !nvrtc.GetCUBINSize ||
        !nvrtc.GetCUBIN || !nvrtc.GetProgramLogSize || !nvrtc.GetProgramLog || !nvrtc.DestroyProgram ||
        !nvrtc.GetErrorString) {
        snprintf(nvrtc_err, sizeof nvrtc_err, "NVRTC lacks a needed function (too old?)");
        return;
    }
    nvrtc.Version(&nvrtc.major, &nvrtc.minor);
    nvrtc_opts[nvrtc_nopts++] = "--std=c++17";
    nvrtc_opts[nvrtc_nopts++] = "-DNDEBUG";
    if (nvrtc.major > 12 || (nvrtc.major == 12 && nvrtc.minor >= 4)) nvrtc_opts[nvrtc_nopts++] = "-minimal";
    if (nvrtc.major > 12 || (nvrtc.major == 12 && nvrtc.minor >= 9)) nvrtc_opts[nvrtc_nopts++] = "--no-cache";
    nvrtc_extra_opts();
    for (int i = 0; i < nvrtc_nopts; i++)
        snprintf(nvrtc_optstr + strlen(nvrtc_optstr), sizeof nvrtc_optstr - strlen(nvrtc_optstr), "%s%s",
                 i ? " " : "", nvrtc_opts[i]);
    nvrtc_ok = 1;
}

/* libnvrtc is a 100 MB library: its dlopen alone took 6.6 to 9.8 ms on the
 * CI machine, which is most of a new process's time to its first result when
 * the kernel is in the disk cache (whose key names NVRTC's version).  So
 * gpu_open loads it on a thread of its own while the driver creates the
 * context (112 to 122 ms on the H200), once per process. */
static int nvrtc_preload_started;

static void *nvrtc_preload(void *arg)
{
    (void)arg;
    pthread_once(&nvrtc_once, nvrtc_load);
    return NULL;
}

/* ---- fault injection (gpu.h) ------------------------------------------------------ */

static int fault_countdown[GPU_NFAULTS];

void gpu_inject_fault(int kind, int nth)
{
    if (kind >= 0 && kind < GPU_NFAULTS) __atomic_store_n(&fault_countdown[kind], nth, __ATOMIC_RELAXED);
}

/* 1 when this call of `kind` is the one to fail. */
static int fault_now(int kind)
{
    int c = __atomic_load_n(&fault_countdown[kind], __ATOMIC_RELAXED);
    while (c > 0)
        if (__atomic_compare_exchange_n(&fault_countdown[kind], &c, c - 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return c == 1;
    return 0;
}

/* Compile `src` for `arch` to a CUBIN (malloc'd). */
static int nvrtc_compile(const char *src, const char *arch, void **cubin, size_t *size, double *ms,
                         util_diag *diag)
{
    pthread_once(&nvrtc_once, nvrtc_load);
    if (!nvrtc_ok) return util_diag_set(diag, RED_ERR_DEVICE, "%s", nvrtc_err);
    if (fault_now(GPU_FAULT_NVRTC))
        return util_diag_set(diag, RED_ERR_COMPILE, "NVRTC rejected the generated kernel (injected fault)");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    nvrtcProgram prog;
    if (nvrtc.CreateProgram(&prog, src, "redjit.cu", 0, NULL, NULL))
        return util_diag_set(diag, RED_ERR_NOMEM, "NVRTC could not create a program");
    char archopt[64];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
    const char *opts[1 + sizeof nvrtc_opts / sizeof nvrtc_opts[0]] = {archopt};
    for (int i = 0; i < nvrtc_nopts; i++) opts[1 + i] = nvrtc_opts[i];
    nvrtcResult r = nvrtc.CompileProgram(prog, 1 + nvrtc_nopts, opts);
    int rc = 0;
    if (r) {
        size_t ln = 0;
        nvrtc.GetProgramLogSize(prog, &ln);
        char *log = malloc(ln + 1);
        if (log) {
            nvrtc.GetProgramLog(prog, log);
            log[ln] = 0;
        }
        rc = util_diag_set(diag, RED_ERR_COMPILE, "NVRTC rejected the generated kernel (%s): %.1500s",
                           nvrtc.GetErrorString(r), log ? log : "");
        free(log);
    } else {
        size_t n = 0;
        nvrtc.GetCUBINSize(prog, &n);
        *cubin = malloc(n ? n : 1);
        if (!*cubin) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
        else {
            nvrtc.GetCUBIN(prog, *cubin);
            *size = n;
        }
    }
    nvrtc.DestroyProgram(&prog);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    return rc;
}

/* REDJIT_DUMP_CUBIN=DIR keeps each compiled kernel's source and cubin as DIR/NAME.cu and
 * DIR/NAME.cubin (NAME: passN from red_precompile, the cache key from a run), for cuobjdump
 * -sass when studying the code a strategy makes, and for timing NVRTC on the very source a
 * run compiles.  Best effort: a file that cannot be written is skipped. */
static void dump_kernel(const char *name, const char *src, const void *cubin, size_t n)
{
    const char *dir = getenv("REDJIT_DUMP_CUBIN");
    for (int w = 0; dir && w < 2; w++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.%s", dir, name, w ? "cu" : "cubin");
        FILE *f = fopen(path, "wb");
        if (f) {
            if (w) fputs(src, f);
            else fwrite(cubin, 1, n, f);
            fclose(f);
        }
    }
}

int gpu_compile_only(const plan *p, const char *arch, util_diag *diag)
{
    util_arena a;
    util_arena_init(&a);
    int rc = 0;
    for (int pi = 0; pi < p->npasses && !rc; pi++) {
        cg_kernel k;
        rc = cg_generate(p, pi, &a, &k, diag);
        cg_add_group(&k.src, CG_ALL_GROUPS, &k);
        if (!rc && k.src.failed) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
        if (!rc) {
            void *cubin = NULL;
            size_t n = 0;
            double ms;
            rc = nvrtc_compile(util_buf_str(&k.src), arch, &cubin, &n, &ms, diag);
            if (!rc) {
                char name[32];
                snprintf(name, sizeof name, "pass%d", pi);
                dump_kernel(name, util_buf_str(&k.src), cubin, n);
            }
            free(cubin);
        }
        util_buf_free(&k.src);
    }
    util_arena_free(&a);
    return rc;
}

int gpu_explain(const plan *p, int strategy, util_buf *out, util_diag *diag)
{
    util_arena a;
    util_arena_init(&a);
    int rc = 0;
    for (int pi = 0; pi < p->npasses && !rc; pi++) {
        cg_kernel k;
        rc = cg_generate(p, pi, &a, &k, diag);
        cg_add_group(&k.src, CG_ALL_GROUPS, &k);
        if (!rc && k.src.failed) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
        if (!rc) {
            static const char *const kinds[] = {"map", "full reduction", "partial reduction", "keyed reduction"};
            util_buf_printf(out, "---- pass %d: %s kernel, %d parameters, accumulator %d bytes ----\n", pi,
                            kinds[k.kind], k.lay.nparams, k.acc_size);
            /* the generated part only: the helpers are in src/codegen/device */
            const char *s = util_buf_str(&k.src);
            const char *helpers[2] = {rj_prelude_cuh, rj_reduce_cuh};
            const char *names[2] = {"rj_prelude.cuh", "rj_reduce.cuh"};
            while (*s) {
                const char *next = NULL;
                int which = -1;
                for (int h = 0; h < 2; h++) {
                    const char *f = strstr(s, helpers[h]);
                    if (f && (!next || f < next)) {
                        next = f;
                        which = h;
                    }
                }
                if (!next) {
                    util_buf_puts(out, s);
                    break;
                }
                util_buf_putn(out, s, (size_t)(next - s));
                util_buf_printf(out, "// ... %s ...\n", names[which]);
                s = next + strlen(helpers[which]);
            }
        }
        util_buf_free(&k.src);
    }
    (void)strategy;
    util_arena_free(&a);
    return rc;
}

/* ---- the device ------------------------------------------------------------------- */

typedef struct module_entry {
    uint64_t key;
    CUmodule mod;
    struct module_entry *next;
} module_entry;

typedef struct pass_entry {        /* generated and loaded kernels of one plan pass */
    uint64_t uid;                  /* the plan's */
    struct {
        const char *name;
        CUfunction f;
        int occupancy;             /* blocks per SM, 0 until asked */
    } fn[24];
    int nfn;
    int pi;
    CUmodule mods[CG_NGROUPS];     /* the body with one group of entry kernels, each
                                      loaded the first time a run needs it */
    cg_kernel k;                   /* the body */
    util_arena arena;
    uint64_t count_key;            /* the last ranged count under auto: a hash of the */
    long long count_total;         /* kernel's parameters, and the total it gave (0 key: none) */
    uint64_t nkeys_key;            /* the last fused keyed pass: the same hash, the key */
    long long nkeys;               /* count rj_kfused confirmed, and whether guessing it */
    int nkeys_nospec;              /* failed once */
    uint64_t unsorted_key;         /* the same hash when the keys were last found unsorted */
    struct pass_entry *next;
} pass_entry;

typedef struct pool_buf {
    CUdeviceptr ptr;
    size_t size;
    int live;
    int clean;          /* an idle run workspace whose fault record and counter are zero */
} pool_buf;

struct gpu_dev {
    cu_api cu;
    CUdevice dev;
    CUcontext ctx;
    int sm_major, sm_minor, nsm;
    char arch[16];
    pthread_mutex_t lock;
    module_entry *mods;
    pass_entry *passes;
    pool_buf *pool;
    int npool, cappool;
    void *(*events)[4];            /* idle sets of a run's four timing events */
    int nevents, capevents;
    gpu_stats stats;
    /* pinned host staging for the fault record and small results: they come
     * back with one asynchronous copy each and a single stream sync */
    unsigned char *pinned;
    size_t pinned_size;
    /* Past pinned_size, a run's last kernel writes its workspace and then
     * its sequence number (rj_publish), which the host waits for instead of
     * copying and synchronising.  NULL without unified addressing (`uva`:
     * pinned memory then has the same address on the device). */
    unsigned char *pub;
    int uva;
    unsigned long long pub_seq;
    /* Persistent full reductions: grids of this many occupancy waves
     * (REDJIT_WAVES, for bench/sweep.sh); 0: three where each block of
     * three waves has 16384 elements or more, else one, and one for argmin
     * and argmax (run_full).  Three
     * waves balance the SMs, whose blocks do not all finish together, but
     * each block pays a block tree and the ticket's round trip, which small
     * blocks do not make up for.  H200, 2026-11-26, 16-byte loads, the
     * last block folding the partials four at a time, three rounds in one
     * call, us at one / three waves (five, eight): sum f32 at 2^24
     * 25.1-25.7 / 26.8-27.2 (29.4-30.3, 33.6-34.0), 2^26 70.1-70.8 /
     * 70.2-70.3, 2^28 247.4-247.6 / 245.8-246.4 (248.5-249.1, 250.4-250.6;
     * CUB 245.7-247.3), 2^30 953.7-954.9 / 949.3-949.9 (CUB 949.1-951.7);
     * 2^28 sum f64 482.7-483.5 / 481.3-481.8, max 247.1-248.1 /
     * 246.7-247.5, a dot product 481.1-484.4 / 479.8-481.8, argmax
     * 258.8-261.5 / 260.8-261.3 (five: 267.4-267.8).  In a second call,
     * on another H200: sum f32 at 2^27 129.5-130.1 / 128.4-129.5, 2^28
     * 247.0-247.2 / 245.6-247.6, 2^30 953.6-954.4 / 949.2-951.7, argmax
     * 258.2-258.9 / 261.2-261.7.  Scalar loads
     * (2026-11-23, us at 1 / 2 / 3 / 5 waves): sum f32 of 2^24 26.2 / 26.1
     * / 29.5 / 32.1, of 2^28 249.4 / 247.1 / 245.9 / 247.6. */
    int waves;
    /* The host ranges host_pin page-locked (results' buffers, kept by their
     * expressions): a copy from one of them to the device is asynchronous,
     * so a run that uploads one is not left queued (upload).  g->lock. */
    struct {
        const void *p;
        size_t n;
    } *locked;
    int nlocked, caplocked;
    pthread_t preload;             /* nvrtc_preload, joined by gpu_close */
    int preloading;
};

#define PINNED_SIZE (64 * 1024)
/* rj_publish's area: the sequence number's word at 56, the workspace's
 * image from 64 */
#define PUB_SEQ 56
#define PUB_IMAGE 64

static int cu_fail(gpu_dev *g, CUresult r, const char *what, util_diag *diag)
{
    const char *name = NULL;
    if (g && g->cu.GetErrorName) g->cu.GetErrorName(r, &name);
    int code = r == CUDA_ERROR_OUT_OF_MEMORY ? RED_ERR_NOMEM : RED_ERR_DEVICE;
    return util_diag_set(diag, code, "CUDA driver call %s failed: %s (%d)", what, name ? name : "unknown error", r);
}

#define CU(call, what)                                         \
    do {                                                       \
        CUresult r_ = (call);                                  \
        if (r_) return cu_fail(g, r_, what, diag);             \
    } while (0)

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
        rc = r ? cu_fail(g, r, "cuInit", diag) : util_diag_set(diag, RED_ERR_DEVICE, "no GPU: the CUDA driver sees no device");
        free(g);
        return rc ? rc : RED_ERR_DEVICE;
    }
    if (!__atomic_exchange_n(&nvrtc_preload_started, 1, __ATOMIC_ACQ_REL))
        g->preloading = pthread_create(&g->preload, NULL, nvrtc_preload, NULL) == 0;
    if ((r = c->DeviceGet(&g->dev, 0)) || (r = c->DevicePrimaryCtxRetain(&g->ctx, g->dev)) ||
        (r = c->CtxSetCurrent(g->ctx)) ||
        (r = c->DeviceGetAttribute(&g->nsm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g->dev)) ||
        (r = c->DeviceGetAttribute(&g->sm_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g->dev)) ||
        (r = c->DeviceGetAttribute(&g->sm_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g->dev))) {
        rc = cu_fail(g, r, "device setup", diag);
        if (g->preloading) pthread_join(g->preload, NULL);
        free(g);
        return rc;
    }
    /* every 64-bit Linux system with a GPU redjit supports has it; a
     * driver (or the stand-in) that does not say so gets the copy instead */
    if (c->DeviceGetAttribute(&g->uva, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, g->dev)) g->uva = 0;
    snprintf(g->arch, sizeof g->arch, "sm_%d%d", g->sm_major, g->sm_minor);
    const char *w = getenv("REDJIT_WAVES");   /* for bench/sweep.sh */
    g->waves = w && atoi(w) >= 1 && atoi(w) <= 16 ? atoi(w) : 0;
    pthread_mutex_init(&g->lock, NULL);
    *out = g;
    return 0;
}

void gpu_close(gpu_dev *g)
{
    if (!g) return;
    g->cu.CtxSetCurrent(g->ctx);
    for (module_entry *m = g->mods; m;) {
        module_entry *n = m->next;
        g->cu.ModuleUnload(m->mod);
        free(m);
        m = n;
    }
    for (pass_entry *e = g->passes; e;) {
        pass_entry *n = e->next;
        util_buf_free(&e->k.src);
        util_arena_free(&e->arena);
        free(e);
        e = n;
    }
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

static int pool_get(gpu_dev *g, size_t size, CUdeviceptr *out, util_diag *diag)
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
    int injected = fault_now(GPU_FAULT_ALLOC);
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
    if (r) return cu_fail(g, r, "cuMemAlloc", diag);
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

static void pool_put(gpu_dev *g, CUdeviceptr p)
{
    for (int i = 0; i < g->npool; i++)
        if (g->pool[i].ptr == p) g->pool[i].live = 0;
}

/* A run's workspace (fault record at 0, persistent-grid counter at 32, key
 * statistics at 64), which must start with the first 40 bytes and the key
 * flag word at 80 zero.  A run that ends without a fault and with that word
 * zero leaves them so (the persistent kernel resets its counter), and gives
 * the buffer back marked clean; taking a clean one saves
 * a memset, a GPU operation of its own on every call.  From WS_HEAD on it
 * holds the run's small results bound for the host: written there by the
 * kernels, they come back in the same copy as the fault record (one copy a
 * run, not one per result and one for the record; each costs about 1.5 us
 * of host time on an H200).  Nothing reads that part before it is written. */
#define WS_HEAD GPU_WS_HEAD
#define WS_BYTES 4096
static int ws_get(gpu_dev *g, CUstream s, CUdeviceptr *out, util_diag *diag)
{
    for (int i = 0; i < g->npool; i++)
        if (!g->pool[i].live && g->pool[i].clean) {
            g->pool[i].live = 1;
            g->pool[i].clean = 0;
            *out = g->pool[i].ptr;
            return 0;
        }
    int rc = pool_get(g, WS_BYTES, out, diag);
    if (!rc && g->cu.MemsetD8Async(*out, 0, WS_HEAD, s)) {
        pool_put(g, *out);
        rc = util_diag_set(diag, RED_ERR_DEVICE, "cuMemsetD8Async failed");
    }
    return rc;
}

static void ws_put_clean(gpu_dev *g, CUdeviceptr p)
{
    for (int i = 0; i < g->npool; i++)
        if (g->pool[i].ptr == p) {
            g->pool[i].live = 0;
            g->pool[i].clean = 1;
        }
}

/* ---- kernels: generated per pass, compiled once, cached ------------------------------ */

static int load_module(gpu_dev *g, const char *src, CUmodule *out, util_diag *diag)
{
    /* the key names NVRTC's version: load it first, even when the CUBIN
     * will come from the disk cache */
    pthread_once(&nvrtc_once, nvrtc_load);
    if (!nvrtc_ok) return util_diag_set(diag, RED_ERR_DEVICE, "%s", nvrtc_err);
    char keysrc[512];
    snprintf(keysrc, sizeof keysrc, "%s|nvrtc %d.%d|redjit %s|opts %s", g->arch, nvrtc.major, nvrtc.minor,
             REDJIT_VERSION_STRING, nvrtc_optstr);
    uint64_t key = kc_hash(src, strlen(src), kc_hash(keysrc, strlen(keysrc), 0));
    for (module_entry *m = g->mods; m; m = m->next)
        if (m->key == key) {
            g->stats.mem_hits++;
            *out = m->mod;
            return 0;
        }
    char hex[40];
    snprintf(hex, sizeof hex, "%016llx%08llx", (unsigned long long)key,
             (unsigned long long)(kc_hash(src, strlen(src), 0x5eed) & 0xffffffffu));
    void *cubin = NULL;
    size_t n = 0;
    int from_disk = kc_load(hex, &cubin, &n) == 0;
    if (!from_disk) {
        double ms = 0;
        int rc = nvrtc_compile(src, g->arch, &cubin, &n, &ms, diag);
        if (rc) return rc;
        g->stats.compiles++;
        g->stats.compile_ms += ms;
        kc_store(hex, cubin, n);
        dump_kernel(hex, src, cubin, n);
    } else {
        g->stats.disk_hits++;
    }
    CUmodule mod;
    CUresult r = fault_now(GPU_FAULT_MODULE_LOAD) ? CUDA_ERROR_INVALID_IMAGE : g->cu.ModuleLoadData(&mod, cubin);
    free(cubin);
    if (r) return cu_fail(g, r, "cuModuleLoadData", diag);
    module_entry *m = calloc(1, sizeof *m);
    if (!m) {
        g->cu.ModuleUnload(mod);
        return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    }
    m->key = key;
    m->mod = mod;
    m->next = g->mods;
    g->mods = m;
    *out = mod;
    return 0;
}

static int pass_kernels(gpu_dev *g, const plan *p, int pi, pass_entry **out, util_diag *diag)
{
    int count = 0;
    for (pass_entry *e = g->passes, *prev = NULL; e; prev = e, e = e->next) {
        if (e->uid == p->uid && e->pi == pi) {
            if (prev) {   /* most recently used first */
                prev->next = e->next;
                e->next = g->passes;
                g->passes = e;
            }
            *out = e;
            return 0;
        }
        if (++count >= 512 && e->next) {
            /* drop the least recently used entries (their modules stay
             * loaded in the module cache) */
            pass_entry *d = e->next;
            e->next = NULL;
            while (d) {
                pass_entry *n = d->next;
                util_buf_free(&d->k.src);
                util_arena_free(&d->arena);
                free(d);
                d = n;
            }
            break;
        }
    }
    pass_entry *e = calloc(1, sizeof *e);
    if (!e) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    util_arena_init(&e->arena);
    int rc = cg_generate(p, pi, &e->arena, &e->k, diag);
    if (rc) {
        util_buf_free(&e->k.src);
        util_arena_free(&e->arena);
        free(e);
        return rc;
    }
    e->uid = p->uid;
    e->pi = pi;
    e->next = g->passes;
    g->passes = e;
    *out = e;
    return 0;
}

/* ---- launching ------------------------------------------------------------------- */

#define BLOCK 256

typedef struct run_ctx {
    gpu_dev *g;
    const plan *p;
    long long *params;
    int nparams;
    util_diag *diag;
    CUstream s;
    CUdeviceptr ws;     /* err[4] at 0, counter at 32, key stats at 64 */
    gpu_run *run;
    const core_buf *bufs; /* the bound arrays (shapes and strides)        */
    long long pub_words; /* > 0: the next kernel that ends the run publishes
                            this many words of the workspace (rj_publish)   */
    unsigned long long pub_seq; /* nonzero: it was launched, with this number */
    int locked_input;   /* an upload from page-locked memory: not queued */
} run_ctx;

/* Give `p` back to the pool when the run is over (its kernels may still be
 * queued on the caller's stream). */
static int defer_release(run_ctx *r, CUdeviceptr p)
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
            pool_put(r->g, p);
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
 * same stream left to it (gpu_rechain), taken as pool_get would take it from
 * the pool, else from the pool.  `release`: given back at the run's end
 * (partials, uploads), else handed to the caller (results). */
static int run_get(run_ctx *r, size_t size, CUdeviceptr *out, int release)
{
    gpu_run *run = r->run;
    gpu_dev *g = r->g;
    size_t want = ((size ? size : 1) + 255) & ~(size_t)255;
    for (int i = 0; i < run->nreuse; i++)
        for (int k = 0; k < g->npool; k++)
            if (g->pool[k].ptr == run->reuse[i] && g->pool[k].size >= want && g->pool[k].size <= 2 * want + (1 << 20)) {
                *out = run->reuse[i];
                run->reuse[i] = run->reuse[--run->nreuse];
                return release ? defer_release(r, *out) : 0;
            }
    int rc = pool_get(g, size, out, r->diag);
    if (!rc && release) defer_release(r, *out);
    return rc;
}

/* The entry `name` of a pass's module, looked up once. */
static int get_fn(run_ctx *r, pass_entry *e, const char *name, int *slot)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    for (int i = 0; i < e->nfn; i++)
        if (strcmp(e->fn[i].name, name) == 0) {
            *slot = i;
            return 0;
        }
    if (e->nfn == (int)(sizeof e->fn / sizeof e->fn[0]))
        return util_diag_set(diag, RED_ERR_INTERNAL, "too many kernels in one pass");
    /* a group already loaded that defines it (rj_final after rj_seq), else its own */
    int grp = -1;
    for (int q = 0; q < CG_NGROUPS && grp < 0; q++)
        if (e->mods[q] && cg_group_has(q, name)) grp = q;
    if (grp < 0) grp = cg_group_of(name);
    if (!cg_group_usable(grp, &e->k))
        return util_diag_set(diag, RED_ERR_INTERNAL, "no kernel %s in this pass", name);
    if (!e->mods[grp]) {
        /* the body and this group's entry kernels */
        util_buf src;
        util_buf_init(&src);
        util_buf_puts(&src, util_buf_str(&e->k.src));
        cg_add_group(&src, grp, &e->k);
        int rc = src.failed ? util_diag_set(diag, RED_ERR_NOMEM, "out of memory")
                            : load_module(g, util_buf_str(&src), &e->mods[grp], diag);
        util_buf_free(&src);
        if (rc) return rc;
    }
    CUfunction f;
    CU(g->cu.ModuleGetFunction(&f, e->mods[grp], name), "cuModuleGetFunction");
    e->fn[e->nfn].name = name;
    e->fn[e->nfn].f = f;
    e->fn[e->nfn].occupancy = 0;
    *slot = e->nfn++;
    return 0;
}

static int launch(run_ctx *r, pass_entry *e, const char *name, long long grid)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    int k;
    int rc = get_fn(r, e, name, &k);
    if (rc) return rc;
    CUfunction f = e->fn[k].f;
    if (grid < 1) grid = 1;
    if (grid > 0x7fffffff) grid = 0x7fffffff;
    void *args[] = {r->params};
    CU(fault_now(GPU_FAULT_LAUNCH) ? CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
                                   : g->cu.LaunchKernel(f, (unsigned)grid, 1, 1, BLOCK, 1, 1, 0, r->s, args, NULL),
       name);
    return 0;
}

static int occupancy_grid(run_ctx *r, pass_entry *e, const char *name, long long *grid)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    int k;
    int rc = get_fn(r, e, name, &k);
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

static long long cdiv(long long a, long long b) { return (a + b - 1) / b; }

/* Host copy of a host array's touched span; device pointer adjusted so the
 * kernel's offsets (which may be negative with negative strides) work. */
static int upload(run_ctx *r, const core_buf *b, CUdeviceptr *adj)
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
    int rc = run_get(r, bytes, base, 1);   /* given back at the run's end */
    if (rc) return rc;
    if (!empty) {
        /* pageable host memory: the call returns once the data is staged;
         * from a range redjit page-locked (another expression's result) it
         * returns at once, and the run waits for it before red_run returns
         * (the range's owner may write it again on its next run) */
        const char *src = (const char *)b->data + lo * esz;
        CUresult cr = g->cu.MemcpyHtoDAsync(*base, src, bytes, s);
        if (cr) return cu_fail(g, cr, "cuMemcpyHtoD", diag);
        for (int i = 0; i < g->nlocked; i++)
            if ((uintptr_t)src < (uintptr_t)g->locked[i].p + g->locked[i].n &&
                (uintptr_t)g->locked[i].p < (uintptr_t)src + bytes)
                r->locked_input = 1;
    }
    *adj = *base - (CUdeviceptr)(lo * esz);
    return 0;
}

static void set_array(long long *P, int base, CUdeviceptr ptr, const core_buf *b)
{
    P[base] = (long long)ptr;
    for (int d = 0; d < b->ndim; d++) {
        P[base + 1 + d] = b->shape[d];
        P[base + 1 + b->ndim + d] = b->strides[d];
    }
}

/* Whether a pass can take its 16-byte-load kernels (cuda.c, acc_elem_v:
 * rj_persistv, rj_seg1v, rj_seg32v): in every array it loads, the reduced
 * indices' dimensions make one contiguous run (the last of stride 1, each
 * other the stride of the run inside it; a dimension the domain holds at
 * one value has any stride), so that the domain's flat position is an
 * element offset; every other dimension has a stride of a multiple of 16
 * bytes (or one element), and the first element of the domain sits on 16
 * bytes, so that every vector of every output does.  A matrix's sum(A)
 * then reads it as one range, with no division per element. */
static int vec_ok(const run_ctx *r, const pass_entry *e)
{
    const cg_kernel *k = &e->k;
    const long long *P = r->params;
    if (!k->vec || k->rvec) return 0;   /* rvec: no fixed domain (ranged_vec_ok) */
    for (int l = 0; l < k->nvec; l++) {
        const long long *a = P + k->vec_base[l];   /* pointer, extents, strides */
        int nd = k->vec_ndim[l], rd = k->vec_rdim[l];
        unsigned long long first = 0;   /* element offset of the domain's first element */
        long long run = 1;              /* the stride the next dimension out must have */
        for (int q = k->vec_nred - 1; q >= 0; q--) {
            long long sz = P[k->vec_sz[q]], stride = a[1 + nd + rd + q];
            /* (the kernel adds the last one's start unscaled) */
            if ((sz != 1 || (q == k->vec_nred - 1 && P[k->vec_lo[q]])) && stride != run) return 0;
            first += (unsigned long long)P[k->vec_lo[q]] * (unsigned long long)stride;
            if (__builtin_mul_overflow(run, sz > 1 ? sz : 1, &run)) return 0;
        }
        if (((unsigned long long)a[0] + first * (unsigned long long)k->vec_esz) % 16) return 0;
        for (int d = 0; d < nd; d++)
            if ((d < rd || d >= rd + k->vec_nred) && a[1 + d] > 1 &&
                ((unsigned long long)a[1 + nd + d] * (unsigned long long)k->vec_esz) % 16)   /* no signed overflow */
                return 0;
    }
    return 1;
}

/* The kernel launched next ends the run and publishes its workspace, when
 * the run asked for that (r->pub_words); publish_disarm after the launch
 * notes whether it went out. */
static void publish_arm(run_ctx *r)
{
    if (r->pub_words <= 0) return;
    r->params[CG_PUB] = (long long)(uintptr_t)(r->g->pub + PUB_SEQ);
    r->params[CG_PUB + 1] = r->pub_words;
    r->params[CG_PUB + 2] = (long long)++r->g->pub_seq;
}

static void publish_disarm(run_ctx *r, int rc)
{
    if (r->pub_words <= 0 || !r->params[CG_PUB]) return;
    if (!rc) r->pub_seq = (unsigned long long)r->params[CG_PUB + 2];
    r->params[CG_PUB] = 0;
    r->pub_words = 0;
}

/* Waits for rj_publish's sequence number `seq`, watching the stream for a
 * fault: *seen is 1 when it came, 0 when the stream finished without it
 * (the caller then copies the workspace back as usual).  It spins, as the
 * driver's own synchronisation does by default, for a millisecond; a longer
 * run is left to cuStreamSynchronize, which honours a context made to
 * block instead (CU_CTX_SCHED_BLOCKING_SYNC). */
static CUresult publish_wait(gpu_dev *g, CUstream s, unsigned long long seq, int *seen)
{
    const unsigned long long *w = (const unsigned long long *)(g->pub + PUB_SEQ);
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

static int run_full(run_ctx *r, pass_entry *e, long long n, int strategy, int ordered)
{
    gpu_dev *g = r->g;
    long long *P = r->params;
    size_t asz = (size_t)e->k.acc_size;
    P[1] = 1;
    if (strategy == RED_STRATEGY_SEGMENTED) return launch(r, e, "rj_segb", 1);
    long long grid;
    int vec = vec_ok(r, e);
    const char *persist = vec ? "rj_persistv" : "rj_persist";
    if (strategy == RED_STRATEGY_PERSISTENT || strategy == RED_STRATEGY_AUTO) {
        int rc = occupancy_grid(r, e, persist, &grid);
        if (rc) return rc;
        grid *= g->waves ? g->waves : n >= 3 * grid * 16384 && !e->k.arg ? 3 : 1;
        /* small inputs: no more blocks than have 8 elements a thread (at 2^10
         * the full grid was 1056 blocks for 4 with work: 14.3 us, CUB 6.2) */
        if (grid > cdiv(n, (long long)BLOCK * 8)) grid = cdiv(n, (long long)BLOCK * 8);
    } else if (strategy == RED_STRATEGY_SEQUENTIAL) {
        grid = cdiv(n, (long long)BLOCK * 16);
        if (grid > 4 * g->nsm) grid = 4 * g->nsm;
    } else {
        grid = cdiv(n, (long long)BLOCK * 16);
        if (grid > 8 * g->nsm) grid = 8 * g->nsm;
    }
    if (grid < 1) grid = 1;
    CUdeviceptr part;
    int rc = run_get(r, (size_t)grid * asz, &part, 1);
    if (rc) return rc;
    P[2] = (long long)part;
    P[0] = n;
    if (strategy == RED_STRATEGY_SEQUENTIAL) {
        P[5] = cdiv(n, grid * BLOCK);
        rc = launch(r, e, "rj_seq", grid);
    } else {
        /* contiguous ranges per block, a multiple of the block size (for
         * rj_persistv of its batches of vectors: only the last block has
         * elements left over, which it folds one at a time) */
        int batches = vec && strategy != RED_STRATEGY_TREE;
        long long step = BLOCK * (long long)(batches ? e->k.vec * e->k.vec_unroll : 1);
        long long per = cdiv(cdiv(n, grid), step) * step;
        P[5] = per > 0 ? per : step;
        if (strategy == RED_STRATEGY_PERSISTENT || strategy == RED_STRATEGY_AUTO) publish_arm(r);
        rc = launch(r, e, strategy == RED_STRATEGY_TREE ? "rj_block" : persist, grid);
    }
    if (!rc && strategy != RED_STRATEGY_PERSISTENT && strategy != RED_STRATEGY_AUTO) {
        P[6] = grid;
        publish_arm(r);
        rc = launch(r, e, "rj_final", 1);
    }
    publish_disarm(r, rc);
    (void)ordered;
    return rc;
}

/* Every element of every output's domain, counted on the device (ranges come
 * from the data): a full reduction's size, or the segments' total for auto. */
static int count_on_device(run_ctx *r, pass_entry *e, long long nout, long long step, long long *total)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    long long *P = r->params;
    P[1] = nout;
    P[5] = step;
    CU(g->cu.MemsetD8Async(r->ws + 64, 0, 8, r->s), "cuMemsetD8Async");
    long long grid = cdiv(cdiv(nout, step), BLOCK);
    if (grid > (long long)g->nsm * 8) grid = (long long)g->nsm * 8;
    int rc = launch(r, e, "rj_count", grid);
    P[5] = 0;
    if (rc) return rc;
    long long cnt = 0;
    CU(g->cu.MemcpyDtoHAsync(&cnt, r->ws + 64, 8, r->s), "cuMemcpyDtoHAsync");
    CU(g->cu.StreamSynchronize(r->s), "cuStreamSynchronize");
    if (step > 1) {
        /* a sample of cdiv(nout, step) outputs: scaled to all of them */
        double est = (double)cnt * (double)nout / (double)cdiv(nout, step);
        cnt = est < 4e18 ? (long long)est : (long long)4e18;
    }
    *total = cnt;
    return 0;
}

/* Whether the pass reads a column layout: the fastest-varying dimension (the
 * smallest stride among extents > 1) of every load is subscripted by a free
 * index, so neighbouring outputs are neighbours in memory. */
int gpu_column_layout(const cg_kernel *k, const core_buf *bufs)
{
    if (!bufs || k->nloads == 0 || k->loads_overflow) return 0;
    for (int l = 0; l < k->nloads; l++) {
        const core_buf *b = &bufs[k->loads[l].slot];
        int best = -1;
        for (int d = 0; d < b->ndim && d < RED_MAX_DIMS; d++) {
            long long st = b->strides[d] < 0 ? -b->strides[d] : b->strides[d];
            long long bs = best < 0 ? 0 : b->strides[best] < 0 ? -b->strides[best] : b->strides[best];
            if (b->shape[d] > 1 && (best < 0 || st <= bs)) best = d;
        }
        if (best < 0 || k->loads[l].dim[best] != 1) return 0;
    }
    return 1;
}

/* The average rows from which auto takes the 16-byte-load kernels for
 * rows (read once, for gpu_choose_segments and run_segments):
 * - segbv: a block per contiguous row (rj_segbv) rather than a warp
 *   (rj_seg32v).  Row sums of 16384 x 16384 f32 took 243.2 to 245.1 us
 *   against 252.3 to 253.1 (H200, 2026-11-24, at 2048 and 4096 alike;
 *   CuPy 248, CUB 242).  REDJIT_SEGBV_MIN.
 * - seg1a: a thread per CSR row with 16-byte loads inside it (rj_seg1a)
 *   rather than scalar ones (rj_seg1).  H200, 2026-11-24, 2^26 f32 values,
 *   us at rj_seg1 / from 8 / from 2: lengths 10..50 113.0-113.8 /
 *   101.9-102.5 / 102.1, all of length 3 150.0-150.7 / (rj_seg1) / 165.3,
 *   with each row's first and last few elements read one at a time; read
 *   as masked 16-byte loads, lengths 10..50 93.7-94.0 (from 2 or 4 alike;
 *   length 3 from 2: 205.0).  With the first vector read before the next
 *   row's range (rj_rows_split), 92.2-93.6 against 93.8-95.6 (2026-11-26);
 *   the last vector read with it and the vectors between in predicated
 *   batches of four, 94.3-95.7 against 92.2-93.5 in the same calls.  4 or
 *   8 lanes a row (each its share of the vectors, then a tree) were
 *   slower: lengths 10..50 117.4-120.7 and 212.1-212.4, length 3 641.4
 *   and 1304.1.  REDJIT_SEG1A_MIN.
 * Both variables are for bench/sweep.sh; 0 there turns the kernel off.
 * Shorter CSR rows, or rows whose arrays are not on 16 bytes, take rj_seg1s
 * (element t at base + t) where the arrays have stride 1: rows of 3 in
 * 141.7-143.4 us against rj_seg1's 151.3-152.3, lengths 10..50 (forced
 * there) 112.6 against 113.2 (H200, 2026-11-24, 2^26 f32 values).
 * REDJIT_SEG1S=0 turns it off.
 * Contiguous rows a thread would take (up to 64 elements) of 16 vectors or
 * more take rj_segnv, 4 to 16 lanes a row with four vectors each: rows of
 * 64 floats (2^22 of them) in 280.0 us against rj_seg1v's 391.0-393.0 (8
 * lanes 327.4, 16 lanes 334.9), and in a later run 273.7-275.4 against
 * 357.1-358.0.  Shorter rows stay a thread each: rows of 8 floats
 * 284.9-286.6 us against 323.4-324.1 at 2 lanes, of 16 273.8-274.2 against
 * 298.8-299.0 at 2 and 331.2 at 4, of 32 325.5-326.4 against 326.8-327.0
 * at 2 (H200, 2026-11-24, 2^28 f32).  REDJIT_SEGNV: the most lanes (0
 * turns it off). */
static struct {
    double segbv, seg1a;
    int seg1s;   /* REDJIT_SEG1S=0: rj_seg1 instead of rj_seg1s (for sweeps) */
    int segnv;   /* REDJIT_SEGNV: rj_segnv's most lanes a row; under 4: rj_seg1v */
} row_min;
static pthread_once_t row_min_once = PTHREAD_ONCE_INIT;

static double env_row_min(const char *name, double dflt)
{
    const char *v = getenv(name);
    if (!v) return dflt;
    double d = atof(v);
    return d > 0 ? d : 1e300;
}

static void row_min_load(void)
{
    row_min.segbv = env_row_min("REDJIT_SEGBV_MIN", 4096);
    row_min.seg1a = env_row_min("REDJIT_SEG1A_MIN", 8);
    const char *v = getenv("REDJIT_SEG1S");
    row_min.seg1s = !v || atoi(v) != 0;
    v = getenv("REDJIT_SEGNV");
    row_min.segnv = v ? atoi(v) : 16;
    if (row_min.segnv > 16) row_min.segnv = 16;
}

/* The kernel for segments (see gpu.h), from the average length, as the
 * benchmark's forced strategies showed (bench/RESULTS.md, 2026-11-22): a
 * thread per output up to 64 elements (rows of 8: 333 us against 5132 with a
 * warp; CSR lengths 10..50: 179 against 440), else a warp on an
 * occupancy-sized grid (rows of 16384: 279 us against 344 with a block; rows
 * of 1024: 142 against 161).  Few long segments, and columns, split each
 * output's domain into chunks.
 * Tried for short rows and dropped (H200, 2026-11-23, 2^26 f32, us for CSR
 * lengths 10..50 / all of length 3): 8 lanes a row 153 / 1096 against a
 * thread's 114 / 150; a thread a row reading its block's span of values
 * from shared memory, staged in one pass of coalesced loads before the
 * rows were folded, 165 / 550: a block had one span's loads in flight at a
 * time, where the thread per row keeps 8 loads of each thread in flight
 * (a staged kernel would need the next span's copy overlapping this one's
 * fold, cp.async or the bulk copy engine).  Tried again (2026-11-25) with
 * m rows a thread a step, m from the average length so that a step filled
 * three quarters of a 40 KB tile, the step's span from a block reduction of
 * its ranges and rows outside it folded from global memory: 124.4 / 274.0
 * against 93.7-94.0 / 141.1 here (right on the CSR and range cases, with
 * the tile capped at 5 elements too): a thread's m ranges were read one
 * after another, twice (out_range may record a fault, a store the next
 * row's loads cannot pass).  Also dropped (2026-11-24):
 * rows folded in one pass over their elements as sorted keys are
 * (rj_kfusedv's tile fold), an element's key its row, from a window of row
 * starts each lane read ahead and counted at their positions in shared
 * memory, the offsets checked as read.  Right on every case, but 217 to 242
 * us for lengths 10..50 and 382 to 402 for length 3: ncu counted 124.5 M
 * warp instructions for lengths 10..50 against 66.8 M for rj_kfusedv over
 * the same number of tiles (keys, 149 us), so the fold, not the memory,
 * bounds it. */
gpu_seg_choice gpu_choose_segments(long long nout, long long total, int columns, int nsm)
{
    gpu_seg_choice c = {0};
    double avg = nout > 0 ? (double)total / (double)nout : 0;
    long long threads = (long long)nsm * 2048;   /* resident on the GPU */
    if (avg >= 64 && nout >= 256 && nout < 4 * threads && columns) {
        /* columns: enough chunks for two threads per resident slot, each
         * thread at least 32 elements, at most 1024 partials an output for
         * rj_splitf's thread to fold */
        long long nc = (2 * threads + nout - 1) / nout;
        if (nc > (long long)(avg / 32)) nc = (long long)(avg / 32);
        if (nc > 1024) nc = 1024;
        if (nc >= 2) {
            c.kernel = "rj_split1";
            c.group = 1;
            c.chunks = nc;
            return c;
        }
    } else if (avg >= 8192 && nout * 32 < threads) {
        /* few long segments: about 8 blocks per SM, each at least 4096
         * elements */
        long long nc = ((long long)nsm * 8 + nout - 1) / nout;
        if (nc > (long long)(avg / 4096)) nc = (long long)(avg / 4096);
        if (nc >= 2) {
            c.kernel = "rj_splitb";
            c.group = 256;   /* BLOCK */
            c.chunks = nc;
            return c;
        }
    }
    if (avg <= 64) {
        c.kernel = "rj_seg1";
        c.group = 1;
    } else {
        c.kernel = "rj_seg32";
        c.group = 32;
        c.occupancy_grid = 1;
        pthread_once(&row_min_once, row_min_load);
        c.long_rows = avg >= row_min.segbv;
    }
    return c;
}

/* What the segment lengths of a ranged pass depend on, hashed: the inputs'
 * addresses, shapes and strides, the scalars and the number of outputs (not
 * the data: an array changed in place keeps its key, which costs speed at
 * most, since the count only chooses the kernel).  Never 0. */
static uint64_t count_key(const run_ctx *r, const pass_entry *e, long long nout)
{
    const plan *p = r->p;
    uint64_t h = kc_hash(&nout, sizeof nout, 0);
    for (int i = 0; i < p->nbufs; i++) {
        const core_buf *b = &r->bufs[i];
        h = kc_hash(&b->data, sizeof b->data, h);
        h = kc_hash(&b->ndim, sizeof b->ndim, h);
        int nd = b->ndim > 0 && b->ndim <= RED_MAX_DIMS ? b->ndim : 0;
        h = kc_hash(b->shape, (size_t)nd * sizeof *b->shape, h);
        h = kc_hash(b->strides, (size_t)nd * sizeof *b->strides, h);
    }
    for (int i = 0; i < p->nscalars; i++) h = kc_hash(&r->params[e->k.lay.scalar_slot[i]], sizeof *r->params, h);
    return h | 1;
}

/* rj_seg1s's arrays (cg_kernel.rvec): one dimension of stride 1 each */
static int ranged_scalar_ok(const run_ctx *r, const pass_entry *e)
{
    const cg_kernel *k = &e->k;
    const long long *P = r->params;
    for (int l = 0; l < k->nvec; l++)
        if (k->vec_ndim[l] != 1 || P[k->vec_base[l] + 2] != 1) return 0;   /* pointer, extent, stride */
    return k->nvec > 0;
}

/* rj_seg1a's: the same, each first element on 16 bytes */
static int ranged_vec_ok(const run_ctx *r, const pass_entry *e)
{
    const cg_kernel *k = &e->k;
    for (int l = 0; l < k->nvec; l++)
        if ((unsigned long long)r->params[k->vec_base[l]] % 16) return 0;
    return ranged_scalar_ok(r, e);
}

/* Segments: one reduction per output (partial reductions, sorted keys).
 * `total` is the elements of all outputs' domains, or -1 when ranges make
 * it unknown.  Forced strategies pick the kernel: tree a block per output,
 * sequential a thread, persistent a warp on an occupancy-sized grid; auto
 * and segmented ask gpu_choose_segments. */
static int run_segments(run_ctx *r, pass_entry *e, long long nout, long long total, int strategy)
{
    gpu_dev *g = r->g;
    long long *P = r->params;
    P[1] = nout;
    if (nout == 0) return 0;
    const char *k;
    int group, rc;
    long long grid;
    switch (strategy) {
    case RED_STRATEGY_TREE: k = "rj_segb"; group = BLOCK; break;
    case RED_STRATEGY_SEQUENTIAL: k = "rj_seg1"; group = 1; break;
    case RED_STRATEGY_PERSISTENT: k = "rj_seg32"; group = 32; break;
    default: {
        if (total < 0) {
            /* ranges: their lengths are in the data; one round trip (tens
             * of microseconds) against a kernel that can be 20x off.  The
             * choice needs the average length only: a sample of about 16384
             * outputs (counting all 22 million CSR rows of length 3 took
             * 50 us, as long as a third of the reduction) */
            uint64_t key = count_key(r, e, nout);
            if (e->count_key == key) {
                /* the same arrays and sizes as last time: the same choice
                 * (it affects speed only; a stale one is still correct) */
                total = e->count_total;
            } else {
                rc = count_on_device(r, e, nout, nout > 32768 ? nout / 16384 : 1, &total);
                if (rc) return rc;
                e->count_key = key;
                e->count_total = total;
            }
        }
        gpu_seg_choice c = gpu_choose_segments(nout, total, gpu_column_layout(&e->k, r->bufs), g->nsm);
        if (c.chunks) {
            size_t bytes = (size_t)(c.chunks * nout) * (size_t)e->k.acc_size;
            CUdeviceptr part;
            rc = run_get(r, bytes, &part, 1);
            if (rc) return rc;
            P[2] = (long long)part;
            P[6] = c.chunks;
            P[1] = nout;
            grid = cdiv(c.chunks * nout * c.group, BLOCK);
            if (grid > (long long)g->nsm * 64) grid = (long long)g->nsm * 64;
            rc = launch(r, e, c.kernel, grid);
            if (rc) return rc;
            /* few outputs: a block folds each one's chunks (a thread each
             * took 37 us for one output of 1056 chunks) */
            P[5] = nout < 4LL * g->nsm;
            grid = P[5] ? nout : cdiv(nout, BLOCK);
            if (grid > (long long)g->nsm * 64) grid = (long long)g->nsm * 64;
            rc = launch(r, e, "rj_splitf", grid);
            P[5] = 0;
            return rc;
        }
        k = c.kernel;
        group = c.group;
        /* 16-byte loads (auto only: the forced strategies keep the scalar
         * kernels to compare against): CSR rows from an average of
         * row_min.seg1a elements, contiguous rows (a block each where they
         * are long, several lanes each where a thread's would be 16
         * vectors or more); shorter CSR rows with stride-1 arrays take
         * rj_seg1s, scalar loads without a stride to multiply */
        pthread_once(&row_min_once, row_min_load);
        int occupancy = c.occupancy_grid;
        if (group == 1 && e->k.rvec && (double)total >= row_min.seg1a * (double)nout && ranged_vec_ok(r, e)) {
            k = "rj_seg1a";
        } else if (group == 1 && e->k.rvec && row_min.seg1s && ranged_scalar_ok(r, e)) {
            k = "rj_seg1s";
        } else if (e->k.kind == CG_PARTIAL && vec_ok(r, e)) {
            if (c.long_rows) {
                k = "rj_segbv";
                group = BLOCK;
                occupancy = 0;
            } else if (group == 1 || group == 32) {
                k = group == 1 ? "rj_seg1v" : "rj_seg32v";
                /* a thread's rows of 16 vectors or more (64 floats): w
                 * lanes a row, four vectors each (rj_segnv) */
                long long nv = group == 1 && nout > 0 && total > 0 ? total / nout / e->k.vec : 0;
                int w = 1;
                while (w * 2 <= row_min.segnv && w * 2 * 4 <= nv) w *= 2;
                if (w >= 4) {
                    k = "rj_segnv";
                    group = w;
                    P[5] = w;
                }
            }
        }
        if (occupancy) strategy = RED_STRATEGY_PERSISTENT;
    }
    }
    if (strategy == RED_STRATEGY_PERSISTENT) {
        rc = occupancy_grid(r, e, k, &grid);
        if (rc) return rc;
    } else {
        grid = cdiv(nout * group, BLOCK);
        if (grid > (long long)g->nsm * 64) grid = (long long)g->nsm * 64;
    }
    rc = launch(r, e, k, grid);
    P[5] = 0;
    return rc;
}

static const ir *find_node(const ir *x, int id)
{
    if (!x) return NULL;
    if (x->id == id) return x;
    for (int i = 0; i < x->nargs; i++) {
        const ir *f = find_node(x->args[i], id);
        if (f) return f;
    }
    return NULL;
}

static const ir *plan_node(const plan *p, int id)
{
    for (int i = 0; i < p->npasses; i++) {
        const plan_pass *ps = &p->passes[i];
        const ir *f = find_node(ps->map, id);
        if (!f) f = find_node(ps->key, id);
        for (int q = 0; q < ps->nreds && !f; q++)
            for (int c = 0; c < ps->reds[q].ncomp && !f; c++) f = find_node(ps->reds[q].map[c], id);
        for (int d = 0; d < ps->nred && !f; d++) {
            f = find_node(p->vars[ps->red[d]].lo, id);
            if (!f) f = find_node(p->vars[ps->red[d]].hi, id);
        }
        if (f) return f;
    }
    return NULL;
}

static int report_device_fault(run_ctx *r, const unsigned long long err[4], const core_buf *bufs)
{
    const plan *p = r->p;
    if ((int)err[0] == RED_ERR_EMPTY) {
        int pi = (int)(err[1] >> 16), q = (int)(err[1] & 0xffff);
        util_pos pos = {0, 0};
        const char *what = "argmin/argmax";
        if (pi < p->npasses && q < p->passes[pi].nreds) {
            pos = p->passes[pi].reds[q].pos;
            what = plan_rop_name(p->passes[pi].reds[q].rop);
        }
        return util_diag_at(r->diag, p->src, pos, RED_ERR_EMPTY, "%s of an empty set: there is no index to return",
                            what);
    }
    if ((int)err[0] == RED_ERR_LIMIT && err[2] == ~0ull)   /* out_range: the product of the extents */
        return util_diag_set(r->diag, RED_ERR_LIMIT, "reduction domain too large: an output's ranges span more "
                             "than 2^40 elements together");
    if ((int)err[0] == RED_ERR_LIMIT)
        return util_diag_set(r->diag, RED_ERR_LIMIT, "reduction domain too large: a range of index values has more "
                             "than 2^40 elements (upper bound %lld)", (long long)err[3]);
    const ir *node = plan_node(p, (int)err[1]);
    if (!node || node->kind != IR_LOAD)
        return util_diag_set(r->diag, RED_ERR_INDEX, "a subscript is out of range (value %lld)", (long long)err[3]);
    int dim = (int)err[2];
    long long shape = 0;
    const char *name = "(intermediate)";
    if (node->slot >= 0 && bufs) {
        name = bufs[node->slot].name;
        shape = bufs[node->slot].shape[dim];
    }
    return util_diag_at(r->diag, p->src, node->pos, RED_ERR_INDEX, "subscript %d of '%s' is %lld, outside 0..%lld",
                        dim, name, (long long)err[3], shape);
}

/* A run's four timing events, reused from run to run (creating and destroying
 * them every call costs more than recording them).  All four or none: a run
 * without them just has no device timings.  Under g->lock. */
static void events_take(gpu_dev *g, void *ev[4])
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

static void events_give(gpu_dev *g, void *ev[4])
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
static void read_timings(gpu_dev *g, gpu_run *run)
{
    if (run->ev[0] && run->ev[1] && run->ev[2] && run->ev[3] && !run->timing_failed &&
        !g->cu.StreamSynchronize((CUstream)run->stream)) {
        float a = 0, b = 0, c = 0;
        if (!g->cu.EventElapsedTime(&a, run->ev[0], run->ev[1])) run->upload_ms = a;
        if (!g->cu.EventElapsedTime(&b, run->ev[1], run->ev[2])) run->kernel_ms = b;
        if (!g->cu.EventElapsedTime(&c, run->ev[2], run->ev[3])) run->download_ms = c;
    }
}

/* Give a finished run's buffers and events back.  Under g->lock. */
static void run_release(gpu_dev *g, gpu_run *run)
{
    events_give(g, run->ev);
    for (int i = 0; i < run->nrelease; i++) pool_put(g, run->release[i]);
    for (int i = 0; i < run->nreuse; i++) pool_put(g, run->reuse[i]);
    if (run->ws) pool_put(g, run->ws);
    if (run->release != run->release_inl) free(run->release);
    if (run->reuse != run->reuse_inl) free(run->reuse);
    run->reuse = NULL;
    run->nreuse = run->capreuse = 0;
    if (run->bufs_owned) free(run->bufs);
    run->release = NULL;
    run->bufs = NULL;
    run->bufs_owned = 0;
    run->nrelease = run->caprelease = 0;
    run->ws = 0;
    run->pending = 0;
}

int gpu_rechain(gpu_dev *g, gpu_run *run, const unsigned long long *extra, int nextra)
{
    /* timed runs read their own events; a key flag word left set needs
     * the workspace cleaned (see ws_get) */
    if (!run->pending || !run->stream || !run->ws || run->ws_keys_dirty || run->ev[0]) return 0;
    pthread_mutex_lock(&g->lock);
    int need = run->nreuse + run->nrelease + nextra;
    if (!run->reuse) {
        run->reuse = run->reuse_inl;
        run->capreuse = (int)(sizeof run->reuse_inl / sizeof run->reuse_inl[0]);
    }
    if (need > run->capreuse) {
        unsigned long long *n = malloc((size_t)need * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&g->lock);
            return 0;
        }
        memcpy(n, run->reuse, (size_t)run->nreuse * sizeof *n);
        if (run->reuse != run->reuse_inl) free(run->reuse);
        run->reuse = n;
        run->capreuse = need;
    }
    for (int i = 0; i < run->nrelease; i++) run->reuse[run->nreuse++] = run->release[i];
    for (int i = 0; i < nextra; i++) run->reuse[run->nreuse++] = extra[i];
    if (run->release != run->release_inl) free(run->release);
    run->release = NULL;
    run->nrelease = run->caprelease = 0;
    if (run->bufs_owned) free(run->bufs);
    run->bufs = NULL;
    run->bufs_owned = 0;
    run->pending = 0;
    pthread_mutex_unlock(&g->lock);
    return 1;
}

/* Wait for the run's work, read its fault record, give its buffers back. */
int gpu_finish(gpu_dev *g, gpu_run *run, util_diag *diag)
{
    pthread_mutex_lock(&g->lock);
    int rc = 0;
    if (run->pending || run->ws) {
        run_ctx r = {.g = g, .p = run->p, .diag = diag, .s = (CUstream)run->stream, .ws = run->ws, .run = run};
        unsigned long long err[4] = {0};
        CUresult cr = g->cu.CtxSetCurrent(g->ctx);
        /* the fault record's copy queued behind the work, then one wait
         * for both (a failed kernel fails either call) */
        if (cr) rc = cu_fail(g, cr, "cuCtxSetCurrent", diag);
        else if (run->ws && (cr = g->cu.MemcpyDtoHAsync(err, run->ws, 32, r.s)))
            rc = cu_fail(g, cr, "kernel execution (cuMemcpyDtoHAsync)", diag);
        else if ((cr = g->cu.StreamSynchronize(r.s))) rc = cu_fail(g, cr, "kernel execution (cuStreamSynchronize)", diag);
        if (!rc && err[0]) rc = report_device_fault(&r, err, run->bufs);
        if (!rc && run->ws) {   /* read, and zero: reusable without a memset */
            if (run->ws_keys_dirty) pool_put(g, run->ws);
            else ws_put_clean(g, run->ws);
            run->ws = 0;
        }
    }
    read_timings(g, run);
    run_release(g, run);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int gpu_alloc(gpu_dev *g, size_t bytes, void **ptr, util_diag *diag)
{
    pthread_mutex_lock(&g->lock);
    CUresult cr = g->cu.CtxSetCurrent(g->ctx);
    CUdeviceptr p = 0;
    int rc = cr ? cu_fail(g, cr, "cuCtxSetCurrent", diag) : pool_get(g, bytes, &p, diag);
    pthread_mutex_unlock(&g->lock);
    *ptr = rc ? NULL : (void *)(uintptr_t)p;
    return rc;
}

void gpu_release(gpu_dev *g, void *ptr)
{
    if (!g || !ptr) return;
    pthread_mutex_lock(&g->lock);
    pool_put(g, (CUdeviceptr)(uintptr_t)ptr);
    pthread_mutex_unlock(&g->lock);
}

int gpu_copy(gpu_dev *g, void *dst, int dst_dev, const void *src, int src_dev, size_t bytes, util_diag *diag)
{
    if (!bytes) return 0;
    pthread_mutex_lock(&g->lock);
    CUresult r = g->cu.CtxSetCurrent(g->ctx);
    if (r) {
        int rc = cu_fail(g, r, "cuCtxSetCurrent", diag);
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
    return r ? cu_fail(g, r, what, diag) : 0;
}

/* Read the run's workspace up to the key statistics (the fault record at 0,
 * the key statistics at 64) in one round trip; a device fault is reported,
 * but with keys_flag set not when the keys' flag word (st[2]) is raised:
 * rj_kfused(v) then found the keys unsorted, and what it wrote, a fault
 * included (an argmax of a "key with no elements" between two keys out of
 * order), does not count: the record is cleared for the pass's rerun. */
static int read_ws_stats(run_ctx *r, long long st[3], int keys_flag)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    /* into the pinned staging area when there is one (it is free until the
     * run's end): a copy to pageable memory is staged by the driver */
    unsigned long long w_stack[11], *w = g->pinned ? (unsigned long long *)(void *)g->pinned : w_stack;
    CU(g->cu.MemcpyDtoHAsync(w, r->ws, sizeof w_stack, r->s), "cuMemcpyDtoHAsync");
    CU(g->cu.StreamSynchronize(r->s), "cuStreamSynchronize");
    memcpy(st, &w[8], 3 * sizeof *st);
    if (w[0] && keys_flag && st[2]) {
        CU(g->cu.MemsetD8Async(r->ws, 0, 32, r->s), "cuMemsetD8Async");
        return 0;
    }
    return w[0] ? report_device_fault(r, w, r->bufs) : 0;
}

/* rj_koffs over N elements: a grid that fills the GPU once (it walks the keys
 * in steps of the grid; 2048 elements a block a step), or fewer blocks. */
static int key_offsets(run_ctx *r, pass_entry *e, long long N)
{
    long long grid = 1;
    int rc = occupancy_grid(r, e, "rj_koffs", &grid);
    if (rc) return rc;
    if (grid > cdiv(N, 2048)) grid = cdiv(N, 2048);
    return launch(r, e, "rj_koffs", grid);
}

/* The keys of a keyed pass over N > 0 elements: their count, whether they
 * never decrease and, if so, the segment starts (*offs, nkeys + 1 of them).
 * mode KEYS_FUSED, the default: rj_kends reads the first and the last key,
 * which give the count if the keys are sorted, and the pass then runs
 * rj_kfused, which checks that they are (*offs stays 0).  KEYS_OFFSETS, for
 * the forced strategies: rj_koffs writes the starts as well, and raises a
 * flag if the keys are not sorted.  KEYS_SCAN, or either when the first and
 * last key do not fit: rj_kscan finds the smallest and the largest key, for
 * the error messages and the private rows (unsorted keys have no offsets). */
enum { KEYS_FUSED, KEYS_OFFSETS, KEYS_SCAN };
static int key_segments(run_ctx *r, pass_entry *e, const plan_pass *ps, long long N, int mode, long long *nkeys,
                        int *sorted, CUdeviceptr *offs, int *flag_dirty)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    const plan *p = r->p;
    long long *params = r->params;
    long long st[3] = {0, -1, 1};
    int rc;
    *offs = 0;
    util_diag alloc = {0};
    if (mode != KEYS_SCAN) {
        /* the module rj_kfused or rj_kfusedv comes in */
        rc = launch(r, e, mode == KEYS_FUSED && vec_ok(r, e) ? "rj_kendsv" : "rj_kends", 1);
        if (!rc) rc = read_ws_stats(r, st, 0);
        if (rc) return rc;
        *flag_dirty = 0;   /* rj_kends cleared it */
    }
    int plausible = mode != KEYS_SCAN && st[0] >= 0 && st[1] >= st[0] && st[1] < ((long long)1 << 40);
    if (plausible && mode == KEYS_FUSED) {
        *nkeys = st[1] + 1;
        *sorted = 1;
        return 0;
    }
    /* the offsets' allocation failing is reported only once the scan below
     * has found the keys good (bad keys get RED_ERR_KEYS, not a size) */
    if (plausible && !pool_get(g, (size_t)(st[1] + 2) * 8, offs, &alloc)) {
        defer_release(r, *offs);
        params[8] = (long long)*offs;
        params[1] = st[1] + 1;
        rc = key_offsets(r, e, N);
        long long chk[3];
        if (!rc) rc = read_ws_stats(r, chk, 0);
        if (rc) return rc;
        if (!chk[2]) {
            *nkeys = st[1] + 1;
            *sorted = 1;
            return 0;
        }
    }
    *offs = 0;
    /* not sorted, or a key out of range: scan them all (the flag word is
     * rj_kscan's "sorted", 1 to start with) */
    *flag_dirty = 1;
    long long init[3] = {0x7fffffffffffffffll, -1, 1};
    CU(g->cu.MemcpyHtoDAsync(r->ws + 64, init, 24, r->s), "cuMemcpyHtoDAsync");
    rc = launch(r, e, "rj_kscan", cdiv(N, BLOCK) < 8 * g->nsm ? cdiv(N, BLOCK) : 8 * g->nsm);
    if (!rc) rc = read_ws_stats(r, st, 0);
    if (rc) return rc;
    *sorted = (int)(st[2] & 0xffffffff) != 0;
    if (st[0] < 0)
        return util_diag_at(diag, p->src, ps->key_pos, RED_ERR_KEYS,
                            "keys must be non-negative, but this key is %lld for some element", st[0]);
    for (int q = 0; q < ps->nreds; q++)
        if (ps->reds[q].rop == ROP_USER && ps->reds[q].ordered && !*sorted)
            return util_diag_at(diag, p->src, ps->key_pos, RED_ERR_KEYS,
                                "ordered operator '%s' needs keys in non-decreasing order, and these are not sorted",
                                ps->reds[q].uname);
    if (st[1] >= ((long long)1 << 40))
        return util_diag_at(diag, p->src, ps->key_pos, RED_ERR_LIMIT, "key %lld is too large", st[1]);
    *nkeys = st[1] + 1;
    /* sorted keys come here when their offsets did not fit, or asked to
     * (KEYS_SCAN: the rerun after a key count taken from an earlier run
     * proved wrong); then rj_kfused runs with the count found here */
    if (*sorted && alloc.code) return util_diag_set(diag, alloc.code, "%s", alloc.msg);
    if (*sorted && mode != KEYS_SCAN) return util_diag_set(diag, RED_ERR_INTERNAL, "key statistics disagree");
    return 0;
}

/* Sorted keys in one pass (rj_kfused, for accumulators of up to 32 bytes,
 * whose tiles fit in shared memory; rj_kfusedv where vec_ok): a grid that
 * fills the GPU once, each warp on a contiguous range, two items a block for
 * the last block to fold.
 * *bad: the kernel found the keys unsorted, or one outside 0..nkeys-1; with
 * bad NULL the flag (key statistics [2]) is left for the run's last read. */
static int key_fused(run_ctx *r, pass_entry *e, long long N, long long nkeys, int zero_flag, int *bad)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    long long *P = r->params;
    /* the flag word is zero in a clean workspace and after rj_kends; after
     * rj_kscan (which leaves its "sorted" there) or a raised flag it is
     * cleared here */
    if (zero_flag) CU(g->cu.MemsetD8Async(r->ws + 64 + 16, 0, 8, r->s), "cuMemsetD8Async");
    /* contiguous arrays: 16-byte loads, each warp's range a multiple of
     * rj_kfusedv's largest tile */
    int vec = vec_ok(r, e);
    const char *kn = vec ? "rj_kfusedv" : "rj_kfused";
    long long tile = vec ? 512 : 32;
    long long grid = 1;
    int rc = occupancy_grid(r, e, kn, &grid);
    if (rc) return rc;
    long long wpb = BLOCK / 32, nw = grid * wpb;
    if (nw > cdiv(N, 256)) nw = cdiv(N, 256);   /* at least a tile (32 RJ_KT, at most 256 elements) each */
    long long per = cdiv(cdiv(N, nw), tile) * tile;
    grid = cdiv(cdiv(N, per), wpb);
    CUdeviceptr items;
    size_t kbytes = (size_t)(2 * grid) * 8;
    rc = pool_get(g, kbytes + (size_t)(2 * grid) * (size_t)e->k.acc_size, &items, r->diag);
    if (rc) return rc;
    defer_release(r, items);
    P[0] = N;
    P[1] = nkeys;
    P[2] = (long long)(items + kbytes);
    P[5] = per;
    P[7] = 0;
    P[8] = (long long)items;
    /* the flag read at the run's end (no bad): from the workspace this
     * kernel's last block publishes, when the run armed that */
    if (!bad) publish_arm(r);
    rc = launch(r, e, kn, grid);
    if (!bad) publish_disarm(r, rc);
    if (rc || !bad) return rc;   /* no bad: the caller reads the flag later */
    long long chk[3] = {0, 0, 0};
    rc = read_ws_stats(r, chk, 1);
    *bad = chk[2] != 0;
    return rc;
}

/* execute's answer when the last pass's keys, assumed sorted, were not:
 * everything is given back, and the caller runs the plan again without the
 * assumption (never reaches the library's caller) */
#define KEYS_RETRY (-1000)

/* A large host result's buffer, kept from the run before (core_results), is
 * page-locked with the driver the second time it is used, and stays so
 * while it is kept: a copy from the GPU into pageable memory ran at 13.9
 * GB/s, into registered memory at 55.4 (H200 host, 89 MiB; registering it
 * took 4.5 ms, about what one copy saves; memory new from malloc took 1.5
 * GB/s, faulted in page by page).  Not where it fails: it is only slower. */
enum { PIN_MIN = 4 << 20 };

/* The entry of g->locked that starts at p, or -1.  g->lock held. */
static int locked_at(const gpu_dev *g, const void *p)
{
    for (int i = 0; i < g->nlocked; i++)
        if (g->locked[i].p == p) return i;
    return -1;
}

/* core_results' leave hook: a large buffer is freed or handed over; unlocked
 * first if host_pin locked it.  g->lock not held. */
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

static void host_pin(gpu_dev *g, core_results *out, void *h, size_t bytes)   /* g->lock held */
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

static int execute(gpu_dev *g, const plan *p, const core_buf *bufs, const int *on_device, const plan_value *scalars,
                   int strategy, gpu_run *run, core_results *out, util_diag *diag, int retry)
{
    pthread_mutex_lock(&g->lock);
    int rc = 0;
    CUresult cr0 = g->cu.CtxSetCurrent(g->ctx);
    if (cr0) {
        rc = cu_fail(g, cr0, "cuCtxSetCurrent", diag);
        pthread_mutex_unlock(&g->lock);
        return rc;
    }
    CUstream s = (CUstream)run->stream;
    run->p = p;
    run->pending = 0;
    /* the caller's arrays serve fault messages until the run returns; a run
     * left pending gets a copy at the end */
    run->bufs = (core_buf *)bufs;
    run->bufs_owned = 0;
    /* the run's bookkeeping, zeroed: on the stack for any plan of a usual
     * size (malloc and free were a third of a warm run's host time) */
    int nt = p->ntemps + 1, nb = p->nbufs + 1, nv = p->nvars + 1;
    size_t need = (size_t)nt * (sizeof(core_buf) + sizeof(CUdeviceptr) + 3 * sizeof(int)) +
                  (size_t)nb * sizeof(CUdeviceptr) + (size_t)nv * (2 * sizeof(int64_t) + sizeof(int));
    union {
        max_align_t align;
        unsigned char bytes[4096];
    } scratch_stack;
    unsigned char *scratch = need <= sizeof scratch_stack ? scratch_stack.bytes : malloc(need);
    if (scratch) memset(scratch, 0, need);
    unsigned char *sp = scratch;
#define SCRATCH(type, n) (sp += (size_t)(n) * sizeof(type), (type *)(void *)(sp - (size_t)(n) * sizeof(type)))
    core_buf *tdesc = scratch ? SCRATCH(core_buf, nt) : NULL;
    CUdeviceptr *tptr = scratch ? SCRATCH(CUdeviceptr, nt) : NULL;
    CUdeviceptr *in_adj = scratch ? SCRATCH(CUdeviceptr, nb) : NULL;
    int64_t *vlo = scratch ? SCRATCH(int64_t, nv) : NULL, *vhi = scratch ? SCRATCH(int64_t, nv) : NULL;
    int *keep = scratch ? SCRATCH(int, nt) : NULL;
    int *to_host = scratch ? SCRATCH(int, nt) : NULL;   /* a result the host receives          */
    int *ws_off = scratch ? SCRATCH(int, nt) : NULL;    /* > 0: it lives in the workspace, there */
    int *done = scratch ? SCRATCH(int, nv) : NULL;
#undef SCRATCH
    long long params_stack[256], *params = NULL;
    size_t ws_used = 32;   /* of the workspace, what comes back: the fault record, then results */
    run_ctx r = {.g = g, .p = p, .diag = diag, .s = s, .run = run, .bufs = bufs};
    core_vars vars = {vlo, vhi, done};
    if (!scratch) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < p->nresults; i++) {
        int t = p->results[i].temp;
        to_host[t] = !gpu_result_on_device(run->device_results, p->temps[t].ndim);
    }
    /* the host's staging area for the workspace and small results, before
     * any pass: a run without it copies its results one by one */
    if (!rc && !g->pinned && !g->cu.MemHostAlloc((void **)&g->pinned, PINNED_SIZE + PUB_IMAGE + WS_BYTES, 0)) {
        g->pinned_size = PINNED_SIZE;
        if (g->uva) g->pub = g->pinned + PINNED_SIZE;
        memset(g->pinned + PINNED_SIZE, 0, PUB_IMAGE);
    }
    /* a run that ends by reading its workspace back can leave the check of
     * its last pass's sorted keys to that read (see key_fused).  A run whose
     * results stay on the device is left queued at its end, but one whose
     * last pass is keyed waits for the keys anyway: it ends with that read
     * too (one wait instead of two, or instead of rj_kends's and a second) */
    int host_bound = 0;          /* a result comes to the host */
    for (int i = 0; !rc && i < p->nresults; i++) host_bound |= to_host[p->results[i].temp];
    int ends_synced = g->pinned && (host_bound || !run->stream || run->device_results == RED_RESULTS_HOST ||
                                    (p->npasses > 0 && p->passes[p->npasses - 1].key && p->passes[p->npasses - 1].nreds));
    int flag_dirty = 0;          /* the key flag word may be nonzero (see ws_get) */
    struct {                     /* the last pass's key check, left to the final read */
        pass_entry *e;           /* NULL: none */
        uint64_t kh;             /* count_key of its arrays */
        long long nkeys;
        int guessed;             /* nkeys taken from the run before */
    } deferred = {0};
    /* this run's own fault record, persistent-grid counter and key stats, so
     * runs on different streams never share them */
    if (run->timings) events_take(g, run->ev);
    else memset(run->ev, 0, sizeof run->ev);
    if (run->ev[0] && g->cu.EventRecord(run->ev[0], s)) run->timing_failed = 1;
    double nvrtc_before = g->stats.compile_ms;
    if (!rc && !run->ws) rc = ws_get(g, s, &run->ws, diag);   /* a chained run has its own */
    r.ws = run->ws;

    for (int i = 0; !rc && i < p->nbufs; i++) {
        if (on_device && on_device[i]) {
            in_adj[i] = (CUdeviceptr)(uintptr_t)bufs[i].data;
        } else {
            rc = upload(&r, &bufs[i], &in_adj[i]);
        }
    }

    if (run->ev[1] && g->cu.EventRecord(run->ev[1], s)) run->timing_failed = 1;
    for (int pi = 0; !rc && pi < p->npasses; pi++) {
        const plan_pass *ps = &p->passes[pi];
        pass_entry *e = NULL;
        if (core_cancelled(run->cancel)) {
            rc = util_diag_set(diag, RED_ERR_INTERRUPTED, "interrupted");
            break;
        }
        rc = pass_kernels(g, p, pi, &e, diag);
        if (rc) break;
        const cg_layout *L = &e->k.lay;
        if (params != params_stack) free(params);
        params = L->nparams <= (int)(sizeof params_stack / sizeof params_stack[0])
                     ? params_stack
                     : malloc((size_t)L->nparams * sizeof *params);
        if (!params) {
            rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
            break;
        }
        memset(params, 0, (size_t)L->nparams * sizeof *params);
        r.params = params;
        r.nparams = L->nparams;
        params[4] = (long long)r.ws;
        params[3] = (long long)(r.ws + 32);
        params[9] = (long long)(r.ws + 64);
        for (int i = 0; i < p->nbufs; i++) set_array(params, L->buf_base[i], in_adj[i], &bufs[i]);
        for (int i = 0; i < p->nscalars; i++) memcpy(&params[L->scalar_slot[i]], &scalars[i], 8);

        /* the pass's ranges (explicit reduced ones are evaluated per
         * output in the kernel) */
        core_domain dom;
        rc = core_resolve_pass(p, pi, bufs, &run->bounds, 0, &vars, &dom, diag);
        if (rc) break;
        long long nout = dom.nout, L1 = dom.L;
        int ranged = dom.ranged;
        for (int v = 0; v < p->nvars; v++) {
            params[L->var_lo[v]] = vlo[v];
            params[L->var_sz[v]] = vhi[v] - vlo[v];
        }
        for (int i = 0; i < p->ntemps; i++)
            if (tptr[i]) set_array(params, L->temp_base[i], tptr[i], &tdesc[i]);

        /* keys: the fused pass unless a strategy is forced (those run over
         * the segment starts); the scan when the fused pass found the keys
         * not sorted, which comes back here with the pass's outputs freed */
        int key_mode = (strategy == RED_STRATEGY_AUTO || strategy == RED_STRATEGY_SEGMENTED) && e->k.acc_size <= 32
                           ? KEYS_FUSED
                           : KEYS_OFFSETS;
        /* the second run after KEYS_RETRY: the last pass's keys are not
         * sorted, or their count was not the one taken from the run before */
        if (retry && pi == p->npasses - 1 && key_mode == KEYS_FUSED) key_mode = KEYS_SCAN;
        size_t ws_before = ws_used;
        uint64_t kh = 0;   /* count_key of a keyed pass's arrays (0: not kept) */
        int guessed = 0;
        /* the one domain of a full or keyed reduction: over a ranged index
         * (`over i in 1..n`, `... by k[i]`) its size comes from bounds only
         * the device can read */
        long long N1 = L1;
        if (ps->nreds && (ps->key || ps->nfree == 0) && ranged) {
            rc = count_on_device(&r, e, 1, 1, &N1);
            if (!rc && N1 > ((long long)1 << 40))
                rc = util_diag_set(diag, RED_ERR_LIMIT, "reduction domain too large: %lld elements (at most 2^40)", N1);
            if (rc) break;
        }
    keys_again:;
        long long nkeys = 0;
        int sorted = 1;
        CUdeviceptr offs = 0;
        if (ps->key) {
            long long N = N1;
            params[0] = N;
            params[7] = 0;
            /* the last pass of a run read back at its end may take the key
             * count the same arrays gave last time: rj_kfused checks it
             * (the first key not negative, the last one nkeys - 1), and a
             * wrong one reruns the plan (KEYS_RETRY), after which this
             * pass asks again each time */
            kh = key_mode != KEYS_OFFSETS && N > 0 ? count_key(&r, e, N) : 0;
            /* the same arrays had unsorted keys last time: scan them first */
            if (kh && key_mode == KEYS_FUSED && e->unsorted_key == kh) key_mode = KEYS_SCAN;
            guessed = kh && key_mode == KEYS_FUSED && !retry && ends_synced && pi == p->npasses - 1 &&
                      !e->nkeys_nospec && e->nkeys_key == kh;
            if (guessed) {
                nkeys = e->nkeys;
            } else if (N > 0) {
                rc = key_segments(&r, e, ps, N, key_mode, &nkeys, &sorted, &offs, &flag_dirty);
                if (!rc && kh) e->unsorted_key = sorted ? 0 : kh;
            }
            if (rc) break;
            core_set_key_count(p, pi, &vars, nkeys);
            params[L->var_lo[ps->key_var]] = 0;
            params[L->var_sz[ps->key_var]] = nkeys;
            nout = nkeys;
        }

        /* the temporaries this pass writes */
        int outs[PLAN_MAX_COMP * 64], nouts = 0;
        if (!ps->nreds) outs[nouts++] = ps->map_temp;
        for (int q = 0; q < ps->nreds; q++)
            for (int c = 0; c < ps->reds[q].ncomp; c++) outs[nouts++] = ps->reds[q].temp[c];
        for (int k = 0; !rc && k < nouts; k++) {
            int t = outs[k];
            size_t bytes;
            rc = core_temp_shape(p, t, &vars, &tdesc[t], &bytes, diag);
            if (rc) break;
            size_t at = (ws_used > WS_HEAD ? ws_used + 15 : WS_HEAD) & ~(size_t)15;
            if (to_host[t] && g->pinned && bytes > 0 && at + bytes <= WS_BYTES) {
                /* bound for the host and small: beside the fault record */
                tptr[t] = r.ws + at;
                ws_off[t] = (int)at;
                ws_used = at + bytes;
                continue;
            }
            /* not cleared: every strategy's kernels write every output
             * element, the identity where a domain is empty */
            rc = run_get(&r, bytes, &tptr[t], 0);
        }
        if (rc) break;
        for (int i = 0; i < p->ntemps; i++)
            if (tptr[i]) set_array(params, L->temp_base[i], tptr[i], &tdesc[i]);

        /* the last pass of a run that ends by reading its workspace back,
         * with every result for the host in it, and no timing event to
         * record after the copy: its last kernel can publish instead.  A
         * sorted keyed last pass whose key check is read at the run's end
         * (key_fused's deferred flag) waits even when its results stay on
         * the device of a stream, and its read takes the key statistics
         * (64 + 24 bytes) */
        int key_defer = ps->key && ps->nreds && sorted && !offs && !retry && ends_synced && pi == p->npasses - 1;
        if (key_defer && ws_used < 64 + 24) ws_used = 64 + 24;
        r.pub_words = 0;
        if (pi == p->npasses - 1 && g->pub && !run->ev[3] &&
            (key_defer || !(run->stream && run->device_results != RED_RESULTS_HOST && !host_bound))) {
            int all_ws = 1;
            for (int i = 0; i < p->nresults; i++)
                if (to_host[p->results[i].temp] && !ws_off[p->results[i].temp]) all_ws = 0;
            if (all_ws) r.pub_words = (long long)(ws_used + 7) / 8;
        }

        if (!ps->nreds) {
            params[1] = nout;
            long long grid = cdiv(nout, BLOCK);
            if (grid > (long long)g->nsm * 32) grid = (long long)g->nsm * 32;
            if (nout > 0) rc = launch(&r, e, "rj_map", grid);
        } else if (ps->key) {
            long long N = N1;
            params[0] = N;
            if (nkeys == 0) {
                /* nothing to reduce: the result is empty */
            } else if (sorted && !offs) {
                int bad = 0, defer = key_defer;
                rc = key_fused(&r, e, N, nkeys, flag_dirty, defer ? NULL : &bad);
                flag_dirty = defer || bad;   /* deferred: known at the end */
                if (!rc && defer) {
                    /* the key statistics come back with the results */
                    deferred.e = e;
                    deferred.kh = kh;
                    deferred.nkeys = nkeys;
                    deferred.guessed = guessed;
                } else if (!rc && kh && !bad) {   /* a count rj_kfused confirmed */
                    e->nkeys_key = kh;
                    e->nkeys = nkeys;
                }
                if (!rc && bad && key_mode == KEYS_SCAN) {
                    /* the scan found them sorted, and rj_kfused did not */
                    rc = util_diag_set(diag, RED_ERR_INTERNAL, "key statistics disagree");
                } else if (!rc && bad) {
                    /* not sorted after all (or a key past the last one): the
                     * outputs, sized by the last key, go back, and the keys
                     * are scanned */
                    for (int k = 0; k < nouts; k++) {
                        int t = outs[k];
                        if (tptr[t] && !ws_off[t]) pool_put(g, tptr[t]);
                        tptr[t] = 0;
                        ws_off[t] = 0;
                    }
                    ws_used = ws_before;
                    key_mode = KEYS_SCAN;
                    goto keys_again;
                }
            } else if (sorted) {
                /* key_segments wrote the segment starts */
                params[8] = (long long)offs;
                params[1] = nkeys;
                params[7] = 1;
                rc = run_segments(&r, e, nkeys, N, strategy);
            } else {
                /* private rows per partition, combined in partition order */
                long long asz = e->k.acc_size, np = 4 * g->nsm;
                while (np > 1 && (double)np * nkeys * asz > 512.0 * 1024 * 1024) np /= 2;
                if (np > N) np = N > 0 ? N : 1;
                CUdeviceptr rows;
                rc = pool_get(g, (size_t)(np * nkeys * asz), &rows, diag);
                if (!rc) {
                    defer_release(&r, rows);
                    params[2] = (long long)rows;
                    params[6] = np;
                    params[5] = cdiv(N, np);
                    params[1] = nkeys;
                    params[7] = 0;
                    rc = launch(&r, e, "rj_kpriv", cdiv(np, BLOCK));
                    if (!rc) rc = launch(&r, e, "rj_kcomb", cdiv(nkeys, BLOCK));
                }
            }
        } else if (ps->nfree == 0) {
            rc = run_full(&r, e, N1, strategy, e->k.ordered);
        } else {
            long long total = ranged ? -1 : nout * L1;
            rc = run_segments(&r, e, nout, total, strategy);
        }
        if (rc) break;
    }

    /* results: left on the device, or copied back; every other temporary is
     * given back once the work is done */
    if (run->ev[2] && g->cu.EventRecord(run->ev[2], s)) run->timing_failed = 1;
    run->compile_ms = g->stats.compile_ms - nvrtc_before;
    struct staged {
        void *dst;
        size_t off, bytes;
    } staged[64];
    int nstaged = 0;
    size_t used = ws_used;   /* of the pinned area: the workspace's image first */
    if (!rc) {
        out->n = p->ntemps;
        out->t = calloc((size_t)p->ntemps + 1, sizeof *out->t);
        if (!out->t) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
        for (int i = 0; !rc && i < p->nresults; i++) {
            int t = p->results[i].temp;
            if (keep[t] || out->t[t].data) continue;
            out->t[t] = tdesc[t];
            if (!to_host[t]) {
                keep[t] = 1;
                out->t[t].data = (void *)(uintptr_t)tptr[t];
                continue;
            }
            int64_t n = 1;
            for (int d = 0; d < tdesc[t].ndim; d++) n *= tdesc[t].shape[d];
            size_t bytes = (size_t)n * red_dtype_size(tdesc[t].dtype);
            int reused = 0;
            void *h = core_results_alloc(out, bytes, 0, &reused);
            out->t[t].data = h;
            if (h && reused && bytes >= PIN_MIN) host_pin(g, out, h, bytes);
            size_t at = (used + 15) & ~(size_t)15;
            if (!h) {
                rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
            } else if (ws_off[t] && nstaged < 64) {
                /* in the workspace: comes back with the fault record */
                staged[nstaged++] = (struct staged){h, (size_t)ws_off[t], bytes};
            } else if (bytes && g->pinned && at + bytes <= g->pinned_size && nstaged < 64) {
                /* small: into the pinned staging area, asynchronously */
                if (g->cu.MemcpyDtoHAsync(g->pinned + at, tptr[t], bytes, s))
                    rc = util_diag_set(diag, RED_ERR_DEVICE, "cuMemcpyDtoHAsync failed");
                staged[nstaged++] = (struct staged){h, at, bytes};
                used = at + bytes;
            } else if (bytes && g->cu.MemcpyDtoHAsync(h, tptr[t], bytes, s)) {
                /* large, or the workspace's (without staging room): to
                 * pageable memory, the call returns when the copy is done;
                 * to page-locked memory it does not, and the stream is
                 * waited for below (a run whose last kernel publishes has
                 * every host result in its workspace: no copy like this) */
                rc = util_diag_set(diag, RED_ERR_DEVICE, "cuMemcpyDtoHAsync failed");
            }
        }
    }
    /* the fault record and the results beside it in one copy, then one sync
     * covers everything; a run with a stream whose results all stay on the
     * device is left queued (pending) instead */
    int queued = run->stream && run->device_results != RED_RESULTS_HOST && !host_bound && !deferred.e && !r.locked_input;
    int have_err = 0, ws_dirty = 0;
    unsigned long long err[4] = {0};
    if (!rc && !queued && g->pinned) {
        /* the workspace's image: published by the last kernel, or copied */
        const unsigned char *img = g->pinned;
        int seen = 0;
        CUresult cr = 0;
        if (r.pub_seq) {
            cr = publish_wait(g, s, r.pub_seq, &seen);
            if (seen) img = g->pub + PUB_IMAGE;
        }
        if (!cr && !seen) {
            cr = g->cu.MemcpyDtoHAsync(g->pinned, run->ws, ws_used, s);
            if (!cr && run->ev[3] && g->cu.EventRecord(run->ev[3], s)) run->timing_failed = 1;
            if (!cr) cr = g->cu.StreamSynchronize(s);
        }
        if (cr) rc = cu_fail(g, cr, "kernel execution (cuStreamSynchronize)", diag);
        else {
            memcpy(err, img, 32);
            have_err = 1;
            for (int k = 0; k < nstaged; k++) memcpy(staged[k].dst, img + staged[k].off, staged[k].bytes);
            unsigned long long flag;
            memcpy(&flag, img + 64 + 16, sizeof flag);
            if (deferred.e) flag_dirty = flag != 0;
            if (deferred.e && !flag) {   /* the count is confirmed */
                deferred.e->nkeys_key = deferred.kh;
                deferred.e->nkeys = deferred.nkeys;
            }
            if (deferred.e && flag) {
                /* unsorted keys after all, or a wrong guess of their count:
                 * nothing of this run counts, not even a fault (the results
                 * it came from are wrong) */
                rc = KEYS_RETRY;
                if (deferred.guessed) deferred.e->nkeys_nospec = 1;
                ws_dirty = err[0] != 0;
                err[0] = 0;
            }
        }
    } else if (run->ev[3] && g->cu.EventRecord(run->ev[3], s)) {
        run->timing_failed = 1;
    }
    for (int i = 0; i < p->ntemps; i++)
        if (tptr && tptr[i] && !(keep && keep[i]) && !ws_off[i]) defer_release(&r, tptr[i]);
    int pending = !rc && queued;
    run->ws_keys_dirty = flag_dirty;   /* for gpu_finish, on the paths below that end there */
    if (params != params_stack) free(params);
    if (rc && keep && out->t) {
        /* nothing is handed out after a failure */
        for (int i = 0; i < p->ntemps; i++)
            if (keep[i]) {
                defer_release(&r, (CUdeviceptr)(uintptr_t)out->t[i].data);
                out->t[i].data = NULL;
            }
    }
    if (pending) {
        /* its fault message may come after the caller's arrays are gone */
        core_buf *copy = malloc(((size_t)p->nbufs + 1) * sizeof *copy);
        if (copy) {
            memcpy(copy, bufs, (size_t)p->nbufs * sizeof *bufs);
            run->bufs = copy;
            run->bufs_owned = 1;
        } else {
            run->bufs = NULL;   /* the message then names no array */
        }
        run->pending = 1;
        pthread_mutex_unlock(&g->lock);
        if (scratch != scratch_stack.bytes) free(scratch);
        return 0;
    }
    int frc = 0;
    if (have_err) {
        /* already synchronised and read: report, release, and give the
         * workspace back clean unless the record was written */
        if (err[0]) frc = report_device_fault(&r, err, bufs);
        unsigned long long ws = run->ws;
        run->ws = 0;
        read_timings(g, run);
        run_release(g, run);
        if (err[0] || ws_dirty || flag_dirty) pool_put(g, ws);
        else ws_put_clean(g, ws);
        pthread_mutex_unlock(&g->lock);
    } else {
        pthread_mutex_unlock(&g->lock);
        frc = gpu_finish(g, run, rc ? &(util_diag){0} : diag);
    }
    if (!rc && frc && out->t) {
        /* a fault found after the fact: the results are not valid */
        for (int i = 0; i < out->n; i++)
            if (keep[i]) gpu_release(g, (void *)out->t[i].data), out->t[i].data = NULL;
        core_results_free(out);
    }
    if (scratch != scratch_stack.bytes) free(scratch);
    return rc ? rc : frc;
}

int gpu_execute(gpu_dev *g, const plan *p, const core_buf *bufs, const int *on_device, const plan_value *scalars,
                int strategy, gpu_run *run, core_results *out, util_diag *diag)
{
    int rc = execute(g, p, bufs, on_device, scalars, strategy, run, out, diag, 0);
    if (rc == KEYS_RETRY) {
        core_results_free(out);
        rc = execute(g, p, bufs, on_device, scalars, strategy, run, out, diag, 1);
    }
    core_results_trim(out);
    return rc;
}
