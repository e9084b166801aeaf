// Split-KV decode on Hopper (sm_90a) for MLA's single cache with few query rows per KV head (the
// 16 or so heads of a tensor-parallel shard): memory-bound, and too few rows for a 64-row wgmma tile
// (the wide kernel, decode_sm90_ws.cuh, would multiply 4x the padding). So the tile is transposed:
// the packed rows are the N = 16 of every wgmma and the keys or output columns its M = 64.
//
//   S^T = K Q^T          M = 64 keys of a stage, N = 16 rows, K = D       (A: the K stage, B: Q)
//   softmax over the keys of each row (the M dimension: lanes, then the 4 warps through shared memory)
//   O^T += V^T P^T       M = 64 output columns at a time, N = 16, K = 64 keys (A: the same K stage,
//                        its first Dv columns read transposed; B: P^T written to shared memory)
//
// Block: one producer warp (one thread issues TMA: Q once, then a 64-key tile of K, all D columns,
// per stage of a two-stage ring) and one consumer warpgroup. Grid (row blocks x splits, KV heads,
// batch), as the mma.sync kernel's (decode_sm80.cuh): packed row r of a block is query position
// i0 + r / rows_per_i of head g0 + r % rows_per_i (rows_per_i = min(group, 16)), the rank-5 Q map of
// decode_sm90_ws.cuh with 16-row boxes. Keys past a sequence's length are masked, and their V rows
// zeroed in the stage before P V reads them (unwritten cache memory may hold NaN). The output, or
// the fp32 partial and base-2 LSE for decode_merge_kernel (or, with merge_counters, the row block's
// last split merges: decode_merge_rows), in the layouts of the other decode kernels.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <math_constants.h>

#include "ffpa/attn/state.cuh"
#include "ffpa/kernels/decode_grid.cuh"
#include "ffpa/kernels/decode_merge.cuh"
#include "ffpa/kernels/decode_sm90_ws.cuh"  // DecodeTmaMaps
#include "ffpa/params.h"
#include "ffpa/ptx/cp_async.cuh"  // smem_u32addr
#include "ffpa/ptx/math.cuh"
#include "ffpa/ptx/mbarrier.cuh"
#include "ffpa/ptx/tma.cuh"
#include "ffpa/ptx/warpgroup.cuh"
#include "ffpa/ptx/wgmma.cuh"
#include "ffpa/tile/numeric.cuh"
#include "ffpa/tile/stage_ring.cuh"
#include "ffpa/traits/decode_traits.h"

namespace ffpa::attn {

template <typename Traits>
struct DecodeNarrow {
  using Element = typename Traits::Element;
  using Num = Numeric<Element>;
  using KTile = typename Traits::KTile;
  using QTile = typename Traits::QTile;
  using PTile = typename Traits::PTile;
  using Ring = StageRing<Traits::kStages>;
  using Mma = ptx::WgmmaM64<Traits::kRows, Element>;
  static constexpr int kRows = Traits::kRows;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kKSteps = Traits::kHeadDim / 16;  // k-steps of S^T
  static constexpr int kOBlocks = Traits::kHeadDimV / 64;  // m64 blocks of O^T
  static constexpr int kNT = kRows / 8;                    // n8 tiles of every accumulator
  static constexpr uint32_t kBarTile = 1;                  // the consumer warpgroup's named barrier
  // Independent accumulator chains of S^T (k-step ks adds into chain ks % kSChains): MLA B=32
  // S=8192 32/1 went 0.61 -> 0.63x copy with 2 or 4 (H200, same host), 16 rows stayed at 0.77x.
  static constexpr int kSChains = 2;

  using Work = DecodeRowBlock;
  static __device__ __forceinline__ Work work_of_block(const DecodeParams& p, int* scratch) {
    return decode_row_block<kRows, kBlockN>(p, scratch);
  }

  // ---- producer (one thread) ---------------------------------------------------------------
  static __device__ __forceinline__ void produce(const DecodeParams& p, const DecodeTmaMaps& maps, const Work& w,
                                                 uint32_t stages, uint32_t q_smem, uint32_t q_bar, const Ring& ring) {
    ptx::tma_prefetch_map(&maps.q);
    ptx::tma_prefetch_map(&maps.k);
    ptx::mbarrier_arrive_expect_tx(q_bar, QTile::kBytes);
#pragma unroll
    for (int c = 0; c < QTile::kChunks; ++c)
      ptx::tma_load_5d(q_smem + QTile::chunk(c), &maps.q, q_bar, 64 * c, w.g0, w.i0, w.head_kv, w.batch);
    typename Ring::State st;
    const int box = p.block_table != nullptr ? min(p.page_size, kBlockN) : kBlockN;
    for (int k = 0; k < w.n_tiles; ++k, st.advance()) {
      const int key0 = (w.first + k) * kBlockN;
      const uint32_t stage = stages + st.stage * Traits::kStageBytes;
      ring.producer_acquire(st);
      ring.producer_expect(st, Traits::kStageBytes);
      for (int r = 0; r < kBlockN; r += box) {
        const int row = p.block_table != nullptr ? (key0 + r) & (p.page_size - 1) : key0 + r;
        const int page = p.block_table != nullptr ? decode_page_of(p, w, key0 + r) : w.batch;
#pragma unroll
        for (int c = 0; c < KTile::kChunks; ++c)
          ptx::tma_load_4d(stage + KTile::chunk(c) + r * 128, &maps.k, ring.full(st.stage), 64 * c, row, w.head_kv, page);
      }
    }
  }

