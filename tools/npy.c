/*
 * npy.c -- NumPy .npy reader and writer (format versions 1.0 to 3.0).
 * The header is a Python dict literal; it is parsed by a small bounded
 * recursive-descent reader, never evaluated, so hostile files cannot hurt.
 */
#define _POSIX_C_SOURCE 200809L

#include "npy.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* NumPy refuses headers over 10000 bytes by default; we allow more (an 8-d
 * shape cannot need it) but keep a cap so a corrupt length cannot make us
 * allocate gigabytes. */
#define NPY_MAX_HEADER (1u << 20)
#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* NumPy >= 1.23 leaves room after the header so the shape can grow in
 * place (format.GROWTH_AXIS_MAX_DIGITS); copied so our files are identical. */
#define NPY_GROWTH_DIGITS 21
#define NPY_ALIGN 64

static void npy_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void npy_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    int n = snprintf(err, errlen, "%s: ", path ? path : "(null)");
    if (n < 0 || (size_t)n >= errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

static bool npy_host_little(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* ---- dtypes ----------------------------------------------------------------- */

/* The descr kind+size of each red_dtype; bf16 has none (NumPy lacks it). */
static const struct npy_type {
    red_dtype dtype;
    char kind;
    unsigned size;
} npy_types[] = {
    {RED_BOOL, 'b', 1}, {RED_I32, 'i', 4}, {RED_I64, 'i', 8}, {RED_U32, 'u', 4},
    {RED_U64, 'u', 8},  {RED_F16, 'f', 2}, {RED_F32, 'f', 4}, {RED_F64, 'f', 8},
    {RED_I8, 'i', 1},   {RED_U8, 'u', 1},  {RED_I16, 'i', 2}, {RED_U16, 'u', 2},
    {RED_C64, 'c', 8},  {RED_C128, 'c', 16},
};

static const struct npy_type *npy_type_of(red_dtype t)
{
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].dtype == t)
            return &npy_types[i];
    return NULL;
}

/* Map a descr such as "<f8" to a type and whether its bytes need swapping;
 * NULL for anything redjit cannot compute with. */
static const struct npy_type *npy_parse_descr(const char *d, bool *swap)
{
    size_t len = strlen(d);
    if (len < 3 || len > 5)
        return NULL;
    char order = d[0], kind = d[1];
    char *end;
    errno = 0;
    unsigned long size = strtoul(d + 2, &end, 10);
    if (*end || errno || d[2] < '0' || d[2] > '9')
        return NULL;
    const struct npy_type *t = NULL;
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].kind == kind && npy_types[i].size == size)
            t = &npy_types[i];
    if (!t)
        return NULL;
    if (order == '|' || order == '=')
        *swap = false;
    else if (order == '<')
        *swap = !npy_host_little();
    else if (order == '>')
        *swap = npy_host_little();
    else
        return NULL;
    /* '|' claims there is no byte order, which is only true of one byte. */
    if (order == '|' && size != 1)
        return NULL;
    if (size == 1)
        *swap = false;
    return t;
}

/* ---- header dict parser --------------------------------------------------------- */

typedef struct npy_hdr {
    const char *p, *end;     /* the header text, not NUL-terminated */
    const char *why;         /* first syntax problem, for the message */
    char descr[32];
    bool have_descr, have_fortran, have_shape, fortran, structured;
    int ndim;
    int64_t shape[RED_MAX_DIMS];
    bool too_many_dims, dim_overflow;
} npy_hdr;

static void npy_hdr_ws(npy_hdr *h)
{
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
        h->p++;
}

static bool npy_hdr_eat(npy_hdr *h, char c)
{
    npy_hdr_ws(h);
    if (h->p < h->end && *h->p == c) {
        h->p++;
        return true;
    }
    return false;
}

static bool npy_hdr_fail(npy_hdr *h, const char *why)
{
    if (!h->why)
        h->why = why;
    return false;
}

/* A quoted Python string without escapes (none of the keys or supported
 * descrs need them); too long to be a known key or descr is an error. */
