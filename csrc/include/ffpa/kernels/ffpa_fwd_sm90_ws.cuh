// FFPA level 1 on Hopper (sm_90a), warp-specialised: large head dims (O in registers, up to 512 Dv
// columns per block, wider Dv as two column groups; E sliced, so shared memory does not grow with
// E) on the warpgroup MMA with TMA loads. The launcher (launch/ffpa_fwd_ws_launch.cuh) runs it on
// compute capability 9.0 where TMA can describe q, k and v; elsewhere the mma.sync L1 kernel
// (ffpa_fwd_sm80.cuh) runs, on a tile that divides this one's 64 x 128.
//
// One block per work item: 64 query rows and one Dv column group of one (batch, head), the key
// tiles they see (causal cut, block-map skip), items numbered last query block first (the longest
// causal rows start first).
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
// Who waits on what (mbarriers; ring_qk kQKStages deep, ring_v kVStages deep):
//   producer:  empty_qk[s] -> TMA Q, K slices -> full_qk[s]     empty_v[s] -> TMA V stage -> full_v[s]
//   consumers: full_qk[s] -> S += Q K (wgmma) -> its wait -> arrive empty_qk[s]   (both consumers)
//              full_v[s]  -> O += P V (wgmma) -> its wait -> arrive empty_v[s]    (both consumers)
// The row maxima are one buffer: a consumer writes tile j + 1's only after pair barrier 2 of j, which
// the other passes only after reading tile j's. P_{j+1} goes to the buffer P V_{j-1} read, which
// both consumers finished before pair barrier 2 of j.
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
#include "ffpa/attn/softmax.cuh"
#include "ffpa/attn/state.cuh"
#include "ffpa/attn/tile_mask.cuh"
#include "ffpa/constants.h"
#include "ffpa/params.h"
#include "ffpa/ptx/cp_async.cuh"  // smem_u32addr
#include "ffpa/ptx/math.cuh"
#include "ffpa/ptx/mbarrier.cuh"
#include "ffpa/ptx/tma.cuh"
#include "ffpa/ptx/warpgroup.cuh"
#include "ffpa/ptx/wgmma.cuh"
#include "ffpa/tile/numeric.cuh"
#include "ffpa/tile/stage_ring.cuh"
#include "ffpa/traits/ffpa_traits.h"

namespace ffpa::attn {

// The kernel's TMA maps (rank 4: head dim, position, head, batch), encoded by the launcher with
// boxes of 64 columns x 64 (q), 128 (k) and kVKeys (v) positions.
struct FfpaTmaMaps {
  CUtensorMap q, k, v;
};

template <typename Traits>
struct FfpaFwdWs {
  using Element = typename Traits::Element;
  using Num = Numeric<Element>;
  using QSlice = typename Traits::QSlice;
  using KSlice = typename Traits::KSlice;
  using VStage = typename Traits::VStage;
  using PTile = typename Traits::PTile;
  using RingQK = StageRing<Traits::kQKStages>;
  using RingV = StageRing<Traits::kVStages>;
  using MmaS = ptx::WgmmaM64<Traits::kColsS, Element>;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kColsS = Traits::kColsS;
  static constexpr int kNS = kColsS / 8;  // m16n8 S tiles per warp
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
  static constexpr int kVChunks = Traits::kGroupCols / 64;  // TMA boxes of one V stage
  static constexpr uint32_t kConsumerWarps = 4 * Traits::kConsumers;  // arrivals that release a stage
  static constexpr uint32_t kPairThreads = 128 * Traits::kConsumers;
  // Named barriers of the consumer pair (0 is __syncthreads).
  static constexpr uint32_t kBarMax = 1, kBarP = 2, kBarSum = 3;
  static_assert(Traits::kConsumers == 2, "a pair of consumers splits the key and Dv columns");

  // A barrier of the consumer pair: where the two run different code (an uneven column split), the
  // unaligned form (see ptx/warpgroup.cuh).
  static __device__ __forceinline__ void pair_sync(uint32_t id, uint32_t threads) {
    if constexpr (Traits::kCols0 == Traits::kCols1)
      ptx::named_barrier_sync(id, threads);
    else
      ptx::named_barrier_sync_unaligned(id, threads);
  }

  struct Smem {
    uint32_t qk, v, p;  // ring_qk's stages, ring_v's stages, P's two buffers (shared addresses)
    float* stats;       // [2 (max, sum)][kConsumers][kBlockM]
    RingQK ring_qk;
    RingV ring_v;
  };

