/*
 * npy_test.c -- unit test of npy_load / npy_save: round trips of every dtype,
 * strided and Fortran-order arrays, files as NumPy writes them, and garbage
 * or truncated input, which must give a clean error (run it under ASan).
 */
#define _POSIX_C_SOURCE 200809L

#include "npy.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int passed, failed;
static char dir[4096];

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (cond) {                                                           \
            passed++;                                                         \
        } else {                                                              \
            failed++;                                                         \
            fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
        }                                                                     \
    } while (0)

static const char *tmp(const char *name)
{
    static char buf[4200];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        if (r == 0)
            break;
        len += r;
    }
    fclose(f);
    *n = len;
    return buf;
}

/* A .npy file from a header dict and raw data, with the given version
 * (1, 2 or 3) and the preamble+header padded to 64 bytes. */
static size_t make_npy(unsigned char *out, size_t cap, int version, const char *dict,
                       const void *data, size_t nbytes)
{
    size_t lenb = version == 1 ? 2 : 4;
    size_t dl = strlen(dict);
    size_t total = 6 + 2 + lenb + dl + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = dl + pad + 1;
    size_t n = 0;
    if (6 + 2 + lenb + hlen + nbytes > cap)
        abort();
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)version;
    out[7] = 0;
    n = 8;
    for (size_t i = 0; i < lenb; i++)
        out[n++] = (unsigned char)(hlen >> (8 * i));
    memcpy(out + n, dict, dl);
    n += dl;
    memset(out + n, ' ', pad);
    n += pad;
    out[n++] = '\n';
    memcpy(out + n, data, nbytes);
    return n + nbytes;
}

