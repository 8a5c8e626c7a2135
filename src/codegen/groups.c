/*
 * groups.c -- the entry kernels and their groups: each group the kernels one
 * launch sequence needs, appended to a pass's body only when a run needs it,
 * since NVRTC's time grows with every entry kernel.
 */
#include "cuda.h"

#include <string.h>

/* The entry kernels (the map pass's one is in its body) and their groups (see
 * cuda.h).  rj_final closes both the tree and the sequential strategy, so it
 * is in both groups. */
static const struct {
    const char *name, *src;
} entries[] = {
    {"rj_block", "RJ_ENTRY rj_block(Params P) { rj_full_block_stage(P, blockIdx.x); }\n"},
    {"rj_final", "RJ_ENTRY rj_final(Params P) { rj_full_final(P); }\n"},
    {"rj_seq", "RJ_ENTRY rj_seq(Params P) { rj_full_seq_stage(P); }\n"},
    {"rj_persist", "RJ_ENTRY rj_persist(Params P) { rj_full_persistent(P); }\n"},
    {"rj_persistv", "RJ_ENTRY rj_persistv(Params P) { rj_full_persistent_vec(P); }\n"},
    {"rj_seg1", "RJ_ENTRY rj_seg1(Params P) { rj_segmented(P, 1); }\n"},
    {"rj_seg32", "RJ_ENTRY rj_seg32(Params P) { rj_segmented(P, 32); }\n"},
    {"rj_seg1v", "RJ_ENTRY rj_seg1v(Params P) { rj_segmented_vec(P, 1); }\n"},
    {"rj_seg32v", "RJ_ENTRY rj_seg32v(Params P) { rj_segmented_vec(P, 32); }\n"},
    {"rj_segnv", "RJ_ENTRY rj_segnv(Params P) { rj_segmented_vec_lanes(P); }\n"},
    {"rj_segbv", "RJ_ENTRY rj_segbv(Params P) { rj_segmented_vec_block(P); }\n"},
    {"rj_seg1a", "RJ_ENTRY rj_seg1a(Params P) { rj_segmented_ranged_vec(P); }\n"},
    {"rj_seg1s", "RJ_ENTRY rj_seg1s(Params P) { rj_segmented_ranged_s(P); }\n"},
    {"rj_segb", "RJ_ENTRY rj_segb(Params P) { rj_segmented(P, RJ_BLOCK); }\n"},
    /* a warp a CSR row under the tree strategy, long rows left to rj_segl */
    {"rj_seg32d", "RJ_ENTRY rj_seg32d(Params P) { rj_segmented(P, 32, true); }\n"},
    {"rj_segl", "RJ_ENTRY rj_segl(Params P) { rj_segmented_list(P); }\n"},
    {"rj_count", "RJ_ENTRY rj_count(Params P) { rj_count_all(P); }\n"},
    {"rj_kends", "RJ_ENTRY rj_kends(Params P) { rj_key_ends(P); }\n"},
    {"rj_kscan", "RJ_ENTRY rj_kscan(Params P) { rj_key_scan(P); }\n"},
    {"rj_koffs", "RJ_ENTRY rj_koffs(Params P) { rj_key_offsets(P); }\n"},
    /* at most 64 registers: four blocks an SM, as many as its shared memory holds */
    {"rj_kfused", "extern \"C\" __global__ void __launch_bounds__(RJ_BLOCK, 4) rj_kfused(Params P) { rj_key_fused<false>(P); }\n"},
    /* the same two over 16-byte loads (vec_ok): a group of their own, so
     * that a pass compiles one of the two fused kernels, not both */
    {"rj_kendsv", "RJ_ENTRY rj_kendsv(Params P) { rj_key_ends(P); }\n"},
    {"rj_kfusedv", "extern \"C\" __global__ void __launch_bounds__(RJ_BLOCK, RJ_KMINB) rj_kfusedv(Params P) { rj_key_fused<true>(P); }\n"},
    {"rj_kpriv", "RJ_ENTRY rj_kpriv(Params P) { rj_keyed_private(P); }\n"},
    {"rj_kcomb", "RJ_ENTRY rj_kcomb(Params P) { rj_keyed_combine(P); }\n"},
    {"rj_split1", "RJ_ENTRY rj_split1(Params P) { rj_split_threads(P); }\n"},
    {"rj_splitb", "RJ_ENTRY rj_splitb(Params P) { rj_split_blocks(P); }\n"},
    {"rj_splitf", "RJ_ENTRY rj_splitf(Params P) { rj_split_final(P); }\n"},
    {"rj_splitbv", "RJ_ENTRY rj_splitbv(Params P) { rj_split_blocks_vec(P); }\n"},
    {"rj_segm", "extern \"C\" __global__ void __launch_bounds__(RJ_BLOCK, RJ_SEGM_MINB) rj_segm(Params P) { rj_merge_rows(P); }\n"},
    {"rj_segmf", "RJ_ENTRY rj_segmf(Params P) { rj_merge_fix(P); }\n"},
    {"rj_segbs", "RJ_ENTRY rj_segbs(Params P) { rj_segmented_staged(P); }\n"},
    {"rj_tile", "RJ_ENTRY rj_tile(Params P) { rj_tile_run(P); }\n"},
    /* two blocks an SM: one stages while the other folds (at most 128 registers) */
    /* RJ_SCAN_MINB blocks an SM at least: a block waits while its first warp looks back */
    {"rj_scan", "extern \"C\" __global__ void __launch_bounds__(RJ_SCAN_THREADS, RJ_SCAN_MINB) rj_scan(Params P) { rj_scan_run(P); }\n"},
    /* a warp a row, no look-back warp: RJ_SCANW_MINB blocks an SM (both) */
    {"rj_scanw", "extern \"C\" __global__ void __launch_bounds__(RJ_BLOCK, RJ_SCANW_MINB) rj_scanw(Params P) { rj_scan_warps(P); }\n"},
    /* the same over 16-byte loads, all in registers (no shared memory) */
    {"rj_scanwv", "extern \"C\" __global__ void __launch_bounds__(RJ_BLOCK, RJ_SCANW_MINB) rj_scanwv(Params P) { rj_scan_warps_v(P); }\n"},
    /* the look-back over 16-byte loads, two tiles in registers: RJ_SCANLV_MINB blocks an SM */
    {"rj_scanlv", "extern \"C\" __global__ void __launch_bounds__(RJ_SCAN_THREADS, RJ_SCANLV_MINB) rj_scanlv(Params P) { rj_scan_run_v(P); }\n"},
    {"rj_tile2", "extern \"C\" __global__ void __launch_bounds__(RJ_BLOCK, 2) rj_tile2(Params P) { rj_tile2_run(P); }\n"},
};

