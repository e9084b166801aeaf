// FP8 (e4m3) attention forward on Hopper (sm_90a): FA-2 style, warp-specialised, wgmma e4m3 with
// fp32 accumulation; the output bf16 or fp16. The structure is fa2_fwd_sm90_ws.cuh's (read that
// file's picture of who waits on what): a producer warpgroup whose one thread issues TMA, two or three
// consumer warpgroups of 64 query rows (traits/fp8_traits.h fp8_tile; issuing freely: taking turns, as the
// bf16 kernel does, ran 0-4% slower here), and per key tile
//
//       issue S_j = Q K_j^T                  (m64nNk32, N = the key tile, both operands by descriptor)
//       issue O += P_{j-1} V_{j-1}           (m64nDk32, P from registers, V^T by descriptor)
//       wait S_j -> softmax of S_j           (while P V runs) -> wait P V -> O *= alpha_j -> pack P_j
//
// What FP8 changes:
// * Operands are bytes: 128-byte swizzled rows hold 128 e4m3 (traits/fp8_traits.h); Q and K arrive in
//   one TMA load each (a rank-5 map over 128-byte chunks), V^T in one per 128-key chunk.
// * 8-bit wgmma reads B K-major only, so P V multiplies by V^T, with each 32 keys in the order the S
//   accumulator holds them in a thread: P packs to the A fragment where it lies (fp8_p_key), with no
//   shuffles. Where Traits::kVtInKernel (D = 64, 128), V arrives as it lies (TMA into a staging ring)
//   and the producer warpgroup's warps 1..3 write the V^T stages (`transpose`); else the launcher's
//   pre-pass writes V^T to global memory (kernels/fp8_v_transpose.cuh) and TMA loads it.
//
//   in-kernel form, per key tile j:
//     TMA thread:   K_j -> ring_k          V_j (as it lies) -> ring_n (staging)
//     transposers:  wait ring_n full, ring_v empty -> ldmatrix.trans / prmt / stmatrix -> fence.proxy.async
//                   -> arrive ring_v full (one per warp), arrive ring_n empty (one per warp)
//     consumers:    as below (they read ring_v's V^T stages either way)
// * P = 2^(s - m + 4) against the standing max (attn/standing_max.cuh, StandingMaxE4m3): no tile row max once a
//   warp's rows have theirs; the tile's partial row sums tested against 448 (e4m3's largest normal), a row past it
//   scaled back by a power of two, and a tile whose P overflowed to inf recomputed from global memory through the
//   exact (eager) update. Session 50, one H100: +12-15% against the exact update on every tile (eager at D <= 128,
//   slack 2 at D = 256, offset 8 - slack), relative RMSE 2.66e-2 against 2.55e-2 (the lower offset). The row sums
//   carry the 2^4 and O / l cancels it (the LSE subtracts it).
// * The q and k descales of the item's (batch, head) multiply the softmax scale; v's (times
//   v_scale) the output in the epilogue.
// attn_mask through the block map (kernels/mask_block_map.cuh, at this kernel's tile): skipped tiles
// are never loaded, the mask is read per element in partial ones (attn/mask.cuh).
// Work items (Traits::kBlockM query rows of one (batch, head), last query block first) walked by a persistent grid:
// block b takes items b, b + gridDim.x, .. (every role walks the same sequence; with a grid of one block an item,
// the launcher's causal form, that is one item). Q has a full and an empty barrier: the consumers release it after
// their item's last S, so the producer loads the next item's Q and first tiles under the last P V and the epilogue.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <math_constants.h>

#include "ffpa/attn/descale.cuh"
#include "ffpa/attn/mask.cuh"
#include "ffpa/attn/rows_out.cuh"
#include "ffpa/attn/softmax.cuh"
#include "ffpa/attn/standing_max.cuh"
#include "ffpa/attn/state.cuh"
#include "ffpa/attn/tile_mask.cuh"
#include "ffpa/kernels/fa2_ws_schedule.cuh"  // Fa2WsItems::Walk
#include "ffpa/params.h"
#include "ffpa/ptx/cp_async.cuh"  // smem_u32addr
#include "ffpa/ptx/fp8.cuh"
#include "ffpa/ptx/ldmatrix.cuh"
#include "ffpa/ptx/math.cuh"
#include "ffpa/ptx/mbarrier.cuh"
#include "ffpa/ptx/tma.cuh"
#include "ffpa/ptx/warpgroup.cuh"
#include "ffpa/ptx/wgmma.cuh"
#include "ffpa/tile/numeric.cuh"
#include "ffpa/tile/quad.cuh"
#include "ffpa/tile/stage_ring.cuh"
#include "ffpa/traits/fp8_traits.h"