static bool npy_hdr_string(npy_hdr *h, char *buf, size_t cap)
{
    npy_hdr_ws(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"'))
        return npy_hdr_fail(h, "expected a quoted string");
    char q = *h->p++;
    size_t n = 0;
    while (h->p < h->end && *h->p != q) {
        if (*h->p == '\\' || n + 1 >= cap)
            return npy_hdr_fail(h, "string too long or with escapes");
        buf[n++] = *h->p++;
    }
    if (h->p >= h->end)
        return npy_hdr_fail(h, "unterminated string");
    h->p++;
    buf[n] = '\0';
    return true;
}

static bool npy_hdr_word(npy_hdr *h, const char *w)
{
    npy_hdr_ws(h);
    size_t n = strlen(w);
    if ((size_t)(h->end - h->p) >= n && memcmp(h->p, w, n) == 0) {
        h->p += n;
        return true;
    }
    return false;
}

/* `(3, 4)`, `(5,)` or `()`; Python 2 files may write `3L`. */
static bool npy_hdr_shape(npy_hdr *h)
{
    if (!npy_hdr_eat(h, '('))
        return npy_hdr_fail(h, "'shape' is not a tuple");
    if (npy_hdr_eat(h, ')'))
        return true;
    for (;;) {
        npy_hdr_ws(h);
        if (h->p >= h->end || *h->p < '0' || *h->p > '9')
            return npy_hdr_fail(h, "'shape' holds something other than non-negative integers");
        int64_t v = 0;
        while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
            int dg = *h->p++ - '0';
            if (v > (INT64_MAX - dg) / 10)
                h->dim_overflow = true;
            else
                v = v * 10 + dg;
        }
        if (h->p < h->end && *h->p == 'L')
            h->p++;
        if (h->ndim < RED_MAX_DIMS)
            h->shape[h->ndim] = v;
        else
            h->too_many_dims = true;
        if (h->ndim < 1000)          /* only for the message */
            h->ndim++;
        if (npy_hdr_eat(h, ')'))
            return true;
        if (!npy_hdr_eat(h, ','))
            return npy_hdr_fail(h, "expected ',' or ')' in 'shape'");
        if (npy_hdr_eat(h, ')'))
            return true;
    }
}

static bool npy_hdr_item(npy_hdr *h)
{
    char key[32];
    if (!npy_hdr_string(h, key, sizeof key))
        return false;
    if (!npy_hdr_eat(h, ':'))
        return npy_hdr_fail(h, "expected ':' after a key");
    if (strcmp(key, "descr") == 0) {
        if (h->have_descr)
            return npy_hdr_fail(h, "duplicate key 'descr'");
        h->have_descr = true;
        npy_hdr_ws(h);
        if (h->p < h->end && *h->p == '[') {
            /* A structured dtype: a list we do not need to read. */
            h->structured = true;
            int depth = 0;
            while (h->p < h->end) {
                char c = *h->p++;
                if (c == '[' || c == '(')
                    depth++;
                else if ((c == ']' || c == ')') && --depth == 0)
                    return true;
            }
            return npy_hdr_fail(h, "unterminated 'descr' list");
        }
        return npy_hdr_string(h, h->descr, sizeof h->descr);
    }
    if (strcmp(key, "fortran_order") == 0) {
        if (h->have_fortran)
            return npy_hdr_fail(h, "duplicate key 'fortran_order'");
        h->have_fortran = true;
        if (npy_hdr_word(h, "True"))
            h->fortran = true;
        else if (npy_hdr_word(h, "False"))
            h->fortran = false;
        else
            return npy_hdr_fail(h, "'fortran_order' is neither True nor False");
        return true;
    }
    if (strcmp(key, "shape") == 0) {
        if (h->have_shape)
            return npy_hdr_fail(h, "duplicate key 'shape'");
        h->have_shape = true;
        return npy_hdr_shape(h);
    }
    return npy_hdr_fail(h, "unknown key in header");
}

static bool npy_hdr_parse(npy_hdr *h)
{
    if (!npy_hdr_eat(h, '{'))
        return npy_hdr_fail(h, "header is not a dict");
    while (!npy_hdr_eat(h, '}')) {
        if (!npy_hdr_item(h))
            return false;
        if (npy_hdr_eat(h, '}'))
            break;
        if (!npy_hdr_eat(h, ','))
            return npy_hdr_fail(h, "expected ',' or '}'");
    }
    npy_hdr_ws(h);
    if (h->p != h->end)
        return npy_hdr_fail(h, "junk after the header dict");
    if (!h->have_descr || !h->have_fortran || !h->have_shape)
        return npy_hdr_fail(h, "header lacks 'descr', 'fortran_order' or 'shape'");
    return true;
}

