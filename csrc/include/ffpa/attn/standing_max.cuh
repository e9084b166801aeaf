// The standing max (#15, session 49): a key tile's P computed against each row's max as it stands, without the
// tile's own row max (the 64-FMNMX tree, two shuffle rounds and the update: a quarter of a D = 128 softmax's
// instructions and the head of its dependency chain; docs/hopper_profile.md session 49 measured +6-13% at
// D = 64 / 128 without it). The lazy max (attn/state.cuh) already lets P exceed 1; here nothing bounds P before
// it is computed, so the tile's partial row sums, computed anyway, are tested once after it:
//   every partial sum <= the bound (StandingMaxB16): done (P <= the bound, b16 and fp32 carry it; alpha = 1);
//   else, no P infinite: the lazy update after the fact, by a power of two (settle_rows: P, the sum and O scaled
//     by 2^-k, the max raised by k) - exact, S not needed;
//   else (a score 128 or more above the standing max, base 2: P overflowed): S again from global memory
//     (recompute_s_strip, slow and rare) and the caller's exact path.
// NaN scores pass the test (NaN > bound is false) and propagate as they do through the exact path.
// A warp takes the standing max only once each of its rows has a finite max (its first visible tile ran the
// exact path). The bound and offsets are a policy: StandingMaxB16 for fp16 / bf16 P, StandingMaxE4m3 for the FP8
// kernel's e4m3 P (session 50). Which FA-2 calls take it: launch/heuristics.h fa2_ws_standing_max.
#pragma once
#include <cstdint>
#include <cuda_fp8.h>
#include <math_constants.h>
#include <type_traits>

#include "ffpa/attn/softmax.cuh"
#include "ffpa/params.h"
#include "ffpa/tile/numeric.cuh"

namespace ffpa::attn {

// How a kernel's P is bounded (the b16 kernels' policy; the FP8 kernel's below): P = 2^(s - m + kPOffset);
// the largest partial row sum (a thread's share of one row in one tile) left unrepaired, kBound: every P below it,
// inside fp16's range (65504) with room for the P V sums, and a lazy-max row (P <= 2^8) never comes near it; a repair
// scales a row whose largest P is 2^kSettleMin or more above 2^kSettleTo back to [2^kSettleTo, 2^(kSettleTo + 1));
// kSlack, the exact path's lazy slack (attn/state.cuh).
struct StandingMaxB16 {
  static constexpr float kPOffset = 0.f;
  static constexpr float kBound = 16384.f;
  static constexpr int kSettleTo = 0;
  static constexpr int kSettleMin = 8;
  static constexpr float kSlack = kLazyMaxSlack;
};

// The FP8 kernel's (kernels/fa2_fwd_sm90_fp8.cuh): e4m3 P (largest normal 448): P = 2^(s - m + 4) at the standing
// max, every partial sum (so every P) at most 448, a repair back to [8, 16); the exact path eager (slack 0) at the
// same offset, so both paths' P share one scale.
struct StandingMaxE4m3 {
  static constexpr float kPOffset = 4.f;
  static constexpr float kBound = 448.f;
  static constexpr int kSettleTo = 3;
  static constexpr int kSettleMin = 1;
  static constexpr float kSlack = 0.f;
};

// The test: whether some lane of the warp saw a partial sum past the bound (a NaN sum does not count).
__device__ __forceinline__ bool standing_max_exceeded(const float (&ts)[2], float bound) {
  return __any_sync(0xffffffffu, ts[0] > bound || ts[1] > bound);
}

// Whether some lane's P overflowed to +inf (its partial sum is +inf).
__device__ __forceinline__ bool standing_max_overflowed(const float (&ts)[2]) {
  return __any_sync(0xffffffffu, ts[0] == CUDART_INF_F || ts[1] == CUDART_INF_F);
}

// The lazy update after the fact, every P finite: per row (quad-uniform) k = the exponent of the row's largest P less
// Policy::kSettleTo when that is at least Policy::kSettleMin (at most 126, so 2^-k stays a normal float), else 0; P
// and the tile's sums scaled by 2^-k (exact), the row's running sum likewise before the tile's is added, the max raised
// by k, alpha = 2^-k for O. Rows whose P stayed small keep k = 0.
template <typename Policy, int kN>
__device__ __forceinline__ void settle_rows(float (&s)[kN][4], const float (&ts)[2], float (&row_max)[2],
                                            float (&row_sum)[2], float (&alpha)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float pm = quad_max(strip_row_max(s, r));
    const int e = static_cast<int>((__float_as_uint(pm) >> 23) & 0xffu) - 127;  // pm's exponent (finite pm)
    const int k = e - Policy::kSettleTo >= Policy::kSettleMin ? min(e - Policy::kSettleTo, 126) : 0;
    const float sc = __uint_as_float(static_cast<uint32_t>(127 - k) << 23);  // 2^-k
    alpha[r] = sc;
    row_sum[r] = row_sum[r] * sc + ts[r] * sc;
    row_max[r] += static_cast<float>(k);
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      s[n][2 * r] *= sc;
      s[n][2 * r + 1] *= sc;
    }
  }
}

