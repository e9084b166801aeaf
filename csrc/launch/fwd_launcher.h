// Declarations of the templated launchers, one per kernel family; their definitions
// (ffpa_fwd_launch.cuh, fa2_fwd_launch.cuh, decode_launch.cuh) are compiled only in the generated
// per-(family, dtype, head dims, accumulation) files, so the registry can name every instantiation
// without compiling a kernel.
#pragma once
#include <cuda_runtime_api.h>

#include "ffpa/traits/ffpa_traits.h"
#include "ffpa/params.h"
#include "launch/ffpa_fwd.h"

namespace ffpa::launch {

template <typename Element, int kHeadDim, int kHeadDimV, Level kLevel, AccMode kAcc>
struct FfpaLauncher {
  struct Impl;
  static cudaError_t run(FwdParams params, cudaStream_t stream);
  static cudaError_t info(int num_stages, bool query_attributes, KernelInfo* out);
  // Bytes of fp32 workspace run() needs in params.o_accum (L3; 0 for L1/L2, -1 on error).
  static int64_t workspace_bytes(FwdParams params);
};

// FFPA level 1 on Hopper (ffpa_fwd_sm90_ws.cuh, sm_90a builds): the warp-specialised TMA kernel,
// falling back to FfpaLauncher's L1 (fp32 accumulation; L3 above Dv = 1024, with the workspace
// workspace_bytes sizes for that case only) where TMA cannot take the tensors.
template <typename Element, int kHeadDim, int kHeadDimV>
struct FfpaWsLauncher {
  struct Impl;
  static cudaError_t run(FwdParams params, cudaStream_t stream);
  static cudaError_t info(int num_stages, bool query_attributes, KernelInfo* out);
  static int64_t workspace_bytes(FwdParams params);
};

// FA-2: kMma picks the kernel, Fa2Mma::kSync (fa2_fwd_sm80.cuh) or Fa2Mma::kWgmma (fa2_fwd_sm90.cuh,
// sm_90a builds only); the registry holds one entry per kernel and the chooser picks.
template <typename Element, int kHeadDim, int kHeadDimV, Fa2Mma kMma>
struct Fa2Launcher {
  struct Impl;
  static cudaError_t run(FwdParams params, cudaStream_t stream);
  static cudaError_t info(int num_stages, bool query_attributes, KernelInfo* out);
  // Bytes of fp32 workspace run() takes in params.o_accum: the warp-specialised kernel's split tail
  // (kernels/fa2_ws_split.cuh) where the call splits, else 0.
  static int64_t workspace_bytes(FwdParams params);
};

// FP8 (e4m3) forward on Hopper (kernels/fa2_fwd_sm90_fp8.cuh, sm_90a builds): FA-2 style, V
// transposed by a pre-pass into params.vt (the op sizes it), output bf16 or fp16 (params.out_fp16).
template <typename Element, int kHeadDim, int kHeadDimV>
struct Fp8Launcher {
  struct Impl;
  static cudaError_t run(FwdParams params, cudaStream_t stream);
  static cudaError_t info(int num_stages, bool query_attributes, KernelInfo* out);
};

// Split-KV decode (kernels/decode_sm80.cuh).
template <typename Element, int kHeadDim, int kHeadDimV>
struct DecodeLauncher {
  struct Impl;
  // Launches the split kernel and, with p.num_splits > 1, the merge (p.o_part / p.lse_part sized
  // by the caller for p.num_splits).
  static cudaError_t run(DecodeParams params, cudaStream_t stream);
  static cudaError_t info(int num_stages, bool query_attributes, KernelInfo* out);
  // The split count (auto where params.num_splits is 0) and the merge's form for these sizes on
  // the current device (launch/heuristics.h).
  static DecodePlan plan(DecodeParams params);
};

// Split-KV decode on Hopper (kernels/decode_sm90_ws.cuh, sm_90a builds): the wgmma + TMA kernel for
// calls with many rows per KV head, DecodeLauncher's kernel for the rest.
template <typename Element, int kHeadDim, int kHeadDimV>
struct DecodeWsLauncher {
  struct Impl;
  static cudaError_t run(DecodeParams params, cudaStream_t stream);
  static cudaError_t info(int num_stages, bool query_attributes, KernelInfo* out);
  static DecodePlan plan(DecodeParams params);
};

}  // namespace ffpa::launch