  static __device__ __forceinline__ Smem layout(char* smem_raw) {
    const uint32_t raw = ptx::smem_u32addr(smem_raw);
    Smem s;
    s.qk = (raw + 1023u) & ~1023u;
    s.v = s.qk + Traits::kQKStages * Traits::kQKStageBytes;
    s.p = s.v + Traits::kVRingBytes;
    const uint32_t stats = s.p + 2 * PTile::kBytes;  // P is double-buffered
    s.stats = reinterpret_cast<float*>(smem_raw + (stats - raw));
    s.ring_qk = RingQK{stats + Traits::kStatBytes};
    s.ring_v = RingV{s.ring_qk.bars + RingQK::kBarrierBytes};
    return s;
  }

  struct Item {
    int m_block, group, head, batch, m0, n_end;
    const uint8_t* codes;  // the item's first row of the mask block map, or null
  };

  static __device__ __forceinline__ Item item(const FwdParams& p, int t, int m_blocks) {
    Item w;
    w.m_block = m_blocks - 1 - t % m_blocks;
    w.group = Traits::kGroups == 1 ? 0 : (t / m_blocks) % Traits::kGroups;
    const int bh = t / m_blocks / Traits::kGroups;
    w.head = bh % p.heads_q;
    w.batch = bh / p.heads_q;
    w.m0 = w.m_block * kBlockM;
    w.n_end = block_kv_tiles<kBlockN>(p, w.m0, min(kBlockM, p.len_q - w.m0));
    w.codes = p.block_map == nullptr ? nullptr : block_map_row(p, w.batch, w.head, w.m_block * (kBlockM / p.block_map_m));
    return w;
  }

