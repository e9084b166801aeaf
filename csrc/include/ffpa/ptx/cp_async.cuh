// ffpa::ptx cp.async wrappers (sm_80+): asynchronous 16-byte global->shared copies and their
// commit/wait group bookkeeping. The only place in the tree that spells these instructions.
#pragma once
#include <cstdint>

namespace ffpa::ptx {

// Copy 16 bytes global -> shared, bypassing L1 (.cg). When `valid` is false the 16 shared bytes
// are zero-filled (src-size 0) and the global address is not read, so tails past L or S load zeros.
__device__ __forceinline__ void cp_async_cg_16(uint32_t smem_addr, const void* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem),
               "r"(src_size)
               : "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit_group() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Wait until at most N committed groups are still in flight (N is an immediate).
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// Runtime-N variant for pipelines whose depth is a launch parameter (N in 0..3).
__device__ __forceinline__ void cp_async_wait_group_dyn(int n) {
  switch (n) {
    case 0: cp_async_wait_group<0>(); break;
    case 1: cp_async_wait_group<1>(); break;
    case 2: cp_async_wait_group<2>(); break;
    default: cp_async_wait_group<3>(); break;
  }
}

// Runtime-N variant for N in 0..kMax: a chain of compile-time branches, folded to the one wait
// where N is a constant after unrolling (a loop index of an unrolled loop).
template <int kMax>
__device__ __forceinline__ void cp_async_wait_group_upto(int n) {
  if constexpr (kMax <= 0) {
    cp_async_wait_group<0>();
  } else {
    if (n >= kMax) cp_async_wait_group<kMax>();
    else cp_async_wait_group_upto<kMax - 1>(n);
  }
}

__device__ __forceinline__ uint32_t smem_u32addr(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

}  // namespace ffpa::ptx