/* ---- loading ------------------------------------------------------------------ */

static uint32_t npy_le(const unsigned char *b, int n)
{
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static void npy_swap(unsigned char *p, size_t count, size_t size)
{
    for (size_t i = 0; i < count; i++, p += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* Read up to n bytes; returns how many arrived (short only at EOF/error). */
static size_t npy_read(FILE *f, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t r = fread((char *)buf + got, 1, n - got, f);
        if (r == 0)
            break;
        got += r;
    }
    return got;
}

/* Everything after fopen; returns 0 or -1 with the message written. */
static int npy_load_file(FILE *f, const char *path, red_array *out, void **owned,
                         char *err, size_t errlen)
{
    unsigned char pre[12];
    size_t n = npy_read(f, pre, 8);
    if (ferror(f)) {
        npy_err(err, errlen, path, "read error: %s", strerror(errno));
        return -1;
    }
    if (n == 0) {
        npy_err(err, errlen, path, "not a .npy file: it is empty");
        return -1;
    }
    if (memcmp(pre, NPY_MAGIC, n < NPY_MAGIC_LEN ? n : NPY_MAGIC_LEN) != 0) {
        npy_err(err, errlen, path, "not a .npy file: it does not start with \\x93NUMPY");
        return -1;
    }
    if (n < 8) {
        npy_err(err, errlen, path, "truncated header: the file has only %zu bytes", n);
        return -1;
    }
    int major = pre[6], minor = pre[7];
    if (minor != 0 || major < 1 || major > 3) {
        npy_err(err, errlen, path, "unsupported .npy format version %d.%d (1.0, 2.0 and 3.0 are read)",
                major, minor);
        return -1;
    }
    int lenbytes = major == 1 ? 2 : 4;
    if (npy_read(f, pre + 8, (size_t)lenbytes) != (size_t)lenbytes) {
        npy_err(err, errlen, path, "truncated header: the file ends inside the header length");
        return -1;
    }
    uint32_t hlen = npy_le(pre + 8, lenbytes);
    if (hlen > NPY_MAX_HEADER) {
        npy_err(err, errlen, path, "header length %" PRIu32 " is implausibly large (limit %u)",
                hlen, NPY_MAX_HEADER);
        return -1;
    }
    char *htext = malloc(hlen ? hlen : 1);
    if (!htext) {
        npy_err(err, errlen, path, "out of memory reading the header");
        return -1;
    }
    size_t hgot = npy_read(f, htext, hlen);
    if (hgot != hlen) {
        free(htext);
        npy_err(err, errlen, path, "truncated header: expected %" PRIu32 " bytes, got %zu", hlen, hgot);
        return -1;
    }
    npy_hdr h;
    memset(&h, 0, sizeof h);
    h.p = htext;
    h.end = htext + hlen;
    bool ok = npy_hdr_parse(&h);
    size_t hoff = (size_t)(h.p - htext);
    free(htext);
    if (!ok) {
        npy_err(err, errlen, path, "malformed header: %s (at byte %zu of the header)", h.why, hoff);
        return -1;
    }
    if (h.structured) {
        npy_err(err, errlen, path, "unsupported dtype: structured arrays cannot be read");
        return -1;
    }
    bool swap = false;
    const struct npy_type *t = npy_parse_descr(h.descr, &swap);
    if (!t) {
        npy_err(err, errlen, path,
                "unsupported dtype '%s' (bool, int8, uint8, int16, uint16, int32, int64, uint32, "
                "uint64, float16, float32, float64, complex64 and complex128 are read)", h.descr);
        return -1;
    }
    if (h.too_many_dims) {
        npy_err(err, errlen, path, "%d dimensions: redjit arrays have at most %d", h.ndim, RED_MAX_DIMS);
        return -1;
    }
    /* Element count and byte size, refusing anything that overflows int64
     * (red_array's type) or size_t. */
    uint64_t limit = (uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (uint64_t)INT64_MAX : (uint64_t)SIZE_MAX;
    uint64_t nbytes = t->size;
    bool overflow = false, empty = false;
    for (int d = 0; d < h.ndim; d++) {
        uint64_t e = (uint64_t)h.shape[d];
        if (e == 0)
            empty = true;
        else if (nbytes > limit / e)
            overflow = true;
        else
            nbytes *= e;
    }
    if (h.dim_overflow || (overflow && !empty)) {
        npy_err(err, errlen, path, "the shape is too large to address");
        return -1;
    }
    if (empty)
        nbytes = 0;
    /* A regular file must hold all the data: checked before allocating so a
     * corrupt shape gives an error rather than a huge malloc. */
    struct stat st;
    long pos = ftell(f);
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && pos >= 0) {
        uint64_t left = (uint64_t)st.st_size > (uint64_t)pos ? (uint64_t)st.st_size - (uint64_t)pos : 0;
        if (left < nbytes) {
            npy_err(err, errlen, path, "truncated data: expected %" PRIu64 " bytes, got %" PRIu64,
                    nbytes, left);
            return -1;
        }
    }
    void *buf = malloc(nbytes ? (size_t)nbytes : 1);
    if (!buf) {
        npy_err(err, errlen, path, "out of memory: the data needs %" PRIu64 " bytes", nbytes);
        return -1;
    }
    size_t got = npy_read(f, buf, (size_t)nbytes);
    if (got != nbytes) {
        if (ferror(f))
            npy_err(err, errlen, path, "read error: %s", strerror(errno));
        else
            npy_err(err, errlen, path, "truncated data: expected %" PRIu64 " bytes, got %zu", nbytes, got);
        free(buf);
        return -1;
    }
    size_t count = (size_t)(nbytes / t->size);
    if (swap && t->kind == 'c')   /* a complex number is two floats, each swapped */
        npy_swap(buf, 2 * count, t->size / 2);
    else if (swap)
        npy_swap(buf, count, t->size);
    if (t->dtype == RED_BOOL) {
        /* redjit's bool is 0 or 1; NumPy can hold other bytes in a bool. */
        unsigned char *b = buf;
        for (size_t i = 0; i < count; i++)
            b[i] = b[i] != 0;
    }
    memset(out, 0, sizeof *out);
    out->data = buf;
    out->dtype = t->dtype;
    out->ndim = h.ndim;
    out->memory = RED_MEM_HOST;
    int64_t stride = 1;
    for (int i = 0; i < h.ndim; i++) {
        int d = h.fortran ? i : h.ndim - 1 - i;
        out->shape[d] = h.shape[d];
        out->strides[d] = stride;
        stride *= h.shape[d] ? h.shape[d] : 1;
    }
    *owned = buf;
    return 0;
}

int npy_load(const char *path, red_array *out, void **owned, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (owned)
        *owned = NULL;
    if (!path || !out || !owned) {
        npy_err(err, errlen, path, "npy_load: NULL argument");
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        npy_err(err, errlen, path, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        npy_err(err, errlen, path, "is a directory");
        return -1;
    }
    int rc = npy_load_file(f, path, out, owned, err, errlen);
    fclose(f);
    return rc;
}

/* ---- saving ------------------------------------------------------------------- */

/* The header exactly as numpy.lib.format writes version 1.0. */
static int npy_header(char *buf, size_t cap, const struct npy_type *t, const red_array *a)
{
    char descr[8];
    snprintf(descr, sizeof descr, "%c%c%u", t->size == 1 ? '|' : npy_host_little() ? '<' : '>',
             t->kind, t->size);
    char shape[8 * 24 + 8];
    size_t sl = 0;
    shape[sl++] = '(';
    for (int d = 0; d < a->ndim; d++)
        sl += (size_t)snprintf(shape + sl, sizeof shape - sl, d ? ", %" PRId64 : "%" PRId64, a->shape[d]);
    if (a->ndim == 1)
        shape[sl++] = ',';
    shape[sl++] = ')';
    shape[sl] = '\0';
    int n = snprintf(buf, cap, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    if (a->ndim > 0) {
        char first[24];
        int fl = snprintf(first, sizeof first, "%" PRId64, a->shape[0]);
        for (int i = fl; i < NPY_GROWTH_DIGITS; i++)
            buf[n++] = ' ';
    }
    int hlen = n + 1;   /* with the final newline */
    int pad = NPY_ALIGN - (NPY_MAGIC_LEN + 2 + 2 + hlen) % NPY_ALIGN;
    memset(buf + n, ' ', (size_t)pad);
    n += pad;
    buf[n++] = '\n';
    return n;
}

/* Write the elements of `a` in C order, gathering strided data through a
 * buffer so a transposed or broadcast view costs no per-element fwrite. */
static bool npy_write_data(FILE *f, const red_array *a, size_t size, int64_t count, bool bf16)
{
    size_t outsize = bf16 ? 4 : size;
    bool contiguous = !bf16;
    int64_t expect = 1;
    for (int d = a->ndim - 1; d >= 0; d--) {
        if (a->shape[d] != 1 && a->strides[d] != expect)
            contiguous = false;
        expect *= a->shape[d];
    }
    if (contiguous)
        return fwrite(a->data, size, (size_t)count, f) == (size_t)count;
    enum { CHUNK = 1 << 16 };
    unsigned char chunk[CHUNK];
    size_t used = 0;
    int64_t idx[RED_MAX_DIMS] = {0};
    for (int64_t k = 0; k < count; k++) {
        int64_t off = 0;
        for (int d = 0; d < a->ndim; d++)
            off += idx[d] * a->strides[d];
        const unsigned char *src = (const unsigned char *)a->data + off * (int64_t)size;
        if (bf16) {
            uint16_t h;
            memcpy(&h, src, 2);
            uint32_t bits = (uint32_t)h << 16;
            memcpy(chunk + used, &bits, 4);
        } else {
            memcpy(chunk + used, src, size);
        }
        used += outsize;
        if (used + outsize > CHUNK) {
            if (fwrite(chunk, 1, used, f) != used)
                return false;
            used = 0;
        }
        for (int d = a->ndim - 1; d >= 0; d--) {
            if (++idx[d] < a->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return used == 0 || fwrite(chunk, 1, used, f) == used;
}

int npy_save(const char *path, const red_array *a, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!path || !a) {
        npy_err(err, errlen, path, "npy_save: NULL argument");
        return -1;
    }
    bool bf16 = a->dtype == RED_BF16;
    const struct npy_type *t = npy_type_of(bf16 ? RED_F32 : a->dtype);
    if (!t) {
        npy_err(err, errlen, path, "cannot save: unknown dtype %d", (int)a->dtype);
        return -1;
    }
    if (a->memory != 0 && a->memory != RED_MEM_HOST) {
        npy_err(err, errlen, path, "cannot save: the array is not in host memory");
        return -1;
    }
    if (a->ndim < 0 || a->ndim > RED_MAX_DIMS) {
        npy_err(err, errlen, path, "cannot save: rank %d is outside 0..%d", a->ndim, RED_MAX_DIMS);
        return -1;
    }
    size_t insize = bf16 ? 2 : t->size;
    int64_t count = 1;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] < 0) {
            npy_err(err, errlen, path, "cannot save: negative extent %" PRId64, a->shape[d]);
            return -1;
        }
        if (a->shape[d] && count > INT64_MAX / 8 / a->shape[d]) {
            npy_err(err, errlen, path, "cannot save: the shape is too large");
            return -1;
        }
        count *= a->shape[d];
    }
    if (count > 0 && !a->data) {
        npy_err(err, errlen, path, "cannot save: the array has no data");
        return -1;
    }
    char header[512];
    int hn = npy_header(header, sizeof header, t, a);
    unsigned char pre[NPY_MAGIC_LEN + 4];
    memcpy(pre, NPY_MAGIC, NPY_MAGIC_LEN);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (unsigned char)(hn & 0xff);
    pre[9] = (unsigned char)(hn >> 8);

    FILE *f = fopen(path, "wb");
    if (!f) {
        npy_err(err, errlen, path, "cannot create: %s", strerror(errno));
        return -1;
    }
    bool ok = fwrite(pre, 1, sizeof pre, f) == sizeof pre
           && fwrite(header, 1, (size_t)hn, f) == (size_t)hn
           && (count == 0 || npy_write_data(f, a, insize, count, bf16));
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (!ok) {
        npy_err(err, errlen, path, "write failed: %s", strerror(saved));
        remove(path);
        return -1;
    }
    return 0;
}
