/*
 * result.c -- results to Python objects: scalars to int / float / bool, arrays to
 * NumPy arrays that own the library's detached buffer.  The array goes through the
 * buffer protocol of a small owner object (redjit._Buffer), so the extension needs
 * neither NumPy's C API nor NumPy at build time; without NumPy a memoryview comes back.
 * Array results of device runs stay on the device (devarray.c).
 */
#include "_redjit.h"

#include <string.h>

/* ---- the owner of a detached result buffer ------------------------------------------ */

typedef struct {
    PyObject_HEAD
    void *data; /* from red_result_take, released with red_free */
    int ndim;
    Py_ssize_t itemsize;
    Py_ssize_t shape[RED_MAX_DIMS];
    Py_ssize_t strides[RED_MAX_DIMS]; /* bytes */
    char format[3];
} rjp_buffer;

static void buffer_dealloc(rjp_buffer *self)
{
    red_free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Whether the strides are those of Fortran order (an exporter must refuse a request for
 * an F-contiguous view otherwise; C order is what results are made in). */
static int buffer_f_contiguous(const rjp_buffer *self)
{
    Py_ssize_t st = self->itemsize;
    for (int d = 0; d < self->ndim; d++) {
        if (self->shape[d] > 1 && self->strides[d] != st) return 0;
        st *= self->shape[d];
    }
    return 1;
}

static int buffer_get(rjp_buffer *self, Py_buffer *view, int flags)
{
    if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && !buffer_f_contiguous(self)) {
        PyErr_SetString(PyExc_BufferError, "a redjit result is in C order, not Fortran order");
        view->obj = NULL;
        return -1;
    }
    Py_INCREF(self);
    view->obj = (PyObject *)self;
    view->buf = self->data;
    view->len = self->itemsize;
    for (int d = 0; d < self->ndim; d++) view->len *= self->shape[d];
    view->readonly = 0; /* the caller owns the result */
    view->itemsize = self->itemsize;
    view->format = (flags & PyBUF_FORMAT) ? self->format : NULL;
    view->ndim = self->ndim;
    view->shape = (flags & PyBUF_ND) ? self->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? self->strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static PyBufferProcs buffer_procs = {(getbufferproc)buffer_get, NULL};

PyTypeObject rjp_buffer_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "redjit._Buffer",
    .tp_basicsize = sizeof(rjp_buffer),
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_as_buffer = &buffer_procs,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Owner of a result array's memory (exported through the buffer protocol).",
};

