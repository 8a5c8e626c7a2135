/*
 * bind.c -- keyword arguments to redjit bindings.  Python int and float become
 * weak scalars (like literals), bool a 0-d bool; host arrays come through the
 * buffer protocol, device arrays through __dlpack__ or __cuda_array_interface__,
 * in place: nothing is copied, and what was borrowed is held until the run ends.  The
 * one exception is a big-endian host array, read through a byte-swapped copy.
 */
#include "_redjit.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <string.h>

/* ---- DLPack: the ABI, mirrored here so that any dlpack.h (or none) will do ----------
 * DLTensor is unchanged from DLPack 0.2 to 1.x; DLManagedTensorVersioned is 1.0's. */
typedef struct {
    int32_t device_type, device_id;
} rjp_dldevice;
typedef struct {
    uint8_t code, bits;
    uint16_t lanes;
} rjp_dldtype;
typedef struct {
    void *data;
    rjp_dldevice device;
    int32_t ndim;
    rjp_dldtype dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} rjp_dltensor;
typedef struct rjp_dlmanaged {
    rjp_dltensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct rjp_dlmanaged *self);
} rjp_dlmanaged;
typedef struct rjp_dlmanaged_v1 {
    struct {
        uint32_t major, minor;
    } version;
    void *manager_ctx;
    void (*deleter)(struct rjp_dlmanaged_v1 *self);
    uint64_t flags;
    rjp_dltensor dl_tensor;
} rjp_dlmanaged_v1;

enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_HOST = 3 };

/* ---- holds ---------------------------------------------------------------------------- */

void rjp_holds_init(rjp_holds *H)
{
    H->h = H->inl;
    H->n = 0;
    H->cap = RJP_HOLDS_INLINE;
    H->device = 0;
}

static rjp_hold *hold_new(rjp_holds *H)
{
    if (H->n == H->cap) {
        int cap = H->cap * 2;
        rjp_hold *nh = PyMem_Malloc((size_t)cap * sizeof *nh);
        if (!nh) {
            PyErr_NoMemory();
            return NULL;
        }
        memcpy(nh, H->h, (size_t)H->n * sizeof *nh);
        if (H->h != H->inl) PyMem_Free(H->h);
        H->h = nh;
        H->cap = cap;
    }
    rjp_hold *h = &H->h[H->n++];
    h->kind = 0;
    h->capsule = NULL;
    h->managed = NULL;
    h->copy = NULL;
    return h;
}

void rjp_holds_release(rjp_holds *H)
{
    for (int i = 0; i < H->n; i++) {
        rjp_hold *h = &H->h[i];
        if (h->kind == RJP_HOLD_BUFFER) {
            PyBuffer_Release(&h->view);
        } else if (h->kind == RJP_HOLD_DLPACK) {
            rjp_dlmanaged *m = h->managed;
            if (m && m->deleter) m->deleter(m);
        } else if (h->kind == RJP_HOLD_DLPACK_V1) {
            rjp_dlmanaged_v1 *m = h->managed;
            if (m && m->deleter) m->deleter(m);
        }
        Py_XDECREF(h->capsule);
        PyMem_Free(h->copy);
    }
    if (H->h != H->inl) PyMem_Free(H->h);
    rjp_holds_init(H);
}

/* ---- errors ---------------------------------------------------------------------------- */

void rjp_raise_bind(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rjp_raise(RED_ERR_BIND, msg);
}

static const char supported_types[] =
    "redjit reads bool, int8, uint8, int16, uint16, int32, int64, uint32, uint64, float16, bfloat16, float32, "
    "float64, complex64 and complex128";

/* ---- host arrays: the buffer protocol ----------------------------------------------- */

/* The redjit type of a struct-module format string with item size `size`, or 0.
 * *swapped: the items are big-endian ('>' or '!'), and must be byte-swapped into
 * the little-endian order the library reads. */
