/*
 * redjit.h -- the whole public interface of libredjit.
 *
 * redjit evaluates short reduction expressions ("max(abs(x-y))",
 * "sum(A[i,k]*B[k,j]) over k") over named arrays, on an NVIDIA GPU when one
 * is present and on a multithreaded CPU executor otherwise.  This header is
 * the manual: a program should never need to read the sources to use it.
 *
 * THE LANGUAGE (in brief; docs/language.md is the reference)
 *   A text is expressions over the arrays and scalars the caller binds by
 *   name: `a, b` gives two results; statements (`d = x - y; max(abs(d))`)
 *   are separated by `;` or newlines.  A whole array (`x`) stands for all its
 *   elements, walked together with the others.  Reductions:
 *       sum prod min max any all count mean argmin argmax      (one argument)
 *       reduce(OP, EXPR)    OP one of + * min max & | ^ && || or a user `op`
 *   Index variables (unbound names used in subscripts: x[i], A[i,k]) run
 *   over the extents of what they index, or over `k in lo..hi`.  `over i, j`
 *   names the ones a reduction reduces (without it: all of its operand's not
 *   fixed outside it); the others become the dimensions of an array result.
 *   `by KEY` groups the elements by an integer key: one result per key.
 *       max(abs(x - y))                         a scalar: the largest difference
 *       sum(A[i,j]) over j                      row sums, one result per i
 *       C[i,j] = sum(A[i,k]*B[k,j]) over k      a matrix product named C
 *       sum(x[i]) by seg[i]                     a sum per segment key
 *       op cmul(a, b) = (a.0*b.0 - a.1*b.1, a.0*b.1 + a.1*b.0) identity (1, 0);
 *       reduce(cmul, (re[i], im[i])) over i     a user operator over a tuple
 *
 * LINKING
 *     cc prog.c $(pkg-config --cflags --libs redjit)      (or: -lredjit)
 *   CMake: find_package(redjit) and target_link_libraries(prog redjit::redjit).
 *   The static library libredjit.a also needs OpenMP, libm and libdl:
 *     cc prog.c -lredjit -fopenmp -lm -ldl    (pkg-config --static --libs redjit)
 *   CUDA is not a link dependency: the driver and NVRTC are loaded at run
 *   time when a GPU is first needed, and a machine without them runs on the
 *   CPU.
 *
 * LIFECYCLE (the shape of SQLite's prepare / bind / step / finalize)
 *
 *     red_ctx *ctx;  red_open(&ctx);
 *     red_expr *e;   red_prepare(ctx, "max(abs(x-y))", &e);
 *     red_bind_array(e, "x", &xa);  red_bind_array(e, "y", &ya);
 *     red_run(e);
 *     double m;      red_result_f64(e, 0, &m);
 *     red_finalize(e);  red_close(ctx);
 *
 * or in one call, through a cache of prepared expressions keyed by the text:
 *
 *     red_binding b[2] = {{"x", xa}, {"y", ya}};
 *     double m;  red_eval_f64(ctx, "max(abs(x-y))", b, 2, &m);
 *
 * OWNERSHIP
 *   - Array data bound with red_bind_array is BORROWED: redjit reads it during
 *     red_run and never writes it, never frees it and keeps no pointer to it
 *     after the call that used it returns.  Descriptors (red_array) are copied.
 *   - Strings passed in (expression text, names) are copied when kept.
 *   - Result memory returned by red_result is OWNED BY THE EXPRESSION and valid
 *     until the next red_run or red_finalize on it (the next run may write its
 *     own results into the same memory); red_result_detach hands a copy to the
 *     caller, who releases it with red_free.
 *   - An expression keeps its large host buffers from one run for the next
 *     (its results, and on the CPU a ranged pass's per-output ranges, 24 bytes
 *     an output row), so that the next run need not fault in new memory;
 *     red_finalize frees them.
 *   - Messages from red_errmsg / red_expr_errmsg are owned by the library (see
 *     ERRORS for how long they stay).
 *
 * ERRORS
 *   Every fallible call returns an int status: RED_OK (0) or one of the
 *   red_status codes below; the comment of each call lists the codes it can
 *   return.  RED_ERR_INTERNAL (a bug in redjit) is possible from any of them
 *   and is not listed.  The library never prints, never aborts and never
 *   exits.  After any error the context and the expression stay usable.
 *
 *   Every failing call leaves a detailed message (for errors in the text:
 *   "line:col: message", the source line and a caret under the offending
 *   text).  Read it where the call was made:
 *     - a call on an expression (red_bind_*, red_run, red_sync, red_result*,
 *       red_explain*, ...): red_expr_errmsg(e); the context keeps a copy;
 *     - a call on a context (red_prepare, red_eval, red_set_option, ...):
 *       red_errmsg(ctx).
 *   As in SQLite, a message describes the most recent FAILING call on that
 *   object: calls that succeed leave it as it was, so read it only after a
 *   status other than RED_OK.  It stays valid until the next failing call on
 *   the same object ("" until the first).  Calls without an object to hold a
 *   message (red_open, red_array_init, red_array_from_dlpack, any call given
 *   a NULL handle) only return their status.
 *
 * THREADS
 *   A context may be used from several threads at once provided each thread
 *   works on its own red_expr (red_eval is safe from any thread).  One red_expr
 *   must not be used by two threads at the same time.
 */
#ifndef REDJIT_H
#define REDJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#  define RED_API __declspec(dllexport)
#elif defined(__GNUC__)
#  define RED_API __attribute__((visibility("default")))
#else
#  define RED_API
#endif

/* ---- Version ------------------------------------------------------------ */

#define REDJIT_VERSION_MAJOR 0
#define REDJIT_VERSION_MINOR 1
#define REDJIT_VERSION_PATCH 0
#define REDJIT_VERSION_NUMBER \
    (REDJIT_VERSION_MAJOR * 10000 + REDJIT_VERSION_MINOR * 100 + REDJIT_VERSION_PATCH)
