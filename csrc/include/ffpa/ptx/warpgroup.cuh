// ffpa::ptx warp-specialisation wrappers (sm_90 / sm_90a): named barriers, which let a subset of
// a block's warps (a producer and its consumers, or two consumer warpgroups taking turns) meet
// without stopping the rest, and setmaxnreg, which moves registers between warpgroups (a TMA
// producer needs few, the MMA consumers many). The only place that spells these.
#pragma once
#include <cstdint>

namespace ffpa::ptx {

// Named barrier `id` (1..15; 0 is __syncthreads') for `threads` threads (a multiple of 32): wait
// until that many have arrived (bar.sync) ...
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
#if defined(__CUDA_ARCH__)
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#endif
}

// The same wait where the threads reach it from different instructions (two warpgroups running
// different template instances of their code): bar.sync is barrier.sync.aligned, which asks every
// thread of the block to execute the same instruction (compute-sanitizer synccheck flags it).
__device__ __forceinline__ void named_barrier_sync_unaligned(uint32_t id, uint32_t threads) {
#if defined(__CUDA_ARCH__)
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#endif
}

// ... or arrive without waiting (the signalling side of a producer/consumer hand-off).
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
#if defined(__CUDA_ARCH__)
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#endif
}

// Raise (kInc) or lower this warpgroup's per-thread register limit to kRegs (24..256, a multiple of
// 8). Every warp of the warpgroup must execute it; the kernel's launch must leave the registers a
// raise asks for free (__launch_bounds__ with the block's thread count and 1 block per SM).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0, "setmaxnreg takes 24..256 in steps of 8");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0, "setmaxnreg takes 24..256 in steps of 8");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

}  // namespace ffpa::ptx
