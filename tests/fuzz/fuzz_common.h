/*
 * fuzz_common.h -- what both fuzz targets share: turning the input into expression text, a
 * fixed family of bindings (the names the test cases use, arrays of every dtype and rank 0..3,
 * empty and reversed ones, index arrays) filled from a seed, and the check that a status is one
 * the header documents for the call that returned it.  Public API only.
 */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include "redjit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_MAX_TEXT 4096

/* A finding: print what and where, then abort so libFuzzer saves the input. */
/* A finding: the message on stderr, and appended to $REDJIT_FUZZ_FINDINGS when set (in
 * libFuzzer's fork mode a job's stderr is not kept), then abort. */
#define FZ_FAIL(...)                                                              \
    do {                                                                          \
        for (int fz_k = 0; fz_k < 2; fz_k++) {                                    \
            const char *fz_path = getenv("REDJIT_FUZZ_FINDINGS");                 \
            FILE *fz_f = fz_k == 0 ? stderr : fz_path ? fopen(fz_path, "a") : NULL; \
            if (!fz_f) continue;                                                  \
            fprintf(fz_f, "FUZZ FINDING %s:%d: ", __FILE__, __LINE__);            \
            fprintf(fz_f, __VA_ARGS__);                                           \
            fputc('\n', fz_f);                                                    \
            if (fz_f != stderr) fclose(fz_f);                                     \
        }                                                                         \
        abort();                                                                  \
    } while (0)

/* Bits of the statuses each call may return: the lists in redjit.h's comment of that call,
 * kept in step with them, less what these fuzzers cannot meet without a bug: RED_ERR_ARG (the
 * header gives it for NULL or out-of-range arguments, which they never pass), RED_ERR_INTERNAL
 * (a bug by definition), and the GPU's RED_ERR_DEVICE and RED_ERR_COMPILE (they run on the
 * CPU, RED_OPT_DEVICE = RED_DEVICE_CPU).  RED_ERR_SYNTAX after a successful prepare is
 * documented for red_run: a text that only defines operators parses, and has nothing to
 * compute.
 *   FZ_PREPARE_OK  red_prepare, red_check_syntax
 *   FZ_CHECK_OK    red_explain (it checks and plans as red_run does)
 *   FZ_RUN_OK      red_run */
#define FZ_BIT(s) (1u << (s))
#define FZ_PREPARE_OK (FZ_BIT(RED_OK) | FZ_BIT(RED_ERR_SYNTAX) | FZ_BIT(RED_ERR_LIMIT) | FZ_BIT(RED_ERR_NOMEM))
#define FZ_CHECK_OK                                                                           \
    (FZ_BIT(RED_OK) | FZ_BIT(RED_ERR_NAME) | FZ_BIT(RED_ERR_TYPE) | FZ_BIT(RED_ERR_SHAPE) |   \
     FZ_BIT(RED_ERR_SYNTAX) | FZ_BIT(RED_ERR_LIMIT) | FZ_BIT(RED_ERR_BIND) | FZ_BIT(RED_ERR_NOMEM))
#define FZ_RUN_OK                                                                             \
    (FZ_CHECK_OK | FZ_BIT(RED_ERR_INDEX) | FZ_BIT(RED_ERR_EMPTY) | FZ_BIT(RED_ERR_KEYS) |      \
     FZ_BIT(RED_ERR_UNSUPPORTED) | FZ_BIT(RED_ERR_INTERRUPTED))

static void fz_expect(int rc, unsigned allowed, const char *what, const char *text, const char *msg)
{
    if (rc < 0 || rc > 31 || !(allowed & FZ_BIT(rc)))
        FZ_FAIL("%s returned %d (%s) for %s\nmessage: %s", what, rc, red_errstr(rc), text,
                msg ? msg : "");
    if (rc != RED_OK && (!msg || !*msg))
        FZ_FAIL("%s failed with %d (%s) but left no message, for %s", what, rc, red_errstr(rc), text);
}

/* The text: the input up to its first NUL (at most FZ_MAX_TEXT bytes); *rest and *nrest the
 * bytes after that NUL, the seed of the data (empty for the text-only seed corpus). */
static char *fz_text(const uint8_t *data, size_t size, const uint8_t **rest, size_t *nrest)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t n = nul ? (size_t)(nul - data) : size;
    *rest = nul ? nul + 1 : data + size;
    *nrest = nul ? size - n - 1 : 0;
    if (n > FZ_MAX_TEXT) return NULL;
    char *t = malloc(n + 1);
    if (!t) abort();
    memcpy(t, data, n);
    t[n] = 0;
    return t;
}

