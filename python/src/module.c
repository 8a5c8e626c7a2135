/*
 * module.c -- the redjit._redjit extension: Context (a red_ctx), Expr (a prepared
 * red_expr), eval(), and the exception classes (bind.c, result.c and devarray.c do
 * the conversions).  Each call binds its keyword
 * arguments, runs with the GIL released and converts the results; nothing on that
 * path goes through Python-level code.
 */
#include "_redjit.h"

#include <signal.h>
#include <stdatomic.h>
#include <string.h>

/* ---- exceptions ------------------------------------------------------------------- */

PyObject *rjp_Error;
static PyObject *rjp_SyntaxError, *rjp_LimitError, *rjp_TypeError, *rjp_BindingError, *rjp_IndexError,
    *rjp_DeviceError, *rjp_UnsupportedError;

static PyObject *class_for(int status)
{
    switch (status) {
    case RED_ERR_SYNTAX: return rjp_SyntaxError;
    /* not a SyntaxError: most limits are met at run time, by the bound sizes, where
     * the text is fine and no place in it is to blame (no caret) */
    case RED_ERR_LIMIT: return rjp_LimitError;
    case RED_ERR_TYPE: return rjp_TypeError;
    case RED_ERR_NAME: case RED_ERR_SHAPE: case RED_ERR_BIND: return rjp_BindingError;
    case RED_ERR_INDEX: case RED_ERR_EMPTY: case RED_ERR_KEYS: return rjp_IndexError;
    case RED_ERR_DEVICE: case RED_ERR_COMPILE: return rjp_DeviceError;
    case RED_ERR_UNSUPPORTED: return rjp_UnsupportedError;
    }
    return rjp_Error;
}

void rjp_raise(int status, const char *msg)
{
    if (status == RED_ERR_NOMEM) {
        PyErr_NoMemory();
        return;
    }
    PyObject *cls = class_for(status);
    /* the library's messages quote the user's text and may be cut inside a UTF-8
     * character: decoded with replacement, never a UnicodeDecodeError instead */
    const char *m = msg && *msg ? msg : red_errstr(status);
    PyObject *text = PyUnicode_DecodeUTF8(m, (Py_ssize_t)strlen(m), "replace");
    if (!text) return;
    PyObject *exc = PyObject_CallOneArg(cls, text);
    Py_DECREF(text);
    if (!exc) return;
    PyObject *st = PyLong_FromLong(status), *reason = PyUnicode_FromString(red_errstr(status));
    if (st && reason && PyObject_SetAttrString(exc, "status", st) == 0 &&
        PyObject_SetAttrString(exc, "reason", reason) == 0)
        PyErr_SetObject(cls, exc);
    Py_XDECREF(st);
    Py_XDECREF(reason);
    Py_DECREF(exc);
}

static int add_exceptions(PyObject *m)
{
    static const char base_doc[] =
        "Base class of every error redjit raises.\n\n"
        "str(err) is the library's message: for expressions 'line:col: message', the line\n"
        "and a caret under the offending text.  err.status is the library's status code\n"
        "(redjit.h's red_status) and err.reason its short name ('syntax error', ...).";
    rjp_Error = PyErr_NewExceptionWithDoc("redjit.Error", base_doc, PyExc_Exception, NULL);
    if (!rjp_Error) return -1;
    struct {
        PyObject **cls;
        const char *name;
        PyObject *builtin;
        const char *doc;
    } sub[] = {
        {&rjp_SyntaxError, "redjit.SyntaxError", PyExc_ValueError,
         "The expression does not parse."},
        {&rjp_LimitError, "redjit.LimitError", PyExc_ValueError,
         "An implementation limit is exceeded: the expression nests too deeply or is too large\n"
         "(the message points at the text with a caret), or its text is too long, or at run\n"
         "time the bound sizes make a domain or result too large (no caret: the sizes are to\n"
         "blame, not a place in the text)."},
        {&rjp_TypeError, "redjit.TypeError", PyExc_TypeError,
         "A type error in the expression (a bit operation on floats, ...)."},
        {&rjp_BindingError, "redjit.BindingError", PyExc_ValueError,
         "A binding is wrong: unknown or unbound name, unsupported dtype or layout, shape conflict."},
        {&rjp_IndexError, "redjit.IndexError", PyExc_IndexError,
         "A run-time data error: subscript out of range, argmin/argmax of nothing, bad keys for `by`."},
        {&rjp_DeviceError, "redjit.DeviceError", PyExc_RuntimeError,
         "No usable GPU, a CUDA driver error, or NVRTC rejected the generated code."},
        {&rjp_UnsupportedError, "redjit.UnsupportedError", PyExc_NotImplementedError,
         "Valid, but not supported by this backend yet (a 0-d array in device memory, ...)."},
    };
    if (PyModule_AddObjectRef(m, "Error", rjp_Error) < 0) return -1;
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
        PyObject *bases = PyTuple_Pack(2, rjp_Error, sub[i].builtin);
        if (!bases) return -1;
        *sub[i].cls = PyErr_NewExceptionWithDoc(sub[i].name, sub[i].doc, bases, NULL);
        Py_DECREF(bases);
        if (!*sub[i].cls || PyModule_AddObjectRef(m, strchr(sub[i].name, '.') + 1, *sub[i].cls) < 0) return -1;
    }
    return 0;
}

/* ---- Ctrl-C ------------------------------------------------------------------------- */