static const char *const group_entries[CG_NGROUPS] = {   /* names, each NUL-terminated */
    [CG_G_MAP] = "rj_map\0",
    [CG_G_TREE] = "rj_block\0rj_final\0",
    [CG_G_SEQ] = "rj_seq\0rj_final\0",
    [CG_G_PERSIST] = "rj_persist\0",
    [CG_G_PERSISTV] = "rj_persistv\0",
    [CG_G_SEG1] = "rj_seg1\0",
    [CG_G_SEG32] = "rj_seg32\0",
    [CG_G_SEG1V] = "rj_seg1v\0",
    [CG_G_SEG32V] = "rj_seg32v\0",
    [CG_G_SEGB] = "rj_segb\0",
    [CG_G_COUNT] = "rj_count\0",
    [CG_G_KSORTED] = "rj_kends\0rj_kfused\0",
    [CG_G_KOFFS] = "rj_koffs\0",
    [CG_G_KPRIV] = "rj_kscan\0rj_kpriv\0rj_kcomb\0",
    [CG_G_SPLIT1] = "rj_split1\0rj_splitf\0",
    [CG_G_SPLITB] = "rj_splitb\0rj_splitf\0",
    [CG_G_KSORTEDV] = "rj_kendsv\0rj_kfusedv\0",
    [CG_G_SEGBV] = "rj_segbv\0",
    [CG_G_SEG1A] = "rj_seg1a\0",
    [CG_G_SEG1S] = "rj_seg1s\0",
    [CG_G_SEGNV] = "rj_segnv\0",
    [CG_G_SPLITBV] = "rj_splitbv\0rj_splitf\0",
    [CG_G_SEGM] = "rj_segm\0rj_segmf\0",
    [CG_G_SEG32D] = "rj_seg32d\0rj_segl\0",
    [CG_G_SEGBS] = "rj_segbs\0",
    [CG_G_TILE] = "rj_tile\0rj_splitf\0",
    [CG_G_TILE2] = "rj_tile2\0",
    [CG_G_SCAN] = "rj_scan\0",
    [CG_G_SCANW] = "rj_scanw\0",
    [CG_G_SCANWV] = "rj_scanwv\0",
    [CG_G_SCANLV] = "rj_scanlv\0",
};

