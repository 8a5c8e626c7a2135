/*
 * bench_data.h -- the GPU benchmark's inputs, defined once: element i of every array is a pure
 * function of (i, seed) in 32-bit unsigned arithmetic, so the CUDA program (cub_bench.cu, on the
 * device), the C driver (redjit_bench.c, on the host) and peers.py (CuPy or NumPy, same uint32
 * operations) build bit-identical arrays without sharing files.  Plain C99 and CUDA C++.
 *
 *   mix(x)      = lowbias32 (x ^= x>>16; x *= 0x7feb352d; x ^= x>>15; x *= 0x846ca68b; x ^= x>>16)
 *   hash(i, s)  = mix(mix(i) + s * 0x9e3779b9)                       (all mod 2^32)
 *   f32         = (float)(hash >> 8) * 2^-23 - 1     in [-1, 1), exact in float32
 *   f64         = (double)hash * 2^-31 - 1           in [-1, 1), exact in float64
 *   i32         = (int32_t)(hash >> 28) - 8          in [-8, 7]
 *
 * Segment layouts over NS values (CSR offsets `ptr`, nseg + 1 of them, and owner keys
 * `seg[i]` = the segment holding i):
 *   one      one segment of everything
 *   rand     lengths 10 + hash(k, BD_SEED_LEN) % 41 (10..50), the last one cut at NS
 *   len3     all of length 3 (the last one shorter when 3 does not divide NS)
 *   rows1024 all of length 1024 (the last one shorter when 1024 does not divide NS)
 */
#ifndef BENCH_DATA_H
#define BENCH_DATA_H

#include <stdint.h>

#ifdef __CUDACC__
#define BD_FN __host__ __device__ static inline
#else
#define BD_FN static inline
#endif

/* seeds of the arrays (the same in every program) */
enum { BD_SEED_X = 1, BD_SEED_B = 2, BD_SEED_F64 = 3, BD_SEED_I32 = 4, BD_SEED_LEN = 5 };

/* segment layouts, in table order */
enum { BD_LAYOUT_ONE = 0, BD_LAYOUT_RAND = 1, BD_LAYOUT_LEN3 = 2, BD_LAYOUT_ROWS = 3, BD_NLAYOUTS = 4 };

BD_FN uint32_t bd_mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

BD_FN uint32_t bd_hash(uint64_t i, uint32_t seed)
{
    return bd_mix(bd_mix((uint32_t)i) + seed * 0x9e3779b9u);
}

BD_FN float bd_f32(uint64_t i, uint32_t seed)
{
    return (float)(bd_hash(i, seed) >> 8) * 1.1920928955078125e-07f - 1.0f; /* 2^-23 */
}

BD_FN double bd_f64(uint64_t i, uint32_t seed)
{
    return (double)bd_hash(i, seed) * 4.656612873077392578125e-10 - 1.0; /* 2^-31 */
}

BD_FN int32_t bd_i32(uint64_t i, uint32_t seed)
{
    return (int32_t)(bd_hash(i, seed) >> 28) - 8;
}

/* Length of segment k of a layout (before the cut at NS). */
BD_FN int64_t bd_seg_len(int layout, int64_t k, int64_t ns)
{
    switch (layout) {
    case BD_LAYOUT_ONE: return ns > 0 ? ns : 1;
    case BD_LAYOUT_RAND: return 10 + (int64_t)(bd_hash((uint64_t)k, BD_SEED_LEN) % 41u);
    case BD_LAYOUT_LEN3: return 3;
    default: return 1024;
    }
}

/* Number of segments of a layout over ns > 0 values. */
BD_FN int64_t bd_nseg(int layout, int64_t ns)
{
    int64_t k = 0, off = 0;
    switch (layout) {
    case BD_LAYOUT_ONE: return 1;
    case BD_LAYOUT_LEN3: return (ns + 2) / 3;
    case BD_LAYOUT_ROWS: return (ns + 1023) / 1024;
    default:
        while (off < ns) off += bd_seg_len(layout, k++, ns);
        return k;
    }
}

/* Fill ptr[0..nseg] (nseg = bd_nseg) with the layout's CSR offsets. */
BD_FN void bd_offsets(int layout, int64_t ns, int32_t *ptr)
{
    int64_t nseg = bd_nseg(layout, ns), off = 0;
    ptr[0] = 0;
    for (int64_t k = 0; k < nseg; k++) {
        off += bd_seg_len(layout, k, ns);
        ptr[k + 1] = (int32_t)(off < ns ? off : ns);
    }
}

/* Rotation: when one input set is smaller than BD_ROT_BYTES (four times the H200's 60 MB L2),
 * the benchmark cycles through that many copies of it (at most BD_ROT_MAX) so that repeated runs
 * do not read from the cache. */
#define BD_ROT_BYTES (256.0 * 1024 * 1024)
#define BD_ROT_MAX 64

BD_FN int bd_rotation(double bytes)
{
    if (bytes <= 0) return 1;
    double k = BD_ROT_BYTES / bytes;
    int r = k >= BD_ROT_MAX ? BD_ROT_MAX : (int)k + ((double)(int)k < k);
    return r < 1 ? 1 : r;
}

/* --held (redjit_bench, cub_bench): how long the host function holds the stream before each
 * timed call, in us; far longer than queueing a call takes (a few to 20 us). */
#define BD_HOLD_US 200.0

#endif
