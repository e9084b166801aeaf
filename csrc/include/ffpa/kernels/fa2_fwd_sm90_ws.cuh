// FA-2 forward on Hopper, warp-specialised (sm_90a): the kernel the FA-2 family runs on H100/H200
// wherever TMA can describe the tensors (launch/fa2_fwd_launch.cuh; otherwise, up to D = 256,
// fa2_fwd_sm90.cuh's cp.async kernel runs, with the same tile, so one mask block map serves both;
// past 256 the mma.sync kernel).
//
// One block per SM (persistent) walks work items (64 query rows per consumer warpgroup of one
// (batch, head)) in slots: blockIdx.x, then the next one a work counter hands out (Walk). A slot is
// one item, or with causal masking the longest and the shortest query block left of one (batch,
// head), so every slot weighs about the same; without causal masking or a mask, on long keys, the
// walk's last round as equal shares of key tiles (fa2_ws_split.cuh: an item cut in two is merged by
// its warps). Items are numbered query block fastest, so the blocks resident together share K/V of
// few heads in L2. The block is 3 warpgroups (4 at D <= 64):
//
//   warpgroup 0, producer (24 registers): one warp walks the slots and announces each item to the
//     consumers with its Q (write_item: a shared word that Q's full barrier releases); one lane issues TMA loads -- each
//     item's first K/V tile, its Q, then K_j and V_j of the other key tiles the item sees (causal
//     cut, block-map skip) -- through a Q ring of kQSlots slots and two stage rings (tile/stage_ring.cuh),
//     K's and V's, so S = Q K_j^T may start before V_j has landed. The next item's first tile loads under
//     this item's last ones; its Q, with one slot, as soon as this item's last S is done (consumers
//     release Q's slot there, before that tile's softmax, the last P V and the epilogue); with two
//     (launch/heuristics.h kFa2TwoQSlotsMaxDim) into the other slot while this item runs.
//   warpgroups 1.., consumers (240 registers each for two, 160 for three): rows [64 c, 64 c + 64)
//     of the item each; per key tile
//
//       issue S_j = Q K_j^T (wgmma, both operands by descriptor)
//       issue O += P_{j-1} V_{j-1} (wgmma, P from registers, V read transposed)   [ping-pong turn]
//       wait S_j -> release K_j -> softmax of S_j in place, alpha_j   (while P_{j-1} V_{j-1} runs)
//       wait P V -> release V_{j-1} -> O *= alpha_j -> P_j packed to b16 operand registers
//
//     so the softmax of one tile runs under the previous tile's P V on the tensor cores. Where the
//     tile gains by it (kOwnEnd), a consumer stops at the last key tile its own rows see (causal
//     diagonals, rows past len_q) and only releases the item's later stages, with null turns. With
//     kPingPong the consumer warpgroups also take turns issuing (named barriers 1.., round robin,
//     one continuous rotation over all items): one's softmax runs under another's GEMMs. The
//     epilogue stores O from registers, or by TMA through shared memory: a buffer of its own (kTmaStore,
//     launch/heuristics.h kFa2TmaStoreMaxDim), or at D = 97..128 the item's last K tile, dead once every
//     consumer's last S has read it (kOInK); the next item's Q is already loading.
//
// Who waits on what (mbarriers; the K/V rings kStages deep, Q's kQSlots):
//   producer:  empty_q[s] -> TMA Q -> full_q[s]     empty_k[s] -> TMA K_j -> full_k[s]     (V as K)
//   consumers: full_q[s] -> ... the item's last S done -> arrive empty_q[s]
//              full_k[s] -> S_j -> arrive empty_k[s]     full_v[s] -> P V_j -> arrive empty_v[s]
//              kOInK, the item's last K tile: S -> arrive kread[s] -> (epilogue) wait kread[s] -> O into
//              K's stage -> TMA store -> (next item) its read done -> arrive empty_k[s]
//
// TMA zero-fills rows past L and S (finite, so masked columns of P V stay 0); scores past S and
// above the causal limit are masked per element in boundary tiles (FwdCommon::mask_tile, shared
// with the cp.async kernels), attn_mask in the block map's partial tiles.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <math_constants.h>

