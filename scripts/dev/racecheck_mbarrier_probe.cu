// Which mbarrier hand-offs of an item index does compute-sanitizer's racecheck accept? (Sessions 30-31, for
// the FA-2 kernel's item hand-off through Q's full barrier. Answer on an H200: modes 1 and 3 report 4
// hazards a site, modes 2 and 4 none; the kernel reads the index in lane 0, docs/hopper_profile.md.) Warp 0 (lane 0) writes a
// shared word, warps 1 and 2 (the consumers) read it, six items, one slot:
//   producer:  wait empty (parity ^ 1) -> write the word -> complete full    (FULL below)
//   consumers: wait full -> read the word -> __syncwarp -> lane 0 arrives on empty (count 2)
// MODE:
//   1  every lane reads; full completed by a plain arrive
//   2  lane 0 reads and shuffles; full completed by a plain arrive
//   3  every lane reads; full completed by arrive.expect_tx + a 16-byte bulk copy (as Q's TMA load)
//   4  lane 0 reads and shuffles; full as in 3 (the patch's form)
// Each mode is race-free by the PTX memory model (the arrivals release, the waits acquire, __syncwarp
// orders a warp's lanes); what is asked is which ones racecheck reports.
// nvcc -arch=sm_90a -lineinfo -o /tmp/mbprobe scripts/dev/racecheck_mbarrier_probe.cu
// for m in 1 2 3 4; do MODE=$m compute-sanitizer --tool racecheck /tmp/mbprobe; done
#include <cstdint>
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ uint32_t smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mb_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mb_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mb_arrive_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mb_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar) : "memory");
}

__global__ void probe(int mode, const int4* src, int* out) {
  __shared__ alignas(16) int4 payload;  // the bulk copy's destination (modes 3, 4)
  __shared__ alignas(8) uint64_t bars[2];  // full, empty
  __shared__ int word;
  const uint32_t full = smem(&bars[0]), empty = smem(&bars[1]);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    mb_init(full, 1);
    mb_init(empty, 2);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const bool lane0_reads = mode == 2 || mode == 4, bulk = mode >= 3;
  constexpr int kItems = 6;
  int acc = 0;
  uint32_t phase = 0;
  for (int i = 0; i < kItems; ++i, phase ^= 1u) {
    if (warp == 0) {
      if (lane == 0) {
        mb_wait(empty, phase ^ 1u);
        word = i;
        if (bulk) {
          mb_arrive_tx(full, sizeof(int4));
          bulk_copy(smem(&payload), src, sizeof(int4), full);
        } else {
          mb_arrive(full);
        }
      }
    } else {
      mb_wait(full, phase);
      int t = 0;
      if (!lane0_reads || lane == 0) t = *static_cast<volatile int*>(&word);
      if (lane0_reads) t = __shfl_sync(0xffffffffu, t, 0);
      acc += t;
      __syncwarp();
      if (lane == 0) mb_arrive(empty);
    }
  }
  out[threadIdx.x] = acc;
}

int main() {
  const char* m = std::getenv("MODE");
  const int mode = m != nullptr ? std::atoi(m) : 1;
  int* out = nullptr;
  int4* src = nullptr;
  cudaMalloc(&out, 96 * sizeof(int));
  cudaMalloc(&src, sizeof(int4));
  cudaMemset(src, 0, sizeof(int4));
  probe<<<1, 96>>>(mode, src, out);
  const cudaError_t err = cudaDeviceSynchronize();
  int host[96];
  cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost);
  std::printf("mode %d: %s, consumer sums %d %d (expect 15)\n", mode, cudaGetErrorString(err), host[32], host[95]);
  return err == cudaSuccess ? 0 : 1;
}