/* A run sits in red_run with the GIL released, where Python's SIGINT handler can only
 * note the signal: Ctrl-C would wait for the run to end.  So a handler of ours goes in
 * front of Python's when the module is imported: it calls red_interrupt (a counter,
 * safe in a signal handler) on the context of the run the main thread is in, if any,
 * then passes the signal on to Python's.  The run returns RED_ERR_INTERRUPTED and the
 * KeyboardInterrupt Python noted is raised.  A run costs two atomic stores.  Where
 * nothing handled SIGINT before (an embedding that leaves it alone) nothing is
 * installed; a later signal.signal(SIGINT, ...) replaces ours, and then runs are no
 * longer interrupted, as before. */
static _Atomic(red_ctx *) main_run;
static struct sigaction prev_sigint;
static int sigint_hooked;
static unsigned long main_ident;

static void on_sigint(int sig, siginfo_t *info, void *uc)
{
    red_ctx *c = atomic_load_explicit(&main_run, memory_order_relaxed);
    if (c) red_interrupt(c);
    if (prev_sigint.sa_flags & SA_SIGINFO) prev_sigint.sa_sigaction(sig, info, uc);
    else if (prev_sigint.sa_handler != SIG_DFL && prev_sigint.sa_handler != SIG_IGN) prev_sigint.sa_handler(sig);
}

static void hook_sigint(void)
{
    /* the main thread, as Python's threading module names it: signals are its business */
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *mt = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
    PyObject *ident = mt ? PyObject_GetAttrString(mt, "ident") : NULL;
    main_ident = ident ? PyLong_AsUnsignedLong(ident) : 0;
    Py_XDECREF(ident);
    Py_XDECREF(mt);
    Py_XDECREF(threading);
    PyErr_Clear();   /* without it, Ctrl-C just waits for the run, as before */
    struct sigaction cur;
    if (!main_ident || sigaction(SIGINT, NULL, &cur) != 0) return;
    int handled = cur.sa_flags & SA_SIGINFO ? cur.sa_sigaction != NULL
                                            : cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN;
    if (!handled) return;
    prev_sigint = cur;
    struct sigaction sa = cur;
    sa.sa_sigaction = on_sigint;
    sa.sa_flags = cur.sa_flags | SA_SIGINFO;
    if (sigaction(SIGINT, &sa, NULL) == 0) sigint_hooked = 1;
}

/* ---- one run -------------------------------------------------------------------------- */

/* Bind `kw` to `e`, run without the GIL, return the results.  The borrowed
 * buffers are released as soon as the run is over. */
static PyObject *bind_run(rjp_context *owner, red_expr *e, const rjp_kwargs *kw, PyObject **splits)
{
    rjp_holds H;
    rjp_holds_init(&H);
    if (rjp_bind_all(e, kw, &H) < 0) {
        rjp_holds_release(&H);
        return NULL;
    }
    /* device inputs give device array results (read in place by CuPy, PyTorch...);
     * scalars become Python numbers, so they come back with the run's own copy */
    int rc = red_expr_set_option(e, RED_OPT_RESULTS, H.device ? RED_RESULTS_DEVICE_ARRAYS : RED_RESULTS_HOST);
    if (!rc) {
        int watched = sigint_hooked && PyThread_get_thread_ident() == main_ident;
        if (watched) atomic_store_explicit(&main_run, owner->ctx, memory_order_relaxed);
        Py_BEGIN_ALLOW_THREADS
        rc = red_run(e);
        Py_END_ALLOW_THREADS
        if (watched) atomic_store_explicit(&main_run, NULL, memory_order_relaxed);
        /* Ctrl-C: Python's handler raises KeyboardInterrupt (or does what it was told) */
        if (rc == RED_ERR_INTERRUPTED && watched && PyErr_CheckSignals() < 0) {
            rjp_holds_release(&H);
            return NULL;
        }
    }
    rjp_holds_release(&H);
    if (rc) {
        rjp_raise(rc, red_expr_errmsg(e));
        return NULL;
    }
    /* over several ranks: which block of each result this rank holds, read before the
     * results are taken (after which the expression no longer describes them) */
    if (splits && owner->nranks > 1) {
        int n = red_result_count(e);
        PyObject *t = PyTuple_New(n);
        for (int i = 0; t && i < n; i++) {
            int axis = -1;
            int64_t off = 0, ext = 0;
            red_result_split(e, i, &axis, &off, &ext);
            PyObject *it = Py_BuildValue("(iLL)", axis, (long long)off, (long long)ext);
            if (!it) Py_CLEAR(t);
            else PyTuple_SET_ITEM(t, i, it);
        }
        if (!t) return NULL;
        Py_XSETREF(*splits, t);
    }
    return rjp_results(owner, e);
}

static red_expr *prepare(red_ctx *ctx, const char *text)
{
    red_expr *e = NULL;
    int rc = red_prepare(ctx, text, &e);
    if (rc) {
        rjp_raise(rc, red_errmsg(ctx));
        return NULL;
    }
    return e;
}

/* Prepare (the library caches the parse by text), bind, run, finalize: safe from any
 * number of threads at once. */
static PyObject *run_once(rjp_context *c, const char *text, const rjp_kwargs *kw)
{
    red_expr *e = prepare(c->ctx, text);
    if (!e) return NULL;
    PyObject *r = bind_run(c, e, kw, NULL);
    red_finalize(e);
    return r;
}