#define REDJIT_VERSION_STRING "0.1.0"

/* The version of the library actually linked (compare with
 * REDJIT_VERSION_NUMBER to detect a header/library mismatch).  No status. */
RED_API int red_version_number(void);
RED_API const char *red_version_string(void);

/* ---- Status codes (explicitly numbered; never renumbered) --------------- */

typedef enum red_status {
    RED_OK              = 0,
    RED_ERR_NOMEM       = 1,  /* an allocation failed (host or device)          */
    RED_ERR_ARG         = 2,  /* a bad argument to an API call (NULL, range)    */
    RED_ERR_SYNTAX      = 3,  /* the expression does not parse                  */
    RED_ERR_NAME        = 4,  /* unknown or unbound name                        */
    RED_ERR_TYPE        = 5,  /* type error (bit operation on floats, ...)      */
    RED_ERR_SHAPE       = 6,  /* shape, rank or index-extent conflict           */
    RED_ERR_BIND        = 7,  /* a binding is unusable (dtype, NULL data, ...)  */
    RED_ERR_INDEX       = 8,  /* a subscript is out of range at run time        */
    RED_ERR_EMPTY       = 9,  /* argmin/argmax over nothing                     */
    RED_ERR_KEYS        = 10, /* bad keys for `by` (negative, unsorted+ordered) */
    RED_ERR_LIMIT       = 11, /* an implementation limit (nesting, size)        */
    RED_ERR_UNSUPPORTED = 12, /* valid but not supported by this build/backend  */
    RED_ERR_DEVICE      = 13, /* no usable GPU, or a CUDA driver error          */
    RED_ERR_COMPILE     = 14, /* NVRTC rejected generated code (log in message) */
    RED_ERR_MISUSE      = 15, /* API misuse (reserved: no call returns it now)  */
    RED_ERR_INTERNAL    = 16, /* a bug in redjit: please report it              */
    RED_ERR_INTERRUPTED = 17, /* stopped by red_interrupt                       */
    RED_ERR_COMM        = 18  /* a collective of the attached communicator failed */
} red_status;

/* A static, human-readable name for a status code ("syntax error", ...);
 * "unknown status" for a number that is not one.  No status. */
RED_API const char *red_errstr(int status);

/* ---- Data types ---------------------------------------------------------- */

typedef enum red_dtype {
    RED_BOOL = 1,   /* one byte, 0 or 1                         */
    RED_I32  = 2,
    RED_I64  = 3,
    RED_U32  = 4,
    RED_U64  = 5,
    RED_F16  = 6,   /* IEEE half; input only, computed in f32   */
    RED_BF16 = 7,   /* bfloat16; input only, computed in f32    */
    RED_F32  = 8,
    RED_F64  = 9,
    RED_I8   = 10,  /* 8- and 16-bit integers: inputs, computed in */
    RED_U8   = 11,  /* i32 (a sum or product of them in i64)       */
    RED_I16  = 12,
    RED_U16  = 13,
    RED_C64  = 14,  /* complex: (re, im) pairs of f32 / f64, as     */
    RED_C128 = 15   /* NumPy's complex64 / complex128 (arrays only) */
} red_dtype;

/* Size in bytes of one element of `t`, 0 for an unknown type.  No status. */
RED_API size_t red_dtype_size(red_dtype t);
/* Lower-case name of `t` as the language spells it ("f32"), or "?".  No
 * status. */
RED_API const char *red_dtype_name(red_dtype t);

/* ---- Array descriptors --------------------------------------------------- */

#define RED_MAX_DIMS 8

typedef enum red_memory {
    RED_MEM_HOST = 1,   /* ordinary host memory (DLPack kDLCPU)   */
    RED_MEM_CUDA = 2    /* CUDA device memory   (DLPack kDLCUDA)  */
} red_memory;

/* A plain descriptor the caller fills in.  `strides` are counted in
 * ELEMENTS, not bytes (as DLPack), may be zero (broadcast) or negative.
 * A 0-d array (ndim == 0) is a scalar.  Use red_array_init to fill one. */
typedef struct red_array {
    void      *data;
    red_dtype  dtype;
    int        ndim;
    int64_t    shape[RED_MAX_DIMS];
    int64_t    strides[RED_MAX_DIMS];
    red_memory memory;      /* 0 is taken as RED_MEM_HOST          */
    int        device_id;   /* CUDA ordinal for RED_MEM_CUDA       */
} red_array;

/* Fill `a` for `data` of the given type and shape; `strides` NULL means
 * C order (row-major, contiguous).  Host memory.
 * Returns RED_OK, or RED_ERR_ARG: `a` NULL, ndim outside 0..RED_MAX_DIMS,
 * `shape` NULL with ndim > 0, a negative extent, or more elements than an
 * int64 counts (no message: there is no context). */
RED_API int red_array_init(red_array *a, void *data, red_dtype dtype, int ndim,
                           const int64_t *shape, const int64_t *strides);

/* Fill `a` from a DLPack DLTensor (pass a `const DLTensor *`).  Byte offset,
 * strides (NULL = compact row-major), CPU and CUDA devices are honoured.
 * Returns RED_OK, or (no message: there is no context)
 *   RED_ERR_ARG   `a` or `dltensor` NULL;
 *   RED_ERR_BIND  an unsupported dtype or device, a NULL shape with ndim > 0,
 *                 ndim outside 0..RED_MAX_DIMS, a negative or overflowing
 *                 shape, NULL data for a tensor with elements. */
RED_API int red_array_from_dlpack(red_array *a, const void *dltensor);

/* Number of elements (product of the shape; 1 for a scalar; INT64_MAX where
 * the product does not fit in an int64; 0 for NULL).  No status. */
RED_API int64_t red_array_size(const red_array *a);

/* ---- Context ------------------------------------------------------------- */

typedef struct red_ctx  red_ctx;
typedef struct red_expr red_expr;

