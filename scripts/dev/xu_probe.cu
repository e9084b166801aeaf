// Development probe (session 47, not yet run): which issue pipes the softmax's instructions share on one SM
// sub-partition (SMSP). Warps w and w + 4 of a block run on the same SMSP. Each case times a loop of independent
// instructions (8 chains, so throughput, not latency) in warp 0, alone or with warp 4 running another stream:
//   ex2   ex2.approx.ftz.f32 (MUFU.EX2)           cvt   cvt.rn.bf16x2.f32 (F2FP.BF16.F32.PACK_AB)
//   ffma  fma.rn.f32                               intpk the bf16 pair rounded by integer ops (add, shift, prmt)
// If ex2 + cvt in one warp take about the sum of their times alone, the FA-2 kernels' P packing (32 cvt a thread a
// tile) competes with the softmax's 64 ex2 for the MUFU/XU pipe, and an integer packing could move it off.
// Build and run on the device: nvcc -O3 -arch=sm_90a -o /tmp/xu scripts/dev/xu_probe.cu && /tmp/xu
#include <cstdint>
#include <cstdio>

constexpr int kIters = 4096;

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ uint32_t cvt2(float a, float b) {
  uint32_t r;
  asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
}
__device__ __forceinline__ uint32_t intpk(float a, float b) {  // round to nearest even on the integer pipe
  uint32_t ua = __float_as_uint(a), ub = __float_as_uint(b);
  ua += 0x7fffu + ((ua >> 16) & 1u);
  ub += 0x7fffu + ((ub >> 16) & 1u);
  uint32_t r;
  asm volatile("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(r) : "r"(ua), "r"(ub));
  return r;
}

enum Op { kNone = 0, kEx2, kCvt, kFfma, kIntpk, kEx2Cvt, kEx2Intpk };

// Warp 0 / 4 stream: 8 independent chains a round (cvt / intpk: a fresh pair each from an FADD, the results folded
// into per-chain words, so the conversions themselves are independent).
template <int op>
__device__ __forceinline__ void stream(float (&v)[8], uint32_t (&a)[8]) {
#pragma unroll 1
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      switch (op) {  // (a constant: one case survives)
        case kEx2: v[c] = ex2(v[c]); break;
        case kCvt: v[c] += 1e-7f; a[c] ^= cvt2(v[c], v[c ^ 1]); break;
        case kFfma: v[c] = fmaf(v[c], 0.999f, 1e-7f); break;
        case kIntpk: v[c] += 1e-7f; a[c] ^= intpk(v[c], v[c ^ 1]); break;
        case kEx2Cvt:  // 2 ex2 : 1 cvt, as a tile's softmax and P's packing
          v[c] = ex2(v[c]);
          if (c % 2 == 1) a[c] ^= cvt2(v[c - 1], v[c]);
          break;
        case kEx2Intpk:
          v[c] = ex2(v[c]);
          if (c % 2 == 1) a[c] ^= intpk(v[c - 1], v[c]);
          break;
        default: break;
      }
    }
  }
}

__device__ __forceinline__ void run(int op, float (&v)[8], uint32_t (&a)[8]) {
  switch (op) {
    case kEx2: stream<kEx2>(v, a); break;
    case kCvt: stream<kCvt>(v, a); break;
    case kFfma: stream<kFfma>(v, a); break;
    case kIntpk: stream<kIntpk>(v, a); break;
    case kEx2Cvt: stream<kEx2Cvt>(v, a); break;
    case kEx2Intpk: stream<kEx2Intpk>(v, a); break;
    default: break;
  }
}

__global__ void probe(int op0, int op4, long long* cycles, uint32_t* sink) {
  const int warp = threadIdx.x / 32;
  float v[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) v[c] = -0.001f * (threadIdx.x + c);
  uint32_t a[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) a[c] = threadIdx.x + c;
  __syncthreads();
  const long long t0 = clock64();
  if (warp == 0 || warp == 4) run(warp == 0 ? op0 : op4, v, a);
  const long long t1 = clock64();
  if (threadIdx.x % 32 == 0) cycles[warp] = t1 - t0;
  uint32_t s = 0;
#pragma unroll
  for (int c = 0; c < 8; ++c) s ^= a[c] ^ __float_as_uint(v[c]);
  sink[threadIdx.x] = s;
}

int main() {
  const char* names[] = {"-", "ex2", "cvt", "ffma", "intpk", "ex2+cvt/2", "ex2+intpk/2"};
  const int cases[][2] = {{kEx2, kNone},  {kCvt, kNone},  {kFfma, kNone}, {kIntpk, kNone}, {kEx2Cvt, kNone},
                          {kEx2Intpk, kNone}, {kEx2, kEx2}, {kEx2, kCvt},  {kEx2, kIntpk}, {kEx2, kFfma},
                          {kCvt, kCvt}};
  long long* d_cycles;
  uint32_t* d_sink;
  cudaMalloc(&d_cycles, 8 * sizeof(long long));
  cudaMalloc(&d_sink, 256 * sizeof(uint32_t));
  std::printf("cycles per element slot of warp 0 (8 chains x %d rounds; warp 4 on the same SMSP)\n", kIters);
  for (const auto& cs : cases) {
    long long best = -1, best4 = 0;
    for (int rep = 0; rep < 5; ++rep) {
      cudaMemset(d_cycles, 0, 8 * sizeof(long long));
      probe<<<1, 256>>>(cs[0], cs[1], d_cycles, d_sink);
      long long h[8];
      cudaMemcpy(h, d_cycles, sizeof(h), cudaMemcpyDeviceToHost);
      if (best < 0 || h[0] < best) best = h[0], best4 = h[4];
    }
    const double per = static_cast<double>(best) / (8.0 * kIters);
    std::printf("warp0 %-12s warp4 %-6s : %6.2f cycles a slot (warp 4: %6.2f)\n", names[cs[0]], names[cs[1]], per,
                static_cast<double>(best4) / (8.0 * kIters));
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