namespace ffpa::attn {

// Q, K and V as it lies (in-kernel transpose): rank 5 (128-byte chunk, position, chunk, head, batch);
// V^T (pre-pass form): rank 4 (key, column, head, batch). The form that does not run leaves its map unset.
struct Fp8TmaMaps {
  CUtensorMap q, k, vt, v;
};

template <typename Traits, typename Out>
struct Fa2FwdFp8 {
  using Policy = StandingMaxE4m3;  // P's offset, bound and repair (attn/standing_max.cuh)
  using QTile = typename Traits::QTile;
  using KTile = typename Traits::KTile;
  using VtTile = typename Traits::VtTile;
  using VnTile = typename Traits::VnTile;
  using RingK = StageRing<Traits::kKStages>;
  using RingV = StageRing<Traits::kVtStages>;
  using RingN = StageRing<Traits::kVnStages == 0 ? 1 : Traits::kVnStages>;  // staged V (in-kernel form)
  static constexpr bool kVtInKernel = Traits::kVtInKernel;
  using MmaS = ptx::WgmmaM64<Traits::kBlockN, __nv_fp8_e4m3>;
  using MmaO = ptx::WgmmaM64<Traits::kHeadDimV, __nv_fp8_e4m3>;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kNS = Traits::kNTilesS;
  static constexpr int kNO = Traits::kNTilesO;
  static constexpr int kConsumers = Traits::kConsumers;
  static constexpr uint32_t kConsumerWarps = 4 * kConsumers;

  struct Smem {
    uint32_t q, k, vt, vn, q_bar, q_empty;
    RingK ring_k;
    RingV ring_v;
    RingN ring_n;
  };

  static __device__ __forceinline__ Smem layout(char* smem_raw) {
    const uint32_t raw = ptx::smem_u32addr(smem_raw);
    Smem s;
    s.q = (raw + 1023u) & ~1023u;
    s.k = s.q + QTile::kBytes;
    s.vt = s.k + Traits::kKStages * KTile::kBytes;
    s.vn = s.vt + Traits::kVtStages * VtTile::kBytes;
    s.q_bar = s.vn + Traits::kVnStages * VnTile::kBytes;
    s.q_empty = s.q_bar + 8;
    s.ring_k = RingK{s.q_bar + 16};
    s.ring_v = RingV{s.ring_k.bars + RingK::kBarrierBytes};
    s.ring_n = RingN{s.ring_v.bars + RingV::kBarrierBytes};
    return s;
  }

  struct Item {
    int head, head_kv, batch, m0, n_end;
    const uint8_t* codes;  // the item's row of the mask block map, or null
  };

  static __device__ __forceinline__ int m_blocks(const FwdParams& p) { return (p.len_q + kBlockM - 1) / kBlockM; }
  // The bf16 kernel's walk (Fa2WsItems::Walk without a work counter: slots b, b + grid, ..; causal: pairs of query
  // blocks M - 1 - q and q, then p.causal_tail_bh heads' single items, longest first; the launcher picks the tail).
  using Walk = typename Fa2WsItems<kBlockM, kBlockN>::Walk;

  static __device__ __forceinline__ Item item(const FwdParams& p, int t) {
    const int m_blocks = Fa2FwdFp8::m_blocks(p);
    Item w;
    const int m_block = m_blocks - 1 - t % m_blocks;  // the longest causal rows first
    const int bh = t / m_blocks;
    w.head = bh % p.heads_q;
    w.batch = bh / p.heads_q;
    w.head_kv = w.head / (p.heads_q / p.heads_kv);
    w.m0 = m_block * kBlockM;
    w.n_end = block_kv_tiles<kBlockN>(p, w.m0, min(kBlockM, p.len_q - w.m0));
    w.codes = p.block_map == nullptr ? nullptr : block_map_row(p, w.batch, w.head, m_block);
    return w;
  }