/* Create a context.  No GPU is touched until an expression needs one; the
 * context then runs on the device of the CUDA context current on that
 * thread (cudaSetDevice's, a framework's), or on device 0 where none is,
 * and keeps it.  Its device results say that device in device_id.
 * Returns RED_OK, RED_ERR_ARG (`out` NULL) or RED_ERR_NOMEM. */
RED_API int red_open(red_ctx **out);
/* Destroy a context and every expression still prepared on it.  NULL is a
 * no-op.  No status. */
RED_API void red_close(red_ctx *ctx);

/* Ask every evaluation running on `ctx` to stop at its next safe point
 * (between blocks of 64K elements on the CPU, between kernels on the GPU);
 * they return RED_ERR_INTERRUPTED and the context stays usable.  Only sets a
 * counter, so it may be called from a signal handler (Ctrl-C in a REPL).
 * No status. */
RED_API void red_interrupt(red_ctx *ctx);

/* The message of the last failing call on `ctx` or on any of its expressions,
 * from any thread, or "" if none (see ERRORS).  The string is a copy owned by
 * the calling thread, valid until its next red_errmsg call.  No status. */
RED_API const char *red_errmsg(red_ctx *ctx);

typedef enum red_option {
    RED_OPT_DEVICE     = 1, /* RED_DEVICE_*                          default AUTO */
    RED_OPT_STRATEGY   = 2, /* RED_STRATEGY_*                        default AUTO */
    RED_OPT_THREADS    = 3, /* CPU threads, 0 = all cores            default 0    */
    /* 4 is reserved.  Subscripts are always bounds-checked: redjit never
     * reads outside an array. */
    RED_OPT_RESULTS    = 5, /* RED_RESULTS_*: where GPU results stay  default HOST */
    RED_OPT_CACHE_MB   = 6, /* memory, in MiB, the context may keep for parsed
                               programs and their plans (red_eval's cache and
                               prepared texts); the oldest are dropped beyond it.
                               Context only (RED_ERR_ARG on an expression).
                               0..65536                            default 64   */
    RED_OPT_TIMINGS    = 7, /* 1: time the GPU phases of each run with CUDA
                               events for red_last_timings (four event
                               records, about 5 us of host time a call);
                               0: those phases read 0            default 0    */
    /* Limits, for a service that prepares texts it does not trust (see
     * docs/reliability.md, "Running untrusted expressions").  Past one, the
     * call returns RED_ERR_LIMIT and the message names the option, e.g.
     * "expression text is 70000 bytes: the limit is 65536 (RED_OPT_MAX_TEXT)".
     * The defaults are the library's own ceilings, or no limit. */
    RED_OPT_MAX_TEXT   = 8, /* bytes of an expression's text, checked by
                               red_prepare, red_eval, red_check_syntax.
                               Context only.  1..2147483646  default 2147483646 */
    RED_OPT_MAX_NODES  = 9, /* syntax-tree nodes of an expression (about one
                               per name, literal, operator or call), checked
                               by red_prepare, red_eval, red_check_syntax.
                               Context only.  1..1048576     default 1048576 */
    RED_OPT_MAX_PASSES = 10, /* passes of the plan for one binding signature
                               (about one per reduction that another reads),
                               checked when the expression runs, is explained
                               or precompiled.  1..256       default 256    */
    RED_OPT_MAX_SOURCE = 11, /* bytes of the CUDA source of one compile (one
                               pass's kernels, helpers included: a small
                               expression's is about 90 KB); NVRTC's time
                               grows with it.  Checked by GPU runs and
                               red_precompile.  0 = no limit,
                               0..2147483647                 default 16777216 */
    RED_OPT_MAX_COMPILES = 12, /* NVRTC compiles one prepared expression may
                               cause, counted across all its runs and
                               red_precompile calls (a red_eval call is one
                               expression); kernels found in the memory or
                               disk cache do not count.  0 = no limit,
                               0..2147483647                 default 0    */
    RED_OPT_GATHER     = 13, /* with split arrays (see SEVERAL PROCESSES): 1
                               gathers a result still indexed by a split
                               axis onto every rank; 0 leaves each rank its
                               own block                     default 0    */
    RED_OPT_BLAS       = 14 /* 1: on the GPU under the automatic strategy, a
                               pass that is exactly a matrix product or a
                               batch of them (f32 or f64, a stride of one
                               element in each matrix) runs through
                               cuBLASLt where it is installed; 0: always the
                               generated kernels.  red_explain says which
                               passes may               default 1    */
} red_option;

/* RED_RESULTS_DEVICE: results of a GPU run stay in device memory;
 * red_result describes them with memory = RED_MEM_CUDA (the CPU backend
 * always gives host results).  RED_RESULTS_DEVICE_ARRAYS: array results
 * (ndim > 0) stay in device memory and scalar (0-d) results come to the
 * host, in the copy that brings the run's fault status back anyway: what a
 * binding that turns scalars into numbers of its language wants (a second
 * copy for each scalar costs a round trip to the GPU).  With a stream, a run
 * is left queued (see red_expr_set_stream) only when no result comes to the
 * host. */
enum { RED_RESULTS_HOST = 0, RED_RESULTS_DEVICE = 1, RED_RESULTS_DEVICE_ARRAYS = 2 };

enum { RED_DEVICE_AUTO = 0, RED_DEVICE_CPU = 1, RED_DEVICE_GPU = 2 };
enum {
    RED_STRATEGY_AUTO = 0, RED_STRATEGY_TREE = 1, RED_STRATEGY_SEQUENTIAL = 2,
    RED_STRATEGY_PERSISTENT = 3, RED_STRATEGY_SEGMENTED = 4
};

/* Set or read a context option.  An expression takes the context's options
 * when it is prepared (red_eval: at each call) and keeps them: a later
 * red_set_option changes expressions prepared after it, never one prepared
 * before (red_expr_set_option changes an expression's own).
 * Returns RED_OK, or RED_ERR_ARG: `ctx` or `value` NULL, an unknown option,
 * a value out of the option's range. */