static red_dtype format_dtype(const char *f, Py_ssize_t size, int *swapped)
{
    *swapped = 0;
    if (!f) return 0; /* "B": bytes */
    if (*f == '@' || *f == '=' || *f == '<') f++;
    else if (*f == '>' || *f == '!') {
        f++;
        *swapped = size > 1;
    }
    if (f[0] == 'Z' && f[1] && !f[2])          /* complex: Zf, Zd */
        return f[1] == 'f' && size == 8 ? RED_C64 : f[1] == 'd' && size == 16 ? RED_C128 : 0;
    if (!f[0] || f[1]) return 0;               /* one item, no struct, no repeat count */
    switch (f[0]) {
    case '?': return size == 1 ? RED_BOOL : 0;
    case 'e': return size == 2 ? RED_F16 : 0;
    case 'f': return size == 4 ? RED_F32 : 0;
    case 'd': return size == 8 ? RED_F64 : 0;
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n':
        return size == 1 ? RED_I8 : size == 2 ? RED_I16 : size == 4 ? RED_I32 : size == 8 ? RED_I64 : 0;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N':
        return size == 1 ? RED_U8 : size == 2 ? RED_U16 : size == 4 ? RED_U32 : size == 8 ? RED_U64 : 0;
    }
    return 0;
}

static int view_array(const char *name, Py_buffer *v, red_dtype dt, rjp_value *out)
{
    if (v->ndim > RED_MAX_DIMS) {
        rjp_raise_bind("cannot bind '%s': %d dimensions (0 to %d are allowed)", name, v->ndim, RED_MAX_DIMS);
        return -1;
    }
    red_array *a = &out->a;
    out->kind = RJP_ARRAY;
    memset(a, 0, sizeof *a);
    a->data = v->buf;
    a->dtype = dt;
    a->ndim = v->ndim;
    a->memory = RED_MEM_HOST;
    int64_t s = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        a->shape[d] = v->shape[d];
        if (v->strides) {
            if (v->strides[d] % v->itemsize) {
                rjp_raise_bind("cannot bind '%s': its stride along dimension %d is %zd bytes, not a multiple "
                               "of its item size (%zd bytes); copy it first (numpy.ascontiguousarray)",
                               name, d, v->strides[d], v->itemsize);
                return -1;
            }
            a->strides[d] = v->strides[d] / v->itemsize;
        } else {
            a->strides[d] = s;
        }
        s *= v->shape[d] > 0 ? v->shape[d] : 1;
    }
    return 0;
}

/* A probe failed (a property that raises, as PyTorch's __cuda_array_interface__ does on a
 * CPU tensor): forget it and try the next way, unless it is Ctrl-C or out of memory,
 * which stand (-1). */
static int probe_failed(void)
{
    if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) || PyErr_ExceptionMatches(PyExc_MemoryError)) return -1;
    PyErr_Clear();
    return 0;
}

/* bfloat16 arrays of ml_dtypes (NumPy has no bfloat16 of its own, and refuses to
 * export one through the buffer protocol): bound through a uint16 view. */
static int ml_bfloat16(const char *name, PyObject *value, rjp_holds *H, int *done, rjp_value *out)
{
    *done = 0;
    PyObject *dt = PyObject_GetAttrString(value, "dtype");
    if (!dt) return probe_failed();
    PyObject *dname = PyObject_GetAttrString(dt, "name");
    Py_DECREF(dt);
    if (!dname) return probe_failed();
    int is_bf16 = PyUnicode_Check(dname) && PyUnicode_CompareWithASCIIString(dname, "bfloat16") == 0;
    Py_DECREF(dname);
    if (!is_bf16) return 0;
    PyObject *u16 = PyObject_CallMethod(value, "view", "s", "uint16");
    if (!u16) return -1;
    rjp_hold *h = hold_new(H);
    if (!h) {
        Py_DECREF(u16);
        return -1;
    }
    int rc = PyObject_GetBuffer(u16, &h->view, PyBUF_RECORDS_RO);
    Py_DECREF(u16); /* the view holds the array */
    if (rc < 0) {
        H->n--;
        return -1;
    }
    h->kind = RJP_HOLD_BUFFER;
    *done = 1;
    if (h->view.itemsize != 2) {   /* a view that did not give 2-byte items */
        rjp_raise_bind("cannot bind '%s': its bfloat16 data viewed as uint16 has items of %zd bytes", name,
                       h->view.itemsize);
        return -1;
    }
    return view_array(name, &h->view, RED_BF16, out);
}

/* A big-endian array (NumPy's dtype '>f8', as read from a file written on such a
 * machine): the library reads little-endian data only, so its elements are copied
 * in C order into a buffer of the hold's own (freed with it), each byte-swapped.
 * The copy costs the array's size in memory and one pass over it, on every call;
 * a.astype(a.dtype.newbyteorder('<')) once avoids both. */
