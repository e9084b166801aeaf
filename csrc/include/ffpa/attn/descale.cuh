// The FP8 kernels' descales (kernels/fa2_fwd_sm90_fp8.cuh, ffpa_fwd_sm90_fp8.cuh): FwdParams' q/k/v_descale,
// one float per (batch, head) of its own tensor (strides 0 where broadcast), or none (1).
#pragma once
#include <cstdint>

namespace ffpa::attn {

__device__ __forceinline__ float fp8_descale(const float* d, int64_t batch_stride, int64_t head_stride, int b, int h) {
  return d != nullptr ? __ldg(d + b * batch_stride + h * head_stride) : 1.f;
}

}  // namespace ffpa::attn
