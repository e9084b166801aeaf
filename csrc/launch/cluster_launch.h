// Launching a kernel in thread-block clusters of `cluster_x` blocks along x (sm_90: the blocks of a
// cluster run at once and share distributed shared memory; gridDim.x must be a multiple of
// cluster_x). Torch-free; used by the FFPA L1 Hopper launcher's cluster pair and its primitive test.
#pragma once
#include <cuda_runtime.h>

#include <utility>

namespace ffpa::launch {

template <typename... Params, typename... Args>
cudaError_t launch_clusters(void (*kernel)(Params...), unsigned cluster_x, dim3 grid, dim3 block, size_t smem,
                            cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster_x;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace ffpa::launch
