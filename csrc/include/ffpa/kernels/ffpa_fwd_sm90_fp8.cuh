// FP8 (e4m3) attention past D = 256 on Hopper (sm_90a): FFPA level 1's warp-specialised pipeline
// (kernels/ffpa_ws_pipeline.cuh: its picture of who waits on what) on 8-bit operands, the tile of
// traits/fp8_traits.h (FfpaWsFp8Traits). Q@K^T runs over the head dim in 128-byte slices (shared memory
// does not grow with D), the two consumers exchange row maxima and write P to shared memory as e4m3
// (times 2^4 below a lazy row max: traits/fp8_traits.h), and each multiplies it by V^T for its half of the
// output columns (O in registers).
//
// This file is the FP8 prefill Problem: FFPA level 1's (kernels/ffpa_fwd_sm90_ws.cuh: items, key tiles,
// causal cut, block-map skip, masks) with
// * the q and k descales of the item's (batch, head) folded into its softmax scale;
// * V^T, which the launcher's pre-pass writes (kernels/fp8_v_transpose.cuh, keys in order), loaded per
//   V stage as 32 keys of every output column in TMA's 32-byte swizzle (two boxes of Dv / 2 rows);
// * the output in bf16 or fp16 (Traits::Out), scaled by v's descale times v_scale, and the LSE less
//   P's offset.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "ffpa/attn/descale.cuh"
#include "ffpa/kernels/ffpa_fwd_sm90_ws.cuh"
#include "ffpa/tile/quad.cuh"
#include "ffpa/traits/fp8_traits.h"

namespace ffpa::attn {

template <typename Traits>
struct FfpaFp8Prefill : FfpaPrefill<Traits> {
  using Base = FfpaPrefill<Traits>;
  using Item = typename Base::Item;
  using Out = typename Traits::Out;
  static constexpr float kPOffset = Traits::kPOffset;  // P = 2^(s - m + kPOffset)

  static __device__ __forceinline__ Item item(const FwdParams& p, int t, int* scratch) {
    Item w = Base::item(p, t, scratch);
    w.scale_log2 = p.scale_log2 *
                   fp8_descale(p.q_descale, p.q_descale_batch_stride, p.q_descale_head_stride, w.batch, w.head) *
                   fp8_descale(p.k_descale, p.k_descale_batch_stride, p.k_descale_head_stride, w.batch, w.head_kv);
    return w;
  }

  // V stage v of tile j: keys j * 128 + 32 v .. + 31 of V^T's rows (the output columns), two boxes of Dv / 2
  // rows (past vt_len zero-filled; P is 0 there anyway).
  // Sharing V (Traits::kShareV): one block of the pair loads each stage into both (Base::loads_shared).
  static __device__ __forceinline__ void load_v(const FwdParams& p, const FfpaTmaMaps& maps, const Item& w,
                                                uint32_t stage, uint32_t bar, int j, int v, int*) {
    const int key = j * Traits::kBlockN + v * Traits::kVKeys;
    if constexpr (Traits::kShareV)
      if (!Base::loads_shared(w, v, j)) return;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t dst = stage + h * (Traits::kHeadDimV / 2) * Traits::kVKeys;
      if constexpr (Traits::kShareV)
        ptx::tma_load_4d_multicast(dst, &maps.v, bar, key, h * (Traits::kHeadDimV / 2), w.head_kv, w.batch, 3);
      else
        ptx::tma_load_4d(dst, &maps.v, bar, key, h * (Traits::kHeadDimV / 2), w.head_kv, w.batch);
    }
  }

  // The finished rows: O * out_scale / l for consumer c's columns straight from the accumulators
  // (tile/quad.cuh), the LSE (consumer 0) less P's offset.
  template <int kCols>
  static __device__ __forceinline__ void store(const FwdParams& p, const Item& w, int c, int col0, int row0, int g,
                                               int t4, const float (&o)[kCols / 8][4], const float (&row_max)[2],
                                               const float (&l)[2]) {
    constexpr int kNO = kCols / 8;
    const float out_scale =
        p.v_scale * fp8_descale(p.v_descale, p.v_descale_batch_stride, p.v_descale_head_stride, w.batch, w.head_kv);
    Out* o_base = static_cast<Out*>(p.o) + w.batch * p.o_batch_stride + w.head * p.o_head_stride;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float inv = inv_row_sum(l[r]) * out_scale;
      const int row = row0 + g + 8 * r;
      store_acc_row<Out, kNO>(o_base + static_cast<int64_t>(row) * p.o_row_stride + col0, o, r, inv, t4,
                                     row < p.len_q);
      if (row < p.len_q && p.lse != nullptr && c == 0 && t4 == 0)
        p.lse[(static_cast<int64_t>(w.batch) * p.heads_q + w.head) * p.len_q + row] = row_lse(row_max[r] - kPOffset, l[r]);
    }
  }
};

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    ffpa_fwd_fp8_kernel(const __grid_constant__ FwdParams p, const __grid_constant__ FfpaTmaMaps maps) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) char smem[];
  FfpaWsPipeline<Traits, FfpaFp8Prefill<Traits>>::run(p, maps, smem);
#elif defined(__CUDA_ARCH__)
  __trap();  // no wgmma / TMA in this pass (the launcher only picks this kernel on sm_90a)
#endif
}

}  // namespace ffpa::attn
