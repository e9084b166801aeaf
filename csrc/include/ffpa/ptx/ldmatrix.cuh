// ffpa::ptx ldmatrix / stmatrix wrappers: warp-cooperative loads (sm_75+) of 8x8 b16 matrices from
// shared memory straight into mma fragment registers, and the stores back (sm_90).
#pragma once
#include <cstdint>

namespace ffpa::ptx {

// Four 8x8 b16 matrices. Lanes 8i..8i+7 give the 8 row addresses (16 bytes each) of matrix i;
// register r[i] of every lane receives matrix i, lane l holding row l/4, columns 2*(l%4)+{0,1}.
__device__ __forceinline__ void ldmatrix_m8n8_x4(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

// Same, transposed: lane l of matrix i receives column l/4, rows 2*(l%4)+{0,1}. Used to read a
// row-major [k][n] tile (V) as the "col" B operand of mma.
__device__ __forceinline__ void ldmatrix_m8n8_x4_trans(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

// Two 8x8 b16 matrices: lanes 0..7 and 8..15 give the row addresses of matrices 0 and 1 (the
// addresses of lanes 16..31 are not read). One k16 x n8 B operand of mma from an [n][k] tile.
__device__ __forceinline__ void ldmatrix_m8n8_x2(uint32_t (&r)[2], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr));
}

// Two 8x8 b16 matrices, transposed: lanes 0..7 and 8..15 give the row addresses of matrices 0 and
// 1 (the addresses of lanes 16..31 are not read). One k16 x n8 B operand of mma from a row-major
// [k][n] tile.
__device__ __forceinline__ void ldmatrix_m8n8_x2_trans(uint32_t (&r)[2], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr));
}

// Store four 8x8 b16 matrices (sm_90): the inverse of ldmatrix_m8n8_x4. Register r[i] of lane l
// holds row l/4, columns 2*(l%4)+{0,1} of matrix i (the m16n8 accumulator layout, packed to b16);
// lanes 8i..8i+7 give the 8 row addresses of matrix i. An epilogue's O tile to shared memory.
__device__ __forceinline__ void stmatrix_m8n8_x4(uint32_t smem_addr, const uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}

// Same, transposed: lane l's r[i] holds column l/4, rows 2*(l%4)+{0,1} of matrix i.
__device__ __forceinline__ void stmatrix_m8n8_x4_trans(uint32_t smem_addr, const uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}

}  // namespace ffpa::ptx
