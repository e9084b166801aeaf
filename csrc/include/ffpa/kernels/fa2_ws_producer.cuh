// The producer warp of the warp-specialised FA-2 kernel (fa2_fwd_sm90_ws.cuh, whose picture says who waits
// on what): it walks the work slots (Fa2WsItems::Walk; the split tail's shares as pieces of items,
// fa2_ws_split.cuh), announces each item to the consumers in its Q slot's two words, and one lane issues
// the TMA loads: the item's first K/V stage, its Q, then K_j and V_j of the other key tiles it sees.
// K is the kernel (Fa2FwdWs): its shared-memory plan, rings and item numbering.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "ffpa/kernels/fa2_ws_schedule.cuh"
#include "ffpa/kernels/fa2_ws_split.cuh"
#include "ffpa/ptx/mbarrier.cuh"
#include "ffpa/ptx/tma.cuh"

namespace ffpa::attn {

template <typename K>
struct Fa2WsProducer {
  using Smem = typename K::Smem;
  using Plan = typename K::Plan;
  using Ring = typename K::Ring;
  using QRing = typename K::QRing;
  using QTile = typename K::QTile;
  using KTile = typename K::KTile;
  using VTile = typename K::VTile;
  using Item = typename K::Item;
  using Walk = typename K::Walk;
  using Split = Fa2SplitTail;
  static constexpr int kBlockN = K::kBlockN;
  static __device__ __forceinline__ Item item(const FwdParams& p, int t, int m_blocks) { return K::item(p, t, m_blocks); }
  static __device__ __forceinline__ int next_tile(const uint8_t* codes, int j, int n_end) {
    return K::next_tile(codes, j, n_end);
  }

  template <typename TileT>
  static __device__ __forceinline__ void load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int row, int head,
                                              int batch) {
#pragma unroll
    for (int c = 0; c < TileT::kChunks; ++c) ptx::tma_load_4d(dst + TileT::chunk(c), map, bar, 64 * c, row, head, batch);
  }

  static __device__ __forceinline__ void produce(const FwdParams& p, const Fa2TmaMaps& maps, const Smem& s,
                                                 int m_blocks) {
    const bool leader = threadIdx.x == 0;  // the lane that arrives and issues; the warp walks and waits
    if (leader) {
      ptx::tma_prefetch_map(&maps.q);
      ptx::tma_prefetch_map(&maps.k);
      ptx::tma_prefetch_map(&maps.v);
      if constexpr (Plan::kOBytes > 0) ptx::tma_prefetch_map(&maps.o);  // (kTmaStore: O leaves by TMA)
    }
    typename QRing::State sq;
    typename Ring::State st;
    for (Walk wk; wk.valid(p, m_blocks); wk.advance(p, m_blocks)) {
      const int k = K::kSplitTail ? wk.share(p) : -1;
      if (k < 0) {
        produce_unit(p, maps, s, m_blocks, wk.t(p, m_blocks), 0, sq, st, leader);
        continue;
      }
      // A share of the split tail: its pieces of items, in order (Fa2SplitTail)
      const int n = (p.len_kv + kBlockN - 1) / kBlockN;
      const int w = Split::tiles(static_cast<int64_t>(p.heads_q) * p.batch * m_blocks, p.split_from, n);
      Split::for_each_piece(k, w, p.split_shares, n, [&](const Split::Piece& pc) {
        produce_unit(p, maps, s, m_blocks, p.split_from + pc.item, Split::range(pc.jb, pc.je), sq, st, leader);
      });
    }
    s.ring_q.producer_acquire(sq);  // no more items: -1 in the word, Q's slot full without bytes
    if (leader) {
      write_item(s, sq.stage, -1, 0);
      ptx::mbarrier_arrive(s.ring_q.full(sq.stage));
    }
  }

  // One unit: item t's key tiles [0, its end) (range 0) or those range names (a split-tail piece).
  static __device__ __forceinline__ void produce_unit(const FwdParams& p, const Fa2TmaMaps& maps, const Smem& s,
                                                      int m_blocks, int t, int range, typename QRing::State& sq,
                                                      typename Ring::State& st, bool leader) {
    const Item w = item(p, t, m_blocks);
    const int n_end = range != 0 ? Split::range_end(range) : w.n_end;
    const int head_kv = w.head / (p.heads_q / p.heads_kv);
    int j = next_tile(w.codes, range != 0 ? Split::range_begin(range) : 0, n_end);
    // The item's first K/V stage goes ahead of its Q: it loads while the previous item's last
    // tiles run (its ring slot frees then), where a single Q slot frees only with that item's last S.
    // One stage only: a ring filled with this item's tiles before Q would wait on consumers
    // that wait on Q.
    if (j < n_end) {
      load_kv(maps, s, st, j, head_kv, w.batch, leader);
      st.advance();
      j = next_tile(w.codes, j + 1, n_end);
    }
    s.ring_q.producer_acquire(sq);
    if (leader) {
      write_item(s, sq.stage, t, range);
      s.ring_q.producer_expect(sq, Plan::kQBytes);
      load<QTile>(s.q + sq.stage * Plan::kQBytes, &maps.q, s.ring_q.full(sq.stage), w.m0, w.head, w.batch);
    }
    for (; j < n_end; j = next_tile(w.codes, j + 1, n_end), st.advance())
      load_kv(maps, s, st, j, head_kv, w.batch, leader);
    sq.advance();
  }

  // The item hand-off: the producer's leader lane writes the item's index once Q's slot is free (every
  // consumer has read the previous index: they read it before they release the slot), then arrives on
  // Q's full barrier (a release); a consumer waits on that barrier (an acquire) for the item's Q and
  // reads the index after it. No barrier across the consumers: each starts its next item when it has
  // finished this one, so the ping-pong's offset between them carries over item boundaries (before,
  // a named barrier of the producer warp and all consumers met at every item: the first consumer
  // waited there for the other's last P V and epilogue).
  static __device__ __forceinline__ void write_item(const Smem& s, int slot, int t, int range) {
    asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" ::"r"(s.item + 8 * slot), "r"(t), "r"(range) : "memory");
  }

  static __device__ __forceinline__ void load_kv(const Fa2TmaMaps& maps, const Smem& s, const typename Ring::State& st,
                                                 int j, int head_kv, int batch, bool leader) {
    s.ring_k.producer_acquire(st);
    if (leader) {
      s.ring_k.producer_expect(st, Plan::kKBytes);
      load<KTile>(s.k + st.stage * Plan::kKBytes, &maps.k, s.ring_k.full(st.stage), j * kBlockN, head_kv, batch);
    }
    s.ring_v.producer_acquire(st);
    if (leader) {
      s.ring_v.producer_expect(st, Plan::kVBytes);
      load<VTile>(s.v + st.stage * Plan::kVBytes, &maps.v, s.ring_v.full(st.stage), j * kBlockN, head_kv, batch);
    }
  }
};

}  // namespace ffpa::attn