/* Load `path` expecting failure with `needle` in the message. */
static void expect_error(const char *path, const char *needle)
{
    red_array a;
    void *owned = (void *)1;
    char err[512];
    int rc = npy_load(path, &a, &owned, err, sizeof err);
    CHECK(rc == -1, "%s: loaded but should have failed", path);
    CHECK(owned == NULL, "%s: owned not NULL after failure", path);
    if (rc == 0)
        free(owned);
    CHECK(strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", path, err, needle);
    CHECK(strncmp(err, path, strlen(path)) == 0, "message '%s' does not name the file", err);
}

static void expect_raw_error(int version, const char *dict, const void *data, size_t nbytes,
                             const char *needle)
{
    unsigned char buf[8192];
    size_t n = make_npy(buf, sizeof buf, version, dict, data, nbytes);
    write_bytes(tmp("bad.npy"), buf, n);
    expect_error(tmp("bad.npy"), needle);
}

static size_t elsize(red_dtype t)
{
    switch (t) {
    case RED_BOOL: case RED_I8: case RED_U8: return 1;
    case RED_F16: case RED_BF16: case RED_I16: case RED_U16: return 2;
    case RED_I32: case RED_U32: case RED_F32: return 4;
    case RED_C128: return 16;
    default: return 8;
    }
}

/* Save a C-order array, check NumPy's exact header, load it back and
 * compare everything. */
static void round_trip(red_dtype t, const char *descr, int ndim, const int64_t *shape)
{
    int64_t count = 1;
    for (int d = 0; d < ndim; d++)
        count *= shape[d];
    size_t es = elsize(t);
    unsigned char *data = malloc(count ? (size_t)count * es : 1);
    for (size_t i = 0; i < (size_t)count * es; i++)
        data[i] = (unsigned char)(i * 37 + 11);
    if (t == RED_BOOL)
        for (int64_t i = 0; i < count; i++)
            data[i] = (unsigned char)(i % 3 == 0);
    red_array a;
    memset(&a, 0, sizeof a);
    a.data = data;
    a.dtype = t;
    a.ndim = ndim;
    int64_t st = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        a.shape[d] = shape[d];
        a.strides[d] = st;
        st *= shape[d];
    }
    char err[512];
    CHECK(npy_save(tmp("rt.npy"), &a, err, sizeof err) == 0, "save %s: %s", descr, err);

    /* The header NumPy 1.24 writes for this array. */
    char dict[256], sh[200] = "(";
    for (int d = 0; d < ndim; d++)
        snprintf(sh + strlen(sh), sizeof sh - strlen(sh), d ? ", %" PRId64 : "%" PRId64, shape[d]);
    strcat(sh, ndim == 1 ? ",)" : ")");
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, sh);
    size_t fn = 0;
    unsigned char *file = read_bytes(tmp("rt.npy"), &fn);
    CHECK(file != NULL, "read back");
    if (file) {
        size_t hdr = fn - (size_t)count * es;
        CHECK(hdr % 64 == 0, "%s: header+preamble is %zu bytes, not a multiple of 64", descr, hdr);
        CHECK(memcmp(file, "\x93NUMPY\x01\x00", 8) == 0, "%s: magic/version", descr);
        CHECK((size_t)(file[8] | file[9] << 8) == hdr - 10, "%s: header length field", descr);
        CHECK(memcmp(file + 10, dict, strlen(dict)) == 0, "%s: header text '%.*s' != '%s'", descr,
              (int)strlen(dict), (const char *)file + 10, dict);
        bool spaces = true;
        for (size_t i = 10 + strlen(dict); i < hdr - 1; i++)
            spaces = spaces && file[i] == ' ';
        CHECK(spaces && file[hdr - 1] == '\n', "%s: header padding", descr);
        /* NumPy >= 1.23 leaves at least 21 - len(str(shape[0])) spare spaces. */
        char first[32];
        int fl = ndim ? snprintf(first, sizeof first, "%" PRId64, shape[0]) : 21;
        CHECK(hdr - 1 - 10 - strlen(dict) >= (size_t)(21 - fl), "%s: growth padding", descr);
        CHECK(memcmp(file + hdr, data, (size_t)count * es) == 0, "%s: data bytes", descr);
        free(file);
    }

    red_array b;
    void *owned = NULL;
    CHECK(npy_load(tmp("rt.npy"), &b, &owned, err, sizeof err) == 0, "load %s: %s", descr, err);
    if (owned) {
        CHECK(b.dtype == t, "%s: dtype %d", descr, (int)b.dtype);
        CHECK(b.ndim == ndim, "%s: ndim %d", descr, b.ndim);
        CHECK(b.data == owned, "%s: data is not the owned buffer", descr);
        CHECK(b.memory == RED_MEM_HOST, "%s: memory", descr);
        for (int d = 0; d < ndim; d++) {
            CHECK(b.shape[d] == shape[d], "%s: shape[%d]", descr, d);
            /* strides of an empty array carry no meaning */
            CHECK(count == 0 || b.strides[d] == a.strides[d], "%s: strides[%d]", descr, d);
        }
        CHECK(memcmp(b.data, data, (size_t)count * es) == 0, "%s: data differs", descr);
        free(owned);
    }
    free(data);
}

static void test_round_trips(void)
{
    static const struct {
        red_dtype t;
        const char *descr;
    } types[] = {
        {RED_BOOL, "|b1"}, {RED_I32, "<i4"}, {RED_I64, "<i8"}, {RED_U32, "<u4"},
        {RED_U64, "<u8"},  {RED_F16, "<f2"}, {RED_F32, "<f4"}, {RED_F64, "<f8"},
        {RED_I8, "|i1"},   {RED_U8, "|u1"},  {RED_I16, "<i2"}, {RED_U16, "<u2"},
        {RED_C64, "<c8"},  {RED_C128, "<c16"},
    };
    static const int64_t s0[1] = {0}, s1[1] = {5}, s2[2] = {3, 4}, s3[3] = {2, 3, 4},
                         s8[8] = {1, 2, 1, 2, 1, 2, 1, 3}, sbig[1] = {12345678}, sz[2] = {4, 0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        round_trip(types[i].t, types[i].descr, 0, s0);
        round_trip(types[i].t, types[i].descr, 1, s1);
        round_trip(types[i].t, types[i].descr, 2, s2);
        round_trip(types[i].t, types[i].descr, 3, s3);
        round_trip(types[i].t, types[i].descr, 8, s8);
        round_trip(types[i].t, types[i].descr, 1, s0);
        round_trip(types[i].t, types[i].descr, 2, sz);
    }
    round_trip(RED_F64, "<f8", 1, sbig);
}