static void swap_item(unsigned char *dst, const unsigned char *src, size_t size)
{
    if (size == 2) {
        uint16_t x;
        memcpy(&x, src, 2);
        x = __builtin_bswap16(x);
        memcpy(dst, &x, 2);
    } else if (size == 4) {
        uint32_t x;
        memcpy(&x, src, 4);
        x = __builtin_bswap32(x);
        memcpy(dst, &x, 4);
    } else if (size == 8) {
        uint64_t x;
        memcpy(&x, src, 8);
        x = __builtin_bswap64(x);
        memcpy(dst, &x, 8);
    } else {
        for (size_t b = 0; b < size; b++) dst[b] = src[size - 1 - b];
    }
}

static int swapped_copy(const char *name, rjp_hold *h, red_dtype dt, rjp_value *out)
{
    const Py_buffer *v = &h->view;
    int nd = v->ndim;
    if (nd > RED_MAX_DIMS) {
        rjp_raise_bind("cannot bind '%s': %d dimensions (0 to %d are allowed)", name, nd, RED_MAX_DIMS);
        return -1;
    }
    size_t isz = (size_t)v->itemsize, n = 1;
    Py_ssize_t step[RED_MAX_DIMS], idx[RED_MAX_DIMS] = {0};   /* byte strides, and where we are */
    for (int d = nd - 1; d >= 0; d--) {
        step[d] = v->strides ? v->strides[d] : d == nd - 1 ? v->itemsize : step[d + 1] * v->shape[d + 1];
        if (__builtin_mul_overflow(n, (size_t)v->shape[d], &n)) n = SIZE_MAX;
    }
    if (n > (size_t)PY_SSIZE_T_MAX / isz) {
        PyErr_NoMemory();
        return -1;
    }
    unsigned char *dst = PyMem_Malloc(n ? n * isz : 1);
    if (!dst) {
        PyErr_NoMemory();
        return -1;
    }
    h->copy = dst;
    const unsigned char *p = v->buf;
    int parts = dt == RED_C64 || dt == RED_C128 ? 2 : 1;   /* a complex number: each part swapped */
    for (size_t k = 0; k < n; k++) {
        for (int q = 0; q < parts; q++) swap_item(dst + k * isz + q * isz / parts, p + q * isz / parts, isz / parts);
        /* the next element in C order: the last index that does not wrap steps on */
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < v->shape[d]) {
                p += step[d];
                break;
            }
            p -= step[d] * (v->shape[d] - 1);
            idx[d] = 0;
        }
    }
    red_array *a = &out->a;
    out->kind = RJP_ARRAY;
    memset(a, 0, sizeof *a);
    a->data = dst;
    a->dtype = dt;
    a->ndim = nd;
    a->memory = RED_MEM_HOST;
    for (int d = nd - 1; d >= 0; d--) {
        a->shape[d] = v->shape[d];
        a->strides[d] = d == nd - 1 ? 1 : a->strides[d + 1] * (v->shape[d + 1] > 0 ? v->shape[d + 1] : 1);
    }
    return 0;
}

static int buffer_value(const char *name, PyObject *value, rjp_holds *H, rjp_value *out)
{
    rjp_hold *h = hold_new(H);
    if (!h) return -1;
    if (PyObject_GetBuffer(value, &h->view, PyBUF_RECORDS_RO) < 0) {
        H->n--;
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        int done;
        if (ml_bfloat16(name, value, H, &done, out) < 0 || done) {
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
            return PyErr_Occurred() ? -1 : 0;
        }
        PyObject *s = ev ? PyObject_Str(ev) : NULL;
        const char *why = s ? PyUnicode_AsUTF8(s) : NULL;
        if (!why) {
            PyErr_Clear();   /* str() of the exception failed: the reason is lost, not the error */
            why = "unknown reason";
        }
        rjp_raise_bind("cannot bind '%s': its buffer cannot be read (%s)", name, why);
        Py_XDECREF(s);
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        return -1;
    }
    h->kind = RJP_HOLD_BUFFER;
    int swapped;
    red_dtype dt = format_dtype(h->view.format, h->view.itemsize, &swapped);
    if (!dt) {
        rjp_raise_bind("cannot bind '%s': items of format '%s' (%zd bytes) are not supported; %s", name,
                       h->view.format ? h->view.format : "B", h->view.itemsize, supported_types);
        return -1;
    }
    if (swapped) return swapped_copy(name, h, dt, out);
    return view_array(name, &h->view, dt, out);
}

/* ---- device (and host) arrays: DLPack ---------------------------------------------- */

/* Which protocol a type speaks, found once per type.  Types are few (numpy, cupy,
 * torch, jax...), so a short table with strong references does. */
