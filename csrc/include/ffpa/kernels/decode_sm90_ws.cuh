// Split-KV decode on Hopper (sm_90a) for many query rows per KV head: the warp-specialised wgmma +
// TMA pipeline of FFPA level 1 (kernels/ffpa_ws_pipeline.cuh: its picture of who waits on what)
// with a decode Problem. Where the packed rows of a KV head (its query heads x Lq) reach a wgmma
// tile (MLA's 128 heads, wide GQA groups, speculative Lq), the mma.sync decode kernel
// (decode_sm80.cuh, 16-row tiles) reads each K/V tile from shared memory once per 16 rows and is
// compute-bound far below the tensor cores' rate; this kernel takes 64 rows per block. The launcher
// (launch/decode_ws_launch.cuh) picks between the two per call.
//
// Grid: one block per (64 packed rows, Dv column group, split, KV head, batch), the row blocks of
// one key range adjacent (they read the same K/V tiles, through L2). Packed row r of a block is
// query position i0 + r / rows_per_i of query head g0 + r % rows_per_i of the KV head's group
// (rows_per_i = min(group, 64)): the Q map is rank 5 (head dim, head in group, position, KV head,
// batch), so one TMA box is the block's 64 rows whether the group is 8 heads x 8 positions or 64 of
// 128 heads at one position. Groups are powers of two (the launcher's condition).
//
// Keys: tiles of 128 from the sequence's start; a split takes a run of them, cut at the sequence's
// length (cache_seqlens) and, with causal, at its last row's limit (bottom-right: position i sees
// keys < seqlen - Lq + i + 1). A page table is read by the producer: one TMA box per page a tile
// or V stage covers (pages of 16..256 keys, powers of two), the box rows min(page, 128) for K and
// min(page, 32) for V. Keys past the length are real memory of the cache (not TMA's zero fill):
// their scores are masked to -inf, and the V rows of the last stage are zeroed in shared memory
// before P V reads them (unwritten cache memory may hold NaN, and 0 * NaN is NaN).
//
// Output: with one split O / l and the LSE into out / lse; else the fp32 partial and its base-2
// LSE, which decode_merge_kernel combines (the same layout as the mma.sync kernel's).
#pragma once
#include <cuda.h>

#include <cstdint>
#include <math_constants.h>

#include "ffpa/attn/state.cuh"
#include "ffpa/constants.h"
#include "ffpa/kernels/decode_grid.cuh"
#include "ffpa/kernels/ffpa_ws_pipeline.cuh"
#include "ffpa/params.h"
#include "ffpa/ptx/grid_dep.cuh"
#include "ffpa/ptx/tma.cuh"
#include "ffpa/ptx/warpgroup.cuh"
#include "ffpa/tile/numeric.cuh"
#include "ffpa/traits/decode_traits.h"
#include "ffpa/traits/ffpa_traits.h"

