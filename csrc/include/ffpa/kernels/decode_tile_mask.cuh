// attn_mask in the mma.sync split-KV decode kernel (kernels/decode_sm80.cuh): the mask rows of a
// thread's two packed rows, and the raw mask bits of a warp's scores loaded one KV tile ahead of their
// use (attn::mask_bits, converted by attn::mask_bits_log2 at the tile's start), so the loads' latency
// hides behind a whole tile. At the start of the tile itself they stood between the tile's Q K^T and
// its softmax: the short masked calls of a Hugging Face static cache are a few dependent round trips a
// tile. Unmasked calls skip both the loads and the conversion (a uniform branch on p.mask).
#pragma once
#include <cstdint>

#include "ffpa/attn/mask.cuh"
#include "ffpa/params.h"

namespace ffpa::kernels {

template <typename Traits>
struct DecodeTileMask {
  static constexpr int kSNTiles = Traits::kSNTiles;
  static constexpr int kWarpKeys = Traits::kWarpKeys;
  static constexpr int kQkChains = Traits::kQkChains;
  static constexpr int kBlockN = Traits::kBlockN;

  // attn_mask (optional, SDPA layout (B, Hq, Lq, S), broadcast dims stride 0): the byte address of
  // element (b, hq, lq, 0) of this thread's rows g and g + 8 (null: no mask or a padding row).
  struct Rows {
    const char* row[2];
  };

  // Packed row r of the block's KV head is query position r / group of query head
  // head_kv * group + r % group; rows at or past `rows` pad the block.
  static __device__ __forceinline__ Rows rows(const DecodeParams& p, int m0, int rows, int batch, int head_kv,
                                              int group, int g) {
    Rows m;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = m0 + g + 8 * r;
      m.row[r] = nullptr;
      if (p.mask != nullptr && row < rows) {
        const int64_t off = batch * p.mask_batch_stride + (head_kv * group + row % group) * p.mask_head_stride +
                            (row / group) * p.mask_row_stride;
        m.row[r] = static_cast<const char*>(p.mask) + off * attn::mask_elem_bytes(p.mask_kind);
      }
    }
    return m;
  }

  // The raw mask bits of this warp's scores of the tile at n0 (loads only; the neutral value where
  // there is no mask, the row pads or the key is past the range).
  static __device__ __forceinline__ void load_bits(const DecodeParams& p, const Rows& m, int n0, int n_end, int warp,
                                                   int t4, uint32_t (&bits)[kSNTiles][4]) {
    const uint32_t neutral = attn::mask_neutral_bits(p.mask_kind);
#pragma unroll
    for (int n = 0; n < kSNTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = n0 + kWarpKeys * warp + 8 * n + 2 * t4 + (e % 2);
        const char* row = m.row[e / 2];
        bits[n][e] = row != nullptr && key < n_end
                         ? attn::mask_bits(attn::MaskRef{row, p.mask_kind, 0, p.mask_col_stride}, 0, key)
                         : neutral;
      }
  }

  // The start of the KV tile at n0: zeroed S chains, the tile's base-2 additive mask (0 without a
  // mask) from the bits loaded a tile ago, and the next tile's bits issued into `ahead`.
  static __device__ __forceinline__ void begin_tile(const DecodeParams& p, const Rows& mrows, int n0, int n_end,
                                                    int warp, int t4, float (&s_part)[kQkChains][kSNTiles][4],
                                                    uint32_t (&ahead)[kSNTiles][4], float (&madd)[kSNTiles][4]) {
#pragma unroll
    for (int c = 0; c < kQkChains; ++c)
#pragma unroll
      for (int n = 0; n < kSNTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s_part[c][n][e] = 0.f;
#pragma unroll
    for (int n = 0; n < kSNTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) madd[n][e] = p.mask != nullptr ? attn::mask_bits_log2(p.mask_kind, ahead[n][e]) : 0.f;
    if (p.mask != nullptr) load_bits(p, mrows, n0 + kBlockN, n_end, warp, t4, ahead);
  }
};

}  // namespace ffpa::kernels
