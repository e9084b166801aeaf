// Launches that need one launch attribute (torch-free):
//   launch_clusters     thread-block clusters of `cluster_x` blocks along x (sm_90: the blocks of a
//                       cluster run at once and share distributed shared memory; gridDim.x must be a
//                       multiple of cluster_x): the FFPA L1 Hopper launcher's cluster pair and its test;
//   launch_cooperative  every block resident at once, or the launch fails (cudaErrorCooperativeLaunchTooLarge
//                       and the like): the narrow MLA decode kernel's spread merge, whose blocks wait
//                       for each other.
#pragma once
#include <cuda_runtime.h>

#include <utility>

namespace ffpa::launch {

template <typename... Params, typename... Args>
cudaError_t launch_with_attribute(void (*kernel)(Params...), const cudaLaunchAttribute& attr, dim3 grid, dim3 block,
                                  size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attrs[1] = {attr};
  cfg.attrs = attrs;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

template <typename... Params, typename... Args>
cudaError_t launch_clusters(void (*kernel)(Params...), unsigned cluster_x, dim3 grid, dim3 block, size_t smem,
                            cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster_x;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  return launch_with_attribute(kernel, attr, grid, block, smem, stream, std::forward<Args>(args)...);
}

template <typename... Params, typename... Args>
cudaError_t launch_cooperative(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                               Args&&... args) {
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  return launch_with_attribute(kernel, attr, grid, block, smem, stream, std::forward<Args>(args)...);
}

}  // namespace ffpa::launch