RED_API int red_set_option(red_ctx *ctx, red_option opt, int value);
RED_API int red_get_option(red_ctx *ctx, red_option opt, int *value);

/* Log hook: the library never prints; it passes notes (cache hits, chosen
 * strategy, warnings) to this function if set.  level: 0 debug .. 2 warn.
 * NULL `fn` removes it.  No status. */
typedef void (*red_log_fn)(void *user, int level, const char *msg);
RED_API void red_set_log(red_ctx *ctx, red_log_fn fn, void *user);

/* ---- Prepared expressions ------------------------------------------------ */

/* Check the syntax of `text` only; `ctx` (may be NULL) receives the message.
 * `*incomplete` (may be NULL) is set to 1 when the text is a valid beginning
 * that more input could complete (an open bracket, a trailing operator): a
 * REPL's cue to read a continuation line.
 * Returns RED_OK, or
 *   RED_ERR_SYNTAX  with the caret message;
 *   RED_ERR_LIMIT   nesting or size past a limit, which the message names;
 *   RED_ERR_ARG     `text` NULL;
 *   RED_ERR_NOMEM. */
RED_API int red_check_syntax(red_ctx *ctx, const char *text, int *incomplete);

/* Parse `text` (NUL-terminated) into a prepared expression, which takes the
 * context's current options.  Syntax errors are reported here; names, types
 * and shapes are checked when the expression runs (or is explained),
 * because they depend on the bindings.  *out is NULL on failure.
 * Returns RED_OK, or (message in red_errmsg(ctx))
 *   RED_ERR_SYNTAX  with the caret message;
 *   RED_ERR_LIMIT   nesting or size past a limit (RED_OPT_MAX_TEXT,
 *                   RED_OPT_MAX_NODES, or the fixed nesting limits);
 *   RED_ERR_ARG     `ctx`, `text` or `out` NULL;
 *   RED_ERR_NOMEM. */
RED_API int red_prepare(red_ctx *ctx, const char *text, red_expr **out);
/* Release an expression and its results.  NULL is a no-op.  No status. */
RED_API void red_finalize(red_expr *e);

/* Change one of the options `e` took from its context when it was prepared
 * (same values; not RED_OPT_CACHE_MB, RED_OPT_MAX_TEXT or RED_OPT_MAX_NODES,
 * which belong to the context).  The next red_run uses it.  Lowering
 * RED_OPT_MAX_COMPILES below the compiles `e` has caused refuses its next
 * compile.  RED_OK, or RED_ERR_ARG for an unknown option or value, or one of
 * the context's. */
RED_API int red_expr_set_option(red_expr *e, red_option opt, int value);

/* Bind an array (any rank 0..8) to `name`.  The descriptor is copied; the
 * data is borrowed (see OWNERSHIP).  A 0-d array binds a scalar of its type.
 * Binding a name the expression does not use is not an error.  A refused
 * binding changes nothing: the name keeps what it had.
 * Returns RED_OK, or (message, with the name, in red_expr_errmsg(e))
 *   RED_ERR_BIND         `name` not an identifier, `a` NULL, an unknown
 *                        dtype or memory kind, a rank outside 0..8, a
 *                        negative extent, more than 2^48 elements, NULL data
 *                        for a non-empty array, or strides whose span in
 *                        bytes does not fit in an int64;
 *   RED_ERR_UNSUPPORTED  a 0-d array in device memory;
 *   RED_ERR_ARG          `e` NULL;
 *   RED_ERR_NOMEM. */
RED_API int red_bind_array(red_expr *e, const char *name, const red_array *a);
/* Bind a scalar by value.  These are "weak" like literals: `x * t` stays
 * f32 for f32 `x` whether `t` was bound as f64 or i64.
 * Returns RED_OK, RED_ERR_BIND (`name` not an identifier), RED_ERR_ARG (`e`
 * NULL) or RED_ERR_NOMEM. */
RED_API int red_bind_f64(red_expr *e, const char *name, double v);
RED_API int red_bind_i64(red_expr *e, const char *name, int64_t v);
/* Forget every binding (waiting first for queued work, as red_sync).  No
 * status. */
RED_API void red_clear_bindings(red_expr *e);

/* Evaluate with the current bindings, on the device the expression's
 * RED_OPT_DEVICE chooses.  The last run's results go first.  Check errors
 * (unbound names, types, shapes) are reported here with the caret message.
 * Returns RED_OK, or (message in red_expr_errmsg(e), copied to the context)
 *   RED_ERR_NAME         a name is neither bound nor an index variable;
 *   RED_ERR_TYPE         a type error (a bit operation on floats, ...);
 *   RED_ERR_SHAPE        arrays, ranks or index extents that disagree;
 *   RED_ERR_SYNTAX       the text defines operators but computes nothing;
 *   RED_ERR_BIND         RED_DEVICE_CPU with an array in device memory;
 *   RED_ERR_INDEX        a subscript out of range;
 *   RED_ERR_EMPTY        argmin/argmax over nothing;
 *   RED_ERR_KEYS         bad `by` keys (negative, unsorted for `ordered`);
 *   RED_ERR_LIMIT        a domain or result too large, too many parameters;
 *                        past RED_OPT_MAX_PASSES, RED_OPT_MAX_SOURCE or
 *                        RED_OPT_MAX_COMPILES (the message names it);
 *   RED_ERR_UNSUPPORTED  valid, but not supported by this backend;
 *   RED_ERR_DEVICE       RED_DEVICE_GPU, or an array in device memory, and
 *                        no usable GPU; a CUDA driver error;
 *   RED_ERR_COMPILE      NVRTC rejected a generated kernel (its log in the
 *                        message);
 *   RED_ERR_INTERRUPTED  red_interrupt;
 *   RED_ERR_NOMEM        host or device memory;
 *   RED_ERR_ARG          `e` NULL.
 * A queued GPU run (see red_expr_set_stream) may report INDEX, EMPTY, LIMIT
 * or DEVICE later, from red_sync. */
