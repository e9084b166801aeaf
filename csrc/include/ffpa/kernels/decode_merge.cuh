// The merge of split-KV decode: the splits' normalised fp32 partials and base-2 LSEs
// (DecodeParams::o_part / lse_part, written by the split kernels) merged into the output and its
// natural-log LSE, with the merge weights and guards of attn/state.cuh; by a second kernel
// (decode_merge_kernel) or, fused, by the last split block of each row block (decode_merge_rows).
#pragma once
#include <cstdint>
#include <math_constants.h>

#include "ffpa/attn/state.cuh"
#include "ffpa/constants.h"
#include "ffpa/params.h"
#include "ffpa/ptx/grid_dep.cuh"
#include "ffpa/tile/numeric.cuh"

namespace ffpa::kernels {

// One warp combines one packed row's splits over up to kMergeCols output columns: weights
// exp2(lse_s - max) (an empty split weighs 0; its partial is written as zeros), output
// sum_s w_s O_s / sum_s w_s in the output dtype, LSE in natural log.
//
// The merge is latency-bound (a few KiB per row, read once), so a warp issues its first
// kMergeBatch partial loads before it reads the LSEs: both round trips to memory overlap, and no
// block-wide barrier stands between them. Lanes own 4 columns each; where a column block is
// narrower than 128 (Dv = 64, the tail of Dv = 160) the lanes left over take interleaved shares of
// the splits, added by shuffles at the end. With few rows and many splits (a batch of one with a
// long context: 32 rows, 49 splits) a warp per row leaves the GPU idle, so kWarpsPerUnit = 4 gives
// a row's column block the whole block: its warps take interleaved shares of the splits and add
// them through shared memory.
constexpr int kMaxMergeSplits = 256;  // launch::kMaxDecodeSplits
constexpr int kMergeWarps = 4;
constexpr int kMergeThreads = 32 * kMergeWarps;
constexpr int kMergeCols = 128;  // output columns of one warp's unit (4 a lane)
// Partial loads a lane issues before it reads the LSEs: a warp a unit covers 8 splits (more than
// most calls that fill the GPU use), a block a unit 4 x 16 (a batch of one with a long context:
// 49 splits at B=1 S=131072 D=128) in that one round trip to memory.
template <int kWarpsPerUnit>
constexpr int kMergeBatch = kWarpsPerUnit > 1 ? 16 : 8;

template <typename Element, int kWarpsPerUnit>
__global__ void __launch_bounds__(kMergeThreads) decode_merge_kernel(DecodeParams p) {
  static_assert(kWarpsPerUnit == 1 || kWarpsPerUnit == kMergeWarps, "a unit is a warp or the whole block");
  constexpr int kUnitsPerBlock = kMergeWarps / kWarpsPerUnit;
  __shared__ float weights[kUnitsPerBlock][kMaxMergeSplits];
  __shared__ float4 sums[kWarpsPerUnit > 1 ? kMergeThreads : 1];
  const int lane = threadIdx.x % 32;
  const int warp = kWarpsPerUnit > 1 ? 0 : threadIdx.x / 32;  // the unit's slot in this block
  const int uwarp = kWarpsPerUnit > 1 ? threadIdx.x / 32 : 0;  // this warp's place in its unit
  const int group = p.heads_q / p.heads_kv;
  const int rows = group * p.len_q;
  const int col_blocks = (p.head_dim_v + kMergeCols - 1) / kMergeCols;
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * kUnitsPerBlock + warp;  // (item, column block)
  const int64_t items = static_cast<int64_t>(p.batch) * p.heads_kv * rows;
  ptx::grid_dependency_wait();  // launched programmatically after the split kernel: its partials complete
  if (kWarpsPerUnit == 1 && unit >= items * col_blocks) return;  // whole warps: no block-wide barrier follows
  const int64_t item = unit / col_blocks;  // (batch, kv head, packed row)
  const int cb = static_cast<int>(unit % col_blocks);
  const int row = static_cast<int>(item % rows);
  const int64_t bh = item / rows;
  const int head_kv = static_cast<int>(bh % p.heads_kv), batch = static_cast<int>(bh / p.heads_kv);
  const int64_t split_stride = static_cast<int64_t>(p.batch) * p.heads_kv * rows;
  const int splits = min(p.num_splits, kMaxMergeSplits);

  // This lane's columns and its share of the splits: shares is 1, 2 or 4 per warp (32 / column
  // groups where that is a power of two), and lanes past the column groups of a share-1 block
  // idle; a unit's warps multiply the shares.
  const int cols = min(kMergeCols, p.head_dim_v - cb * kMergeCols);
  const int col_groups = cols / 4;
  const int shares = (col_groups == 8 || col_groups == 16) ? 32 / col_groups : 1;
  const int lane_share = lane / col_groups;  // >= shares: idle
  const bool active = lane_share < shares;
  const int share = uwarp * shares + lane_share, stride = kWarpsPerUnit * shares;
  const int c = cb * kMergeCols + 4 * (lane % col_groups);
  const float* part = p.o_part + item * p.head_dim_v + c;
  const int64_t part_stride = split_stride * p.head_dim_v;

  float4 x[kMergeBatch<kWarpsPerUnit>];
#pragma unroll
  for (int b = 0; b < kMergeBatch<kWarpsPerUnit>; ++b) {
    const int s = share + b * stride;
    x[b] = active && s < splits ? *reinterpret_cast<const float4*>(part + s * part_stride) : make_float4(0.f, 0.f, 0.f, 0.f);
  }

  float mx = -CUDART_INF_F;
  for (int s = lane; s < splits; s += 32) mx = fmaxf(mx, p.lse_part[s * split_stride + item]);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.f;
  for (int s = lane; s < splits; s += 32) {
    const float w = attn::merge_weight(p.lse_part[s * split_stride + item], mx);
    if (uwarp == 0) weights[warp][s] = w;
    sum += w;
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if constexpr (kWarpsPerUnit > 1) __syncthreads();
  else __syncwarp();

  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int b = 0; b < kMergeBatch<kWarpsPerUnit>; ++b) {
    const int s = share + b * stride;
    const float w = active && s < splits ? weights[warp][s] : 0.f;
    acc.x += w * x[b].x, acc.y += w * x[b].y, acc.z += w * x[b].z, acc.w += w * x[b].w;
  }
  if (active) {
#pragma unroll 4
    for (int s = share + kMergeBatch<kWarpsPerUnit> * stride; s < splits; s += stride) {
      const float w = weights[warp][s];
      const float4 y = *reinterpret_cast<const float4*>(part + s * part_stride);
      acc.x += w * y.x, acc.y += w * y.y, acc.z += w * y.z, acc.w += w * y.w;
    }
  }
  for (int o = 16; o >= col_groups && shares > 1; o /= 2) {
    acc.x += __shfl_xor_sync(0xffffffffu, acc.x, o);
    acc.y += __shfl_xor_sync(0xffffffffu, acc.y, o);
    acc.z += __shfl_xor_sync(0xffffffffu, acc.z, o);
    acc.w += __shfl_xor_sync(0xffffffffu, acc.w, o);
  }
  if constexpr (kWarpsPerUnit > 1) {
    sums[threadIdx.x] = acc;
    __syncthreads();
    if (uwarp > 0) return;
#pragma unroll
    for (int u = 1; u < kWarpsPerUnit; ++u) {
      const float4 y = sums[u * 32 + lane];
      acc.x += y.x, acc.y += y.y, acc.z += y.z, acc.w += y.w;
    }
  }
  const int lq = row / group, hq = head_kv * group + row % group;
  if (active && lane_share == 0) {
    const float inv = attn::inv_row_sum(sum);
    Element* o = static_cast<Element*>(p.o) + batch * p.o_batch_stride + lq * p.o_row_stride + hq * p.o_head_stride;
    uint2 packed;
    packed.x = Numeric<Element>::pack2(acc.x * inv, acc.y * inv);
    packed.y = Numeric<Element>::pack2(acc.z * inv, acc.w * inv);
    *reinterpret_cast<uint2*>(o + c) = packed;
  }
  if (lane == 0 && cb == 0 && p.lse != nullptr)
    p.lse[(static_cast<int64_t>(batch) * p.heads_q + hq) * p.len_q + lq] = sum > 0.f ? (mx + __log2f(sum)) * kLn2 : -CUDART_INF_F;
}

// ---- the merge fused into the split kernels (DecodeParams::merge_counters) ------------------
//
// No second kernel: each split block, once its partial rows (or zeros and LSE -inf for an empty key
// range) are stored, counts itself in on its row block's counter; the block whose count completes
// num_splits merges the row block's partials of every split. Ordering (the threadfence-reduction
// pattern): every thread fences its stores, a block barrier, then one thread's atomic add; the last
// block's thread fences again (acquire) before the barrier that lets its threads read the other
// splits' partials (loads through L2, `ld.global.cg`), and resets the counter to 0, so the op's
// counters are zero again for the next launch on the stream (launch order separates calls).
//
//   split block s of row block r:  store partial_s -> fence -> barrier -> [t0] n = atom.add(c_r, 1)
//                                   n == splits - 1 ? [t0] fence, c_r = 0 -> barrier -> merge r
//
// `sync` is the barrier over the `threads` that remain (the narrow kernel's producer warp has left:
// a named barrier of its consumer warpgroup); `flag` is a shared int no thread reads before it.
template <typename Sync>
__device__ __forceinline__ bool decode_split_arrive(const DecodeParams& p, int64_t row_block, int tid, int* flag,
                                                    Sync sync) {
  __threadfence();  // this thread's partial stores, before the count below (release)
  sync();
  if (tid == 0) {
    int* counter = p.merge_counters + row_block;
    const bool last = atomicAdd(counter, 1) == p.num_splits - 1;
    if (last) {
      __threadfence();  // the other splits' partials, after their counts (acquire)
      atomicExch(counter, 0);
    }
    *flag = last ? 1 : 0;
  }
  sync();
  return *flag != 0;
}

// ---- the spread merge (DecodeParams::merge_spread: a cooperative launch, every block resident) ------
// Every split block of a row block merges a slice of its columns once all of them stored their
// partials: arrivals counted on merge_counters[row_block] (release: each thread's fence, a barrier,
// one atomic), thread 0 spins until the count reaches num_splits (acquire), then a barrier; after
// its slice, the block counts itself out on merge_counters[n_row_blocks + row_block], and the last
// one out zeroes both (every block passed the spin by then), for the next launch on the stream.
// `splits`: the row block's split blocks (num_splits, or its sequence's share under balanced splits).
template <typename Sync>
__device__ __forceinline__ void decode_spread_arrive(const DecodeParams& p, int64_t row_block, int splits, int tid,
                                                     Sync sync) {
  __threadfence();
  sync();
  if (tid == 0) {
    int* arrived = p.merge_counters + row_block;
    atomicAdd(arrived, 1);
    while (ptx::ld_acquire_gpu(arrived) < splits) __nanosleep(64);
  }
  sync();
}
template <typename Sync>
__device__ __forceinline__ void decode_spread_leave(const DecodeParams& p, int64_t row_block, int64_t n_row_blocks,
                                                    int splits, int tid, Sync sync) {
  sync();
  if (tid == 0 && atomicAdd(p.merge_counters + n_row_blocks + row_block, 1) == splits - 1) {
    p.merge_counters[row_block] = 0;
    p.merge_counters[n_row_blocks + row_block] = 0;
  }
}

// The last split block's merge of its row block: n_rows rows (row_of(j): the packed row of the
// block's row j, or -1 past the last) in (row, 4 columns) units, kUnits units a thread at a time
// (units u, u + kThreads, ...: their loads in flight together), the splits' LSEs and partials
// loaded kFusedMergeBatch at a time and folded online (the max moves, the sums rescale: the weights of
// merge_weight against the running max). Writes what the merge kernel writes: the output in its
// dtype and the natural-log LSE. The rows row_of() keeps are a prefix of the block's (both callers:
// rows past the last query position or packed row come last), so a thread stops at its first unit
// past them.
// Columns [4 q0, 4 (q0 + n_quads)) only where given (the spread merge: each split block of the row
// block merges a slice of the columns). The partials: split s of the row at item0 + s x split_stride of
// [splits][B][Hkv][rows]; under balanced splits (`slots`, count >= 0) the sequence's consecutive slots.
struct DecodeMergeSlots {
  int64_t item0, stride;  // packed row 0 of the first partial; rows from one partial to the next
  int count;              // -1: the split layout above
};
template <typename Element, int kHeadDimV, int kThreads, int kUnits, typename RowOf>
__device__ __forceinline__ void decode_merge_rows(const DecodeParams& p, int batch, int head_kv, int n_rows, RowOf row_of,
                                                  int tid, int q0 = 0, int n_quads = kHeadDimV / 4,
                                                  DecodeMergeSlots slots = DecodeMergeSlots{0, 0, -1}) {
  static_assert(kHeadDimV % 4 == 0, "a unit is 4 output columns");
  static_assert(kUnits >= 1, "at least one unit a thread");
  constexpr int kU = kUnits, kB = kFusedMergeBatch;
  const int kQuads = n_quads;
  const int group = p.heads_q / p.heads_kv;
  const int rows = group * p.len_q;
  const int n_units = n_rows * kQuads;
  const bool own = slots.count >= 0;
  const int64_t split_stride = own ? slots.stride : static_cast<int64_t>(p.batch) * p.heads_kv * rows;
  const int64_t item0 = own ? slots.item0 : (static_cast<int64_t>(batch) * p.heads_kv + head_kv) * rows;
  const int splits = own ? slots.count : p.num_splits;
  for (int u0 = tid; u0 < n_units; u0 += kU * kThreads) {
    int row[kU], c[kU];
#pragma unroll
    for (int k = 0; k < kU; ++k) {
      const int u = u0 + k * kThreads;
      row[k] = u < n_units ? row_of(u / kQuads) : -1;
      c[k] = 4 * (q0 + u % kQuads);
    }
    if (row[0] < 0) break;  // past the block's last row: so are this thread's later units
    float m[kU], l[kU];
    float4 acc[kU];
#pragma unroll
    for (int k = 0; k < kU; ++k) m[k] = -CUDART_INF_F, l[k] = 0.f, acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < splits; s0 += kB) {
      float lse[kU][kB];
      float4 x[kU][kB];
#pragma unroll
      for (int k = 0; k < kU; ++k)
#pragma unroll
        for (int b = 0; b < kB; ++b) {
          const bool in = row[k] >= 0 && s0 + b < splits;
          const int64_t at = static_cast<int64_t>(s0 + b) * split_stride + item0 + (in ? row[k] : 0);
          lse[k][b] = in ? __ldcg(p.lse_part + at) : -CUDART_INF_F;
          x[k][b] = in ? __ldcg(reinterpret_cast<const float4*>(p.o_part + at * kHeadDimV + c[k]))
                       : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
      for (int k = 0; k < kU; ++k) {
        float mb = m[k];
#pragma unroll
        for (int b = 0; b < kB; ++b) mb = fmaxf(mb, lse[k][b]);
        const float alpha = attn::merge_weight(m[k], mb);  // 0 while nothing was folded (m = -inf)
        acc[k].x *= alpha, acc[k].y *= alpha, acc[k].z *= alpha, acc[k].w *= alpha;
        l[k] *= alpha;
#pragma unroll
        for (int b = 0; b < kB; ++b) {
          const float w = attn::merge_weight(lse[k][b], mb);
          acc[k].x += w * x[k][b].x, acc[k].y += w * x[k][b].y, acc[k].z += w * x[k][b].z, acc[k].w += w * x[k][b].w;
          l[k] += w;
        }
        m[k] = mb;
      }
    }
#pragma unroll
    for (int k = 0; k < kU; ++k) {
      if (row[k] < 0) continue;
      const int lq = row[k] / group, hq = head_kv * group + row[k] % group;
      const float inv = attn::inv_row_sum(l[k]);
      Element* o = static_cast<Element*>(p.o) + batch * p.o_batch_stride + lq * p.o_row_stride + hq * p.o_head_stride;
      uint2 packed;
      packed.x = Numeric<Element>::pack2(acc[k].x * inv, acc[k].y * inv);
      packed.y = Numeric<Element>::pack2(acc[k].z * inv, acc[k].w * inv);
      *reinterpret_cast<uint2*>(o + c[k]) = packed;
      if (c[k] == 0 && p.lse != nullptr)
        p.lse[(static_cast<int64_t>(batch) * p.heads_q + hq) * p.len_q + lq] =
            l[k] > 0.f ? (m[k] + __log2f(l[k])) * kLn2 : -CUDART_INF_F;
    }
  }
}

}  // namespace ffpa::kernels
