/*
 * devarray.c -- redjit.DeviceArray, the result of an expression over device arrays: a
 * buffer in GPU memory (from the context's pool) exported through __dlpack__ and
 * __cuda_array_interface__, so cupy.from_dlpack(r) and torch.from_dlpack(r) take it
 * without a copy.  The run that made it has finished, so no stream needs waiting for.
 */
#include "_redjit.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    rjp_context *owner; /* the pool the memory comes from */
    red_array a;        /* memory == RED_MEM_CUDA, contiguous */
} rjp_devarray;

/* DLPack's ABI, as in bind.c (the producer's side here) */
typedef struct {
    void *data;
    struct {
        int32_t device_type, device_id;
    } device;
    int32_t ndim;
    struct {
        uint8_t code, bits;
        uint16_t lanes;
    } dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} dl_tensor;

typedef struct dl_managed {
    dl_tensor t;
    void *manager_ctx;
    void (*deleter)(struct dl_managed *);
    int64_t shape[RED_MAX_DIMS], strides[RED_MAX_DIMS];
} dl_managed;

typedef struct dl_managed_v1 {
    struct {
        uint32_t major, minor;
    } version;
    void *manager_ctx;
    void (*deleter)(struct dl_managed_v1 *);
    uint64_t flags;
    dl_tensor t;
    int64_t shape[RED_MAX_DIMS], strides[RED_MAX_DIMS];
} dl_managed_v1;

PyObject *rjp_devarray_new(rjp_context *owner, const red_array *a)
{
    rjp_devarray *self = PyObject_New(rjp_devarray, &rjp_devarray_type);
    if (!self) {
        red_device_free(owner->ctx, a->data);
        return NULL;
    }
    Py_INCREF(owner);
    self->owner = owner;
    self->a = *a;
    return (PyObject *)self;
}

static void devarray_dealloc(rjp_devarray *self)
{
    red_device_free(self->owner->ctx, self->a.data);
    Py_DECREF(self->owner);
    PyObject_Free(self);
}

static const char *typestr(red_dtype t)
{
    switch (t) {
    case RED_BOOL: return "|b1";
    case RED_I32: return "<i4";
    case RED_I64: return "<i8";
    case RED_U32: return "<u4";
    case RED_U64: return "<u8";
    case RED_I8: return "|i1";
    case RED_U8: return "|u1";
    case RED_I16: return "<i2";
    case RED_U16: return "<u2";
    case RED_C64: return "<c8";
    case RED_C128: return "<c16";
    case RED_F16: return "<f2";
    case RED_F32: return "<f4";
    case RED_F64: return "<f8";
    default: return NULL; /* bfloat16 has no typestr */
    }
}

static PyObject *shape_tuple(const red_array *a)
{
    PyObject *t = PyTuple_New(a->ndim);
    for (int d = 0; t && d < a->ndim; d++) PyTuple_SET_ITEM(t, d, PyLong_FromLongLong(a->shape[d]));
    return t;
}

static PyObject *get_cai(rjp_devarray *self, void *unused)
{
    const char *ts = typestr(self->a.dtype);
    if (!ts) {
        PyErr_SetString(PyExc_AttributeError, "bfloat16 has no __cuda_array_interface__ type: use __dlpack__");
        return NULL;
    }
    /* the data is ready (the run has finished): no stream to wait for */
    return Py_BuildValue("{s:N,s:s,s:(Ni),s:i,s:O,s:O}", "shape", shape_tuple(&self->a), "typestr", ts, "data",
                         PyLong_FromVoidPtr(self->a.data), 0, "version", 3, "strides", Py_None, "stream", Py_None);
}

/* ---- __dlpack__ ----------------------------------------------------------------------- */

static void fill_tensor(rjp_devarray *self, dl_tensor *t, int64_t *shape, int64_t *strides)
{
    static const uint8_t code[] = {[RED_BOOL] = 6, [RED_I32] = 0, [RED_I64] = 0, [RED_U32] = 1, [RED_U64] = 1,
                                   [RED_F16] = 2,  [RED_BF16] = 4, [RED_F32] = 2, [RED_F64] = 2,
                                   [RED_I8] = 0,   [RED_U8] = 1,   [RED_I16] = 0, [RED_U16] = 1,
                                   [RED_C64] = 5,  [RED_C128] = 5};
    memset(t, 0, sizeof *t);
    t->data = self->a.data;
    t->device.device_type = 2; /* kDLCUDA */
    t->device.device_id = self->a.device_id;
    t->ndim = self->a.ndim;
    t->dtype.code = code[self->a.dtype];
    t->dtype.bits = (uint8_t)(8 * red_dtype_size(self->a.dtype));
    t->dtype.lanes = 1;
    for (int d = 0; d < self->a.ndim; d++) {
        shape[d] = self->a.shape[d];
        strides[d] = self->a.strides[d];
    }
    t->shape = shape;
    t->strides = strides;
}

