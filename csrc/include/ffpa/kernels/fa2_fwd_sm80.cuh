// FA-2 forward kernel family (mma.sync, sm_80+) for head dims <= 256 (and 320, 384): coarse-grained tiling,
// the whole head dim per tile. Q is loaded once per block; K and V tiles stream through one
// cp.async ring; S and P never leave registers. Masks (block-map skip), causal (top-left or
// bottom-right), GQA and Lq != Lk are runtime features of the same instantiation.
#pragma once
#include <cstdint>
#include <math_constants.h>

#include "ffpa/constants.h"
#include "ffpa/traits/fa2_traits.h"
#include "ffpa/attn/mask.cuh"
#include "ffpa/tile/numeric.cuh"
#include "ffpa/params.h"
#include "ffpa/attn/softmax.cuh"
#include "ffpa/attn/state.cuh"
#include "ffpa/ptx/cp_async.cuh"
#include "ffpa/ptx/ldmatrix.cuh"
#include "ffpa/ptx/math.cuh"
#include "ffpa/ptx/wgmma.cuh"

namespace ffpa::attn {

// Block of kWarps warps, each owning kWarpRows = 16 * kMTiles query rows and all kBlockN keys:
//
//                 S = Q K_j^T (kBlockN cols)        O (Dv cols)
//   rows   0..   +---------------------------+     +---------------------+
//                |  warp 0 (m-tiles 0..)     |     |  warp 0             |
//   rows  WR..   +---------------------------+     +---------------------+
//                |  warp 1                   |     |  warp 1             |
//                |  ...                      |     |  ...                |
//
// In a warp, lane = 4 * g + t4 holds, per m16n8 tile, rows g and g + 8 at columns 2*t4, 2*t4+1:
// the accumulator layout of S for two adjacent n8 tiles is exactly the A-operand layout of the
// m16n8k16 P@V MMA, so P is re-packed to b16 in registers, never written to shared memory.
// The ring carries items K_0, V_0, K_1, V_1, ... of the tiles that are not skipped.
//
// The ring depth kStages is a compile-time parameter (one kernel per depth, picked by the
// launcher): the cp.async waits take constants and every acquire site knows whether it
// refills a K or a V slot, so the hot loop has no stage-count branches and one copy of each load.
template <typename Traits, int kStages>
struct Fa2Fwd {
  using Element = typename Traits::Element;
  using Num = Numeric<Element>;
  using QTile = typename Traits::QTile;
  using KTile = typename Traits::KTile;
  using VTile = typename Traits::VTile;
  static constexpr int kThreads = Traits::kThreads;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kMTiles = Traits::kMTiles;
  static constexpr int kWarpRows = Traits::kWarpRows;
  static constexpr int kNTilesS = Traits::kNTilesS;
  static constexpr int kNTilesO = Traits::kNTilesO;
  static constexpr int kKStepsQK = Traits::kKStepsQK;
  static constexpr int kKStepsPV = Traits::kKStepsPV;
  static constexpr int kSumParts = 4;  // independent partial row sums per tile (softmax.cuh)

  // Loop-invariant state kept in registers; everything else is read from the (constant-bank)
  // params when needed, so the hot loop's register budget goes to fragments.
  // The K/V head bases are not kept (two 64-bit pointers): each tile load rebuilds them from the
  // params, blockIdx.z and head_kv with two wide multiply-adds.
  struct Block {
    int head_kv;
    int n_end;             // key tiles [0, n_end) can hold visible keys (causal cut)
    const uint8_t* codes;  // this query block's row of the mask block map, or null
    uint32_t ring;         // shared address of ring stage 0
  };

  // The loader runs kStages - 1 items ahead of the consumer: its own walk over the tiles. Items
  // alternate K_j, V_j, so whether the next one is a K or a V tile is fixed at each call site.
  struct Producer {
    int tile;  // tile of the next item
    int slot;  // ring slot it goes to
  };

  static __device__ __forceinline__ int next_tile(const Block& b, int j) {
    if (b.codes != nullptr)
      while (j < b.n_end && b.codes[j] == kBlockSkip) ++j;
    return j;
  }

