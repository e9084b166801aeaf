// The K/V loads of the mma.sync split-KV decode kernel (kernels/decode_sm80.cuh): where each thread's
// rows of a KV tile live (a source pointer per load pass, stepped a tile on for a contiguous cache, page
// indices a tile ahead for a paged one), the cp.async ring's loads by compile-time chunk, and the ring
// step (wait, block barrier, the load kStages - 1 ahead). `Work` is the kernel's block description
// (DecodeFwd::Work: batch, KV head, key range).
#pragma once
#include <cstdint>

#include "ffpa/params.h"
#include "ffpa/ptx/cp_async.cuh"

namespace ffpa::kernels {

template <typename Element, typename Traits, typename Work>
struct DecodeKvLoads {
  using KvTile = typename Traits::KvTile;
  static constexpr int kThreads = Traits::kThreads;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kChunk = Traits::kChunk;
  static constexpr int kStages = Traits::kStages;
  static constexpr int kKChunks = Traits::kKChunks;
  static constexpr int kChunksPerTile = Traits::kChunksPerTile;
  static constexpr int kUnitsPerRow = Traits::kUnitsPerRow;
  static constexpr int kLoadPasses = Traits::kLoadPasses;
  static constexpr bool kSharedKV = Traits::kSharedKV;

  // Where this thread's rows of a KV tile live: a source pointer per load pass (its 16 bytes of chunk 0
  // of the row, the page's for a paged cache, the batch's otherwise), set once per tile. A contiguous
  // cache's full tiles after the first step them by kBlockN rows (two adds a pointer); the first tile, the
  // last (partial) one and every paged tile compute them, with the page indices of the next tile read
  // one tile ahead so the table's latency hides behind loads.
  struct Rows {
    const Element* k_src[kLoadPasses];  // this thread's row of the tile in K (keys past the range: the last key's)
    const Element* v_src[kLoadPasses];  // the same in V (unused with shared K/V)
    bool valid[kLoadPasses];            // the row is a key of the block's range
    int next_page[kLoadPasses];
  };

  static __device__ __forceinline__ int load_row(int pass, int tid) {
    return tid / kUnitsPerRow + pass * (kThreads / kUnitsPerRow);
  }

  // The table entries of tile `tile` of this thread's rows (keys past the range read the last valid one).
  static __device__ __forceinline__ void lookup(const DecodeParams& p, const Work& w, int tile, int tid,
                                                int (&page)[kLoadPasses]) {
    const int* table = p.block_table + w.batch * p.block_table_stride;
#pragma unroll
    for (int pass = 0; pass < kLoadPasses; ++pass) {
      const int key = min(w.n_begin + tile * kBlockN + load_row(pass, tid), w.n_end - 1);
      page[pass] = __ldg(table + (p.page_shift >= 0 ? key >> p.page_shift : key / p.page_size));
    }
  }

  static __device__ __forceinline__ void enter_tile(const DecodeParams& p, const Work& w, int tile, int tid, Rows& rows) {
    const int key0 = w.n_begin + tile * kBlockN;
    if (p.block_table == nullptr && tile > 0 && key0 + kBlockN <= w.n_end) {
      // A full tile after a full one (only the last tile is partial): kBlockN rows on.
#pragma unroll
      for (int pass = 0; pass < kLoadPasses; ++pass) {
        rows.k_src[pass] += kBlockN * p.k_row_stride;
        if constexpr (!kSharedKV) rows.v_src[pass] += kBlockN * p.v_row_stride;
        rows.valid[pass] = true;
      }
      return;
    }
    const int u8 = tid % kUnitsPerRow * 8;
    const Element* k = static_cast<const Element*>(p.k) + w.head_kv * p.k_head_stride + u8;
    const Element* v = static_cast<const Element*>(p.v) + w.head_kv * p.v_head_stride + u8;
#pragma unroll
    for (int pass = 0; pass < kLoadPasses; ++pass) {
      const int key_raw = key0 + load_row(pass, tid);
      const int key = min(key_raw, w.n_end - 1);
      int page, row;
      if (p.block_table != nullptr) {
        page = rows.next_page[pass];
        row = p.page_shift >= 0 ? key & (p.page_size - 1) : key % p.page_size;
      } else {
        page = w.batch;
        row = key;
      }
      rows.valid[pass] = key_raw < w.n_end;
      rows.k_src[pass] = k + page * p.k_batch_stride + row * p.k_row_stride;
      if constexpr (!kSharedKV) rows.v_src[pass] = v + page * p.v_batch_stride + row * p.v_row_stride;
    }
    if (p.block_table != nullptr) lookup(p, w, tile + 1, tid, rows.next_page);
  }

  // Ring load of chunk kC (the K chunks, then the V chunks) of KV tile `tile` into `slot`, when `live`
  // (a load of the block's range); keys past n_end are zero-filled, not read. Always commits a group
  // (empty past the end) so the wait counts stay uniform. The chunk is a compile-time constant at
  // every call, so its column offset folds into the loads' immediates.
  template <int kC>
  static __device__ __forceinline__ void issue(const DecodeParams& p, const Work& w, uint32_t slot, int tile, bool live,
                                               int tid, Rows& rows) {
    if (live) {
      if constexpr (kC == 0) enter_tile(p, w, tile, tid, rows);
      constexpr bool kIsK = kC < kKChunks;
      constexpr int kCol0 = (kIsK ? kC : kC - kKChunks) * kChunk;
      const int u = tid % kUnitsPerRow;
#pragma unroll
      for (int pass = 0; pass < kLoadPasses; ++pass) {
        const Element* src = (kSharedKV || kIsK ? rows.k_src[pass] : rows.v_src[pass]) + kCol0;
        ptx::cp_async_cg_16(slot + KvTile::unit_offset(load_row(pass, tid), u), src, rows.valid[pass]);
      }
    }
    ptx::cp_async_commit_group();
  }

  // Ring load i (tile i / kChunksPerTile, chunk i % kChunksPerTile) into slot i % kStages, the chunk
  // known only at run time (the prologue's loads).
  template <int kC = 0>
  static __device__ __forceinline__ void issue_at(const DecodeParams& p, const Work& w, uint32_t ring, int i, int n_chunks,
                                                  int tid, Rows& rows) {
    if constexpr (kC + 1 < kChunksPerTile) {
      if (i % kChunksPerTile != kC) {
        issue_at<kC + 1>(p, w, ring, i, n_chunks, tid, rows);
        return;
      }
    }
    issue<kC>(p, w, ring + static_cast<uint32_t>((i % kStages) * KvTile::kBytes), i / kChunksPerTile, i < n_chunks, tid, rows);
  }

  // One ring step: slot i (chunk kC of tile t) has landed for every thread, and slot (i - 1) % kStages
  // is free again, so the load kStages - 1 ahead goes into it.
  template <int kC>
  static __device__ __forceinline__ uint32_t ring_step(const DecodeParams& p, const Work& w, uint32_t ring, int t, int i,
                                                       int n_chunks, int tid, Rows& rows) {
    ptx::cp_async_wait_group<kStages - 2>();
    __syncthreads();
    constexpr int kAhead = kC + kStages - 1;  // the load's index relative to this tile's chunk 0
    const int j = i + kStages - 1;
    issue<kAhead % kChunksPerTile>(p, w, ring + static_cast<uint32_t>((j % kStages) * KvTile::kBytes),
                                   t + kAhead / kChunksPerTile, j < n_chunks, tid, rows);
    return ring + static_cast<uint32_t>((i % kStages) * KvTile::kBytes);
  }
};

}  // namespace ffpa::kernels
