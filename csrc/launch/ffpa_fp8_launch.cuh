// The FP8 (e4m3) launcher's side past D = 256 (Fp8Launcher, launch/fa2_fp8_launch.cuh): V^T in key
// order by the pre-pass (kernels/fp8_v_transpose.cuh) into p.vt (sized by the op), the TMA maps of Q
// and K (128-byte slices of the head dim) and V^T (32 keys of Dv / 2 columns a box, 32-byte swizzle), the
// shared-memory opt-in and one block per 64 query rows of each (batch, head) (kernels/ffpa_fwd_sm90_fp8.cuh;
// calls with 32+ query blocks, causal or not, as cluster pairs sharing K and V^T loads: ffpa_ws_share_k_fp8),
// the output dtype picked by p.out_fp16. sm_90a builds only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ffpa/kernels/ffpa_fwd_sm90_fp8.cuh"
#include "ffpa/traits/fp8_traits.h"
#include "launch/cluster_launch.h"
#include "launch/fp8_run.cuh"
#include "launch/fwd_launcher.h"
#include "launch/heuristics.h"
#include "launch/tma_desc.h"
#include "launch/ws_pipeline_info.h"

namespace ffpa::launch {

template <int kHeadDim>
struct FfpaFp8Launch {
  template <typename Out, bool kShare = false>
  struct Variant {
    using Traits = FfpaWsFp8Traits<Out, kHeadDim, kShare>;
    static inline bool opted_in[64] = {};
    static constexpr auto kernel = &attn::ffpa_fwd_fp8_kernel<Traits>;
  };
  using Traits = typename Variant<__nv_bfloat16>::Traits;  // the tile (the output dtype changes only the store)

  static cudaError_t encode_maps(const FwdParams& p, attn::FfpaTmaMaps* m) {
    auto qk = [](CUtensorMap* map, const void* base, int rows, int heads, int batch, int64_t row_stride,
                 int64_t head_stride, int64_t batch_stride, int box_rows) {
      const uint64_t dims[4] = {kHeadDim, static_cast<uint64_t>(rows), static_cast<uint64_t>(heads),
                                static_cast<uint64_t>(batch)};
      const int64_t strides[4] = {1, row_stride, head_stride, batch_stride};
      const uint32_t box[4] = {Traits::kSliceD, static_cast<uint32_t>(box_rows), 1, 1};
      return encode_strided_tma(map, TmaElem::kUInt8, base, 4, dims, strides, box);
    };
    cudaError_t err = qk(&m->q, p.q, p.len_q, p.heads_q, p.batch, p.q_row_stride, p.q_head_stride, p.q_batch_stride,
                         Traits::kBlockM);
    if (err == cudaSuccess)
      err = qk(&m->k, p.k, p.len_kv, p.heads_kv, p.batch, p.k_row_stride, p.k_head_stride, p.k_batch_stride,
               Traits::kKRows);
    if (err == cudaSuccess) {
      const uint64_t dims[4] = {static_cast<uint64_t>(p.vt_len), static_cast<uint64_t>(kHeadDim),
                                static_cast<uint64_t>(p.heads_kv), static_cast<uint64_t>(p.batch)};
      const int64_t strides[4] = {1, p.vt_len, static_cast<int64_t>(kHeadDim) * p.vt_len,
                                  static_cast<int64_t>(p.heads_kv) * kHeadDim * p.vt_len};
      const uint32_t box[4] = {Traits::kVKeys, kHeadDim / 2, 1, 1};
      err = encode_strided_tma(&m->v, TmaElem::kUInt8, p.vt, 4, dims, strides, box, TmaSwizzle::k32B);
    }
    return err;
  }

  // items: one block per query block of each (batch, head); sharing pairs cover ffpa_ws_share_k_blocks.
  template <typename Out>
  static cudaError_t launch(const FwdParams& p, const attn::FfpaTmaMaps& maps, int64_t items, cudaStream_t stream) {
    const int m_blocks = (p.len_q + Traits::kBlockM - 1) / Traits::kBlockM;
    if (ffpa_ws_share_k_fp8(m_blocks)) {
      using V = Variant<Out, true>;
      const cudaError_t err = opt_in_smem(V::kernel, V::Traits::kSmemBytes, V::opted_in);
      if (err != cudaSuccess) return err;
      const int64_t blocks = items / m_blocks * ffpa_ws_share_k_blocks(m_blocks);
      if (blocks > INT32_MAX) return cudaErrorInvalidValue;
      return launch_clusters(V::kernel, 2, dim3(static_cast<unsigned>(blocks)), dim3(V::Traits::kThreads),
                             V::Traits::kSmemBytes, stream, p, maps);
    }
    using V = Variant<Out>;
    cudaError_t err = opt_in_smem(V::kernel, V::Traits::kSmemBytes, V::opted_in);
    if (err != cudaSuccess) return err;
    V::kernel<<<static_cast<unsigned>(items), V::Traits::kThreads, V::Traits::kSmemBytes, stream>>>(p, maps);
    return cudaGetLastError();
  }

  static cudaError_t run(const FwdParams& p, cudaStream_t stream) {
    return fp8_run<FfpaFp8Launch, attn::FfpaTmaMaps, kHeadDim, false>(p, stream);  // V^T's keys in order
  }

  static cudaError_t info(bool query_attributes, KernelInfo* out) {
    KernelInfo k;
    k.family = Family::kFp8;
    k.level = 0;
    k.mask_block_m = Traits::kBlockM;
    k.mask_block_n = Traits::kBlockN;
    k.fp8_vt_prepass = true;  // V^T by the pre-pass, keys in order
    return ws_pipeline_info<Traits>(k, Variant<__nv_bfloat16>::kernel, query_attributes, out);
  }
};

}  // namespace ffpa::launch
