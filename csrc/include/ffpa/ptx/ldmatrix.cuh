// ffpa::ptx ldmatrix wrappers (sm_75+): warp-cooperative loads of 8x8 b16 matrices from shared
// memory straight into mma fragment registers.
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

}  // namespace ffpa::ptx
