// Split-KV decode on Hopper (sm_90a) for MLA's single cache (V = K[..., :Dv]) with a full 64-row tile
// per block: MLA's 128 query heads at one position (or 64 x 2, 16 x 4, ...) are compute-bound, and
// the 64-row wide kernel (decode_sm90_ws.cuh) re-reads Q per key tile and V apart from K, about 2.4x
// the shared-memory fills per FLOP of this one. Here Q is loaded once, a stage is one 64-key tile of K
// (all D columns, a full barrier per 64-column chunk), and P V reads V from the same stage.
//
// Block: warpgroup 0's first thread issues the TMA loads (Q once, then the tiles through a two-stage
// ring); consumer warpgroups c = 0, 1 each own output columns [c Dv/2, (c + 1) Dv/2) (O: 128
// registers a thread at Dv = 512) and take the key tiles' Q K^T and softmax in turns: tile k (counted
// from the split's first) is consumer k % 2's, and lives in stage k % 2. A consumer's turns:
//
//   own k:     wait S_k = Q K_k^T and P V_{k-1} (the other's tile)  ->  release its columns of tile k - 1
//              mask, row max  ->  [m_ready of the other: m_{k-1}]  ->  m_k, alpha_k (lazy,
//              attn/state.cuh) into shared  ->  arrive m_ready (not on the split's last tile)
//              P_k = exp2(S_k - m_k) packed in registers and into the P buffer  ->  arrive p_ready
//              O *= alpha_k  ->  issue O += P_k V_k (P from registers)
//   other k:   wait its P V_{k-1}  ->  release its columns of tile k - 1
//              [p_ready of the other: P_k, alpha_k]  ->  O *= alpha_k  ->  issue O += P_k V_k (P from
//              the shared buffer)  ->  issue S_{k+1} (its next own tile)
//
// The hand-offs are mbarriers (m_ready, p_ready: one of each per consumer, all 128 threads of the
// owner arrive, the other waits on the phase of the tile: the owner's (t >> 1)-th). Neither runs a phase
// ahead of its waiter: a consumer arrives on m_ready for tile k + 2 only after its wait on p_ready of
// k + 1, which the other arrives after its wait on m_ready of k (and on p_ready of k + 2 only after its
// wait on m_ready of k + 1, arrived after the other's wait on p_ready of k). (Named barriers with
// `bar.arrive` on one side and `bar.sync` on the other order the same way, but racecheck does not
// follow a chain of them: session 26 measured both forms.) The one P buffer holds P_k from the owner's
// write to the other's P V_k, which the other waits for before it writes P_{k+1} (the owner reads its
// own P from registers); the row max and alpha are one buffer each for the same reason.
//
// A stage's empty barriers, one per consumer: consumer h's columns of the tile (chunks h Dv/128 ..),
// and for the consumer that does not own the stage also the chunks past Dv (only S reads them; its P V
// comes after the owner's p_ready, so after S). The producer loads the owner's columns first and the
// owner's S takes its chunks in that order, so the chunks the owner released (its P V_{k-1} done,
// early in its other turn) are in flight while the other consumer's P V still reads its columns.
// Keys past a sequence's length are masked, and their V rows zeroed (each consumer its own columns,
// after S read them) before P V reads them (unwritten cache memory may hold NaN).
//
// Grid (row blocks x splits, KV heads, batch), as the other decode kernels; packed row r of a block is
// query position i0 + r / rows_per_i of head g0 + r % rows_per_i (the rank-5 Q map of
// decode_sm90_ws.cuh). Output: with one split O / l and the LSE, else the fp32 partial and its
// base-2 LSE for decode_merge_kernel, in the layouts of the other decode kernels.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <math_constants.h>