#include "ffpa/attn/rows_out.cuh"
#include "ffpa/attn/standing_max.cuh"
#include "ffpa/attn/tile_mask.cuh"
#include "ffpa/kernels/fa2_common.cuh"
#include "ffpa/kernels/fa2_ws_schedule.cuh"
#include "ffpa/kernels/fa2_ws_epilogue.cuh"
#include "ffpa/kernels/fa2_ws_handoff.cuh"
#include "ffpa/kernels/fa2_ws_producer.cuh"
#include "ffpa/kernels/fa2_ws_split.cuh"
#include "ffpa/ptx/mbarrier.cuh"
#include "ffpa/ptx/tma.cuh"
#include "ffpa/ptx/warpgroup.cuh"
#include "ffpa/ptx/wgmma.cuh"
#include "ffpa/tile/quad.cuh"
#include "ffpa/tile/stage_ring.cuh"

namespace ffpa::attn {

template <typename Traits, bool kPingPong, bool kAheadOn = false, bool kTmaStore = false, int kQSlots = 1,
          bool kSplit = false, bool kOInKOn = false, bool kPfPairOn = false, bool kStandingMaxOn = false>
struct Fa2FwdWs : Fa2WsItems<Traits::kBlockM, Traits::kBlockN> {
  using Items = Fa2WsItems<Traits::kBlockM, Traits::kBlockN>;
  using typename Items::Item;
  using typename Items::Walk;
  using typename Items::ItemDiv;
  using Items::item;
  using Items::walk_slots;
  using Split = Fa2SplitTail;
  using Element = typename Traits::Element;
  using Num = Numeric<Element>;
  using QTile = typename Traits::QTile;
  using KTile = typename Traits::KTile;
  using VTile = typename Traits::VTile;
  using Plan = Fa2WsPlan<Traits, kTmaStore, kQSlots>;
  using Ring = StageRing<Plan::kStages>;
  using QRing = StageRing<kQSlots>;
  using Common = Fa2FwdCommon<Traits, 2>;  // mask_tile only (static, register-free)
  using MmaS = ptx::WgmmaM64<Traits::kBlockN, Element>;
  // P V in wgmmas of at most 256 columns (wgmma's widest N): past Dv = 256 a second one takes the rest.
  static constexpr int kNO0 = Traits::kNTilesO > 32 ? 32 : Traits::kNTilesO;  // n8 tiles of the first
  static constexpr int kNO1 = Traits::kNTilesO - kNO0;                        // of the second (0: none)
  using MmaO = ptx::WgmmaM64<8 * kNO0, Element>;
  using MmaO1 = ptx::WgmmaM64<8 * (kNO1 > 0 ? kNO1 : kNO0), Element>;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kNS = Traits::kNTilesS;
  // P V's wait deferred to the next tile (tile<true>), so the softmax runs under P V: in one block of
  // code ptxas sinks the softmax below the wait (docs/hopper_profile.md, sessions 19-20). D = 97..128
  // on two consumer warpgroups and the 128-key tile only: there it gained 0.4-2% non-causal and 1-11%
  // causal on an H200; with 176 keys, three consumers or Dv = 256 S, O and P no longer fit the
  // registers together (C7512: ptxas serialises the wgmma pipeline, or spills), and at D = 96 the
  // same 128-key tile ran 1-3% slower deferred than not.
  static constexpr bool kDefer = Plan::kConsumers == 2 && Traits::kBlockN <= 128 && Traits::kHeadDim > 96 &&
                                 Traits::kHeadDim <= 128;
  // kDefer: P in two register buffers taken in turn, so a tile converts its P right after its softmax (beside the
  // exponentials) while the P V before reads the other; with one buffer ptxas sank the conversions past the next
  // ping-pong turn (SASS: docs/hopper_profile.md session 48). From kFa2PfPairMinKeys (launch/heuristics.h): +2.5..4%
  // at 2048-8192 keys on an H100, -1..-4% on items of 2-4 key tiles (not understood).
  static constexpr bool kPfPair = kDefer && kPfPairOn;
  static constexpr int kNO = Traits::kNTilesO;
  using Out = RowsOut<Element, kNO>;  // the epilogue's stores (fa2_ws_epilogue.cuh, from registers or by TMA)
  // Past Dv = 320 O (Dv / 2 registers a thread) leaves no room for S_j beside P_{j-1} and O: a turn
  // issues P_{j-1} V_{j-1}, waits for it and only then writes S_j (its registers dead until then), so
  // the softmax runs under the other consumer's GEMMs only (the ping-pong turns).
  static constexpr bool kInOrder = Traits::kHeadDimV > 320;
  // The next item's first S issued before this item's epilogue (look_ahead): the store of O runs under
  // that S on the tensor cores. Not past Dv = 320 (kInOrder: no room for S beside O). Which calls run
  // it is the launcher's (fa2_ws_look_ahead, launch/heuristics.h: D <= 96 on long enough keys).
  static constexpr bool kAhead = kAheadOn && !kInOrder;
  // The standing max (attn/standing_max.cuh: no tile row max once a warp's rows have theirs) in the kernels that run
  // long keys only: the look-ahead (D <= 96) and the P pair (D = 97..128), split twins included; which calls take it
  // is the launcher's (fa2_ws_standing_max, launch/heuristics.h). D = 256 -1% (not taken).
  static constexpr bool kStandingMax = kStandingMaxOn && (kAhead || kPfPair);
  // Each consumer warpgroup computes only the key tiles its own 64 rows see (own_end; the item's others it
  // drains), on the tiles where that ends a consumer a key tile early on most causal diagonals: items of
  // more rows than keys per tile (192 x 128 at D <= 64: the first two consumers) and key tiles under 128
  // (D > 128). On 128 x 128 a consumer's rows always end in the item's last key tile, and on 128 x 176
  // (D = 96) in two items of three; there the loop's other bound cost 0.5-1.2% (session 45, one H100).
  static constexpr bool kOwnEnd = Traits::kBlockM > Traits::kBlockN || Traits::kBlockN < 128;
  // The split tail's code (fa2_ws_split.cuh: pieces of items, the range word, the merge) only in the twin
  // the launcher runs the calls that split with: in every kernel, its per-item reads and branches cost the
  // short sequences 4-7% (session 45's checks, D = 64 N = 197 / 256).
  static constexpr bool kSplitTail = kSplit;
  // O out by TMA through the item's last K stage (store_in_k): once every consumer's last S of the item is
  // done (kread[stage], one arrival per consumer warp) that K tile is dead, so each consumer stages its 64
  // rows of O in its half (stmatrix, 128-byte swizzle) and stores them by TMA; the stage goes back to the
  // producer once the store has read it (release_held, at the next item). No buffer of its own, so no K/V
  // stage is given up for it (kTmaStore's buffer costs D = 128 its third). The deferred-wait kernel only
  // (two consumers, D = 97..128, every consumer through every tile of an item), not the split twin.
  static constexpr int kOInKBytes = 64 * 128 * ((Traits::kHeadDimV + 63) / 64);  // one consumer's O
  static constexpr bool kOInK = kOInKOn && kDefer && !kSplit && !kAhead && !kTmaStore && !kOwnEnd && !kInOrder &&
                                Plan::kConsumers * kOInKBytes <= Plan::kKBytes;
  // mask_cut for a ragged length's last tile and causal diagonals on two consumer warpgroups (240 registers) and
  // in the look-ahead kernels of three (160: D <= 64's table tile; ptxas: 0 and 8 / 16 bytes of spills against 8 / 24
  // with mask_tile); the plain three-consumer kernels keep mask_tile (with mask_cut they spilled 48 bytes).
  static constexpr bool kMaskCut = Plan::kConsumers == 2 || kAhead;
  static constexpr int kKStepsQK = Traits::kKStepsQK;
  static constexpr int kKStepsPV = Traits::kKStepsPV;
  static constexpr int kConsumers = Plan::kConsumers;
  static constexpr int kProducerRegs = Plan::kProducerRegs;
  static constexpr int kConsumerRegs = Plan::kConsumerRegs;
  static constexpr uint32_t kConsumerWarps = 4 * kConsumers;  // arrivals that release a stage
  // Named barriers: 1 + c is consumer c's ping-pong turn, 1 + kConsumers + c its own warpgroup's.
  static_assert(2 * kConsumers <= 15, "named barriers 1..15");
  static constexpr uint32_t kTurnThreads = 256;  // the warpgroup taking its turn + the one passing it