  // ---- consumer warpgroup --------------------------------------------------------------------

  // Thread (warp w, lane g * 4 + t4) holds, of every m64 x n16 accumulator, rows (keys or output
  // columns) 16 w + g + 8 h and columns (packed query rows) 8 j + 2 t4 + e: element [j][2 h + e].
  static __device__ __forceinline__ void run(const DecodeParams& p, const DecodeTmaMaps& maps, char* smem_raw) {
    const uint32_t raw = ptx::smem_u32addr(smem_raw);
    const uint32_t stages = (raw + 1023u) & ~1023u;
    const uint32_t q_smem = stages + Traits::kStages * Traits::kStageBytes;
    const uint32_t p_smem = q_smem + QTile::kBytes;
    const uint32_t red = p_smem + PTile::kBytes;
    float* red_max = reinterpret_cast<float*>(smem_raw + (red - raw));
    float* red_sum = red_max + Traits::kConsumerWarps * kRows;
    const Ring ring{red + Traits::kRedBytes};
    const uint32_t q_bar = ring.bars + Ring::kBarrierBytes;
    // (the P buffer is the longest-first order's scratch: nothing reads it before the consumers' first P)
    const Work w = work_of_block(p, reinterpret_cast<int*>(smem_raw + (p_smem - raw)));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
    if (threadIdx.x == 0) {
      ring.init(Traits::kConsumerWarps);
      ptx::mbarrier_init(q_bar, 1);
      ptx::fence_barrier_init();
    }
    __syncthreads();
    if (warp == Traits::kConsumerWarps) {
      if (lane == 0) produce(p, maps, w, stages, q_smem, q_bar, ring);
      return;
    }

    // Key limits (exclusive) of this thread's four rows: the length, and bottom-right causal.
    int lim[kNT][2];
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int i = w.i0 + (8 * j + 2 * t4 + e) / w.rows_per_i;
        lim[j][e] = p.is_causal ? min(w.seqlen, w.seqlen - p.len_q + i + 1) : w.seqlen;
      }
    float o[kOBlocks][kNT][4], row_max[kNT][2], row_sum[kNT][2];
#pragma unroll
    for (int b = 0; b < kOBlocks; ++b)
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[b][j][e] = 0.f;
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) row_max[j][e] = -CUDART_INF_F, row_sum[j][e] = 0.f;

    ptx::mbarrier_wait_parity(q_bar, 0);
    typename Ring::State st;
    for (int k = 0; k < w.n_tiles; ++k, st.advance()) {
      const int key0 = (w.first + k) * kBlockN;
      const uint32_t stage = stages + st.stage * Traits::kStageBytes;
      ring.consumer_wait(st);
      float sc[kSChains][kNT][4];
      const ptx::GmmaDescSw128 kd(stage, 16, 1024), qd(q_smem, 16, 1024);
      ptx::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks)
        Mma::ss(sc[ks % kSChains], kd.at(KTile::k_major_kstep(ks)), qd.at(QTile::k_major_kstep(ks)), ks >= kSChains);
      ptx::wgmma_commit_group();
      ptx::wgmma_wait_group<0>();
#pragma unroll
      for (int c = 0; c < kSChains; ++c) ptx::wgmma_fence_operand(sc[c]);
      float s[kNT][4];
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[j][e] = sc[0][j][e];
#pragma unroll
          for (int c = 1; c < kSChains; ++c) s[j][e] += sc[c][j][e];
        }

      // Scale and mask (base 2), then each row's max over the tile's keys: this thread's two keys,
      // the warp's 16 (lanes of the same t4), the warpgroup's 64 (shared memory).
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int key = key0 + 16 * warp + g + 8 * h;
            s[j][2 * h + e] = key < lim[j][e] ? s[j][2 * h + e] * p.scale_log2 : -CUDART_INF_F;
          }
          float m = fmaxf(s[j][e], s[j][2 + e]);
          m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
          m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 8));
          m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 16));
          if (g == 0) red_max[warp * kRows + 8 * j + 2 * t4 + e] = m;
        }
      ptx::named_barrier_sync(kBarTile, 128);
      float alpha[kNT][2];
      bool settled = true;
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int n = 8 * j + 2 * t4 + e;
          float m = red_max[n];