RED_API int red_run(red_expr *e);

/* Run this expression's GPU work on the caller's CUDA stream (a CUstream or
 * cudaStream_t; NULL: the default stream).  With a stream and
 * RED_RESULTS_DEVICE, red_run returns once the work is queued: it is
 * asynchronous until red_sync, or any red_result* call, which waits for it
 * and reports a fault found on the device (an out-of-range subscript).
 * Runs queued so one after another do not wait for each other: each new
 * red_run replaces the last one's results (whose memory it may reuse, in
 * stream order: work the caller queued on the same stream before the call
 * still reads the old values), and red_sync reports a fault of any of
 * them since the last wait, with no results.
 * The work queued on the old stream is waited for first: returns red_sync's
 * status (the new stream is set whatever it is), or RED_ERR_ARG for `e`
 * NULL. */
RED_API int red_expr_set_stream(red_expr *e, void *cuda_stream);
/* Wait for the expression's queued work; its status (RED_OK if none).  On
 * a failure the results are gone.  Returns RED_OK, or
 *   RED_ERR_INDEX, RED_ERR_EMPTY, RED_ERR_LIMIT  a fault found on the device
 *                 (as red_run);
 *   RED_ERR_DEVICE  a CUDA driver error;  RED_ERR_NOMEM;
 *   RED_ERR_ARG     `e` NULL. */
RED_API int red_sync(red_expr *e);

/* Where the time of the last red_run went, in milliseconds (0 where a phase
 * did not happen).  GPU phases (upload, kernel, download) are timed with CUDA
 * events on the run's stream when RED_OPT_TIMINGS is 1, and read 0 otherwise;
 * for a run still queued (see red_expr_set_stream) they are read after
 * red_sync. */
typedef struct red_timings {
    double plan_ms;      /* checking and planning (0 when the plan was cached) */
    double compile_ms;   /* NVRTC, or loading CUBINs from the disk cache      */
    double upload_ms;    /* host arrays copied to the device                  */
    double kernel_ms;    /* the kernels                                      */
    double download_ms;  /* results copied back to the host                   */
    double cpu_ms;       /* the CPU executor                                  */
    double total_ms;     /* red_run from entry to return                      */
} red_timings;
/* Waits for queued work first: returns red_sync's status, or RED_ERR_ARG for
 * `e` or `t` NULL. */
RED_API int red_last_timings(red_expr *e, red_timings *t);

/* The message of the last failing call on `e` ("" if none): after red_run,
 * red_sync, red_bind_*, red_result* or red_explain* fails, read it here (see
 * ERRORS).  Owned by `e`, valid until its next failing call or red_finalize.
 * "no expression" for NULL.  No status. */
RED_API const char *red_expr_errmsg(red_expr *e);

/* Number of results of the last run.  `a, b, c` gives three; a tuple-valued
 * reduction (user-defined operator over (re, im)) gives one per field.  0
 * before a run, after a failed one, or for NULL.  No status. */
RED_API int red_result_count(red_expr *e);

/* Describe result `i`: dtype, shape, contiguous strides, and `data` pointing
 * at memory owned by the expression (see OWNERSHIP).  `name` (may be NULL)
 * receives the assigned name ("C" for `C[i,j] = ...`) or "".  Waits for
 * queued work first (red_sync).  These red_result* calls return RED_OK, or
 *   RED_ERR_ARG  `e` or `out` NULL; no result `i` (0 <= i < red_result_count;
 *                none before a successful run);
 *   red_sync's codes: RED_ERR_INDEX, RED_ERR_EMPTY, RED_ERR_LIMIT (a fault of
 *                queued work), RED_ERR_DEVICE, RED_ERR_NOMEM;
 * and the codes each lists below. */
RED_API int red_result(red_expr *e, int i, red_array *out, const char **name);

/* Convert scalar result `i` (or an array result of one element) to double /
 * int64.  Also RED_ERR_ARG: an array of another size, a complex result (read
 * it with red_result), `v` NULL. */
RED_API int red_result_f64(red_expr *e, int i, double *v);
RED_API int red_result_i64(red_expr *e, int i, int64_t *v);

/* Copy result `i` into the caller's array `dst`: the shape must match; the
 * dtype may differ (values are converted as by a cast; a complex result goes
 * only into a complex array, and a real one only into a real array).  Into device memory
 * (RED_MEM_CUDA), after a GPU run only: the same dtype, contiguous.  Also
 *   RED_ERR_BIND         rank, extents, an unknown dtype or memory kind, or
 *                        NULL data of `dst`;
 *   RED_ERR_UNSUPPORTED  a device `dst` of another dtype, not contiguous, or
 *                        after a CPU run;
 *   RED_ERR_ARG          `dst` NULL. */
RED_API int red_result_copy(red_expr *e, int i, const red_array *dst);

/* Result `i` in a buffer the caller owns (a copy: the expression's own stays
 * readable until its next run): `out` describes it, and the caller releases
 * out->data with red_free (host memory) or red_device_free (memory ==
 * RED_MEM_CUDA, with RED_RESULTS_DEVICE).  Returns red_result's codes, with
 * RED_ERR_NOMEM and RED_ERR_DEVICE also for the copy. */
RED_API int red_result_detach(red_expr *e, int i, red_array *out);

/* Result `i` handed to the caller without a copy where it can be: the
 * result's own buffer, when no other result of the run shares it, else a
 * copy as red_result_detach makes.  Afterwards result `i` reads
 * RED_ERR_MISUSE ("handed over") until the next run, which writes its result
 * into new memory.  The caller releases out->data as after
 * red_result_detach.  For a binding that turns results into objects of its
 * own language and never reads them through the expression again: a device
 * result of 1 GiB then costs no copy (half a millisecond on an H200).
 * Returns red_result_detach's codes. */
