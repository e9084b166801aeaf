// The warp-specialised wgmma + TMA pipeline of the FFPA-shaped Hopper kernels (sm_90a): 64 query
// rows against 128-key tiles (256 for a cluster pair, below), the head dim E in 64-wide Q@K^T slices (shared memory does not grow
// with E; 128 bytes of e4m3), O for up to 512 Dv columns in registers. Three kernels run on it, which differ only in what
// a block works on and where its tiles come from (the Problem):
//   - FFPA level 1 prefill (kernels/ffpa_fwd_sm90_ws.cuh): one (batch, head, 64 query rows);
//   - split-KV decode (kernels/decode_sm90_ws.cuh): 64 packed query rows of one KV head (its query
//     heads x Lq) against one key range of a contiguous or paged cache;
//   - FP8 prefill past D = 256 (kernels/ffpa_fwd_sm90_fp8.cuh): level 1's items on e4m3 operands (the
//     kFp8 branches below: P stored as e4m3, P V against V^T stages).
//
// The block is three warpgroups (traits/ffpa_traits.h, FfpaWsTraits):
//
//   warpgroup 0, producer (24 registers): one thread issues the TMA loads, per key tile j
//     - kSlicesQK Q@K^T stages: Q[:, 64 s .. 64 s + 63] and K_j[:, 64 s .. 64 s + 63]   (ring_qk)
//     - kStagesV V stages of the previous tile: V_{j-1}[32 v .. 32 v + 31, the group]   (ring_v)
//     in the order the consumers take them.
//   warpgroups 1, 2, consumers c = 0, 1 (240 registers):
//
//       S_c = Q K_j[64 c .. 64 c + 63]^T        64 x 64, accumulated over the E slices (wgmma, both
//                                                operands by descriptor, one slice in flight)
//       row max of S_c -> shared -> [pair barrier 1] -> the row max of the whole tile
//       P_c = exp2(S_c - m) -> b16 into P's columns 64 c .. 64 c + 63 (shared, swizzled)
//       O_c *= alpha                             O_c: the group's columns c owns, in registers
//       fence.proxy.async -> [pair barrier 2]    P complete, both halves
//       O_c += P V_j[:, c's columns]             per V stage of 32 keys (wgmma, P and V by
//                                                descriptor, V read transposed)
//
//     The two consumers see the same rows, so their row maxima (and so alpha) are identical; each
//     keeps a partial row sum over its own key columns, added up in the epilogue (barrier 3).
//     S_{j+1} is issued before P V_j and its softmax runs under P V_j's first stages (P
//     double-buffered; the producer loads V one tile behind K to match).
//
//   A pair (Traits::kPair, Dv > 640 in prefill): the item's two column groups run on the two blocks
//   of a cluster, which compute S once between them on 256-key tiles: block r loads and multiplies
//   keys [128 r, 128 r + 128) of each (consumer c: 64 of them, key slot 2 r + c of the tile's four)
//   and V of all 256 for its group; each block loads every other Q slice into both (multicast). The
//   last tile's keys past the causal limit / sequence end: their V stages and a block's unseen K half
//   not loaded (Problem::last_v_stages, pair_loads_k). The exchanges go to both blocks through
//   distributed shared memory, each completing on an mbarrier of both (16 consumer warps arrive on
//   each) instead of a named barrier:
//       row maxima -> both blocks' stats[slot] -> arrive max (both) -> wait own max -> max of the 4
//       P_j slot   -> both blocks' P columns -> fence.proxy.async -> arrive p (both); wait own p
//                     before P V_j (after S_{j+1}'s issue, so the exchange runs under it)
//       P V_{j-1} done -> arrive free (both); wait own free before writing P_j (P: one buffer)
//       row sums (epilogue) -> both blocks' stats[slot] -> arrive sum (both) -> wait own sum
//     Every consumer writes tile j + 1's maxima only after its wait on p of tile j, which needs all
//     16 warps' arrivals, each made after that warp read tile j's maxima: one stats buffer serves
//     (and the row sums reuse it after the last wait on p).
//
//   Pairs of query blocks sharing K (Traits::kShareK: causal prefill, FP8 any; launch/heuristics.h): blocks 2 i,
//   2 i + 1 of a cluster walk the same key tiles for rows 2 q + 1, 2 q; K slice d of tile j is loaded by
//   the block of rank (d + j) % 2, multicast into both, beside each block's own Q slice:
//       producer r:  empty_qk[s] (both blocks' consumers) -> TMA Q (own), K (rank r's slices: both) -> full_qk[s]
//       consumers:   full_qk[s] -> S += Q K -> arrive empty_qk[s] of both blocks
//   and the producer, past its last load, takes every Q@K^T stage once more before its block exits (the
//   other block's last releases land here first). With Traits::kShareV (FP8's pairs) the V stages go the
//   same way: stage v of tile j loaded by the block of rank (v + j) % 2 into both, empty_v[s] counting
//   both blocks' consumers, every V stage taken once more at the end.
//
// Who waits on what (mbarriers; ring_qk kQKStages deep, ring_v kVStages deep):
//   producer:  empty_qk[s] -> TMA Q, K slices -> full_qk[s]     empty_v[s] -> TMA V stage -> full_v[s]
//   consumers: full_qk[s] -> S += Q K (wgmma) -> its wait -> arrive empty_qk[s]   (both consumers)
//              full_v[s]  -> O += P V (wgmma) -> its wait -> arrive empty_v[s]    (both consumers)
// The row maxima are one buffer: a consumer writes tile j + 1's only after pair barrier 2 of j, which
// the other passes only after reading tile j's. P_{j+1} goes to the buffer P V_{j-1} read, which
// both consumers finished before pair barrier 2 of j.
//
// A Problem (static members) says what a block works on:
//   Params, Maps                      the kernel's parameters and TMA maps
//   Item item(p, block, scratch)      what block `block` computes: has m0 (its first row, the base
//                                     of the rows the hooks below get) and n_end (its tiles end);
//                                     all threads call it first, and may use `scratch` (P's buffers)
//                                     with block barriers (the decode Problem: longest first)
//   first_tile(p, w), next_tile(p, w, j)   the key tiles it walks, in order (below n_end)
//   begin_tile(p, w, j, scratch)           producer, before tile j's Q@K^T slices: may note what its
//                                     loads need in `scratch` (kScratchBytes of shared memory; the
//                                     decode Problem: the tile's pages)
//   load_qk(p, maps, w, stage, bar, d, j, scratch)  producer: Q and K slice d of tile j, kQKStageBytes in all
//   load_v(p, maps, w, stage, bar, j, v, scratch)   producer: V stage v of tile j, kVStageBytes in all
//                                     (issued after tile j + 1's begin_tile)
//   last_v_stages(p, w, j)            a pair's Problem: V stages [0, n) of the last tile j that P V needs
//                                     (the rest: P = 0)
//   mask(s, p, w, j, key0, row0, g, t4)    one consumer's scores of tile j (s: float[kN][4], keys key0
//                                     .. key0 + 8 kN of the tile): masks and scales them (base 2)
//                                     where the tile needs it and says whether it did
//   scale_log2(p, w)                  the softmax scale (base 2) of the block's scores where mask did not
//                                     scale them (the FP8 Problem's folds the item's q / k descales in)
//   kPairOk                           whether the launcher runs a pair's blocks as a cluster
//   prepare_v(p, w, j, v, stage, col)      before P V reads a V stage (consumer's columns from col)
//   store(p, w, c, col0, row0, g, t4, o, row_max, l)   the finished rows (l: their full row sums)
#pragma once
#include <cuda.h>