static int no_positional(Py_ssize_t nargs, const char *what)
{
    if (nargs) {
        PyErr_Format(PyExc_TypeError, "%s binds arrays and scalars by name only: e(x=a, y=b)", what);
        return -1;
    }
    return 0;
}

/* eval(text, /, **bindings) in the vectorcall convention: the expression's UTF-8
 * (owned by args[0]), or NULL with an exception set. */
static const char *eval_text(PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "eval() takes the expression as its one positional argument "
                                      "(%zd given); arrays and scalars are bound by name", nargs);
        return NULL;
    }
    if (!PyUnicode_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "eval() takes the expression as a str, not %.100s",
                     Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(args[0], &len);
    if (text && strlen(text) != (size_t)len) {
        PyErr_SetString(PyExc_ValueError, "the expression contains a NUL character");
        return NULL;
    }
    return text;
}

/* ---- Context ------------------------------------------------------------------------ */

static const char *const device_names[] = {"auto", "cpu", "gpu", NULL};
static const char *const strategy_names[] = {"auto", "tree", "sequential", "persistent", "segmented", NULL};

static int name_index(const char *const *names, PyObject *v, const char *what)
{
    if (PyUnicode_Check(v))
        for (int i = 0; names[i]; i++)
            if (PyUnicode_CompareWithASCIIString(v, names[i]) == 0) return i;
    PyErr_Format(PyExc_ValueError, "%s must be one of %s%s%s%s%s%s, not %R", what, names[0],
                 names[1] ? ", " : "", names[1] ? names[1] : "", names[2] ? ", " : "", names[2] ? names[2] : "",
                 names[3] ? ", ..." : "", v);
    return -1;
}

static PyObject *context_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    rjp_context *self = (rjp_context *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    if (red_open(&self->ctx)) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->nranks = 1;
    return (PyObject *)self;
}

static int set_opt(rjp_context *self, red_option opt, int v)
{
    if (red_set_option(self->ctx, opt, v)) {
        PyErr_Format(PyExc_ValueError, "invalid value %d for this option", v);
        return -1;
    }
    return 0;
}

/* The end of an attach call: its error raised, or the context's rank count taken. */
static int attached(rjp_context *self, int rc)
{
    if (rc) {
        rjp_raise(rc, red_errmsg(self->ctx));
        return -1;
    }
    red_comm_rank(self->ctx, NULL, &self->nranks);
    return 0;
}

/* An mpi4py communicator attached to the context (collective over its ranks): the library
 * duplicates it, so the Python object need not outlive the context.  mpi4py gives the
 * address of its MPI_Comm handle; the extension links no MPI of its own. */
static int attach_comm(rjp_context *self, PyObject *comm)
{
    PyObject *mpi = PyImport_ImportModule("mpi4py.MPI");
    if (!mpi) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "comm= takes an mpi4py communicator, and mpi4py cannot be imported");
        return -1;
    }
    PyObject *cls = PyObject_GetAttrString(mpi, "Comm");
    int ok = cls ? PyObject_IsInstance(comm, cls) : -1;
    Py_XDECREF(cls);
    if (ok != 1) {
        Py_DECREF(mpi);
        if (ok == 0)
            PyErr_Format(PyExc_TypeError, "comm= takes an mpi4py communicator (mpi4py.MPI.Comm), not %.100s",
                         Py_TYPE(comm)->tp_name);
        return -1;
    }
    PyObject *addr = PyObject_CallMethod(mpi, "_addressof", "O", comm);
    Py_DECREF(mpi);
    if (!addr) return -1;
    void *p = PyLong_AsVoidPtr(addr);
    Py_DECREF(addr);
    if (!p && PyErr_Occurred()) return -1;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = red_attach_mpi(self->ctx, p);
    Py_END_ALLOW_THREADS
    return attached(self, rc);
}

/* NCCL attached (collective over its ranks): from a unique id (bytes, redjit.nccl_unique_id())
 * with this process's rank of nranks, or the caller's ncclComm_t (its value as an int). */
static int attach_nccl(rjp_context *self, PyObject *id, int rank, int nranks, PyObject *comm)
{
    int rc;
    if (comm && comm != Py_None) {
        void *c = PyLong_AsVoidPtr(comm);
        if (!c && PyErr_Occurred()) return -1;
        Py_BEGIN_ALLOW_THREADS
        rc = red_attach_nccl(self->ctx, c);
        Py_END_ALLOW_THREADS
    } else {
        char *bytes = NULL;
        Py_ssize_t n = 0;
        if (PyBytes_AsStringAndSize(id, &bytes, &n) < 0) return -1;
        if (n != RED_NCCL_ID_BYTES) {
            PyErr_Format(PyExc_ValueError, "nccl_id= takes the %d bytes of redjit.nccl_unique_id(), not %zd",
                         RED_NCCL_ID_BYTES, n);
            return -1;
        }
        if (rank < 0 || nranks < 1) {
            PyErr_SetString(PyExc_ValueError, "nccl_id= needs rank= and nranks= (this process's rank, 0 .. nranks-1)");
            return -1;
        }
        Py_BEGIN_ALLOW_THREADS
        rc = red_attach_nccl_id(self->ctx, bytes, nranks, rank);
        Py_END_ALLOW_THREADS
    }
    return attached(self, rc);
}

