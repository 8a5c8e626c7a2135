// rj_abi.h -- the host/device ABI of redjit's kernels: the reserved slots of the parameter
// block and the layout of a run's workspace and of its publish area.  Valid as C and as CUDA
// (only #defines and comments): the GPU runtime includes it, and it is embedded ahead of
// rj_prelude.cuh in every generated kernel, so both sides read the same numbers.
#ifndef RJ_ABI_H
#define RJ_ABI_H

// Reserved parameter slots (the generated code fills the rest, from RJ_NRESERVED on).
#define RJ_N        0   // elements in the linear domain (full reductions)
#define RJ_NOUT     1   // output elements
#define RJ_PARTIALS 2   // device pointer: per-block Acc partials
#define RJ_COUNTER  3   // device pointer: unsigned, last-block ticket
#define RJ_ERR      4   // device pointer: unsigned long long[4] error record
#define RJ_PER      5   // elements per block (tree, persistent) or per thread;
                        // scans: 0 the look-back, 1 a block a row, 2 a warp a row
#define RJ_NBLK     6   // blocks whose partials the final combine reads
#define RJ_KEYMODE  7   // keyed passes: 0 whole domain, 1 segment per key via offs
#define RJ_OFFS     8   // device pointer: long long[nkeys + 1] segment starts
#define RJ_KSTATS   9   // device pointer: long long[3] min key, max key, sorted
#define RJ_PUB     10   // mapped host pointer (0: none): the run's last kernel
                        // copies the workspace there, then the sequence number
#define RJ_PUBN    11   // 8-byte words of the workspace to copy
#define RJ_SEQ     12   // the run's sequence number, written after them
#define RJ_EPION   13   // nonzero: the pass's kernels run the next pass per output
                        // (RJ_EPI, rj_epilogue)
#define RJ_NRESERVED 14

// A run's workspace (one device buffer; RJ_ERR, RJ_COUNTER and RJ_KSTATS point into it),
// byte offsets.  Its first 40 bytes, the key flag word and RJ_WS_RFAULT must be zero when
// a run starts.
#define RJ_WS_ERR      0    // the fault record: code, node, dimension, value
#define RJ_WS_ERR_BYTES 32
#define RJ_WS_COUNTER  32   // the persistent grid's ticket (RJ_COUNTER)
#define RJ_WS_KSTATS   64   // key statistics (RJ_KSTATS): min key, max key, flag
#define RJ_WS_KFLAG    80   // the key statistics' third word: sorted / flag raised
#define RJ_WS_KSTATS_BYTES 24
#define RJ_WS_MFLAG    96   // rj_segm's flag (offsets it cannot follow), zeroed before each
#define RJ_WS_RFAULT   104  // a split run's: the largest fault code of its ranks, written
                            // by a collective with its last pass's partials
#define RJ_WS_HEAD     128  // the run's small host-bound results from here, 16-byte aligned
#define RJ_WS_BYTES    4096 // the workspace's size

// The publish area (RJ_PUB points at its sequence word): rj_publish writes the
// workspace's image after the sequence number's word, then the number.
#define RJ_PUB_SEQ     56   // the sequence number's word, from the area's start
#define RJ_PUB_IMAGE   64   // the workspace's image (RJ_PUB_SEQ + 8)

// rj_tile: the outputs a thread takes (RJ_BLOCK apart), each staged part read from shared
// memory once for all of them; a block's outputs are RJ_BLOCK * RJ_TILE_OUTS.
#define RJ_TILE_OUTS   4

#endif