#include <cstdint>
#include <math_constants.h>
#include <type_traits>

#include "ffpa/attn/softmax.cuh"
#include "ffpa/attn/state.cuh"
#include "ffpa/ptx/cluster.cuh"
#include "ffpa/ptx/cp_async.cuh"  // smem_u32addr
#include "ffpa/ptx/fp8.cuh"
#include "ffpa/ptx/math.cuh"
#include "ffpa/ptx/mbarrier.cuh"
#include "ffpa/ptx/tma.cuh"
#include "ffpa/ptx/warpgroup.cuh"
#include "ffpa/ptx/wgmma.cuh"
#include "ffpa/tile/numeric.cuh"
#include "ffpa/tile/stage_ring.cuh"
#include "ffpa/traits/ffpa_traits.h"

namespace ffpa::attn {

template <typename Traits, typename Problem>
struct FfpaWsPipeline {
  using Element = typename Traits::Element;
  using Num = Numeric<Element>;
  using Params = typename Problem::Params;
  using Maps = typename Problem::Maps;
  using Item = typename Problem::Item;
  using QSlice = typename Traits::QSlice;
  using KSlice = typename Traits::KSlice;
  using VStage = typename Traits::VStage;
  using PTile = typename Traits::PTile;
  using RingQK = StageRing<Traits::kQKStages>;
  using RingV = StageRing<Traits::kVStages>;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  // e4m3 operands (traits/fp8_traits.h, FfpaWsFp8Traits): P stored as e4m3 times 2^Traits::kPOffset (the
  // row max lazy within a slack that keeps P in e4m3's range), P V against V^T stages (8-bit B is K-major only).
  static constexpr bool kFp8 = std::is_same_v<Element, __nv_fp8_e4m3>;
  static constexpr int kColsS = Traits::kColsS;  // keys of S per consumer of a pair (a lone block: kColsS0 / 1)
  static constexpr int kSlicesQK = Traits::kSlicesQK;
  static constexpr int kStagesV = Traits::kStagesV;
  // S_j's wgmmas are issued before P V_{j-1}'s, and the softmax of S_j runs while the tensor cores do
  // P V_{j-1}'s first kPreV V stages: two where the V ring has 4 stages (groups up to 384 columns),
  // one where it has 3 (448, 512: two held would leave the producer one stage to prefetch into).
  // Same-run A/B on an H200 against the plain order (S_j, softmax, P V_j): +11% at D = 448, +3% at
  // 1024, within 1% at 320, 384, 512 (docs/hopper_ffpa.md).
  static constexpr int kPreV = Traits::kVStages >= 4 ? 2 : 1;
  // Q@K^T slices in flight per consumer beside the one being issued (2 spilled and ran 5-25% slower).
  static constexpr int kLag = 1;
  static_assert(kPreV >= 1 && kPreV < kStagesV && kPreV <= Traits::kVStages, "the V stages the softmax runs under");
  static constexpr uint32_t kConsumerWarps = 4 * Traits::kConsumers;  // arrivals that release a stage
  static constexpr uint32_t kPairThreads = 128 * Traits::kConsumers;
  // Named barriers of the consumer pair (0 is __syncthreads).
  static constexpr uint32_t kBarMax = 1, kBarP = 2, kBarSum = 3;
  static_assert(Traits::kConsumers == 2, "a pair of consumers splits the key and Dv columns");
  static constexpr bool kPair = Traits::kPair;
  // Q@K^T stages shared with the cluster's other block, filled in step, each slice loaded by one block
  // into both (Traits::kShareK: the K slices of query blocks sharing them; a pair: its Q slices, the same
  // rows in both blocks): every stage's empty barrier counts the consumer warps of both blocks, each
  // warp releasing the stage in both.
  static constexpr bool kShareK = Traits::kShareK;
  static constexpr bool kShareStages = Traits::kShareK || Traits::kPair;
  // V stages shared the same way (Traits::kShareV, with kShareK: the pair's blocks walk the same tiles and
  // stages): the Problem loads stage v of tile j into both from the block of rank (v + j) % 2.
  static constexpr bool kShareV = Traits::kShareV;
  static_assert(!kShareV || kShareK, "V stages are shared by K-sharing pairs");
  static constexpr int kSlots = kPair ? 4 : 2;             // consumers sharing a tile's S (its key slots)
  static constexpr uint32_t kXWarps = 4 * kSlots;          // arrivals on a pair's exchange barrier
  // A pair's exchange barriers (Smem::xbar + 8 x), and the exchanges' first stats slot: a pair's row
  // sums reuse the maxima's slots, a lone block's have their own (2, 3).
  static constexpr int kXMax = 0, kXP = 1, kXSum = 2, kXFree = 3;
  static constexpr int stats_base(int x) { return kPair || x == kXMax ? 0 : 2; }
  static_assert(Problem::kPairOk || !kPair, "this Problem runs a block per column group, not a cluster pair");
  static_assert(kPair || Traits::kPBuffers == 2, "one P buffer needs the pair's free barrier");

