/*
 * tuning.h -- the GPU runtime's tuning as data: one struct of the values its decisions take,
 * with their defaults, filled once per process from the documented REDJIT_* overrides
 * (bench/TUNING.md, "Environment overrides").  Nothing else in src/gpu reads the environment
 * except kcache.c, whose REDJIT_CACHE* are user settings.
 */
#ifndef RED_GPU_TUNING_H
#define RED_GPU_TUNING_H

typedef struct gpu_tuning {
    /* Persistent full reductions: grids of this many occupancy waves; 0: the rule in
     * gpu_run_full (three where a block of three waves has 16384 elements or more, else one).
     * REDJIT_WAVES, 1 to 16. */
    int waves;
    /* Auto's segment kernels, by average row length (gpu_choose_segments, gpu_run_segments):
     * a block per contiguous row (rj_segbv) from segbv_min elements, rather than a warp;
     * 16-byte loads inside a CSR row (rj_seg1a) from seg1a_min.  REDJIT_SEGBV_MIN and
     * REDJIT_SEG1A_MIN; 0 there turns the kernel off (1e300). */
    double segbv_min, seg1a_min;
    int seg1s;          /* REDJIT_SEG1S=0: rj_seg1 instead of rj_seg1s for short CSR rows */
    int segnv;          /* REDJIT_SEGNV: rj_segnv's most lanes a row; under 4: rj_seg1v */
    /* REDJIT_SEGBS_MAX: the most bytes of a long row (every array the reduction reads)
     * that rj_segbs stages in shared memory when an epilogue reads the row again; 0:
     * never (rj_segbv, the epilogue reading the row from L2 or memory) */
    long long segbs_max;
    /* REDJIT_TILE_MIN: the average number of reduced elements an output from which auto
     * takes rj_tile for a pass with staged parts (cg_kernel.tile); 0 or less: never */
    double tile_min;
    /* REDJIT_TILE2_KMIN: the fewest reduced elements an output for rj_tile2 (default 1) */
    double tile2_kmin;
    /* REDJIT_EPI=0: a map over a reduction's results runs as a pass of its own, never
     * inside the reduction's kernel (rj_epilogue), for comparing the two. */
    int epi;
    /* REDJIT_MERGE=0: CSR rows (cg_kernel.merge) under auto and segmented by the row kernels
     * gpu_choose_segments picks, not along the merge path (rj_segm), for comparing them. */
    int merge;
    double merge_min;   /* REDJIT_MERGE_MIN: auto's merge path from this average row length */
    /* REDJIT_TREE_LONG: under the tree strategy, a warp a CSR row (cg_kernel.merge) leaves
     * rows of more than this many elements to a block each (rj_seg32d, rj_segl); 0 or less:
     * never (1e300) */
    double tree_long;
    /* REDJIT_SCANLV=0: a scan's look-back through shared memory (rj_scan) even where its
     * arrays allow 16-byte loads (rj_scanlv), for comparing the two. */
    int scanlv;
    /* REDJIT_NVRTC_OPTS: up to 4 more NVRTC options, separated by spaces ("" none). */
    char nvrtc_opts[256];
    /* REDJIT_DUMP_CUBIN: the folder each compiled kernel's source and cubin go to ("" none). */
    char dump_cubin[1024];
} gpu_tuning;

/* The process's tuning, filled on first use. */
const gpu_tuning *gpu_tuning_get(void);

#endif
