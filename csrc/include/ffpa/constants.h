// Numeric and launch constants shared by host and device code, defined once. Torch-free.
#pragma once

namespace ffpa {

// Softmax runs in base 2 (ex2.approx): scores are scaled by log2(e) on the way in, and the LSE is
// turned back into a natural log by ln(2) on the way out.
constexpr double kLog2eD = 1.4426950408889634;
constexpr float kLog2e = static_cast<float>(kLog2eD);
constexpr float kLn2 = 0.6931471805599453f;

// CUDA's limit on gridDim.y and gridDim.z: query heads and mask (batch, head) slices map there,
// and batches are launched in slices of at most this many (launch/grid.cuh). The Python layer
// routes calls beyond it to SDPA (ffpa_attn/_routing.py reads it from build_info()["limits"]).
constexpr int kMaxGridYZ = 65535;

// The fused split-KV merge (kernels/decode_merge.cuh decode_merge_rows) reads a row's splits this
// many at a time, for a number of (row, 4 columns) units a thread at once: 2 in the narrow MLA kernel
// (one block per SM, registers to spare: 153 -> 192 with it), 1 in the mma.sync kernel (two units took
// its D = 128 variant with the mask prefetch to 169 registers, one past what keeps 3 blocks per SM).
// The launchers' choice of that merge (launch/heuristics.h) counts its rounds.
constexpr int kFusedMergeBatch = 8;
constexpr int kFusedMergeUnitsNarrow = 2;
constexpr int kFusedMergeUnitsSync = 1;

// Decode blocks that take their sequences longest first (kernels/decode_grid.cuh
// decode_longest_first_batch) rank the lengths in shared memory: at most this many sequences (the
// launchers' choice, launch/heuristics.h, and the kernels' scratch, asserted, hold to it).
constexpr int kDecodeLongestFirstMaxBatch = 256;

}  // namespace ffpa
