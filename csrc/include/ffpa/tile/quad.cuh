// Word exchanges inside a quad of lanes (the four lanes of an mma accumulator row group).
#pragma once
#include <cstdint>

namespace ffpa {

// One butterfly stage of quad_transpose: lane j swaps its words n whose bit `s` differs from j's
// with lane j ^ s's words n ^ s (two shuffles, selects, no register indexing).
template <int s>
__device__ __forceinline__ void quad_transpose_stage(uint32_t (&a)[4], int lane_in_quad) {
  constexpr int lo0 = 0, lo1 = s == 1 ? 2 : 1;  // the indices with bit s clear
  constexpr int hi0 = s == 1 ? 1 : 2, hi1 = 3;  // and set
  const bool b = (lane_in_quad & s) != 0;
  uint32_t v0 = b ? a[lo0] : a[hi0];
  uint32_t v1 = b ? a[lo1] : a[hi1];
  v0 = __shfl_xor_sync(0xffffffffu, v0, s);
  v1 = __shfl_xor_sync(0xffffffffu, v1, s);
  if (b) {
    a[lo0] = v0, a[lo1] = v1;
  } else {
    a[hi0] = v0, a[hi1] = v1;
  }
}

// The 4 x 4 words of a quad transposed: lane j's a[n] becomes lane n's a[j]. An accumulator row's
// four n8 tiles (lane j: columns 2j, 2j + 1 of each) become one tile per lane (lane j: all 8 columns of
// tile j, 16 contiguous bytes in b16), so the row is written with one 16-byte store a lane. Every
// lane of the warp must call it (full-mask shuffles).
__device__ __forceinline__ void quad_transpose(uint32_t (&a)[4], int lane_in_quad) {
  quad_transpose_stage<1>(a, lane_in_quad);
  quad_transpose_stage<2>(a, lane_in_quad);
}

}  // namespace ffpa