  static __device__ __forceinline__ uint32_t slot_addr(const Block& b, int slot) {
    return b.ring + static_cast<uint32_t>(slot * Traits::kStageBytes);
  }
  static __device__ __forceinline__ int next_slot(const Block& b, int slot) {
    return slot + 1 == kStages ? 0 : slot + 1;
  }

  // Rows [0, kRows) x all kCols columns of a row-major matrix into a shared tile; with kCheck,
  // rows at or past `valid_rows` are zero-filled (finite values keep the masked lanes of P@V at
  // 0). Where it can, each thread copies one fixed 16-byte unit of rows r0, r0 + R, r0 + 2R, ...
  // (R = threads / units per row): one pointer and one shared address, stepped by constants.
  template <typename TileT, int kRows, int kCols, bool kCheck>
  static __device__ __forceinline__ void load_rows(uint32_t dst, const Element* src, int64_t row_stride,
                                                   int valid_rows, int tid) {
    constexpr int kUnits = kCols / 8;
    constexpr int kTotal = kRows * kUnits;
    constexpr int kR = kThreads / kUnits;  // rows per pass when each thread keeps one unit
    if constexpr (kR >= 1 && (TileT::kAnyRowStep || kR % 8 == 0)) {
      constexpr int kPasses = (kRows + kR - 1) / kR;
      const int r0 = tid / kUnits;
      const int u = tid % kUnits;
      if (kThreads % kUnits == 0 || r0 < kR) {  // the last kThreads % kUnits threads idle
        const Element* g = src + r0 * row_stride + u * 8;
        const uint32_t s0 = dst + TileT::unit_offset(r0, u);
        const int64_t step = kR * row_stride;
#pragma unroll
        for (int it = 0; it < kPasses; ++it, g += step) {
          const int r = r0 + it * kR;
          if (kRows % kR == 0 || r < kRows) {
            const bool valid = !kCheck || r < valid_rows;
            ptx::cp_async_cg_16(TileT::advance(s0, it * kR, 0), valid ? g : src, valid);
          }
        }
      }
    } else {
      constexpr int kIters = (kTotal + kThreads - 1) / kThreads;
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        const int i = tid + it * kThreads;
        if (kTotal % kThreads == 0 || i < kTotal) {
          const int r = i / kUnits;
          const int u = i % kUnits;
          const bool valid = !kCheck || r < valid_rows;
          ptx::cp_async_cg_16(dst + TileT::unit_offset(r, u), src + (valid ? r : 0) * row_stride + u * 8, valid);
        }
      }
    }
  }

  template <typename TileT, int kCols>
  static __device__ __forceinline__ void load_kv_tile(uint32_t dst, const Element* src, int64_t row_stride,
                                                      int valid_rows, int tid) {
    if (valid_rows >= kBlockN)
      load_rows<TileT, kBlockN, kCols, false>(dst, src, row_stride, valid_rows, tid);
    else
      load_rows<TileT, kBlockN, kCols, true>(dst, src, row_stride, valid_rows, tid);
  }

  template <bool kIsV>
  static __device__ __forceinline__ void issue(const FwdParams& p, const Block& b, Producer& pr, int tid) {
    if (pr.tile >= b.n_end) return;
    const uint32_t dst = slot_addr(b, pr.slot);
    const int n0 = pr.tile * kBlockN;
    if constexpr (!kIsV) {
      const Element* k = static_cast<const Element*>(p.k) + blockIdx.z * p.k_batch_stride + b.head_kv * p.k_head_stride;
      load_kv_tile<KTile, Traits::kHeadDim>(dst, k + n0 * p.k_row_stride, p.k_row_stride, p.len_kv - n0, tid);
    } else {
      const Element* v = static_cast<const Element*>(p.v) + blockIdx.z * p.v_batch_stride + b.head_kv * p.v_head_stride;
      load_kv_tile<VTile, Traits::kHeadDimV>(dst, v + n0 * p.v_row_stride, p.v_row_stride, p.len_kv - n0, tid);
      pr.tile = next_tile(b, pr.tile + 1);
    }
    pr.slot = next_slot(b, pr.slot);
  }

