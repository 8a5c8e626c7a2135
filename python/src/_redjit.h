/*
 * _redjit.h -- what the three files of the CPython extension share: the object
 * layouts of Context and Expr, the binding holder, and the error helpers.
 * module.c holds the types and the module, bind.c turns keyword arguments into
 * bindings, result.c turns results into Python objects.
 */
#ifndef REDJIT_PY_H
#define REDJIT_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "redjit.h"

/* ---- objects ----------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    red_ctx *ctx;
    int nranks;           /* ranks of the attached communicator (1 without one)  */
} rjp_context;

typedef struct {
    PyObject_HEAD
    vectorcallfunc call;  /* expr_vectorcall: e(x=a) in the vectorcall convention */
    rjp_context *owner;   /* strong: the context outlives its expressions        */
    red_expr *e;          /* the expression's own handle                         */
    PyObject *text;       /* str                                                 */
    const char *utf8;     /* UTF-8 of text, owned by `text`                      */
    PyObject *last_names; /* tuple of the names bound by the last call, or NULL  */
    PyObject *splits;     /* the last call's red_result_split of each result, or NULL */
    int busy;             /* `e` is in use by a call (read and set under the GIL) */
} rjp_expr;

extern PyTypeObject rjp_context_type;
extern PyObject *rjp_split_type;   /* redjit.Split, set by __init__.py */
extern PyTypeObject rjp_expr_type;
extern PyTypeObject rjp_buffer_type;
extern PyTypeObject rjp_devarray_type;

/* ---- bindings: what must stay alive (buffers, DLPack tensors) until the run ends ---- */

enum { RJP_HOLD_BUFFER = 1, RJP_HOLD_DLPACK = 2, RJP_HOLD_DLPACK_V1 = 3 };

typedef struct {
    int kind;
    Py_buffer view;    /* RJP_HOLD_BUFFER                                   */
    PyObject *capsule; /* RJP_HOLD_DLPACK*: the capsule, renamed "used_..." */
    void *managed;     /* RJP_HOLD_DLPACK*: the managed tensor to delete    */
    void *copy;        /* a byte-swapped copy of a big-endian buffer (PyMem) */
} rjp_hold;

#define RJP_HOLDS_INLINE 8
typedef struct {
    rjp_hold inl[RJP_HOLDS_INLINE];
    rjp_hold *h;
    int n, cap;
    int device; /* an array in CUDA memory was bound: results stay on the device */
} rjp_holds;

void rjp_holds_init(rjp_holds *H);
/* Release every buffer and delete every DLPack tensor held (needs the GIL). */
void rjp_holds_release(rjp_holds *H);

/* A keyword argument made ready for the library: a weak f64 or i64 scalar, or an
 * array descriptor (a 0-d one for typed scalars, pointing into this struct). */
enum { RJP_ARRAY = 1, RJP_F64 = 2, RJP_I64 = 3 };
typedef struct {
    int kind;
    red_array a;
    double f;
    int64_t i;
    uint64_t u;
    unsigned char b;
    double z[2];   /* a Python complex: a 0-d c128 */
} rjp_value;

/* Convert `value` bound as `name` (for messages); what it borrows goes into H.
 * 0, or -1 with a Python exception set. */
int rjp_convert(const char *name, PyObject *value, rjp_holds *H, rjp_value *out);
/* Bind one keyword argument.  0, or -1 with a Python exception set. */
int rjp_bind(red_expr *e, PyObject *name, PyObject *value, rjp_holds *H);
/* A call's keyword arguments in the vectorcall convention (METH_FASTCALL |
 * METH_KEYWORDS, tp_vectorcall): a tuple of names and their values, which
 * spares the interpreter making a dict a call. */
typedef struct {
    PyObject *names;         /* tuple of str, or NULL for none */
    PyObject *const *values; /* values[i] is bound to names[i] */
} rjp_kwargs;

/* Bind every keyword argument of `kw`.  0, or -1 with an exception set. */
int rjp_bind_all(red_expr *e, const rjp_kwargs *kw, rjp_holds *H);

/* The results of the last run of `e`: None, one object or a tuple.  Scalars become
 * Python numbers, host arrays NumPy arrays, device arrays redjit.DeviceArray. */
PyObject *rjp_results(rjp_context *owner, red_expr *e);
/* A NumPy array (a memoryview without NumPy) owning host result `a` (red_free). */
PyObject *rjp_host_array(const red_array *a);
/* A redjit.DeviceArray owning device result `a` (red_device_free on owner). */
PyObject *rjp_devarray_new(rjp_context *owner, const red_array *a);

/* ---- errors ------------------------------------------------------------------------- */

/* Raise the redjit.Error subclass for `status` with `msg` (the caret message). */
void rjp_raise(int status, const char *msg);
/* Raise redjit.BindingError with a printf-style message. */
void rjp_raise_bind(const char *fmt, ...);
extern PyObject *rjp_Error;

#endif /* REDJIT_PY_H */
