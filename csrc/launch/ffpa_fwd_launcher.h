// Declaration of the templated FFPA forward launcher; its definition (ffpa_fwd_launch.cuh) is
// compiled only in the generated per-(dtype, head dim) files, so the registry can name every
// instantiation without compiling a kernel.
#pragma once
#include <cuda_runtime_api.h>

#include "ffpa/ffpa_traits.h"
#include "ffpa/params.h"
#include "launch/ffpa_fwd.h"

namespace ffpa::launch {

template <typename Element, int kHeadDim, int kHeadDimV, Level kLevel>
struct FfpaLauncher {
  static cudaError_t run(FwdParams params, cudaStream_t stream);
  static cudaError_t info(int num_stages, bool query_attributes, KernelInfo* out);
};

}  // namespace ffpa::launch
