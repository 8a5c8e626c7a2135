/*
 * cuda.h -- CUDA source generation: one self-contained source per plan pass
 * (no CUB or Thrust).  The source depends only on the pass, never on sizes:
 * sizes travel in a parameter block.  It is generated in two parts: the body
 * (the pass's element code, accumulator and the strategy templates) and the
 * entry kernels, in groups, each group the kernels one launch sequence needs
 * (tree: rj_block + rj_final, persistent: rj_persist, ...).  NVRTC's time grows
 * with every entry kernel, since each inlines the element code, so the runtime
 * compiles the body with one group at a time, the first time a run needs it.
 */
#ifndef RED_CG_CUDA_H
#define RED_CG_CUDA_H

#include "check/plan.h"
#include "tuning.h"

/* Parameter slots 0..CG_RESERVED-1 are the fixed ones of rj_prelude.cuh. */
#define CG_RESERVED 14
/* the first of rj_prelude.cuh's RJ_PUB, RJ_PUBN and RJ_SEQ */
#define CG_PUB 10
#define CG_BLOCK 256   /* threads a block: every kernel's RJ_BLOCK (the runtime's BLOCK) */
#define CG_SCAN_MINB 4  /* blocks an SM rj_scan is built for (RJ_SCAN_MINB) */
#define CG_SCANW_MINB 4 /* and rj_scanw and rj_scanwv, a warp a row (RJ_SCANW_MINB; the runtime counts their warps by it) */
#define CG_MAX_PARAMS 4000

typedef struct cg_layout {
    int nparams;
    int *buf_base;      /* per bound array: ptr, then shape[nd], strides[nd] */
    int *temp_base;     /* per temporary: the same                          */
    int *scalar_slot;   /* per scalar: its bits                             */
    int *var_lo, *var_sz;/* per variable: start and extent (uniform ones)   */
} cg_layout;

