// Definition of the FFPA level-1 launcher on Hopper (kernels/ffpa_fwd_sm90_ws.cuh; sm_90a builds,
// compute capability 9.0 only, which the registry's arch says): it runs the warp-specialised TMA
// kernel when num_stages is auto and TMA can describe q, k and v; otherwise (a stride or base TMA
// cannot take, an explicit num_stages) the mma.sync L1 kernel, whose tile divides its 64 x 128: the
// mask block map is built at that tile and serves both. Included only by the generated instantiation files.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "ffpa/kernels/ffpa_fwd_sm90_ws.cuh"
#include "ffpa/traits/ffpa_traits.h"
#include "launch/cluster_launch.h"
#include "launch/fwd_launcher.h"
#include "launch/grid.cuh"
#include "launch/heuristics.h"
#include "launch/tma_desc.h"
#include "launch/ws_pipeline_info.h"

namespace ffpa::launch {

template <typename Element, int kHeadDim, int kHeadDimV>
struct FfpaWsLauncher<Element, kHeadDim, kHeadDimV>::Impl {
  // Above Dv = 640 (column groups of 384 .. 512) the two groups of a query block run as a cluster pair
  // sharing S. Same-run A/B on an H200 (bf16, B=1 H=32 N=8192 and B=4 H=16 N=2048, causal and not,
  // docs/hopper_ffpa.md): +7 to +20% at Dv = 768 and 1024. Up to 640 a query block is one group (one
  // block), which ran 576 and 640 1.5x faster than the two 320-column groups (and their pair).
  static constexpr bool kPair = kHeadDimV > 640;
  using Traits = FfpaWsTraits<Element, kHeadDim, kHeadDimV, kPair>;
  // Up to Dv = 640 (one group), causal calls run query blocks 2 q + 1, 2 q as a cluster pair loading K
  // once for both (ffpa_ws_share_k in launch/heuristics.h: when, and the measurements).
  static constexpr bool kShareOk = !kPair;
  using ShareTraits = FfpaWsTraits<Element, kHeadDim, kHeadDimV, kPair, kShareOk>;
  // The fallback: the mma.sync L1 kernel of the same head dims (its instantiation is the "any"
  // line of the same family, which every build that has this one compiles); above Dv = 1024, where
  // the mma.sync levels hold O in L3's fp32 workspace, L3 (workspace_bytes sizes it for that case).
  static constexpr Level kFallbackLevel = kHeadDimV > 1024 ? Level::kL3 : Level::kL1;
  using Fallback = FfpaLauncher<Element, kHeadDim, kHeadDimV, kFallbackLevel, AccMode::kF32>;
  using SyncTraits = FfpaTraits<Element, kHeadDim, kHeadDimV, kFallbackLevel, FfpaTile<kFallbackLevel, kHeadDim, kHeadDimV>>;
  // The mask block map is built at the fallback's tile, which the TMA kernel reads by merging blocks.
  static_assert(Traits::kBlockM % SyncTraits::kBlockM == 0 && Traits::kBlockN % SyncTraits::kBlockN == 0,
                "the fallback kernel's tile divides the TMA kernel's, so one mask block map serves both");
  static inline bool opted_in[64] = {}, opted_in_share[64] = {};
  static attn::FfpaKernelWs kernel(bool share = false) {
    return share ? attn::ffpa_fwd_ws_kernel<ShareTraits> : attn::ffpa_fwd_ws_kernel<Traits>;
  }
  static int m_blocks(const FwdParams& p) { return (p.len_q + Traits::kBlockM - 1) / Traits::kBlockM; }
  static bool shares_k(const FwdParams& p) { return kShareOk && ffpa_ws_share_k(p.is_causal, m_blocks(p)); }
  static constexpr TmaElem kElem = std::is_same_v<Element, __half> ? TmaElem::kFloat16 : TmaElem::kBFloat16;

  static cudaError_t encode_maps(const FwdParams& p, attn::FfpaTmaMaps* m) {
    cudaError_t err = encode_attn_tma(&m->q, kElem, p.q, kHeadDim, p.len_q, p.heads_q, p.batch, p.q_row_stride,
                                      p.q_head_stride, p.q_batch_stride, Traits::kBlockM);
    if (err == cudaSuccess)
      err = encode_attn_tma(&m->k, kElem, p.k, kHeadDim, p.len_kv, p.heads_kv, p.batch, p.k_row_stride,
                            p.k_head_stride, p.k_batch_stride, Traits::kKRows);
    if (err == cudaSuccess)
      err = encode_attn_tma_chunked(&m->v, kElem, p.v, kHeadDimV, p.len_kv, p.heads_kv, p.batch, p.v_row_stride,
                                    p.v_head_stride, p.v_batch_stride, Traits::kVKeys, Traits::kGroupCols / 64);
    return err;
  }