#include "ffpa/attn/softmax.cuh"
#include "ffpa/attn/state.cuh"
#include "ffpa/kernels/decode_grid.cuh"
#include "ffpa/kernels/decode_sm90_ws.cuh"  // DecodeTmaMaps, decode_key_range
#include "ffpa/params.h"
#include "ffpa/ptx/cp_async.cuh"  // smem_u32addr
#include "ffpa/ptx/grid_dep.cuh"
#include "ffpa/ptx/math.cuh"
#include "ffpa/ptx/mbarrier.cuh"
#include "ffpa/ptx/tma.cuh"
#include "ffpa/ptx/warpgroup.cuh"
#include "ffpa/ptx/wgmma.cuh"
#include "ffpa/tile/numeric.cuh"
#include "ffpa/traits/decode_traits.h"

namespace ffpa::attn {

template <typename Traits>
struct DecodeMla {
  using Element = typename Traits::Element;
  using Num = Numeric<Element>;
  using KTile = typename Traits::KTile;
  using QTile = typename Traits::QTile;
  using PTile = typename Traits::PTile;
  using MmaS = ptx::WgmmaM64<Traits::kBlockN, Element>;
  using MmaO = ptx::WgmmaM64<Traits::kHalf, Element>;
  static constexpr int kRows = Traits::kRows;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kChunks = Traits::kChunks;
  static constexpr int kHalf = Traits::kHalf;
  static constexpr int kNS = kBlockN / 8;       // n8 tiles of S per warp
  static constexpr int kNO = kHalf / 8;         // n8 tiles of a consumer's O per warp
  static constexpr int kKStepsPV = kBlockN / 16;
  static constexpr int kHalfChunks = kHalf / 64;
  // Named barriers (0 is __syncthreads): the epilogue's row sums, one consumer's V zeroing.
  static constexpr uint32_t kBarSum = 1, kBarZero = 2;
  static constexpr uint32_t kPair = 256;  // threads of the two consumer warpgroups

  struct Work : DecodeRowBlock {
    int lim_min;  // keys below it are visible to every row of the block
  };

  static __device__ __forceinline__ Work work_of_block(const DecodeParams& p, int* scratch) {
    Work w;
    static_cast<DecodeRowBlock&>(w) = decode_row_block<kRows, kBlockN>(p, scratch);
    w.lim_min = p.is_causal ? w.seqlen - p.len_q + w.i0 + 1 : w.seqlen;
    return w;
  }

  struct Smem {
    uint32_t q, k, p;  // Q, the two stages, P (shared addresses)
    float* m;          // [kRows] the row max after the latest softmax
    float* alpha;      // [kRows] that softmax's rescale factor
    float* sum;        // [2][kRows] the consumers' row sums (epilogue)
    uint32_t bars;     // full[stage][chunk], empty[stage][consumer], Q
    __device__ __forceinline__ uint32_t stage(int s) const { return k + static_cast<uint32_t>(s) * KTile::kBytes; }
    __device__ __forceinline__ uint32_t full(int s, int c) const { return bars + 8u * (s * kChunks + c); }
    __device__ __forceinline__ uint32_t empty(int s, int h) const {
      return bars + 8u * (Traits::kStages * kChunks + 2 * s + h);
    }
    __device__ __forceinline__ uint32_t q_bar() const { return bars + 8u * (Traits::kStages * (kChunks + 2)); }
    // Consumer c's hand-offs: its tile's row max and alpha written (m_ready), its P and alpha (p_ready).
    __device__ __forceinline__ uint32_t m_ready(int c) const { return q_bar() + 8u * (1 + c); }
    __device__ __forceinline__ uint32_t p_ready(int c) const { return q_bar() + 8u * (3 + c); }
  };

  static __device__ __forceinline__ Smem layout(char* smem_raw) {
    const uint32_t raw = ptx::smem_u32addr(smem_raw);
    Smem s;
    s.q = (raw + 1023u) & ~1023u;
    s.k = s.q + QTile::kBytes;
    s.p = s.k + Traits::kStages * KTile::kBytes;
    const uint32_t stats = s.p + PTile::kBytes;
    s.m = reinterpret_cast<float*>(smem_raw + (stats - raw));
    s.alpha = s.m + kRows;
    s.sum = s.alpha + kRows;
    s.bars = stats + Traits::kStatBytes;
    return s;
  }

