/*
 * gpu_internal.h -- what the GPU backend's rooms share (the .c files of src/gpu): the device, a pass's
 * kernels, a run in progress, and the functions one room offers the others.  gpu.h stays the
 * backend's interface to the API (src/api/); nothing outside src/gpu/ includes this.
 */
#ifndef RED_GPU_INTERNAL_H
#define RED_GPU_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/cuda.h"
#include "codegen/device/rj_abi.h"
#include "cu_api.h"
#include "gpu.h"

typedef struct module_entry {
    uint64_t key;
    char *src;                     /* the source it was built from: a hit compares it, so
                                      two sources whose keys collide never share a module */
    size_t len;
    CUmodule mod;
    struct module_entry *next;
} module_entry;

typedef struct pass_entry {        /* generated and loaded kernels of one plan pass */
    uint64_t uid;                  /* the plan's */
    struct {
        int entry;                 /* enum gpu_entry */
        CUfunction f;
        int occupancy;             /* blocks per SM, 0 until asked */
        int smem;                  /* dynamic shared memory allowed (bytes; 0: not raised yet) */
        int smem_static;           /* its static shared memory (bytes; -1: not asked yet) */
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
    uint64_t blas_key;             /* blas.c: the layout of the last matrix product cuBLASLt */
    unsigned long long blas_algo[8]; /* ran, its algorithm and workspace (0 key: none) */
    size_t blas_ws;
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
    int smem_optin;   /* dynamic shared memory a block may have, bytes */
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
    /* The host ranges host_pin page-locked (results' buffers, kept by their
     * expressions): a copy from one of them to the device is asynchronous,
     * so a run that uploads one is not left queued (upload).  g->lock. */
    struct {
        const void *p;
        size_t n;
    } *locked;
    int nlocked, caplocked;
    void *blas;                    /* blas.c: the cuBLASLt handle, made on first use, */
    void (*blas_close)(void *);    /* and what gives it back (gpu_close) */
    int blas_tried;
    pthread_t preload;             /* nvrtc_preload, joined by gpu_close */
    int preloading;
};

/* The pinned staging area's size; rj_publish's area (RJ_PUB_SEQ, RJ_PUB_IMAGE) and a
 * workspace's image follow it.  The workspace's layout is in rj_abi.h (RJ_WS_*). */
#define PINNED_SIZE (64 * 1024)

#define BLOCK CG_BLOCK

/* execute's bookkeeping on its stack up to this many bytes (else malloc) */
#define GPU_SCRATCH 4096

int gpu_cu_fail(gpu_dev *g, CUresult r, const char *what, util_diag *diag);

/* A checked driver call: a failure returns RED_ERR_DEVICE (RED_ERR_NOMEM when out of memory)
 * with the driver's name for it; needs `g` and `diag` in scope. */
#define CU(call, what)                                         \
    do {                                                       \
        CUresult r_ = (call);                                  \
        if (r_) return gpu_cu_fail(g, r_, what, diag);         \
    } while (0)

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
    int epi_done;       /* the last segment launch ran the next pass (rj_epilogue) */
} run_ctx;

static inline long long cdiv(long long a, long long b) { return (a + b - 1) / b; }

/* keys.c: how gpu_key_segments finds a keyed pass's keys (see there) */
enum { KEYS_FUSED, KEYS_OFFSETS, KEYS_SCAN };

/* execute's answer when the last pass's keys, assumed sorted, were not:
 * everything is given back, and the caller runs the plan again without the
 * assumption (never reaches the library's caller) */
#define KEYS_RETRY (-1000)

/* A large host result's buffer, kept from the run before (core_results), is
 * page-locked with the driver the second time it is used, and stays so
 * while it is kept: a copy from the GPU into registered memory runs four
 * times as fast as into pageable memory, and registering costs about one
 * copy (bench/TUNING.md, "Host memory of results").  Not where it fails: it
 * is only slower. */