int cg_group_has(int group, const char *entry)
{
    if (group < 0 || group >= CG_NGROUPS) return 0;
    for (const char *n = group_entries[group]; *n; n += strlen(n) + 1)
        if (strcmp(n, entry) == 0) return 1;
    return 0;
}

int cg_group_of(const char *entry)
{
    for (int g = 0; g < CG_NGROUPS; g++)
        if (cg_group_has(g, entry)) return g;
    return -1;
}

int cg_group_usable(int group, const cg_kernel *k)
{
    int kind = k->kind;
    if (group < 0 || group >= CG_NGROUPS) return 0;
    if (kind == CG_MAP) return group == CG_G_MAP;
    if (kind == CG_SCAN || group == CG_G_SCAN || group == CG_G_SCANW || group == CG_G_SCANWV || group == CG_G_SCANLV)
        return kind == CG_SCAN && (group == CG_G_SCAN || group == CG_G_SCANW ||
                                   ((group == CG_G_SCANWV || group == CG_G_SCANLV) && k->vec > 0));
    if (group == CG_G_MAP) return 0;
    if (group == CG_G_PERSISTV) return k->vec > 0 && kind == CG_FULL;
    if (group == CG_G_SEG1V || group == CG_G_SEG32V || group == CG_G_SEGBV || group == CG_G_SEGNV ||
        group == CG_G_SPLITBV)
        return k->vec > 0 && kind == CG_PARTIAL && !k->rvec;
    if (group == CG_G_SEG1A || group == CG_G_SEG1S) return k->rvec;
    if (group == CG_G_SEGM || group == CG_G_SEG32D) return k->merge;
    if (group == CG_G_SEGBS) return k->epi_staged;
    if (group == CG_G_TILE) return k->tile;
    if (group == CG_G_TILE2) return k->tile2 > 0;
    if (group == CG_G_KSORTEDV) return k->vec > 0 && kind == CG_KEYED;
    if (group == CG_G_KSORTED || group == CG_G_KOFFS || group == CG_G_KPRIV) return kind == CG_KEYED;
    if (group == CG_G_SPLIT1 || group == CG_G_SPLITB) return kind == CG_PARTIAL || kind == CG_KEYED;
    return 1;
}

void cg_add_group(util_buf *o, int group, const cg_kernel *k)
{
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        int mine = 0;
        if (group == CG_ALL_GROUPS) {
            mine = cg_group_usable(cg_group_of(entries[i].name), k);
        } else if (cg_group_usable(group, k)) {
            for (const char *n = group_entries[group]; *n && !mine; n += strlen(n) + 1)
                mine = strcmp(n, entries[i].name) == 0;
        }
        if (mine) util_buf_puts(o, entries[i].src);
    }
}

