// Word exchanges inside a quad of lanes (the four lanes of an mma accumulator row group).
#pragma once
#include <climits>
#include <cstdint>

#include "ffpa/tile/numeric.cuh"

namespace ffpa {

// The max / sum of a value over the quad of lanes holding one accumulator row (lanes 4 g .. 4 g + 3: each holds a
// quarter of the row's columns), by two butterfly shuffles. Every lane of the warp must call them.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

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

// Four b16-packed n8 tiles of a row (a[n]: tile 4 k + n, lane t4's columns 2 t4, 2 t4 + 1) as one
// 16-byte store a lane, after quad_transpose (every lane of the warp must call it).
template <typename Element>
__device__ __forceinline__ void store_quad_run(Element* dst_row, uint32_t (&a)[4], int k, int t4, bool row_valid,
                                               int col_limit = INT_MAX) {
  quad_transpose(a, t4);
  const int col = 8 * (4 * k + t4);
  if (row_valid && col < col_limit) *reinterpret_cast<uint4*>(dst_row + col) = make_uint4(a[0], a[1], a[2], a[3]);
}

// Row r (0: the quad's row g, 1: g + 8) of kNO n8 accumulator tiles (m16n8 layout: lane t4 holds
// columns 2 t4, 2 t4 + 1 of each), times `inv`, in b16 from `dst_row` (the tiles' first column; 16-byte
// aligned where kNO % 4 == 0). Tiles at or past `col_limit` columns are not stored (an n8 tile is all in
// or all out); nothing is stored where !row_valid, but every lane of the warp must call it. With kNO a
// multiple of 4 each lane stores 16 bytes (one tile, after quad_transpose): a quad writes 64
// contiguous bytes where one 4-byte store per tile left half sectors (session 21: +4-12% for the
// FA-2 Hopper kernel at D = 128..256, its store ~2000 cycles of a 16-tile item before). !kVector:
// the 4-byte stores (FFPA's wide consumers: the transpose's registers spilled at Dv = 640).
template <typename Element, int kNO, bool kVector = true>
__device__ __forceinline__ void store_acc_row(Element* dst_row, const float (&o)[kNO][4], int r, float inv, int t4,
                                              bool row_valid, int col_limit = INT_MAX) {
  using Num = Numeric<Element>;
  if constexpr (kVector && kNO % 4 == 0) {
#pragma unroll
    for (int k = 0; k < kNO / 4; ++k) {
      uint32_t a[4];
#pragma unroll
      for (int n = 0; n < 4; ++n) a[n] = Num::pack2(o[4 * k + n][2 * r] * inv, o[4 * k + n][2 * r + 1] * inv);
      store_quad_run(dst_row, a, k, t4, row_valid, col_limit);
    }
  } else if (row_valid) {
    uint32_t* dst = reinterpret_cast<uint32_t*>(dst_row + 2 * t4);
#pragma unroll
    for (int n = 0; n < kNO; ++n)
      if (8 * n < col_limit) dst[4 * n] = Num::pack2(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
  }
}

}  // namespace ffpa