namespace ffpa::attn {

// q: rank 5 (head dim, query head in group, position, KV head, batch), boxes of 64 columns x
// rows_per_i heads x 64 / rows_per_i positions; k, v: rank 4 (head dim, position, KV head, batch)
// of a contiguous cache or (head dim, row in page, KV head, page) of a page pool, boxes of 64
// columns x min(page, 128) (k) and min(page, 32) (v) rows.
struct DecodeTmaMaps {
  CUtensorMap q, k, v;
};

// The key tiles (of kBlockN keys) split `split` of a sequence covers, for rows up to position
// i_last: [first, end), cut at the sequence's length and, with causal, at position i_last's limit
// (bottom-right: keys < seqlen - Lq + i_last + 1); and the length. Lengths are not checked on the
// host (no sync): clamped to the cache, so a bad one reads nothing outside it (FFPA_DEBUG_CHECKS
// reports them). Both Hopper decode kernels walk these.
struct DecodeKeyRange {
  int seqlen, first, end;
};

template <int kBlockN>
__device__ __forceinline__ DecodeKeyRange decode_key_range(const DecodeParams& p, int batch, int split, int i_last,
                                                           int splits) {
  DecodeKeyRange r;
  const int len = p.seqlens != nullptr ? __ldg(p.seqlens + batch) : p.len_kv;
  r.seqlen = min(max(len, 0), p.len_kv);
  const int tiles = (r.seqlen + kBlockN - 1) / kBlockN;
  const int per_split = (tiles + splits - 1) / splits;
  r.first = min(split * per_split, tiles);
  r.end = min(r.first + per_split, tiles);
  if (p.is_causal) r.end = min(r.end, (max(r.seqlen - p.len_q + i_last + 1, 0) + kBlockN - 1) / kBlockN);
  return r;
}

// The page of a paged cache holding `key` of block w's sequence (w: the kernel's block description, with
// batch and seqlen), the key clamped to the sequence so no table entry past its length is read.
template <typename Block>
__device__ __forceinline__ int decode_page_of(const DecodeParams& p, const Block& w, int key) {
  return __ldg(p.block_table + w.batch * p.block_table_stride + (min(key, w.seqlen - 1) >> p.page_shift));
}

// A block of the Hopper single-cache decode kernels (decode_sm90_narrow.cuh, decode_sm90_mla.cuh): grid
// (row blocks x splits, KV heads, batch), read in reverse launch order (kernels/decode_grid.cuh); its
// kRows packed rows (RowPacking: row r is position i0 + r / rows_per_i of head g0 + r % rows_per_i) and
// its key tiles of kBlockN keys.
struct DecodeRowBlock {
  int batch, head_kv, split, group;
  int splits;   // key ranges of this sequence: num_splits, or its share under balanced splits
  int slot;     // the partial slot this block writes: split x batch + b, or its index under balanced splits
  int m_block;  // the row block (of kRows packed rows) of this KV head
  int g0, i0, rows_per_i, positions;
  int seqlen, first, n_tiles;  // key tiles [first, first + n_tiles)
};

// `scratch`: shared memory for decode_longest_first_batch where the launcher asked for that order.
template <int kRows, int kBlockN>
__device__ __forceinline__ DecodeRowBlock decode_row_block(const DecodeParams& p, int* scratch) {
  DecodeRowBlock w;
  w.group = p.heads_q / p.heads_kv;
  const RowPacking<kRows> pack(w.group, p.len_q);
  w.rows_per_i = pack.rows_per_i;
  w.positions = pack.positions;
  const kernels::DecodeBlock b = kernels::decode_block();
  w.m_block = b.x % pack.blocks;
  w.split = b.x / pack.blocks;
  w.head_kv = b.y;
  w.splits = p.num_splits;
  if (p.balanced_splits) {  // (the launcher: one row block per KV head)
    w.slot = b.z * p.num_splits + w.split;
    const kernels::DecodeSplitOf s =
        kernels::decode_balanced_split(p.seqlens, p.len_kv, p.batch, p.num_splits, w.slot, scratch);
    w.batch = s.batch, w.split = s.split, w.splits = s.splits;
  } else {
    w.batch = p.longest_first ? kernels::decode_longest_first_batch(p.seqlens, p.batch, static_cast<int>(blockIdx.z), scratch)
                              : b.z;
    w.slot = w.split * p.batch + w.batch;
  }
  w.g0 = pack.g0(w.m_block);
  w.i0 = pack.i0(w.m_block);
  const DecodeKeyRange keys =
      decode_key_range<kBlockN>(p, w.batch, w.split, min(w.i0 + w.positions, p.len_q) - 1, w.splits);
  w.seqlen = keys.seqlen;
  w.first = keys.first;
  w.n_tiles = max(keys.end - keys.first, 0);
  return w;
}

template <typename Traits>
struct DecodeWsProblem {
  using Params = DecodeParams;
  using Maps = DecodeTmaMaps;
  using Element = typename Traits::Element;
  using Num = Numeric<Element>;
  using QSlice = typename Traits::QSlice;
  using KSlice = typename Traits::KSlice;
  using VStage = typename Traits::VStage;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kVKeys = Traits::kVKeys;
  static constexpr bool kPairOk = false;  // a block per column group (no cluster pair)
  static constexpr int kVChunks = Traits::kGroupCols / 64;  // 64-column chunks of one V stage
  static constexpr uint32_t kBarZeroV = 4;                  // named barriers 4, 5: one consumer's V zeroing
  static_assert(kBlockM == 64, "a block's rows are one 64-row box of Q");

