// Runtime launch heuristics shared by the forward launchers: pipeline depth from the device's
// shared memory, the one-time dynamic shared-memory opt-in. Torch-free host code.
#pragma once
#include <cuda_runtime.h>

namespace ffpa::launch {

// Shared memory a block may opt into on the current device (cached per device).
inline int max_smem_optin() {
  static int cached[64] = {0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 48 * 1024;
  if (cached[dev] == 0) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) v = 48 * 1024;
    cached[dev] = v;
  }
  return cached[dev];
}

// Shared memory of one SM on the current device (cached per device).
inline int smem_per_sm() {
  static int cached[64] = {0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 100 * 1024;
  if (cached[dev] == 0) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess) v = 100 * 1024;
    cached[dev] = v;
  }
  return cached[dev];
}

// Default cp.async depth: the deepest of 3, 2 that lets `blocks_per_sm` blocks share an SM (the
// residency the tile was sized for; 1 KB per block is reserved by the driver) and fits the
// per-block limit, else 1. fixed_bytes is the stage-independent part.
inline int default_stages(int stage_bytes, int fixed_bytes, int blocks_per_sm = 1) {
  const int per_block = smem_per_sm() / blocks_per_sm - 1024;
  const int limit = per_block < max_smem_optin() ? per_block : max_smem_optin();
  for (int s = 3; s > 1; --s)
    if (fixed_bytes + s * stage_bytes <= limit) return s;
  return 1;
}

// Raise a kernel's dynamic shared-memory limit once per device (not a stream operation, so it
// is also safe before CUDA-graph capture). `done` is the caller's per-kernel flag array: the
// kernels share one function-pointer type, so the flags cannot live here.
template <typename Kernel>
cudaError_t opt_in_smem(Kernel kernel, int bytes, bool (&done)[64]) {
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (dev >= 0 && dev < 64 && done[dev]) return cudaSuccess;
  const int limit = max_smem_optin();
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes < limit ? bytes : limit);
  if (err == cudaSuccess && dev >= 0 && dev < 64) done[dev] = true;
  return err;
}

}  // namespace ffpa::launch