  // Whether both consumers run one copy of the consumer code (an even column split); 320-column
  // shares (Dv = 640) take a copy each, whose column offsets are constants (with one copy, ptxas
  // spilled 64 bytes there; with two, it keeps 8 bytes of loop values in local memory).
  static constexpr bool kOneCopy = Traits::kCols0 == Traits::kCols1 && Traits::kCols0 <= 256;
  // A barrier of the consumer pair: where the two run different code (an uneven column split, or a
  // copy each), the unaligned form (see ptx/warpgroup.cuh).
  static __device__ __forceinline__ void pair_sync(uint32_t id, uint32_t threads) {
    if constexpr (kOneCopy)
      ptx::named_barrier_sync(id, threads);
    else
      ptx::named_barrier_sync_unaligned(id, threads);
  }

  struct Smem {
    uint32_t qk, v, p;  // ring_qk's stages, ring_v's stages, P's two buffers (shared addresses)
    float* stats;       // [slot][kBlockM]: maxima, then row sums (a pair: 4 slots; else max 0..1, sum 2..3)
    RingQK ring_qk;
    RingV ring_v;
    uint32_t xbar;      // a pair's exchange barriers: max, p, sum, free (shared::cta addresses)
    int* scratch;       // the Problem's producer scratch (Problem::kScratchBytes)
  };
  static_assert(2 * 8 * (Traits::kQKStages + Traits::kVStages) + 4 * 8 + Problem::kScratchBytes <= Traits::kBarrierBytes,
                "the barriers and the producer's scratch fit their bytes");