static int context_init(rjp_context *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"device", "strategy", "threads", "comm", "gather", "nccl_id", "rank", "nranks", "nccl_comm",
                         "blas", NULL};
    PyObject *device = NULL, *strategy = NULL, *comm = NULL, *nccl_id = NULL, *nccl_comm = NULL;
    int threads = 0, gather = 0, rank = -1, nranks = 0, blas = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOiOp$OiiOp:Context", kw, &device, &strategy, &threads, &comm,
                                     &gather, &nccl_id, &rank, &nranks, &nccl_comm, &blas))
        return -1;
    int d = device ? name_index(device_names, device, "device") : 0;
    int s = strategy ? name_index(strategy_names, strategy, "strategy") : 0;
    if (d < 0 || s < 0) return -1;
    if (threads < 0) {
        PyErr_SetString(PyExc_ValueError, "threads must be >= 0 (0 = all cores)");
        return -1;
    }
    if (set_opt(self, RED_OPT_DEVICE, d) || set_opt(self, RED_OPT_STRATEGY, s) ||
        set_opt(self, RED_OPT_THREADS, threads) || set_opt(self, RED_OPT_GATHER, gather) ||
        set_opt(self, RED_OPT_BLAS, blas))
        return -1;
    self->nranks = 1;
    if (comm && comm != Py_None && attach_comm(self, comm)) return -1;
    if ((nccl_id && nccl_id != Py_None) || (nccl_comm && nccl_comm != Py_None))
        return attach_nccl(self, nccl_id, rank, nranks, nccl_comm);
    return 0;
}

static void context_dealloc(rjp_context *self)
{
    red_close(self->ctx); /* every Expr holds its context: none is left here */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int get_opt(rjp_context *self, red_option opt)
{
    int v = 0;
    red_get_option(self->ctx, opt, &v);
    return v;
}

static PyObject *context_repr(rjp_context *self)
{
    return PyUnicode_FromFormat("redjit.Context(device='%s', strategy='%s', threads=%d)",
                                device_names[get_opt(self, RED_OPT_DEVICE)],
                                strategy_names[get_opt(self, RED_OPT_STRATEGY)], get_opt(self, RED_OPT_THREADS));
}

static PyObject *expr_make(rjp_context *ctx, PyObject *text);

static PyObject *context_prepare(rjp_context *self, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "prepare() takes the expression as a str, not %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    return expr_make(self, text);
}

static PyObject *context_eval(rjp_context *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    const char *text = eval_text(args, nargs);
    if (!text) return NULL;
    rjp_kwargs kw = {kwnames, args + nargs};
    return run_once(self, text, &kw);
}

static PyObject *context_gpu_available(rjp_context *self, PyObject *unused)
{
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = red_gpu_available(self->ctx); /* the first call initialises CUDA */
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(ok);
}

static PyObject *context_gpu_error(rjp_context *self, PyObject *unused)
{
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = red_gpu_available(self->ctx);
    Py_END_ALLOW_THREADS
    if (ok) Py_RETURN_NONE;
    return PyUnicode_FromString(red_errmsg(self->ctx));
}

static PyObject *context_cache_stats(rjp_context *self, PyObject *unused)
{
    red_cache_info i;
    if (red_cache_stats(self->ctx, &i)) {
        rjp_raise(RED_ERR_ARG, red_errmsg(self->ctx));
        return NULL;
    }
    return Py_BuildValue("{s:L,s:L,s:L,s:d,s:L,s:L,s:L,s:L,s:L}", "memory_hits", i.memory_hits, "disk_hits",
                         i.disk_hits, "compiles", i.compiles, "compile_ms", i.compile_ms, "pool_bytes", i.pool_bytes,
                         "pool_in_use", i.pool_in_use, "programs", i.programs, "plans", i.plans, "program_bytes",
                         i.program_bytes);
}

static PyObject *context_cache_clear(rjp_context *self, PyObject *unused)
{
    return PyLong_FromLong(red_cache_clear(self->ctx));
}

static PyObject *opt_get_name(rjp_context *self, void *which)
{
    red_option opt = (red_option)(intptr_t)which;
    const char *const *names = opt == RED_OPT_DEVICE ? device_names : strategy_names;
    return PyUnicode_FromString(names[get_opt(self, opt)]);
}

static int opt_set_name(rjp_context *self, PyObject *v, void *which)
{
    red_option opt = (red_option)(intptr_t)which;
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete a context option");
        return -1;
    }
    int i = name_index(opt == RED_OPT_DEVICE ? device_names : strategy_names, v,
                       opt == RED_OPT_DEVICE ? "device" : "strategy");
    return i < 0 ? -1 : set_opt(self, opt, i);
}

static PyObject *threads_get(rjp_context *self, void *unused)
{
    return PyLong_FromLong(get_opt(self, RED_OPT_THREADS));
}

static int threads_set(rjp_context *self, PyObject *v, void *unused)
{
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete a context option");
        return -1;
    }
    long n = PyLong_AsLong(v);
    if (n == -1 && PyErr_Occurred()) return -1;
    if (n < 0 || n > 4096) {
        PyErr_SetString(PyExc_ValueError, "threads must be 0 (all cores) to 4096");
        return -1;
    }
    return set_opt(self, RED_OPT_THREADS, (int)n);
}

static PyObject *cache_mb_get(rjp_context *self, void *unused)
{
    return PyLong_FromLong(get_opt(self, RED_OPT_CACHE_MB));
}

