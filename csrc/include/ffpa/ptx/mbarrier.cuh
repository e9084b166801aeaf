// ffpa::ptx mbarrier wrappers (sm_90): the shared-memory transaction barriers a TMA pipeline waits
// on. A barrier completes a phase when its pending arrivals reach zero AND the transaction bytes it
// was told to expect (expect_tx) have landed (the TMA engine counts them down); waiters poll the
// phase's parity. The only place in the tree that spells these instructions.
//
//   producer                               consumers
//   arrive_expect_tx(bar, bytes) ---.
//   tma_load_*(.., bar) ------------+--->  wait_parity(bar, phase)   (phase 0, 1, 0, ... per use)
//                                   '--->  the tile is in shared memory
#pragma once
#include <cstdint>

namespace ffpa::ptx {

// Initialise the barrier at shared address `bar` (8 bytes, 8-byte aligned) for `count` arrivals per
// phase. One thread; then fence_barrier_init() and a block barrier before anyone uses it.
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}

// Makes initialised barriers visible to the async proxy (the TMA engine) and the cluster.
__device__ __forceinline__ void fence_barrier_init() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// One arrival, and `bytes` more transaction bytes expected in the current phase (the producer's
// call before it issues the loads that complete them).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}

// One arrival (a consumer releasing a stage, or a producer without transaction bytes).
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}

// `count` arrivals at once (one thread answering for several warps, e.g. after its own wait that
// covers their reads too).
__device__ __forceinline__ void mbarrier_arrive_n(uint32_t bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}

// One arrival on the mbarrier at shared::cluster address `bar` (this block's or a peer block's of
// the cluster: ptx/cluster.cuh maps addresses), releasing this thread's earlier writes (and those
// ordered before them) at cluster scope.
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}

// One arrival on the mbarrier at shared::cluster address `bar` (a peer block's, mapped), with the
// default release at block scope: enough to say "done reading a stage" (the reads completed before it),
// not to publish this thread's writes to the peer. The form a consumer releases a shared stage with:
// the cluster-scope release above made each of these cost a fence.
__device__ __forceinline__ void mbarrier_arrive_remote(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}

// Whether the phase of parity `parity` has completed (one poll; the hardware may suspend the
// thread for a while before answering false). kCluster: acquire at cluster scope what the arrivals
// released (a peer block's stores into this block's shared memory included), else at the block's.
template <bool kCluster = false>
__device__ __forceinline__ bool mbarrier_try_wait_parity(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done;
  if constexpr (kCluster)
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  else
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done != 0;
#else
  return true;
#endif
}

// Block until the phase of parity `parity` has completed (kCluster as above).
template <bool kCluster = false>
__device__ __forceinline__ void mbarrier_wait_parity(uint32_t bar, uint32_t parity) {
  while (!mbarrier_try_wait_parity<kCluster>(bar, parity)) {
  }
}

}  // namespace ffpa::ptx