/* The deleters may run on any thread, with or without the GIL. */
static void release_owner(void *ctx)
{
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF((PyObject *)ctx);
    PyGILState_Release(g);
}

static void delete_legacy(dl_managed *m)
{
    release_owner(m->manager_ctx);
    PyMem_RawFree(m);
}

static void delete_v1(dl_managed_v1 *m)
{
    release_owner(m->manager_ctx);
    PyMem_RawFree(m);
}

/* A capsule never consumed deletes its tensor itself. */
static void capsule_legacy(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor")) {
        dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
        if (m && m->deleter) m->deleter(m);
    }
}

static void capsule_v1(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        dl_managed_v1 *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m && m->deleter) m->deleter(m);
    }
}

static PyObject *devarray_dlpack(rjp_devarray *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", kw, &stream, &max_version, &dl_device,
                                     &copy))
        return NULL;
    if (copy == Py_True) {
        PyErr_SetString(PyExc_BufferError, "redjit.DeviceArray exports its memory without copies only");
        return NULL;
    }
    if (dl_device != Py_None) {   /* only where the memory is: (kDLCUDA, its device) */
        long dt = -1, id = -1;
        if (PyTuple_Check(dl_device) && PyTuple_GET_SIZE(dl_device) == 2) {
            dt = PyLong_AsLong(PyTuple_GET_ITEM(dl_device, 0));
            id = PyLong_AsLong(PyTuple_GET_ITEM(dl_device, 1));
            if (PyErr_Occurred()) return NULL;
        }
        if (dt != 2 || id != self->a.device_id) {
            PyErr_Format(PyExc_BufferError, "redjit.DeviceArray is in the memory of CUDA device %d: it exports "
                         "there only, without copies (dl_device=%R)", self->a.device_id, dl_device);
            return NULL;
        }
    }
    long major = 0;
    if (max_version != Py_None) {
        if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) < 1) {
            PyErr_SetString(PyExc_TypeError, "max_version must be a tuple (major, minor)");
            return NULL;
        }
        major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0));
        if (major == -1 && PyErr_Occurred()) return NULL;
    }
    Py_INCREF(self); /* released by the tensor's deleter */
    PyObject *cap;
    if (major >= 1) {
        dl_managed_v1 *m = PyMem_RawCalloc(1, sizeof *m);
        if (!m) {
            Py_DECREF(self);
            return PyErr_NoMemory();
        }
        m->version.major = 1;
        m->version.minor = 0;
        m->manager_ctx = self;
        m->deleter = delete_v1;
        fill_tensor(self, &m->t, m->shape, m->strides);
        cap = PyCapsule_New(m, "dltensor_versioned", capsule_v1);
        if (!cap) delete_v1(m);
    } else {
        dl_managed *m = PyMem_RawCalloc(1, sizeof *m);
        if (!m) {
            Py_DECREF(self);
            return PyErr_NoMemory();
        }
        m->manager_ctx = self;
        m->deleter = delete_legacy;
        fill_tensor(self, &m->t, m->shape, m->strides);
        cap = PyCapsule_New(m, "dltensor", capsule_legacy);
        if (!cap) delete_legacy(m);
    }
    return cap;
}

static PyObject *devarray_dlpack_device(rjp_devarray *self, PyObject *unused)
{
    return Py_BuildValue("(ii)", 2, self->a.device_id);
}

/* ---- host copies, on request ---------------------------------------------------------- */

static PyObject *devarray_get(rjp_devarray *self, PyObject *unused)
{
    red_array h = self->a;
    size_t bytes = (size_t)red_array_size(&h) * red_dtype_size(h.dtype);
    h.data = malloc(bytes ? bytes : 1);
    h.memory = RED_MEM_HOST;
    if (!h.data) return PyErr_NoMemory();
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = red_memcpy(self->owner->ctx, h.data, RED_MEM_HOST, self->a.data, RED_MEM_CUDA, bytes);
    Py_END_ALLOW_THREADS
    if (rc) {
        free(h.data);
        rjp_raise(rc, red_errmsg(self->owner->ctx));
        return NULL;
    }
    return rjp_host_array(&h); /* takes h.data */
}