enum { KIND_NONE = 1, KIND_DLPACK = 2, KIND_CAI = 3 };
#define KIND_CACHE 16
static struct {
    PyTypeObject *type;
    int kind;
    int legacy; /* __dlpack__ does not take max_version */
    int cai;    /* has __cuda_array_interface__: a device array type whose buffer
                   protocol, if any, only raises (CuPy) */
    int masked; /* has mask and filled: numpy.ma.MaskedArray and its kind */
} kind_cache[KIND_CACHE];
static int kind_next;

static int type_kind(PyTypeObject *t, int **legacy, int *cai, int *masked)
{
    for (int i = 0; i < KIND_CACHE; i++)
        if (kind_cache[i].type == t) {
            *legacy = &kind_cache[i].legacy;
            *cai = kind_cache[i].cai;
            *masked = kind_cache[i].masked;
            return kind_cache[i].kind;
        }
    int kind = KIND_NONE;
    if (PyObject_HasAttrString((PyObject *)t, "__dlpack__") &&
        PyObject_HasAttrString((PyObject *)t, "__dlpack_device__"))
        kind = KIND_DLPACK;
    else if (PyObject_HasAttrString((PyObject *)t, "__cuda_array_interface__"))
        kind = KIND_CAI;
    int i = kind_next;
    kind_next = (kind_next + 1) % KIND_CACHE;
    Py_XDECREF(kind_cache[i].type);
    Py_INCREF(t);
    kind_cache[i].type = t;
    kind_cache[i].kind = kind;
    kind_cache[i].legacy = 0;
    kind_cache[i].cai = PyObject_HasAttrString((PyObject *)t, "__cuda_array_interface__");
    kind_cache[i].masked =
        PyObject_HasAttrString((PyObject *)t, "mask") && PyObject_HasAttrString((PyObject *)t, "filled");
    *legacy = &kind_cache[i].legacy;
    *cai = kind_cache[i].cai;
    *masked = kind_cache[i].masked;
    return kind;
}

static PyObject *str_dlpack, *str_dlpack_device, *str_cai, *kw_stream, *kw_stream_version, *max_version,
    *legacy_stream;
/* the keys of a __cuda_array_interface__ dict, interned once: PyDict_GetItemString
 * made and hashed a new string for each of the six on every call */
static PyObject *key_shape, *key_typestr, *key_data, *key_strides, *key_mask, *key_stream;

static int init_strings(void)
{
    /* all or nothing: after a failure half-way (out of memory) the next call tries again
     * instead of finding str_dlpack set and some keys still NULL */
    static int ready;
    if (ready) return 0;
    str_dlpack = PyUnicode_InternFromString("__dlpack__");
    str_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
    str_cai = PyUnicode_InternFromString("__cuda_array_interface__");
    kw_stream = Py_BuildValue("(s)", "stream");
    kw_stream_version = Py_BuildValue("(ss)", "stream", "max_version");
    max_version = Py_BuildValue("(ii)", 1, 0);
    /* DLPack's number for CUDA's legacy default stream, the one redjit launches on */
    legacy_stream = PyLong_FromLong(1);
    key_shape = PyUnicode_InternFromString("shape");
    key_typestr = PyUnicode_InternFromString("typestr");
    key_data = PyUnicode_InternFromString("data");
    key_strides = PyUnicode_InternFromString("strides");
    key_mask = PyUnicode_InternFromString("mask");
    key_stream = PyUnicode_InternFromString("stream");
    ready = str_dlpack && str_dlpack_device && str_cai && kw_stream && kw_stream_version && max_version &&
            legacy_stream && key_shape && key_typestr && key_data && key_strides && key_mask && key_stream;
    if (!ready) {
        PyObject **all[] = {&str_dlpack, &str_dlpack_device, &str_cai, &kw_stream, &kw_stream_version,
                            &max_version, &legacy_stream, &key_shape, &key_typestr, &key_data, &key_strides,
                            &key_mask, &key_stream};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) Py_CLEAR(*all[i]);
        return -1;
    }
    return 0;
}

