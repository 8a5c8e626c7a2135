/*
 * api_internal.h -- what the files of the public API share: the program (parsed text, shared
 * and reference counted, caching one plan per binding signature), the context, the prepared
 * expression with its bindings and results, and the helpers each file calls in the others.
 * Nothing outside src/api/ includes it.
 */
#ifndef API_INTERNAL_H
#define API_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "check/check.h"
#include "ranks/ranks.h"
#include "core/results.h"
#include "core/unroll.h"
#include "gpu/gpu.h"
#include "parser/ast.h"
#include "redjit.h"
#include "util.h"

#define PROGRAM_CACHE_MAX 256     /* texts a context keeps parsed               */
#define PLAN_CACHE_MAX 16         /* binding signatures a program keeps planned */
#define CACHE_MB_DEFAULT 64       /* RED_OPT_CACHE_MB                           */
#define API_NOPTS (RED_OPT_BLAS + 1)            /* size of the option arrays    */
#define MAX_SOURCE_DEFAULT (16 << 20)          /* RED_OPT_MAX_SOURCE: bytes    */

/* A plan for one binding signature of a program.  Counted references: the
 * program's list holds one, and so does each expression that last ran it or
 * whose results came from it, so a plan dropped from the list (beyond
 * PLAN_CACHE_MAX, or with its program) lives until they are done. */
/* A plan with its small inner reductions written out for some binding sizes (core_unroll). */
typedef struct plan_unrolled {
    core_unroll_key key;
    util_arena arena;
    plan *plan;
    struct plan_unrolled *next;
} plan_unrolled;
#define PLAN_UNROLLED_MAX 4     /* kept per plan; sizes past them run the plan as it is */

typedef struct plan_entry {
    char *sig;              /* canonical signature text */
    util_arena arena;
    plan *plan;
    size_t bytes;
    int refs;
    uint32_t unroll_passes;    /* core_unroll_candidates(plan)            */
    plan_unrolled *unrolled;   /* newest first (the program's lock) */
    struct plan_entry *next;
} plan_entry;

typedef struct program {
    char *text;
    uint64_t hash;          /* of text */
    size_t bytes;           /* text and AST */
    util_arena arena;       /* the AST */
    ast_program *ast;
    int refs;
    pthread_mutex_t lock;   /* guards plans */
    plan_entry *plans;      /* newest first, at most PLAN_CACHE_MAX */
} program;

typedef struct cache_entry {
    program *pg;
} cache_entry;

struct red_ctx {
    pthread_mutex_t lock;
    int opt[API_NOPTS];
    red_log_fn log;
    void *log_user;
    char errmsg[UTIL_DIAG_MAX];
    cache_entry cache[PROGRAM_CACHE_MAX];   /* least recently used first */
    int ncache;
    red_expr *exprs;        /* live prepared expressions (closed with ctx) */
    gpu_dev *gpu;           /* opened on first use                          */
    int gpu_tried;
    int interrupts;         /* red_interrupt counts up; runs watch it       */
    util_diag gpu_err;      /* why there is no GPU                          */
    ranks_comm *comm;        /* red_attach_mpi: runs are collective over it  */
    ranks_comm *nccl;        /* red_attach_nccl(_id): runs over device arrays */
};

typedef struct binding {
    char *name;
    int is_array;
    red_array arr;
    plan_value scalar;      /* scalars by value */
    plan_value scalar_im;   /* a complex scalar's imaginary part */
    red_dtype sdtype;
    int weak;
    int split;              /* red_bind_split: the split axis + 1; 0: whole  */
} binding;

struct red_expr {
    red_ctx *ctx;
    program *pg;
    int opt[API_NOPTS];     /* the context's options when it was prepared, then
                               red_expr_set_option's: a context's later changes
                               never reach it                                  */
    binding *binds;         /* binds_inl until more are needed              */
    int nbinds, capbinds;
    int borrow_names;       /* red_eval's: binding names are the caller's,
                               valid for the call, not copies               */
    binding binds_inl[4];
    /* results of the last run (their temporaries and names: run_pe's plan) */
    core_results temps;
    int nresults;
    unsigned char *detached;   /* detached_inl unless there are more results */
    unsigned char detached_inl[16];
    util_buf explain;
    red_expr *prev, *next;  /* in ctx->exprs (prepared ones only) */
    int on_list;
    /* GPU runs */
    gpu_dev *gpu;           /* the backend of the last run, NULL: the CPU   */
    gpu_run run;            /* its queued work, stream, result placement    */
    int compiles;           /* NVRTC compiles it caused (RED_OPT_MAX_COMPILES) */
    void *stream;
    int results_on_device;  /* RED_RESULTS_* of the run: which temps.t[].data
                               are device pointers (temp_on_device)          */
    /* the plan for the binding signature of the last run: rebinding the
     * same names with arrays of the same kinds, types and ranks reuses it */
    plan_entry *last_pe;
    plan_entry *run_pe;     /* the plan of the current results (a queued GPU run reads it) */
    int sig_dirty;
    red_timings timings;
    /* runs over split arrays (api/split.c) */
    ranks_plan *rplan;      /* the plan this rank runs, for last_pe's plan   */
    int64_t *split_res;     /* per result: split axis (-1), offset, extent   */
    ranks_comm *rcomm;      /* the engine of the split run in progress       */
    ranks_comm *rctl;       /* and the one its ranks agree through           */
    /* last, so that expr_init zeroes the fields above and only the first byte of
     * each message (4 KiB that red_eval would clear on every call) */
    util_diag diag;         /* the current call's error, cleared as it starts */
    char errmsg[UTIL_DIAG_MAX];   /* red_expr_errmsg: the last failing call's   */
};

