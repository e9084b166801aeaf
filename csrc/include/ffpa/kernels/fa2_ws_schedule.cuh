// The warp-specialised FA-2 kernel's plan (fa2_fwd_sm90_ws.cuh): its TMA maps, its shared memory and
// registers per tile (Fa2WsPlan), and the order its blocks take work items in (Fa2WsItems: items,
// causal pairs, the walk over them), which the launcher also reads to size the persistent grid.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "ffpa/kernels/fa2_common.cuh"
#include "ffpa/kernels/fa2_walk_order.h"
#include "ffpa/tile/fast_divmod.cuh"

namespace ffpa::attn {

// The kernel's TMA maps (rank 4: head dim, position, head, batch), encoded by the launcher.
struct Fa2TmaMaps {
  CUtensorMap q, k, v, o;  // o: only the kTmaStore kernel's (64-row boxes of its output)
};

// Shared-memory plan of the warp-specialised kernel for a wgmma tile table row (Fa2Traits).
template <typename Traits, bool kTmaStore = false, int kQSlots = 1>
struct Fa2WsPlan {
  static constexpr int kQBytes = Traits::QTile::kBytes;
  static constexpr int kKBytes = Traits::KTile::kBytes;
  static constexpr int kVBytes = Traits::VTile::kBytes;
  // kTmaStore: each consumer's O staged for its TMA store, 64 rows x 128 bytes a 64-column chunk (the
  // launcher builds it only where two K/V stages still fit beside it: kFits)
  static constexpr int kOWgBytes = kTmaStore ? 64 * 128 * ((Traits::kHeadDimV + 63) / 64) : 0;
  static constexpr int kOBytes = Traits::kWarps / 4 * kOWgBytes;
  // Q's ring (kQSlots slots), two rings of up to 4 stages, two words per Q slot (its item and key range: 16 bytes)
  static_assert(kQSlots == 1 || kQSlots == 2, "one or two Q slots");
  static constexpr int kBarrierBytes = 2 * 8 * kQSlots + 2 * 2 * 4 * 8 + 16;
  static constexpr int bytes(int stages) {
    return 1024 + kQSlots * kQBytes + stages * (kKBytes + kVBytes) + kOBytes + kBarrierBytes;
  }
  static constexpr int kMaxSmem = 227 * 1024;
  static constexpr int kStages = bytes(4) <= kMaxSmem ? 4 : bytes(3) <= kMaxSmem ? 3 : 2;
  static constexpr int kSmemBytes = bytes(kStages);
  static constexpr bool kFits = bytes(2) <= kMaxSmem;
  // (the O buffer or a second Q slot: the launcher builds those only where kFits)
  static_assert(kFits || kTmaStore || kQSlots > 1, "two stages of K and V must fit");
  static constexpr int kConsumers = Traits::kWarps / 4;  // consumer warpgroups of 64 rows each
  static_assert((kConsumers == 2 || kConsumers == 3) && Traits::kBlockM == 64 * kConsumers,
                "two or three consumer warpgroups of 64 rows");
  static_assert(Traits::kHeadDim <= 512 && Traits::kHeadDimV <= 512, "P V in at most two wgmmas of N <= 256");
  static constexpr int kThreads = 128 * (kConsumers + 1);
  // Registers per thread after setmaxnreg: the producer keeps 24, the consumers share the rest of
  // the 64 K (240 each for two warpgroups, 160 for three).
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = kConsumers == 2 ? 240 : 160;
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= 65536, "the register file holds the block");
};

// Work items of a kBlockM x kBlockN tile and the walk over them.
template <int kBlockM, int kBlockN>
struct Fa2WsItems {
  // One work item: kBlockM query rows of one (batch, head) and the key tiles they see.
  struct Item {
    int m_block, head, batch, m0, rows_q, n_end;
    const uint8_t* codes;  // the item's row of the mask block map, or null
  };