/* ---- element conversion ------------------------------------------------------------ */

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man) { /* subnormal: normalise */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    } else {
        bits = sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static PyObject *scalar_object(red_dtype t, const void *p)
{
    switch (t) {
    case RED_BOOL: return PyBool_FromLong(*(const unsigned char *)p != 0);
    case RED_I32: return PyLong_FromLong(*(const int32_t *)p);
    case RED_I64: return PyLong_FromLongLong(*(const int64_t *)p);
    case RED_U32: return PyLong_FromUnsignedLong(*(const uint32_t *)p);
    case RED_U64: return PyLong_FromUnsignedLongLong(*(const uint64_t *)p);
    case RED_I8: return PyLong_FromLong(*(const int8_t *)p);
    case RED_U8: return PyLong_FromLong(*(const uint8_t *)p);
    case RED_I16: return PyLong_FromLong(*(const int16_t *)p);
    case RED_U16: return PyLong_FromLong(*(const uint16_t *)p);
    case RED_F16: return PyFloat_FromDouble(half_to_float(*(const uint16_t *)p));
    case RED_BF16: return PyFloat_FromDouble(bf16_to_float(*(const uint16_t *)p));
    case RED_F32: return PyFloat_FromDouble(*(const float *)p);
    case RED_F64: return PyFloat_FromDouble(*(const double *)p);
    case RED_C64: return PyComplex_FromDoubles(((const float *)p)[0], ((const float *)p)[1]);
    case RED_C128: return PyComplex_FromDoubles(((const double *)p)[0], ((const double *)p)[1]);
    }
    PyErr_Format(rjp_Error, "result of unknown dtype %d", (int)t);
    return NULL;
}

/* ---- arrays -------------------------------------------------------------------------- */

static PyObject *numpy_asarray; /* numpy.asarray, or Py_None when NumPy is missing */

static PyObject *as_array(PyObject *owner)
{
    if (!numpy_asarray) {
        PyObject *np = PyImport_ImportModule("numpy");
        if (np) {
            numpy_asarray = PyObject_GetAttrString(np, "asarray");
            Py_DECREF(np);
        }
        if (!numpy_asarray) {
            PyErr_Clear();
            Py_INCREF(Py_None);
            numpy_asarray = Py_None;
        }
    }
    if (numpy_asarray == Py_None) return PyMemoryView_FromObject(owner);
    return PyObject_CallOneArg(numpy_asarray, owner);
}

PyObject *rjp_host_array(const red_array *a)
{
    rjp_buffer *b = PyObject_New(rjp_buffer, &rjp_buffer_type);
    if (!b) {
        red_free(a->data);
        return NULL;
    }
    b->data = a->data;
    b->ndim = a->ndim;
    red_dtype dt = a->dtype;
    int64_t n = red_array_size(a);
    const char *fmt = NULL;
    switch (dt) {
    case RED_BOOL: fmt = "?"; break;
    case RED_I32: fmt = "i"; break;
    case RED_I64: fmt = "q"; break;
    case RED_U32: fmt = "I"; break;
    case RED_U64: fmt = "Q"; break;
    case RED_I8: fmt = "b"; break;
    case RED_U8: fmt = "B"; break;
    case RED_I16: fmt = "h"; break;
    case RED_U16: fmt = "H"; break;
    case RED_F16: fmt = "e"; break;
    case RED_F32: fmt = "f"; break;
    case RED_F64: fmt = "d"; break;
    case RED_C64: fmt = "Zf"; break;
    case RED_C128: fmt = "Zd"; break;
    case RED_BF16: {
        /* the buffer protocol has no bfloat16: widen to float32 (the language computes
         * bf16 in f32, so this does not arise from today's operators) */
        float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
        if (!f) {
            Py_DECREF(b); /* frees a->data */
            return PyErr_NoMemory();
        }
        for (int64_t k = 0; k < n; k++) f[k] = bf16_to_float(((const uint16_t *)a->data)[k]);
        red_free(a->data);
        b->data = f;
        dt = RED_F32;
        fmt = "f";
        break;
    }
    }
    if (!fmt) {
        Py_DECREF(b);
        PyErr_Format(rjp_Error, "result of unknown dtype %d", (int)dt);
        return NULL;
    }
    snprintf(b->format, sizeof b->format, "%s", fmt);
    b->itemsize = (Py_ssize_t)red_dtype_size(dt);
    /* detached results are contiguous, row-major */
    Py_ssize_t s = b->itemsize;
    for (int d = a->ndim - 1; d >= 0; d--) {
        b->shape[d] = (Py_ssize_t)a->shape[d];
        b->strides[d] = s;
        s *= b->shape[d];
    }
    PyObject *r = as_array((PyObject *)b);
    Py_DECREF(b);
    return r;
}

static PyObject *result_object(rjp_context *owner, red_expr *e, int i)
{
    red_array a;
    int rc = red_result(e, i, &a, NULL);
    if (rc) {
        rjp_raise(rc, red_expr_errmsg(e));
        return NULL;
    }
    if (a.ndim == 0) {
        if (a.memory != RED_MEM_CUDA) return scalar_object(a.dtype, a.data);
        /* a scalar result of a device run: a Python number all the same */
        double host[2];   /* the largest scalar: a c128 */
        int rc2;
        Py_BEGIN_ALLOW_THREADS
        rc2 = red_memcpy(owner->ctx, host, RED_MEM_HOST, a.data, RED_MEM_CUDA, red_dtype_size(a.dtype));
        Py_END_ALLOW_THREADS
        if (rc2) {
            rjp_raise(rc2, red_errmsg(owner->ctx));
            return NULL;
        }
        return scalar_object(a.dtype, host);
    }
    rc = red_result_take(e, i, &a);   /* never read through `e` again: no copy */
    if (rc) {
        rjp_raise(rc, red_expr_errmsg(e));
        return NULL;
    }
    return a.memory == RED_MEM_CUDA ? rjp_devarray_new(owner, &a) : rjp_host_array(&a);
}

PyObject *rjp_results(rjp_context *owner, red_expr *e)
{
    int n = red_result_count(e);
    if (n == 1) return result_object(owner, e, 0);
    if (n == 0) Py_RETURN_NONE;
    PyObject *t = PyTuple_New(n);
    if (!t) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *r = result_object(owner, e, i);
        if (!r) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, r);
    }
    return t;
}
