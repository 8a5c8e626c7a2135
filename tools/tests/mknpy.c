/*
 * mknpy.c -- test helper for cli_test.sh: writes small .npy files from the
 * command line (independently of npy_save, so the two check each other) and
 * dumps .npy files as text, so the CLI tests need no Python or NumPy.
 *
 *   mknpy OUT.npy DTYPE SHAPE [--fortran] [--big] [--version N] VALUE...
 *       DTYPE: bool i32 i64 u32 u64 f16 f32 f64; SHAPE: "4", "2,3" or "scalar";
 *       VALUEs in file (memory) order, or the single word "iota" for 0, 1, 2...
 *   mknpy --dump FILE.npy
 *       prints "DTYPE (SHAPE): v v v ..." with the values in C (row-major) order.
 */
#define _POSIX_C_SOURCE 200809L

#include "npy.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    red_dtype t;
    char kind;
    int size;
} types[] = {
    {"bool", RED_BOOL, 'b', 1}, {"i32", RED_I32, 'i', 4}, {"i64", RED_I64, 'i', 8},
    {"u32", RED_U32, 'u', 4},   {"u64", RED_U64, 'u', 8}, {"f16", RED_F16, 'f', 2},
    {"f32", RED_F32, 'f', 4},   {"f64", RED_F64, 'f', 8}, {"i8", RED_I8, 'i', 1},
    {"u8", RED_U8, 'u', 1},     {"i16", RED_I16, 'i', 2}, {"u16", RED_U16, 'u', 2},
};

static int die(const char *msg, const char *arg)
{
    fprintf(stderr, "mknpy: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return 2;
}

/* Round-to-nearest-even float -> IEEE half. */
static uint16_t f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)(x >> 16 & 0x8000);
    int fe = (int)(x >> 23 & 0xff), e = fe - 127 + 15;
    uint32_t m = x & 0x7fffff;
    if (fe == 0xff)
        return sign | 0x7c00 | (m ? 0x200 : 0);
    if (e >= 31)
        return sign | 0x7c00;
    if (e <= 0) {
        if (e < -10)
            return sign;
        m |= 0x800000;
        int shift = 14 - e;
        uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1)))
            hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t hm = m >> 13, rem = m & 0x1fff;
    uint16_t h = (uint16_t)(sign | e << 10 | hm);
    if (rem > 0x1000 || (rem == 0x1000 && (hm & 1)))
        h++;
    return h;
}

static float h2f(uint16_t h)
{
    int e = h >> 10 & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400), e - 25);
    return h & 0x8000 ? -v : v;
}

static void put(unsigned char *p, int k, const char *v, double iota)
{
    double d = v ? strtod(v, NULL) : iota;
    switch (types[k].t) {
    case RED_BOOL: *p = v ? (strcmp(v, "true") == 0 || (strcmp(v, "false") != 0 && d != 0)) : d != 0; break;
    case RED_I32: { int32_t x = v ? (int32_t)strtoll(v, NULL, 10) : (int32_t)iota; memcpy(p, &x, 4); break; }
    case RED_I64: { int64_t x = v ? strtoll(v, NULL, 10) : (int64_t)iota; memcpy(p, &x, 8); break; }
    case RED_U32: { uint32_t x = v ? (uint32_t)strtoull(v, NULL, 10) : (uint32_t)iota; memcpy(p, &x, 4); break; }
    case RED_U64: { uint64_t x = v ? strtoull(v, NULL, 10) : (uint64_t)iota; memcpy(p, &x, 8); break; }
    case RED_F16: { uint16_t x = f2h((float)d); memcpy(p, &x, 2); break; }
    case RED_F32: { float x = (float)d; memcpy(p, &x, 4); break; }
    case RED_I8: case RED_U8: *p = (unsigned char)(v ? strtoll(v, NULL, 10) : (long long)iota); break;
    case RED_I16: case RED_U16: {
        uint16_t x = (uint16_t)(v ? strtoll(v, NULL, 10) : (long long)iota);
        memcpy(p, &x, 2);
        break;
    }
    default: memcpy(p, &d, 8); break;
    }
}