  static __device__ __forceinline__ Item item(const FwdParams& p, int t, int m_blocks) {
    const int bh = t / m_blocks;
    return item_at(p, m_blocks - 1 - t % m_blocks, bh % p.heads_q, bh / p.heads_q);
  }
  // item()'s two divisions (by the query blocks and the query heads, fixed for the kernel) as FastDivmods,
  // built once per consumer thread: the divisions sat between every item's Q and its first S (session 47;
  // the producer, with 24 registers and off that path, divides).
  struct ItemDiv {
    FastDivmod m_blocks, heads;
    __device__ __forceinline__ ItemDiv(const FwdParams& p, int m_blocks_) : m_blocks(m_blocks_), heads(p.heads_q) {}
  };
  static __device__ __forceinline__ Item item(const FwdParams& p, int t, const ItemDiv& dv) {
    int r, head;
    const int bh = dv.m_blocks.divmod(t, r);
    const int batch = dv.heads.divmod(bh, head);
    return item_at(p, dv.m_blocks.d - 1 - r, head, batch);
  }
  static __device__ __forceinline__ Item item_at(const FwdParams& p, int m_block, int head, int batch) {
    Item w;
    w.m_block = m_block;
    w.head = head;
    w.batch = batch;
    w.m0 = w.m_block * kBlockM;
    w.rows_q = min(kBlockM, p.len_q - w.m0);
    w.n_end = block_kv_tiles<kBlockN>(p, w.m0, w.rows_q);
    w.codes = p.block_map == nullptr ? nullptr : block_map_row(p, w.batch, w.head, w.m_block);
    return w;
  }

  // The order a block takes items in: slot blockIdx.x first, then the next unclaimed slot of
  // p.work_counter (list scheduling: a block whose SM runs slower, or whose items were shorter, takes
  // fewer or more; docs/hopper_profile.md, sessions 20-21), or with no counter blockIdx.x + gridDim.x, ..
  // A slot is one item, or with causal masking two of one (batch, head), query blocks M - 1 - q and
  // q (the longest left and the shortest), whose lengths add up to about the same for every slot: a
  // static walk of single causal items of every length leaves a tail, one block per item pays each
  // block's start-up (session 17). But slots of equal weight leave the last round of the walk as
  // coarse as a pair: so the last p.causal_tail_bh (batch, head)s are single items instead, dealt
  // longest first across them (query block M - 1 of each, then M - 2, ..), and the walk ends on ever
  // shorter items (launch::fa2_causal_tail_bh). Only the producer walks; it announces each item to the
  // consumers with its Q (Smem::item).
  static __host__ __device__ __forceinline__ int64_t walk_slots(const FwdParams& p, int m_blocks) {
    const int64_t bh = static_cast<int64_t>(p.heads_q) * p.batch;
    if (!p.is_causal && p.split_shares > 0) return static_cast<int64_t>(p.split_from) + p.split_shares;
    return Fa2WalkOrder::slots(bh, p.is_causal, p.causal_tail_bh, m_blocks);
  }
  // Where the producer is in its walk: the slot and which of its pair. The rest derives from the
  // parameters where used (uniform values; the producer thread has 24 registers).
  struct Walk {
    int s, half;
    __device__ __forceinline__ Walk() : s(blockIdx.x), half(0) {}
    // Slots [0, paired) are pairs (causal) or items, the rest the tail's single items (Fa2WalkOrder).
    static __device__ __forceinline__ int paired(const FwdParams& p, int m_blocks) {
      return Fa2WalkOrder::paired(p.heads_q * p.batch, p.is_causal, p.causal_tail_bh, m_blocks);
    }
    __device__ __forceinline__ bool valid(const FwdParams& p, int m_blocks) const {
      if (p.split_shares > 0) return s < p.split_from + p.split_shares;  // (not causal: Fa2SplitTail)
      return s < paired(p, m_blocks) + (p.is_causal ? p.causal_tail_bh * m_blocks : 0);
    }
    // A share of the split tail (Fa2SplitTail) rather than an item: its index, else -1.
    __device__ __forceinline__ int share(const FwdParams& p) const {
      return p.split_shares > 0 && s >= p.split_from ? s - p.split_from : -1;
    }
    // The current item in item()'s numbering (query block fastest, last first; Fa2WalkOrder).
    __device__ __forceinline__ int t(const FwdParams& p, int m_blocks) const {
      return Fa2WalkOrder::item(p.heads_q * p.batch, p.is_causal, p.causal_tail_bh, m_blocks, s, half);
    }
    __device__ __forceinline__ void advance(const FwdParams& p, int m_blocks) {
      if (half == 0 && Fa2WalkOrder::pair_has_second(p.is_causal, p.causal_tail_bh, p.heads_q * p.batch, m_blocks, s)) {
        half = 1;
      } else {
        half = 0;
        if (p.work_counter != nullptr) {
          int v = 0;
          if (threadIdx.x == 0) v = atomicAdd(p.work_counter, 1);
          s = static_cast<int>(gridDim.x) + __shfl_sync(0xffffffffu, v, 0);  // the producer warp's lanes agree
        } else {
          s += static_cast<int>(gridDim.x);
        }
      }
    }
  };
};

}  // namespace ffpa::attn