  // ---- producer (one thread) ---------------------------------------------------------------
  static __device__ __forceinline__ void produce(const DecodeParams& p, const DecodeTmaMaps& maps, const Work& w,
                                                 const Smem& sm) {
    ptx::tma_prefetch_map(&maps.q);
    ptx::tma_prefetch_map(&maps.k);
    ptx::mbarrier_arrive_expect_tx(sm.q_bar(), QTile::kBytes);
#pragma unroll 1
    for (int c = 0; c < kChunks; ++c)
      ptx::tma_load_5d(sm.q + QTile::chunk(c), &maps.q, sm.q_bar(), 64 * c, w.g0, w.i0, w.head_kv, w.batch);
    const bool paged = p.block_table != nullptr;
    const int box = paged ? min(p.page_size, kBlockN) : kBlockN;  // pages are powers of two >= 16
    for (int k = 0; k < w.n_tiles; ++k) {
      const int s = k & 1, key0 = (w.first + k) * kBlockN;
      const uint32_t parity = ((k >> 1) & 1) ^ 1u;
      int page[kBlockN / 16];  // the tile's pages, looked up once (at most four boxes of 16 keys)
#pragma unroll
      for (int i = 0; i < kBlockN / 16; ++i) page[i] = paged && i * box < kBlockN ? decode_page_of(p, w, key0 + i * box) : w.batch;
      // The owner's columns once it released them, then the other consumer's and the chunks past Dv.
#pragma unroll 1
      for (int i = 0; i < kChunks; ++i) {
        if (i == 0) ptx::mbarrier_wait_parity(sm.empty(s, s), parity);
        if (i == kHalfChunks) ptx::mbarrier_wait_parity(sm.empty(s, s ^ 1), parity);
        const int c = chunk_order(s, i);
        ptx::mbarrier_arrive_expect_tx(sm.full(s, c), KTile::kChunkBytes);
        const uint32_t dst = sm.stage(s) + KTile::chunk(c);
        if (!paged) {
          ptx::tma_load_4d(dst, &maps.k, sm.full(s, c), 64 * c, key0, w.head_kv, w.batch);
          continue;
        }
#pragma unroll
        for (int b = 0; b < kBlockN / 16; ++b)
          if (b * box < kBlockN)
            ptx::tma_load_4d(dst + b * box * 128, &maps.k, sm.full(s, c), 64 * c, (key0 + b * box) & (p.page_size - 1),
                             w.head_kv, page[b]);
      }
    }
  }

  // The i-th chunk of a stage owned by consumer `owner` that the producer loads and the owner's S
  // takes: the owner's columns, the other consumer's, then the chunks past Dv.
  static __device__ __forceinline__ int chunk_order(int owner, int i) {
    return i < kHalfChunks ? owner * kHalfChunks + i : i < 2 * kHalfChunks ? (owner ^ 1) * kHalfChunks + i - kHalfChunks : i;
  }

  // ---- consumers ---------------------------------------------------------------------------
  // This consumer's V columns in stage s: MN-major, chunks kChunkBytes apart (k-step kk at
  // KTile::mn_major_kstep(kk)).
  static __device__ __forceinline__ ptx::GmmaDescSw128 v_desc(const Smem& sm, int s, int c) {
    return ptx::GmmaDescSw128(sm.stage(s) + KTile::chunk(c * kHalfChunks), KTile::kChunkBytes, 1024);
  }

