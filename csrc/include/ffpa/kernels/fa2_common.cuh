// The pieces of the FA-2 forward family that the mma.sync kernel (fa2_fwd_sm80.cuh) and the
// wgmma kernel (fa2_fwd_sm90.cuh) share: the block's coordinates and key range, the cp.async
// ring of K and V tiles (its producer and the consumer's acquire), the scale / mask / online
// softmax of one S tile, and the epilogue. Both kernels derive from Fa2FwdCommon and add their
// own run(): the two products and the fragment loads. Nothing here is specific to either MMA.
//
// In a warp, lane = 4 * g + t4 holds, per m16n8 accumulator tile, rows g and g + 8 at columns
// 2*t4, 2*t4+1 (mma.sync's layout, and wgmma's per warp of a warpgroup): the accumulator layout
// of S for two adjacent n8 tiles is exactly the A-operand layout of the m16n8k16 P@V step, so P
// is re-packed to b16 in registers, never written to shared memory.
// The ring carries items K_0, V_0, K_1, V_1, ... of the tiles that are not skipped.
//
// The ring depth kStages is a compile-time parameter (one kernel per depth, picked by the
// launcher): the cp.async waits take constants and every acquire site knows whether it
// refills a K or a V slot, so the hot loop has no stage-count branches and one copy of each load.
#pragma once
#include <cstdint>
#include <math_constants.h>

#include "ffpa/constants.h"
#include "ffpa/traits/fa2_traits.h"
#include "ffpa/attn/mask.cuh"
#include "ffpa/attn/tile_mask.cuh"
#include "ffpa/tile/numeric.cuh"
#include "ffpa/params.h"
#include "ffpa/attn/softmax.cuh"
#include "ffpa/attn/state.cuh"
#include "ffpa/ptx/cp_async.cuh"
#include "ffpa/ptx/math.cuh"

namespace ffpa::attn {

// A kernel of the family, as the launcher holds it (one per tile table row and ring depth).
using Fa2KernelFn = void (*)(FwdParams);

// The default ring hook (Fa2FwdCommon::acquire): ldmatrix reads shared memory through the
// generic proxy, as cp.async writes it, so the barrier alone publishes a landed item.
struct Fa2NoLandedFence {
  static __device__ __forceinline__ void apply() {}
};

// Static members only (the kernels' state lives in their run()'s registers). LandedFence::apply()
// runs in every thread between its copies of an item landing and the barrier that publishes them.
template <typename Traits, int kStages, typename LandedFence = Fa2NoLandedFence>
struct Fa2FwdCommon {
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
    return b.codes != nullptr ? skip_masked_tiles(b.codes, j, b.n_end) : j;
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
  // (batch, head) of attn_mask: the block's blockIdx.z / .y, or a persistent kernel's work item.
  static __device__ __forceinline__ void mask_tile(float (&s_acc)[kMTiles][kNTilesS][4], const FwdParams& p,
                                                   uint8_t code, float scale_log2, int row0, int n0, int g, int t4,
                                                   int batch, int head) {
    // Per row, the last visible column relative to this thread's first one (n0 + 2 * t4): element
    // (n, c) of the row is visible iff n * 8 + c <= lim, a compare against an immediate.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + mt * 16 + g + r * 8;
        const int lim = last_visible_key(p, row) - (n0 + 2 * t4);
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
        const float4 mq = mask_quad_log2(p, batch, head, row0 + mt * 16 + g, n0 + n * 8 + 2 * t4);
        s_acc[mt][n][0] += mq.x, s_acc[mt][n][1] += mq.y, s_acc[mt][n][2] += mq.z, s_acc[mt][n][3] += mq.w;
      }
  }

  // Make the consumer's next item (a V tile iff kForV) resident and keep the ring full. Every
  // call commits exactly one group (possibly empty), so "the item landed" is "at most kStages - 2
  // groups pending". The item it refills is kStages - 1 ahead: a V tile iff that parity flips.
  // Between its own copies landing and the barrier that publishes them, each thread runs
  // LandedFence::apply() (the kernel's hook: nothing for ldmatrix readers).
  template <bool kForV>
  static __device__ __forceinline__ void acquire(const FwdParams& p, const Block& b, Producer& pr, int tid) {
    constexpr bool kIssueV = kForV != ((kStages - 1) % 2 == 1);
    if constexpr (kStages == 1) {
      __syncthreads();  // everyone is done reading the single buffer
      issue<kIssueV>(p, b, pr, tid);
      ptx::cp_async_commit_group();
      ptx::cp_async_wait_group<0>();
      LandedFence::apply();
      __syncthreads();
    } else {
      ptx::cp_async_wait_group<kStages - 2>();
      LandedFence::apply();
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
    if (per_elem) mask_tile(s_acc, p, code, scale_log2, m0 + warp_row0, n0, g, t4, blockIdx.z, blockIdx.y);
    const float sf = per_elem ? 1.f : scale_log2;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      float tile_max[2] = {strip_row_max(s_acc[mt], 0), strip_row_max(s_acc[mt], 1)};
      float alpha[2], neg_m[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tile_max[r] = quad_max(tile_max[r]);
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
        l = quad_sum(l);
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
    b.n_end = block_kv_tiles<kBlockN>(p, st.m0, st.rows_q);  // the causal cut (attn/tile_mask.cuh)
    b.codes = p.block_map == nullptr ? nullptr : block_map_row(p, batch, head, m_block);
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
};

}  // namespace ffpa::attn