static int cache_mb_set(rjp_context *self, PyObject *v, void *unused)
{
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete a context option");
        return -1;
    }
    long n = PyLong_AsLong(v);
    if (n == -1 && PyErr_Occurred()) return -1;
    if (n < 0 || n > 65536) {
        PyErr_SetString(PyExc_ValueError, "cache_mb must be 0 to 65536");
        return -1;
    }
    return set_opt(self, RED_OPT_CACHE_MB, (int)n);
}

static PyMethodDef context_methods[] = {
    {"prepare", (PyCFunction)context_prepare, METH_O,
     "prepare($self, text, /)\n--\n\n"
     "Parse `text` once and return a reusable Expr.\n\n"
     "Syntax errors raise redjit.SyntaxError here (a text too deep or too large,\n"
     "redjit.LimitError); names, types and shapes are\n"
     "checked when the Expr is called, since they depend on the bindings.\n\n"
     ">>> e = ctx.prepare('sum(A[i,k]*B[k,j]) over k')\n>>> C = e(A=a, B=b)"},
    {"eval", (PyCFunction)(void (*)(void))context_eval, METH_FASTCALL | METH_KEYWORDS,
     "eval($self, text, /, **bindings)\n--\n\n"
     "Evaluate `text` with these bindings on this context (see redjit.eval)."},
    {"gpu_available", (PyCFunction)context_gpu_available, METH_NOARGS,
     "gpu_available($self, /)\n--\n\n"
     "True when a GPU can be used (driver, device and NVRTC found).  The first call\n"
     "initialises CUDA; gpu_error() says why not."},
    {"gpu_error", (PyCFunction)context_gpu_error, METH_NOARGS,
     "gpu_error($self, /)\n--\n\nNone when a GPU can be used, else the reason (a str)."},
    {"cache_stats", (PyCFunction)context_cache_stats, METH_NOARGS,
     "cache_stats($self, /)\n--\n\n"
     "Statistics of the context's caches as a dict: GPU kernels (memory_hits, disk_hits,\n"
     "compiles, compile_ms, pool_bytes, pool_in_use; zeros before the GPU is used) and parsed\n"
     "programs (programs, plans, program_bytes)."},
    {"cache_clear", (PyCFunction)context_cache_clear, METH_NOARGS,
     "cache_clear($self, /)\n--\n\n"
     "Remove every entry of the on-disk kernel cache; returns how many were removed."},
    {NULL},
};

static PyObject *ranks_get(rjp_context *self, void *closure)
{
    (void)closure;
    int rank = 0, size = 1;
    red_comm_rank(self->ctx, &rank, &size);
    return Py_BuildValue("(ii)", rank, size);
}

static PyGetSetDef context_getset[] = {
    {"ranks", (getter)ranks_get, NULL,
     "(rank, size) of the communicator given as comm= ((0, 1) without one).", NULL},
    {"device", (getter)opt_get_name, (setter)opt_set_name,
     "Where expressions run: 'auto' (the GPU when usable, else the CPU), 'cpu' or 'gpu'.",
     (void *)(intptr_t)RED_OPT_DEVICE},
    {"strategy", (getter)opt_get_name, (setter)opt_set_name,
     "GPU reduction strategy: 'auto', 'tree', 'sequential', 'persistent' or 'segmented'.",
     (void *)(intptr_t)RED_OPT_STRATEGY},
    {"threads", (getter)threads_get, (setter)threads_set, "CPU executor threads; 0 means all cores.", NULL},
    {"cache_mb", (getter)cache_mb_get, (setter)cache_mb_set,
     "MiB of memory the context may keep for parsed expressions and their plans (default 64);\n"
     "the least recently used are dropped beyond it.",
     NULL},
    {NULL},
};

PyTypeObject rjp_context_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "redjit.Context",
    .tp_basicsize = sizeof(rjp_context),
    .tp_dealloc = (destructor)context_dealloc,
    .tp_repr = (reprfunc)context_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Context(device='auto', strategy='auto', threads=0)\n--\n\n"
              "A redjit context: options, caches of parsed expressions, plans and GPU kernels.\n\n"
              "device: 'auto' (the GPU when one is usable, else the CPU), 'cpu' or 'gpu'.\n"
              "strategy: GPU reduction strategy, 'auto', 'tree', 'sequential', 'persistent'\n"
              "    or 'segmented'.\n"
              "threads: CPU executor threads, 0 for all cores.\n"
              "blas: False keeps matrix products on redjit's own kernels; True (default) lets\n"
              "    the GPU's automatic strategy hand an exact one to cuBLASLt when installed.\n\n"
              "A context may be used from several threads at once; no GPU is touched until an\n"
              "expression needs one.",
    .tp_methods = context_methods,
    .tp_getset = context_getset,
    .tp_init = (initproc)context_init,
    .tp_new = context_new,
};

/* ---- Expr ------------------------------------------------------------------------------ */

static PyObject *expr_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kwnames);

static PyObject *expr_make(rjp_context *ctx, PyObject *text)
{
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &len);
    if (!utf8) return NULL;
    if (strlen(utf8) != (size_t)len) {
        PyErr_SetString(PyExc_ValueError, "the expression contains a NUL character");
        return NULL;
    }
    red_expr *e = prepare(ctx->ctx, utf8);
    if (!e) return NULL;
    rjp_expr *self = PyObject_New(rjp_expr, &rjp_expr_type);
    if (!self) {
        red_finalize(e);
        return NULL;
    }
    Py_INCREF(ctx);
    Py_INCREF(text);
    self->call = expr_vectorcall;
    self->owner = ctx;
    self->e = e;
    self->text = text;
    self->utf8 = utf8;
    self->last_names = NULL;
    self->splits = NULL;
    self->busy = 0;
    return (PyObject *)self;
}