/* splitmix64 over the seed bytes: the data are a function of the input alone. */
typedef struct fz_rng { uint64_t s; } fz_rng;
static uint64_t fz_next(fz_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static fz_rng fz_seed(const uint8_t *b, size_t n)
{
    fz_rng r = {0x5eed};
    for (size_t i = 0; i < n; i++) r.s = (r.s ^ b[i]) * 0x100000001b3ull;
    return r;
}

/* ---- bindings --------------------------------------------------------------------------- */

#define FZ_ARENA 65536

typedef struct fz_store {
    unsigned char *mem;     /* every array's data, so one memcmp shows a write */
    unsigned char *copy;
    size_t used;
    int n;                  /* length of the 1-D arrays */
    int r, c;               /* shape of the 2-D arrays */
} fz_store;

static const red_dtype fz_types[] = {RED_BOOL, RED_I32, RED_I64, RED_U32, RED_U64, RED_F16, RED_BF16,
                                     RED_F32,  RED_F64, RED_I8,  RED_U8,  RED_I16, RED_U16, RED_C64, RED_C128};

static void *fz_alloc(fz_store *st, size_t bytes)
{
    st->used = (st->used + 15) & ~(size_t)15;
    if (st->used + bytes > FZ_ARENA) abort();
    void *p = st->mem + st->used;
    st->used += bytes;
    return p;
}

/* One element of type t from a small value v (or a special one). */
static void fz_put(void *p, red_dtype t, double v, uint64_t raw, int special)
{
    switch (t) {
    case RED_BOOL: *(uint8_t *)p = (uint8_t)(raw & 1); break;
    case RED_I32: *(int32_t *)p = special ? (int32_t)raw : (int32_t)v; break;
    case RED_I64: *(int64_t *)p = special ? (int64_t)raw : (int64_t)v; break;
    case RED_U32: *(uint32_t *)p = special ? (uint32_t)raw : (uint32_t)(int32_t)v; break;
    case RED_U64: *(uint64_t *)p = special ? raw : (uint64_t)(int64_t)v; break;
    case RED_F16: case RED_BF16: *(uint16_t *)p = (uint16_t)raw; break;
    case RED_I8: *(int8_t *)p = (int8_t)(special ? (int64_t)raw : (int64_t)v); break;
    case RED_U8: *(uint8_t *)p = (uint8_t)(special ? (int64_t)raw : (int64_t)v); break;
    case RED_I16: { int16_t x = (int16_t)(special ? (int64_t)raw : (int64_t)v); memcpy(p, &x, 2); break; }
    case RED_U16: { uint16_t x = (uint16_t)(special ? (int64_t)raw : (int64_t)v); memcpy(p, &x, 2); break; }
    case RED_F32: { float f = special ? (float)(special == 1 ? 1.0 / 0.0 : 0.0 / 0.0) : (float)v; memcpy(p, &f, 4); break; }
    case RED_F64: { double d = special ? (special == 1 ? -1.0 / 0.0 : 0.0 / 0.0) : v; memcpy(p, &d, 8); break; }
    case RED_C64: { float z[2] = {(float)v, special ? (float)(0.0 / 0.0) : (float)(raw % 7) - 3.0f}; memcpy(p, z, 8); break; }
    case RED_C128: { double z[2] = {special ? 1.0 / 0.0 : v, (double)(raw % 5) - 2.0}; memcpy(p, z, 16); break; }
    }
}

/* Bind `name` to a fresh array of type t and shape dims (rank nd); values from rng, every
 * 16th special (NaN, inf, an extreme integer) when `wild`; `rev` stores it reversed
 * (negative strides). */
static void fz_array(red_expr *e, fz_store *st, fz_rng *rng, const char *name, red_dtype t, int nd,
                     const int64_t *dims, int wild, int rev)
{
    size_t es = red_dtype_size(t), cnt = 1;
    for (int d = 0; d < nd; d++) cnt *= (size_t)dims[d];
    unsigned char *buf = fz_alloc(st, es * (cnt ? cnt : 1));
    for (size_t k = 0; k < cnt; k++) {
        uint64_t x = fz_next(rng);
        int special = wild && (x & 15) == 0 ? 1 + (int)((x >> 4) & 1) : 0;
        fz_put(buf + k * es, t, (double)((int64_t)(x >> 40) % 7), x >> 8, special);
    }
    red_array a;
    if (red_array_init(&a, buf, t, nd, dims, NULL) != RED_OK) abort();
    if (rev && cnt > 1) {
        a.data = buf + (cnt - 1) * es;
        for (int d = 0; d < nd; d++) a.strides[d] = -a.strides[d];
    }
    int rc = red_bind_array(e, name, &a);
    if (rc != RED_OK) FZ_FAIL("binding a good array '%s' failed: %d", name, rc);
}

/* An i64 (or i32) index array of length len with values from f(k). */
static void fz_index(red_expr *e, fz_store *st, const char *name, red_dtype t, int64_t len,
                     int64_t (*f)(int64_t k, int64_t n, fz_rng *r), int64_t n, fz_rng *rng)
{
    size_t es = red_dtype_size(t);
    unsigned char *buf = fz_alloc(st, es * (size_t)(len ? len : 1));
    for (int64_t k = 0; k < len; k++) {
        int64_t v = f(k, n, rng);
        if (t == RED_I32) { int32_t w = (int32_t)v; memcpy(buf + k * es, &w, 4); }
        else memcpy(buf + k * es, &v, 8);
    }
    red_array a;
    if (red_array_init(&a, buf, t, 1, &len, NULL) != RED_OK) abort();
    if (red_bind_array(e, name, &a) != RED_OK) FZ_FAIL("binding index array '%s' failed", name);
}

static int64_t fz_sorted(int64_t k, int64_t n, fz_rng *r) { return n ? k * 3 / n : 0; }
static int64_t fz_inrange(int64_t k, int64_t n, fz_rng *r) { return n ? (int64_t)(fz_next(r) % (uint64_t)n) : 0; }
static int64_t fz_ptr(int64_t k, int64_t n, fz_rng *r) { return n * k / 3; } /* len 4: 0..n */
static int64_t fz_bin(int64_t k, int64_t n, fz_rng *r) { return (int64_t)(fz_next(r) % 4); }

/* Bind the whole family.  sig picks dtypes and shapes; everything else comes from rng. */
static void fz_bind_all(red_expr *e, fz_store *st, fz_rng *rng, unsigned sig)
{
    static const char *const vec[] = {"x", "y", "z", "a", "b", "u", "v", "w", "re", "im", "th", "lab"};
    static const char *const mat[] = {"A", "B", "C", "M", "R", "I"};
    st->used = 0;
    int wild = (sig >> 8) & 1, rev = (sig >> 9) & 1;
    st->n = (int)((sig >> 10) % 10);            /* 0..9 */
    st->r = (int)((sig >> 14) % 5);
    st->c = (int)((sig >> 17) % 5);
    int64_t n = st->n, dm[2] = {st->r, st->c}, d3[3] = {2, st->r, st->c};
    for (size_t k = 0; k < sizeof vec / sizeof *vec; k++) {
        red_dtype t = fz_types[(sig + k * ((sig >> 4) & 7)) % 9];
        if (k < 2 && (sig & 16)) t = (sig & 32) ? RED_F64 : RED_F32;   /* x, y mostly floats */
        fz_array(e, st, rng, vec[k], t, 1, &n, wild, rev && (k & 1));
    }
    for (size_t k = 0; k < sizeof mat / sizeof *mat; k++)
        fz_array(e, st, rng, mat[k], fz_types[(sig + 3 * k) % 9], 2, dm, wild, rev && k == 1);
    fz_array(e, st, rng, "T", fz_types[(sig >> 3) % 9], 3, d3, wild, 0);
    fz_array(e, st, rng, "s", fz_types[(sig >> 5) % 9], 0, NULL, wild, 0);
    fz_index(e, st, "seg", RED_I64, n, fz_sorted, n, rng);
    fz_index(e, st, "col", (sig & 64) ? RED_I32 : RED_I64, n, fz_inrange, n, rng);
    fz_index(e, st, "bin", RED_I64, n, fz_bin, n, rng);
    fz_index(e, st, "ptr", RED_I64, 4, fz_ptr, n, rng);
    fz_index(e, st, "perm", RED_I64, n, fz_inrange, n, rng);
    red_bind_i64(e, "n", n);
    red_bind_i64(e, "m", 3);
    red_bind_f64(e, "t", 0.5);
    memcpy(st->copy, st->mem, st->used);
}

static void fz_store_init(fz_store *st)
{
    st->mem = calloc(1, FZ_ARENA);
    st->copy = calloc(1, FZ_ARENA);
    if (!st->mem || !st->copy) abort();
}

static void fz_inputs_unchanged(const fz_store *st, const char *text)
{
    if (memcmp(st->mem, st->copy, st->used) != 0) FZ_FAIL("an input array was written, by %s", text);
}

#endif