RED_API int red_result_take(red_expr *e, int i, red_array *out);
/* Release host memory the library handed over (free).  No status. */
RED_API void red_free(void *p);

/* Human-readable plan of the expression for the current bindings: the map
 * expressions, operators with identities, domain, result shape and
 * segmentation, the backend that would run it (for the CPU, the number of
 * threads), then the generated CUDA source of each pass, whatever the
 * backend.  The string is owned by `e` (valid until the next call).
 * Returns the codes of red_explain_ex, below. */
RED_API int red_explain(red_expr *e, const char **text);

/* What red_explain_ex puts after the plan. */
enum {
    RED_EXPLAIN_PLAN        = 0, /* nothing: the plan and backend only         */
    RED_EXPLAIN_CUDA        = 1, /* the generated CUDA, whatever the backend
                                    (red_explain)                              */
    RED_EXPLAIN_CUDA_ON_GPU = 2  /* the generated CUDA when the backend is the
                                    GPU: a CPU run has no kernels to show      */
};
/* red_explain with a choice of what follows the plan: one of RED_EXPLAIN_*.
 * Same ownership as red_explain.  Both check and plan for the current
 * bindings as red_run does, and return RED_OK, or
 *   RED_ERR_NAME, RED_ERR_TYPE, RED_ERR_SHAPE, RED_ERR_SYNTAX, RED_ERR_LIMIT
 *                   as red_run's checks;
 *   RED_ERR_BIND, RED_ERR_DEVICE  the expression's device cannot be used (as
 *                   red_run);
 *   RED_ERR_ARG     `e` or `text` NULL; `what` not a RED_EXPLAIN_* value;
 *   RED_ERR_NOMEM. */
RED_API int red_explain_ex(red_expr *e, int what, const char **text);

/* ---- GPU and kernel cache ------------------------------------------------ */

/* 1 when a GPU can be used (driver, device and NVRTC found), else 0 (also
 * for NULL); the reason is then in red_errmsg.  The first call initialises
 * CUDA.  No status. */
RED_API int red_gpu_available(red_ctx *ctx);

/* Generate and compile with NVRTC the GPU kernels of `e` for its current
 * bindings, for architecture `arch` ("sm_90"; NULL or "" means it), without
 * running anything and without needing a GPU or a driver: for build checks
 * and tests; also those of the plan the bound sizes run where a small inner
 * reduction is written out (red_explain shows it).  With arrays bound split
 * and a communicator attached, the kernels of the plan each rank runs
 * (nothing collective).  Returns RED_OK, or
 *   RED_ERR_NAME, RED_ERR_TYPE, RED_ERR_SHAPE, RED_ERR_SYNTAX, RED_ERR_LIMIT
 *                    as red_run's checks (LIMIT also: too many kernel
 *                    parameters, RED_OPT_MAX_PASSES, RED_OPT_MAX_SOURCE,
 *                    RED_OPT_MAX_COMPILES: each pass compiled here counts
 *                    as one of the expression's compiles);
 *   RED_ERR_COMPILE  NVRTC rejected a kernel (its log in the message);
 *   RED_ERR_DEVICE   NVRTC cannot be loaded;
 *   RED_ERR_ARG      `e` NULL;  RED_ERR_NOMEM. */
RED_API int red_precompile(red_expr *e, const char *arch);

typedef struct red_cache_info {
    long long memory_hits;     /* kernels found already loaded             */
    long long disk_hits;       /* CUBINs read from the disk cache          */
    long long compiles;        /* NVRTC compilations                       */
    double    compile_ms;      /* total NVRTC time                         */
    long long pool_bytes;      /* device memory the buffer pool holds      */
    long long pool_in_use;     /* of which in use                          */
    long long programs;        /* parsed texts the context keeps           */
    long long plans;           /* their plans (one per binding signature)  */
    long long program_bytes;   /* host memory of both (RED_OPT_CACHE_MB)   */
    long long disk_refused;    /* disk entries refused (red_cache_clear)   */
} red_cache_info;

/* Device memory from the context's pool (for arrays that live on the GPU
 * across evaluations); valid until red_device_free or red_close.
 * red_device_alloc returns RED_OK, RED_ERR_DEVICE (no usable GPU, a driver
 * error), RED_ERR_NOMEM, or RED_ERR_ARG (`ctx` or `ptr` NULL); *ptr is NULL on
 * failure.  red_device_free: NULL is a no-op; no status. */
RED_API int red_device_alloc(red_ctx *ctx, size_t bytes, void **ptr);
RED_API void red_device_free(red_ctx *ctx, void *ptr);
/* Copy `bytes` between host and device memory (synchronous).  Returns RED_OK,
 * or RED_ERR_ARG (`ctx` NULL, `dst` or `src` NULL with bytes > 0, a memory
 * kind other than RED_MEM_HOST, 0 or RED_MEM_CUDA), RED_ERR_DEVICE (device
 * memory and no usable GPU, a driver error) or RED_ERR_NOMEM. */
RED_API int red_memcpy(red_ctx *ctx, void *dst, red_memory dst_memory, const void *src,
                       red_memory src_memory, size_t bytes);

/* Statistics of the caches of `ctx`: kernels (zeros before the GPU is used)
 * and parsed programs.  Returns RED_OK, or RED_ERR_ARG (`ctx` or `info`
 * NULL). */
RED_API int red_cache_stats(red_ctx *ctx, red_cache_info *info);
/* Remove every entry of the on-disk kernel cache ($REDJIT_CACHE_DIR, else
 * $XDG_CACHE_HOME/redjit, else ~/.cache/redjit; REDJIT_CACHE=0 disables it).
 * Returns the number of entries removed (>= 0): only files of the cache's
 * naming that belong to the user.  The trust rule, as OpenSSH's for ~/.ssh:
 * the cache loads a CUBIN only when the folder (not a symbolic link) and the
 * file belong to the effective user and neither is writable by group or
 * others; else it compiles and counts the entry in disk_refused.  It makes
 * folders 0700 and files 0600.  REDJIT_CACHE_TRUSTED_DIR names a read-only
 * folder an administrator prepared, read on a miss, owned by root or the
 * user under the same rule. */
