// The K/V loads of the mma.sync split-KV decode kernel (kernels/decode_sm80.cuh): where each thread's
// rows of a KV tile live (a source pointer per load pass, stepped a tile on for a contiguous cache, page
// indices a tile ahead for a paged one, one per page a thread's passes touch), the cp.async ring's loads
// by compile-time chunk, and the ring step (wait, block barrier, the load kStages - 1 ahead). `Work` is
// the kernel's block description (DecodeFwd::Work: batch, KV head, key range).
#pragma once
#include <cstdint>
#include <type_traits>

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

  static constexpr int kPassRows = kThreads / kUnitsPerRow;  // rows of a tile one load pass covers
  static constexpr int kWindow = 8 * kLoadPasses;            // rows of one thread's window (load_row)
  // The fewest passes of a thread one page holds (with_page_group).
  static constexpr int kMinGroup = kLoadPasses < 2 ? kLoadPasses : 2;
  static_assert(kPassRows % 8 == 0 && kPassRows * kLoadPasses == kBlockN, "load passes of whole 8-row phases");
  static_assert((kLoadPasses & (kLoadPasses - 1)) == 0, "page groups of passes need a power-of-two pass count");

  // Where this thread's rows of a KV tile live: a source pointer per load pass (its 16 bytes of chunk 0
  // of the row, the page's for a paged cache, the batch's otherwise), set once per tile. A contiguous
  // cache's full tiles after the first step them by kBlockN rows (two adds a pointer); the first tile, the
  // last (partial) one and every paged tile compute them, with the page indices of the next tile read
  // one tile ahead so the table's latency hides behind loads. Passes of one page (with_page_group) take one
  // table entry and step their pointers from the first's.
  struct Rows {
    const Element* k_src[kLoadPasses];  // this thread's row of the tile in K (keys past the range: the last key's)
    const Element* v_src[kLoadPasses];  // the same in V (unused with shared K/V)
    bool valid[kLoadPasses];            // the row is a key of the block's range
    int next_page[kLoadPasses / kMinGroup];  // paged: the next tile's page of each group of passes
  };

  // The tile row thread `tid` loads in pass `pass`: with r = tid / kUnitsPerRow, row (r / 8) x kWindow +
  // r % 8 + 8 x pass, so a thread's passes lie 8 rows apart (one swizzle phase: each pass's shared offset is
  // the first's plus an immediate) inside one window of kWindow rows, and a warp's pass still reads whole
  // consecutive rows. Tiles start at multiples of kBlockN keys (DecodeFwd::work_of_block), windows at
  // multiples of kWindow, so g consecutive passes of every thread lie in one page wherever 8 g divides the
  // page size.
  static __device__ __forceinline__ int load_row(int pass, int tid) {
    const int r = tid / kUnitsPerRow;
    return r / 8 * kWindow + r % 8 + 8 * pass;
  }

  // f(std::integral_constant<int, g>) with g the passes of a thread one page holds: the largest power of two
  // up to kLoadPasses with 8 g dividing the page size (pages are multiples of 16 keys, ops/decode.cpp: g >= 2
  // where there are two passes).
  template <int kG = kLoadPasses, typename F>
  static __device__ __forceinline__ void with_page_group(const DecodeParams& p, F&& f) {
    if constexpr (kG > kMinGroup) {
      if ((p.page_size & (8 * kG - 1)) != 0) {
        with_page_group<kG / 2>(p, f);
        return;
      }
    }
    f(std::integral_constant<int, kG>{});
  }

  // The table entries of tile `tile` of this thread's rows, one per group of kG passes (keys past the range
  // read the last valid one's).
  template <int kG>
  static __device__ __forceinline__ void lookup_groups(const DecodeParams& p, const Work& w, int tile, int tid,
                                                       int (&page)[kLoadPasses / kMinGroup]) {
    const int* table = p.block_table + w.batch * p.block_table_stride;
#pragma unroll
    for (int pass = 0; pass < kLoadPasses; pass += kG) {
      const int key = min(w.n_begin + tile * kBlockN + load_row(pass, tid), w.n_end - 1);
      page[pass / kG] = __ldg(table + (p.page_shift >= 0 ? key >> p.page_shift : key / p.page_size));
    }
  }
  static __device__ __forceinline__ void lookup(const DecodeParams& p, const Work& w, int tile, int tid,
                                                int (&page)[kLoadPasses / kMinGroup]) {
    with_page_group(p, [&](auto g) { lookup_groups<decltype(g)::value>(p, w, tile, tid, page); });
  }

  static __device__ __forceinline__ void enter_tile(const DecodeParams& p, const Work& w, int tile, int tid, Rows& rows) {
    const int key0 = w.n_begin + tile * kBlockN;
    const int u8 = tid % kUnitsPerRow * 8;
    const Element* k = static_cast<const Element*>(p.k) + w.head_kv * p.k_head_stride + u8;
    const Element* v = static_cast<const Element*>(p.v) + w.head_kv * p.v_head_stride + u8;
    if (p.block_table != nullptr) {
      with_page_group(p, [&](auto g) {
        constexpr int kG = decltype(g)::value;
#pragma unroll
        for (int pass = 0; pass < kLoadPasses; ++pass) {
          const int key_raw = key0 + load_row(pass, tid);
          rows.valid[pass] = key_raw < w.n_end;
          if (pass % kG != 0) {
            // The group's previous pass, 8 rows on; a key past the range keeps its address (valid, never read:
            // the row is zero-filled).
            const int prev = pass == 0 ? 0 : pass - 1;
            const int64_t step = rows.valid[pass] ? 8 : 0;
            rows.k_src[pass] = rows.k_src[prev] + step * p.k_row_stride;
            if constexpr (!kSharedKV) rows.v_src[pass] = rows.v_src[prev] + step * p.v_row_stride;
          } else {
            const int key = min(key_raw, w.n_end - 1);
            const int row = p.page_shift >= 0 ? key & (p.page_size - 1) : key % p.page_size;
            const int page = rows.next_page[pass / kG];
            rows.k_src[pass] = k + page * p.k_batch_stride + row * p.k_row_stride;
            if constexpr (!kSharedKV) rows.v_src[pass] = v + page * p.v_batch_stride + row * p.v_row_stride;
          }
        }
        lookup_groups<kG>(p, w, tile + 1, tid, rows.next_page);
      });
      return;
    }
    if (tile > 0 && key0 + kBlockN <= w.n_end) {
      // A full tile after a full one (only the last tile is partial): kBlockN rows on.
#pragma unroll
      for (int pass = 0; pass < kLoadPasses; ++pass) {
        rows.k_src[pass] += kBlockN * p.k_row_stride;
        if constexpr (!kSharedKV) rows.v_src[pass] += kBlockN * p.v_row_stride;
        rows.valid[pass] = true;
      }
      return;
    }
#pragma unroll
    for (int pass = 0; pass < kLoadPasses; ++pass) {
      const int key_raw = key0 + load_row(pass, tid);
      const int key = min(key_raw, w.n_end - 1);
      rows.valid[pass] = key_raw < w.n_end;
      rows.k_src[pass] = k + w.batch * p.k_batch_stride + key * p.k_row_stride;
      if constexpr (!kSharedKV) rows.v_src[pass] = v + w.batch * p.v_batch_stride + key * p.v_row_stride;
    }
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
