// ffpa::ptx FP8 (e4m3) conversions for the FP8 kernel (sm_89+ cvt; the kernel runs on sm_90a).
#pragma once
#include <cstdint>

namespace ffpa::ptx {

// Four fp32 values to e4m3 (round to nearest, saturating to +-448), x0 in the lowest byte: one
// register of an 8-bit MMA A fragment.
__device__ __forceinline__ uint32_t pack4_e4m3(float x0, float x1, float x2, float x3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint16_t lo, hi;  // cvt puts its first source in the upper byte
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(x1), "f"(x0));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(x3), "f"(x2));
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
#else
  return 0u;
#endif
}

// Two fp32 values to e4m3 (as above), x0 in the lower byte: two adjacent bytes of a row in memory.
__device__ __forceinline__ uint16_t pack2_e4m3(float x0, float x1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint16_t x;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(x) : "f"(x1), "f"(x0));
  return x;
#else
  return 0;
#endif
}

}  // namespace ffpa::ptx