  // The next key tile at or after j the block map does not skip (producer and consumers agree).
  static __device__ __forceinline__ int next_tile(const Item& w, int j) {
    return w.codes != nullptr ? skip_masked_tiles(w.codes, j, w.n_end) : j;
  }

  // ---- producer (one thread) ---------------------------------------------------------------
  // Ring states run on across the block's items.
  struct States {
    typename RingK::State k;
    typename RingV::State v;
    typename RingN::State n;
  };

  static __device__ __forceinline__ void produce(const FwdParams& p, const Fp8TmaMaps& maps, const Smem& s) {
    ptx::tma_prefetch_map(&maps.q);
    ptx::tma_prefetch_map(&maps.k);
    ptx::tma_prefetch_map(kVtInKernel ? &maps.v : &maps.vt);
    States st;
    const int mb = m_blocks(p);
    int it = 0;
    for (Walk wk; wk.valid(p, mb); wk.advance(p, mb), ++it) {
      const Item w = item(p, wk.t(p, mb));
      if (it > 0) ptx::mbarrier_wait_parity(s.q_empty, (it - 1) & 1);  // the last item's S all issued and done
      ptx::mbarrier_arrive_expect_tx(s.q_bar, QTile::kBytes);
      ptx::tma_load_5d(s.q, &maps.q, s.q_bar, 0, w.m0, 0, w.head, w.batch);
      produce_tiles(s, maps, w, st);
    }
  }

  static __device__ __forceinline__ void produce_tiles(const Smem& s, const Fp8TmaMaps& maps, const Item& w, States& st) {
    typename RingK::State& sk = st.k;
    typename RingV::State& sv = st.v;
    typename RingN::State& sn = st.n;
    for (int j = next_tile(w, 0); j < w.n_end; j = next_tile(w, j + 1)) {
      s.ring_k.producer_acquire(sk);
      s.ring_k.producer_expect(sk, KTile::kBytes);
      ptx::tma_load_5d(s.k + sk.stage * KTile::kBytes, &maps.k, s.ring_k.full(sk.stage), 0, j * kBlockN, 0, w.head_kv,
                       w.batch);
      sk.advance();
      if constexpr (kVtInKernel) {  // V as it lies, into the staging ring (keys past the length: TMA's zeros)
        s.ring_n.producer_acquire(sn);
        s.ring_n.producer_expect(sn, VnTile::kBytes);
        ptx::tma_load_5d(s.vn + sn.stage * VnTile::kBytes, &maps.v, s.ring_n.full(sn.stage), 0, j * kBlockN, 0,
                         w.head_kv, w.batch);
        sn.advance();
      } else {
        s.ring_v.producer_acquire(sv);
        s.ring_v.producer_expect(sv, VtTile::kBytes);
#pragma unroll
        for (int c = 0; c < VtTile::kChunks; ++c)  // 128 keys a box (a 192-key tile's second box reads 64 past it)
          ptx::tma_load_4d(s.vt + sv.stage * VtTile::kBytes + VtTile::chunk(c), &maps.vt, s.ring_v.full(sv.stage),
                           j * kBlockN + 128 * c, 0, w.head_kv, w.batch);
        sv.advance();
      }
    }
  }

  // ---- transposers (producer warps 1..3, in-kernel form) -------------------------------------
  // Each staged V tile (keys x Dv bytes, 128-byte swizzled rows) into a V^T stage (Dv rows of keys, each
  // 32 in fp8_p_key order). A warp takes 32 keys (32 G ..) x one 16-byte column unit U at a time:
  // ldmatrix.x4.trans of byte pairs gives lane l = (m, t) = (l / 4, l % 4), in register i, keys
  // 32 G + 8 i + 2 t + {0, 1} of columns 16 U + 2 m + {0, 1}; two prmt per output word gather
  // keys {k, k + 1, k + 8, k + 9} (k = 32 G + 16 h + 2 t) of one column, which are V^T positions
  // 32 G + 16 h + 4 t + {0..3} (fp8_p_key); stmatrix writes the four words (columns 16 U + 2 m + {0, 1},
  // h = 0, 1) as four 8 x 16-byte matrices. The loads hit 8 bank groups; the stores 4 (rows 2 m and
  // 2 m + 8 share one), two wavefronts a matrix.
  static __device__ __forceinline__ void transpose(const FwdParams& p, const Smem& s) {
    States st;
    const int mb = m_blocks(p);
    for (Walk wk; wk.valid(p, mb); wk.advance(p, mb)) transpose_tiles(s, item(p, wk.t(p, mb)), st);
  }

