// FFPA level 1 on Hopper (sm_90a), warp-specialised: large head dims (O in registers, up to 640 Dv
// columns per block, wider Dv as two column groups; E sliced, so shared memory does not grow with
// E) on the warpgroup MMA with TMA loads, the pipeline of kernels/ffpa_ws_pipeline.cuh (its picture
// of who waits on what). The launcher (launch/ffpa_fwd_ws_launch.cuh) runs it on compute capability
// 9.0 where TMA can describe q, k and v; elsewhere the mma.sync L1 kernel (ffpa_fwd_sm80.cuh) runs,
// on a tile that divides this one's 64 x 128.
//
// This file is the prefill Problem: one block per work item, 64 query rows and one Dv column group
// of one (batch, head), the key tiles they see (causal cut, block-map skip), items numbered last
// query block first (the longest causal rows start first). Above Dv = 640 the column groups of a
// query block run as cluster pairs (Traits::kPair: groups 2 q and 2 q + 1, one pair up to Dv = 1024,
// two at 2048, four at 4096), which split each tile's keys for S between them (the pipeline's picture).
//
// TMA zero-fills rows past L and S (finite, so masked columns of P V stay 0); scores past S and
// above the causal limit are masked per element in boundary tiles, attn_mask in the block map's
// partial tiles (the map is at the fallback kernel's tile: tile_code merges its blocks); a negative
// scale takes the per-element path (it multiplies before the row max).
#pragma once
#include <cuda.h>

#include <cstdint>
#include <math_constants.h>

#include "ffpa/attn/mask.cuh"
#include "ffpa/attn/state.cuh"
#include "ffpa/attn/tile_mask.cuh"
#include "ffpa/constants.h"
#include "ffpa/kernels/ffpa_ws_pipeline.cuh"
#include "ffpa/params.h"
#include "ffpa/ptx/tma.cuh"
#include "ffpa/tile/numeric.cuh"
#include "ffpa/tile/quad.cuh"
#include "ffpa/traits/ffpa_traits.h"

namespace ffpa::attn {

// The kernel's TMA maps (rank 4: head dim, position, head, batch), encoded by the launcher with
// boxes of 64 columns x 64 (q), 128 (k) and kVKeys (v) positions.
struct FfpaTmaMaps {
  CUtensorMap q, k, v;
};

template <typename Traits>
struct FfpaPrefill {
  using Params = FwdParams;
  using Maps = FfpaTmaMaps;
  using Element = typename Traits::Element;
  using Num = Numeric<Element>;
  using QSlice = typename Traits::QSlice;
  using VStage = typename Traits::VStage;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kVChunks = Traits::kGroupCols / 64;  // 64-column chunks of one V stage
  static constexpr bool kPairOk = true;  // the launcher runs a pair's blocks as a cluster

  // K sharing (Traits::kShareK): a cluster's blocks 2 i, 2 i + 1 run query blocks 2 q + 1, 2 q, the
  // walk (n_end, the block map's codes) that of their 128 rows together.
  static constexpr bool kShareK = Traits::kShareK;
  static constexpr int kWalkRows = kShareK ? 2 * kBlockM : kBlockM;  // the rows whose key tiles a block walks

  struct Item {
    int group, head, head_kv, batch, m0, n_end;
    int walk_m0;           // the first of the kWalkRows rows whose tiles the block walks (m0 unless sharing)
    int rank;              // the block's cluster rank where it shares K (it loads the K slices of that parity)
    const uint8_t* codes;  // the walk's first row of the mask block map, or null
    float scale_log2;      // the softmax scale of its scores (base 2; the FP8 Problem folds descales in)
  };

