/*
 * nvrtc.c -- NVRTC, loaded with dlopen on first use (or ahead, on a thread of gpu_open's):
 * its options, which the disk cache's key includes, compiling a kernel's source to a CUBIN,
 * and the entry point that needs no driver (gpu_compile_only).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_internal.h"
#include "tuning.h"

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
 * leaves out declarations no kernel uses: a third of the front end's time,
 * the same CUBIN.  --no-cache (NVRTC 12.9 on) turns off NVRTC's own compile
 * cache, which would hide compiles from red_cache_stats and the JIT
 * benchmark (figures: bench/TUNING.md, "NVRTC").  redjit keeps its own
 * cache, in memory and on disk, bounded and keyed by NVRTC's version and
 * these options. */
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
    snprintf(nvrtc_extra, sizeof nvrtc_extra, "%s", gpu_tuning_get()->nvrtc_opts);
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

/* libnvrtc is a 100 MB library whose dlopen is most of a new process's time
 * to its first result when the kernel is in the disk cache (whose key names
 * NVRTC's version; bench/TUNING.md, "NVRTC").  So gpu_open loads it on a
 * thread of its own while the driver creates the context, once per process. */
static int nvrtc_preload_started;

static void *nvrtc_preload(void *arg)
{
    (void)arg;
    pthread_once(&nvrtc_once, nvrtc_load);
    return NULL;
}

/* The preload's thread, started by the first gpu_open of the process only: 1 when
 * `thread` is to be joined. */
int gpu_nvrtc_preload(pthread_t *thread)
{
    if (__atomic_exchange_n(&nvrtc_preload_started, 1, __ATOMIC_ACQ_REL)) return 0;
    return pthread_create(thread, NULL, nvrtc_preload, NULL) == 0;
}

/* What of NVRTC the disk cache's key names: the architecture, NVRTC's version, redjit's and
 * the options.  NVRTC is loaded first, even when the CUBIN will come from the disk cache. */
int gpu_nvrtc_key(const char *arch, char *buf, size_t n, util_diag *diag)
{
    pthread_once(&nvrtc_once, nvrtc_load);
    if (!nvrtc_ok) return util_diag_set(diag, RED_ERR_DEVICE, "%s", nvrtc_err);
    snprintf(buf, n, "%s|nvrtc %d.%d|redjit %s|opts %s", arch, nvrtc.major, nvrtc.minor, REDJIT_VERSION_STRING,
             nvrtc_optstr);
    return 0;
}
/* Compile `src` for `arch` to a CUBIN (malloc'd). */
int gpu_nvrtc_compile(const char *src, const char *arch, void **cubin, size_t *size, double *ms,
                         util_diag *diag)
{
    pthread_once(&nvrtc_once, nvrtc_load);
    if (!nvrtc_ok) return util_diag_set(diag, RED_ERR_DEVICE, "%s", nvrtc_err);
    if (gpu_fault_now(GPU_FAULT_NVRTC))
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
void gpu_dump_kernel(const char *name, const char *src, const void *cubin, size_t n)
{
    const char *dir = gpu_tuning_get()->dump_cubin[0] ? gpu_tuning_get()->dump_cubin : NULL;
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

int gpu_limit_source(const gpu_limits *lim, int pi, size_t bytes, util_diag *diag)
{
    if (!lim || lim->max_source <= 0 || bytes <= (unsigned long long)lim->max_source) return 0;
    return util_diag_set(diag, RED_ERR_LIMIT,
                         "generated CUDA source of pass %d is %zu bytes: the limit is %lld (RED_OPT_MAX_SOURCE)", pi,
                         bytes, lim->max_source);
}

int gpu_limit_compile(const gpu_limits *lim, util_diag *diag)
{
    if (!lim || !lim->compiles) return 0;
    if (lim->max_compiles > 0 && *lim->compiles >= lim->max_compiles)
        return util_diag_set(diag, RED_ERR_LIMIT,
                             "expression needs more than %d NVRTC compiles: the limit is %d (RED_OPT_MAX_COMPILES)",
                             lim->max_compiles, lim->max_compiles);
    ++*lim->compiles;
    return 0;
}

int gpu_compile_only(const plan *p, const char *arch, const gpu_limits *lim, util_diag *diag)
{
    util_arena a;
    util_arena_init(&a);
    int rc = 0;
    for (int pi = 0; pi < p->npasses && !rc; pi++) {
        cg_kernel k;
        rc = cg_generate(p, pi, cg_tuning_get(), &a, &k, diag);
        cg_add_group(&k.src, CG_ALL_GROUPS, &k);
        if (!rc && k.src.failed) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
        if (!rc) rc = gpu_limit_source(lim, pi, k.src.len, diag);
        if (!rc) rc = gpu_limit_compile(lim, diag);
        if (!rc) {
            void *cubin = NULL;
            size_t n = 0;
            double ms;
            rc = gpu_nvrtc_compile(util_buf_str(&k.src), arch, &cubin, &n, &ms, diag);
            if (!rc) {
                char name[32];
                snprintf(name, sizeof name, "pass%d", pi);
                gpu_dump_kernel(name, util_buf_str(&k.src), cubin, n);
            }
            free(cubin);
        }
        util_buf_free(&k.src);
    }
    util_arena_free(&a);
    return rc;
}
