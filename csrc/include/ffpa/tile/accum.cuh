// One m16n8 MMA accumulator fragment in fp32 or fp16, behind one interface, so a kernel's
// accumulation mode (ffpa::AccMode) is a type choice rather than a second code path.
//
// Which elements a lane holds (g = lane / 4, t = lane % 4), for both forms:
//   element e = 0, 1 : C[g    ][2t + e]
//   element e = 2, 3 : C[g + 8][2t + e - 2]
// fp32: one register per element. fp16: one f16x2 register per row pair (h[0] row g, h[1] row g+8).
#pragma once
#include <cstdint>
#include <cuda_fp16.h>

#include "ffpa/tile/numeric.cuh"
#include "ffpa/ptx/mma.cuh"

namespace ffpa {

template <typename Element, bool kHalf>
struct AccFrag;

template <typename Element>
struct AccFrag<Element, false> {
  float v[4];
  __device__ __forceinline__ void zero() { v[0] = v[1] = v[2] = v[3] = 0.f; }
  __device__ __forceinline__ float get(int e) const { return v[e]; }
  // Row g scaled by s0, row g + 8 by s1 (the online-softmax rescale).
  __device__ __forceinline__ void scale_rows(float s0, float s1) {
    v[0] *= s0, v[1] *= s0, v[2] *= s1, v[3] *= s1;
  }
  __device__ __forceinline__ void mma(const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    Numeric<Element>::mma_f32acc(v, a, b);
  }
};

template <>
struct AccFrag<__half, true> {
  uint32_t h[2];
  __device__ __forceinline__ void zero() { h[0] = h[1] = 0u; }
  __device__ __forceinline__ float get(int e) const {
    const __half2 x = *reinterpret_cast<const __half2*>(&h[e / 2]);
    return e % 2 == 0 ? __low2float(x) : __high2float(x);
  }
  __device__ __forceinline__ void scale_rows(float s0, float s1) {
    __half2* x = reinterpret_cast<__half2*>(h);
    x[0] = __hmul2(x[0], __float2half2_rn(s0));
    x[1] = __hmul2(x[1], __float2half2_rn(s1));
  }
  __device__ __forceinline__ void mma(const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    ptx::mma_m16n8k16_row_col_f16_f16(h, a, b);
  }
};

}  // namespace ffpa