  static __device__ __forceinline__ Item item(const FwdParams& p, int t, int* /*scratch*/) {
    const int m_blocks = (p.len_q + kBlockM - 1) / kBlockM;
    Item w;
    w.rank = 0;
    int m_block, bh;
    if constexpr (kShareK) {  // one group; a cluster's blocks 2 i, 2 i + 1 run query blocks 2 q + 1, 2 q (past L: no rows)
      const int m_pairs = (m_blocks + 1) / 2, pair = t / 2;  // query block pairs numbered last first
      w.rank = t % 2;
      w.group = 0;
      m_block = 2 * (m_pairs - 1 - pair % m_pairs) + 1 - w.rank;
      bh = pair / m_pairs;
    } else if constexpr (Traits::kPair) {  // a cluster's blocks 2 i, 2 i + 1 run groups 2 g, 2 g + 1 of a query block
      constexpr int kPairs = Traits::kGroups / 2;  // a query block's pairs numbered one after another (run together,
      const int i = t / 2;                         // they read the same Q rows and K tiles), query blocks last first
      w.group = 2 * (i % kPairs) + t % 2;
      m_block = m_blocks - 1 - i / kPairs % m_blocks;
      bh = i / kPairs / m_blocks;
    } else {  // query blocks last first, then groups
      w.group = t / m_blocks % Traits::kGroups;
      m_block = m_blocks - 1 - t % m_blocks;
      bh = t / m_blocks / Traits::kGroups;
    }
    w.head = bh % p.heads_q;
    w.batch = bh / p.heads_q;
    w.head_kv = w.head / (p.heads_q / p.heads_kv);
    w.m0 = m_block * kBlockM;
    w.walk_m0 = kShareK ? (m_block & ~1) * kBlockM : w.m0;
    w.n_end = block_kv_tiles<kBlockN>(p, w.walk_m0, min(kWalkRows, p.len_q - w.walk_m0));
    w.codes = p.block_map == nullptr ? nullptr : block_map_row(p, w.batch, w.head, w.walk_m0 / p.block_map_m);
    w.scale_log2 = p.scale_log2;
    return w;
  }

  static __device__ __forceinline__ float scale_log2(const FwdParams&, const Item& w) { return w.scale_log2; }

  // The block map is built at the fallback kernel's tile (launch/ffpa_fwd_ws_launch.cuh): its blocks
  // of block_map_m x block_map_n (dividing 64 x 128) that make up key tile j of the item's rows
  // merge to one code: skipped if all are, full if all are (blocks past the map's edge hold no
  // element and count for neither), else partial.
  // Sharing blocks merge the codes of both query blocks' rows (their common walk; per-element masks
  // then cut each block's own rows).
  static __device__ __forceinline__ uint8_t tile_code(const FwdParams& p, const Item& w, int j) {
    const int rm = kWalkRows / p.block_map_m, rn = kBlockN / p.block_map_n;
    const int rows = (p.len_q + p.block_map_m - 1) / p.block_map_m - w.walk_m0 / p.block_map_m;
    bool seen = false, full = true;
    for (int a = 0; a < rm && a < rows; ++a)
      for (int b = 0; b < rn && j * rn + b < p.block_map_n_blocks; ++b) {
        const uint8_t code = w.codes[a * p.block_map_n_blocks + j * rn + b];
        seen |= code != kBlockSkip;
        full &= code == kBlockFull;
      }
    return !seen ? static_cast<uint8_t>(kBlockSkip) : full ? static_cast<uint8_t>(kBlockFull) : static_cast<uint8_t>(kBlockPartial);
  }

  // The first key tile at or after j, below the item's end, that the block map does not skip.
  static __device__ __forceinline__ int skip_to(const FwdParams& p, const Item& w, int j) {
    if (w.codes != nullptr)
      while (j < w.n_end && tile_code(p, w, j) == kBlockSkip) ++j;
    return j;
  }

