// What the launchers of the FFPA-shaped Hopper pipeline (kernels/ffpa_ws_pipeline.cuh: prefill's
// ffpa_fwd_ws_launch.cuh and decode's decode_ws_launch.cuh) report through kernel_info: the
// pipeline's tile, warps, slices and shared memory, read from its traits (FfpaWsTraits).
#pragma once
#include <cuda_runtime.h>

#include "launch/ffpa_fwd.h"
#include "launch/heuristics.h"

namespace ffpa::launch {

// k: what the caller knows (family, level, mask tile); the rest from Traits, and the registers and
// local bytes of `kernel` when query_attributes.
template <typename Traits, typename Kernel>
cudaError_t ws_pipeline_info(KernelInfo k, Kernel kernel, bool query_attributes, KernelInfo* out) {
  k.wgmma = true;
  k.acc = AccMode::kF32;
  k.head_dim = Traits::kHeadDim;
  k.head_dim_v = Traits::kHeadDimV;
  k.block_m = Traits::kBlockM;
  k.block_n = Traits::kBlockN;
  k.warps_m = 4;
  k.warps_n = Traits::kConsumers;
  k.producer_warps = 4;
  k.chunk_d = Traits::kSliceD;
  k.group_d = Traits::kGroupCols;
  k.threads = Traits::kThreads;
  k.num_stages = Traits::kQKStages;
  k.smem_bytes = Traits::kSmemBytes;
  if (query_attributes) {
    const cudaError_t err = query_kernel_attributes(kernel, &k);
    if (err != cudaSuccess) return err;
  }
  *out = k;
  return cudaSuccess;
}

}  // namespace ffpa::launch