static void expr_dealloc(rjp_expr *self)
{
    red_finalize(self->e);
    Py_XDECREF(self->last_names);
    Py_XDECREF(self->splits);
    Py_DECREF(self->text);
    Py_DECREF(self->owner);
    PyObject_Free(self);
}

/* Whether name `k` is in the tuple `t` (names are str: keywords always are). */
static int has_name(PyObject *t, PyObject *k)
{
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    for (Py_ssize_t j = 0; j < n; j++)
        if (PyTuple_GET_ITEM(t, j) == k) return 1;
    for (Py_ssize_t j = 0; j < n; j++)
        if (PyUnicode_Compare(PyTuple_GET_ITEM(t, j), k) == 0) return 1;
    PyErr_Clear();
    return 0;
}

/* Whether `kw` binds exactly the names of the last call: then every binding is
 * replaced and none can be left pointing at an array of an earlier call.  A call
 * site passes the same tuple of keyword names every time (the interpreter keeps it
 * with the code), so the usual answer is one comparison of pointers. */
static int same_names(PyObject *last, const rjp_kwargs *kw)
{
    if (!last) return 0;
    if (kw->names == last) return 1;
    Py_ssize_t n = PyTuple_GET_SIZE(last);
    if ((kw->names ? PyTuple_GET_SIZE(kw->names) : 0) != n) return 0;   /* keywords never repeat */
    for (Py_ssize_t i = 0; i < n; i++)
        if (!has_name(last, PyTuple_GET_ITEM(kw->names, i))) return 0;
    return 1;
}

/* Make `kw` the bindings of self->e (clearing older ones when the names differ). */
static int expr_rebind_names(rjp_expr *self, const rjp_kwargs *kw)
{
    if (same_names(self->last_names, kw)) return 0;
    red_clear_bindings(self->e);
    Py_CLEAR(self->last_names);
    self->last_names = kw->names ? Py_NewRef(kw->names) : PyTuple_New(0);
    return self->last_names ? 0 : -1;
}

/* e(**bindings), in the vectorcall convention: no dict is made for the keywords. */
static PyObject *expr_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    rjp_expr *self = (rjp_expr *)obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (no_positional(nargs, "an Expr") < 0) return NULL;
    rjp_kwargs kw = {kwnames, args + nargs};
    /* one red_expr serves one thread at a time: a call that finds it busy (another
     * thread is running it) uses a fresh one, cheap since the parse is cached */
    if (self->busy) return run_once(self->owner, self->utf8, &kw);
    /* busy before anything that can run Python code and so let another thread in:
     * same_names compares the caller's names, a binding reads properties */
    self->busy = 1;
    PyObject *r = NULL;
    if (expr_rebind_names(self, &kw) == 0) r = bind_run(self->owner, self->e, &kw, &self->splits);
    if (!r) {
        /* a binding may be half made: start afresh next time */
        red_clear_bindings(self->e);
        Py_CLEAR(self->last_names);
    }
    self->busy = 0;
    return r;
}

static PyObject *explain_expr(red_expr *e)
{
    const char *text = NULL;
    int rc = red_explain(e, &text);
    if (rc) {
        rjp_raise(rc, red_expr_errmsg(e));
        return NULL;
    }
    return PyUnicode_FromString(text);
}

/* Bind (only types and ranks matter to a plan), explain, release the borrowed buffers. */
static PyObject *explain_bound(red_expr *e, const rjp_kwargs *kw)
{
    rjp_holds H;
    rjp_holds_init(&H);
    PyObject *r = rjp_bind_all(e, kw, &H) == 0 ? explain_expr(e) : NULL;
    rjp_holds_release(&H);
    return r;
}

static PyObject *expr_explain(rjp_expr *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (no_positional(nargs, "explain()") < 0) return NULL;
    rjp_kwargs kw = {kwnames, args + nargs};
    int bindings = kwnames && PyTuple_GET_SIZE(kwnames);
    PyObject *r = NULL;
    if (self->busy) {
        /* another thread is running self->e: a fresh red_expr (the parse is cached) */
        if (!bindings) {
            PyErr_SetString(PyExc_RuntimeError, "the Expr is running in another thread: pass the bindings "
                                                "to explain() to explain a plan");
            return NULL;
        }
        red_expr *e = prepare(self->owner->ctx, self->utf8);
        if (!e) return NULL;
        r = explain_bound(e, &kw);
        red_finalize(e);
        return r;
    }
    /* busy while binding, which runs Python code (properties, __hash__) and so may let
     * another thread in: that thread then takes a fresh red_expr, as for a call */
    self->busy = 1;
    if (!bindings) {
        r = explain_expr(self->e);
    } else if (expr_rebind_names(self, &kw) == 0) {
        r = explain_bound(self->e, &kw);
        if (!r) {
            red_clear_bindings(self->e);
            Py_CLEAR(self->last_names);
        }
    }
    self->busy = 0;
    return r;
}

static PyObject *expr_repr(rjp_expr *self)
{
    return PyUnicode_FromFormat("redjit.Expr(%R)", self->text);
}