enum { PIN_MIN = 4 << 20 };

/* A result bound for the host, waiting in the pinned staging area or the workspace's image
 * at `off` until the run's one synchronisation. */
typedef struct gpu_staged {
    void *dst;
    size_t off, bytes;
} gpu_staged;

/* One execution of a plan (run.c), in phases: set-up, uploads, each pass (pass.c), results,
 * the read-back and the end.  Its arrays live on execute's stack where they fit. */
typedef struct gpu_exec {
    gpu_dev *g;
    const plan *p;
    const core_buf *bufs;
    const int *on_device;
    const plan_value *scalars;
    int strategy;
    gpu_run *run;
    core_results *out;
    util_diag *diag;
    int retry;               /* the second run after KEYS_RETRY */
    CUstream s;
    run_ctx r;
    /* the run's bookkeeping, zeroed: on the stack for any plan of a usual
     * size (malloc and free were a third of a warm run's host time) */
    unsigned char *scratch, *scratch_stack;
    core_buf *tdesc;
    CUdeviceptr *tptr, *in_adj;
    int64_t *vlo, *vhi;
    int *keep;
    int *to_host;            /* a result the host receives          */
    int *ws_off;             /* > 0: it lives in the workspace, there */
    int *done;
    core_vars vars;
    long long *params, *params_stack;   /* the pass's parameter block */
    int nparams_stack;
    size_t ws_used;          /* of the workspace, what comes back: the fault record, then results */
    int host_bound;          /* a result comes to the host */
    int ends_synced;         /* the run ends by reading its workspace back */
    int flag_dirty;          /* the key flag word may be nonzero (see gpu_ws_get) */
    struct {                 /* the last pass's key check, left to the final read */
        pass_entry *e;       /* NULL: none */
        uint64_t kh;         /* gpu_count_key of its arrays */
        long long nkeys;
        int guessed;         /* nkeys taken from the run before */
    } deferred;
    double nvrtc_before;
    gpu_staged *staged;
    int nstaged;
    int queued;              /* left queued on the caller's stream (pending) */
    int have_err, ws_dirty;
    unsigned long long err[4];
    int epi_pass;            /* > 0: this pass already ran inside the one before (rj_epilogue) */
    /* between the passes (a run over split arrays, src/ranks): its temporaries are read and
     * written there, so no kernel publishes early and no key count is guessed; NULL: none */
    const core_pass_hook *hook;
} gpu_exec;

/* ---- what the rooms offer each other ---------------------------------------------------- */

/* faults.c */
int gpu_fault_now(int kind);
int gpu_report_device_fault(run_ctx *r, const unsigned long long err[4], const core_buf *bufs);

/* nvrtc.c */
int gpu_nvrtc_preload(pthread_t *thread);
int gpu_nvrtc_key(const char *arch, char *buf, size_t n, util_diag *diag);
int gpu_nvrtc_compile(const char *src, const char *arch, void **cubin, size_t *size, double *ms,
                      util_diag *diag);
void gpu_dump_kernel(const char *name, const char *src, const void *cubin, size_t n);
/* gpu_limits (NULL: none): RED_ERR_LIMIT when pass `pi`'s source of `bytes`
 * is over the limit; before an NVRTC compile, RED_ERR_LIMIT when the count is
 * at the limit, else the compile is counted. */
int gpu_limit_source(const gpu_limits *lim, int pi, size_t bytes, util_diag *diag);
int gpu_limit_compile(const gpu_limits *lim, util_diag *diag);

/* device.c */
int gpu_pool_get(gpu_dev *g, size_t size, CUdeviceptr *out, util_diag *diag);
void gpu_pool_put(gpu_dev *g, CUdeviceptr p);
int gpu_ws_get(gpu_dev *g, CUstream s, CUdeviceptr *out, util_diag *diag);
void gpu_ws_put_clean(gpu_dev *g, CUdeviceptr p);
void gpu_pinned_ensure(gpu_dev *g);
void gpu_events_take(gpu_dev *g, void *ev[4]);
void gpu_events_give(gpu_dev *g, void *ev[4]);
void gpu_read_timings(gpu_dev *g, gpu_run *run);
void gpu_host_pin(gpu_dev *g, core_results *out, void *h, size_t bytes);

