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
    kernels::decode_merge_kernel<Element, 1><<<static_cast<unsigned>(blocks), kernels::kMergeThreads, 0, stream>>>(p);
  } else {
    kernels::decode_merge_kernel<Element, kernels::kMergeWarps>
        <<<static_cast<unsigned>(units), kernels::kMergeThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace ffpa::launch