#pragma unroll
          for (int v = 1; v < Traits::kConsumerWarps; ++v) m = fmaxf(m, red_max[v * kRows + n]);
          float neg_m;
          alpha[j][e] = online_update(row_max[j][e], row_sum[j][e], m, neg_m);
          settled &= alpha[j][e] == 1.f;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float pv = ptx::ex2_approx_ftz(s[j][2 * h + e] + neg_m);
            row_sum[j][e] += pv;
            const uint16_t bits = static_cast<uint16_t>(Num::pack2(pv, 0.f) & 0xffffu);
            asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(p_smem + PTile::elem_offset(n, 16 * warp + g + 8 * h)), "h"(bits));
          }
        }
      if (!__all_sync(0xffffffffu, settled))
#pragma unroll
        for (int b = 0; b < kOBlocks; ++b)
#pragma unroll
          for (int j = 0; j < kNT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[b][j][e] *= alpha[j][e % 2];
      // Keys of this tile past the length: zero their V rows (P is 0 there; the memory may be NaN).
      const int valid = w.seqlen - key0;
      if (valid < kBlockN) {
        constexpr int kUnits = Traits::kHeadDimV / 8;
        const int first = max(valid, 0);
        for (int u = threadIdx.x; u < (kBlockN - first) * kUnits; u += 128) {
          const uint32_t addr = stage + KTile::unit_offset(first + u / kUnits, u % kUnits);
          asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(addr), "r"(0u));
        }
      }
      ptx::fence_proxy_async_shared();
      ptx::named_barrier_sync(kBarTile, 128);  // P complete (and red_max read by every warp)

      // The K stage's first Dv columns as the A operand of O^T (M = output columns, K = keys): MN-major.
      const ptx::GmmaDescSw128 vd(stage, KTile::kChunkBytes, 1024), pd(p_smem, 16, 1024);
      ptx::wgmma_fence();
#pragma unroll
      for (int b = 0; b < kOBlocks; ++b)
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk)
          Mma::ss_ta(o[b], vd.at(KTile::chunk(b) + kk * 16 * 128), pd.at(PTile::k_major_kstep(kk)), 1);
      ptx::wgmma_commit_group();
      ptx::wgmma_wait_group<0>();