static int dlpack_value(const char *name, PyObject *value, int *legacy, rjp_holds *H, rjp_value *out)
{
    /* the device decides the stream: none for host memory; for CUDA the legacy
     * default stream, so the producer makes its pending work visible there */
    PyObject *dev = PyObject_CallMethodNoArgs(value, str_dlpack_device);
    if (!dev) return -1;
    long dtype = -1;
    if (PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) >= 1) dtype = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
    Py_DECREF(dev);
    if (dtype == -1 && PyErr_Occurred()) return -1;
    PyObject *stream = dtype == DL_CUDA ? legacy_stream : Py_None;

    PyObject *cap = NULL;
    if (!*legacy) {
        PyObject *args[3] = {value, stream, max_version};
        cap = PyObject_VectorcallMethod(str_dlpack, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kw_stream_version);
        if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
            /* a producer from before DLPack 1.0: no max_version */
            PyErr_Clear();
            *legacy = 1;
        } else if (!cap) {
            return -1;
        }
    }
    if (!cap) {
        PyObject *args[2] = {value, stream};
        cap = PyObject_VectorcallMethod(str_dlpack, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kw_stream);
        if (!cap) return -1;
    }

    rjp_hold *h = hold_new(H);
    if (!h) {
        Py_DECREF(cap);
        return -1;
    }
    h->capsule = cap;
    const rjp_dltensor *t;
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        rjp_dlmanaged_v1 *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (PyCapsule_SetName(cap, "used_dltensor_versioned") < 0) return -1;
        h->kind = RJP_HOLD_DLPACK_V1;
        h->managed = m;
        if (m->version.major != 1) {
            rjp_raise_bind("cannot bind '%s': its DLPack tensor has version %u.%u; redjit reads 1.x", name,
                           m->version.major, m->version.minor);
            return -1;
        }
        t = &m->dl_tensor;
    } else if (PyCapsule_IsValid(cap, "dltensor")) {
        rjp_dlmanaged *m = PyCapsule_GetPointer(cap, "dltensor");
        if (PyCapsule_SetName(cap, "used_dltensor") < 0) return -1;
        h->kind = RJP_HOLD_DLPACK;
        h->managed = m;
        t = &m->dl_tensor;
    } else {
        rjp_raise_bind("cannot bind '%s': __dlpack__ returned no DLPack capsule", name);
        return -1;
    }
    out->kind = RJP_ARRAY;
    if (red_array_from_dlpack(&out->a, t) != RED_OK) {
        rjp_raise_bind("cannot bind '%s': DLPack type (code %u, %u bits, %u lanes) on device type %d with %d "
                       "dimensions is not supported; %s, on the CPU or a CUDA device, up to %d dimensions",
                       name, t->dtype.code, t->dtype.bits, t->dtype.lanes, (int)t->device.device_type,
                       (int)t->ndim, supported_types, RED_MAX_DIMS);
        return -1;
    }
    return 0;
}

/* ---- device arrays: __cuda_array_interface__ ----------------------------------------- */

/* cuStreamSynchronize from the driver, loaded on first need: a producer's stream
 * given in the interface is waited for before redjit reads the data. */
typedef int (*cu_stream_sync_fn)(void *);
static cu_stream_sync_fn cu_stream_sync;

static int sync_stream(const char *name, void *stream)
{
    if (!cu_stream_sync) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (lib) cu_stream_sync = (cu_stream_sync_fn)dlsym(lib, "cuStreamSynchronize");
        if (!cu_stream_sync) {
            rjp_raise(RED_ERR_DEVICE, "cannot wait for the stream of a __cuda_array_interface__: no CUDA driver");
            return -1;
        }
    }
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = cu_stream_sync(stream);
    Py_END_ALLOW_THREADS
    if (r) {
        char msg[200];
        snprintf(msg, sizeof msg, "cannot bind '%s': waiting for its stream failed (CUDA error %d)", name, r);
        rjp_raise(RED_ERR_DEVICE, msg);
        return -1;
    }
    return 0;
}

static red_dtype typestr_dtype(const char *s)
{
    if (!s || !s[0] || s[0] == '>') return 0;
    if (s[0] == '<' || s[0] == '|' || s[0] == '=') s++;
    if (strcmp(s, "b1") == 0) return RED_BOOL;
    if (strcmp(s, "i1") == 0) return RED_I8;
    if (strcmp(s, "u1") == 0) return RED_U8;
    if (strcmp(s, "i2") == 0) return RED_I16;
    if (strcmp(s, "u2") == 0) return RED_U16;
    if (strcmp(s, "i4") == 0) return RED_I32;
    if (strcmp(s, "i8") == 0) return RED_I64;
    if (strcmp(s, "u4") == 0) return RED_U32;
    if (strcmp(s, "u8") == 0) return RED_U64;
    if (strcmp(s, "f2") == 0) return RED_F16;
    if (strcmp(s, "f4") == 0) return RED_F32;
    if (strcmp(s, "f8") == 0) return RED_F64;
    if (strcmp(s, "c8") == 0) return RED_C64;
    if (strcmp(s, "c16") == 0) return RED_C128;
    return 0;
}