/* Strided views are written in C order. */
static void test_strided_save(void)
{
    int32_t m[3][4];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            m[i][j] = 10 * i + j;
    char err[512];
    red_array a;
    void *owned;
    /* The transpose: shape (4, 3), strides (1, 4). */
    int64_t shape[2] = {4, 3}, strides[2] = {1, 4};
    memset(&a, 0, sizeof a);
    a.data = m;
    a.dtype = RED_I32;
    a.ndim = 2;
    memcpy(a.shape, shape, sizeof shape);
    memcpy(a.strides, strides, sizeof strides);
    CHECK(npy_save(tmp("t.npy"), &a, err, sizeof err) == 0, "%s", err);
    red_array b;
    CHECK(npy_load(tmp("t.npy"), &b, &owned, err, sizeof err) == 0, "%s", err);
    if (owned) {
        const int32_t *v = b.data;
        bool ok = b.shape[0] == 4 && b.shape[1] == 3 && b.strides[0] == 3 && b.strides[1] == 1;
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < 3; i++)
                ok = ok && v[j * 3 + i] == 10 * i + j;
        CHECK(ok, "transpose written in C order");
        free(owned);
    }
    /* Negative strides: the rows reversed, data pointing at the last row. */
    a.data = &m[2][0];
    a.shape[0] = 3;
    a.shape[1] = 4;
    a.strides[0] = -4;
    a.strides[1] = 1;
    CHECK(npy_save(tmp("t.npy"), &a, err, sizeof err) == 0, "%s", err);
    CHECK(npy_load(tmp("t.npy"), &b, &owned, err, sizeof err) == 0, "%s", err);
    if (owned) {
        const int32_t *v = b.data;
        bool ok = true;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                ok = ok && v[i * 4 + j] == 10 * (2 - i) + j;
        CHECK(ok, "negative strides");
        free(owned);
    }
    /* A zero stride (broadcast row). */
    a.data = &m[1][0];
    a.strides[0] = 0;
    CHECK(npy_save(tmp("t.npy"), &a, err, sizeof err) == 0, "%s", err);
    CHECK(npy_load(tmp("t.npy"), &b, &owned, err, sizeof err) == 0, "%s", err);
    if (owned) {
        const int32_t *v = b.data;
        bool ok = true;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                ok = ok && v[i * 4 + j] == 10 + j;
        CHECK(ok, "zero stride");
        free(owned);
    }
    /* A large strided array goes through the buffer more than once. */
    enum { N = 100000 };
    double *big = malloc(2 * N * sizeof *big);
    for (int i = 0; i < 2 * N; i++)
        big[i] = i * 0.5;
    memset(&a, 0, sizeof a);
    a.data = big;
    a.dtype = RED_F64;
    a.ndim = 1;
    a.shape[0] = N;
    a.strides[0] = 2;
    CHECK(npy_save(tmp("t.npy"), &a, err, sizeof err) == 0, "%s", err);
    CHECK(npy_load(tmp("t.npy"), &b, &owned, err, sizeof err) == 0, "%s", err);
    if (owned) {
        const double *v = b.data;
        bool ok = b.shape[0] == N;
        for (int i = 0; i < N && ok; i++)
            ok = v[i] == big[2 * i];
        CHECK(ok, "large strided save");
        free(owned);
    }
    free(big);
    /* bf16 has no NumPy dtype: written as float32, exactly. */
    uint16_t h[3] = {0x3f80, 0xc040, 0x7f80};   /* 1, -3, inf */
    memset(&a, 0, sizeof a);
    a.data = h;
    a.dtype = RED_BF16;
    a.ndim = 1;
    a.shape[0] = 3;
    a.strides[0] = 1;
    CHECK(npy_save(tmp("t.npy"), &a, err, sizeof err) == 0, "%s", err);
    CHECK(npy_load(tmp("t.npy"), &b, &owned, err, sizeof err) == 0, "%s", err);
    if (owned) {
        const float *v = b.data;
        CHECK(b.dtype == RED_F32 && v[0] == 1.0f && v[1] == -3.0f && v[2] > 3e38f, "bf16 as f32");
        free(owned);
    }
    /* Unsaveable arrays. */
    a.memory = RED_MEM_CUDA;
    CHECK(npy_save(tmp("t.npy"), &a, err, sizeof err) == -1 && strstr(err, "host"), "cuda: %s", err);
    a.memory = RED_MEM_HOST;
    a.dtype = (red_dtype)42;
    CHECK(npy_save(tmp("t.npy"), &a, err, sizeof err) == -1 && strstr(err, "dtype"), "dtype: %s", err);
    a.dtype = RED_F32;
    CHECK(npy_save("/nonexistent-dir/x.npy", &a, err, sizeof err) == -1 && strstr(err, "cannot create"),
          "bad path: %s", err);
}

