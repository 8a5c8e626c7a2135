/*
 * dtype.h -- element types at run time, below both backends: sizes (the
 * public red_dtype_size lives here), f16/bf16 conversions, casts between
 * compute types, and typed reads and writes of single values.
 */
#ifndef RED_CORE_DTYPE_H
#define RED_CORE_DTYPE_H

#include <stdint.h>

#include "check/plan.h"

float core_f16_to_f32(uint16_t h);
float core_bf16_to_f32(uint16_t h);
uint16_t core_f32_to_f16(float x);
uint16_t core_f32_to_bf16(float x);
/* x rounded to the nearest f16 (bf16) value, as f32 */
float core_round_f16(float x);
float core_round_bf16(float x);

/* Convert n values of compute type `from` to `to` (cast semantics). */
void core_convert(int to, void *dst, int from, const void *src, int64_t n);
/* One element of dtype `t` at `p`, as a value of its compute type. */
plan_value core_read_dtype(red_dtype t, const void *p);
/* The 8- and 16-bit integer types (computed as i32): the value of f truncated
 * and saturated at t's limits (NaN gives 0), and x stored in t's width
 * (wrapping, as integer casts do). */
int32_t core_saturate_small(red_dtype t, double f);
void core_store_small(red_dtype t, void *p, int32_t x);
/* Element `off` of an array of compute type `ct`, written or read (inline:
 * the CPU folds call them per element). */
static inline void core_write_ct(void *base, int ct, int64_t off, plan_value v)
{
    switch (ct) {
    case CT_BOOL: ((uint8_t *)base)[off] = v.i != 0; break;
    case CT_I32: ((int32_t *)base)[off] = (int32_t)v.i; break;
    case CT_I64: ((int64_t *)base)[off] = v.i; break;
    case CT_U32: ((uint32_t *)base)[off] = (uint32_t)v.u; break;
    case CT_U64: ((uint64_t *)base)[off] = v.u; break;
    case CT_F32: ((float *)base)[off] = (float)v.f; break;
    case CT_F64: ((double *)base)[off] = v.f; break;
    }
}

static inline plan_value core_read_ct(const void *base, int ct, int64_t off)
{
    plan_value v = {.u = 0};
    switch (ct) {
    case CT_BOOL: v.i = ((const uint8_t *)base)[off]; break;
    case CT_I32: v.i = ((const int32_t *)base)[off]; break;
    case CT_I64: v.i = ((const int64_t *)base)[off]; break;
    case CT_U32: v.u = ((const uint32_t *)base)[off]; break;
    case CT_U64: v.u = ((const uint64_t *)base)[off]; break;
    case CT_F32: v.f = ((const float *)base)[off]; break;
    case CT_F64: v.f = ((const double *)base)[off]; break;
    }
    return v;
}

#endif