/* ---- context.c --------------------------------------------------------------------------- */

void plan_entry_unref(plan_entry *pe);
void program_unref(program *pg);
/* Keep `d`'s message as the context's last error (red_errmsg). */
void ctx_note_error(red_ctx *ctx, const util_diag *d);
/* Fail a context call with `code` and the message (also when ctx is NULL: then
 * there is nowhere to keep it); returns `code`. */
int ctx_fail(red_ctx *ctx, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Whether `opt` is a RED_OPT_* option; whether `value` is allowed for it. */
int api_opt_known(red_option opt);
int api_check_opt(red_option opt, int value);
void ctx_trim(red_ctx *ctx);
/* The parsed program for `text`, under the context's RED_OPT_MAX_TEXT and
 * RED_OPT_MAX_NODES (a cached one too). */
int ctx_program(red_ctx *ctx, const char *text, program **out, util_diag *diag);
/* The parser's limits under the context's options (defaults when ctx is NULL). */
ast_limits ctx_ast_limits(red_ctx *ctx);
/* The GPU runtime's limits under an expression's options. */
gpu_limits expr_gpu_limits(red_expr *e);
gpu_dev *ctx_gpu(red_ctx *ctx);

/* ---- expr.c ------------------------------------------------------------------------------ */

int expr_temp_on_device(const red_expr *e, int t);
void expr_clear_results(red_expr *e);
void expr_init(red_expr *e, red_ctx *ctx, program *pg);
void expr_release(red_expr *e);
/* Start a call that can fail: the last call's error is no longer the current one (the
 * message of the last failing call stays in e->errmsg). */
void expr_start(red_expr *e);
/* Fail with `code`: the message the call set in e->diag (red_errstr's if none) becomes
 * red_expr_errmsg's, and the context's (red_errmsg); returns `code`. */
int expr_fail(red_expr *e, int code);
/* Fail with `code` and a message. */
int expr_failf(red_expr *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int expr_opt(red_expr *e, red_option opt);
int expr_plan(red_expr *e, plan **out);
int expr_backend(red_expr *e, gpu_dev **gpu);
/* The binding of `name`, or NULL. */
binding *expr_find_binding(red_expr *e, const char *name);
/* The plan's bound arrays and scalars from the expression's bindings. */
int expr_inputs(red_expr *e, const plan *p, core_buf *bufs, plan_value *scalars, int *on_device);
/* A successful run's results become the expression's (plan p's). */
int expr_take_results(red_expr *e, const plan *p);
/* The plan a run of p (the expression's last_pe's) with the bound arrays runs: p, or p with
 * its small inner reductions written out for their sizes (core/unroll.h). */
const plan *expr_run_plan(red_expr *e, const plan *p);
double expr_now_ms(void);

/* ---- split.c ----------------------------------------------------------------------------- */

/* The context's communicator freed (red_close). */
void ctx_detach_comm(red_ctx *ctx);
/* red_run on a context with a communicator: collective over its ranks. */
int expr_run_split(red_expr *e);
/* Plan p on the GPU for e (its run, results, timings), `hook` between the passes (or NULL);
 * `chained`: queued behind the last run (expr_chains), which keeps its workspace. */
int expr_gpu_run(red_expr *e, gpu_dev *gpu, const plan *p, const core_buf *bufs, const int *on_device,
                 const plan_value *scalars, const core_cancel *cancel, const core_pass_hook *hook, int chained);
/* Result i exists (the last run gave it; taken or not): 0, else the failure, set. */
int expr_result_index(red_expr *e, int i);
/* The plan this rank runs for `p` when arrays are bound split and a communicator is attached
 * (else p itself).  Nothing collective. */
int expr_split_plan(red_expr *e, plan *p, plan **out);

#endif