  struct Item {
    int m0;     // 0: the hooks get block-local rows
    int n_end;  // key tiles [first, n_end) of the split
    int first;
    int batch, head_kv, group, split;
    int g0, i0, rows_per_i;  // row r: position i0 + r / rows_per_i, head g0 + r % rows_per_i of the group
    int seqlen;
    int lim_min;  // keys below it are visible to every row of the block
  };

  static_assert(Traits::kPBuffers * Traits::PTile::kBytes >= 4 * (kDecodeLongestFirstMaxBatch + 1),
                "P's buffers hold the longest-first order's scratch");
  static __device__ __forceinline__ Item item(const DecodeParams& p, int t, int* scratch) {
    const RowPacking<kBlockM> pack(p.heads_q / p.heads_kv, p.len_q);
    Item w;
    w.m0 = 0;
    w.rows_per_i = pack.rows_per_i;
    // Longest first: the launch position's sequence rank (batch slowest), the rest in reverse order.
    const int per_batch = pack.blocks * Traits::kGroups * p.num_splits * p.heads_kv;
    const int rank = t / per_batch;
    t = kernels::decode_block_1d(t);
    const int m_block = t % pack.blocks;
    t /= pack.blocks;
    w.group = Traits::kGroups == 1 ? 0 : t % Traits::kGroups;
    t /= Traits::kGroups;
    w.split = t % p.num_splits;
    t /= p.num_splits;
    w.head_kv = t % p.heads_kv;
    w.batch = p.longest_first ? kernels::decode_longest_first_batch(p.seqlens, p.batch, rank, scratch) : t / p.heads_kv;
    w.g0 = pack.g0(m_block);
    w.i0 = pack.i0(m_block);
    const DecodeKeyRange keys =
        decode_key_range<kBlockN>(p, w.batch, w.split, min(w.i0 + pack.positions, p.len_q) - 1, p.num_splits);
    w.seqlen = keys.seqlen;
    w.first = keys.first;
    w.n_end = keys.end;
    w.lim_min = p.is_causal ? w.seqlen - p.len_q + w.i0 + 1 : w.seqlen;
    return w;
  }

  // The softmax scale of the block's scores (base 2): the call's.
  static __device__ __forceinline__ float scale_log2(const DecodeParams& p, const Item&) { return p.scale_log2; }

  static __device__ __forceinline__ int first_tile(const DecodeParams&, const Item& w) { return w.first; }
  static __device__ __forceinline__ int next_tile(const DecodeParams&, const Item&, int j) { return j + 1; }

  // ---- producer ----------------------------------------------------------------------------
  static __device__ __forceinline__ void prefetch_maps(const DecodeTmaMaps& maps) {
    ptx::tma_prefetch_map(&maps.q);
    ptx::tma_prefetch_map(&maps.k);
    ptx::tma_prefetch_map(&maps.v);
  }

  // A paged cache: the pages of tile j's keys, looked up once per tile into slot j & 1 of the producer's
  // scratch (V of tile j is loaded after tile j + 1's lookups), instead of once per TMA box: with
  // 64-key pages the per-box lookups (22 a tile, each a dependent load before its TMA) cost the
  // 128-head MLA shape 15% (9 K slices x 2 pages + 4 V stages).
  static constexpr int kTilePages = kBlockN / 16;  // at most: pages of 16 keys
  static constexpr int kScratchBytes = 2 * kTilePages * 4;
  static __device__ __forceinline__ void begin_tile(const DecodeParams& p, const Item& w, int j, int* scratch) {
    if (p.block_table == nullptr) return;
    const int box = min(p.page_size, kBlockN);
    int* slot = scratch + (j & 1) * kTilePages;
    for (int i = 0; i * box < kBlockN; ++i) slot[i] = decode_page_of(p, w, j * kBlockN + i * box);
  }

