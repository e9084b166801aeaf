// Declarations of the templated forward launchers, one per kernel family; their definitions
// (ffpa_fwd_launch.cuh, fa2_fwd_launch.cuh) are compiled only in the generated per-(family,
// dtype, head dim) files, so the registry can name every instantiation without compiling a kernel.
#pragma once
#include <cuda_runtime_api.h>

#include "ffpa/ffpa_traits.h"
#include "ffpa/params.h"
#include "launch/ffpa_fwd.h"

namespace ffpa::launch {

template <typename Element, int kHeadDim, int kHeadDimV, Level kLevel>
struct FfpaLauncher {
  struct Impl;
  static cudaError_t run(FwdParams params, cudaStream_t stream);
  static cudaError_t info(int num_stages, bool query_attributes, KernelInfo* out);
};

template <typename Element, int kHeadDim, int kHeadDimV>
struct Fa2Launcher {
  struct Impl;
  static cudaError_t run(FwdParams params, cudaStream_t stream);
  static cudaError_t info(int num_stages, bool query_attributes, KernelInfo* out);
};

}  // namespace ffpa::launch