  // Issue S = Q K^T for tile k (stage k & 1, this consumer's) chunk by chunk as the chunks land, in
  // the producer's order: a group per chunk (a wait inside one group's issue is a divergent path, where
  // ptxas serialises the wgmmas), all pending.
  static __device__ __forceinline__ void issue_s(float (&s)[kNS][4], const Smem& sm, int k) {
    const int st = k & 1;
    const uint32_t parity = (k >> 1) & 1;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = chunk_order(st, i);
      ptx::mbarrier_wait_parity(sm.full(st, c), parity);
      const ptx::GmmaDescSw128 qd(sm.q + QTile::chunk(c), 16, 1024), kd(sm.stage(st) + KTile::chunk(c), 16, 1024);
      ptx::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) MmaS::ss(s, qd.at(32 * ks), kd.at(32 * ks), i > 0 || ks > 0);
      ptx::wgmma_commit_group();
    }
  }

  // Tile k's stage: this consumer's V chunks have landed (its S ran on the other consumer).
  static __device__ __forceinline__ void wait_v(const Smem& sm, int k, int c) {
#pragma unroll
    for (int i = 0; i < kHalfChunks; ++i) ptx::mbarrier_wait_parity(sm.full(k & 1, c * kHalfChunks + i), (k >> 1) & 1);
  }

  // Keys of tile k past the sequence's length: zero their V rows in this consumer's columns.
  static __device__ __forceinline__ void zero_tail(const Smem& sm, const Work& w, int k, int c) {
    const int valid = w.seqlen - (w.first + k) * kBlockN;
    if (valid >= kBlockN) return;
    constexpr int kUnits = kHalf / 8;  // 16-byte units of one row in this consumer's columns
    const int first = max(valid, 0), tid = threadIdx.x % 128;
    for (int i = tid; i < (kBlockN - first) * kUnits; i += 128) {
      const uint32_t addr = sm.stage(k & 1) + KTile::unit_offset(first + i / kUnits, c * kUnits + i % kUnits);
      asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(addr), "r"(0u));
    }
    ptx::fence_proxy_async_shared();
    ptx::named_barrier_sync(kBarZero + c, 128);
  }

  // This consumer's columns of tile k (and the chunks past Dv where the tile is the other's) are free.
  static __device__ __forceinline__ void release(const Smem& sm, int k, int c, int lane) {
    if (lane == 0) ptx::mbarrier_arrive(sm.empty(k & 1, c));
  }

  static __device__ __forceinline__ void consume(const DecodeParams& p, const Work& w, const Smem& sm, int c) {
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    const int r0 = 16 * warp + g;  // this thread's rows r0 and r0 + 8
    int lim[2];                    // their key limits (exclusive): the length, bottom-right causal
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = w.i0 + (r0 + 8 * r) / w.rows_per_i;
      lim[r] = p.is_causal ? min(w.seqlen, w.seqlen - p.len_q + i + 1) : w.seqlen;
    }
    float o[kNO][4], s[kNS][4], row_sum[2] = {0.f, 0.f};
    uint32_t pa[kKStepsPV][4];  // P of this consumer's latest tile: the A operand of its P V
#pragma unroll
    for (int n = 0; n < kNO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] = 0.f;
    const int n = w.n_tiles;
    ptx::mbarrier_wait_parity(sm.q_bar(), 0);
    ptx::wgmma_fence_operand(o);  // O's zeros defined before S_0's issue (ptxas would serialise otherwise)
    if (c == 0 && n > 0) issue_s(s, sm, 0);
#pragma unroll 1
    for (int k = 0; k < n; ++k) {
      if ((k & 1) == c) {
        // ---- own tile k: its softmax ----
        ptx::wgmma_wait_group<0>();  // S_k and P V_{k-1}
        ptx::wgmma_fence_operand(s);
        ptx::wgmma_fence_operand(o);
        if (k > 0) release(sm, k - 1, c, lane);
        const int key0 = (w.first + k) * kBlockN;
        const bool per_elem = key0 + kBlockN > w.lim_min || p.scale_log2 < 0.f;
        float sf = p.scale_log2;
        if (per_elem) {
          sf = 1.f;
#pragma unroll
          for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int j = 0; j < kNS; ++j)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const float x = s[j][2 * r + e] * p.scale_log2;
                s[j][2 * r + e] = key0 + 8 * j + 2 * t4 + e < lim[r] ? x : -CUDART_INF_F;
              }
        }
        float tile_max[2], alpha[2], neg_m[2], m[2];
        quad_row_max(s, sf, tile_max);
        if (k > 0) ptx::mbarrier_wait_parity(sm.m_ready(c ^ 1), ((k - 1) >> 1) & 1);  // m_{k-1}
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          m[r] = k > 0 ? sm.m[r0 + 8 * r] : -CUDART_INF_F;
          alpha[r] = online_update_lazy(m[r], row_sum[r], tile_max[r], neg_m[r]);
        }
        __syncwarp();  // every lane of the quad read the old max
        if (t4 == 0)
