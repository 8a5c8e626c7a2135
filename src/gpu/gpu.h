/*
 * gpu.h -- the GPU backend: the CUDA driver API and NVRTC loaded with dlopen
 * at run time (the same binary runs where neither exists), kernels compiled
 * per plan pass and cached in memory and on disk, device buffers pooled, and
 * passes launched under the strategy the caller chose.
 */
#ifndef RED_GPU_H
#define RED_GPU_H

#include "check/plan.h"
#include "core/buf.h"
#include "core/extents.h"
#include "core/hook.h"
#include "core/results.h"
#include "gpu/cu_api.h"

typedef struct gpu_dev gpu_dev;

typedef struct gpu_stats {
    long long mem_hits;     /* kernel found loaded in this process           */
    long long disk_hits;    /* CUBIN read from the disk cache                 */
    long long disk_refused; /* disk entries refused by the trust rule        */
    long long compiles;     /* NVRTC compilations                            */
    double compile_ms;      /* time spent in NVRTC                           */
    long long pool_bytes;   /* device memory held by the buffer pool         */
    long long pool_live;    /* of which in use now                           */
} gpu_stats;

/* Open the device of the CUDA context current on this thread, or device 0
 * where none is.  RED_ERR_DEVICE with a message saying why when there is no
 * driver, no device or no NVRTC. */
int gpu_open(gpu_dev **out, util_diag *diag);
void gpu_close(gpu_dev *g);

/* The driver, the primary context and the ordinal of the device `g` runs on,
 * for what shares the device with it (the NCCL engine, src/ranks). */
const cu_api *gpu_driver(gpu_dev *g, CUcontext *ctx, int *ordinal);

/* Limits on the NVRTC work one expression may cause (the API's
 * RED_OPT_MAX_SOURCE and RED_OPT_MAX_COMPILES, which the messages name):
 * NVRTC's time grows with the source, and a service compiling texts it does
 * not trust bounds both.  RED_ERR_LIMIT past either. */
typedef struct gpu_limits {
    long long max_source;   /* bytes of one compiled source; 0: no limit    */
    int max_compiles;       /* NVRTC compiles counted in *compiles; 0: none */
    int *compiles;          /* the caller's count (one expression's, across
                               its runs); NULL: not counted                */
} gpu_limits;

/* How one run goes: on which stream, and where its results stay.  With a
 * stream and device results the run may return with its work still queued
 * (pending): gpu_finish then waits, checks the device's fault record and
 * releases the run's buffers. */
typedef struct gpu_run {
    void *stream;           /* CUstream, or NULL: the default stream        */
    int device_results;     /* RED_RESULTS_*: where results stay            */
    int timings;            /* record the events (RED_OPT_TIMINGS)          */
    int blas;               /* cuBLASLt may run matrix products (RED_OPT_BLAS) */
    gpu_limits limits;
    const core_cancel *cancel;   /* checked between kernels                  */
    core_bounds bounds;     /* evaluates explicit ranges of free indices    */
    /* filled by gpu_execute */
    int pending;
    const plan *p;
    core_buf *bufs;           /* for fault messages: a copy (bufs_owned) once
                               the run is pending, else the caller's        */
    int bufs_owned;
    unsigned long long ws;  /* this run's fault record, counter, key stats  */
    int ws_keys_dirty;      /* its key flag word may be nonzero: not clean  */
    int ranks_fault_used;   /* a split run's hook may write RJ_WS_RFAULT:    */
    unsigned long long ranks_fault;   /* what it holds, read back with the
                               fault record (nonzero: a rank faulted)       */
    unsigned long long *release;   /* buffers to give back at the end       */
    int nrelease, caprelease;
    unsigned long long release_inl[16];   /* release's first home: no allocation */
    /* buffers of the runs before this one on its stream, still queued ahead
     * of it (gpu_rechain): it takes what it needs from them first, which
     * stream order makes safe; the rest is given back at its end */
    unsigned long long *reuse;
    int nreuse, capreuse;
    unsigned long long reuse_inl[16];
    /* timings: events around uploads, kernels, downloads; host NVRTC time */
    void *ev[4];
    int timing_failed;      /* an event record failed: no device timings    */
    double compile_ms;
    double upload_ms, kernel_ms, download_ms;   /* read by gpu_finish   */
} gpu_run;

/* Whether a result of `ndim` dimensions stays in device memory under
 * RED_OPT_RESULTS = `mode` (RED_RESULTS_*): all with RED_RESULTS_DEVICE,
 * the arrays with RED_RESULTS_DEVICE_ARRAYS, none with RED_RESULTS_HOST. */
static inline int gpu_result_on_device(int mode, int ndim)
{
    return mode == RED_RESULTS_DEVICE || (mode == RED_RESULTS_DEVICE_ARRAYS && ndim > 0);
}

/* Make a pending run ready to be followed by the next run of the same plan
 * on the same stream, its results on the device, without waiting for it
 * (red_run on a stream with RED_RESULTS_DEVICE): the next run keeps its
 * workspace, so a fault of either is reported when the last is finished,
 * and may reuse its buffers and the `nextra` buffers `extra` (the results
 * the caller gives up), all of them still queued.  0 where the run cannot
 * be followed so (it is then finished as before). */