  static __device__ __forceinline__ Smem layout(char* smem_raw) {
    const uint32_t raw = ptx::smem_u32addr(smem_raw);
    Smem s;
    s.qk = (raw + 1023u) & ~1023u;
    s.v = s.qk + Traits::kQKStages * Traits::kQKStageBytes;
    s.p = s.v + Traits::kVRingBytes;
    const uint32_t stats = s.p + Traits::kPBuffers * PTile::kBytes;
    s.stats = reinterpret_cast<float*>(smem_raw + (stats - raw));
    s.ring_qk = RingQK{stats + Traits::kStatBytes};
    s.ring_v = RingV{s.ring_qk.bars + RingQK::kBarrierBytes};
    s.xbar = s.ring_v.bars + RingV::kBarrierBytes;
    s.scratch = reinterpret_cast<int*>(smem_raw + (s.xbar + 4 * 8 - raw));
    return s;
  }

  // ---- producer ----------------------------------------------------------------------------
  static __device__ __forceinline__ void produce(const Params& p, const Maps& maps, const Smem& s, const Item& w) {
    Problem::prefetch_maps(maps);
    typename RingQK::State sq;
    typename RingV::State sv;
    // The consumers' order: S_j's slices before P V_{j-1}'s stages (V one tile behind).
    int prev = -1;
    for (int j = Problem::first_tile(p, w); j < w.n_end; j = Problem::next_tile(p, w, j)) {
      Problem::begin_tile(p, w, j, s.scratch);
      uint32_t bytes = Traits::kQKStageBytes;
      if constexpr (kPair)  // no K where the block's keys of the tile are all unseen
        if (!Problem::pair_loads_k(p, w, j)) bytes = QSlice::kBytes;
      for (int d = 0; d < kSlicesQK; ++d, sq.advance()) {
        s.ring_qk.producer_acquire(sq);
        s.ring_qk.producer_expect(sq, bytes);
        Problem::load_qk(p, maps, w, s.qk + sq.stage * Traits::kQKStageBytes, s.ring_qk.full(sq.stage), d, j,
                         s.scratch);
      }
      if (prev >= 0) load_v(p, maps, s, sv, w, prev, kStagesV);
      prev = j;
    }
    if (prev >= 0) load_v(p, maps, s, sv, w, prev, last_stages(p, w, prev));
    if constexpr (kShareStages)  // the other block's last releases reach this block's barriers before it exits
      for (int i = 0; i < Traits::kQKStages; ++i, sq.advance()) s.ring_qk.producer_acquire(sq);
    if constexpr (kShareV)
      for (int i = 0; i < Traits::kVStages; ++i, sv.advance()) s.ring_v.producer_acquire(sv);
  }

  static __device__ __forceinline__ void load_v(const Params& p, const Maps& maps, const Smem& s,
                                                typename RingV::State& sv, const Item& w, int j, int n) {
    for (int v = 0; v < n; ++v, sv.advance()) {
      s.ring_v.producer_acquire(sv);
      s.ring_v.producer_expect(sv, Traits::kVStageBytes);
      Problem::load_v(p, maps, w, s.v + sv.stage * Traits::kVStageBytes, s.ring_v.full(sv.stage), j, v, s.scratch);
    }
  }

  // ---- consumers ---------------------------------------------------------------------------
  // One warp's release (lane 0) of a stage of `ring`: in this block, and (kShared) in the other block of
  // the cluster, whose K loads land in this block's stages too.
  template <bool kShared, typename Ring>
  static __device__ __forceinline__ void release(const Ring& ring, int stage) {
    ring.consumer_release(typename Ring::State{stage, 0});
    if constexpr (kShared) ptx::mbarrier_arrive_remote(ptx::map_shared_rank(ring.empty(stage), ptx::cluster_ctarank() ^ 1u));
  }

  static __device__ __forceinline__ uint64_t k_major(uint32_t addr) { return ptx::gmma_desc_sw128(addr, 16, 1024); }

  // Issue S = Q K_j^T for the keys at rows [key0, key0 + 8 kNS) of the K slices, over the E
  // slices, one slice's wgmmas in flight while the next is issued (each earlier stage released once
  // its wgmmas are done). Returns with the last slice's
  // group pending: the caller waits for it and releases that stage (release_qk).
  template <int kNS>
  static __device__ __forceinline__ void issue_qk(float (&s)[kNS][4], const Smem& sm, typename RingQK::State& st,
                                                  int key0, int lane) {
#pragma unroll 1
    for (int d = 0; d < kSlicesQK; ++d) {
      sm.ring_qk.consumer_wait(st);
      const uint32_t q = sm.qk + st.stage * Traits::kQKStageBytes;
      const ptx::GmmaDescSw128 qd(q, 16, 1024), kd(q + QSlice::kBytes + key0 * 128, 16, 1024);
      ptx::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) ptx::WgmmaM64<8 * kNS, Element>::ss(s, qd.at(ks * 32), kd.at(ks * 32), d > 0 || ks > 0);
      ptx::wgmma_commit_group();
      if (d >= kLag) {
        ptx::wgmma_wait_group<kLag>();
        if (lane == 0) release<kShareStages>(sm.ring_qk, back(st, kLag));
      }
      st.advance();
    }
  }

