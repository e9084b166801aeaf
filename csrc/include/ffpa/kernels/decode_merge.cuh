// The second kernel of split-KV decode: the splits' normalised fp32 partials and base-2 LSEs
// (DecodeParams::o_part / lse_part, written by kernels/decode_sm80.cuh) merged into the output and
// its natural-log LSE, with the merge weights and guards of attn/state.cuh.
#pragma once
#include <cstdint>
#include <math_constants.h>

#include "ffpa/attn/state.cuh"
#include "ffpa/constants.h"
#include "ffpa/params.h"
#include "ffpa/tile/numeric.cuh"

namespace ffpa::kernels {

// Combines the splits of one packed row: weights exp2(lse_s - max) (an empty split weighs 0; its
// partial is written as zeros), output sum_s w_s O_s / sum_s w_s in the output dtype, LSE in
// natural log. Warp 0 reads the splits' LSEs in parallel (a lane per split) and leaves the weights
// in shared memory. Then the block's threads take 4 of its (up to) 128 columns each and an
// interleaved share of the splits (a batch of one with long contexts has few rows and many splits:
// the loads of one row spread over many threads); the shares are added through shared memory.
constexpr int kMaxMergeSplits = 256;  // launch::kMaxDecodeSplits
constexpr int kMergeThreads = 128;
constexpr int kMergeCols = 128;  // output columns of one merge block (grid y: Dv / kMergeCols)

template <typename Element>
__global__ void __launch_bounds__(kMergeThreads) decode_merge_kernel(DecodeParams p) {
  __shared__ float weight[kMaxMergeSplits];
  __shared__ float total[2];  // 1 / sum of weights, natural-log LSE
  __shared__ float4 part[kMergeThreads];
  const int group = p.heads_q / p.heads_kv;
  const int rows = group * p.len_q;
  const int64_t item = blockIdx.x;  // (batch, kv head, packed row)
  const int row = static_cast<int>(item % rows);
  const int64_t bh = item / rows;
  const int head_kv = static_cast<int>(bh % p.heads_kv), batch = static_cast<int>(bh / p.heads_kv);
  const int64_t split_stride = static_cast<int64_t>(p.batch) * p.heads_kv * rows;
  const int splits = min(p.num_splits, kMaxMergeSplits);
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float mx = -CUDART_INF_F;
    for (int s = lane; s < splits; s += 32) mx = fmaxf(mx, p.lse_part[s * split_stride + item]);
#pragma unroll
    for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0.f;
    for (int s = lane; s < splits; s += 32) {
      const float w = attn::merge_weight(p.lse_part[s * split_stride + item], mx);
      weight[s] = w;
      sum += w;
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) {
      total[0] = attn::inv_row_sum(sum);
      total[1] = sum > 0.f ? (mx + __log2f(sum)) * kLn2 : -CUDART_INF_F;
    }
  }
  __syncthreads();
  const float inv = total[0];
  const int lq = row / group, hq = head_kv * group + row % group;
  Element* o = static_cast<Element*>(p.o) + batch * p.o_batch_stride + lq * p.o_row_stride + hq * p.o_head_stride;
  // This block's columns: kMergeCols from blockIdx.y * kMergeCols, 4 a thread; the threads left
  // over take interleaved shares of the splits.
  const int cols = min(kMergeCols, p.head_dim_v - static_cast<int>(blockIdx.y) * kMergeCols);
  const int col_groups = cols / 4;
  const int shares = kMergeThreads / col_groups;
  const int share = threadIdx.x / col_groups;  // >= shares: idle in the sums
  const int c = static_cast<int>(blockIdx.y) * kMergeCols + 4 * (threadIdx.x % col_groups);
  const bool active = share < shares;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (active) {
#pragma unroll 4
    for (int s = share; s < splits; s += shares) {
      const float wgt = weight[s];
      const float4 x = *reinterpret_cast<const float4*>(p.o_part + (s * split_stride + item) * p.head_dim_v + c);
      acc.x += wgt * x.x, acc.y += wgt * x.y, acc.z += wgt * x.z, acc.w += wgt * x.w;
    }
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  if (active && share == 0) {
    for (int t = 1; t < shares; ++t) {
      const float4 x = part[threadIdx.x + t * col_groups];
      acc.x += x.x, acc.y += x.y, acc.z += x.z, acc.w += x.w;
    }
    uint2 packed;
    packed.x = Numeric<Element>::pack2(acc.x * inv, acc.y * inv);
    packed.y = Numeric<Element>::pack2(acc.z * inv, acc.w * inv);
    *reinterpret_cast<uint2*>(o + c) = packed;
  }
  if (threadIdx.x == 0 && blockIdx.y == 0 && p.lse != nullptr)
    p.lse[(static_cast<int64_t>(batch) * p.heads_q + hq) * p.len_q + lq] = total[1];
}

}  // namespace ffpa::kernels