RED_API int red_cache_clear(red_ctx *ctx);

/* ---- Several processes: arrays split across ranks ------------------------ */

/* SEVERAL PROCESSES
 *   A program run as several processes (MPI ranks) evaluates one expression
 *   over arrays whose blocks are spread over the ranks.  Each rank attaches
 *   the communicator to its context, binds its own block of each split array
 *   with red_bind_split (and whole copies of the other arrays, as usual),
 *   and runs the same text, written for the whole arrays.  A split array is
 *   cut along one axis into contiguous blocks in rank order (rank 0 holds
 *   the first), of any sizes, empty ones included.
 *
 *     MPI_Init(&argc, &argv);
 *     red_ctx *ctx;  red_open(&ctx);
 *     MPI_Comm world = MPI_COMM_WORLD;
 *     red_attach_mpi(ctx, &world);                 // collective
 *     red_expr *e;
 *     red_prepare(ctx, "sum(A[i,j]) over i, max(abs(A)), sum(A[i,j]) over j", &e);
 *     red_array a;                                 // my rows: my_n x ncols
 *     red_array_init(&a, my_rows, RED_F32, 2, (int64_t[]){my_n, ncols}, NULL);
 *     red_bind_split(e, "A", &a, 0);               // split along axis 0
 *     if (red_run(e) != RED_OK)                    // collective
 *         fprintf(stderr, "%s\n", red_expr_errmsg(e));   // every rank fails
 *     // result 0: the column sums of the whole matrix, on every rank;
 *     // result 1: its largest magnitude, on every rank;
 *     // result 2: the sums of MY rows (red_result_split says which rows)
 *     red_finalize(e);  red_close(ctx);            // before MPI_Finalize
 *     MPI_Finalize();
 *
 *   Arrays in device memory go through NCCL, one GPU per rank, and run on
 *   the GPU.  Each rank makes its GPU current before redjit first uses it
 *   (redjit runs on the device of the CUDA context current then), and
 *   attaches an NCCL communicator: its own (red_attach_nccl), or one redjit
 *   makes from a unique id that one rank creates and hands to the others by
 *   any means (MPI_Bcast, a file, torch.distributed):
 *
 *     cudaSetDevice(local_rank);
 *     red_ctx *ctx;  red_open(&ctx);
 *     unsigned char id[RED_NCCL_ID_BYTES];
 *     if (rank == 0) red_nccl_unique_id(ctx, id);
 *     MPI_Bcast(id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);  // or any way
 *     red_attach_nccl_id(ctx, id, nranks, rank);   // collective
 *     red_array x;                                 // my block, on my GPU
 *     red_array_init(&x, d_block, RED_F32, 1, (int64_t[]){my_n}, NULL);
 *     x.memory = RED_MEM_CUDA;
 *     red_bind_split(e, "x", &x, 0);  red_run(e);  // as above
 *
 *   What each rank gets:
 *   - a reduction over a split axis gives the whole result on every rank,
 *     the same bits on every rank and in every run: each rank reduces its
 *     block, then the ranks' partials are combined in rank order (integer
 *     and logical built-in operators through the engine's all-reduce, the
 *     others gathered and combined in order), so `ordered` user operators,
 *     argmin and argmax (global indices) and NaN rules hold as on one rank;
 *   - a result still indexed by a split axis (row sums of a row-split
 *     matrix) stays split: each rank gets its block, without communication;
 *     red_result_split says which.  RED_OPT_GATHER 1 gathers it instead.
 *   Rules:
 *   - With a communicator attached, every red_run and red_eval on the
 *     context is collective: every rank makes the same calls in the same
 *     order, one thread at a time, with the same text, the same names split
 *     along the same axes, and the same whole arrays and scalars.
 *   - The ranks agree before they exchange data: an error on one rank (a
 *     binding, a shape, a subscript out of range, red_interrupt) makes the
 *     run fail on every rank with that rank's status and its message after
 *     "rank N: "; ranks whose texts or bindings differ get RED_ERR_MISUSE.
 *     No rank is left waiting in a collective.
 *   - A subscript of a split axis is an index (A[i,j]), not x[i+1] or
 *     x[col[k]], which would need other ranks' elements; one reduction may
 *     walk one split index (not x[i]*y[j] with x and y both split); scans
 *     along a split index, and a ranged (`in lo..hi`) index that indexes
 *     the results along a split axis, are not supported yet.  These are
 *     refused with RED_ERR_UNSUPPORTED and a caret.  Keyed and ranged
 *     reductions along a split index are: CSR rows
 *     (`sum(v[k]*x[col[k]]) over k in ptr[r]..ptr[r+1]`, v and col split
 *     along k, ptr and x whole) have their ranges cut to each rank's block,
 *     and a segment or a row that straddles ranks is combined.
 *   - The MPI engine runs on the CPU executor, over arrays in host memory.
 *     NCCL runs a run whose arrays are in device memory (all of them, on
 *     every rank) on the GPU: exact partials (integer sums, products,
 *     minima, maxima; logical ones) are all-reduced on the device, the
 *     others gathered on the device and combined on the host in rank order
 *     (the partials of a reduction are one value per output: small next to
 *     the arrays).  A context with both engines runs host arrays through MPI
 *     and device arrays through NCCL; with NCCL only, host arrays run on the
 *     CPU and the ranks' messages go through NCCL (staged on the GPU).
 *   - A rank that stops taking part (killed, or its GPU lost) leaves MPI's
 *     and NCCL's collectives waiting on the others unless the engine
 *     notices: NCCL's errors it reports are errors here (RED_ERR_COMM).
 *     red_interrupt ends such a wait in NCCL: a collective that has not
 *     ended at a second red_interrupt (Ctrl-C twice), or ten seconds after
 *     the first, is aborted with the communicator (ncclCommAbort, the
 *     caller's too, which frees it: do not destroy it afterwards), the run
 *     returns RED_ERR_INTERRUPTED without another collective, and later
 *     runs RED_ERR_COMM until another communicator is attached.  One
 *     interrupt waits because the other ranks may only be slower: an
 *     interrupt otherwise stops every rank at the next pass, as in one
 *     process.
 */