  // Scale the scores of a tile that needs masking (base 2), then apply the sequence end, the
  // causal limit and, in kBlockPartial tiles, attn_mask. Off the hot path: only boundary tiles.
  static __device__ __forceinline__ void mask_tile(float (&s_acc)[kMTiles][kNTilesS][4], const FwdParams& p,
                                                   uint8_t code, float scale_log2, int row0, int n0, int g, int t4) {
    // Per row, the last visible column relative to this thread's first one (n0 + 2 * t4): element
    // (n, c) of the row is visible iff n * 8 + c <= lim, a compare against an immediate.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + mt * 16 + g + r * 8;
        int lim = p.len_kv - 1;
        if (p.is_causal) lim = min(lim, row + p.causal_offset);
        lim -= n0 + 2 * t4;
#pragma unroll
        for (int n = 0; n < kNTilesS; ++n)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const float x = s_acc[mt][n][2 * r + c] * scale_log2;
            s_acc[mt][n][2 * r + c] = n * 8 + c > lim ? -CUDART_INF_F : x;
          }
      }
    if (code != kBlockPartial) return;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int n = 0; n < kNTilesS; ++n) {
        const float4 mq = mask_quad_log2(p, blockIdx.z, blockIdx.y, row0 + mt * 16 + g, n0 + n * 8 + 2 * t4);
        s_acc[mt][n][0] += mq.x, s_acc[mt][n][1] += mq.y, s_acc[mt][n][2] += mq.z, s_acc[mt][n][3] += mq.w;
      }
  }

  // Make the consumer's next item (a V tile iff kForV) resident and keep the ring full. Every
  // call commits exactly one group (possibly empty), so "the item landed" is "at most kStages - 2
  // groups pending". The item it refills is kStages - 1 ahead: a V tile iff that parity flips.
  template <bool kForV>
  static __device__ __forceinline__ void acquire(const FwdParams& p, const Block& b, Producer& pr, int tid) {
    constexpr bool kIssueV = kForV != ((kStages - 1) % 2 == 1);
    if constexpr (kStages == 1) {
      __syncthreads();  // everyone is done reading the single buffer
      issue<kIssueV>(p, b, pr, tid);
      ptx::cp_async_commit_group();
      ptx::cp_async_wait_group<0>();
      if constexpr (Traits::kWgmma) ptx::fence_proxy_async_shared();
      __syncthreads();
    } else {
      ptx::cp_async_wait_group<kStages - 2>();
      // wgmma reads shared memory through the async proxy: each thread fences its own landed
      // copies before the barrier that publishes them.
      if constexpr (Traits::kWgmma) ptx::fence_proxy_async_shared();
      __syncthreads();  // the item is visible to all; everyone is done with the slot refilled next
      issue<kIssueV>(p, b, pr, tid);
      ptx::cp_async_commit_group();
    }
  }

  // Online softmax of one KV tile (base 2): scale and mask boundary tiles, update the running row
  // max and sum, rescale O where the max moved, and pack P (b16) as the A operand of P@V. The
  // accumulator layout of S n8 tiles 2kk and 2kk+1 is the A layout of P@V k-step kk (mma.sync
  // m16n8k16 and wgmma alike), so P never leaves registers.
  static __device__ __forceinline__ void softmax_tile(const FwdParams& p, const Block& b, int j, int m0, int warp_row0,
                                                      int g, int t4, float scale_log2,
                                                      float (&s_acc)[kMTiles][kNTilesS][4],
                                                      float (&row_max)[kMTiles][2], float (&row_sum)[kMTiles][2],
                                                      float (&o_acc)[kMTiles][kNTilesO][4],
                                                      uint32_t (&p_frag)[kMTiles][kKStepsPV][4]) {
    const int n0 = j * kBlockN;
    const uint8_t code = b.codes != nullptr ? b.codes[j] : static_cast<uint8_t>(kBlockFull);
    const bool per_elem = code == kBlockPartial || n0 + kBlockN > p.len_kv ||
                          (p.is_causal && n0 + kBlockN - 1 > m0 + p.causal_offset);
    // Tiles without masking keep raw scores: the max of raw scores times the (positive) scale is
    // the max of scaled ones, and P = exp2(s * scale - m) is one FFMA. Masked tiles are scaled
    // (and masked) in place first, then use a factor of 1.
    if (per_elem) mask_tile(s_acc, p, code, scale_log2, m0 + warp_row0, n0, g, t4);
    const float sf = per_elem ? 1.f : scale_log2;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      float tile_max[2] = {strip_row_max(s_acc[mt], 0), strip_row_max(s_acc[mt], 1)};
      float alpha[2], neg_m[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
        // The -inf guards (a row whose keys so far are all masked) live in attn/state.cuh.
        alpha[r] = attn::online_update(row_max[mt][r], row_sum[mt][r], tile_max[r] * sf, neg_m[r]);
      }
      // Once the row maxima settle, alpha is 1 for the whole warp: skip the O rescale.
      if (!__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) {
#pragma unroll
        for (int n = 0; n < kNTilesO; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) o_acc[mt][n][e] *= alpha[e / 2];
      }
      // The accumulator layout of S n8 tiles 2kk and 2kk+1 is the A layout of k-step kk.
      PartialSum<kSumParts> tile_sum[2];
#pragma unroll
      for (int n = 0; n < kNTilesS; ++n) {
        float pe[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          pe[e] = ptx::ex2_approx_ftz(fmaf(s_acc[mt][n][e], sf, neg_m[e / 2]));
          tile_sum[e / 2].add(2 * n + e % 2, pe[e]);
        }
        p_frag[mt][n / 2][(n % 2) * 2 + 0] = Num::pack2(pe[0], pe[1]);
        p_frag[mt][n / 2][(n % 2) * 2 + 1] = Num::pack2(pe[2], pe[3]);
      }
      row_sum[mt][0] += tile_sum[0].total();
      row_sum[mt][1] += tile_sum[1].total();
    }
  }

  // Epilogue: row sums across the quad, O / l through shared memory (the Q tile and the ring are
  // free once every warp is done) so the global stores are whole 16-byte units, and the LSE
  // (natural log) when asked for.
  static __device__ __forceinline__ void store_o(const FwdParams& p, uint32_t q_smem, int m0, int rows_q, int warp_row0,
                                                 int g, int t4, int tid, const float (&o_acc)[kMTiles][kNTilesO][4],
                                                 const float (&row_max)[kMTiles][2], const float (&row_sum)[kMTiles][2]) {
    const int head = blockIdx.y;
    const int batch = blockIdx.z;
    using OTile = typename Traits::OTile;
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float l = row_sum[mt][r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int row_in_block = warp_row0 + mt * 16 + g + r * 8;
        const float inv = attn::inv_row_sum(l);
#pragma unroll
        for (int n = 0; n < kNTilesO; ++n) {
          const uint32_t packed = Num::pack2(o_acc[mt][n][2 * r] * inv, o_acc[mt][n][2 * r + 1] * inv);
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(q_smem + OTile::elem_offset(row_in_block, n * 8 + 2 * t4)),
                       "r"(packed));
        }
        const int row = m0 + row_in_block;
        if (p.lse != nullptr && t4 == 0 && row < p.len_q) {
          p.lse[(static_cast<int64_t>(batch) * p.heads_q + head) * p.len_q + row] = attn::row_lse(row_max[mt][r], l);
        }
      }
    __syncthreads();
    Element* o_base = static_cast<Element*>(p.o) + batch * p.o_batch_stride + head * p.o_head_stride +
                      static_cast<int64_t>(m0) * p.o_row_stride;
    constexpr int kUnitsO = Traits::kHeadDimV / 8;
    for (int i = tid; i < rows_q * kUnitsO; i += kThreads) {
      const int r = i / kUnitsO, u = i % kUnitsO;
      uint4 val;
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(val.x), "=r"(val.y), "=r"(val.z), "=r"(val.w)
                   : "r"(q_smem + OTile::unit_offset(r, u)));
      *reinterpret_cast<uint4*>(o_base + r * p.o_row_stride + u * 8) = val;
    }
  }

  struct BlockStart {
    int m0;          // first query row of the block
    int rows_q;      // valid query rows in the block
    int first_tile;  // first key tile the consumer reads
    float scale_log2;
  };

  // Block setup shared by the mma.sync and wgmma kernels: the block's rows and key range, the
  // Q copy (its own group, committed first: the first acquire waits for it too), the ring's
  // prologue (kStages - 1 items: K_0, V_0, K_1, ...), and for a negative scale the sign flip of
  // Q (a negative scale is a positive one on -Q, so the softmax may take the row max of the raw
  // scores). `smem` is the base of Q, followed by the ring.
  static __device__ __forceinline__ BlockStart begin_block(const FwdParams& p, char* smem, int tid, Block& b,
                                                           Producer& pr) {
    BlockStart st;
    // Heaviest (causal) blocks first: the last query rows see the most keys.
    const int m_block = gridDim.x - 1 - blockIdx.x;
    const int head = blockIdx.y;
    const int batch = blockIdx.z;
    st.m0 = m_block * kBlockM;
    st.rows_q = min(kBlockM, p.len_q - st.m0);
    b.head_kv = head / (p.heads_q / p.heads_kv);
    // Causal: the block's last valid row sees keys up to (row + causal_offset).
    const int kv_end = p.is_causal ? max(0, min(p.len_kv, st.m0 + st.rows_q + p.causal_offset)) : p.len_kv;
    b.n_end = (kv_end + kBlockN - 1) / kBlockN;
    b.codes = p.block_map == nullptr
                  ? nullptr
                  : p.block_map + batch * p.block_map_batch_stride + head * p.block_map_head_stride +
                        static_cast<int64_t>(m_block) * p.block_map_n_blocks;
    const uint32_t q_smem = ptx::smem_u32addr(smem);
    b.ring = q_smem + Traits::kQBytes;

    const Element* q = static_cast<const Element*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride +
                       static_cast<int64_t>(st.m0) * p.q_row_stride;
    load_rows<QTile, kBlockM, Traits::kHeadDim, true>(q_smem, q, p.q_row_stride, st.rows_q, tid);
    ptx::cp_async_commit_group();
    pr.tile = next_tile(b, 0);
    pr.slot = 0;
    st.first_tile = pr.tile;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s % 2 == 0) issue<false>(p, b, pr, tid);
      else issue<true>(p, b, pr, tid);
      ptx::cp_async_commit_group();
    }

    st.scale_log2 = fabsf(p.scale_log2);
    if (p.scale_log2 < 0.f) {
      ptx::cp_async_wait_group<kStages - 1>();  // the Q group (older than the prologue's)
      __syncthreads();
      for (int i = tid; i < Traits::kQBytes / 4; i += kThreads) {
        uint32_t* w = reinterpret_cast<uint32_t*>(smem) + i;
        *w ^= 0x80008000u;
      }
    }
    return st;
  }

  static __device__ __forceinline__ void run(const FwdParams& p, char* smem) {
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int g = lane / 4;   // fragment row (and g + 8) within an m-tile
    const int t4 = lane % 4;  // fragment column pair

    Block b;
    Producer pr;
    const BlockStart st0 = begin_block(p, smem, tid, b, pr);
    const int m0 = st0.m0, rows_q = st0.rows_q, first_tile = st0.first_tile;
    const float scale_log2 = st0.scale_log2;
    const uint32_t q_smem = ptx::smem_u32addr(smem);

    const int warp_row0 = warp * kWarpRows;  // first row of this warp within the block
    // Per-lane ldmatrix addresses at (m-tile 0 / n-pair 0, k-step 0); the unrolled loops reach
    // the others through Tile::advance (an XOR and an immediate).
    const uint32_t q_lane = q_smem + QTile::unit_offset(warp_row0 + lane % 16, lane / 16);
    const uint32_t k_lane = KTile::unit_offset((lane / 16) * 8 + lane % 8, (lane / 8) % 2);
    const uint32_t v_lane = VTile::unit_offset(((lane / 8) % 2) * 8 + lane % 8, lane / 16);
    uint32_t q_frag[Traits::kQInRegs ? kMTiles : 1][Traits::kQInRegs ? kKStepsQK : 1][4];
    if constexpr (Traits::kQInRegs) {
      ptx::cp_async_wait_group<kStages - 1>();  // the Q group (older than the prologue's)
      __syncthreads();
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int ks = 0; ks < kKStepsQK; ++ks)
          ptx::ldmatrix_m8n8_x4(q_frag[mt][ks], QTile::advance(q_lane, mt * 16, ks * 2));
    }

    // Softmax state of the rows this thread owns: [m-tile][0: row g, 1: row g + 8], base 2.
    float row_max[kMTiles][2], row_sum[kMTiles][2];
    float o_acc[kMTiles][kNTilesO][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) row_max[mt][r] = -CUDART_INF_F, row_sum[mt][r] = 0.f;