/* modules.c */
void gpu_modules_free(gpu_dev *g);
int gpu_pass_kernels(gpu_dev *g, const plan *p, int pi, pass_entry **out, util_diag *diag);
int gpu_get_fn(run_ctx *r, pass_entry *e, int entry, int *slot);

/* launch.c */
int gpu_defer_release(run_ctx *r, CUdeviceptr p);
int gpu_run_get(run_ctx *r, size_t size, CUdeviceptr *out, int release);
int gpu_launch(run_ctx *r, pass_entry *e, int entry, long long grid);
/* The same with `smem` bytes of dynamic shared memory a block (at most
 * gpu_dev.smem_optin). */
int gpu_launch_smem(run_ctx *r, pass_entry *e, int entry, long long grid, int smem);
/* The same with `threads` a block (BLOCK for every kernel but rj_scan). */
int gpu_launch_block(run_ctx *r, pass_entry *e, int entry, long long grid, int smem, int threads);
int gpu_occupancy_grid(run_ctx *r, pass_entry *e, int entry, long long *grid);
int gpu_upload(run_ctx *r, const core_buf *b, CUdeviceptr *adj);
void gpu_set_array(long long *P, int base, CUdeviceptr ptr, const core_buf *b);
void gpu_publish_arm(run_ctx *r);
void gpu_publish_disarm(run_ctx *r, int rc);
CUresult gpu_publish_wait(gpu_dev *g, CUstream s, unsigned long long seq, int *seen);

/* strategy.c */
int gpu_vec_ok(const run_ctx *r, const pass_entry *e);
int gpu_ranged_scalar_ok(const run_ctx *r, const pass_entry *e);
int gpu_ranged_vec_ok(const run_ctx *r, const pass_entry *e);
uint64_t gpu_count_key(const run_ctx *r, const pass_entry *e, long long nout);

/* segments.c */
int gpu_run_full(run_ctx *r, pass_entry *e, long long n, int strategy, int ordered);
int gpu_count_on_device(run_ctx *r, pass_entry *e, long long nout, long long step, long long *total);
int gpu_run_segments(run_ctx *r, pass_entry *e, long long nout, long long total, int strategy);
/* A scan pass (scan.c): nout rows of L elements each; RED_STRATEGY_SEQUENTIAL has a
 * warp walk whole rows (rj_scanw), RED_STRATEGY_PERSISTENT a block, RED_STRATEGY_TREE
 * sends tiles through the look-back, the others choose from the shape. */
int gpu_run_scan(run_ctx *r, pass_entry *e, long long nout, long long L, int strategy);

/* blas.c: pass e, a matrix product (cg_kernel.gemm), through cuBLASLt on the run's stream:
 * 0 when it ran, GPU_BLAS_NOT_TAKEN when it cannot (no library, layouts it does not take, no
 * algorithm, RED_OPT_BLAS 0: the generated kernels then), else an error (RED_ERR_*) */
#define GPU_BLAS_NOT_TAKEN (-1)
int gpu_blas_gemm(run_ctx *r, pass_entry *e);

/* keys.c */
int gpu_key_segments(run_ctx *r, pass_entry *e, const plan_pass *ps, long long N, int mode, long long *nkeys,
                     int *sorted, CUdeviceptr *offs, long long ends[2], int *flag_dirty);
int gpu_key_fused(run_ctx *r, pass_entry *e, long long N, long long nkeys, int zero_flag, int *bad);

/* run.c, pass.c */
int gpu_exec_pass(gpu_exec *x, int pi);

#endif
