// The merge launch of split-KV decode, shared by both decode launchers (decode_launch.cuh,
// decode_ws_launch.cuh): after a split kernel wrote p.num_splits > 1 partials, one warp per
// (packed row, 128 output columns), or one block where such units are few (kMergeWarpUnitsMin),
// combines them (kernels/decode_merge.cuh).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "ffpa/kernels/decode_merge.cuh"
#include "launch/heuristics.h"

namespace ffpa::launch {

// A merge kernel launch. On compute capability 9.0 and up it is a programmatic dependent launch: its
// blocks may be scheduled while the split kernel's last blocks run (the split kernels call
// ptx::launch_dependents) and wait for that grid's completion in the kernel (grid_dependency_wait),
// so the launch's latency and ramp overlap the split kernel's tail. Measured: 0-0.8% of the call where
// the merge kernel runs (docs/tuning_decode.md, session 25).
template <typename Kernel>
cudaError_t launch_merge_kernel(Kernel kernel, unsigned blocks, const DecodeParams& p, cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(kernels::kMergeThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = device_cc() >= 90 ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, p);
}

template <typename Element, int kHeadDimV>
cudaError_t launch_decode_merge(const DecodeParams& p, cudaStream_t stream) {
  const int64_t items = static_cast<int64_t>(p.batch) * p.heads_kv * (p.heads_q / p.heads_kv) * p.len_q;
  static_assert(kernels::kMaxMergeSplits >= kMaxDecodeSplits, "the merge holds every split's weight");
  static_assert(kHeadDimV % 8 == 0, "the merge's lanes take 4 columns (its last column block may be narrower)");
  const int64_t units = items * ((kHeadDimV + kernels::kMergeCols - 1) / kernels::kMergeCols);
  // A warp per unit where there are enough of them to fill the GPU; the whole block otherwise
  // (few rows, many splits: the unit's splits spread over four warps).
  if (units >= kMergeWarpUnitsMin) {
    const int64_t blocks = (units + kernels::kMergeWarps - 1) / kernels::kMergeWarps;
    if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
    return launch_merge_kernel(kernels::decode_merge_kernel<Element, 1>, static_cast<unsigned>(blocks), p, stream);
  }
  return launch_merge_kernel(kernels::decode_merge_kernel<Element, kernels::kMergeWarps>, static_cast<unsigned>(units), p,
                             stream);
}

}  // namespace ffpa::launch