/* A number of a __cuda_array_interface__'s shape or strides that did not convert (not an
 * int, or past int64): a BindingError naming it, chained to the conversion's error; any
 * other exception (one an __index__ raised, KeyboardInterrupt) stands as it is. */
static void cai_bad_number(const char *name, const char *what, Py_ssize_t d)
{
    if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_OverflowError)) return;
    PyObject *t, *v, *tb, *t2, *v2, *tb2;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    rjp_raise_bind("cannot bind '%s': its __cuda_array_interface__ %s[%zd] is not an int64", name, what, d);
    PyErr_Fetch(&t2, &v2, &tb2);
    PyErr_NormalizeException(&t2, &v2, &tb2);
    if (v2 && v) PyException_SetCause(v2, v);   /* steals v */
    else Py_XDECREF(v);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    PyErr_Restore(t2, v2, tb2);
}

/* `cai` is value.__cuda_array_interface__ (a new reference, released here), or
 * NULL to read it: producers build that dict anew on every access.  -2 (with
 * the error set): a type the interface cannot name; -1: any other error. */
static int cai_value(const char *name, PyObject *value, PyObject *cai, rjp_value *out)
{
    if (!cai) cai = PyObject_GetAttr(value, str_cai);
    if (!cai) return -1;
    int ret = -1;
    if (!PyDict_Check(cai)) {
        rjp_raise_bind("cannot bind '%s': __cuda_array_interface__ is not a dict", name);
        goto out;
    }
    /* borrowed references; a key the dict lacks is NULL, as is a lookup that raised */
    PyObject *shape = PyDict_GetItemWithError(cai, key_shape), *typestr = PyDict_GetItemWithError(cai, key_typestr),
             *data = PyDict_GetItemWithError(cai, key_data), *strides = PyDict_GetItemWithError(cai, key_strides),
             *mask = PyDict_GetItemWithError(cai, key_mask), *stream = PyDict_GetItemWithError(cai, key_stream);
    if (PyErr_Occurred()) goto out;
    if (!shape || !PyTuple_Check(shape) || !typestr || !PyUnicode_Check(typestr) || !data ||
        !PyTuple_Check(data) || PyTuple_GET_SIZE(data) < 1) {
        rjp_raise_bind("cannot bind '%s': its __cuda_array_interface__ lacks shape, typestr or data", name);
        goto out;
    }
    if (mask && mask != Py_None) {
        rjp_raise_bind("cannot bind '%s': masked arrays are not supported", name);
        goto out;
    }
    const char *ts = PyUnicode_AsUTF8(typestr);
    if (!ts) goto out;   /* not encodable (a lone surrogate): that error stands */
    red_dtype dt = typestr_dtype(ts);
    if (!dt && ts[0] == '>' && ts[1] && typestr_dtype(ts + 1)) {
        /* no copy is made on the device: the data would have to come to the host */
        rjp_raise_bind("cannot bind '%s': its items are big-endian ('%s'), and redjit reads little-endian "
                       "data only; convert it on the device first: a.astype('<%s')", name, ts, ts + 1);
        goto out;
    }
    if (!dt) {
        rjp_raise_bind("cannot bind '%s': type '%s' is not supported; %s", name, ts, supported_types);
        ret = -2;   /* DLPack may name it (bfloat16 is '<V2' here) */
        goto out;
    }
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    if (nd > RED_MAX_DIMS) {
        rjp_raise_bind("cannot bind '%s': %zd dimensions (0 to %d are allowed)", name, nd, RED_MAX_DIMS);
        goto out;
    }
    if (strides && strides != Py_None && (!PyTuple_Check(strides) || PyTuple_GET_SIZE(strides) != nd)) {
        rjp_raise_bind("cannot bind '%s': its strides do not match its shape", name);
        goto out;
    }
    red_array *a = &out->a;
    out->kind = RJP_ARRAY;
    memset(a, 0, sizeof *a);
    a->data = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
    if (PyErr_Occurred()) goto out;
    a->dtype = dt;
    a->ndim = (int)nd;
    a->memory = RED_MEM_CUDA;
    int64_t size = (int64_t)red_dtype_size(dt), s = 1;
    for (Py_ssize_t d = nd - 1; d >= 0; d--) {
        /* each number checked as it is read: one that raised must not reach the next call */
        long long ext = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
        if (ext == -1 && PyErr_Occurred()) {
            cai_bad_number(name, "shape", d);
            goto out;
        }
        if (ext < 0) {
            rjp_raise_bind("cannot bind '%s': its __cuda_array_interface__ gives dimension %zd an extent of %lld",
                           name, d, ext);
            goto out;
        }
        a->shape[d] = ext;
        if (strides && strides != Py_None) {
            long long b = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, d));
            if (b == -1 && PyErr_Occurred()) {
                cai_bad_number(name, "strides", d);
                goto out;
            }
            if (b % size) {
                rjp_raise_bind("cannot bind '%s': its stride along dimension %zd is %lld bytes, not a multiple "
                               "of its item size (%lld bytes)", name, d, b, (long long)size);
                goto out;
            }
            a->strides[d] = b / size;
        } else {
            a->strides[d] = s;
        }
        if (__builtin_mul_overflow(s, ext > 0 ? ext : 1, &s)) {
            rjp_raise_bind("cannot bind '%s': its shape holds more than 2^63 elements", name);
            goto out;
        }
    }
    /* version 3: a stream to wait for; 1 is the legacy default stream, which is ordered
     * with redjit's own launches already */
    if (stream && stream != Py_None) {
        void *sp = PyLong_AsVoidPtr(stream);
        if (PyErr_Occurred()) goto out;
        if (!sp) {   /* the interface's description forbids 0: legacy or per-thread default? */
            rjp_raise_bind("cannot bind '%s': its __cuda_array_interface__ names stream 0, which the interface "
                           "does not allow (1: the legacy default stream, 2: the per-thread one)", name);
            goto out;
        }
        if ((uintptr_t)sp != 1 && sync_stream(name, sp) < 0) goto out;
    }
    ret = 0;