static PyObject *expr_get_text(rjp_expr *self, void *unused)
{
    Py_INCREF(self->text);
    return self->text;
}

static PyObject *expr_get_context(rjp_expr *self, void *unused)
{
    Py_INCREF(self->owner);
    return (PyObject *)self->owner;
}

static PyMethodDef expr_methods[] = {
    {"explain", (PyCFunction)(void (*)(void))expr_explain, METH_FASTCALL | METH_KEYWORDS,
     "explain($self, /, **bindings)\n--\n\n"
     "The plan of the expression as a str: map expressions, operators with their\n"
     "identities, domain, result shape, backend and the generated CUDA source.\n\n"
     "The plan depends on the types and ranks of the bindings: pass them as for a\n"
     "call (nothing is run), or none to explain the plan of the last call."},
    {NULL},
};

static PyObject *expr_get_splits(rjp_expr *self, void *closure)
{
    (void)closure;
    if (!self->splits) Py_RETURN_NONE;
    return Py_NewRef(self->splits);
}

static PyGetSetDef expr_getset[] = {
    {"splits", (getter)expr_get_splits, NULL,
     "After a call on a Context with several ranks: for each result, (axis, offset, extent):\n"
     "the result's axis split across the ranks, where this rank's block starts along it and\n"
     "the whole result's extent there; (-1, 0, 0) for a result every rank holds whole.\n"
     "None before such a call.", NULL},
    {"text", (getter)expr_get_text, NULL, "The expression's text.", NULL},
    {"context", (getter)expr_get_context, NULL, "The Context the expression was prepared on.", NULL},
    {NULL},
};

PyTypeObject rjp_expr_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "redjit.Expr",
    .tp_basicsize = sizeof(rjp_expr),
    .tp_dealloc = (destructor)expr_dealloc,
    .tp_repr = (reprfunc)expr_repr,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(rjp_expr, call),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A prepared expression, made by Context.prepare() or redjit.prepare().\n\n"
              "Call it with the bindings as keyword arguments: e(x=a, y=b, t=0.5).  Arrays are\n"
              "read in place (host arrays through the buffer protocol, device arrays through\n"
              "__dlpack__ or __cuda_array_interface__) and not copied, but for big-endian host\n"
              "arrays, read through a byte-swapped copy.  Returns a Python scalar, a NumPy\n"
              "array, or a tuple of them for several results.\n\n"
              "An Expr may be called from several threads at once.",
    .tp_methods = expr_methods,
    .tp_getset = expr_getset,
};

/* ---- module ------------------------------------------------------------------------ */

static rjp_context *default_ctx;

static PyObject *mod_eval(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    const char *text = eval_text(args, nargs);
    if (!text) return NULL;
    rjp_kwargs kw = {kwnames, args + nargs};
    return run_once(default_ctx, text, &kw);
}

static PyObject *mod_prepare(PyObject *m, PyObject *text)
{
    return context_prepare(default_ctx, text);
}

static PyObject *mod_gpu_available(PyObject *m, PyObject *unused)
{
    return context_gpu_available(default_ctx, NULL);
}

static PyObject *mod_default_context(PyObject *m, PyObject *unused)
{
    Py_INCREF(default_ctx);
    return (PyObject *)default_ctx;
}

/* The descriptor a value would be bound with (tests check zero copy by pointer). */
static PyObject *mod_describe(PyObject *m, PyObject *value)
{
    rjp_holds H;
    rjp_holds_init(&H);
    rjp_value v;
    PyObject *r = NULL;
    if (rjp_convert("value", value, &H, &v) == 0) {
        if (v.kind == RJP_F64) {
            r = Py_BuildValue("{s:s,s:d}", "kind", "weak f64", "value", v.f);
        } else if (v.kind == RJP_I64) {
            r = Py_BuildValue("{s:s,s:L}", "kind", "weak i64", "value", (long long)v.i);
        } else {
            PyObject *shape = PyTuple_New(v.a.ndim), *strides = PyTuple_New(v.a.ndim);
            for (int d = 0; shape && strides && d < v.a.ndim; d++) {
                PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(v.a.shape[d]));
                PyTuple_SET_ITEM(strides, d, PyLong_FromLongLong(v.a.strides[d]));
            }
            if (shape && strides)
                r = Py_BuildValue("{s:s,s:N,s:s,s:O,s:O,s:s,s:i}", "kind", "array", "data",
                                  PyLong_FromVoidPtr(v.a.data), "dtype", red_dtype_name(v.a.dtype), "shape",
                                  shape, "strides", strides, "memory",
                                  v.a.memory == RED_MEM_CUDA ? "cuda" : "host", "device_id", v.a.device_id);
            Py_XDECREF(shape);
            Py_XDECREF(strides);
        }
    }
    rjp_holds_release(&H);
    return r;
}

PyObject *rjp_split_type;   /* redjit.Split (bind.c binds its block with red_bind_split) */

static PyObject *mod_set_split_type(PyObject *mod, PyObject *cls)
{
    (void)mod;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "_set_split_type takes a class");
        return NULL;
    }
    Py_XSETREF(rjp_split_type, Py_NewRef(cls));
    Py_RETURN_NONE;
}

