// Which keys a query row sees, at the granularities the forward kernels ask about: a block of
// query rows (the causal end of its key range), a key tile (skipped by the block map), a warp's
// strip of an S tile by each row's limit (mask_cut) and one (row, col) element. The FA-2
// (kernels/fa2_common.cuh, fa2_fwd_sm90_ws.cuh) and FFPA (kernels/ffpa_fwd_sm80.cuh) kernels
// use these, so the rule is written once. attn_mask's values themselves are read in
// attn/mask.cuh.
//
// The rule: key col is visible to query row r iff
//   col < len_kv  and  (not is_causal  or  col <= r + causal_offset),
// with causal_offset = 0 for SDPA's top-left convention and len_kv - len_q (S - L) for
// bottom-right. Rows, columns and the offset are plain ints (S, L < 2^31, no overflow). Masked
// scores become -inf before the base-2 online softmax (attn/softmax.cuh, attn/state.cuh).
// Torch-free; everything is inlined.
//
// The per-tile test "does this key tile need per-element masking" (kBlockPartial, past len_kv,
// or crossing row m0's causal limit) stays written out in each kernel: as a helper its bool
// crossed the inlined call as a byte, the kernels' branches on it were no longer threaded
// through the || chain, and the PTX changed.
#pragma once
#include <cstdint>
#include <math_constants.h>

#include "ffpa/params.h"

namespace ffpa::attn {

// ---- a block of query rows -------------------------------------------------------------------
// Exclusive end of the keys that rows [m0, m0 + rows) see: len_kv, or with causal the keys up to
// the block's last row's limit (m0 + rows - 1 + causal_offset), clamped to [0, len_kv]. 0 when
// no row sees a key (bottom-right with L > S).
__device__ __forceinline__ int block_kv_end(const FwdParams& p, int m0, int rows) {
  return p.is_causal ? max(0, min(p.len_kv, m0 + rows + p.causal_offset)) : p.len_kv;
}

// Key tiles [0, block_kv_tiles) of kBlockN keys can hold a key visible to rows [m0, m0 + rows).
template <int kBlockN>
__device__ __forceinline__ int block_kv_tiles(const FwdParams& p, int m0, int rows) {
  return (block_kv_end(p, m0, rows) + kBlockN - 1) / kBlockN;
}

// ---- the mask block map (kernels/mask_block_map.cuh) -------------------------------------------
// The codes (BlockCode) of query block m_block's key tiles for (batch, head); p.block_map must
// be set. The batch / head strides are 0 where attn_mask broadcasts.
__device__ __forceinline__ const uint8_t* block_map_row(const FwdParams& p, int batch, int head, int m_block) {
  return p.block_map + batch * p.block_map_batch_stride + head * p.block_map_head_stride +
         static_cast<int64_t>(m_block) * p.block_map_n_blocks;
}

// The first key tile at or after j, below n_end, that the block map does not skip (n_end when
// none is left). Skipped tiles are never loaded: the kernels' producers and consumers both walk
// the tiles through this, so they agree on the sequence.
__device__ __forceinline__ int skip_masked_tiles(const uint8_t* codes, int j, int n_end) {
  while (j < n_end && codes[j] == kBlockSkip) ++j;
  return j;
}

// ---- one element -------------------------------------------------------------------------------
// The rule above, element by element: a score s of (row, col) becomes -inf unless col is visible.
// row and col are taken by reference on purpose: with int arguments, NVVM canonicalises the
// compares of the helper before inlining it (operands that are arguments sort after loads), and
// the kernel's PTX came out with every compare's operands swapped; by reference they reach the
// compares as loads, which SROA turns back into the caller's values, and the code is what the
// hand-written condition gave. (A bool-returning "key_visible" was worse: the result crossed the
// inlined call as a byte and every element got a chain of selects.)
__device__ __forceinline__ void mask_invisible_key(float& s, const FwdParams& p, const int& row, const int& col) {
  if (col >= p.len_kv || (p.is_causal && col > row + p.causal_offset)) s = -CUDART_INF_F;
}

// The same rule as one limit per row: col (>= 0) is visible to row iff col <= last_visible_key.
// A kernel that masks a row's fragment elements subtracts its first column from this once and
// compares each element against an immediate.
__device__ __forceinline__ int last_visible_key(const FwdParams& p, int row) {
  int lim = p.len_kv - 1;
  if (p.is_causal) lim = min(lim, row + p.causal_offset);
  return lim;
}

// ---- a warp's strip of an S tile -----------------------------------------------------------------
// mask_cut: the m16 x (8 kNS) accumulator strip of a warp (this thread's rows row0 + g and row0 + g + 8, its
// columns 8 n + 2 t4 + c of the strip whose first key is n0): the scores past each row's last visible key to -inf,
// unscaled (a kernel leaves the scale to the exponent's FMA). The n8 tiles whose columns every row of the warp sees
// are skipped (a warp-uniform test against its first row's limit); the others compare each thread's two columns
// against its two rows' limits. Where a per-score path (scale, compare, select every score) served ragged and
// causal-diagonal tiles, this ran ViT-B's N = 197 at D = 64 15% faster on the FA-2 Hopper kernel's short-keys tile
// and 9% on its 128 x 128 one (session 54); the causal diagonals 9-10% at N = 197 / 256 and 4% at N = 1024 (D = 64),
// 1.5% at D = 128 N = 2048 (session 55, one H200: bench/results/h200_2026-11-28_s55_mask_cut_ab.txt). A third path
// (n8 tiles past the warp's greatest limit set at once) spilled 636-824 bytes there: two paths only.
template <int kNS>
__device__ __forceinline__ void mask_cut(float (&s)[kNS][4], const FwdParams& p, int row0, int g, int t4, int n0) {
  const int lo = last_visible_key(p, row0) - n0;
  const int lim0 = last_visible_key(p, row0 + g) - n0 - 2 * t4, lim1 = last_visible_key(p, row0 + g + 8) - n0 - 2 * t4;
#pragma unroll
  for (int n = 0; n < kNS; ++n) {
    if (8 * n + 7 <= lo) continue;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      s[n][c] = 8 * n + c > lim0 ? -CUDART_INF_F : s[n][c];
      s[n][2 + c] = 8 * n + c > lim1 ? -CUDART_INF_F : s[n][2 + c];
    }
  }
}

}  // namespace ffpa::attn
