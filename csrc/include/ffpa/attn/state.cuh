// The online-softmax state of one query row, in base 2 (scores already multiplied by
// scale * log2(e)): running max m, running sum l (relative to m), and the output accumulator the
// caller keeps beside them. The guards live here once: a row whose keys so far are all masked
// keeps m = -inf and exponentiates against 0 (never -inf - -inf = NaN); a row with l = 0 finishes
// with output 0 and LSE -inf. Shared by the FA-2, FFPA and decode kernels and the split merge.
#pragma once
#include <math_constants.h>

#include "ffpa/constants.h"
#include "ffpa/ptx/math.cuh"

namespace ffpa::attn {

// The max a row exponentiates against: m, or 0 while m is -inf (every score so far masked).
__device__ __forceinline__ float exp_base(float m) { return m == -CUDART_INF_F ? 0.f : m; }

// Fold a tile whose row max is tile_max (base 2) into (row_max, row_sum): returns alpha, the factor
// the row's output accumulator and sum are rescaled by (row_sum is rescaled here), and sets neg_m,
// the offset the tile's P = exp2(s + neg_m) uses.
__device__ __forceinline__ float online_update(float& row_max, float& row_sum, float tile_max, float& neg_m) {
  const float m_new = fmaxf(row_max, tile_max);
  const float m_use = exp_base(m_new);
  const float alpha = ptx::ex2_approx_ftz(row_max - m_use);
  row_max = m_new;
  row_sum *= alpha;
  neg_m = -m_use;
  return alpha;
}

// The lazy form (FlashAttention-4's idea): the max a row exponentiates against moves only when a
// tile's max exceeds it by more than `slack` (base 2), so P = exp2(s - m) stays <= 2^slack and,
// once a row's max has settled near its final value, tiles rescale nothing: the kernels skip a
// warp's O *= alpha whenever every alpha of the warp is 1. O, the row sum and the LSE (m + log2 l)
// are exact either way (they are all relative to the same m); P in b16 keeps its relative precision
// at any magnitude. slack = 0 is the eager update above. Not for FP8's P (e4m3 tops out at 448).
constexpr float kLazyMaxSlack = 8.f;
__device__ __forceinline__ float online_update_lazy(float& row_max, float& row_sum, float tile_max, float& neg_m,
                                                    float slack = kLazyMaxSlack) {
  if (slack == 0.f) return online_update(row_max, row_sum, tile_max, neg_m);  // a constant at every call: folded
  const bool move = tile_max > row_max + slack;  // also when row_max is -inf and tile_max is not
  const float alpha = move ? ptx::ex2_approx_ftz(row_max - tile_max) : 1.f;
  if (move) row_max = tile_max;
  row_sum *= alpha;
  neg_m = -exp_base(row_max);
  return alpha;
}

// 1 / l for the final normalisation; 0 for a row that saw no key (its output is 0, not NaN).
__device__ __forceinline__ float inv_row_sum(float l) { return l > 0.f ? 1.f / l : 0.f; }

// The base-2 LSE of a finished row (m + log2 l), -inf when it saw no key.
__device__ __forceinline__ float row_lse2(float m, float l) { return l > 0.f ? m + __log2f(l) : -CUDART_INF_F; }

// The natural-log LSE the API returns.
__device__ __forceinline__ float row_lse(float m, float l) {
  return l > 0.f ? (m + __log2f(l)) * kLn2 : -CUDART_INF_F;
}

// Merging partial results over disjoint key sets, each normalised with base-2 LSE lse2: the weight
// of one part against the parts' max LSE; a part with LSE -inf (no key) weighs 0 and, when every
// part is empty (max -inf), so does each (the merged row is 0 with LSE -inf).
__device__ __forceinline__ float merge_weight(float lse2, float max_lse2) {
  return lse2 == -CUDART_INF_F ? 0.f : ptx::ex2_approx_ftz(lse2 - max_lse2);
}

}  // namespace ffpa::attn