  static __device__ __forceinline__ void transpose_tiles(const Smem& s, const Item& w, States& st) {
    const int warp = threadIdx.x / 32 - 1, lane = threadIdx.x % 32;
    constexpr int kColUnits = Traits::kHeadDimV / 16;
    typename RingN::State& sn = st.n;
    typename RingV::State& sv = st.v;
    for (int j = next_tile(w, 0); j < w.n_end; j = next_tile(w, j + 1)) {
      s.ring_n.consumer_wait(sn);
      s.ring_v.producer_acquire(sv);
      const uint32_t src = s.vn + sn.stage * VnTile::kBytes, dst = s.vt + sv.stage * VtTile::kBytes;
#pragma unroll 2
      for (int u = warp; u < Traits::kTransposeUnits; u += Traits::kTransposeWarps) {
        const int G = u / kColUnits, U = u % kColUnits;
        uint32_t x[4], y[4];
        ptx::ldmatrix_m8n8_x4_trans(x, src + VnTile::unit_offset(32 * G + lane, U));
        y[0] = __byte_perm(x[0], x[1], 0x6420);  // column 16 U + 2 m, keys 32 G + 2 t + {0, 1, 8, 9}
        y[1] = __byte_perm(x[0], x[1], 0x7531);  // column 16 U + 2 m + 1
        y[2] = __byte_perm(x[2], x[3], 0x6420);  // the same columns, keys 16 further (h = 1)
        y[3] = __byte_perm(x[2], x[3], 0x7531);
        // stmatrix: lane l addresses row l % 8 of matrix l / 8 (= register l / 8 of every lane)
        const int col = 16 * U + 2 * (lane % 8) + (lane / 8) % 2;
        ptx::stmatrix_m8n8_x4(dst + VtTile::unit_offset(col, 2 * G + lane / 16), y);
      }
      ptx::fence_proxy_async_shared();  // the generic-proxy stores, before wgmma (async proxy) reads them
      __syncwarp();
      if (lane == 0) {
        ptx::mbarrier_arrive(s.ring_v.full(sv.stage));
        ptx::mbarrier_arrive(s.ring_n.empty(sn.stage));
      }
      sn.advance();
      sv.advance();
    }
  }

  // ---- consumers ---------------------------------------------------------------------------
  static __device__ __forceinline__ void issue_qk(float (&s)[kNS][4], uint32_t q_wg, uint32_t k_tile) {
    const ptx::GmmaDescSw128 qd(q_wg, 16, 1024), kd(k_tile, 16, 1024);
    ptx::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < Traits::kKStepsQK; ++ks)
      MmaS::ss(s, qd.at(QTile::k_major_kstep(ks)), kd.at(KTile::k_major_kstep(ks)), ks > 0);
    ptx::wgmma_commit_group();
  }