static void test_special_files(void)
{
    unsigned char buf[4096];
    char err[512];
    red_array a;
    void *owned;
    /* Fortran order: column-major strides over the same buffer, no copy. */
    int32_t fdata[12];
    for (int i = 0; i < 12; i++)
        fdata[i] = i;
    size_t n = make_npy(buf, sizeof buf, 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (3, 4), }",
                        fdata, sizeof fdata);
    write_bytes(tmp("f.npy"), buf, n);
    CHECK(npy_load(tmp("f.npy"), &a, &owned, err, sizeof err) == 0, "%s", err);
    if (owned) {
        CHECK(a.ndim == 2 && a.shape[0] == 3 && a.shape[1] == 4, "fortran shape");
        CHECK(a.strides[0] == 1 && a.strides[1] == 3, "fortran strides %" PRId64 ",%" PRId64,
              a.strides[0], a.strides[1]);
        /* element [i, j] of a Fortran array is at i + 3 j */
        CHECK(((int32_t *)a.data)[2 * a.strides[0] + 1 * a.strides[1]] == 5, "fortran element");
        free(owned);
    }
    int64_t f3[24];
    for (int i = 0; i < 24; i++)
        f3[i] = i;
    n = make_npy(buf, sizeof buf, 1, "{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3, 4), }",
                 f3, sizeof f3);
    write_bytes(tmp("f.npy"), buf, n);
    CHECK(npy_load(tmp("f.npy"), &a, &owned, err, sizeof err) == 0, "%s", err);
    if (owned) {
        CHECK(a.strides[0] == 1 && a.strides[1] == 2 && a.strides[2] == 6, "3-d fortran strides");
        free(owned);
    }
    /* Versions 2.0 and 3.0; keys in another order, double quotes, no
     * trailing comma, Python 2 long literals. */
    double d2[2] = {1.5, -2.25};
    n = make_npy(buf, sizeof buf, 2, "{\"shape\": (2L,), \"fortran_order\": False, \"descr\": \"<f8\"}", d2,
                 sizeof d2);
    write_bytes(tmp("v2.npy"), buf, n);
    CHECK(npy_load(tmp("v2.npy"), &a, &owned, err, sizeof err) == 0, "v2: %s", err);
    if (owned) {
        CHECK(a.dtype == RED_F64 && a.ndim == 1 && ((double *)a.data)[1] == -2.25, "v2 data");
        free(owned);
    }
    n = make_npy(buf, sizeof buf, 3, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", d2,
                 sizeof d2);
    write_bytes(tmp("v3.npy"), buf, n);
    CHECK(npy_load(tmp("v3.npy"), &a, &owned, err, sizeof err) == 0, "v3: %s", err);
    if (owned)
        free(owned);
    /* Big-endian data is swapped. */
    unsigned char be[8] = {0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe};
    n = make_npy(buf, sizeof buf, 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", be, 8);
    write_bytes(tmp("be.npy"), buf, n);
    CHECK(npy_load(tmp("be.npy"), &a, &owned, err, sizeof err) == 0, "be: %s", err);
    if (owned) {
        CHECK(((int32_t *)a.data)[0] == 258 && ((int32_t *)a.data)[1] == -2, "big-endian values");
        free(owned);
    }
    unsigned char bef[8] = {0x3f, 0xf8, 0, 0, 0, 0, 0, 0};
    n = make_npy(buf, sizeof buf, 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (), }", bef, 8);
    write_bytes(tmp("be.npy"), buf, n);
    CHECK(npy_load(tmp("be.npy"), &a, &owned, err, sizeof err) == 0, "be f8: %s", err);
    if (owned) {
        CHECK(a.ndim == 0 && *(double *)a.data == 1.5, "big-endian f8 scalar");
        free(owned);
    }
    /* A big-endian complex number: each part swapped, not the pair as one item. */
    unsigned char bec[8] = {0x3f, 0xc0, 0, 0, 0xc0, 0x20, 0, 0};   /* 1.5, -2.5 as >f4 */
    n = make_npy(buf, sizeof buf, 1, "{'descr': '>c8', 'fortran_order': False, 'shape': (1,), }", bec, 8);
    write_bytes(tmp("bec.npy"), buf, n);
    CHECK(npy_load(tmp("bec.npy"), &a, &owned, err, sizeof err) == 0, "be c8: %s", err);
    if (owned) {
        CHECK(a.dtype == RED_C64 && ((float *)a.data)[0] == 1.5f && ((float *)a.data)[1] == -2.5f,
              "big-endian c8: %g %g", ((float *)a.data)[0], ((float *)a.data)[1]);
        free(owned);
    }
    /* Bool bytes other than 0/1 become 1. */
    unsigned char bb[3] = {0, 7, 1};
    n = make_npy(buf, sizeof buf, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bb, 3);
    write_bytes(tmp("b.npy"), buf, n);
    CHECK(npy_load(tmp("b.npy"), &a, &owned, err, sizeof err) == 0, "bool: %s", err);
    if (owned) {
        unsigned char *v = a.data;
        CHECK(v[0] == 0 && v[1] == 1 && v[2] == 1, "bool normalised");
        free(owned);
    }
    /* Trailing bytes after the data are ignored, as NumPy does. */
    n = make_npy(buf, sizeof buf, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", bb, 3);
    write_bytes(tmp("b.npy"), buf, n);
    CHECK(npy_load(tmp("b.npy"), &a, &owned, err, sizeof err) == 0, "trailing: %s", err);
    if (owned)
        free(owned);
}

static void test_bad_files(void)
{
    int32_t d[4] = {1, 2, 3, 4};
    write_bytes(tmp("empty.npy"), "", 0);
    expect_error(tmp("empty.npy"), "empty");
    write_bytes(tmp("g.npy"), "hello world, this is not numpy", 30);
    expect_error(tmp("g.npy"), "not a .npy file");
    write_bytes(tmp("g.npy"), "\x93NUM", 4);
    expect_error(tmp("g.npy"), "truncated header");
    write_bytes(tmp("g.npy"), "\x93NUMPY\x01\x00\x50", 9);
    expect_error(tmp("g.npy"), "truncated header");
    write_bytes(tmp("g.npy"), "\x93NUMPY\x01\x00\x50\x00{'descr'", 17);
    expect_error(tmp("g.npy"), "truncated header: expected 80 bytes, got 7");
    write_bytes(tmp("g.npy"), "\x93NUMPY\x04\x00\x10\x00", 10);
    expect_error(tmp("g.npy"), "unsupported .npy format version 4.0");
    write_bytes(tmp("g.npy"), "\x93NUMPY\x02\x00\xff\xff\xff\xff", 12);
    expect_error(tmp("g.npy"), "implausibly large");
    expect_error(tmp("does-not-exist.npy"), "cannot open");
    expect_error(dir, "directory");

    expect_raw_error(1, "{'descr': '<c32', 'fortran_order': False, 'shape': (2,), }", d, 16,
                     "unsupported dtype '<c32'");
    expect_raw_error(1, "{'descr': '<m8', 'fortran_order': False, 'shape': (2,), }", d, 16,
                     "unsupported dtype '<m8'");
    expect_raw_error(1, "{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }", d, 8,
                     "unsupported dtype '|f4'");
    expect_raw_error(1, "{'descr': '<U10', 'fortran_order': False, 'shape': (2,), }", d, 8,
                     "unsupported dtype '<U10'");
    expect_raw_error(1, "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }", d, 8,
                     "structured");
    expect_raw_error(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1000,), }", d, 12,
                     "truncated data: expected 4000 bytes, got 12");
    expect_raw_error(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", d, 4,
                     "9 dimensions");
    expect_raw_error(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
                     d, 16, "too large");
    expect_raw_error(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999999,), }",
                     d, 16, "too large");
    expect_raw_error(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (-1,), }", d, 16, "malformed");
    expect_raw_error(1, "{'descr': '<i4', 'fortran_order': Maybe, 'shape': (4,), }", d, 16, "malformed");
    expect_raw_error(1, "{'descr': '<i4', 'shape': (4,), }", d, 16, "lacks");
    expect_raw_error(1, "{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': (4,)}", d, 16,
                     "duplicate");
    expect_raw_error(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), 'x': 1}", d, 16,
                     "unknown key");
    expect_raw_error(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), } junk", d, 16, "junk");
    expect_raw_error(1, "['descr', '<i4']", d, 16, "not a dict");
    expect_raw_error(1, "{'descr: '<i4', 'fortran_order': False, 'shape': (4,), }", d, 16, "malformed");
    expect_raw_error(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (4, }", d, 16, "malformed");
    expect_raw_error(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (4,)", d, 16, "malformed");

    /* Every truncation and many single-byte corruptions of a valid file:
     * never a crash, never a leak, and truncations always fail. */
    unsigned char good[512];
    double v[6] = {1, 2, 3, 4, 5, 6};
    size_t n = make_npy(good, sizeof good, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
                        v, sizeof v);
    int bad_trunc = 0;
    for (size_t len = 0; len < n; len++) {
        write_bytes(tmp("cut.npy"), good, len);
        red_array a;
        void *owned = NULL;
        char err[512];
        if (npy_load(tmp("cut.npy"), &a, &owned, err, sizeof err) == 0) {
            bad_trunc++;
            free(owned);
        } else if (err[0] == '\0') {
            bad_trunc++;
        }
    }
    CHECK(bad_trunc == 0, "%d truncations were accepted or gave no message", bad_trunc);
    unsigned char mut[512];
    unsigned seed = 12345;
    int silent = 0;
    for (int k = 0; k < 3000; k++) {
        memcpy(mut, good, n);
        for (int m = 0; m < 1 + k % 4; m++) {
            seed = seed * 1103515245u + 12345u;
            size_t pos = (seed >> 8) % 128;
            seed = seed * 1103515245u + 12345u;
            mut[pos] = (unsigned char)(seed >> 16);
        }
        write_bytes(tmp("mut.npy"), mut, n);
        red_array a;
        void *owned = NULL;
        char err[512];
        if (npy_load(tmp("mut.npy"), &a, &owned, err, sizeof err) == 0)
            free(owned);
        else if (err[0] == '\0')
            silent++;
    }
    CHECK(silent == 0, "%d corrupt files failed without a message", silent);

    /* A tiny error buffer truncates the message but never overflows. */
    char small[8];
    red_array a;
    void *owned;
    CHECK(npy_load(tmp("empty.npy"), &a, &owned, small, sizeof small) == -1 && strlen(small) == 7,
          "small err buffer");
    CHECK(npy_load(tmp("empty.npy"), &a, &owned, NULL, 0) == -1, "NULL err buffer");
}

int main(int argc, char **argv)
{
    const char *base = argc > 1 ? argv[1] : getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/npy_test.XXXXXX", base && *base ? base : "/tmp");
    if (argc > 1 && mkdir(argv[1], 0777) != 0 && errno != EEXIST) {
        perror(argv[1]);
        return 1;
    }
    if (!mkdtemp(dir)) {
        perror(dir);
        return 1;
    }
    test_round_trips();
    test_strided_save();
    test_special_files();
    test_bad_files();

    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