// S = q.k (unscaled, fp32) at rows row, row + 8 and columns col, col + 1 (an accumulator quad's order), from
// global memory; 0 past len_q or len_kv, as TMA's zero fill gives. The rare repair only (a score 128 or more above
// a row's standing max): one element at a time, 4-byte loads, so it adds few registers where the tile's whole
// state is live (the D = 64 kernels have none to spare).
template <typename Element, int kD>
__device__ __forceinline__ float4 s_quad_global(const FwdParams& p, int batch, int head, int row, int col) {
  using Num = Numeric<std::conditional_t<sizeof(Element) == 1, __nv_bfloat16, Element>>;  // (e4m3: unpacked below)
  const int kv_head = head / (p.heads_q / p.heads_kv);
  float out[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int qrow = row + 8 * (i / 2), kcol = col + i % 2;
    float acc = 0.f;
    if (qrow < p.len_q && kcol < p.len_kv) {
      const uint32_t* qr = reinterpret_cast<const uint32_t*>(static_cast<const Element*>(p.q) + batch * p.q_batch_stride +
                                                             head * p.q_head_stride + qrow * p.q_row_stride);
      const uint32_t* kr = reinterpret_cast<const uint32_t*>(static_cast<const Element*>(p.k) + batch * p.k_batch_stride +
                                                             kv_head * p.k_head_stride + kcol * p.k_row_stride);
#pragma unroll 1
      for (int d = 0; d < kD * static_cast<int>(sizeof(Element)) / 4; ++d) {
        if constexpr (sizeof(Element) == 1) {  // e4m3 (the FP8 kernel): four values a word
          const __half2 a0(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(qr[d] & 0xffffu), __NV_E4M3));
          const __half2 a1(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(qr[d] >> 16), __NV_E4M3));
          const __half2 b0(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(kr[d] & 0xffffu), __NV_E4M3));
          const __half2 b1(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(kr[d] >> 16), __NV_E4M3));
          const float2 fa0 = __half22float2(a0), fa1 = __half22float2(a1), fb0 = __half22float2(b0),
                       fb1 = __half22float2(b1);
          acc = fmaf(fa0.x, fb0.x, fmaf(fa0.y, fb0.y, fmaf(fa1.x, fb1.x, fmaf(fa1.y, fb1.y, acc))));
        } else {
          const float2 a = Num::unpack2(qr[d]), b = Num::unpack2(kr[d]);
          acc = fmaf(a.x, b.x, fmaf(a.y, b.y, acc));
        }
      }
    }
    out[i] = acc;
  }
  return make_float4(out[0], out[1], out[2], out[3]);
}

// A thread's strip of S again: rows row0 + g (+ 8), columns n0 + 8 n + 2 t4 (+ 1). One copy of the quad's code in a
// rolled loop; the strip written by compile-time index (a select per n8 tile), so it stays in registers (no call:
// the call's ABI cost the hot loop's kernels spill slots).
template <typename Element, int kD, int kN>
__device__ __forceinline__ void recompute_s_strip(const FwdParams& p, int batch, int head, int row0, int g, int n0,
                                                  int t4, float (&s)[kN][4]) {
#pragma unroll 1
  for (int n = 0; n < kN; ++n) {
    const float4 q4 = s_quad_global<Element, kD>(p, batch, head, row0 + g, n0 + 8 * n + 2 * t4);
#pragma unroll
    for (int m = 0; m < kN; ++m)
      if (m == n) s[m][0] = q4.x, s[m][1] = q4.y, s[m][2] = q4.z, s[m][3] = q4.w;
  }
}

// A tile's softmax: with kStanding, the standing max once every row of the warp has a finite max, tested and
// repaired as the header says (redo(s) puts the tile's S back, masked, for the overflow case); else, and for a
// warp's first visible tile, the exact way. P in s, the sums in row_sum, O's factor in alpha.
template <bool kStanding, typename Policy = StandingMaxB16, int kN, typename Redo>
__device__ __forceinline__ void tile_softmax(float (&s)[kN][4], float sf, float (&row_max)[2], float (&row_sum)[2],
                                             float (&alpha)[2], Redo&& redo) {
  if constexpr (kStanding) {
    if (__all_sync(0xffffffffu, row_max[0] != -CUDART_INF_F && row_max[1] != -CUDART_INF_F)) {
      const float neg_m[2] = {Policy::kPOffset - row_max[0], Policy::kPOffset - row_max[1]};
      float ts[2] = {0.f, 0.f};
      exp2_strip_add_sums(s, sf, neg_m, ts);
      if (!standing_max_exceeded(ts, Policy::kBound)) {
        row_sum[0] += ts[0], row_sum[1] += ts[1];
        alpha[0] = alpha[1] = 1.f;
        return;
      }
      if (!standing_max_overflowed(ts)) return settle_rows<Policy>(s, ts, row_max, row_sum, alpha);
      redo(s);  // rare: a score 128 or more above its row's standing max
      // its own copy of the exact path: no join with the one below (a join cost the D = 64 kernels spill slots)
      return exact_tile_softmax(s, sf, row_max, row_sum, alpha, Policy::kSlack, Policy::kPOffset);
    }
  }
  exact_tile_softmax(s, sf, row_max, row_sum, alpha, Policy::kSlack, Policy::kPOffset);
}

}  // namespace ffpa::attn