  static __device__ __forceinline__ void issue_pv(float (&o)[kNO][4], const uint32_t (&pf)[Traits::kKStepsPV][4],
                                                  uint32_t vt_tile) {
    const ptx::GmmaDescSw128 vd(vt_tile, 16, 1024);
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Traits::kKStepsPV; ++kk) MmaO::rs(o, pf[kk], vd.at(VtTile::k_major_kstep(kk)), 1);
    ptx::wgmma_commit_group();
  }

  // Online softmax of S_j (base 2): masks boundary tiles, updates the row max and sum, leaves P in s
  // (fp32, times 2^kPOffset) and returns alpha. O and P's registers are not touched (the previous
  // P V may still read them).
  static __device__ __forceinline__ void softmax(const FwdParams& p, const Item& w, int j, int row0, int g, int t4,
                                                 float scale_log2, float (&s)[kNS][4], float (&row_max)[2],
                                                 float (&row_sum)[2], float (&alpha)[2]) {
    const int n0 = j * kBlockN;
    const bool partial = w.codes != nullptr && w.codes[j] == kBlockPartial;  // attn_mask read per element
    const bool per_elem =
        partial || n0 + kBlockN > p.len_kv || (p.is_causal && n0 + kBlockN - 1 > w.m0 + p.causal_offset);
    auto mask = [&](float (&t)[kNS][4]) {
      const int lim[2] = {last_visible_key(p, row0 + g) - n0, last_visible_key(p, row0 + g + 8) - n0};
#pragma unroll
      for (int n = 0; n < kNS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          t[n][e] = 8 * n + 2 * t4 + (e % 2) <= lim[e / 2] ? t[n][e] * scale_log2 : -CUDART_INF_F;
      if (partial)
#pragma unroll
        for (int n = 0; n < kNS; ++n) {
          const float4 mq = mask_quad_log2_inline(p, w.batch, w.head, row0 + g, n0 + 8 * n + 2 * t4);
          t[n][0] += mq.x, t[n][1] += mq.y, t[n][2] += mq.z, t[n][3] += mq.w;
        }
    };
    if (per_elem) mask(s);
    // The standing max with e4m3's policy; where P overflowed, S recomputed from global memory (the same e4m3 Q and K).
    tile_softmax<true, Policy>(s, per_elem ? 1.f : scale_log2, row_max, row_sum, alpha, [&](float (&t)[kNS][4]) {
      recompute_s_strip<__nv_fp8_e4m3, Traits::kHeadDim>(p, w.batch, w.head, row0, g, n0, t4, t);
      if (p.scale_log2 < 0.f)  // the kernel's Q had its sign bits flipped
#pragma unroll
        for (int n = 0; n < kNS; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) t[n][e] = -t[n][e];
      if (per_elem) mask(t);
    });
  }

  // P (fp32, accumulator layout) to e4m3 A fragments: k-step kk takes n8 tiles 4 kk .. 4 kk + 3 as
  // they lie (fp8_p_key says which key each column then is).
  static __device__ __forceinline__ void pack(const float (&s)[kNS][4], uint32_t (&pf)[Traits::kKStepsPV][4]) {
#pragma unroll
    for (int kk = 0; kk < Traits::kKStepsPV; ++kk) {
      const int n = 4 * kk;
      pf[kk][0] = ptx::pack4_e4m3(s[n][0], s[n][1], s[n + 1][0], s[n + 1][1]);
      pf[kk][1] = ptx::pack4_e4m3(s[n][2], s[n][3], s[n + 1][2], s[n + 1][3]);
      pf[kk][2] = ptx::pack4_e4m3(s[n + 2][0], s[n + 2][1], s[n + 3][0], s[n + 3][1]);
      pf[kk][3] = ptx::pack4_e4m3(s[n + 2][2], s[n + 2][3], s[n + 3][2], s[n + 3][3]);
    }
  }

  static __device__ __forceinline__ void consume(const FwdParams& p, const Smem& sm, int c) {
    States st;
    const int mb = m_blocks(p);
    int it = 0;
    for (Walk wk; wk.valid(p, mb); wk.advance(p, mb), ++it) consume_item(p, sm, item(p, wk.t(p, mb)), c, it, st);
  }

  // Item `it` of this block: Q's full barrier completes once an item.
  static __device__ __forceinline__ void consume_item(const FwdParams& p, const Smem& sm, const Item& w, int c, int it,
                                                      States& st) {
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    const int row0 = w.m0 + 64 * c + 16 * warp;
    const uint32_t q_wg = sm.q + c * 64 * 128;  // this warpgroup's 64 rows in each 128-byte chunk
    const float qk = fp8_descale(p.q_descale, p.q_descale_batch_stride, p.q_descale_head_stride, w.batch, w.head) *
                     fp8_descale(p.k_descale, p.k_descale_batch_stride, p.k_descale_head_stride, w.batch, w.head_kv);
    const float scale_log2 = fabsf(p.scale_log2) * qk;
    float o[kNO][4], row_max[2] = {-CUDART_INF_F, -CUDART_INF_F}, row_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int n = 0; n < kNO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] = 0.f;

    ptx::mbarrier_wait_parity(sm.q_bar, it & 1);
    if (p.scale_log2 < 0.f) {  // a negative scale is a positive one on -Q: flip the sign bits of its bytes
      QTile::xor_rows64(q_wg, 0x80808080u, tid);
      ptx::fence_proxy_async_shared();
      ptx::named_barrier_sync(1 + kConsumers + c, 128);
    }

    typename RingK::State& sk = st.k;
    typename RingV::State& sv = st.v;
    uint32_t pf[Traits::kKStepsPV][4];
    int j = next_tile(w, 0);
    if (j < w.n_end) {
      float s[kNS][4];
      float alpha[2];
      sm.ring_k.consumer_wait(sk);
      issue_qk(s, q_wg, sm.k + sk.stage * KTile::kBytes);
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(s);
      if (lane == 0) sm.ring_k.consumer_release(sk);
      sk.advance();
      softmax(p, w, j, row0, g, t4, scale_log2, s, row_max, row_sum, alpha);
      pack(s, pf);
      for (j = next_tile(w, j + 1); j < w.n_end; j = next_tile(w, j + 1)) {
        sm.ring_k.consumer_wait(sk);
        sm.ring_v.consumer_wait(sv);
        ptx::wgmma_fence_operand(o);
        issue_qk(s, q_wg, sm.k + sk.stage * KTile::kBytes);
        issue_pv(o, pf, sm.vt + sv.stage * VtTile::kBytes);
        ptx::wgmma_wait_group<1>();
        ptx::wgmma_fence_operand(s);
        if (lane == 0) sm.ring_k.consumer_release(sk);
        sk.advance();
        softmax(p, w, j, row0, g, t4, scale_log2, s, row_max, row_sum, alpha);
        ptx::wgmma_wait_group<0>();
        ptx::wgmma_fence_operand(o);
        if (lane == 0) sm.ring_v.consumer_release(sv);
        sv.advance();
        rescale_strip(o, alpha);
        pack(s, pf);
      }
      if (lane == 0) ptx::mbarrier_arrive(sm.q_empty);  // the item's last S is done: Q may be refilled
      sm.ring_v.consumer_wait(sv);
      ptx::wgmma_fence_operand(o);
      issue_pv(o, pf, sm.vt + sv.stage * VtTile::kBytes);
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(o);
      if (lane == 0) sm.ring_v.consumer_release(sv);
      sv.advance();  // (the states run on into the block's next item)
    } else if (lane == 0) {
      ptx::mbarrier_arrive(sm.q_empty);  // no key tiles: Q was not read
    }
    const float out_scale =
        p.v_scale * fp8_descale(p.v_descale, p.v_descale_batch_stride, p.v_descale_head_stride, w.batch, w.head_kv);
    RowsOut<Out, kNO>::store(p, w.batch, w.head, row0, g, t4, o, row_max, row_sum, out_scale, Policy::kPOffset);
  }

  static __device__ __forceinline__ void run(const FwdParams& p, const Fp8TmaMaps& maps, char* smem_raw) {
    const Smem sm = layout(smem_raw);
    if (threadIdx.x == 0) {
      ptx::mbarrier_init(sm.q_bar, 1);
      ptx::mbarrier_init(sm.q_empty, kConsumerWarps);
      sm.ring_k.init(kConsumerWarps);
      // V^T stages: the TMA thread's one arrival (pre-pass form) or one per transposer warp
      sm.ring_v.init(kConsumerWarps, kVtInKernel ? Traits::kTransposeWarps : 1);
      if constexpr (kVtInKernel) sm.ring_n.init(Traits::kTransposeWarps);
    }
    __syncthreads();
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
      ptx::setmaxnreg_dec<Traits::kProducerRegs>();
      if (threadIdx.x == 0) produce(p, maps, sm);
      if constexpr (kVtInKernel)
        if (threadIdx.x >= 32 && threadIdx.x < 32 * (1 + Traits::kTransposeWarps)) transpose(p, sm);
      return;
    }
    ptx::setmaxnreg_inc<Traits::kConsumerRegs>();
    const int c = __shfl_sync(0xffffffffu, wg, 0) - 1;  // (warp-uniform to ptxas: fa2_fwd_sm90_ws.cuh run())
    consume(p, sm, c);
  }
};

using Fp8KernelFn = void (*)(FwdParams, Fp8TmaMaps);

template <typename Traits, typename Out>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    fa2_fwd_fp8_kernel(const __grid_constant__ FwdParams p, const __grid_constant__ Fp8TmaMaps maps) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) char smem[];
  Fa2FwdFp8<Traits, Out>::run(p, maps, smem);
#elif defined(__CUDA_ARCH__)
  __trap();  // no wgmma / TMA in this pass (the launcher only picks this kernel on sm_90a)
#endif
}

}  // namespace ffpa::attn