  // The ring stage `i` stages before st's.
  static __device__ __forceinline__ int back(const typename RingQK::State& st, int i) {
    return (st.stage - i + Traits::kQKStages) % Traits::kQKStages;
  }

  // The last kLag slices' stages, once their wgmmas are done.
  static __device__ __forceinline__ void release_qk(const Smem& sm, const typename RingQK::State& st, int lane) {
    if (lane == 0)
#pragma unroll
      for (int i = 1; i <= kLag; ++i) release<kShareStages>(sm.ring_qk, back(st, i));
  }

  // Issue O_c += P V_j[:, col .. col + kCols) for V stage v of tile j (two k-steps of 16 keys), P
  // from buffer p_tile; returns the stage, to release once the group is done.
  template <int kCols>
  static __device__ __forceinline__ int issue_pv(float (&o)[kCols / 8][4], const Params& p, const Item& w,
                                                 const Smem& sm, typename RingV::State& st, uint32_t p_tile, int j,
                                                 int v, int col) {
    sm.ring_v.consumer_wait(st);
    const uint32_t stage = sm.v + st.stage * Traits::kVStageBytes;
    Problem::template prepare_v<kCols>(p, w, j, v, stage, col);
    if constexpr (kFp8) {  // one k-step of 32 keys: P's bytes 32 v.. of each row, V^T's rows col.. (32 bytes each)
      ptx::wgmma_fence();
      ptx::WgmmaM64<kCols, Element>::ss(o, k_major(p_tile + PTile::k_major_kstep(v)),
                                        ptx::gmma_desc_sw32_k(stage + col * Traits::kVKeys), 1);
      ptx::wgmma_commit_group();
    } else {
      issue_pv_b16<kCols>(o, stage, p_tile, v, col);
    }
    const int s = st.stage;
    st.advance();
    return s;
  }

