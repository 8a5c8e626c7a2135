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
 *
 * Sparse matrices (the SpMV cases; CSR: int32 offsets `ptr` of nrows + 1, columns `col`, f32 values
 * `v`, an f32 vector `x` of ncols).  Every matrix takes its values from one array and its vector
 * from another, prefixes of v[k] = f32(k, BD_SEED_SPV) and x[c] = f32(c, BD_SEED_SPX):
 *   random columns  col[k] = hash(k, BD_SEED_COL) % ncols (one array, whose prefixes serve every
 *                   matrix with random columns; unsorted within a row, repeats possible)
 *   row lengths     r32    every row 32
 *                   power  h = hash(r, BD_SEED_PLEN), t = trailing zero bits of (h | 2^31):
 *                          1 + (h >> 28) % 4 where t < 4, else min(2^(t+1), 2^18)
 *                   len13  1 + hash(r, BD_SEED_L13) % 3
 *                   (and the segment layout rand above)
 *   poisson         the 5-point stencil on a G x G grid: row r = i G + j holds the columns
 *                   r - G, r - 1, r, r + 1, r + G, those in the grid (i > 0, j > 0, j < G - 1,
 *                   i < G - 1), in that order, which is increasing
 *
 * Element types (the types_* cases; every case reads a prefix of one array of its type):
 *   u8            = hash(i, BD_SEED_U8) >> 24                        in [0, 255]
 *   i16           = (int32_t)(hash(i, BD_SEED_I16) >> 16) - 32768    in [-32768, 32767]
 *   c64 z, w      = (f32(i, s), f32(i, s + 1)), the real and imaginary parts, s = BD_SEED_Z (z)
 *                   or BD_SEED_W (w): BD_SEED_Z + 1 and BD_SEED_W + 1 are the parts' seeds
 *   f32 with NaN  = a quiet NaN (0x7fc00000) where hash(i, BD_SEED_NAN) % 100 == 0 (about 1%),
 *                   else f32(i, BD_SEED_XNAN)
 *
 * Normal values (the pair_* cases; every case reads a prefix of one array, x, y, a or b):
 *   normal        = (s - 8388606) * f32(sqrt(3)) * 2^-22, s = the sum over k = 0..3 of
 *                   hash(i, seed + k) >> 10: four 22-bit uniforms (Irwin-Hall), mean 0, variance 1,
 *                   within 3.47 of 0; s - 8388606 is exact in f32, so one rounding, the same in every
 *                   program.  Seeds BD_SEED_PX (x), BD_SEED_PY (y), BD_SEED_PA (a), BD_SEED_PB (b),
 *                   each taking four
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
enum { BD_SEED_X = 1, BD_SEED_B = 2, BD_SEED_F64 = 3, BD_SEED_I32 = 4, BD_SEED_LEN = 5, BD_SEED_COL = 6,
       BD_SEED_SPV = 7, BD_SEED_SPX = 8, BD_SEED_PLEN = 9, BD_SEED_L13 = 10, BD_SEED_U8 = 11, BD_SEED_I16 = 12,
       BD_SEED_Z = 13, /* and 14: z's imaginary parts */ BD_SEED_W = 15, /* and 16 */ BD_SEED_NAN = 17,
       BD_SEED_XNAN = 18, BD_SEED_PX = 19, /* to 22 */ BD_SEED_PY = 23, /* to 26 */ BD_SEED_PA = 27,
       /* to 30 */ BD_SEED_PB = 31 /* to 34 */ };

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

/* The element types of the types_* cases (the header's table) */
BD_FN uint8_t bd_u8(uint64_t i, uint32_t seed)
{
    return (uint8_t)(bd_hash(i, seed) >> 24);
}

BD_FN int16_t bd_i16(uint64_t i, uint32_t seed)
{
    return (int16_t)((int32_t)(bd_hash(i, seed) >> 16) - 32768);
}

/* Complex element i of the array of seed s: parts f32(i, s) and f32(i, s + 1), into re_im. */
BD_FN void bd_c64(uint64_t i, uint32_t seed, float re_im[2])
{
    re_im[0] = bd_f32(i, seed);
    re_im[1] = bd_f32(i, seed + 1);
}

/* f32(i, seed), or a quiet NaN where hash(i, BD_SEED_NAN) % 100 == 0 (about 1 element in 100). */
BD_FN float bd_f32_nan(uint64_t i, uint32_t seed)
{
    union {
        uint32_t u;
        float f;
    } nan = {0x7fc00000u};
    return bd_hash(i, BD_SEED_NAN) % 100u == 0 ? nan.f : bd_f32(i, seed);
}

/* A normal value of mean 0 and variance 1 (the header's table): the sum of four 22-bit uniforms,
 * centred, exact as an integer and in f32, times f32(sqrt(3)) * 2^-22 (0x1.bb67aep-22). */
BD_FN float bd_normal(uint64_t i, uint32_t seed)
{
    int32_t s = -8388606;   /* 4 (2^22 - 1) / 2: the sum's mean */
    for (uint32_t k = 0; k < 4; k++) s += (int32_t)(bd_hash(i, seed + k) >> 10);
    return (float)s * 4.129530850605079e-07f;
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

/* The sparse matrices' row-length rules (bd_row_len) */
enum { BD_ROWS_R32 = 0, BD_ROWS_POWER = 1, BD_ROWS_LEN13 = 2 };
#define BD_POWER_MAX_LOG2 18   /* the longest power-law row: 2^18 */

/* Column of nonzero k of a matrix with random columns. */
BD_FN uint32_t bd_col(uint64_t k, uint32_t ncols)
{
    return bd_hash(k, BD_SEED_COL) % ncols;
}

/* Length of row r under a row-length rule. */
BD_FN int64_t bd_row_len(int rule, int64_t r)
{
    if (rule == BD_ROWS_R32) return 32;
    if (rule == BD_ROWS_LEN13) return 1 + (int64_t)(bd_hash((uint64_t)r, BD_SEED_L13) % 3u);
    uint32_t h = bd_hash((uint64_t)r, BD_SEED_PLEN);
    int t = 0;
    for (uint32_t m = h | 0x80000000u; !(m & 1u); m >>= 1) t++;
    if (t < 4) return 1 + (int64_t)((h >> 28) % 4u);
    return (int64_t)1 << (t + 1 < BD_POWER_MAX_LOG2 ? t + 1 : BD_POWER_MAX_LOG2);
}

/* Fill ptr[0..nrows] with the CSR offsets of nrows rows under a rule; returns the nonzero count,
 * or -1 where it does not fit int32 (ptr is then incomplete). */
BD_FN int64_t bd_row_offsets(int rule, int64_t nrows, int32_t *ptr)
{
    int64_t off = 0;
    ptr[0] = 0;
    for (int64_t r = 0; r < nrows; r++) {
        off += bd_row_len(rule, r);
        if (off > INT32_MAX) return -1;
        ptr[r + 1] = (int32_t)off;
    }
    return off;
}

/* The columns of row r of the G x G 5-point stencil, in increasing order, into cols; returns
 * their count (3 to 5). */
BD_FN int bd_poisson_row(int64_t r, int64_t g, int64_t cols[5])
{
    int64_t i = r / g, j = r % g;
    int n = 0;
    if (i > 0) cols[n++] = r - g;
    if (j > 0) cols[n++] = r - 1;
    cols[n++] = r;
    if (j + 1 < g) cols[n++] = r + 1;
    if (i + 1 < g) cols[n++] = r + g;
    return n;
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
