// ffpa::ptx thread-block-cluster wrappers (sm_90): the blocks of a cluster run at once on SMs of one
// GPC and may read and write each other's shared memory (distributed shared memory) and arrive on
// each other's mbarriers. A shared::cta address (this block's) becomes a shared::cluster address of
// block `rank` by mapa; stores and arrivals through that address reach the peer. The only place that
// spells these (the cluster-scope mbarrier arrival and wait live with the other mbarrier wrappers,
// ptx/mbarrier.cuh).
//
//   block r                                             block 1 - r
//   st.shared::cluster [peer's buffer], x
//   fence.proxy.async.shared::cluster (if wgmma reads it)
//   mbarrier.arrive.release.cluster [peer's bar] --->   mbarrier.try_wait.parity.acquire.cluster [bar]
//                                                       reads the buffer (ld.shared or wgmma)
#pragma once
#include <cstdint>

#include "ffpa/ptx/mbarrier.cuh"  // mbarrier_arrive_cluster, mbarrier_wait_parity<true>

namespace ffpa::ptx {

// This block's rank in its cluster (0 .. cluster size - 1). Volatile, so read where used: the non-volatile
// form let ptxas keep the rank live across the K-sharing pipeline's loop, and the Dv = 640 sharing kernel
// spilled 8 / 32 bytes instead of 4 / 24 (session 30, ptxas -v).
__device__ __forceinline__ uint32_t cluster_ctarank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
#else
  return 0;
#endif
}

// The shared::cluster address of the same offset as shared::cta address `addr` in block `rank`.
__device__ __forceinline__ uint32_t map_shared_rank(uint32_t addr, uint32_t rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
#else
  return addr;
#endif
}

// Store 32 bits at shared::cluster address `addr` (any block of the cluster, this one included).
__device__ __forceinline__ void st_shared_cluster_b32(uint32_t addr, uint32_t x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("st.shared::cluster.b32 [%0], %1;\n" ::"r"(addr), "r"(x) : "memory");
#endif
}

__device__ __forceinline__ void st_shared_cluster_f32(uint32_t addr, float x) {
  st_shared_cluster_b32(addr, __float_as_uint(x));
}

// Stores to shared memory of the cluster (generic proxy) made visible to the async proxy (wgmma
// reading them by descriptor), in whichever block they landed.
__device__ __forceinline__ void fence_proxy_async_shared_cluster() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cluster;\n" ::: "memory");
#endif
}

// Every thread of every block of the cluster (all must execute it, none exited): the blocks' earlier
// writes (barrier initialisation included) are visible cluster-wide after it.
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

}  // namespace ffpa::ptx