static PyObject *devarray_array(rjp_devarray *self, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"dtype", "copy", NULL};
    PyObject *dtype = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:__array__", kw, &dtype, &copy)) return NULL;
    if (copy == Py_False) {   /* NumPy 2's protocol: no copy asked for, and one is needed */
        PyErr_SetString(PyExc_ValueError, "a redjit.DeviceArray is in GPU memory: a NumPy array of it is a copy "
                                          "(copy=False cannot be honoured)");
        return NULL;
    }
    PyObject *r = devarray_get(self, NULL);
    if (r && dtype != Py_None) {
        PyObject *c = PyObject_CallMethod(r, "astype", "O", dtype);
        Py_DECREF(r);
        r = c;
    }
    return r;
}

static PyObject *get_shape(rjp_devarray *self, void *unused) { return shape_tuple(&self->a); }
static PyObject *get_ndim(rjp_devarray *self, void *unused) { return PyLong_FromLong(self->a.ndim); }
static PyObject *get_size(rjp_devarray *self, void *unused) { return PyLong_FromLongLong(red_array_size(&self->a)); }
static PyObject *get_ptr(rjp_devarray *self, void *unused) { return PyLong_FromVoidPtr(self->a.data); }

static PyObject *get_dtype(rjp_devarray *self, void *unused)
{
    static const char *const names[] = {[RED_BOOL] = "bool",     [RED_I32] = "int32",  [RED_I64] = "int64",
                                        [RED_U32] = "uint32",    [RED_U64] = "uint64", [RED_F16] = "float16",
                                        [RED_BF16] = "bfloat16", [RED_F32] = "float32", [RED_F64] = "float64",
                                        [RED_I8] = "int8",       [RED_U8] = "uint8",    [RED_I16] = "int16",
                                        [RED_U16] = "uint16",    [RED_C64] = "complex64",
                                        [RED_C128] = "complex128"};
    return PyUnicode_FromString(names[self->a.dtype]);
}

static PyObject *devarray_repr(rjp_devarray *self)
{
    PyObject *shape = shape_tuple(&self->a), *dtype = get_dtype(self, NULL);
    PyObject *r = shape && dtype ? PyUnicode_FromFormat("redjit.DeviceArray(shape=%R, dtype=%U, device=cuda:%d)",
                                                        shape, dtype, self->a.device_id)
                                 : NULL;
    Py_XDECREF(shape);
    Py_XDECREF(dtype);
    return r;
}

static PyMethodDef devarray_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))devarray_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "A DLPack capsule of the device memory (versioned when max_version >= (1, 0))."},
    {"__dlpack_device__", (PyCFunction)devarray_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n(2, device id): CUDA memory."},
    {"get", (PyCFunction)devarray_get, METH_NOARGS,
     "get($self, /)\n--\n\nA NumPy copy in host memory (as CuPy's ndarray.get())."},
    {"__array__", (PyCFunction)(void (*)(void))devarray_array, METH_VARARGS | METH_KEYWORDS,
     "__array__($self, /, dtype=None, copy=None)\n--\n\nA NumPy copy in host memory."},
    {NULL},
};

static PyGetSetDef devarray_getset[] = {
    {"__cuda_array_interface__", (getter)get_cai, NULL, "Numba's CUDA array interface, version 3.", NULL},
    {"shape", (getter)get_shape, NULL, "The shape, a tuple.", NULL},
    {"ndim", (getter)get_ndim, NULL, "The number of dimensions.", NULL},
    {"size", (getter)get_size, NULL, "The number of elements.", NULL},
    {"dtype", (getter)get_dtype, NULL, "The element type's NumPy name ('float32').", NULL},
    {"ptr", (getter)get_ptr, NULL, "The device address of the first element.", NULL},
    {NULL},
};

PyTypeObject rjp_devarray_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "redjit.DeviceArray",
    .tp_basicsize = sizeof(rjp_devarray),
    .tp_dealloc = (destructor)devarray_dealloc,
    .tp_repr = (reprfunc)devarray_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An array result in GPU memory, from an expression over device arrays.\n\n"
              "It exports __dlpack__ and __cuda_array_interface__: cupy.from_dlpack(r),\n"
              "torch.from_dlpack(r) and cupy.asarray(r) use the memory in place; get() or\n"
              "numpy.asarray(r) copy it to the host.",
    .tp_methods = devarray_methods,
    .tp_getset = devarray_getset,
};