int gpu_rechain(gpu_dev *g, gpu_run *run, const unsigned long long *extra, int nextra);

/* Run every pass of `p`.  bufs[i].data are host pointers unless
 * on_device[i]; results come back to host temporaries in `out`, or stay on
 * the device (out->t[i].data are device pointers): all of them with
 * RED_RESULTS_DEVICE, the arrays (ndim > 0) with RED_RESULTS_DEVICE_ARRAYS.
 * Small results on their way to the host are written into the run's
 * workspace beside its fault record, so that one copy brings both back.
 * `hook` (or NULL) is called between the passes, as the CPU executor calls
 * it, with the run's device memory (core_devmem). */
int gpu_execute(gpu_dev *g, const plan *p, const core_buf *bufs, const int *on_device,
                const plan_value *scalars, int strategy, const core_pass_hook *hook, gpu_run *run,
                core_results *out, util_diag *diag);
/* Wait for a run, report a device fault, give its buffers back.  Safe to
 * call on a run that is not pending (it only releases). */
int gpu_finish(gpu_dev *g, gpu_run *run, util_diag *diag);

/* Device memory through the pool (valid until gpu_close). */
int gpu_alloc(gpu_dev *g, size_t bytes, void **ptr, util_diag *diag);
void gpu_release(gpu_dev *g, void *ptr);
/* Copy between host (0) and device (1) memory, synchronously. */
int gpu_copy(gpu_dev *g, void *dst, int dst_dev, const void *src, int src_dev, size_t bytes,
             util_diag *diag);

/* Generate and compile (NVRTC only, no driver needed) every pass of `p` for
 * `arch` ("sm_90"); used by the test suite on machines without a GPU. */
int gpu_compile_only(const plan *p, const char *arch, const gpu_limits *lim, util_diag *diag);

/* Is this pointer device memory (cuPointerGetAttribute)?  0 when unknown. */
int gpu_is_device_pointer(gpu_dev *g, const void *ptr);

void gpu_get_stats(gpu_dev *g, gpu_stats *s);

/* The choice of kernel for segments (one reduction per output) under the
 * automatic strategy, a pure function so that tests check it without a GPU:
 * `total` elements over `nout` outputs, `columns` from gpu_column_layout,
 * `nsm` multiprocessors.  `entry` (`kernel` its name) runs `group` threads per output, or per
 * chunk when chunks > 0 (each output split into that many: rj_split1 a
 * thread per chunk, rj_splitb a block, then rj_splitf); on an
 * occupancy-sized grid when occupancy_grid. */
/* The entry kernels the runtime launches, named by gpu_entry_name (modules.c): an enum, so
 * that a misspelt entry does not compile.  The generated source defines them (codegen). */
enum gpu_entry {
    GPU_E_MAP, GPU_E_BLOCK, GPU_E_FINAL, GPU_E_SEQ, GPU_E_PERSIST, GPU_E_PERSISTV, GPU_E_SEGB,
    GPU_E_SEG1, GPU_E_SEG1V, GPU_E_SEG1A, GPU_E_SEG1S, GPU_E_SEG32, GPU_E_SEG32V, GPU_E_SEGBV,
    GPU_E_SEGNV, GPU_E_SPLIT1, GPU_E_SPLITB, GPU_E_SPLITF, GPU_E_COUNT, GPU_E_KENDS,
    GPU_E_KENDSV, GPU_E_KOFFS, GPU_E_KSCAN, GPU_E_KFUSED, GPU_E_KFUSEDV, GPU_E_KPRIV,
    GPU_E_KCOMB, GPU_E_SPLITBV, GPU_E_SEGM, GPU_E_SEGMF, GPU_E_SEGBS, GPU_E_TILE, GPU_E_TILE2, GPU_E_SCAN, GPU_E_SCANW, GPU_E_SCANWV, GPU_E_SCANLV, GPU_E_SEG32D, GPU_E_SEGL, GPU_NENTRIES
};
extern const char *const gpu_entry_name[GPU_NENTRIES];

typedef struct gpu_seg_choice {
    int entry;              /* enum gpu_entry */
    const char *kernel;     /* its name */
    int group;
    long long chunks;
    int occupancy_grid;
    int long_rows;   /* a warp per output, where a block over 16-byte loads (rj_segbv) is faster */
} gpu_seg_choice;
gpu_seg_choice gpu_choose_segments(long long nout, long long total, int columns, int nsm);
struct cg_kernel;
/* 1 when every load of the pass's element code has its fastest-varying
 * dimension subscripted by a free index (a column layout). */
int gpu_column_layout(const struct cg_kernel *k, const core_buf *bufs);

/* Fault injection, for tests (tests/test_faults.c): the `nth` next call of
 * that kind in this process (1: the very next) fails as the real failure
 * would: NVRTC rejecting a kernel, cuModuleLoadData failing, cuMemAlloc out
 * of memory (the pool's retry included), a kernel launch refused
 * (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES).  0 disarms. */
enum { GPU_FAULT_NVRTC, GPU_FAULT_MODULE_LOAD, GPU_FAULT_ALLOC, GPU_FAULT_LAUNCH, GPU_NFAULTS };
void gpu_inject_fault(int kind, int nth);

#endif