  // The page holding key `r` of tile j (begin_tile's note); pages are powers of two here (the launcher),
  // so a shift finds it (a division by the page size, 22 a tile, slowed the producer thread by a third).
  static constexpr int kTileShift = 7;
  static_assert(kBlockN == 1 << kTileShift, "a tile of 128 keys");
  static __device__ __forceinline__ int tile_page(const DecodeParams& p, const int* scratch, int j, int r) {
    return scratch[(j & 1) * kTilePages + (r >> min(p.page_shift, kTileShift))];
  }

  static __device__ __forceinline__ void load_qk(const DecodeParams& p, const DecodeTmaMaps& maps, const Item& w,
                                                 uint32_t stage, uint32_t bar, int d, int j, int* scratch) {
    ptx::tma_load_5d(stage, &maps.q, bar, 64 * d, w.g0, w.i0, w.head_kv, w.batch);
    const uint32_t k = stage + QSlice::kBytes;
    if (p.block_table == nullptr) {
      ptx::tma_load_4d(k, &maps.k, bar, 64 * d, j * kBlockN, w.head_kv, w.batch);
      return;
    }
    const int box = min(p.page_size, kBlockN);
    for (int r = 0; r < kBlockN; r += box) {
      const int key = j * kBlockN + r;
      ptx::tma_load_4d(k + r * 128, &maps.k, bar, 64 * d, key & (p.page_size - 1), w.head_kv,
                       tile_page(p, scratch, j, r));
    }
  }

  static __device__ __forceinline__ void load_v(const DecodeParams& p, const DecodeTmaMaps& maps, const Item& w,
                                                uint32_t stage, uint32_t bar, int j, int v, int* scratch) {
    // The V map's chunk dim (launch/decode_ws_launch.cuh): one load per stage (contiguous) or page
    // box; with pages shorter than a stage, one per box and chunk.
    const int key0 = j * kBlockN + v * kVKeys, chunk0 = w.group * kVChunks;
    if (p.block_table == nullptr) {
      ptx::tma_load_5d(stage, &maps.v, bar, 0, key0, chunk0, w.head_kv, w.batch);
      return;
    }
    if (p.page_size >= kVKeys) {
      const int page = tile_page(p, scratch, j, v * kVKeys);
      ptx::tma_load_5d(stage, &maps.v, bar, 0, key0 & (p.page_size - 1), chunk0, w.head_kv, page);
      return;
    }
    for (int r = 0; r < kVKeys; r += p.page_size) {
      const int page = tile_page(p, scratch, j, v * kVKeys + r), row = (key0 + r) & (p.page_size - 1);
#pragma unroll
      for (int c = 0; c < kVChunks; ++c)
        ptx::tma_load_5d(stage + VStage::chunk(c) + r * 128, &maps.v, bar, 0, row, chunk0 + c, w.head_kv, page);
    }
  }

  // ---- consumers ---------------------------------------------------------------------------
  // A consumer's scores of tile j (keys [key0, key0 + 8 kNS) of it), per element where a row's limit
  // falls inside them (the length, causal) or the scale is negative: keys at or past the row's
  // limit -> -inf, the rest scaled.
  template <int kNS>
  static __device__ __forceinline__ bool mask(float (&s)[kNS][4], const DecodeParams& p, const Item& w, int j, int key0,
                                              int row0, int g, int t4) {
    const int n0 = j * kBlockN + key0;
    const bool per_elem = n0 + 8 * kNS > w.lim_min || p.scale_log2 < 0.f;
    if (!per_elem) return false;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = w.i0 + (row0 + g + 8 * r) / w.rows_per_i;
      const int lim = (p.is_causal ? min(w.seqlen, w.seqlen - p.len_q + i + 1) : w.seqlen) - (n0 + 2 * t4);
#pragma unroll
      for (int n = 0; n < kNS; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float x = s[n][2 * r + e] * p.scale_log2;
          s[n][2 * r + e] = n * 8 + e >= lim ? -CUDART_INF_F : x;
        }
    }
    return true;
  }

