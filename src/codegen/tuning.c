/*
 * tuning.c -- the values the generated code is tuned with (loads in flight,
 * tile sizes, register bounds), each with its rule and REDJIT_* override.
 */
#include "gen.h"

#include <stdlib.h>
#include <string.h>

/* Elements each thread loads before folding any (rj_fold_batch).  Tuned on
 * the H200 (bench/sweep.sh REDJIT_UNROLL, 2026-11-22, 2^28 f32 unless noted; us at
 * 2 / 4 / 8): one load an element and no ranged index gains from 8 (sum
 * 344 / 261 / 246, argmax 497 / 418 / 362, row sums 285 / 284 / 254, column
 * sums 254 / 289 / 252); two loads (a dot product: 491 / 485 / 505) and
 * ranges (one 2^26 segment: 165 / 139 / 163) kept 4 while every element
 * checked its subscript.  Partial passes check ranged subscripts once an
 * output (emit_range_checks), and CSR ranges gain from 8 too (2026-11-23,
 * 2^26 f32, us at 4 / 8: one segment 111.4 / 87.2, lengths 10..50 137.3 /
 * 115.8, rows of 1024 75.2 / 72.5, all of length 3 149.2 / 154.0); full
 * reductions over ranges, and ranged passes whose element code still checks
 * a subscript at every element (x[k-1], x[2*k]: elem_checks), keep 4.  REDJIT_UNROLL (1, 2, 4, 8 or 16)
 * overrides it for sweeps: the source, and so the cache key, changes with
 * it. */
int cg_unroll(const cg_kernel *k)
{
    const char *u = getenv("REDJIT_UNROLL");
    int v = u ? atoi(u) : 0;
    if (v == 1 || v == 2 || v == 4 || v == 8 || v == 16) return v;
    return k->nloads == 1 && !k->loads_overflow && (!k->ranged || (k->kind == CG_PARTIAL && !k->elem_checks)) ? 8 : 4;
}

/* 16-byte loads of each array a thread has in flight in rj_run_v.  Tuned
 * on the H200 (bench/sweep.sh REDJIT_VUNROLL, 2026-11-23, 2^28 unless noted;
 * us at 2 / 4 / 8): sum f32 242.4 / 241.3 / 240.5 (2^24: 25.3 / 26.1 /
 * 25.3), sum f64 470.9 / 470.2 / 472.9, argmax 258.7 / 256.0 / 266.4, a dot
 * product (two arrays) 470.9 / 471.2 / 470.8: as fast at 2, which costs
 * NVRTC least (sum(x)'s persistent kernel, CPU ms, least of 9 compiles: 174
 * at 2, 196 at 4, 208 at 1, where NVVM unrolls the loop itself; the scalar
 * kernel 166).  REDJIT_VUNROLL (1, 2, 4 or 8) overrides it for sweeps. */
int cg_vunroll(void)
{
    const char *u = getenv("REDJIT_VUNROLL");
    int v = u ? atoi(u) : 0;
    if (v == 1 || v == 2 || v == 4 || v == 8) return v;
    return 2;
}

/* 16-byte loads of each array a lane of rj_kfusedv takes a tile
 * (rj_reduce.cuh, RJ_KVE): 0, the default, lets the kernel choose from its
 * accumulator's and key's sizes (4, the most, for f32 values and i32 keys:
 * 16 elements a lane).  Measured on the H200 (bench/sweep.sh REDJIT_KVT,
 * 2026-11-24, 2^26 f32 values, i32 keys, us at off / 2 / 4): one segment
 * 157.7 / 147.1 / 152.3, lengths 10..50 289.4 / 205.8 / 179.6, all of
 * length 3 289.7 / 208.6 / 219.9, rows of 1024 191.7 / 152.8 / 161.2;
 * with the keys checked once a lane and 8-byte slots (at 3 blocks an SM,
 * the same day): 161.7 / 146.5 / 148.7, 263.9 / 181.7 / 164.0, 279.3 /
 * 192.8 / 195.4, 189.8 / 153.0 / 154.6.  REDJIT_KVT (1, 2, 4 or 8)
 * overrides it for sweeps, and "off" (-1) keeps keyed passes on rj_kfused's
 * scalar loads. */