#pragma unroll
      for (int n = 0; n < kNTilesO; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) o_acc[mt][n][e] = 0.f;
    }

    int slot = 0;  // the consumer's ring slot
    for (int j = first_tile; j < b.n_end; j = next_tile(b, j + 1)) {
      // ---- S = Q @ K_j^T over the whole head dim ----
      acquire<false>(p, b, pr, tid);
      const uint32_t k_smem = slot_addr(b, slot) + k_lane;
      slot = next_slot(b, slot);
      float s_acc[kMTiles][kNTilesS][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int n = 0; n < kNTilesS; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s_acc[mt][n][e] = 0.f;
      {
        // Steps (ks, np) in order; the fragments of step st + 1 are loaded before the MMAs of
        // step st, so ldmatrix latency overlaps the tensor cores instead of stalling them.
        constexpr int kNP = kNTilesS / 2;
        constexpr int kSteps = kKStepsQK * kNP;
        constexpr int kBufB = Traits::kPrefetch ? 2 : 1;                        // K fragment buffers
        constexpr int kBufA = Traits::kPrefetch && Traits::kPrefetchQ ? 2 : 1;  // Q fragment buffers
        uint32_t bk[kBufB][4];
        uint32_t a_ld[Traits::kQInRegs ? 1 : kBufA][kMTiles][4];
        if constexpr (!Traits::kQInRegs) {
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) ptx::ldmatrix_m8n8_x4(a_ld[0][mt], QTile::advance(q_lane, mt * 16, 0));
        }
        // Matrices (n0-7,k0-7) (n0-7,k8-15) (n8-15,k0-7) (n8-15,k8-15) -> b0,b1 of two n8 tiles.
        ptx::ldmatrix_m8n8_x4(bk[0], k_smem);
#pragma unroll
        for (int st = 0; st < kSteps; ++st) {
          const int ks = st / kNP, np = st % kNP;
          if constexpr (!Traits::kQInRegs) {
            // Q fragments of k-step ks: one step ahead with two buffers, else just in time.
            const int lda = kBufA == 2 ? st + 1 : st;
            if (lda < kSteps && lda % kNP == 0 && (kBufA == 2 || st > 0)) {
#pragma unroll
              for (int mt = 0; mt < kMTiles; ++mt)
                ptx::ldmatrix_m8n8_x4(a_ld[(lda / kNP) % kBufA][mt], QTile::advance(q_lane, mt * 16, (lda / kNP) * 2));
            }
          }
          // Without prefetch, step st loads its own K fragments (into buffer 0) right here.
          const int ld = Traits::kPrefetch ? st + 1 : st;
          if (ld < kSteps && (Traits::kPrefetch || st > 0))
            ptx::ldmatrix_m8n8_x4(bk[ld % kBufB], KTile::advance(k_smem, (ld % kNP) * 16, (ld / kNP) * 2));
          const uint32_t b0[2] = {bk[st % kBufB][0], bk[st % kBufB][1]};
          const uint32_t b1[2] = {bk[st % kBufB][2], bk[st % kBufB][3]};
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            if constexpr (Traits::kQInRegs) {
              Num::mma_f32acc(s_acc[mt][2 * np], q_frag[mt][ks], b0);
              Num::mma_f32acc(s_acc[mt][2 * np + 1], q_frag[mt][ks], b1);
            } else {
              Num::mma_f32acc(s_acc[mt][2 * np], a_ld[ks % kBufA][mt], b0);
              Num::mma_f32acc(s_acc[mt][2 * np + 1], a_ld[ks % kBufA][mt], b1);
            }
          }
        }
      }

      // With kEarlyV, V_j's slot is claimed before the softmax, so the K_j+1 load issued there
      // overlaps the softmax as well as P@V (the softmax touches no shared memory); it costs
      // registers (the copy's addresses live next to S).
      uint32_t v_smem = 0;
      if constexpr (Traits::kEarlyV) {
        acquire<true>(p, b, pr, tid);
        v_smem = slot_addr(b, slot) + v_lane;
        slot = next_slot(b, slot);
      }

      // ---- scale, mask, online softmax (base 2) ----
      uint32_t p_frag[kMTiles][kKStepsPV][4];  // P as the A operand of P@V, b16
      softmax_tile(p, b, j, m0, warp_row0, g, t4, scale_log2, s_acc, row_max, row_sum, o_acc, p_frag);

      // ---- O += P @ V_j: P from registers, V fragments double-buffered like K's ----
      if constexpr (!Traits::kEarlyV) {
        acquire<true>(p, b, pr, tid);
        v_smem = slot_addr(b, slot) + v_lane;
        slot = next_slot(b, slot);
      }
      {
        constexpr int kNP = kNTilesO / 2;
        constexpr int kSteps = kKStepsPV * kNP;
        constexpr int kBuf = Traits::kPrefetch ? 2 : 1;
        uint32_t bv[kBuf][4];
        // Transposed matrices: (k0-7,n0-7) (k8-15,n0-7) (k0-7,n8-15) (k8-15,n8-15).
        ptx::ldmatrix_m8n8_x4_trans(bv[0], v_smem);
#pragma unroll
        for (int st = 0; st < kSteps; ++st) {
          const int kk = st / kNP, np = st % kNP;
          const int ld = Traits::kPrefetch ? st + 1 : st;
          if (ld < kSteps && (Traits::kPrefetch || st > 0))
            ptx::ldmatrix_m8n8_x4_trans(bv[ld % kBuf], VTile::advance(v_smem, (ld / kNP) * 16, (ld % kNP) * 2));
          const uint32_t b0[2] = {bv[st % kBuf][0], bv[st % kBuf][1]};
          const uint32_t b1[2] = {bv[st % kBuf][2], bv[st % kBuf][3]};
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            Num::mma_f32acc(o_acc[mt][2 * np], p_frag[mt][kk], b0);
            Num::mma_f32acc(o_acc[mt][2 * np + 1], p_frag[mt][kk], b1);
          }
        }
      }
    }
    ptx::cp_async_wait_group<0>();

    store_o(p, q_smem, m0, rows_q, warp_row0, g, t4, tid, o_acc, row_max, row_sum);
  }
};

// One kernel per ring depth (1..4), each with its own register allocation: a single kernel that
// switched on the depth took the register count (and spills) of its worst branch.
template <typename Traits, int kStages>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocks) fa2_fwd_kernel(const __grid_constant__ FwdParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) char smem[];
  Fa2Fwd<Traits, kStages>::run(p, smem);
#endif
}

using Fa2KernelFn = void (*)(FwdParams);

// The kernel for a ring depth of `stages` (1..4; anything else: null).
template <typename Traits>
Fa2KernelFn fa2_fwd_kernel_for(int stages) {
  switch (stages) {
    case 1: return fa2_fwd_kernel<Traits, 1>;
    case 2: return fa2_fwd_kernel<Traits, 2>;
    case 3: return fa2_fwd_kernel<Traits, 3>;
    case 4: return fa2_fwd_kernel<Traits, 4>;
    default: return nullptr;
  }
}

}  // namespace ffpa::attn
