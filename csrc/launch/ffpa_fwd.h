// Host entry points of the forward kernels, torch-free: what csrc/ops calls. Every function
// reports failure as a cudaError_t; nothing here throws or knows about tensors.
#pragma once
#include <cuda_runtime_api.h>

#include "ffpa/params.h"

namespace ffpa::launch {

enum class DType : int { kFloat16 = 0, kBFloat16 = 1 };

// How one launch is cut, as the kernel will see it; registers/local memory filled on request.
struct KernelInfo {
  int level = 0;
  int head_dim = 0;
  int head_dim_v = 0;
  int block_m = 0;
  int block_n = 0;
  int warps_m = 0;
  int warps_n = 0;
  int chunk_d = 0;
  int threads = 0;
  int num_stages = 0;
  int smem_bytes = 0;       // dynamic shared memory per block
  int registers = -1;       // per thread (cudaFuncGetAttributes); -1 if not queried
  int local_bytes = -1;     // spill/stack bytes per thread; -1 if not queried
};

// Is (dtype, level, head_dim, head_dim_v) compiled into this build?
bool ffpa_fwd_compiled(DType dtype, int level, int head_dim, int head_dim_v);

// The launch configuration `ffpa_fwd` would use. num_stages = 0 asks for the heuristic's choice.
// With query_attributes, also reads registers and local memory (needs a CUDA device).
cudaError_t ffpa_fwd_info(DType dtype, int level, int head_dim, int head_dim_v, int num_stages,
                          bool query_attributes, KernelInfo* info);

// Runs the forward kernel on `stream`. params.num_stages = 0 picks the default. Returns
// cudaErrorInvalidValue for a configuration that is not compiled or out of range.
cudaError_t ffpa_fwd(DType dtype, int level, FwdParams params, cudaStream_t stream);

// ---- registry: filled by the generated instantiation list (csrc/generated/) ----
using RunFn = cudaError_t (*)(FwdParams, cudaStream_t);
using InfoFn = cudaError_t (*)(int num_stages, bool query_attributes, KernelInfo*);
struct RegistryEntry {
  DType dtype;
  int level;
  int head_dim;
  int head_dim_v;
  RunFn run;
  InfoFn info;
};
const RegistryEntry* registry_begin();
const RegistryEntry* registry_end();

}  // namespace ffpa::launch
