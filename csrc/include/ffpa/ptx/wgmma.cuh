// ffpa::ptx warpgroup MMA support (sm_90a): shared-memory matrix descriptors, the wgmma
// fence / commit / wait bookkeeping and the generic -> async proxy fence. The per-shape
// instructions themselves are generated (wgmma_gen.cuh).
#pragma once
#include <cstdint>

#include "ffpa/ptx/wgmma_gen.cuh"

namespace ffpa::ptx {

// Descriptor of a wgmma operand in the canonical 128-byte-swizzle layout (GmmaSw128Tile):
//   bits  0-13  start address >> 4         bits 32-45  stride byte offset >> 4
//   bits 16-29  leading byte offset >> 4   bits 62-63  swizzle mode (1: 128 B)
// K-major (Q, K): the 8-row core-matrix groups sit sbo = 1024 bytes apart; lbo is unused (1).
// MN-major (V read transposed): lbo = bytes between 64-column chunks, sbo = 1024 bytes between
// 8-row (k) groups. The swizzle is taken from address bits, so chunks are 1024-byte aligned.
__host__ __device__ __forceinline__ constexpr uint64_t gmma_desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes,
                                                                  uint32_t sbo_bytes) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFFu) >> 4) | (static_cast<uint64_t>(lbo_bytes >> 4) << 16) |
         (static_cast<uint64_t>(sbo_bytes >> 4) << 32) | (1ull << 62);
}

// gmma_desc_sw128's fields built once for a tile whose k-steps and chunks start at compile-time byte
// offsets from its base: at(offset) is one 32-bit add where gmma_desc_sw128 of the moved address is a
// mask, a shift, an or and the move of the high word per descriptor (the unrolled k-steps of a wgmma
// loop then issue back to back). Shared addresses are below 256 KB, so the 14-bit start field never
// carries into lbo's.
struct GmmaDescSw128 {
  uint32_t lo, hi;
  __host__ __device__ __forceinline__ constexpr GmmaDescSw128(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes)
      : lo(((smem_addr & 0x3FFFFu) >> 4) | ((lbo_bytes >> 4) << 16)), hi((sbo_bytes >> 4) | (1u << 30)) {}
  __host__ __device__ __forceinline__ constexpr uint64_t at(uint32_t byte_offset) const {
    return (static_cast<uint64_t>(hi) << 32) | (lo + (byte_offset >> 4));
  }
};
static_assert(GmmaDescSw128(0x24400, 16, 1024).at(0x2060) == gmma_desc_sw128(0x26460, 16, 1024) &&
                  GmmaDescSw128(0x1000, 8192, 1024).at(7 * 8192 + 3 * 2048) == gmma_desc_sw128(0xF800 + 0x1000, 8192, 1024) &&
                  GmmaDescSw128(0x38000, 16, 1024).at(0x1FF0) == gmma_desc_sw128(0x39FF0, 16, 1024),
              "a moved descriptor is the descriptor of the moved address (shared addresses below 256 KB)");

// The same in the canonical 32-byte-swizzle layout (mode 3), K-major: rows of 32 bytes (one e4m3
// k-step), 8-row groups 256 bytes apart (sbo), lbo unused; the FP8 FFPA kernel's V^T stages (32 keys
// of each output column), as TMA's 32-byte swizzle writes them. Groups are 256-byte aligned.
__host__ __device__ __forceinline__ uint64_t gmma_desc_sw32_k(uint32_t smem_addr) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFFu) >> 4) | (uint64_t{1} << 16) | (uint64_t{256 >> 4} << 32) |
         (3ull << 62);
}

// Orders this thread's earlier register writes (accumulators, A fragments) before the next
// wgmma.mma_async of its warpgroup.
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit_group() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

// Wait until at most N committed wgmma groups of the warpgroup are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// Pins accumulator registers across an asynchronous wgmma: the compiler may not move or copy
// them between the issue and the wait.
template <int kN>
__device__ __forceinline__ void wgmma_fence_operand(float (&d)[kN][4]) {
#pragma unroll
  for (int n = 0; n < kN; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[n][e])::"memory");
}

// Makes this thread's generic-proxy shared-memory writes (cp.async fills, st.shared) visible to
// the async proxy (wgmma operand reads); a barrier after it publishes them to the warpgroup.
__device__ __forceinline__ void fence_proxy_async_shared() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

}  // namespace ffpa::ptx
