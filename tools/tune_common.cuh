// Shared by the stand-alone tile sweeps (tools/tune_l1.cu, tools/tune_fa2.cu): error check,
// random fill, max |a - b| and the CUDA-event median timer. Not part of the library.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ffpa/params.h"

using Elem = __nv_bfloat16;
#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

__global__ void fill_random(Elem* x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu, h ^= h >> 16;
    x[i] = __float2bfloat16((h & 0xffffff) / float(0x1000000) * 2.f - 1.f);
  }
}

__global__ void max_abs_diff(const Elem* a, const Elem* b, int64_t n, float* out) {
  float m = 0.f;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float d = fabsf(__bfloat162float(a[i]) - __bfloat162float(b[i]));
    m = (d == d) ? fmaxf(m, d) : INFINITY;
  }
  atomicMax(reinterpret_cast<int*>(out), __float_as_int(m));  // non-negative floats order as ints
}

// Params of a dense (B, H, N, D) self-attention problem: MHA, contiguous BHND, no mask,
// top-left causal or none, softmax scale 1/sqrt(D).
inline ffpa::FwdParams dense_params(const Elem* q, const Elem* k, const Elem* v, Elem* o, int B, int H, int N, int D,
                                    bool causal, int stages) {
  ffpa::FwdParams p{};
  p.q = q, p.k = k, p.v = v, p.o = o, p.lse = nullptr;
  const int64_t row = D, head = (int64_t)N * D, batch = head * H;
  p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = batch;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = head;
  p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = row;
  p.batch = B, p.heads_q = H, p.heads_kv = H, p.len_q = N, p.len_kv = N;
  p.head_dim = D, p.head_dim_v = D;
  p.scale = 1.f / std::sqrt((float)D), p.scale_log2 = p.scale * 1.4426950408889634f;
  p.is_causal = causal, p.causal_offset = 0, p.num_stages = stages;
  return p;
}

// Largest |a - b| over n elements (inf if either holds a NaN).
inline float max_diff(const Elem* a, const Elem* b, int64_t n) {
  float* d_diff;
  float diff = 0.f;
  CK(cudaMalloc(&d_diff, 4));
  CK(cudaMemset(d_diff, 0, 4));
  max_abs_diff<<<264, 256>>>(a, b, n, d_diff);
  CK(cudaMemcpy(&diff, d_diff, 4, cudaMemcpyDeviceToHost));
  CK(cudaFree(d_diff));
  return diff;
}

// Median of `iters` CUDA-event timings of launch() after `warmup` untimed calls, in ms.
template <typename Launch>
double median_ms(Launch launch, int warmup, int iters) {
  std::vector<float> ms;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < warmup + iters; ++i) {
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    if (i >= warmup) ms.push_back(t);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}