static PyObject *mod_nccl_unique_id(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    red_ctx *ctx = NULL;
    if (red_open(&ctx) != RED_OK) return PyErr_NoMemory();
    char id[RED_NCCL_ID_BYTES];
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = red_nccl_unique_id(ctx, id);
    Py_END_ALLOW_THREADS
    if (rc) {
        rjp_raise(rc, red_errmsg(ctx));
        red_close(ctx);
        return NULL;
    }
    red_close(ctx);
    return PyBytes_FromStringAndSize(id, sizeof id);
}

static PyMethodDef module_methods[] = {
    {"nccl_unique_id", (PyCFunction)mod_nccl_unique_id, METH_NOARGS,
     "nccl_unique_id()\n--\n\n"
     "A new NCCL unique id (bytes), made on one rank and handed to the others (e.g. with\n"
     "torch.distributed.broadcast_object_list); each passes it to\n"
     "Context(nccl_id=..., rank=..., nranks=...).  NCCL is loaded on first use\n"
     "(libnccl.so.2, PyTorch's once torch is imported, or the file REDJIT_NCCL_LIB names)."},
    {"_set_split_type", (PyCFunction)mod_set_split_type, METH_O,
     "_set_split_type(cls, /)\n--\n\nThe class whose instances bind as split arrays (redjit.Split)."},
    {"_describe", (PyCFunction)mod_describe, METH_O,
     "_describe(value, /)\n--\n\n"
     "How `value` would be bound, as a dict (kind, data pointer, dtype, shape, strides in\n"
     "elements, memory): for tests and debugging.  Nothing is copied."},
    {"eval", (PyCFunction)(void (*)(void))mod_eval, METH_FASTCALL | METH_KEYWORDS,
     "eval(text, /, **bindings)\n--\n\n"
     "Evaluate the reduction expression `text` over the arrays and scalars bound by\n"
     "keyword, on the default context (the GPU when usable, else the CPU).\n\n"
     "Bindings:\n"
     "  - NumPy arrays and anything with the buffer protocol (host memory), of type\n"
     "    bool, int8, uint8, int16, uint16, int32, int64, uint32, uint64, float16,\n"
     "    float32 or float64 (bfloat16 through ml_dtypes), any strides including\n"
     "    negative and zero;\n"
     "  - objects with __dlpack__ or __cuda_array_interface__ (CuPy, PyTorch, JAX,\n"
     "    Numba), read in place on the GPU with their strides; their stream is waited for;\n"
     "  - int and float: scalars that adapt to the other operand like literals do\n"
     "    (x*t stays float32 for a float32 x); bool and NumPy scalars keep their type.\n"
     "Nothing is copied, except big-endian host arrays (dtype '>f8'): those are read\n"
     "through a byte-swapped copy made for the call.\n\n"
     "Returns a Python int, float or bool for a scalar result, a NumPy array for an\n"
     "array result, and a tuple for several results ('sum(x), max(x)').\n\n"
     "Errors raise subclasses of redjit.Error (SyntaxError, LimitError, TypeError,\n"
     "BindingError, IndexError, DeviceError, UnsupportedError) whose message points at\n"
     "the text with a caret where a place in it is to blame.  The GIL\n"
     "is released while the expression runs.\n\n"
     ">>> redjit.eval('max(abs(x-y))', x=a, y=b)\n"
     ">>> s, m = redjit.eval('sum(x), max(x)', x=a)\n"
     ">>> redjit.eval('sum(A[i,j]) over j', A=m)       # row sums, a NumPy array"},
    {"prepare", (PyCFunction)mod_prepare, METH_O,
     "prepare(text, /)\n--\n\n"
     "Parse `text` once on the default context and return an Expr to call many times:\n"
     ">>> e = redjit.prepare('max(abs(x-y))')\n>>> e(x=a, y=b)"},
    {"gpu_available", (PyCFunction)mod_gpu_available, METH_NOARGS,
     "gpu_available()\n--\n\nTrue when the default context can use a GPU."},
    {"default_context", (PyCFunction)mod_default_context, METH_NOARGS,
     "default_context()\n--\n\n"
     "The Context that redjit.eval and redjit.prepare use; set its options to change\n"
     "theirs (redjit.default_context().device = 'cpu')."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "redjit._redjit",
    .m_doc = "The CPython extension at the core of the redjit package (use `import redjit`).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__redjit(void)
{
    if (PyType_Ready(&rjp_context_type) < 0 || PyType_Ready(&rjp_expr_type) < 0 ||
        PyType_Ready(&rjp_buffer_type) < 0 || PyType_Ready(&rjp_devarray_type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (add_exceptions(m) < 0 || PyModule_AddObjectRef(m, "Context", (PyObject *)&rjp_context_type) < 0 ||
        PyModule_AddObjectRef(m, "Expr", (PyObject *)&rjp_expr_type) < 0 ||
        PyModule_AddObjectRef(m, "_Buffer", (PyObject *)&rjp_buffer_type) < 0 ||
        PyModule_AddObjectRef(m, "DeviceArray", (PyObject *)&rjp_devarray_type) < 0 ||
        PyModule_AddStringConstant(m, "library_version", red_version_string()) < 0)
        goto fail;
    if (red_version_number() != REDJIT_VERSION_NUMBER) {
        PyErr_Format(PyExc_ImportError, "redjit: built against library %s, linked with %s", REDJIT_VERSION_STRING,
                     red_version_string());
        goto fail;
    }
    default_ctx = (rjp_context *)PyObject_CallNoArgs((PyObject *)&rjp_context_type);
    if (!default_ctx) goto fail;
    if (!sigint_hooked) hook_sigint();
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