#pragma unroll
          for (int r = 0; r < 2; ++r) sm.m[r0 + 8 * r] = m[r], sm.alpha[r0 + 8 * r] = alpha[r];
        if (k + 1 < n) ptx::mbarrier_arrive(sm.m_ready(c));
        exp2_strip_add_sums(s, sf, neg_m, row_sum);
#pragma unroll
        for (int kk = 0; kk < kKStepsPV; ++kk) {
          pa[kk][0] = Num::pack2(s[2 * kk][0], s[2 * kk][1]);
          pa[kk][1] = Num::pack2(s[2 * kk][2], s[2 * kk][3]);
          pa[kk][2] = Num::pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
          pa[kk][3] = Num::pack2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int r = 0; r < 2; ++r)
              asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sm.p + PTile::elem_offset(r0 + 8 * r, 16 * kk + 8 * h + 2 * t4)),
                           "r"(pa[kk][2 * h + r]));
        }
        ptx::fence_proxy_async_shared();
        ptx::mbarrier_arrive(sm.p_ready(c));
        rescale_strip(o, alpha);
        zero_tail(sm, w, k, c);
        const ptx::GmmaDescSw128 vd = v_desc(sm, k & 1, c);
        ptx::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kKStepsPV; ++kk) MmaO::rs(o, pa[kk], vd.at(KTile::mn_major_kstep(kk)), 1);
        ptx::wgmma_commit_group();
      } else {
        // ---- the other's tile k: P V_k from the shared P, then S_{k+1} ----
        ptx::wgmma_wait_group<0>();  // P V_{k-1} (unconditional: O is rescaled below, and ptxas serialises
        ptx::wgmma_fence_operand(o);  // every wgmma where any path defines a pending accumulator)
        if (k > 0) release(sm, k - 1, c, lane);
        ptx::mbarrier_wait_parity(sm.p_ready(c ^ 1), (k >> 1) & 1);  // P_k, alpha_k
        float alpha[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          alpha[r] = sm.alpha[r0 + 8 * r];
          row_sum[r] *= alpha[r];
        }
        rescale_strip(o, alpha);
        wait_v(sm, k, c);
        zero_tail(sm, w, k, c);
        const ptx::GmmaDescSw128 pd(sm.p, 16, 1024), vd = v_desc(sm, k & 1, c);
        ptx::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kKStepsPV; ++kk) MmaO::ss_tb(o, pd.at(PTile::k_major_kstep(kk)), vd.at(KTile::mn_major_kstep(kk)), 1);
        ptx::wgmma_commit_group();
        if (k + 1 < n) issue_s(s, sm, k + 1);
      }
    }
    ptx::wgmma_wait_group<0>();
    ptx::wgmma_fence_operand(o);
    if (n > 0) release(sm, n - 1, c, lane);
    store(p, w, sm, c, r0, g, t4, o, row_sum, n > 0);
  }

  // The consumers' row sums added up, then O / l (one split) or the fp32 partial and its base-2 LSE
  // at [split][batch][head_kv][packed row] (packed row = position x group + head).
  static __device__ __forceinline__ void store(const DecodeParams& p, const Work& w, const Smem& sm, int c, int r0, int g,
                                               int t4, const float (&o)[kNO][4], float (&row_sum)[2], bool any) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] = quad_sum(row_sum[r]);
      if (t4 == 0) sm.sum[c * kRows + r0 + 8 * r] = row_sum[r];
    }
    ptx::named_barrier_sync(kBarSum, kPair);
    const int col = c * kHalf + 2 * t4;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = r0 + 8 * r;
      const int i = w.i0 + row / w.rows_per_i, hg = w.g0 + row % w.rows_per_i;
      if (i >= p.len_q) continue;
      const float l = sm.sum[row] + sm.sum[kRows + row];
      const float m = any ? sm.m[row] : -CUDART_INF_F;
      const float inv = inv_row_sum(l);
      const bool lse_lane = c == 0 && t4 == 0;
      if (p.num_splits == 1) {
        const int head = w.head_kv * w.group + hg;
        uint32_t* dst = reinterpret_cast<uint32_t*>(static_cast<Element*>(p.o) + w.batch * p.o_batch_stride +
                                                    i * p.o_row_stride + head * p.o_head_stride + col);
#pragma unroll
        for (int j = 0; j < kNO; ++j) dst[4 * j] = Num::pack2(o[j][2 * r] * inv, o[j][2 * r + 1] * inv);
        if (p.lse != nullptr && lse_lane)
          p.lse[(static_cast<int64_t>(w.batch) * p.heads_q + head) * p.len_q + i] = row_lse(m, l);
      } else {
        const int64_t item = ((static_cast<int64_t>(w.split) * p.batch + w.batch) * p.heads_kv + w.head_kv) * w.group *
                                 p.len_q + i * w.group + hg;
        float* dst = p.o_part + item * Traits::kHeadDimV + col;
#pragma unroll
        for (int j = 0; j < kNO; ++j)
          *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(o[j][2 * r] * inv, o[j][2 * r + 1] * inv);
        if (lse_lane) p.lse_part[item] = row_lse2(m, l);
      }
    }
  }

  static __device__ __forceinline__ void run(const DecodeParams& p, const DecodeTmaMaps& maps, char* smem_raw) {
    const Smem sm = layout(smem_raw);
    // (the P buffer is the longest-first order's scratch: nothing reads it before the first P)
    const Work w = work_of_block(p, reinterpret_cast<int*>(smem_raw + (sm.p - ptx::smem_u32addr(smem_raw))));
    if (threadIdx.x == 0) {
      for (int s = 0; s < Traits::kStages; ++s) {
        for (int c = 0; c < kChunks; ++c) ptx::mbarrier_init(sm.full(s, c), 1);
        for (int h = 0; h < Traits::kConsumers; ++h) ptx::mbarrier_init(sm.empty(s, h), 4);
      }
      ptx::mbarrier_init(sm.q_bar(), 1);
      for (int c = 0; c < Traits::kConsumers; ++c) {  // every thread of the consumer arrives
        ptx::mbarrier_init(sm.m_ready(c), 128);
        ptx::mbarrier_init(sm.p_ready(c), 128);
      }
      ptx::fence_barrier_init();
    }
    __syncthreads();
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
      ptx::setmaxnreg_dec<Traits::kProducerRegs>();
      if (threadIdx.x == 0) produce(p, maps, w, sm);
      return;
    }
    ptx::setmaxnreg_inc<Traits::kConsumerRegs>();
    consume(p, w, sm, __shfl_sync(0xffffffffu, wg, 0) - 1);  // (warp-uniform to ptxas: fa2_fwd_sm90_ws.cuh run())
  }
};

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    decode_split_mla_kernel(const __grid_constant__ DecodeParams p, const __grid_constant__ DecodeTmaMaps maps) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) char smem[];
  ptx::launch_dependents();  // the merge kernel's blocks may take SMs this grid frees (launch_decode_merge)
  DecodeMla<Traits>::run(p, maps, smem);
#elif defined(__CUDA_ARCH__)
  __trap();  // no wgmma / TMA in this pass (the launcher only picks this kernel on sm_90a)
#endif
}

}  // namespace ffpa::attn