  // The block map is built at the fallback kernel's tile (launch/ffpa_fwd_ws_launch.cuh): its blocks
  // of block_map_m x block_map_n (dividing 64 x 128) that make up key tile j of the item's rows
  // merge to one code: skipped if all are, full if all are (blocks past the map's edge hold no
  // element and count for neither), else partial.
  static __device__ __forceinline__ uint8_t tile_code(const FwdParams& p, const Item& w, int j) {
    const int rm = kBlockM / p.block_map_m, rn = kBlockN / p.block_map_n;
    const int rows = (p.len_q + p.block_map_m - 1) / p.block_map_m - w.m_block * rm;
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
  static __device__ __forceinline__ int next_tile(const FwdParams& p, const Item& w, int j) {
    if (w.codes != nullptr)
      while (j < w.n_end && tile_code(p, w, j) == kBlockSkip) ++j;
    return j;
  }

  // ---- producer ----------------------------------------------------------------------------
  static __device__ __forceinline__ void produce(const FwdParams& p, const FfpaTmaMaps& maps, const Smem& s,
                                                 const Item& w) {
    ptx::tma_prefetch_map(&maps.q);
    ptx::tma_prefetch_map(&maps.k);
    ptx::tma_prefetch_map(&maps.v);
    const int head_kv = w.head / (p.heads_q / p.heads_kv);
    typename RingQK::State sq;
    typename RingV::State sv;
    // The consumers' order: S_j's slices before P V_{j-1}'s stages (V one tile behind).
    int prev = -1;
    for (int j = next_tile(p, w, 0); j < w.n_end; j = next_tile(p, w, j + 1)) {
      for (int d = 0; d < kSlicesQK; ++d, sq.advance()) {
        const uint32_t stage = s.qk + sq.stage * Traits::kQKStageBytes;
        s.ring_qk.producer_acquire(sq);
        s.ring_qk.producer_expect(sq, Traits::kQKStageBytes);
        ptx::tma_load_4d(stage, &maps.q, s.ring_qk.full(sq.stage), 64 * d, w.m0, w.head, w.batch);
        ptx::tma_load_4d(stage + QSlice::kBytes, &maps.k, s.ring_qk.full(sq.stage), 64 * d, j * kBlockN, head_kv,
                         w.batch);
      }
      if (prev >= 0) load_v(maps, s, sv, w, head_kv, prev);
      prev = j;
    }
    if (prev >= 0) load_v(maps, s, sv, w, head_kv, prev);
  }

  static __device__ __forceinline__ void load_v(const FfpaTmaMaps& maps, const Smem& s, typename RingV::State& sv,
                                                const Item& w, int head_kv, int j) {
    for (int v = 0; v < kStagesV; ++v, sv.advance()) {
      const uint32_t stage = s.v + sv.stage * Traits::kVStageBytes;
      s.ring_v.producer_acquire(sv);
      s.ring_v.producer_expect(sv, Traits::kVStageBytes);
#pragma unroll
      for (int c = 0; c < kVChunks; ++c)
        ptx::tma_load_4d(stage + VStage::chunk(c), &maps.v, s.ring_v.full(sv.stage), w.group * Traits::kGroupCols + 64 * c,
                         j * kBlockN + v * Traits::kVKeys, head_kv, w.batch);
    }
  }

  // ---- consumers ---------------------------------------------------------------------------
  static __device__ __forceinline__ uint64_t k_major(uint32_t addr) { return ptx::gmma_desc_sw128(addr, 16, 1024); }

  // Issue S = Q K_j[64 c ..]^T over the E slices, one slice's wgmmas in flight while the next is
  // issued (each earlier stage released once its wgmmas are done). Returns with the last slice's
  // group pending: the caller waits for it and releases that stage (release_qk).
  static __device__ __forceinline__ void issue_qk(float (&s)[kNS][4], const Smem& sm, typename RingQK::State& st,
                                                  int c, int lane) {
#pragma unroll 1
    for (int d = 0; d < kSlicesQK; ++d) {
      sm.ring_qk.consumer_wait(st);
      const uint32_t q = sm.qk + st.stage * Traits::kQKStageBytes;
      const uint32_t k = q + QSlice::kBytes + c * kColsS * 128;
      ptx::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) MmaS::ss(s, k_major(q + ks * 32), k_major(k + ks * 32), d > 0 || ks > 0);
      ptx::wgmma_commit_group();
      if (d >= kLag) {
        ptx::wgmma_wait_group<kLag>();
        if (lane == 0) sm.ring_qk.consumer_release(typename RingQK::State{back(st, kLag), 0});
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
      for (int i = 1; i <= kLag; ++i) sm.ring_qk.consumer_release(typename RingQK::State{back(st, i), 0});
  }

  // Issue O_c += P V_j[:, col .. col + kCols) for one V stage (two k-steps of 16 keys), P from
  // buffer pbuf; returns the stage, to release once the group is done.
  template <int kCols>
  static __device__ __forceinline__ int issue_pv(float (&o)[kCols / 8][4], const Smem& sm, typename RingV::State& st,
                                                 uint32_t p_tile, int v, int col) {
    sm.ring_v.consumer_wait(st);
    const uint32_t vs = sm.v + st.stage * Traits::kVStageBytes + VStage::chunk(col / 64);
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Traits::kVKeys / 16; ++kk)
      ptx::WgmmaM64<kCols, Element>::ss_tb(o, k_major(p_tile + PTile::k_major_kstep(v * Traits::kVKeys / 16 + kk)),
                                           ptx::gmma_desc_sw128(vs + VStage::mn_major_kstep(kk), VStage::kChunkBytes, 1024),
                                           1);
    ptx::wgmma_commit_group();
    const int stage = st.stage;
    st.advance();
    return stage;
  }

  // V stages kPreV.. of P V_j, each issued once the oldest pending one is done (and released), then
  // the rest waited for: at most kPreV stages of V held.
  template <int kCols>
  static __device__ __forceinline__ void finish_pv(float (&o)[kCols / 8][4], const Smem& sm,
                                                   typename RingV::State& st, int (&held)[kStagesV], uint32_t p_tile,
                                                   int col, int lane) {
#pragma unroll
    for (int v = kPreV; v < kStagesV; ++v) {
      ptx::wgmma_wait_group<kPreV - 1>();
      if (lane == 0) sm.ring_v.consumer_release(typename RingV::State{held[v - kPreV], 0});
      held[v] = issue_pv<kCols>(o, sm, st, p_tile, v, col);
    }
    ptx::wgmma_wait_group<0>();
    ptx::wgmma_fence_operand(o);
    if (lane == 0)
#pragma unroll
      for (int v = kStagesV - kPreV; v < kStagesV; ++v) sm.ring_v.consumer_release(typename RingV::State{held[v], 0});
  }

  // Scores of a boundary tile (base 2, scaled here): the sequence end, the causal limit and, in
  // kBlockPartial tiles, attn_mask. Off the hot path.
  static __device__ __forceinline__ void mask(float (&s)[kNS][4], const FwdParams& p, const Item& w, uint8_t code,
                                              int row0, int n0, int g, int t4) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + g + 8 * r;
      const int lim = last_visible_key(p, row) - (n0 + 2 * t4);
#pragma unroll
      for (int n = 0; n < kNS; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float x = s[n][2 * r + e] * p.scale_log2;
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

  // Online softmax of S_j on consumer c: masks boundary tiles, exchanges row maxima with the other
  // consumer (barrier 1), updates the row max and this consumer's partial row sum, leaves
  // P = exp2(S - m) in s and returns alpha in `alpha`, the factor O is rescaled by.
  static __device__ __forceinline__ void softmax(const FwdParams& p, const Smem& sm, const Item& w, int j, int c,
                                                 int r0, int row0, int g, int t4, float (&s)[kNS][4],
                                                 float (&row_max)[2], float (&row_sum)[2], float (&alpha)[2]) {
    const int n0 = j * kBlockN + c * kColsS;
    const uint8_t code = w.codes != nullptr ? tile_code(p, w, j) : static_cast<uint8_t>(kBlockFull);
    const bool per_elem = code == kBlockPartial || n0 + kColsS > p.len_kv || p.scale_log2 < 0.f ||
                          (p.is_causal && n0 + kColsS - 1 > w.m0 + p.causal_offset);
    if (per_elem) mask(s, p, w, code, row0, n0, g, t4);
    const float sf = per_elem ? 1.f : p.scale_log2;
    float tile_max[2] = {strip_row_max(s, 0), strip_row_max(s, 1)};
    float* max_mine = sm.stats + c * kBlockM;
    const float* max_other = sm.stats + (1 - c) * kBlockM;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      tile_max[r] *= sf;
      if (t4 == 0) max_mine[r0 + 8 * r] = tile_max[r];
    }
    pair_sync(kBarMax, kPairThreads);
    float neg_m[2];
#pragma unroll
    for (int r = 0; r < 2; ++r)
      alpha[r] = online_update(row_max[r], row_sum[r], fmaxf(tile_max[r], max_other[r0 + 8 * r]), neg_m[r]);
    exp2_strip_add_sums(s, sf, neg_m, row_sum);
  }

  // P in b16 into consumer c's columns of a P buffer (swizzled: a warp's 8 rows x 4 lanes hit 32
  // banks), published to the async proxy and to the other consumer (barrier 2).
  static __device__ __forceinline__ void write_p(const float (&s)[kNS][4], uint32_t p_tile, int c, int r0, int t4) {
#pragma unroll
    for (int n = 0; n < kNS; ++n)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const uint32_t addr = p_tile + PTile::elem_offset(r0 + 8 * r, c * kColsS + 8 * n + 2 * t4);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(Num::pack2(s[n][2 * r], s[n][2 * r + 1])));
      }
    ptx::fence_proxy_async_shared();
    pair_sync(kBarP, kPairThreads);
  }