static int make(int argc, char **argv)
{
    if (argc < 4)
        return die("usage: mknpy OUT.npy DTYPE SHAPE [--fortran] [--big] [--version N] VALUE...", NULL);
    int k = -1;
    for (int i = 0; i < (int)(sizeof types / sizeof types[0]); i++)
        if (strcmp(argv[2], types[i].name) == 0)
            k = i;
    if (k < 0)
        return die("unknown dtype", argv[2]);
    char shape[256] = "(";
    long long count = 1;
    int ndim = 0;
    if (strcmp(argv[3], "scalar") != 0) {
        char *p = argv[3];
        for (;;) {
            char *end;
            long long e = strtoll(p, &end, 10);
            if (end == p || e < 0)
                return die("bad shape", argv[3]);
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), ndim ? ", %lld" : "%lld", e);
            count *= e;
            ndim++;
            if (*end != ',')
                break;
            p = end + 1;
        }
    }
    strcat(shape, ndim == 1 ? ",)" : ")");
    bool fortran = false, big = false;
    int version = 1, i = 4;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--fortran") == 0)
            fortran = true;
        else if (strcmp(argv[i], "--big") == 0)
            big = true;
        else if (strcmp(argv[i], "--version") == 0 && i + 1 < argc)
            version = atoi(argv[++i]);
        else
            break;
    }
    bool iota = i + 1 == argc && strcmp(argv[i], "iota") == 0;
    if (!iota && argc - i != count)
        return die("the number of values does not match the shape", argv[3]);
    int size = types[k].size;
    unsigned char *data = calloc((size_t)count + 1, (size_t)size);
    if (!data)
        return die("out of memory", NULL);
    for (long long j = 0; j < count; j++) {
        unsigned char *p = data + j * size;
        put(p, k, iota ? NULL : argv[i + j], (double)j);
        if (big)
            for (int a = 0, b = size - 1; a < b; a++, b--) {
                unsigned char t = p[a];
                p[a] = p[b];
                p[b] = t;
            }
    }
    char dict[512];
    snprintf(dict, sizeof dict, "{'descr': '%c%c%d', 'fortran_order': %s, 'shape': %s, }",
             size == 1 ? '|' : big ? '>' : '<', types[k].kind, size, fortran ? "True" : "False", shape);
    size_t lenb = version == 1 ? 2 : 4, dl = strlen(dict);
    size_t pad = (64 - (6 + 2 + lenb + dl + 1) % 64) % 64, hlen = dl + pad + 1;
    FILE *f = fopen(argv[1], "wb");
    if (!f) {
        free(data);
        return die("cannot create", argv[1]);
    }
    unsigned char pre[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)version, 0};
    for (size_t b = 0; b < lenb; b++)
        pre[8 + b] = (unsigned char)(hlen >> (8 * b));
    fwrite(pre, 1, 8 + lenb, f);
    fputs(dict, f);
    for (size_t b = 0; b < pad; b++)
        fputc(' ', f);
    fputc('\n', f);
    fwrite(data, (size_t)size, (size_t)count, f);
    free(data);
    return fclose(f) == 0 ? 0 : die("write failed", argv[1]);
}

static int dump(const char *path)
{
    red_array a;
    void *owned;
    char err[512];
    if (npy_load(path, &a, &owned, err, sizeof err) != 0)
        return die(err, NULL);
    const char *name = "?";
    int size = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].t == a.dtype) {
            name = types[i].name;
            size = types[i].size;
        }
    printf("%s (", name);
    long long count = 1;
    for (int d = 0; d < a.ndim; d++) {
        printf(d ? ", %" PRId64 : "%" PRId64, a.shape[d]);
        count *= a.shape[d];
    }
    printf(a.ndim == 1 ? ",):" : "):");
    int64_t idx[RED_MAX_DIMS] = {0};
    for (long long j = 0; j < count; j++) {
        int64_t off = 0;
        for (int d = 0; d < a.ndim; d++)
            off += idx[d] * a.strides[d];
        const unsigned char *p = (const unsigned char *)a.data + off * size;
        switch (a.dtype) {
        case RED_BOOL: printf(" %s", *p ? "true" : "false"); break;
        case RED_I32: { int32_t v; memcpy(&v, p, 4); printf(" %" PRId32, v); break; }
        case RED_I64: { int64_t v; memcpy(&v, p, 8); printf(" %" PRId64, v); break; }
        case RED_U32: { uint32_t v; memcpy(&v, p, 4); printf(" %" PRIu32, v); break; }
        case RED_U64: { uint64_t v; memcpy(&v, p, 8); printf(" %" PRIu64, v); break; }
        case RED_F16: { uint16_t v; memcpy(&v, p, 2); printf(" %.17g", (double)h2f(v)); break; }
        case RED_F32: { float v; memcpy(&v, p, 4); printf(" %.17g", (double)v); break; }
        case RED_I8: printf(" %d", (int8_t)*p); break;
        case RED_U8: printf(" %d", *p); break;
        case RED_I16: { int16_t v; memcpy(&v, p, 2); printf(" %d", v); break; }
        case RED_U16: { uint16_t v; memcpy(&v, p, 2); printf(" %d", v); break; }
        default: { double v; memcpy(&v, p, 8); printf(" %.17g", v); break; }
        }
        for (int d = a.ndim - 1; d >= 0; d--) {
            if (++idx[d] < a.shape[d])
                break;
            idx[d] = 0;
        }
    }
    printf("\n");
    free(owned);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--dump") == 0)
        return dump(argv[2]);
    return make(argc, argv);
}