  // V stage v of tile j holds keys past the sequence's length: zero their rows in this consumer's
  // columns [col, col + kCols) (P is 0 there, but the memory may hold NaN), publish the stores to
  // the async proxy and to the consumer's other warps before its wgmma reads them.
  template <int kCols>
  static __device__ __forceinline__ void prepare_v(const DecodeParams&, const Item& w, int j, int v, uint32_t stage,
                                                   int col) {
    const int valid = w.seqlen - (j * kBlockN + v * kVKeys);
    if (valid >= kVKeys) return;
    constexpr int kUnits = kCols / 8;  // 16-byte units of one row in this consumer's columns
    const int first = max(valid, 0), tid = threadIdx.x % 128;
    for (int i = tid; i < (kVKeys - first) * kUnits; i += 128) {
      const uint32_t addr = stage + VStage::unit_offset(first + i / kUnits, col / 8 + i % kUnits);
      asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(addr), "r"(0u));
    }
    ptx::fence_proxy_async_shared();
    ptx::named_barrier_sync(kBarZeroV + (col == 0 ? 0 : 1), 128);
  }

  // The finished rows: with one split O / l (b16) and the natural-log LSE; else the fp32 partial
  // and its base-2 LSE at [split][batch][head_kv][packed row] (packed row = position x group + head).
  template <int kCols>
  static __device__ __forceinline__ void store(const DecodeParams& p, const Item& w, int c, int col0, int row0, int g,
                                               int t4, const float (&o)[kCols / 8][4], const float (&row_max)[2],
                                               const float (&l)[2]) {
    constexpr int kNO = kCols / 8;
    const int group = p.heads_q / p.heads_kv;
    const int col = w.group * Traits::kGroupCols + col0 + 2 * t4;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + g + 8 * r;
      const int i = w.i0 + row / w.rows_per_i, hg = w.g0 + row % w.rows_per_i;
      if (i >= p.len_q) continue;
      const float inv = inv_row_sum(l[r]);
      const bool lse_lane = c == 0 && w.group == 0 && t4 == 0;
      if (p.num_splits == 1) {
        const int head = w.head_kv * group + hg;
        uint32_t* dst = reinterpret_cast<uint32_t*>(static_cast<Element*>(p.o) + w.batch * p.o_batch_stride +
                                                    i * p.o_row_stride + head * p.o_head_stride + col);
#pragma unroll
        for (int n = 0; n < kNO; ++n)
          if (!Traits::kPadded || col + 8 * n < Traits::kHeadDimV)
            dst[4 * n] = Num::pack2(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
        if (p.lse != nullptr && lse_lane)
          p.lse[(static_cast<int64_t>(w.batch) * p.heads_q + head) * p.len_q + i] = row_lse(row_max[r], l[r]);
      } else {
        const int64_t item =
            ((static_cast<int64_t>(w.split) * p.batch + w.batch) * p.heads_kv + w.head_kv) * group * p.len_q + i * group + hg;
        float* dst = p.o_part + item * Traits::kHeadDimV + col;
#pragma unroll
        for (int n = 0; n < kNO; ++n)
          if (!Traits::kPadded || col + 8 * n < Traits::kHeadDimV)
            *reinterpret_cast<float2*>(dst + 8 * n) = make_float2(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
        if (lse_lane) p.lse_part[item] = row_lse2(row_max[r], l[r]);
      }
    }
  }
};

using DecodeKernelWs = void (*)(DecodeParams, DecodeTmaMaps);

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    decode_split_ws_kernel(const __grid_constant__ DecodeParams p, const __grid_constant__ DecodeTmaMaps maps) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) char smem[];
  ptx::launch_dependents();  // the merge kernel's blocks may take SMs this grid frees (launch_decode_merge)
  FfpaWsPipeline<Traits, DecodeWsProblem<Traits>>::run(p, maps, smem);
#elif defined(__CUDA_ARCH__)
  __trap();  // no wgmma / TMA in this pass (the launcher only picks this kernel on sm_90a)
#endif
}

}  // namespace ffpa::attn