  // Keys of tile j that some row of the block sees: the causal limit and the sequence end cut its last
  // tile. A pair (both blocks share m0, so they agree) loads and multiplies only the V stages holding
  // such a key (past them P is 0; the pipeline's last_stages asks), and a block whose K half of the
  // tile holds none does not load it.
  static __device__ __forceinline__ int keys_seen(const FwdParams& p, const Item& w, int j) {
    return block_kv_end(p, w.m0, min(kBlockM, p.len_q - w.m0)) - j * kBlockN;
  }
  static __device__ __forceinline__ int last_v_stages(const FwdParams& p, const Item& w, int j) {
    return min(Traits::kStagesV, max(1, (keys_seen(p, w, j) + Traits::kVKeys - 1) / Traits::kVKeys));
  }
  // A pair's block loads its K half of tile j unless no row sees a key of it (the block's S there is
  // then of stale K, every score masked; its Q@K^T stages of tile j expect Q's bytes only).
  static __device__ __forceinline__ bool pair_loads_k(const FwdParams& p, const Item& w, int j) {
    return (w.group % 2) * Traits::kKRows < keys_seen(p, w, j);
  }

  static __device__ __forceinline__ int first_tile(const FwdParams& p, const Item& w) { return skip_to(p, w, 0); }
  static __device__ __forceinline__ int next_tile(const FwdParams& p, const Item& w, int j) { return skip_to(p, w, j + 1); }

  // ---- producer: Q and K slice d of tile j; V stage v of tile j ------------------------------
  static __device__ __forceinline__ void prefetch_maps(const FfpaTmaMaps& maps) {
    ptx::tma_prefetch_map(&maps.q);
    ptx::tma_prefetch_map(&maps.k);
    ptx::tma_prefetch_map(&maps.v);
  }

  static constexpr int kScratchBytes = 0;  // the producer needs no scratch
  static __device__ __forceinline__ void begin_tile(const FwdParams&, const Item&, int, int*) {}

  // Sharing blocks: stage i of tile j (a K slice; with kShareV a V stage too) is this block's to load, into
  // both blocks (multicast), where the parity of i + j is its rank; each block's barrier expects the whole
  // stage (a Q@K^T stage: its Q slice and the K slice) either way.
  static __device__ __forceinline__ bool loads_shared(const Item& w, int i, int j) { return ((i + j) & 1) == w.rank; }

  static __device__ __forceinline__ void load_qk(const FwdParams& p, const FfpaTmaMaps& maps, const Item& w,
                                                 uint32_t stage, uint32_t bar, int d, int j, int*) {
    if constexpr (Traits::kPair) {  // the pair's Q slices are the same: one block loads each into both, in turn
      if (((d + j) & 1) == w.group % 2)
        ptx::tma_load_4d_multicast(stage, &maps.q, bar, Traits::kSliceD * d, w.m0, w.head, w.batch, 3);
    } else {
      ptx::tma_load_4d(stage, &maps.q, bar, Traits::kSliceD * d, w.m0, w.head, w.batch);
    }
    // A pair's block loads the keys of its half of the tile (its cluster rank: the group's parity).
    const int key0 = j * kBlockN + (Traits::kPair ? (w.group % 2) * Traits::kKRows : 0);
    if constexpr (kShareK) {
      if (loads_shared(w, d, j))
        ptx::tma_load_4d_multicast(stage + QSlice::kBytes, &maps.k, bar, Traits::kSliceD * d, key0, w.head_kv, w.batch, 3);
    } else if (!Traits::kPair || pair_loads_k(p, w, j)) {
      ptx::tma_load_4d(stage + QSlice::kBytes, &maps.k, bar, Traits::kSliceD * d, key0, w.head_kv, w.batch);
    }
  }

  static __device__ __forceinline__ void load_v(const FwdParams& p, const FfpaTmaMaps& maps, const Item& w,
                                                uint32_t stage, uint32_t bar, int j, int v, int*) {
    // One load for the stage's kVChunks 64-column chunks (the map's chunk dim; past Dv zero-filled).
    ptx::tma_load_5d(stage, &maps.v, bar, 0, j * kBlockN + v * Traits::kVKeys, w.group * kVChunks, w.head_kv, w.batch);
  }