typedef struct cg_kernel {
    util_buf src;
    cg_layout lay;
    int kind;           /* CG_MAP, CG_FULL, CG_PARTIAL, CG_KEYED            */
    int acc_size;       /* bytes of the generated Acc (workspace partials)  */
    int acc_align;      /* and its alignment                                */
    int scan_items;     /* scan passes: elements a thread takes a tile (RJ_SCAN_ITEMS), */
    int scan_esize;     /* and bytes of an element's state (rj_scan.cuh's RjSA) */
    int ordered;        /* an ordered user operator is in the pass          */
    int arg;            /* argmin and argmax alone (RJ_FOLD_DIRECT)          */
    int ranged;         /* a reduced index has an explicit range            */
    int elem_checks;    /* subscripts acc_elem checks at every element      */
    /* The element code's loads from bound arrays, for the runtime's layout
     * test (src/gpu/strategy.c): per dimension, 1 when the subscript is a free index,
     * 2 a reduced index, 0 anything else.  At most CG_MAX_LOADS. */
    int nloads;
    struct {
        int slot;
        signed char dim[RED_MAX_DIMS];
    } loads[8];
    int loads_overflow; /* more loads than recorded                         */
    /* Contiguous reductions (acc_elem_v; rj_persistv for full ones, rj_seg1v
     * and rj_seg32v for the others; for keyed passes, with the key's loads
     * among the arrays, acc_one_v and key_v: rj_kendsv and rj_kfusedv): vec
     * elements of vec_esz bytes a 16-byte load from each of nvec arrays,
     * whose parameter blocks start at vec_base[], with vec_ndim[]
     * dimensions, the pass's vec_nred reduced
     * indices in dimensions vec_rdim[] .. vec_rdim[] + vec_nred - 1, in the
     * pass's order (the domain's flat order, the last index fastest);
     * reduced index k starts at parameter vec_lo[k] and runs over
     * vec_sz[k] values.  The runtime takes the kernels only where those
     * dimensions make one contiguous run in every array (vec_ok).  vec is 0
     * where the pass does not qualify. */
    int vec, vec_esz, nvec, vec_nred;
    int vec_lo[RED_MAX_DIMS], vec_sz[RED_MAX_DIMS];
    int vec_unroll;     /* RJ_VUNROLL: vectors of each array a batch loads  */
    int vec_base[8], vec_ndim[8], vec_rdim[8];
    /* vec_bc: a pass over several reduced indices whose loads need not all
     * run over every one of them (rows broadcast, as x[i] and y[j] in
     * sum(x[i]*K[i,j]*y[j]) over i, j): a vector's elements differ in the
     * last reduced index alone (the runtime takes it where that index's
     * extent is a multiple of vec), and vec_kind[] says how each array is
     * read: CG_V_FULL a 16-byte load at the flat position (as without
     * vec_bc), CG_V_LAST subscripted by the last reduced index (in
     * dimension vec_rdim[], stride 1) and free indices, a 16-byte load at
     * that index; CG_V_ONE by free and other reduced indices, one element
     * a vector */
    int vec_bc;
    signed char vec_kind[8];
    /* rj_seg1a (CG_G_SEG1A): a partial pass over one ranged index whose
     * arrays (vec_base[], one dimension each) are loaded at that index
     * alone; vec is set, but not for rj_seg1v and the like.  The runtime
     * takes it where they have stride 1 and start on 16 bytes; rj_seg1s
     * (CG_G_SEG1S, acc_one_s), for short rows, where they have stride 1. */
    int rvec;
    /* the next pass runs inside this one's kernels (epilogue.c, epi_out):
     * 1 one element an output, 2 the output's domain; 0 none */
    int epi;
    /* epi 2 over 16-byte vectors too (epi_out_v): the map's loads that vary
     * along the row are among the pass's vector loads, and the result has
     * elements of vec_esz bytes, its last dimension the reduced index.  The
     * runtime takes it where the result's rows start on 16 bytes (its
     * parameters at epi_base, epi_ndim dimensions) and vec_ok holds. */
    int epi_vec, epi_base, epi_ndim;
    /* epi_out_s and acc_stage_v too (a partial pass with epi_vec): rj_segbs,
     * a block a row staged in shared memory (CG_G_SEGBS) */
    int epi_staged;
    /* rj_segm and rj_segmf (CG_G_SEGM): CSR rows along the merge path
     * (range.c, merge_pass); out_range leaves the raw end in sz[RJ_NRED].
     * Such passes also have rj_seg32d and rj_segl (CG_G_SEG32D): a warp a
     * row under the tree strategy, long rows a block each */
    int merge;
    /* rj_tile (CG_G_TILE, tile.c): a partial pass whose operand has parts that
     * read along the reduced indices alone, staged in shared memory a tile at
     * a time and reused by a block's outputs */
    int tile;
    /* rj_tile2 (CG_G_TILE2, tile.c): a contraction's two sides staged, a
     * register tile of tile2 x tile2 outputs a thread; 0 none.  The
     * extents of its i and j are parameters t2_ni and t2_nj. */
    int tile2, t2_ni, t2_nj;
    /* gemm (cg_find_gemm, gemm.c): the pass is a matrix product or a batch of
     * them, C[b,i,j] = sum(A[b,i,k]*B[b,k,j]) over k with A, B and C of the
     * accumulator's type (gemm: CT_F32 or CT_F64, + 1; 0 not one), which
     * src/gpu/blas.c may hand to cuBLASLt where the layouts allow.  Parameter
     * blocks of A, B (loads) and C (the result) at gm_base[0..2], with
     * gm_nd[] dimensions; gm_dim[s][0..3] the dimension of each array that
     * b, i, j, k subscript (-1: not there, and never b where there is no
     * batch); gm_sz[] and gm_lo[] the parameters of b, i, j, k's extents and
     * starts (b's -1 where there is no batch). */
    int gemm;
    int gm_base[3], gm_nd[3];
    signed char gm_dim[3][4];
    int gm_sz[4], gm_lo[4];
} cg_kernel;

