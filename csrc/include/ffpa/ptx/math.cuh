// ffpa::ptx fast math: the base-2 exponential the softmax uses (MUFU.EX2), spelled once.
#pragma once

namespace ffpa::ptx {

// 2^x with flush-to-zero; ex2.approx(-inf) = +0, which the online softmax relies on for masked
// scores. Max relative error ~2^-22, far below the b16 rounding of P that follows.
__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace ffpa::ptx
