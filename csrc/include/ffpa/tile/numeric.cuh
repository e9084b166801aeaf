// Element types the kernels take (fp16, bf16): how to pack fp32 pairs into b16x2 registers (and back)
// and which tensor-core instruction multiplies them. Kernels are templated on the element type only
// through this header.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ffpa/ptx/mma.cuh"

namespace ffpa {

template <typename T>
struct Numeric;

template <>
struct Numeric<__half> {
  static __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float2 unpack2(uint32_t v) { return __half22float2(*reinterpret_cast<__half2*>(&v)); }
  static __device__ __forceinline__ void mma_f32acc(float (&d)[4], const uint32_t (&a)[4],
                                                    const uint32_t (&b)[2]) {
    ptx::mma_m16n8k16_row_col_f32_f16(d, a, b);
  }
};

template <>
struct Numeric<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float2 unpack2(uint32_t v) {
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&v));
  }
  static __device__ __forceinline__ void mma_f32acc(float (&d)[4], const uint32_t (&a)[4],
                                                    const uint32_t (&b)[2]) {
    ptx::mma_m16n8k16_row_col_f32_bf16(d, a, b);
  }
};

}  // namespace ffpa