#pragma unroll
      for (int b = 0; b < kOBlocks; ++b) ptx::wgmma_fence_operand(o[b]);
      if (lane == 0) ring.consumer_release(st);
    }
    store(p, w, warp, g, t4, red_sum, o, row_max, row_sum);
    if (p.num_splits > 1 && p.merge_counters != nullptr) {
      if (p.merge_spread)
        merge_spread(p, w);
      else
        merge_if_last(p, w, reinterpret_cast<int*>(red_max));
    }
  }

  // Both merges' view of block w's row block: its index among the call's (its counters), and its row j
  // as the KV head's packed row (or -1 past the last query position).
  static __device__ __forceinline__ int64_t row_block_of(const DecodeParams& p, const Work& w,
                                                         const RowPacking<kRows>& pack) {
    return (static_cast<int64_t>(w.batch) * p.heads_kv + w.head_kv) * pack.blocks + w.m_block;
  }
  static __device__ __forceinline__ auto packed_row_of(const DecodeParams& p, const Work& w) {
    const int i0 = w.i0, g0 = w.g0, rows_per_i = w.rows_per_i, group = w.group, len_q = p.len_q;
    return [=](int j) {
      const int i = i0 + j / rows_per_i;
      return i < len_q ? i * group + g0 + j % rows_per_i : -1;
    };
  }

  // The spread merge (DecodeParams::merge_spread): once every split of the row block stored its
  // partials, this one merges its slice of the columns (kernels/decode_merge.cuh). Under balanced
  // splits the row block's splits are its sequence's share, their partials consecutive slots.
  static __device__ __forceinline__ void merge_spread(const DecodeParams& p, const Work& w) {
    const RowPacking<kRows> pack(w.group, p.len_q);
    const int64_t row_block = row_block_of(p, w, pack);
    const int64_t n_row_blocks = static_cast<int64_t>(p.batch) * p.heads_kv * pack.blocks;
    const int tid = threadIdx.x;
    const auto sync = [] { ptx::named_barrier_sync(kBarTile, 128); };
    kernels::decode_spread_arrive(p, row_block, w.splits, tid, sync);
    constexpr int kQuads = Traits::kHeadDimV / 4;
    const int per = (kQuads + w.splits - 1) / w.splits;
    const int q0 = min(kQuads, w.split * per), nq = min(kQuads, q0 + per) - q0;
    const int64_t rows = static_cast<int64_t>(w.group) * p.len_q;
    const kernels::DecodeMergeSlots slots{(static_cast<int64_t>(w.slot - w.split) * p.heads_kv + w.head_kv) * rows,
                                          p.heads_kv * rows, p.balanced_splits ? w.splits : -1};
    if (nq > 0)
      kernels::decode_merge_rows<Element, Traits::kHeadDimV, 32 * Traits::kConsumerWarps, kFusedMergeUnitsNarrow>(
          p, w.batch, w.head_kv, kRows, packed_row_of(p, w), tid, q0, nq, slots);
    kernels::decode_spread_leave(p, row_block, n_row_blocks, w.splits, tid, sync);
  }

  // The fused merge (DecodeParams::merge_counters) over the consumer warpgroup (the producer warp
  // has left): this split counts itself in on its row block, the last merges it
  // (kernels/decode_merge.cuh). `flag`: the row-max scratch, read by no thread any more.
  static __device__ __forceinline__ void merge_if_last(const DecodeParams& p, const Work& w, int* flag) {
    const int64_t row_block = row_block_of(p, w, RowPacking<kRows>(w.group, p.len_q));
    const int tid = threadIdx.x;
    if (!kernels::decode_split_arrive(p, row_block, tid, flag, [] { ptx::named_barrier_sync(kBarTile, 128); })) return;
    kernels::decode_merge_rows<Element, Traits::kHeadDimV, 32 * Traits::kConsumerWarps, kFusedMergeUnitsNarrow>(
        p, w.batch, w.head_kv, kRows, packed_row_of(p, w), tid);
  }

  // Row sums across lanes and warps, then O / l (one split) or the fp32 partial and its base-2 LSE.
  static __device__ __forceinline__ void store(const DecodeParams& p, const Work& w, int warp, int g, int t4,
                                               float* red_sum, const float (&o)[kOBlocks][kNT][4],
                                               const float (&row_max)[kNT][2], const float (&row_sum)[kNT][2]) {
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float l = row_sum[j][e];
        l += __shfl_xor_sync(0xffffffffu, l, 4);
        l += __shfl_xor_sync(0xffffffffu, l, 8);
        l += __shfl_xor_sync(0xffffffffu, l, 16);
        if (g == 0) red_sum[warp * kRows + 8 * j + 2 * t4 + e] = l;
      }
    ptx::named_barrier_sync(kBarTile, 128);
    const int rows = w.group * p.len_q;
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int n = 8 * j + 2 * t4 + e;
        const int i = w.i0 + n / w.rows_per_i, hg = w.g0 + n % w.rows_per_i;
        if (i >= p.len_q) continue;
        float l = 0.f;
#pragma unroll
        for (int v = 0; v < Traits::kConsumerWarps; ++v) l += red_sum[v * kRows + n];
        const float inv = inv_row_sum(l);
        if (p.num_splits == 1) {
          const int head = w.head_kv * w.group + hg;
          Element* out = static_cast<Element*>(p.o) + w.batch * p.o_batch_stride + i * p.o_row_stride + head * p.o_head_stride;
#pragma unroll
          for (int b = 0; b < kOBlocks; ++b)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const uint16_t bits = static_cast<uint16_t>(Num::pack2(o[b][j][2 * h + e] * inv, 0.f) & 0xffffu);
              reinterpret_cast<uint16_t*>(out)[64 * b + 16 * warp + g + 8 * h] = bits;
            }
          if (p.lse != nullptr && warp == 0 && g == 0)
            p.lse[(static_cast<int64_t>(w.batch) * p.heads_q + head) * p.len_q + i] = row_lse(row_max[j][e], l);
        } else {
          const int64_t item = (static_cast<int64_t>(w.slot) * p.heads_kv + w.head_kv) * rows + i * w.group + hg;
          float* out = p.o_part + item * Traits::kHeadDimV;
#pragma unroll
          for (int b = 0; b < kOBlocks; ++b)
#pragma unroll
            for (int h = 0; h < 2; ++h) out[64 * b + 16 * warp + g + 8 * h] = o[b][j][2 * h + e] * inv;
          if (warp == 0 && g == 0) p.lse_part[item] = row_lse2(row_max[j][e], l);
        }
      }
  }
};

using DecodeKernelNarrow = void (*)(DecodeParams, DecodeTmaMaps);

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    decode_split_narrow_kernel(const __grid_constant__ DecodeParams p, const __grid_constant__ DecodeTmaMaps maps) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) char smem[];
  ptx::launch_dependents();  // the merge kernel's blocks may take SMs this grid frees (launch_decode_merge)
  DecodeNarrow<Traits>::run(p, maps, smem);
#elif defined(__CUDA_ARCH__)
  __trap();  // no wgmma / TMA in this pass (the launcher only picks this kernel on sm_90a)
#endif
}

}  // namespace ffpa::attn
