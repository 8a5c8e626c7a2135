/*
 * dtype.c -- element types at run time, shared by both backends and the API:
 * their sizes, f16 and bf16 to and from f32, and conversions between compute
 * types with the cast semantics docs/language.md states.
 */
#include "core/dtype.h"

#include <string.h>

RED_API size_t red_dtype_size(red_dtype t)
{
    switch (t) {
    case RED_BOOL: case RED_I8: case RED_U8: return 1;
    case RED_I16: case RED_U16: return 2;
    case RED_I32: case RED_U32: case RED_F32: return 4;
    case RED_I64: case RED_U64: case RED_F64: case RED_C64: return 8;
    case RED_C128: return 16;
    case RED_F16: case RED_BF16: return 2;
    }
    return 0;
}

/* ---- f16 / bf16 ---------------------------------------------------------- */

float core_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float core_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t core_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
    if (ax < 0x38800000u) {                                   /* subnormal or zero */
        if (ax < 0x33000000u) return (uint16_t)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* f16 subnormals count units of 2^-24 */
        uint32_t v = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (v & 1))) v++;
        return (uint16_t)(sign | v);
    }
    uint32_t v = ((ax - 0x38000000u) >> 13);
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (v & 1))) v++;
    return (uint16_t)(sign | v);
}

float core_round_f16(float x) { return core_f16_to_f32(core_f32_to_f16(x)); }

uint16_t core_f32_to_bf16(float x)
{
    float r = core_round_bf16(x);
    uint32_t b;
    memcpy(&b, &r, 4);
    return (uint16_t)(b >> 16);
}

float core_round_bf16(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) return x; /* NaN stays NaN */
    b = (b + 0x7fffu + ((b >> 16) & 1)) & 0xffff0000u;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* ---- conversions -------------------------------------------------------------- */

/* float -> integer: truncate, saturate, NaN -> 0.  The limits are passed as
 * doubles to compare with and as integers to return: (double)INT64_MAX is
 * 2^63, which would not convert back. */
#define SAT(T, lo, hi, ilo, ihi, f) \
    ((f) != (f) ? (T)0 : (f) <= (lo) ? (T)(ilo) : (f) >= (hi) ? (T)(ihi) : (T)(f))

#define CONV_LOOP(TD, TS, expr)                          \
    do {                                                 \
        TD *restrict d = dst;                            \
        const TS *restrict s = src;                      \
        for (int64_t j = 0; j < n; j++) d[j] = (expr);   \
    } while (0)

#define CONV_FROM(TS)                                                                        \
    switch (to) {                                                                            \
    case CT_BOOL: CONV_LOOP(uint8_t, TS, s[j] != 0); return;                                 \
    case CT_I32: CONV_LOOP(int32_t, TS, (int32_t)s[j]); return;                              \
    case CT_I64: CONV_LOOP(int64_t, TS, (int64_t)s[j]); return;                              \
    case CT_U32: CONV_LOOP(uint32_t, TS, (uint32_t)s[j]); return;                            \
    case CT_U64: CONV_LOOP(uint64_t, TS, (uint64_t)s[j]); return;                            \
    case CT_F32: CONV_LOOP(float, TS, (float)s[j]); return;                                  \
    case CT_F64: CONV_LOOP(double, TS, (double)s[j]); return;                                \
    }

#define CONV_FROM_FLT(TS)                                                                    \
    switch (to) {                                                                            \
    case CT_BOOL: CONV_LOOP(uint8_t, TS, s[j] != 0); return;                                 \
    case CT_I32: CONV_LOOP(int32_t, TS, SAT(int32_t, -2147483648.0, 2147483647.0, INT32_MIN, INT32_MAX, s[j])); return; \
    case CT_I64:                                                                             \
        CONV_LOOP(int64_t, TS, SAT(int64_t, -9223372036854775808.0, 9223372036854775808.0, INT64_MIN, INT64_MAX, s[j])); \
        return;                                                                              \
    case CT_U32: CONV_LOOP(uint32_t, TS, SAT(uint32_t, 0.0, 4294967295.0, 0, UINT32_MAX, s[j])); return; \
    case CT_U64: CONV_LOOP(uint64_t, TS, SAT(uint64_t, 0.0, 18446744073709551616.0, 0, UINT64_MAX, s[j])); return; \
    case CT_F32: CONV_LOOP(float, TS, (float)s[j]); return;                                  \
    case CT_F64: CONV_LOOP(double, TS, (double)s[j]); return;                                \
    }

void core_convert(int to, void *dst, int from, const void *src, int64_t n)
{
    if (to == from) {
        memmove(dst, src, (size_t)n * plan_ct_size(to));
        return;
    }
    switch (from) {
    case CT_BOOL: CONV_FROM(uint8_t) break;
    case CT_I32: CONV_FROM(int32_t) break;
    case CT_I64: CONV_FROM(int64_t) break;
    case CT_U32: CONV_FROM(uint32_t) break;
    case CT_U64: CONV_FROM(uint64_t) break;
    case CT_F32: CONV_FROM_FLT(float) break;
    case CT_F64: CONV_FROM_FLT(double) break;
    }
}

int32_t core_saturate_small(red_dtype t, double f)
{
    double lo = t == RED_I8 ? -128 : t == RED_I16 ? -32768 : 0;
    double hi = t == RED_I8 ? 127 : t == RED_U8 ? 255 : t == RED_I16 ? 32767 : 65535;
    return f != f ? 0 : f <= lo ? (int32_t)lo : f >= hi ? (int32_t)hi : (int32_t)f;
}

void core_store_small(red_dtype t, void *p, int32_t x)
{
    switch (t) {
    case RED_I8: *(int8_t *)p = (int8_t)x; break;
    case RED_U8: *(uint8_t *)p = (uint8_t)x; break;
    case RED_I16: *(int16_t *)p = (int16_t)x; break;
    case RED_U16: *(uint16_t *)p = (uint16_t)x; break;
    default: break;
    }
}

plan_value core_read_dtype(red_dtype t, const void *p)
{
    plan_value v = {.u = 0};
    switch (t) {
    case RED_BOOL: v.i = *(const uint8_t *)p != 0; break;
    case RED_I32: v.i = *(const int32_t *)p; break;
    case RED_I64: v.i = *(const int64_t *)p; break;
    case RED_U32: v.u = *(const uint32_t *)p; break;
    case RED_U64: v.u = *(const uint64_t *)p; break;
    case RED_I8: v.i = *(const int8_t *)p; break;
    case RED_U8: v.i = *(const uint8_t *)p; break;
    case RED_I16: v.i = *(const int16_t *)p; break;
    case RED_U16: v.i = *(const uint16_t *)p; break;
    case RED_F16: v.f = core_f16_to_f32(*(const uint16_t *)p); break;
    case RED_BF16: v.f = core_bf16_to_f32(*(const uint16_t *)p); break;
    case RED_F32: case RED_C64: v.f = *(const float *)p; break;   /* complex: the real part */
    case RED_F64: case RED_C128: v.f = *(const double *)p; break;
    }
    return v;
}