  struct Smem {
    uint32_t q, k, v, o;
    QRing ring_q;
    Ring ring_k, ring_v;
    uint32_t item;   // two words per Q slot: the item whose Q is in it (-1: none left) and its key range
    uint32_t kread;  // kOInK: kStages mbarriers, stage s's K tile read by every consumer's last S of an item
  };
  static_assert(!kOInK || QRing::kBarrierBytes + 2 * Ring::kBarrierBytes + 8 * kQSlots + 8 * Plan::kStages <=
                              Plan::kBarrierBytes,
                "kread's barriers fit the plan's barrier bytes");

  static __device__ __forceinline__ Smem layout(char* smem_raw) {
    const uint32_t raw = ptx::smem_u32addr(smem_raw);
    Smem s;
    s.q = (raw + 1023u) & ~1023u;
    s.k = s.q + kQSlots * Plan::kQBytes;
    s.v = s.k + Plan::kStages * Plan::kKBytes;
    s.o = s.v + Plan::kStages * Plan::kVBytes;
    s.ring_q = QRing{s.o + Plan::kOBytes};
    s.ring_k = Ring{s.ring_q.bars + QRing::kBarrierBytes};
    s.ring_v = Ring{s.ring_k.bars + Ring::kBarrierBytes};
    s.item = s.ring_v.bars + Ring::kBarrierBytes;
    s.kread = s.item + 8 * kQSlots;
    return s;
  }

