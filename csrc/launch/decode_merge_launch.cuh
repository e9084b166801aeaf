// The merge launch of split-KV decode, shared by both decode launchers (decode_launch.cuh,
// decode_ws_launch.cuh): after a split kernel wrote p.num_splits > 1 partials, one block per
// (packed row, 128 output columns) combines them (kernels/decode_merge.cuh).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "ffpa/kernels/decode_merge.cuh"
#include "launch/heuristics.h"

namespace ffpa::launch {

template <typename Element, int kHeadDimV>
cudaError_t launch_decode_merge(const DecodeParams& p, cudaStream_t stream) {
  const int64_t items = static_cast<int64_t>(p.batch) * p.heads_kv * (p.heads_q / p.heads_kv) * p.len_q;
  if (items > 0x7fffffff) return cudaErrorInvalidConfiguration;
  static_assert(kernels::kMaxMergeSplits >= kMaxDecodeSplits, "the merge holds every split's weight");
  static_assert(kHeadDimV % 8 == 0, "the merge's threads take 4 columns (its last column block may be narrower)");
  const dim3 grid(static_cast<unsigned>(items), (kHeadDimV + kernels::kMergeCols - 1) / kernels::kMergeCols);
  kernels::decode_merge_kernel<Element><<<grid, kernels::kMergeThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace ffpa::launch
