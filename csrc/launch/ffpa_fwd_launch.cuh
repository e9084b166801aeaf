// Definition of the FFPA forward launcher: grid, pipeline depth, shared-memory opt-in.
// Included only by the generated instantiation files (one per family x dtype x head dim).
#pragma once
#include <cuda_runtime.h>

#include "ffpa/ffpa_traits.h"
#include "ffpa/kernels/ffpa_fwd_sm80.cuh"
#include "launch/fwd_launcher.h"
#include "launch/grid.cuh"
#include "launch/heuristics.h"

namespace ffpa::launch {

template <typename Element, int kHeadDim, int kHeadDimV, Level kLevel>
struct FfpaLauncher<Element, kHeadDim, kHeadDimV, kLevel>::Impl {
  using Traits = FfpaTraits<Element, kHeadDim, kHeadDimV, kLevel, L1Tile<kHeadDimV>>;
  static constexpr int kMaxStages = 4;
  static inline bool smem_opted_in[64] = {};
  static int pick_stages(int requested) {
    return requested > 0 ? requested : default_stages(Traits::kStageBytes, Traits::smem_bytes(0));
  }
};

template <typename Element, int kHeadDim, int kHeadDimV, Level kLevel>
cudaError_t FfpaLauncher<Element, kHeadDim, kHeadDimV, kLevel>::info(int num_stages, bool query_attributes,
                                                                     KernelInfo* out) {
  using Traits = typename Impl::Traits;
  if (num_stages < 0 || num_stages > Impl::kMaxStages) return cudaErrorInvalidValue;
  KernelInfo k;
  k.family = Family::kFfpa;
  k.level = static_cast<int>(kLevel);
  k.head_dim = kHeadDim;
  k.head_dim_v = kHeadDimV;
  k.block_m = Traits::kBlockM;
  k.block_n = Traits::kBlockN;
  k.warps_m = Traits::kWarpsM;
  k.warps_n = Traits::kWarpsN;
  k.chunk_d = Traits::kChunkD;
  k.threads = Traits::kThreads;
  k.num_stages = Impl::pick_stages(num_stages);
  k.smem_bytes = Traits::smem_bytes(k.num_stages);
  if (query_attributes) {
    cudaFuncAttributes attr;
    const cudaError_t err = cudaFuncGetAttributes(&attr, attn::ffpa_fwd_kernel<Traits>);
    if (err != cudaSuccess) return err;
    k.registers = attr.numRegs;
    k.local_bytes = static_cast<int>(attr.localSizeBytes);
  }
  *out = k;
  return cudaSuccess;
}

template <typename Element, int kHeadDim, int kHeadDimV, Level kLevel>
cudaError_t FfpaLauncher<Element, kHeadDim, kHeadDimV, kLevel>::run(FwdParams p, cudaStream_t stream) {
  using Traits = typename Impl::Traits;
  if (p.num_stages < 0 || p.num_stages > Impl::kMaxStages || !params_ok(p, kHeadDim, kHeadDimV))
    return cudaErrorInvalidValue;
  if (p.block_map != nullptr && (p.block_map_m != Traits::kBlockM || p.block_map_n != Traits::kBlockN))
    return cudaErrorInvalidValue;
  p.num_stages = Impl::pick_stages(p.num_stages);
  const int smem = Traits::smem_bytes(p.num_stages);
  if (smem > max_smem_optin()) return cudaErrorInvalidConfiguration;
  const cudaError_t err =
      opt_in_smem(attn::ffpa_fwd_kernel<Traits>, Traits::smem_bytes(Impl::kMaxStages), Impl::smem_opted_in);
  if (err != cudaSuccess) return err;
  return launch_batched<Element>(attn::ffpa_fwd_kernel<Traits>, p, Traits::kBlockM, Traits::kThreads, smem, stream);
}

}  // namespace ffpa::launch