  static __device__ __forceinline__ int next_tile(const uint8_t* codes, int j, int n_end) {
    return codes != nullptr ? skip_masked_tiles(codes, j, n_end) : j;
  }

  // ---- consumers ---------------------------------------------------------------------------
  static __device__ __forceinline__ void issue_qk(float (&s)[kNS][4], uint32_t q_wg, uint32_t k_tile) {
    const ptx::GmmaDescSw128 qd(q_wg, 16, 1024), kd(k_tile, 16, 1024);
    ptx::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kKStepsQK; ++ks)
      MmaS::ss(s, qd.at(QTile::k_major_kstep(ks)), kd.at(KTile::k_major_kstep(ks)), ks > 0);
    ptx::wgmma_commit_group();
  }

  static __device__ __forceinline__ void issue_pv(float (&o)[kNO][4], const uint32_t (&pf)[kKStepsPV][4], uint32_t v_tile) {
    const ptx::GmmaDescSw128 vd(v_tile, VTile::kChunkBytes, 1024);
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKStepsPV; ++kk) {
      MmaO::rs(*reinterpret_cast<float(*)[kNO0][4]>(&o[0]), pf[kk], vd.at(VTile::mn_major_kstep(kk)), 1);
      if constexpr (kNO1 > 0)  // columns 256.. start at V's fifth 64-column chunk
        MmaO1::rs(*reinterpret_cast<float(*)[kNO1 > 0 ? kNO1 : 1][4]>(&o[kNO0]), pf[kk],
                  vd.at(VTile::mn_major_kstep(kk) + 4 * VTile::kChunkBytes), 1);
    }
    ptx::wgmma_commit_group();
  }

  // Online softmax of S_j (base 2): masks boundary tiles, updates the row max (lazily: it moves only
  // past a slack of 8, attn/state.cuh, so settled rows skip O's rescale) and sum, leaves
  // P = exp2(S - m) in s (fp32) and returns the factor O must be rescaled by. Neither O nor the P
  // operand registers are touched: the previous tile's P V may still be reading them (a register
  // definition of a running wgmma's operands makes ptxas serialise the pipeline).
  static __device__ __forceinline__ void softmax(const FwdParams& p, const Item& w, int j, int row0, int g, int t4,
                                                 float scale_log2, float (&s)[kNS][4], float (&row_max)[2],
                                                 float (&row_sum)[2], float (&alpha)[2]) {
    const int n0 = j * kBlockN;
    const uint8_t code = w.codes != nullptr ? w.codes[j] : static_cast<uint8_t>(kBlockFull);
    const bool ragged = n0 + kBlockN > p.len_kv;
    const bool diag = p.is_causal && n0 + kBlockN - 1 > w.m0 + p.causal_offset;
    // mask_tile: a mask's partial tiles and a zero scale (-inf times 0); a ragged length's last tile and causal
    // diagonals otherwise mask by each row's limit (mask_cut), the scale left to the exponent's FMA (kMaskCut).
    const bool per_elem = code == kBlockPartial ||
                          ((ragged || diag) && (!kMaskCut || !(scale_log2 > 0.f)));
    const bool cut = kMaskCut && (ragged || diag) && !per_elem;
    if (per_elem)
      Common::mask_tile(*reinterpret_cast<float(*)[1][kNS][4]>(&s), p, code, scale_log2, row0, n0, g, t4, w.batch, w.head);
    if constexpr (kMaskCut) {
      if (cut) mask_cut(s, p, row0, g, t4, n0);  // (attn/tile_mask.cuh)
    }
    const float sf = per_elem ? 1.f : scale_log2;
    // attn/standing_max.cuh: P against each row's max as it stands where the warp's rows have one; redo puts S
    // back (masked as above) for the rare repair of a P that overflowed.
    tile_softmax<kStandingMax>(s, sf, row_max, row_sum, alpha, [&](float (&t)[kNS][4]) {
      recompute_s_strip<Element, Traits::kHeadDim>(p, w.batch, w.head, row0, g, n0, t4, t);
      if (per_elem)
        Common::mask_tile(*reinterpret_cast<float(*)[1][kNS][4]>(&t), p, code, scale_log2, row0, n0, g, t4, w.batch, w.head);
      if constexpr (kMaskCut) {
        if (cut) mask_cut(t, p, row0, g, t4, n0);
      }
    });
  }

  // P in b16 as the A operand of P V: the accumulator layout of S n8 tiles 2 kk and 2 kk + 1 is
  // the A layout of k-step kk.
  static __device__ __forceinline__ void pack(const float (&s)[kNS][4], uint32_t (&pf)[kKStepsPV][4]) {
#pragma unroll
    for (int n = 0; n < kNS; ++n) {
      pf[n / 2][(n % 2) * 2 + 0] = Num::pack2(s[n][0], s[n][1]);
      pf[n / 2][(n % 2) * 2 + 1] = Num::pack2(s[n][2], s[n][3]);
    }
  }

  // Ping-pong turns among the consumer warpgroups, round robin: c waits for its turn (barrier
  // 1 + c), issues, and passes the turn to c + 1 (mod kConsumers).
  static __device__ __forceinline__ void turn_wait(int c) {
    if constexpr (kPingPong) ptx::named_barrier_sync(1 + c, kTurnThreads);
  }
  static __device__ __forceinline__ void turn_pass(int c) {
    if constexpr (kPingPong) ptx::named_barrier_arrive(1 + (c + 1) % kConsumers, kTurnThreads);
  }

  // The previous tile's P V done: its V stage released, O rescaled by this tile's alpha, this
  // tile's P packed as the next P V's operand.
  struct Reader;
  // kPfPair: no pack here (the tile packed its P after its softmax).
  static __device__ __forceinline__ void complete_pv(const Smem& sm, Reader& rd, int lane, float (&o)[kNO][4],
                                                     const float (&alpha)[2], const float (&s)[kNS][4],
                                                     uint32_t (&pf)[kKStepsPV][4]) {
    ptx::wgmma_wait_group<0>();
    ptx::wgmma_fence_operand(o);
    if (lane == 0) sm.ring_v.consumer_release(rd.sv);
    rd.sv.advance();
    rescale_strip(o, alpha);
    if constexpr (!kPfPair) pack(s, pf);
  }

  // One key tile after the item's first: S_j and P_{j-1} V_{j-1} issued on this warpgroup's turn, the
  // softmax of S_j while P V runs; P V is left pending. kComplete (kDefer): the P V the tile before
  // left pending completes here (complete_pv), after the wait for K_j; otherwise the caller completes
  // each P V right after its tile.
  template <bool kComplete>
  static __device__ __forceinline__ void tile(const FwdParams& p, const Smem& sm, const Item& w, int c, Reader& rd,
                                              int lane, int row0, int g, int t4, uint32_t q_wg, float scale_log2,
                                              int& j, int& jn, float (&s)[kNS][4], float (&o)[kNO][4],
                                              uint32_t (&pf)[kKStepsPV][4], float (&row_max)[2], float (&row_sum)[2],
                                              float (&alpha)[2], uint32_t (&pf_next)[kKStepsPV][4]) {
    j = jn;
    jn = next_tile(w.codes, j + 1, w.n_end);
    sm.ring_k.consumer_wait(rd.sk);
    if constexpr (kComplete) complete_pv(sm, rd, lane, o, alpha, s, pf);
    sm.ring_v.consumer_wait(rd.sv);
    turn_wait(c);
    ptx::wgmma_fence_operand(o);  // before S's issue: no register definitions inside the stage
    if constexpr (kInOrder) {
      issue_pv(o, pf, sm.v + rd.sv.stage * Plan::kVBytes);
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(o);
#pragma unroll
      for (int n = 0; n < kNS; ++n)  // S_{j-1}'s values are dead (P was packed from them)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = 0.f;
      issue_qk(s, q_wg, sm.k + rd.sk.stage * Plan::kKBytes);
    } else {
      issue_qk(s, q_wg, sm.k + rd.sk.stage * Plan::kKBytes);
      issue_pv(o, pf, sm.v + rd.sv.stage * Plan::kVBytes);
    }
    turn_pass(c);
    ptx::wgmma_wait_group<kInOrder ? 0 : 1>();
    ptx::wgmma_fence_operand(s);
    release_k(sm, rd, lane, jn >= w.n_end);
    // The item's last S is done: Q's slot may take the next item's Q while this softmax, the last
    // P V and the epilogue run.
    if (jn >= w.n_end) Handoff::release_q(sm, rd, lane);
    softmax(p, w, j, row0, g, t4, scale_log2, s, row_max, row_sum, alpha);
    if constexpr (kPfPair) pack(s, pf_next);  // (the P V just issued reads pf)
  }

  // Consumer state carried across items: where this warpgroup is in the three rings.
  struct Reader {
    typename QRing::State sq;
    typename Ring::State sk, sv;
    // kOInK: the K stage this warpgroup holds for its O store (-1: none), and kread's phase parities.
    int held = -1;
    uint32_t kread_phase = 0;
    // kAhead: the next item's index read at the end of the last (kNoItem: not read yet; -1: none left),
    // and whether its first S is already issued into the caller's S registers.
    int ahead = kNoItem;
    bool issued = false;
  };
  static constexpr int kNoItem = -2;
  using Epilogue = Fa2WsEpilogue<Fa2FwdWs>;  // O out (fa2_ws_epilogue.cuh)
  using Handoff = Fa2WsHandoff<Fa2FwdWs>;    // Q's slot, the next item, its first S (fa2_ws_handoff.cuh)

  // After an S_j is done: K_j's stage back to the producer; kOInK, on the item's last tile (last), held
  // for the O store instead, with this warp's arrival on kread (its reads of K_j are done).
  static __device__ __forceinline__ void release_k(const Smem& sm, Reader& rd, int lane, bool last) {
    if (kOInK && last) {
      if (lane == 0) ptx::mbarrier_arrive(sm.kread + 8 * rd.sk.stage);
      rd.held = rd.sk.stage;
    } else if (lane == 0) {
      sm.ring_k.consumer_release(rd.sk);
    }
    rd.sk.advance();
  }

  // One item on consumer warpgroup c; false: there is none left. kAhead: s may hold the item's first
  // S in flight (rd.issued), issued by the previous item's look_ahead.
  static __device__ __forceinline__ bool consume(const FwdParams& p, const Fa2TmaMaps& maps, const Smem& sm,
                                                 const ItemDiv& dv, int c, Reader& rd, float (&s)[kNS][4]) {
    const int t = kAhead && rd.ahead != kNoItem ? rd.ahead : Handoff::next_item(sm, rd);
    const bool issued = kAhead && rd.issued;  // s holds the item's first S, done
    if (t < 0) {
      if constexpr (kOInK) Epilogue::release_held(sm, rd);
      return false;
    }
    Item w = item(p, t, dv);
    // A split-tail piece: tiles [range_begin, range_end) of its item (the word, read before Q's release)
    // (read in the look-ahead kernels too: without it ptxas spilled 64 bytes in D = 64's; they run long keys)
    const int range = kSplit || kAhead ? Handoff::slot_word(sm, rd, 1) : 0;
    if (range != 0) w.n_end = Split::range_end(range);
    const bool whole = kOwnEnd && range == 0;  // this warpgroup computes tiles [.., own_end); a piece's all
    if (whole) w.n_end = Handoff::own_end(p, w, c);
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    const int row0 = w.m0 + 64 * c + 16 * warp;  // first query row of this warp's accumulators
    const uint32_t q_wg = Handoff::q_rows(sm, rd, c);
    const float scale_log2 = fabsf(p.scale_log2);
    float o[kNO][4], row_max[2] = {-CUDART_INF_F, -CUDART_INF_F}, row_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int n = 0; n < kNO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] = 0.f;

    if (p.scale_log2 < 0.f && !issued) Handoff::flip_q(q_wg, c);  // (issued: look_ahead flipped it)

    int j = next_tile(w.codes, range != 0 ? Split::range_begin(range) : 0, w.n_end);
    const bool any = j < w.n_end;
    uint32_t pf[kKStepsPV][4];
    if (any) {
      float alpha[2];
      int jn = next_tile(w.codes, j + 1, w.n_end);  // the tile after j (n_end: j is the item's last)
      if (!issued) {
        Handoff::issue_s0(sm, c, rd, q_wg, s);
        // kOInK: the last item's K stage back once its O store has read it, under this S: before it, the
        // storing thread's wait for that read delayed its warpgroup's S (session 47: +0.5-3% at D = 128,
        // N <= 2048). The producer needs that stage for the item's third K tile at the earliest.
        if constexpr (kOInK) Epilogue::release_held(sm, rd);
        ptx::wgmma_wait_group<0>();
        ptx::wgmma_fence_operand(s);
      }
      release_k(sm, rd, lane, jn >= w.n_end);
      if (jn >= w.n_end) Handoff::release_q(sm, rd, lane);
      softmax(p, w, j, row0, g, t4, scale_log2, s, row_max, row_sum, alpha);
      pack(s, pf);
      if constexpr (kDefer) {
        // P_{j-1} V_{j-1} completes at the top of the next tile, after that tile's wait for K: a separate
        // block of code, so ptxas cannot sink S_j's softmax below that wait (in one block it does, and
        // the softmax runs after P V instead of under it: docs/hopper_profile.md, session 19).
        if constexpr (kPfPair) {
          if (jn < w.n_end) {
            // Unrolled twice so each tile's buffers are known: P_{j-1} V_{j-1} reads one while P_j goes to the other.
            uint32_t pf2[kKStepsPV][4];
            tile<false>(p, sm, w, c, rd, lane, row0, g, t4, q_wg, scale_log2, j, jn, s, o, pf, row_max, row_sum, alpha, pf2);
            bool in2 = true;  // the item's last P is in pf2
            while (jn < w.n_end) {
              tile<true>(p, sm, w, c, rd, lane, row0, g, t4, q_wg, scale_log2, j, jn, s, o, pf2, row_max, row_sum, alpha, pf);
              in2 = false;
              if (jn >= w.n_end) break;
              tile<true>(p, sm, w, c, rd, lane, row0, g, t4, q_wg, scale_log2, j, jn, s, o, pf, row_max, row_sum, alpha, pf2);
              in2 = true;
            }
            complete_pv(sm, rd, lane, o, alpha, s, pf);
            if (in2)  // the last P V reads pf
#pragma unroll
              for (int i = 0; i < 4 * kKStepsPV; ++i) pf[i / 4][i % 4] = pf2[i / 4][i % 4];
          }
        } else if (jn < w.n_end) {
          tile<false>(p, sm, w, c, rd, lane, row0, g, t4, q_wg, scale_log2, j, jn, s, o, pf, row_max, row_sum, alpha, pf);
          while (jn < w.n_end)
            tile<true>(p, sm, w, c, rd, lane, row0, g, t4, q_wg, scale_log2, j, jn, s, o, pf, row_max, row_sum, alpha, pf);
          complete_pv(sm, rd, lane, o, alpha, s, pf);
        }
      } else {
        while (jn < w.n_end) {
          tile<false>(p, sm, w, c, rd, lane, row0, g, t4, q_wg, scale_log2, j, jn, s, o, pf, row_max, row_sum, alpha, pf);
          complete_pv(sm, rd, lane, o, alpha, s, pf);
        }
      }
    }
    // kOInK: the rows' 1 / l and LSE for the store, under the last P V (the statistics are final after the
    // last softmax; the split tail's merge, which changes them, is not in this kernel).
    typename Out::Finish fin;
    if (any) {
      sm.ring_v.consumer_wait(rd.sv);
      ptx::wgmma_fence_operand(o);
      issue_pv(o, pf, sm.v + rd.sv.stage * Plan::kVBytes);
      if constexpr (kOInK) fin = Out::finish(row_max, row_sum);
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(o);
      if (lane == 0) sm.ring_v.consumer_release(rd.sv);
      rd.sv.advance();
    } else {
      Handoff::release_q(sm, rd, lane);  // no S at all (every key tile masked out)
      if constexpr (kOInK) Epilogue::release_held(sm, rd);
    }
    if (whole) {  // the item's tiles past own_end (the item's end recomputed here)
      const int n_item = block_kv_tiles<kBlockN>(p, w.m0, w.rows_q);
      Handoff::drain(sm, rd, c, lane, w.codes, next_tile(w.codes, w.n_end, n_item), n_item);
      w.n_end = n_item;
    }
    // A piece of an item the split tail cut: each warp that finishes second merges the other piece's
    // partial and stores the rows from registers; the first leaves its partial (Fa2SplitTail).
    bool left = false;
    const int cut = kSplit ? Split::item_cut<kBlockM, kBlockN>(p, w.batch, w.head, w.m0, w.n_end, dv.m_blocks.d, left) : -1;
    const bool piece = cut >= 0;
    const bool store = !piece || Split::merge<kNO, kConsumers>(p, cut, left, c, warp, lane, o, row_max, row_sum);
    if constexpr (kAhead || kTmaStore) {
      // kAhead: O / l packed to b16 before the next item's first S is issued (ptxas injects a wait, C7517,
      // where registers a wgmma defined are read while another runs), stored while it runs.
      // The S is waited for here, not across the item loop's back edge: ptxas serialises a pipeline
      // whose in-flight state differs between the paths that meet (C7517 / C7515).
      typename Out::Packed po;
      Out::pack(o, row_max, row_sum, po);
      if (kAhead && Handoff::look_ahead(p, sm, dv, c, rd)) {
        Handoff::issue_first(p, sm, c, rd, s);
        Epilogue::store_unit(p, maps, sm, w, c, row0, g, t4, po, piece, store);
        ptx::wgmma_wait_group<0>();
        ptx::wgmma_fence_operand(s);
      } else {
        Epilogue::store_unit(p, maps, sm, w, c, row0, g, t4, po, piece, store);
      }
    } else if (kOInK && any) {
      Epilogue::store_in_k(p, maps, sm, w, c, rd, row0, g, t4, o, fin);
    } else if (store) {
      Out::store(p, w.batch, w.head, row0, g, t4, o, row_max, row_sum);
    }
    return true;
  }

  static __device__ __forceinline__ void run(const FwdParams& p, const Fa2TmaMaps& maps, char* smem_raw) {
    const Smem sm = layout(smem_raw);
    const int m_blocks = (p.len_q + kBlockM - 1) / kBlockM;
    if (threadIdx.x == 0) {
      sm.ring_q.init(kConsumerWarps);
      sm.ring_k.init(kConsumerWarps);
      sm.ring_v.init(kConsumerWarps);
      if constexpr (kOInK) {
        for (int st = 0; st < Plan::kStages; ++st) ptx::mbarrier_init(sm.kread + 8 * st, kConsumerWarps);
        ptx::fence_barrier_init();
      }
    }
    __syncthreads();
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
      ptx::setmaxnreg_dec<kProducerRegs>();
      if (threadIdx.x < 32) Fa2WsProducer<Fa2FwdWs>::produce(p, maps, sm, m_blocks);
      return;
    }
    ptx::setmaxnreg_inc<kConsumerRegs>();
    // The consumer index through a shuffle from lane 0: ptxas then knows it warp-uniform, and so the
    // per-consumer loop bounds (own_end) and what derives from them stay in uniform registers (from
    // threadIdx.x directly, the D = 64 three-consumer kernel spilled 236 bytes).
    const int c = __shfl_sync(0xffffffffu, wg, 0) - 1;
    if (kPingPong && c == kConsumers - 1) ptx::named_barrier_arrive(1, kTurnThreads);  // consumer 0 goes first
    Reader rd;
    float s[kNS][4];  // S of the current key tile; kAhead: the next item's first, issued before the epilogue
    const ItemDiv dv(p, m_blocks);  // (the divisions' multipliers once, not at every item)
    while (consume(p, maps, sm, dv, c, rd, s)) {
    }
    if ((kTmaStore || kOInK) && threadIdx.x % 128 == 0) ptx::tma_store_wait<0>();  // the last stores done before exit
    if (kPingPong && c == 0) ptx::named_barrier_sync(1, kTurnThreads);  // the turn the last consumer passed
  }
};

using Fa2KernelWs = void (*)(FwdParams, Fa2TmaMaps);

template <typename Traits, bool kPingPong, bool kAhead = false, bool kTmaStore = false, int kQSlots = 1, bool kSplit = false,
          bool kOInK = false, bool kPfPair = false, bool kStandingMaxOn = false>
__global__ void __launch_bounds__(Fa2WsPlan<Traits, kTmaStore, kQSlots>::kThreads, 1)
    fa2_fwd_ws_kernel(const __grid_constant__ FwdParams p, const __grid_constant__ Fa2TmaMaps maps) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) char smem[];
  Fa2FwdWs<Traits, kPingPong, kAhead, kTmaStore, kQSlots, kSplit, kOInK, kPfPair, kStandingMaxOn>::run(p, maps, smem);
#elif defined(__CUDA_ARCH__)
  __trap();  // no wgmma / TMA in this pass (the launcher only picks this kernel on sm_90a)
#endif
}

}  // namespace ffpa::attn
