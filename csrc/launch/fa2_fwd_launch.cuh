// Definition of the FA-2 forward launcher: tile from the table, pipeline depth, shared-memory
// opt-in, the block map's tile size. Included only by the generated instantiation files.
#pragma once
#include <cuda_runtime.h>

#include "ffpa/fa2_traits.h"
#include "ffpa/kernels/fa2_fwd_sm80.cuh"
#include "launch/fwd_launcher.h"
#include "launch/grid.cuh"
#include "launch/heuristics.h"

namespace ffpa::launch {

template <typename Element, int kHeadDim, int kHeadDimV>
struct Fa2Launcher<Element, kHeadDim, kHeadDimV>::Impl {
  using Traits = Fa2Traits<Element, kHeadDim, kHeadDimV, Fa2TileFor<(kHeadDim > kHeadDimV ? kHeadDim : kHeadDimV)>>;
  static constexpr int kMaxStages = 4;
  static inline bool smem_opted_in[kMaxStages + 1][64] = {};  // per ring depth (one kernel each), per device
  static int pick_stages(int requested) {
    return requested > 0
               ? requested
               : default_stages(Traits::kStageBytes, Traits::smem_bytes(0), Traits::kMinBlocks, Traits::kStages);
  }
};

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t Fa2Launcher<Element, kHeadDim, kHeadDimV>::info(int num_stages, bool query_attributes, KernelInfo* out) {
  using Traits = typename Impl::Traits;
  if (num_stages < 0 || num_stages > Impl::kMaxStages) return cudaErrorInvalidValue;
  KernelInfo k;
  k.family = Family::kFa2;
  k.level = 0;
  k.head_dim = kHeadDim;
  k.head_dim_v = kHeadDimV;
  k.block_m = Traits::kBlockM;
  k.block_n = Traits::kBlockN;
  k.warps_m = Traits::kWarps;
  k.warps_n = 1;
  k.chunk_d = kHeadDim;
  k.smem_padded = Traits::QTile::kAnyRowStep;
  k.group_d = kHeadDimV;
  k.threads = Traits::kThreads;
  k.num_stages = Impl::pick_stages(num_stages);
  k.smem_bytes = Traits::smem_bytes(k.num_stages);
  if (query_attributes) {
    const cudaError_t err = query_kernel_attributes(attn::fa2_fwd_kernel_for<Traits>(k.num_stages), &k);
    if (err != cudaSuccess) return err;
  }
  *out = k;
  return cudaSuccess;
}

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t Fa2Launcher<Element, kHeadDim, kHeadDimV>::run(FwdParams p, cudaStream_t stream) {
  using Traits = typename Impl::Traits;
  if (p.num_stages < 0 || p.num_stages > Impl::kMaxStages || !params_ok(p, kHeadDim, kHeadDimV))
    return cudaErrorInvalidValue;
  if (p.block_map != nullptr && (p.block_map_m != Traits::kBlockM || p.block_map_n != Traits::kBlockN))
    return cudaErrorInvalidValue;
  p.num_stages = Impl::pick_stages(p.num_stages);
  const int smem = Traits::smem_bytes(p.num_stages);
  if (smem > max_smem_optin()) return cudaErrorInvalidConfiguration;
  const auto kernel = attn::fa2_fwd_kernel_for<Traits>(p.num_stages);
  if (kernel == nullptr) return cudaErrorInvalidValue;
  const cudaError_t err = opt_in_smem(kernel, smem, Impl::smem_opted_in[p.num_stages]);
  if (err != cudaSuccess) return err;
  return launch_batched<Element>(kernel, p, Traits::kBlockM, Traits::kThreads, smem, stream);
}

}  // namespace ffpa::launch