out:
    Py_DECREF(cai);
    return ret;
}

/* ---- one value --------------------------------------------------------------------- */

/* A masked array (numpy.ma) with any element masked: its buffer holds the masked
 * values too, and redjit would read them as data. */
static int refuse_masked(const char *name, PyObject *value)
{
    PyObject *m = PyObject_GetAttrString(value, "mask");
    if (!m) return -1;
    PyObject *any = PyObject_CallMethod(m, "any", NULL);
    Py_DECREF(m);
    if (!any) return -1;
    int t = PyObject_IsTrue(any);
    Py_DECREF(any);
    if (t < 0) return -1;
    if (t) {
        rjp_raise_bind("cannot bind '%s': it is a masked array with masked elements, which redjit would read "
                       "as data; pass x.filled(value) or x.compressed()", name);
        return -1;
    }
    return 0;
}

static int int_value(const char *name, PyObject *value, rjp_value *out)
{
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (!overflow) {
        out->kind = RJP_I64;
        out->i = v;
        return 0;
    }
    /* beyond int64: a u64 when it fits, as a typed (not weak) scalar */
    unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(value) : 0;
    if (overflow < 0 || (u == (unsigned long long)-1 && PyErr_Occurred())) {
        PyErr_Clear();
        rjp_raise_bind("cannot bind '%s': the integer does not fit in int64 or uint64", name);
        return -1;
    }
    out->kind = RJP_ARRAY;
    out->u = u;
    red_array_init(&out->a, &out->u, RED_U64, 0, NULL, NULL);
    return 0;
}