/* Attach an MPI communicator (pass a pointer to an MPI_Comm) to `ctx`: its
 * runs become collective over the communicator's ranks.  The context works
 * on its own duplicate (MPI_Comm_dup, so call it on every rank), which
 * red_close frees: close contexts before MPI_Finalize.  NULL detaches.
 * Returns RED_OK, or (message in red_errmsg(ctx))
 *   RED_ERR_UNSUPPORTED  this build has no MPI (built without libmpi), or
 *                        MPI is not initialised;
 *   RED_ERR_COMM         MPI_Comm_dup failed;
 *   RED_ERR_ARG          `ctx` NULL. */
RED_API int red_attach_mpi(red_ctx *ctx, const void *mpi_comm);

/* NCCL for device arrays (see SEVERAL PROCESSES).  NCCL is loaded on first
 * use (libnccl.so.2, or the file the environment variable REDJIT_NCCL_LIB
 * names, e.g. PyTorch's copy); builds need nothing of it.  Every call
 * returns RED_OK or, with its message in red_errmsg(ctx):
 *   RED_ERR_UNSUPPORTED  NCCL cannot be loaded;
 *   RED_ERR_DEVICE       no GPU, or a communicator on another GPU than
 *                        the context's;
 *   RED_ERR_COMM         NCCL failed (its words in the message);
 *   RED_ERR_MISUSE       MPI is attached too and numbers the ranks
 *                        differently;
 *   RED_ERR_ARG          `ctx` or `id` NULL, a rank outside 0..nranks-1. */
#define RED_NCCL_ID_BYTES 128
/* A new unique id (ncclGetUniqueId) into the RED_NCCL_ID_BYTES at `id`:
 * made on one rank, handed to the others. */
RED_API int red_nccl_unique_id(red_ctx *ctx, void *id);
/* Attach a communicator redjit makes from `id` (ncclCommInitRank) on the
 * context's GPU: collective over the `nranks` ranks, each with its `rank`;
 * redjit frees it with the context.  Attaching again replaces it. */
RED_API int red_attach_nccl_id(red_ctx *ctx, const void *id, int nranks, int rank);
/* Attach the caller's communicator (an ncclComm_t, which stays the
 * caller's: destroy it after red_close) on the same GPU as the context.
 * NULL detaches NCCL. */
RED_API int red_attach_nccl(red_ctx *ctx, void *nccl_comm);

/* This process's rank and the number of ranks of the attached communicator
 * (0 and 1 without one).  Either pointer may be NULL.  RED_OK, or
 * RED_ERR_ARG for `ctx` NULL. */
RED_API int red_comm_rank(red_ctx *ctx, int *rank, int *size);

/* Bind this rank's block of a split array: `block` describes the elements
 * this rank holds, cut from the whole array along `axis` (0 .. ndim-1); the
 * blocks of the ranks, in rank order, make the whole array, and their other
 * extents are equal.  As red_bind_array otherwise (the descriptor is
 * copied, the data borrowed).  A context without a communicator runs it as
 * a whole array.  Returns red_bind_array's codes, and RED_ERR_BIND for an
 * axis outside 0 .. ndim-1 (a 0-d array cannot be split). */
RED_API int red_bind_split(red_expr *e, const char *name, const red_array *block, int axis);

/* Which part of result `i` this rank holds after a run with split arrays:
 * *axis is the result's split axis, or -1 when the rank holds all of it;
 * *offset is where its block starts along that axis and *extent the whole
 * result's extent there (0 and the extent for a whole result).  Any pointer
 * may be NULL.  It answers for a result handed over by red_result_take too.
 * Returns red_result's codes. */
RED_API int red_result_split(red_expr *e, int i, int *axis, int64_t *offset, int64_t *extent);

/* ---- One call ------------------------------------------------------------ */

typedef struct red_binding {
    const char *name;
    red_array   array;      /* 0-d for a scalar */
} red_binding;

/* Prepare (through a per-context cache keyed by `text`), bind, run, with the
 * context's options as they are at the call.
 * For each i < min(nresults, number of results):
 *   - results[i].data != NULL: the result is written there (shape must
 *     match, dtype converted);
 *   - results[i].data == NULL: a buffer is allocated (release it with
 *     red_free; red_device_free for device memory) and results[i]
 *     describes it.  When the call fails, no buffer is left allocated and
 *     those results[i].data are NULL again.
 * `*count` (may be NULL) receives the number of results the expression has.
 * Returns RED_OK, or (message in red_errmsg(ctx)) any code of red_prepare,
 * red_bind_array and red_run; red_result_copy's RED_ERR_BIND and
 * RED_ERR_UNSUPPORTED for a results[i] that does not fit; RED_ERR_ARG for
 * `ctx` or `text` NULL, nbinds or nresults negative, or NULL arrays for
 * them. */
RED_API int red_eval(red_ctx *ctx, const char *text,
                     const red_binding *binds, int nbinds,
                     red_array *results, int nresults, int *count);

/* red_eval for an expression with a single scalar result, converted to
 * double into *v.  An expression with several results ("sum(x), max(x)")
 * gives RED_ERR_ARG, with a message saying how many it has: use red_eval.
 * A result that is an array (ndim > 0) gives RED_ERR_BIND.  *v is written
 * only on success.  Returns RED_OK, red_eval's codes, or RED_ERR_ARG for the
 * above and `v` NULL. */
RED_API int red_eval_f64(red_ctx *ctx, const char *text,
                         const red_binding *binds, int nbinds, double *v);

#ifdef __cplusplus
}
#endif
#endif /* REDJIT_H */