  // Blocks: one per query block and group; sharing blocks go in pairs (ffpa_ws_share_k_blocks).
  static int64_t items(const FwdParams& p, bool share) {
    const int64_t m = share ? ffpa_ws_share_k_blocks(m_blocks(p)) : m_blocks(p);
    return m * Traits::kGroups * p.heads_q * p.batch;
  }

  // Whether this call runs the TMA kernel (else the fallback's): auto depth, not too many items,
  // tensors TMA can describe, the shared memory on this device.
  static bool ws_runs(const FwdParams& p, bool share, attn::FfpaTmaMaps* maps) {
    return p.num_stages == 0 && items(p, share) <= INT32_MAX && encode_maps(p, maps) == cudaSuccess &&
           Traits::kSmemBytes <= max_smem_optin();
  }

  // cudaErrorNotSupported: this call is the fallback's.
  static cudaError_t run_ws(const FwdParams& p, cudaStream_t stream) {
    alignas(64) attn::FfpaTmaMaps maps;
    const bool share = shares_k(p);
    if (!ws_runs(p, share, &maps)) return cudaErrorNotSupported;
    const auto fn = kernel(share);
    const cudaError_t err = opt_in_smem(fn, Traits::kSmemBytes, share ? opted_in_share : opted_in);
    if (err != cudaSuccess) return err;
    const unsigned blocks = static_cast<unsigned>(items(p, share));
    // blocks is even here: a query block's two groups (kPair) or two query blocks (share) are a
    // cluster's blocks 2 i, 2 i + 1
    if (Traits::kPair || share)
      return launch_clusters(fn, 2, dim3(blocks), dim3(Traits::kThreads), Traits::kSmemBytes, stream, p, maps);
    fn<<<blocks, Traits::kThreads, Traits::kSmemBytes, stream>>>(p, maps);
    return cudaGetLastError();
  }
};

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t FfpaWsLauncher<Element, kHeadDim, kHeadDimV>::info(int num_stages, bool query_attributes,
                                                               KernelInfo* out) {
  using Traits = typename Impl::Traits;
  if (num_stages != 0) return Impl::Fallback::info(num_stages, query_attributes, out);
  KernelInfo k;
  k.family = Family::kFfpa;
  k.level = 1;
  k.mask_block_m = Impl::SyncTraits::kBlockM;
  k.mask_block_n = Impl::SyncTraits::kBlockN;
  cudaError_t err = ws_pipeline_info<Traits>(k, Impl::kernel(), query_attributes, out);
  if (err != cudaSuccess || !Impl::kShareOk || !query_attributes) return err;
  // Where a K-sharing variant exists (causal calls with many query blocks run it), the registers and
  // local bytes reported are the worse of the two kernels', so spill checks cover both.
  KernelInfo share;
  err = query_kernel_attributes(Impl::kernel(true), &share);
  if (err != cudaSuccess) return err;
  out->registers = std::max(out->registers, share.registers);
  out->local_bytes = std::max(out->local_bytes, share.local_bytes);
  return cudaSuccess;
}

// The fallback's workspace where it would run (L3, above Dv = 1024): none where the TMA kernel runs.
template <typename Element, int kHeadDim, int kHeadDimV>
int64_t FfpaWsLauncher<Element, kHeadDim, kHeadDimV>::workspace_bytes(FwdParams p) {
  if constexpr (Impl::kFallbackLevel != Level::kL3) {
    return 0;
  } else {
    alignas(64) attn::FfpaTmaMaps maps;
    return Impl::ws_runs(p, Impl::shares_k(p), &maps) ? 0 : Impl::Fallback::workspace_bytes(p);
  }
}

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t FfpaWsLauncher<Element, kHeadDim, kHeadDimV>::run(FwdParams p, cudaStream_t stream) {
  using Traits = typename Impl::Traits;
  if (p.num_stages < 0 || !params_ok(p, kHeadDim, kHeadDimV)) return cudaErrorInvalidValue;
  if (p.block_map != nullptr &&
      (p.block_map_m != Impl::SyncTraits::kBlockM || p.block_map_n != Impl::SyncTraits::kBlockN))
    return cudaErrorInvalidValue;
  const cudaError_t err = Impl::run_ws(p, stream);
  if (err != cudaErrorNotSupported) return err;
  return Impl::Fallback::run(p, stream);
}

}  // namespace ffpa::launch