int rjp_convert(const char *name, PyObject *value, rjp_holds *H, rjp_value *out)
{
    /* the common cases first: exact float and int are weak scalars, like literals */
    if (PyFloat_CheckExact(value)) {
        out->kind = RJP_F64;
        out->f = PyFloat_AS_DOUBLE(value);
        return 0;
    }
    if (PyLong_CheckExact(value)) return int_value(name, value, out);
    if (PyBool_Check(value)) {
        out->kind = RJP_ARRAY;
        out->b = value == Py_True;
        red_array_init(&out->a, &out->b, RED_BOOL, 0, NULL, NULL);
        return 0;
    }
    if (PyComplex_CheckExact(value)) {   /* a typed c128 scalar */
        out->kind = RJP_ARRAY;
        out->z[0] = PyComplex_RealAsDouble(value);
        out->z[1] = PyComplex_ImagAsDouble(value);
        red_array_init(&out->a, out->z, RED_C128, 0, NULL, NULL);
        return 0;
    }
    if (init_strings() < 0) return -1;
    int *legacy, cai = 0, masked = 0;
    int kind = type_kind(Py_TYPE(value), &legacy, &cai, &masked);
    if (masked && refuse_masked(name, value) < 0) return -1;
    /* device array types (CuPy, PyTorch, Numba) go through their device
     * protocols first: CuPy's buffer protocol exists only to raise.  The
     * interface dict comes before DLPack: its strides are signed bytes (a
     * DLPack export of a negative-stride CuPy view was seen to carry a wrong
     * stride), and reading it creates no capsule.  A PyTorch CPU tensor
     * raises on it and goes on to DLPack. */
    if (cai) {
        PyObject *probe = PyObject_GetAttr(value, str_cai);
        if (probe) {
            int r = cai_value(name, value, probe, out);   /* releases probe */
            /* bfloat16 has no type string there ('<V2'): DLPack names it; any
             * other failure (a stream that cannot be waited for) stands */
            if (r != -2 || kind != KIND_DLPACK) return r < 0 ? -1 : r;
            PyErr_Clear();
            return dlpack_value(name, value, legacy, H, out);
        }
        if (probe_failed() < 0) return -1;
        if (kind == KIND_DLPACK) return dlpack_value(name, value, legacy, H, out);
    }
    /* NumPy arrays and scalars (np.float32(2) is a typed scalar), memoryview, array.array */
    if (PyObject_CheckBuffer(value)) return buffer_value(name, value, H, out);
    if (PyLong_Check(value)) return int_value(name, value, out);
    if (PyFloat_Check(value)) {
        out->kind = RJP_F64;
        out->f = PyFloat_AsDouble(value);
        return out->f == -1.0 && PyErr_Occurred() ? -1 : 0;
    }
    switch (kind) {
    case KIND_DLPACK: return dlpack_value(name, value, legacy, H, out);
    case KIND_CAI: return cai_value(name, value, NULL, out) < 0 ? -1 : 0;
    }
    /* the interface as an instance attribute, which Numba's description allows */
    PyObject *own = PyObject_GetAttr(value, str_cai);
    if (own) return cai_value(name, value, own, out) < 0 ? -1 : 0;
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    rjp_raise_bind("cannot bind '%s': a %.100s is neither a number, nor an array with the buffer protocol, "
                   "__dlpack__ or __cuda_array_interface__", name, Py_TYPE(value)->tp_name);
    return -1;
}

int rjp_bind(red_expr *e, PyObject *key, PyObject *value, rjp_holds *H)
{
    Py_ssize_t len;
    const char *name = PyUnicode_AsUTF8AndSize(key, &len);
    if (!name) return -1;
    if ((size_t)len != strlen(name)) {   /* the library would see the name cut at the NUL */
        rjp_raise_bind("cannot bind '%s': the name goes on past a NUL character", name);
        return -1;
    }
    rjp_value v;
    int axis = -1;
    if (rjp_split_type && Py_TYPE(value) == (PyTypeObject *)rjp_split_type) {
        /* redjit.Split(block, axis): this rank's block of an array split across ranks */
        PyObject *block = PyObject_GetAttrString(value, "block"), *ax = PyObject_GetAttrString(value, "axis");
        axis = ax ? (int)PyLong_AsLong(ax) : -1;
        int bad = !block || !ax || PyErr_Occurred();
        Py_XDECREF(ax);
        if (bad) {
            Py_XDECREF(block);
            return -1;
        }
        int rc0 = rjp_convert(name, block, H, &v);
        Py_DECREF(block);   /* H holds what the binding reads */
        if (rc0 < 0) return -1;
        if (v.kind != RJP_ARRAY) {
            rjp_raise_bind("cannot bind '%s' as split: its block is a scalar, not an array", name);
            return -1;
        }
    } else if (rjp_convert(name, value, H, &v) < 0) {
        return -1;
    }
    if (v.kind == RJP_ARRAY && v.a.memory == RED_MEM_CUDA) H->device = 1;
    int rc = axis >= 0           ? red_bind_split(e, name, &v.a, axis)
             : v.kind == RJP_F64 ? red_bind_f64(e, name, v.f)
             : v.kind == RJP_I64 ? red_bind_i64(e, name, v.i)
                                 : red_bind_array(e, name, &v.a);
    if (rc) {
        rjp_raise(rc, red_expr_errmsg(e));
        return -1;
    }
    return 0;
}

int rjp_bind_all(red_expr *e, const rjp_kwargs *kw, rjp_holds *H)
{
    Py_ssize_t n = kw->names ? PyTuple_GET_SIZE(kw->names) : 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (rjp_bind(e, PyTuple_GET_ITEM(kw->names, i), kw->values[i], H) < 0) return -1;
    return 0;
}