int cg_kvt(void)
{
    const char *u = getenv("REDJIT_KVT");
    if (u && strcmp(u, "off") == 0) return -1;
    int v = u ? atoi(u) : 0;
    return v == 1 || v == 2 || v == 4 || v == 8 ? v : 0;
}

/* rj_kfusedv issues a tile's loads as soon as the tile before it is
 * converted, so that they are in flight while it folds (RJ_KDB, 1 unless
 * REDJIT_KDB=0, for sweeps).  Measured on the H200 (2026-11-24, 2^26 f32
 * values, i32 keys, us for one segment / lengths 10..50 / all of length 3
 * / rows of 1024, two runs each): loaded when it comes, 3 blocks an SM,
 * 147.3-149.0 / 164.8-166.1 / 192.4-198.1 / 152.2-152.8; issued ahead,
 * 2 blocks an SM (cg_kminb()), 143.4-145.9 / 161.9-162.2 / 184.1-186.1 /
 * 144.7-146.8; issued ahead at 3 blocks an SM, 239.2 / 260.1 / 265.3 /
 * 257.7 (80 registers: it spilled); 8 elements a lane, 3 blocks an SM,
 * 143.1-144.3 / 163.4-164.7 / 180.8-182.0 / 144.5-149.1, but that spilled
 * for 8-byte values and for 12-byte accumulators.  Asking L2 for the
 * next tile (prefetch.global.L2, one or two tiles ahead) instead was
 * slower: 187.5 / 198.2 / 219.0 / 191.6 at one.  Tiles staged in dynamic
 * shared memory instead (2026-11-26, the same four cases, same calls,
 * registers 135.1-137.7 / 151.6-153.5 / 178.5-181.1 / 138.7-140.8):
 * cp.async, each lane its own vectors, two or three stages, 278.3-281.1 /
 * 291.8-298.7 / 307.0-314.4 / 288.4-290.8 (.cg fetched every sector
 * twice); cp.async coalesced across the warp (swizzled, no bank
 * conflict), 166.6-170.0 / 186.2-190.6 / 212.4-218.0 / 178.2-180.0 (ncu:
 * one segment 160 us, DRAM 69% busy, issue active 18%); the bulk copy
 * engine, a copy an array a tile on an mbarrier, two stages 137.1-138.5 /
 * 166.3-167.1 / 211.1-211.5 / 146.9-147.4, three (one block an SM)
 * 137.1-137.3 / 225.6-225.9 / 258.2-258.6 / 184.9-185.0.  Delivery was
 * never what held the short runs: their fold, at 16 warps an SM, is. */
int cg_kdb(void)
{
    const char *u = getenv("REDJIT_KDB");
    return !(u && strcmp(u, "0") == 0);
}

/* Blocks an SM rj_kfusedv is compiled for (__launch_bounds__): 2 allows
 * 128 registers, which its two tiles in flight (cg_kdb()) need: 96 to 119
 * for the kv_* cases' kernels, none spilling, where at 3 (80) they
 * spilled 12 to 238 bytes.  Loading each tile when it came, 3 did best
 * (H200, bench/sweep.sh REDJIT_KMINB, 2026-11-24, 2^26 f32 values, i32
 * keys; us at 3 / 4: one segment 151.0 / 152.1, lengths 10..50 179.5 /
 * 173.2 and 179.5 / 179.6, all of length 3 212.5 / 219.9, rows of 1024
 * 156.9 / 161.2).  REDJIT_KMINB (1 to 8) overrides it for sweeps. */
int cg_kminb(void)
{
    const char *u = getenv("REDJIT_KMINB");
    int v = u ? atoi(u) : 0;
    return v >= 1 && v <= 8 ? v : 2;
}