  // ---- consumers ---------------------------------------------------------------------------
  // Scores of a boundary tile (base 2, scaled here): the sequence end, the causal limit and, in
  // kBlockPartial tiles, attn_mask. Off the hot path.
  template <int kNS>
  static __device__ __forceinline__ void mask_tile(float (&s)[kNS][4], const FwdParams& p, const Item& w, uint8_t code,
                                                   int row0, int n0, int g, int t4) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + g + 8 * r;
      const int lim = last_visible_key(p, row) - (n0 + 2 * t4);
#pragma unroll
      for (int n = 0; n < kNS; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float x = s[n][2 * r + e] * w.scale_log2;
          s[n][2 * r + e] = n * 8 + e > lim ? -CUDART_INF_F : x;
        }
    }
    if (code != kBlockPartial) return;
#pragma unroll
    for (int n = 0; n < kNS; ++n) {
      const float4 mq = mask_quad_log2(p, w.batch, w.head, row0 + g, n0 + n * 8 + 2 * t4);
      s[n][0] += mq.x, s[n][1] += mq.y, s[n][2] += mq.z, s[n][3] += mq.w;
    }
  }

  // One consumer's scores of tile j (keys [key0, key0 + 8 kNS) of it): the per-element path where the
  // tile needs it (a partial block of the map, the sequence end, a negative scale, the causal
  // limit); says whether it took it.
  template <int kNS>
  static __device__ __forceinline__ bool mask(float (&s)[kNS][4], const FwdParams& p, const Item& w, int j, int key0,
                                              int row0, int g, int t4) {
    constexpr int kKeys = 8 * kNS;
    const int n0 = j * kBlockN + key0;
    const uint8_t code = w.codes != nullptr ? tile_code(p, w, j) : static_cast<uint8_t>(kBlockFull);
    const bool per_elem = code == kBlockPartial || n0 + kKeys > p.len_kv || p.scale_log2 < 0.f ||
                          (p.is_causal && n0 + kKeys - 1 > w.m0 + p.causal_offset);
    if (per_elem) mask_tile(s, p, w, code, row0, n0, g, t4);
    return per_elem;
  }

  // TMA zero-filled V past S: nothing to prepare.
  template <int kCols>
  static __device__ __forceinline__ void prepare_v(const FwdParams&, const Item&, int, int, uint32_t, int) {}

  // The finished rows: O / l for consumer c's columns straight from the accumulators (tile/quad.cuh;
  // the padding columns of a last group past Dv are not stored); consumer 0 of group 0 writes the LSE.
  template <int kCols>
  static __device__ __forceinline__ void store(const FwdParams& p, const Item& w, int c, int col0, int row0, int g,
                                               int t4, const float (&o)[kCols / 8][4], const float (&row_max)[2],
                                               const float (&l)[2]) {
    constexpr int kNO = kCols / 8;
    Element* o_base = static_cast<Element*>(p.o) + w.batch * p.o_batch_stride + w.head * p.o_head_stride;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float inv = inv_row_sum(l[r]);
      const int row = row0 + g + 8 * r;
      const int col = w.group * Traits::kGroupCols + col0;
      // 4-byte stores: the 16-byte form's transpose spilled at Dv = 640 (kCols = 320) and FFPA's
      // epilogue is a small share of an item; not measured there.
      store_acc_row<Element, kNO, false>(o_base + static_cast<int64_t>(row) * p.o_row_stride + col, o, r, inv, t4,
                                         row < p.len_q, Traits::kPadded ? Traits::kHeadDimV - col : INT_MAX);
      if (row < p.len_q) {
        if (p.lse != nullptr && c == 0 && w.group == 0 && t4 == 0)
          p.lse[(static_cast<int64_t>(w.batch) * p.heads_q + w.head) * p.len_q + row] = row_lse(row_max[r], l[r]);
      }
    }
  }
};

using FfpaKernelWs = void (*)(FwdParams, FfpaTmaMaps);

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    ffpa_fwd_ws_kernel(const __grid_constant__ FwdParams p, const __grid_constant__ FfpaTmaMaps maps) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) char smem[];
  FfpaWsPipeline<Traits, FfpaPrefill<Traits>>::run(p, maps, smem);
#elif defined(__CUDA_ARCH__)
  __trap();  // no wgmma / TMA in this pass (the launcher only picks this kernel on sm_90a)
#endif
}

}  // namespace ffpa::attn