  // P V of one V stage on b16 operands (V read transposed, kVKeys / 16 k-steps).
  template <int kCols>
  static __device__ __forceinline__ void issue_pv_b16(float (&o)[kCols / 8][4], uint32_t stage, uint32_t p_tile, int v,
                                                      int col) {
    const ptx::GmmaDescSw128 vd(stage + VStage::chunk(col / 64), VStage::kChunkBytes, 1024), pd(p_tile, 16, 1024);
    // N of one wgmma is at most 256: wider shares (320 columns) take a second one for the rest.
    constexpr int kN0 = kCols > 256 ? 256 : kCols, kN1 = kCols - kN0;
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Traits::kVKeys / 16; ++kk) {
      const uint64_t a = pd.at(PTile::k_major_kstep(v * Traits::kVKeys / 16 + kk));
      ptx::WgmmaM64<kN0, Element>::ss_tb(*reinterpret_cast<float(*)[kN0 / 8][4]>(&o[0]), a, vd.at(VStage::mn_major_kstep(kk)), 1);
      if constexpr (kN1 > 0)
        ptx::WgmmaM64<kN1, Element>::ss_tb(*reinterpret_cast<float(*)[kN1 / 8][4]>(&o[kN0 / 8]), a,
                                           vd.at(VStage::chunk(kN0 / 64) + VStage::mn_major_kstep(kk)), 1);
    }
    ptx::wgmma_commit_group();
  }

  // V stages [kV0, n) of P V_j, each issued once the one kPreV before it is done (and released), then
  // all waited for: at most kPreV stages of V held. A tile of the loop: kV0 = kPreV (those before were
  // issued ahead of the softmax), n = kStagesV; a pair's last tile: kV0 = 0, n = last_stages.
  template <int kCols, int kV0 = kPreV>
  static __device__ __forceinline__ void finish_pv(float (&o)[kCols / 8][4], const Params& p, const Item& w,
                                                   const Smem& sm, typename RingV::State& st, int (&held)[kStagesV],
                                                   uint32_t p_tile, int j, int col, int lane, int n = kStagesV) {
#pragma unroll
    for (int v = kV0; v < kStagesV; ++v) {
      if (v >= n) break;
      if (v >= kPreV) {
        ptx::wgmma_wait_group<kPreV - 1>();
        if (lane == 0) release<kShareV>(sm.ring_v, held[v - kPreV]);
      }
      held[v] = issue_pv<kCols>(o, p, w, sm, st, p_tile, j, v, col);
    }
    ptx::wgmma_wait_group<0>();
    ptx::wgmma_fence_operand(o);
    if (lane == 0)
#pragma unroll
      for (int v = 0; v < kStagesV; ++v)
        if (v < n && v >= n - kPreV) release<kShareV>(sm.ring_v, held[v]);
  }

  // The V stages of the item's last tile j that P V multiplies: a pair's cut (Problem::last_v_stages);
  // lone blocks every stage, their last tile on the loop's code (the cut cost K-sharing pairs at
  // 576/512: docs/hopper_ffpa.md, session 36).
  static __device__ __forceinline__ int last_stages(const Params& p, const Item& w, int j) {
    if constexpr (kPair)
      return Problem::last_v_stages(p, w, j);
    else
      return kStagesV;
  }

  // Online softmax of S_j on consumer c (key slot `slot`): masks where the tile needs it
  // (Problem::mask), exchanges row maxima with the consumers sharing the tile (exchange_stats), updates the row max
  // (lazily, the same on every consumer: attn/state.cuh) and this consumer's partial row
  // sum, leaves P = exp2(S - m) in s and returns alpha in `alpha`, the factor O is rescaled by.
  template <int kNS>
  static __device__ __forceinline__ void softmax(const Params& p, const Smem& sm, const Item& w, int j, int slot,
                                                 int key0, int r0, int row0, int g, int t4, uint32_t xphase, float (&s)[kNS][4],
                                                 float (&row_max)[2], float (&row_sum)[2], float (&alpha)[2]) {
    const bool per_elem = Problem::mask(s, p, w, j, key0, row0, g, t4);
    const float sf = per_elem ? 1.f : Problem::scale_log2(p, w);
    float tile_max[2];
    quad_row_max(s, sf, tile_max);
    exchange_stats(sm, kXMax, slot, r0, t4, xphase, tile_max);
    float neg_m[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = tile_max[r];
#pragma unroll
      for (int k = 0; k < kSlots; ++k)
        if (k != slot) m = fmaxf(m, sm.stats[k * kBlockM + r0 + 8 * r]);
      if constexpr (kFp8) {  // P = 2^(s - m + kPOffset) <= 2^(slack + kPOffset) = 256 (b16's slack of 8: 2^16)
        alpha[r] = online_update_lazy(row_max[r], row_sum[r], m, neg_m[r], Traits::kMaxSlack);
        neg_m[r] += Traits::kPOffset;
      } else {
        alpha[r] = online_update_lazy(row_max[r], row_sum[r], m, neg_m[r]);
      }
    }
    exp2_strip_add_sums(s, sf, neg_m, row_sum);
  }

  // Publish this consumer's per-row values x (rows r0, r0 + 8; lanes t4 == 0 hold them) in stats
  // slot stats_base(xb) + slot to every consumer sharing the tile and wait for theirs: a named
  // barrier of the block's two consumers, or a pair's exchange barrier xb (kXMax, kXSum) of both blocks.
  static __device__ __forceinline__ void exchange_stats(const Smem& sm, int xb, int slot, int r0, int t4,
                                                        uint32_t xphase, const float (&x)[2]) {
    const int base = stats_base(xb);
    if constexpr (kPair) {
      if (t4 == 0) {
        const uint32_t at = ptx::smem_u32addr(sm.stats + (base + slot) * kBlockM + r0);
#pragma unroll
        for (uint32_t b = 0; b < 2; ++b) {
          const uint32_t dst = ptx::map_shared_rank(at, b);
          ptx::st_shared_cluster_f32(dst, x[0]);
          ptx::st_shared_cluster_f32(dst + 8 * 4, x[1]);
        }
      }
      arrive_both(sm.xbar + 8 * xb);
      ptx::mbarrier_wait_parity<true>(sm.xbar + 8 * xb, xphase);
    } else {
      if (t4 == 0) {
        sm.stats[(base + slot) * kBlockM + r0] = x[0];
        sm.stats[(base + slot) * kBlockM + r0 + 8] = x[1];
      }
      pair_sync(xb == kXMax ? kBarMax : kBarSum, kPairThreads);
    }
  }

  // A pair: this warp's arrival on exchange barrier `bar` of both blocks, after its lanes' stores.
  static __device__ __forceinline__ void arrive_both(uint32_t bar) {
    __syncwarp();
    if (threadIdx.x % 32 == 0) {
      ptx::mbarrier_arrive_cluster(ptx::map_shared_rank(bar, 0));
      ptx::mbarrier_arrive_cluster(ptx::map_shared_rank(bar, 1));
    }
  }

  // P in b16 into consumer c's columns of a P buffer (swizzled: a warp's 8 rows x 4 lanes hit 32
  // banks), published to the async proxy and to the other consumer (barrier 2).
  // A pair: into both blocks' P buffers (distributed shared memory), published on barrier p of both
  // (wait_p waits for the other consumers' halves).
  template <int kNS>
  static __device__ __forceinline__ void write_p(const Smem& sm, const float (&s)[kNS][4], uint32_t p_tile, int key0,
                                                 int r0, int t4) {
    const uint32_t peer = kPair ? ptx::map_shared_rank(p_tile, ptx::cluster_ctarank() ^ 1u) - p_tile : 0u;
#pragma unroll
    for (int n = 0; n < kNS; ++n)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if constexpr (kFp8) {  // two e4m3 keys: byte key of the row (a b16 column is two bytes)
          const uint32_t addr = p_tile + PTile::elem_offset(r0 + 8 * r, (key0 + 8 * n + 2 * t4) / 2);
          asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(addr), "h"(ptx::pack2_e4m3(s[n][2 * r], s[n][2 * r + 1])));
        } else {
          const uint32_t addr = p_tile + PTile::elem_offset(r0 + 8 * r, key0 + 8 * n + 2 * t4);
          const uint32_t x = Num::pack2(s[n][2 * r], s[n][2 * r + 1]);
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(x));
          if constexpr (kPair) ptx::st_shared_cluster_b32(addr + peer, x);
        }
      }
    if constexpr (kPair) {
      ptx::fence_proxy_async_shared_cluster();
      arrive_both(sm.xbar + 8 * kXP);  // waited for in wait_p, before P V of this tile: S of the next runs meanwhile
    } else {
      ptx::fence_proxy_async_shared();
      pair_sync(kBarP, kPairThreads);
    }
  }

  // A pair: the tile's P complete in this block (all four slots), before P V reads it.
  static __device__ __forceinline__ void wait_p(const Smem& sm, uint32_t parity) {
    if constexpr (kPair) ptx::mbarrier_wait_parity<true>(sm.xbar + 8 * kXP, parity);
  }

  // One item on consumer c, which owns O columns [col, col + kCols) of the item's group. S_j's wgmmas
  // are issued before P V_{j-1}'s, so the softmax of S_j runs while the tensor cores do the first
  // kPreV V stages of P V_{j-1} (P double-buffered).
  template <int kCols, int kKeys>
  static __device__ __forceinline__ void consume(const Params& p, const Smem& sm, const Item& w, int c, int col) {
    constexpr int kNO = kCols / 8;  // m16n8 O tiles per warp
    constexpr int kNS = kKeys / 8;  // m16n8 S tiles per warp
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    const int r0 = 16 * warp + g;  // this thread's first row in the block (and r0 + 8)
    const int row0 = w.m0 + 16 * warp;
    // This consumer's key slot of each tile (a pair's block r computes slots 2 r, 2 r + 1) and the
    // parity of the exchange barriers' current phase (flips per tile).
    const int slot = kPair ? 2 * static_cast<int>(ptx::cluster_ctarank()) + c : c;
    // Its keys of each tile: [key0, key0 + kKeys) (a lone block's consumer 1 starts past consumer 0's),
    // and where they sit in this block's K slices (a pair's block holds its own 128 keys of the tile).
    const int key0 = kPair ? slot * kColsS : c * Traits::kColsS0;
    const int key0_smem = kPair ? c * kColsS : key0;
    uint32_t xphase = 0, fphase = 0;
    float o[kNO][4], row_max[2] = {-CUDART_INF_F, -CUDART_INF_F}, row_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int n = 0; n < kNO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] = 0.f;
    typename RingQK::State sq;
    typename RingV::State sv;

    int j = Problem::first_tile(p, w);
    if (j < w.n_end) {
      float s[kNS][4], alpha[2];
      int held[kStagesV];  // V stages of P V in flight
      uint32_t p_tile = sm.p;
      issue_qk(s, sm, sq, key0_smem, lane);
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(s);
      release_qk(sm, sq, lane);
      softmax(p, sm, w, j, slot, key0, r0, row0, g, t4, xphase, s, row_max, row_sum, alpha);  // O is 0: alpha unused
      write_p(sm, s, p_tile, key0, r0, t4);
      xphase ^= 1u;
      for (int jn = Problem::next_tile(p, w, j); jn < w.n_end; j = jn, jn = Problem::next_tile(p, w, j)) {
        issue_qk(s, sm, sq, key0_smem, lane);  // S_jn's wgmmas first; its softmax runs under P V_j's first stages
        wait_p(sm, xphase ^ 1u);       // (a pair: P_j's exchange ran under S_jn's issue)
#pragma unroll
        for (int v = 0; v < kPreV; ++v) held[v] = issue_pv<kCols>(o, p, w, sm, sv, p_tile, j, v, col);
        ptx::wgmma_wait_group<kPreV>();
        ptx::wgmma_fence_operand(s);
        release_qk(sm, sq, lane);
        softmax(p, sm, w, jn, slot, key0, r0, row0, g, t4, xphase, s, row_max, row_sum, alpha);
        finish_pv<kCols>(o, p, w, sm, sv, held, p_tile, j, col, lane);
        if constexpr (Traits::kPBuffers == 2) {
          p_tile = p_tile == sm.p ? sm.p + PTile::kBytes : sm.p;  // its last reader, P V_{j-1}, is done (all)
        } else {  // one buffer (a pair): P V_j done in every consumer of both blocks before P_jn lands
          arrive_both(sm.xbar + 8 * kXFree);
        }
        rescale_strip(o, alpha);
        if constexpr (Traits::kPBuffers == 1) {
          ptx::mbarrier_wait_parity<true>(sm.xbar + 8 * kXFree, fphase);
          fphase ^= 1u;
        }
        write_p(sm, s, p_tile, key0, r0, t4);
        xphase ^= 1u;
      }
      wait_p(sm, xphase ^ 1u);
      if constexpr (kPair) {
        int last_held[kStagesV];  // (its own array: `held` here moved ptxas's allocation at D = 2048)
        finish_pv<kCols, 0>(o, p, w, sm, sv, last_held, p_tile, j, col, lane, last_stages(p, w, j));
      } else {
#pragma unroll
        for (int v = 0; v < kPreV; ++v) held[v] = issue_pv<kCols>(o, p, w, sm, sv, p_tile, j, v, col);
        finish_pv<kCols>(o, p, w, sm, sv, held, p_tile, j, col, lane);
      }
    }
    store<kCols>(p, w, sm, c, slot, col, r0, row0, g, t4, o, row_max, row_sum);
  }

  // Epilogue: the consumers sharing the tiles add their partial row sums (barrier 3, or a pair's
  // sum exchange: the last access to the peer's shared memory); the Problem stores the rows.
  template <int kCols>
  static __device__ __forceinline__ void store(const Params& p, const Item& w, const Smem& sm, int c, int slot,
                                               int col0, int r0, int row0, int g, int t4,
                                               const float (&o)[kCols / 8][4], const float (&row_max)[2],
                                               float (&row_sum)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] = quad_sum(row_sum[r]);
    }
    exchange_stats(sm, kXSum, slot, r0, t4, 0u, row_sum);
    const int base = stats_base(kXSum);
    float l[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[r] = row_sum[r];
#pragma unroll
      for (int k = 0; k < kSlots; ++k)
        if (k != slot) l[r] += sm.stats[(base + k) * kBlockM + r0 + 8 * r];
    }
    Problem::template store<kCols>(p, w, c, col0, row0, g, t4, o, row_max, l);
  }

  static __device__ __forceinline__ void run(const Params& p, const Maps& maps, char* smem_raw) {
    const Smem sm = layout(smem_raw);
    // Every thread, before any other use of shared memory: `scratch` (P's buffers) is the Problem's
    // until then (the decode Problem ranks sequence lengths there, with block barriers).
    const Item w = Problem::item(p, blockIdx.x, reinterpret_cast<int*>(smem_raw + (sm.p - ptx::smem_u32addr(smem_raw))));
    if (threadIdx.x == 0) {
      sm.ring_qk.init(kConsumerWarps * (kShareStages ? 2 : 1));
      sm.ring_v.init(kConsumerWarps * (kShareV ? 2 : 1));
      if constexpr (kPair)
        for (int x = kXMax; x <= kXFree; ++x) ptx::mbarrier_init(sm.xbar + 8 * x, kXWarps);
    }
    if constexpr (kPair || kShareK)
      ptx::cluster_sync();  // both blocks' barriers initialised before any arrival or load crosses
    else
      __syncthreads();
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
      ptx::setmaxnreg_dec<Traits::kProducerRegs>();
      if (threadIdx.x == 0) produce(p, maps, sm, w);
      return;
    }
    ptx::setmaxnreg_inc<Traits::kConsumerRegs>();
    if constexpr (kOneCopy) {  // one copy of the consumer code; c warp-uniform to ptxas (fa2_fwd_sm90_ws.cuh run())
      const int c = __shfl_sync(0xffffffffu, wg, 0) - 1;
      consume<Traits::kCols0, Traits::kColsS>(p, sm, w, c, c * Traits::kCols0);
    } else if (wg == 1)
      consume<Traits::kCols0, Traits::kColsS0>(p, sm, w, 0, 0);
    else
      consume<Traits::kCols1, Traits::kColsS1>(p, sm, w, 1, Traits::kCols0);
  }
};

}  // namespace ffpa::attn