  template <int kNO>
  static __device__ __forceinline__ void rescale(float (&o)[kNO][4], const float (&alpha)[2]) {
    if (__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) return;  // the row maxima settled
#pragma unroll
    for (int n = 0; n < kNO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] *= alpha[e / 2];
  }

  // One item on consumer c, which owns O columns [col, col + kCols) of the item's group. S_j's wgmmas
  // are issued before P V_{j-1}'s, so the softmax of S_j runs while the tensor cores do the first
  // kPreV V stages of P V_{j-1} (P double-buffered).
  template <int kCols>
  static __device__ __forceinline__ void consume(const FwdParams& p, const Smem& sm, const Item& w, int c, int col) {
    constexpr int kNO = kCols / 8;  // m16n8 O tiles per warp
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    const int r0 = 16 * warp + g;  // this thread's first row in the block (and r0 + 8)
    const int row0 = w.m0 + 16 * warp;
    float o[kNO][4], row_max[2] = {-CUDART_INF_F, -CUDART_INF_F}, row_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int n = 0; n < kNO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] = 0.f;
    typename RingQK::State sq;
    typename RingV::State sv;

    int j = next_tile(p, w, 0);
    if (j < w.n_end) {
      float s[kNS][4], alpha[2];
      int held[kStagesV];  // V stages of P V in flight
      uint32_t p_tile = sm.p;
      issue_qk(s, sm, sq, c, lane);
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(s);
      release_qk(sm, sq, lane);
      softmax(p, sm, w, j, c, r0, row0, g, t4, s, row_max, row_sum, alpha);  // O is 0: alpha unused
      write_p(s, p_tile, c, r0, t4);
      for (int jn = next_tile(p, w, j + 1); jn < w.n_end; j = jn, jn = next_tile(p, w, j + 1)) {
        issue_qk(s, sm, sq, c, lane);  // S_jn's wgmmas first; its softmax runs under P V_j's first stages
#pragma unroll
        for (int v = 0; v < kPreV; ++v) held[v] = issue_pv<kCols>(o, sm, sv, p_tile, v, col);
        ptx::wgmma_wait_group<kPreV>();
        ptx::wgmma_fence_operand(s);
        release_qk(sm, sq, lane);
        softmax(p, sm, w, jn, c, r0, row0, g, t4, s, row_max, row_sum, alpha);
        finish_pv<kCols>(o, sm, sv, held, p_tile, col, lane);
        p_tile = p_tile == sm.p ? sm.p + PTile::kBytes : sm.p;  // its last reader, P V_{j-1}, is done (both)
        rescale(o, alpha);
        write_p(s, p_tile, c, r0, t4);
      }
#pragma unroll
      for (int v = 0; v < kPreV; ++v) held[v] = issue_pv<kCols>(o, sm, sv, p_tile, v, col);
      finish_pv<kCols>(o, sm, sv, held, p_tile, col, lane);
    }
    store<kCols>(p, w, sm, c, col, r0, row0, g, t4, o, row_max, row_sum);
  }

  // Epilogue: the pair adds its partial row sums (barrier 3), then each stores O / l for its
  // columns straight from the accumulators (a quad writes one 16-byte run of a row; the padding
  // columns of a last group past Dv are not stored); consumer 0 of group 0 writes the LSE.
  template <int kCols>
  static __device__ __forceinline__ void store(const FwdParams& p, const Item& w, const Smem& sm, int c, int col0,
                                               int r0, int row0, int g, int t4, const float (&o)[kCols / 8][4],
                                               const float (&row_max)[2], float (&row_sum)[2]) {
    constexpr int kNO = kCols / 8;
    float* sum_mine = sm.stats + (2 + c) * kBlockM;
    const float* sum_other = sm.stats + (3 - c) * kBlockM;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
      if (t4 == 0) sum_mine[r0 + 8 * r] = row_sum[r];
    }
    pair_sync(kBarSum, kPairThreads);
    Element* o_base = static_cast<Element*>(p.o) + w.batch * p.o_batch_stride + w.head * p.o_head_stride;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = row_sum[r] + sum_other[r0 + 8 * r];
      const float inv = inv_row_sum(l);
      const int row = row0 + g + 8 * r;
      if (row < p.len_q) {
        const int col = w.group * Traits::kGroupCols + col0 + 2 * t4;
        uint32_t* dst = reinterpret_cast<uint32_t*>(o_base + static_cast<int64_t>(row) * p.o_row_stride + col);
#pragma unroll
        for (int n = 0; n < kNO; ++n)
          if (!Traits::kPadded || col + 8 * n < Traits::kHeadDimV)
            dst[4 * n] = Num::pack2(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
        if (p.lse != nullptr && c == 0 && w.group == 0 && t4 == 0)
          p.lse[(static_cast<int64_t>(w.batch) * p.heads_q + w.head) * p.len_q + row] = row_lse(row_max[r], l);
      }
    }
  }

  static __device__ __forceinline__ void run(const FwdParams& p, const FfpaTmaMaps& maps, char* smem_raw) {
    const Smem sm = layout(smem_raw);
    const Item w = item(p, blockIdx.x, (p.len_q + kBlockM - 1) / kBlockM);
    if (threadIdx.x == 0) {
      sm.ring_qk.init(kConsumerWarps);
      sm.ring_v.init(kConsumerWarps);
    }
    __syncthreads();
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
      ptx::setmaxnreg_dec<Traits::kProducerRegs>();
      if (threadIdx.x == 0) produce(p, maps, sm, w);
      return;
    }
    ptx::setmaxnreg_inc<Traits::kConsumerRegs>();
    if constexpr (Traits::kCols0 == Traits::kCols1)  // one copy of the consumer code
      consume<Traits::kCols0>(p, sm, w, wg - 1, (wg - 1) * Traits::kCols0);
    else if (wg == 1)
      consume<Traits::kCols0>(p, sm, w, 0, 0);
    else
      consume<Traits::kCols1>(p, sm, w, 1, Traits::kCols0);
  }
};

using FfpaKernelWs = void (*)(FwdParams, FfpaTmaMaps);

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    ffpa_fwd_ws_kernel(const __grid_constant__ FwdParams p, const __grid_constant__ FfpaTmaMaps maps) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) char smem[];
  FfpaFwdWs<Traits>::run(p, maps, smem);
#elif defined(__CUDA_ARCH__)
  __trap();  // no wgmma / TMA in this pass (the launcher only picks this kernel on sm_90a)
#endif
}

}  // namespace ffpa::attn
