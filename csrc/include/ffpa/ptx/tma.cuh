// ffpa::ptx TMA wrappers (sm_90): tile loads by the tensor-memory accelerator. A tensor map
// (CUtensorMap, encoded on the host by launch/tma_desc.h from the tensor's sizes and strides and
// passed to the kernel as a __grid_constant__ parameter) describes the global tensor, the box one
// load moves and the shared-memory swizzle; a load names the box's starting coordinates (innermost
// first, elements) and the mbarrier whose transaction count its bytes complete. Coordinates past
// the tensor's end read zeros (and still count their bytes). The only place that spells these.
#pragma once
#include <cstdint>

namespace ffpa::ptx {

// Fetch the tensor map into the TMA unit's cache ahead of the first load (`tmap`: its generic
// address, e.g. of the __grid_constant__ parameter).
__device__ __forceinline__ void tma_prefetch_map(const void* tmap) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tmap)) : "memory");
#endif
}

// Load the box at (c0, c1) of a rank-2 map into shared address `dst`; completes on barrier `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* tmap, uint32_t bar, int c0, int c1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
#endif
}

// The same for a rank-3 map (c0 innermost).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* tmap, uint32_t bar, int c0, int c1, int c2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#endif
}

// The same for a rank-4 map (c0 innermost): (head dim, position, head, batch) of attention tensors.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* tmap, uint32_t bar, int c0, int c1, int c2,
                                            int c3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#endif
}

// The same for a rank-5 map (c0 innermost): decode's packed queries (head dim, query head in the KV
// head's group, query position, KV head, batch).
__device__ __forceinline__ void tma_load_5d(uint32_t dst, const void* tmap, uint32_t bar, int c0, int c1, int c2,
                                            int c3, int c4) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
#endif
}

// Multicast form (sm_90, inside a cluster): the same box written at shared address `dst` of every
// block whose bit is set in `cta_mask` (cluster ranks), each copy completing bytes on the barrier at
// `bar`'s offset in that block. One block's load feeds several: each destination's barrier expects
// the bytes (its own arrive_expect_tx), whichever block issued them.
__device__ __forceinline__ void tma_load_4d_multicast(uint32_t dst, const void* tmap, uint32_t bar, int c0, int c1,
                                                      int c2, int c3, uint16_t cta_mask) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, %4, %5, %6}], [%2], %7;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "h"(cta_mask)
      : "memory");
#endif
}

// Store the box at (c0, c1, c2, c3) of a rank-4 map from shared address `src` (the inverse of
// tma_load_4d: the map's swizzle read back); elements past the tensor's end are not written. Asynchronous:
// tma_store_commit() closes the issuing thread's group, tma_store_wait_read<N>() waits until at most N of
// its groups still read shared memory (src reusable), tma_store_wait<N>() until at most N are unfinished.
// The writes to src must be made visible to the async proxy first (fence.proxy.async.shared::cta).
__device__ __forceinline__ void tma_store_4d(const void* tmap, uint32_t src, int c0, int c1, int c2, int c3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(tmap)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
#endif
}
__device__ __forceinline__ void tma_store_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}
template <int N>
__device__ __forceinline__ void tma_store_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace ffpa::ptx
