// ffpa::ptx mma.sync wrappers (sm_80+): the m16n8k16 tensor-core products with fp32 accumulation,
// and with fp16 accumulation for fp16 inputs.
//
// Fragment layout of m16n8k16 (g = lane / 4, t = lane % 4), each register holding two b16 values:
//   A (16x16, row):  a0 = A[g   ][2t..2t+1]  a1 = A[g+8][2t..2t+1]
//                    a2 = A[g   ][2t+8..+9]  a3 = A[g+8][2t+8..+9]
//   B (16x8,  col):  b0 = B[2t..2t+1][g]     b1 = B[2t+8..+9][g]
//   C/D (16x8, f32): c0,c1 = C[g][2t..2t+1]  c2,c3 = C[g+8][2t..2t+1]
//   C/D (16x8, f16): c0 = C[g][2t..2t+1] (one f16x2)    c1 = C[g+8][2t..2t+1]
#pragma once
#include <cstdint>

namespace ffpa::ptx {

__device__ __forceinline__ void mma_m16n8k16_row_col_f32_f16(float (&d)[4], const uint32_t (&a)[4],
                                                            const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

__device__ __forceinline__ void mma_m16n8k16_row_col_f32_bf16(float (&d)[4], const uint32_t (&a)[4],
                                                             const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// fp16 inputs, fp16 accumulator (half the accumulator registers of the f32 form).
__device__ __forceinline__ void mma_m16n8k16_row_col_f16_f16(uint32_t (&d)[2], const uint32_t (&a)[4],
                                                            const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};\n"
      : "+r"(d[0]), "+r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

}  // namespace ffpa::ptx