enum { CG_MAP, CG_FULL, CG_PARTIAL, CG_KEYED, CG_SCAN };
enum { CG_V_FULL, CG_V_LAST, CG_V_ONE };   /* cg_kernel.vec_kind */

/* A scan pass's dynamic shared memory: rj_scan's two tiles of element states,
 * or (warps nonzero) rj_scanw's one share of a tile a warp. */
long long cg_scan_smem(const cg_kernel *k, int warps);
/* The elements of one of rj_scanlv's tiles (8 warps of RJ_SCANLV_M stripes of 32
 * vectors), 0 where the pass has no 16-byte loads. */
long long cg_scanlv_tile(const cg_kernel *k);
/* And its scratch (rj_scan.cuh): the ticket, then the published folds of ntiles
 * tiles and ngroups groups (none where blocks take whole rows). */
long long cg_scan_scratch(const cg_kernel *k, long long ntiles, long long ngroups);

/* Generate the source for pass `pi` with tuning `t` (cg_tuning_get() for the
 * process's): a function of the plan and `t` alone, whose RJ_* #defines show
 * the values used.  Allocations for the layout come from `a`; the source
 * buffer must be freed with util_buf_free. */
int cg_generate(const plan *p, int pi, const cg_tuning *t, util_arena *a, cg_kernel *out, util_diag *diag);

/* Entry-kernel groups.  cg_group_of gives the group that defines `entry`
 * ("rj_persist", ...; the first of them for rj_final, which closes both the
 * tree and the sequential groups), or -1; cg_group_has whether `group`
 * defines `entry`; cg_group_usable says whether a group belongs in
 * a module of the pass `k` (its kind, and for rj_persistv k->vec); cg_add_group appends a group's kernels to a
 * body made by cg_generate.  CG_ALL_GROUPS: every usable group at once (for
 * red_precompile and red_explain). */
enum { CG_G_MAP, CG_G_TREE, CG_G_SEQ, CG_G_PERSIST, CG_G_PERSISTV, CG_G_SEG1, CG_G_SEG32, CG_G_SEG1V, CG_G_SEG32V, CG_G_SEGB, CG_G_COUNT,
       CG_G_KSORTED, CG_G_KOFFS, CG_G_KPRIV, CG_G_SPLIT1, CG_G_SPLITB, CG_G_KSORTEDV, CG_G_SEGBV, CG_G_SEG1A, CG_G_SEG1S, CG_G_SEGNV, CG_G_SPLITBV, CG_G_SEGM, CG_G_SEGBS, CG_G_TILE, CG_G_TILE2, CG_G_SCAN, CG_G_SCANW, CG_G_SCANWV, CG_G_SCANLV, CG_G_SEG32D, CG_NGROUPS, CG_ALL_GROUPS = -1 };
int cg_group_of(const char *entry);
int cg_group_has(int group, const char *entry);
int cg_group_usable(int group, const cg_kernel *k);
void cg_add_group(util_buf *o, int group, const cg_kernel *k);

/* The generated source of each pass of `p` with tuning `t` (every usable
 * entry group, the device helpers elided), appended to `out`: red_explain's
 * listing. */
int cg_explain(const plan *p, const cg_tuning *t, util_buf *out, util_diag *diag);

/* The embedded device helpers (generated at build time from the .cuh files
 * of src/codegen/device by cmake/embed.cmake): the prelude, which every
 * source starts with, and the strategies, pasted after the generated part
 * of a reduction pass in the order of cg_strategy_files (NULL-terminated). */
extern const char rj_prelude_cuh[];
typedef struct cg_device_file {
    const char *name, *text;
} cg_device_file;
extern const cg_device_file cg_strategy_files[];

#endif
