// Which item hand-offs between a producer warp and consumer warps does compute-sanitizer's racecheck
// accept? (Session 21, for the warp-specialised FA-2 kernel's work counter.) Warp 0 writes a shared
// word, warp 1 reads it, four items:
//   MODE=1  one word; bar.arrive "written" / bar.sync, then bar.arrive "read" / bar.sync before the
//           next write (FA3's scheduler hand-off). Race-free, yet racecheck reports each read against
//           the next write: it accepts one such edge (MODE=2), not a chain of them.
//   MODE=2  the read -> write edge alone (word set before a __syncthreads, read, bar.arrive / bar.sync,
//           written): clean.
//   MODE=3  two words, item i in word i % 2, one bar.sync on both sides per item after the write
//           (the kernel's form, Fa2FwdWs::write_item): clean.
// nvcc -arch=sm_90a -lineinfo -o /tmp/probe scripts/dev/racecheck_arrive_probe.cu
// for m in 1 2 3; do MODE=$m compute-sanitizer --tool racecheck /tmp/probe; done
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }

__global__ void probe(int mode, int* out) {
  __shared__ volatile int word[2];
  const bool producer = threadIdx.x < 32;
  int acc = 0;
  if (mode == 2) {
    if (threadIdx.x == 0) word[0] = 1;
    __syncthreads();
    if (!producer) {
      acc = word[0];
      bar_arrive(2, 64);
    } else {
      bar_sync(2, 64);
      if (threadIdx.x == 0) word[0] = 2;
    }
  }
  const int items = mode == 2 ? 0 : 4;
  for (int i = 0; i < items; ++i) {
    if (mode == 3) {
      if (producer && threadIdx.x == 0) word[i & 1] = i;
      bar_sync(1, 64);
      if (!producer) acc += word[i & 1];
    } else if (producer) {
      if (i > 0) bar_sync(2, 64);
      if (threadIdx.x == 0) word[0] = i;
      bar_arrive(1, 64);
    } else {
      bar_sync(1, 64);
      acc += word[0];
      if (i + 1 < items) bar_arrive(2, 64);
    }
  }
  out[threadIdx.x] = acc;
}

int main() {
  const char* m = std::getenv("MODE");
  const int mode = m != nullptr ? std::atoi(m) : 1;
  int* out = nullptr;
  cudaMalloc(&out, 64 * sizeof(int));
  probe<<<1, 64>>>(mode, out);
  const cudaError_t err = cudaDeviceSynchronize();
  int host[64];
  cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost);
  std::printf("mode %d: %s, consumer sum %d (expect %d)\n", mode, cudaGetErrorString(err), host[32],
              mode == 2 ? 1 : 6);
  return err == cudaSuccess ? 0 : 1;
}
