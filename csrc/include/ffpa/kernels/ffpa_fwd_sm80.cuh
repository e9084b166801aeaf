// FFPA forward kernel family (mma.sync, sm_80+): attention for large head dims with shared
// memory O(1) in D. Q, K and V stream through one cp.async ring in kChunkD-wide slices of the
// head dim, so Q@K^T is a GEMM whose k dimension never has to fit in shared memory.
// The three levels and the accumulation modes are template parameters of this one kernel; what
// only level 3 runs (its O workspace and persistent grid) is in ffpa_fwd_l3.cuh.
#pragma once
#include <cstdint>
#include <math_constants.h>

#include "ffpa/constants.h"
#include "ffpa/tile/accum.cuh"
#include "ffpa/traits/ffpa_traits.h"
#include "ffpa/attn/mask.cuh"
#include "ffpa/attn/tile_mask.cuh"
#include "ffpa/attn/state.cuh"
#include "ffpa/kernels/ffpa_fwd_l3.cuh"
#include "ffpa/tile/numeric.cuh"
#include "ffpa/tile/quad.cuh"
#include "ffpa/params.h"
#include "ffpa/ptx/cp_async.cuh"
#include "ffpa/ptx/ldmatrix.cuh"
#include "ffpa/ptx/math.cuh"
#include "ffpa/tile/smem_tile.cuh"

namespace ffpa::attn {

// The pipeline walks one flat sequence of slice loads per query block: for each KV tile j that
// is not skipped (causal cut, block map), items c = 0 .. kChunksQK + nv - 1:
//   c <  kChunksQK : Q[:, c-th slice] and K_j[:, c-th slice]   (a "QK item")
//   c >= kChunksQK : V_j[:, (c - kChunksQK)-th slice of the block's Dv columns]   (a "V item")
// so prefetch runs across the Q@K^T -> P@V -> next tile boundaries without draining.
//
// Where the O accumulator lives, per level:
//   L1  registers, all Dv columns: o_acc[kChunksV][kNTilesO] fragments per thread.
//   L2  registers, one kOutD-wide group of Dv columns per block; the grid has kGroups blocks
//       per query block, and each recomputes S = Q K^T (the same S, bit for bit, so all groups
//       see the same softmax statistics). Registers do not grow with D; Q@K^T work does
//       (kGroups times), which is the price of O(1) registers.
//   L3  a global fp32 workspace slot per resident block (persistent grid): each V item also
//       brings this thread's previous O elements of its slice, which are rescaled, get
//       P@V_slice added and go back; the last KV tile writes the output (FfpaL3).
//
// Block of kWarpsM x kWarpsN warps (here drawn for 4 x 2, BlockM = 64, BlockN = 64):
//
//            S = Q K^T columns (BlockN)          O columns of each kChunkD slice
//           +-----------+-----------+            +-----------+-----------+
//   rows  0 | warp(0,0) | warp(0,1) |            | warp(0,0) | warp(0,1) |
//   rows 16 | warp(1,0) | warp(1,1) |            | warp(1,0) | warp(1,1) |
//   rows 32 | warp(2,0) | warp(2,1) |            |    ...    |    ...    |
//   rows 48 | warp(3,0) | warp(3,1) |            |           |           |
//           +-----------+-----------+            +-----------+-----------+
// The row max is combined across the kWarpsN warps of a row through shared memory; P goes
// through shared memory (b16) because each P@V warp needs all BlockN columns of its rows.
// kStages > 0 fixes the ring depth at compile time (constant cp.async waits and ring arithmetic,
// no depth branches in the pipeline); kStages = 0 reads it from the launch (any depth, 1..4).
template <typename Traits, int kStages = 0>
struct FfpaFwd {
  using Element = typename Traits::Element;
  using Num = Numeric<Element>;
  static constexpr Level kLevel = Traits::kLevel;
  static constexpr int kThreads = Traits::kThreads;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kChunkD = Traits::kChunkD;
  static constexpr int kWarpsN = Traits::kWarpsN;
  static constexpr int kChunksQK = Traits::kChunksQK;
  static constexpr int kChunksV = Traits::kChunksV;
  static constexpr int kNTilesS = Traits::kNTilesS;
  static constexpr int kNTilesO = Traits::kNTilesO;
  using SFrag = AccFrag<Element, Traits::kQKHalf>;
  using OFrag = AccFrag<Element, Traits::kPVHalf>;
  static_assert(!Traits::kPVHalf || std::is_same<Element, __half>::value,
                "fp16 accumulation takes fp16 inputs (bf16 MMAs accumulate in fp32 only)");

  using QTile = typename Traits::QTile;
  using KTile = typename Traits::KTile;
  using VTile = typename Traits::VTile;
  using PTile = typename Traits::PTile;
  using L3 = FfpaL3<Traits, kStages>;  // ffpa_fwd_l3.cuh

  // Which output tile a block computes.
  struct Work {
    int m_block;  // query block
    int head;
    int batch;
    int group;    // L2: Dv group; 0 otherwise
  };

  // Per-work view of the problem: base pointers already offset to (batch, head, block, group).
  // Strides and lengths are read from the (constant-bank) params where needed, leaving
  // registers to the fragments.
  struct Block {
    const Element* q;  // row m0 of this block's query head
    const Element* k;  // row 0 of the kv head
    const Element* v;  // row 0 of the kv head, first column of the block's Dv group
    int m0;            // first query row of the block
    int rows_q;        // valid query rows in this block (<= kBlockM)
    int n_end;         // key tiles [0, n_end) can hold visible keys (causal cut)
    int nv;            // V items per tile (kChunksV except in a narrower last L2 group)
    int first_tile;    // first visible KV tile (L3: its O slices start at 0, nothing to load)
    int num_stages_dyn;  // kStages = 0 only (read through stages())
    uint32_t smem_base;  // shared address of stage 0
    uint32_t q_smem;     // shared address of the resident Q tile (kQResident)
  };

  // ---- loads -------------------------------------------------------------------------------
  // Copy rows [0, kRows) x slice `c` of a row-major global matrix into a swizzled tile; rows at
  // or past `valid_rows` are zero-filled (finite values keep masked lanes of P@V at exactly 0).
  template <typename TileT, int kRows>
  static __device__ __forceinline__ void load_slice(uint32_t dst, const Element* src,
                                                    int64_t row_stride, int valid_rows, int c,
                                                    int tid) {
    constexpr int kUnits = kChunkD / 8;
    constexpr int kTotal = kRows * kUnits;
    constexpr int kIters = (kTotal + kThreads - 1) / kThreads;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int i = tid + it * kThreads;
      if (kTotal % kThreads == 0 || i < kTotal) {
        const int r = i / kUnits;
        const int u = i % kUnits;
        const bool valid = r < valid_rows;
        const Element* g = src + (valid ? r : 0) * row_stride + c * kChunkD + u * 8;
        ptx::cp_async_cg_16(dst + TileT::unit_offset(r, u), g, valid);
      }
    }
  }

  // The loader runs num_stages - 1 items ahead of the consumer: its own walk over the tiles.
  struct Producer {
    int tile;    // KV tile of the next item
    int c;       // item within the tile
    int slot;    // ring slot of the next item
  };

  static __device__ __forceinline__ int v_items(const Block& b) {
    if constexpr (kLevel == Level::kL2) return b.nv;
    else return kChunksV;
  }

  // This work's row of the mask block map.
  static __device__ __forceinline__ const uint8_t* block_codes(const FwdParams& p, const Work& w) {
    return block_map_row(p, w.batch, w.head, w.m_block);
  }

  static __device__ __forceinline__ int next_tile(const FwdParams& p, const Work& w, const Block& b, int j) {
    return p.block_map != nullptr ? skip_masked_tiles(block_codes(p, w), j, b.n_end) : j;
  }

  static __device__ __forceinline__ uint32_t stage_addr(const Block& b, int slot) {
    return b.smem_base + static_cast<uint32_t>(slot * Traits::kStageBytes);
  }
  static __device__ __forceinline__ int stages(const Block& b) {
    if constexpr (kStages > 0) return kStages;
    else return b.num_stages_dyn;
  }
  static __device__ __forceinline__ int next_slot(const Block& b, int slot) {
    return slot + 1 == stages(b) ? 0 : slot + 1;
  }

  static __device__ __forceinline__ void issue(const FwdParams& p, const Work& w, const Block& b, Producer& pr,
                                               int tid) {
    if (pr.tile >= b.n_end) return;
    const int c = pr.c;
    const uint32_t dst = stage_addr(b, pr.slot);
    const int n0 = pr.tile * kBlockN;
    if (c < kChunksQK) {
      uint32_t k_dst = dst;
      if constexpr (!Traits::kQResident) {
        load_slice<QTile, kBlockM>(dst, b.q, p.q_row_stride, b.rows_q, c, tid);
        k_dst += Traits::kQSliceBytes;
      }
      load_slice<KTile, kBlockN>(k_dst, b.k + n0 * p.k_row_stride, p.k_row_stride, p.len_kv - n0, c, tid);
    } else {
      load_slice<VTile, kBlockN>(dst, b.v + n0 * p.v_row_stride, p.v_row_stride, p.len_kv - n0,
                                 c - kChunksQK, tid);
      if constexpr (kLevel == Level::kL3) L3::prefetch_o(p, b, pr, dst, c - kChunksQK, tid);
    }
    pr.slot = next_slot(b, pr.slot);
    if (++pr.c == kChunksQK + v_items(b)) {
      pr.c = 0;
      pr.tile = next_tile(p, w, b, pr.tile + 1);
    }
  }

  // Make the consumer's next item resident and keep the ring full. Every call commits exactly
  // one group (possibly empty), so "the item landed" is "at most num_stages - 2 groups pending".
  static __device__ __forceinline__ void acquire(const FwdParams& p, const Work& w, const Block& b, Producer& pr,
                                                 int tid) {
    if (stages(b) == 1) {
      __syncthreads();  // everyone is done reading the single buffer
      issue(p, w, b, pr, tid);
      ptx::cp_async_commit_group();
      ptx::cp_async_wait_group<0>();
      __syncthreads();
    } else {
      if constexpr (kStages > 1) ptx::cp_async_wait_group<kStages - 2>();
      else ptx::cp_async_wait_group_dyn(stages(b) - 2);
      __syncthreads();  // the item is visible to all; everyone is done with the slot refilled next
      issue(p, w, b, pr, tid);
      ptx::cp_async_commit_group();
    }
  }

  // ---- output helpers ------------------------------------------------------------------------
  // Row sums of this thread's two rows over the quad and the kWarpsN warps sharing the rows.
  static __device__ __forceinline__ void total_row_sum(float (&row_sum)[2], float* red, int wm, int wn, int g,
                                                       int t4) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] = quad_sum(row_sum[r]);
    }
    if constexpr (kWarpsN > 1) {
      __syncthreads();  // the row-max readers of `red` are done
      if (t4 == 0) {
        red[wn * kBlockM + wm * 16 + g] = row_sum[0];
        red[wn * kBlockM + wm * 16 + g + 8] = row_sum[1];
      }
      __syncthreads();
      row_sum[0] = row_sum[1] = 0.f;
#pragma unroll
      for (int w = 0; w < kWarpsN; ++w) {
        row_sum[0] += red[w * kBlockM + wm * 16 + g];
        row_sum[1] += red[w * kBlockM + wm * 16 + g + 8];
      }
    }
  }

  static __device__ __forceinline__ float inv_sum(float s) { return attn::inv_row_sum(s); }

  // Write one kChunkD slice of O (this thread's fragment elements, already divided by the row
  // sums) at output column `col0` of the block's rows.
  static __device__ __forceinline__ void store_o(const FwdParams& p, const Work& w, const Block& b, int col0,
                                                 const float (&o)[kNTilesO][4], int wm, int wn, int g, int t4) {
    Element* o_base = static_cast<Element*>(p.o) + w.batch * p.o_batch_stride + w.head * p.o_head_stride;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = b.m0 + wm * 16 + g + r * 8;
      if (row >= p.len_q) continue;
      Element* o_row = o_base + static_cast<int64_t>(row) * p.o_row_stride + col0;
#pragma unroll
      for (int n = 0; n < kNTilesO; ++n) {
        const int col = wn * Traits::kWarpColsO + n * 8 + 2 * t4;
        *reinterpret_cast<uint32_t*>(o_row + col) = Num::pack2(o[n][2 * r], o[n][2 * r + 1]);
      }
    }
  }

  // ---- the block ---------------------------------------------------------------------------
  static __device__ __forceinline__ void run(const FwdParams& p, char* smem, const Work& w) {
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int wm = warp / kWarpsN;
    const int wn = warp % kWarpsN;
    const int g = lane / 4;  // fragment row within the warp's 16 rows (and g + 8)
    const int t4 = lane % 4; // fragment column pair
    const int head_kv = w.head / (p.heads_q / p.heads_kv);
    const int v_col0 = w.group * Traits::kOutD;  // first Dv column of this block (L2 groups)

    Block b;
    b.m0 = w.m_block * kBlockM;
    b.rows_q = min(kBlockM, p.len_q - b.m0);
    b.q = static_cast<const Element*>(p.q) + w.batch * p.q_batch_stride + w.head * p.q_head_stride +
          static_cast<int64_t>(b.m0) * p.q_row_stride;
    b.k = static_cast<const Element*>(p.k) + w.batch * p.k_batch_stride + head_kv * p.k_head_stride;
    b.v = static_cast<const Element*>(p.v) + w.batch * p.v_batch_stride + head_kv * p.v_head_stride + v_col0;
    b.n_end = block_kv_tiles<kBlockN>(p, b.m0, b.rows_q);  // the causal cut (attn/tile_mask.cuh)
    b.nv = min(kChunksV, (Traits::kHeadDimV - v_col0) / kChunkD);
    b.first_tile = next_tile(p, w, b, 0);
    b.num_stages_dyn = p.num_stages;

    b.q_smem = ptx::smem_u32addr(smem);
    b.smem_base = b.q_smem + Traits::kQResidentBytes;

    const uint32_t p_smem = b.smem_base + stages(b) * Traits::kStageBytes;
    float* red = reinterpret_cast<float*>(smem + Traits::kQResidentBytes + stages(b) * Traits::kStageBytes +
                                          Traits::kPBytes);  // [kWarpsN][kBlockM]

    // Rows this thread owns in the softmax state: r = 0 -> row g, r = 1 -> row g + 8.
    float row_max[2] = {-CUDART_INF_F, -CUDART_INF_F};
    float row_sum[2] = {0.f, 0.f};  // this thread's partial sum; reduced across quad/warps at the end
    constexpr int kRegChunks = kLevel == Level::kL3 ? 1 : kChunksV;  // O fragments held in registers
    OFrag o_acc[kRegChunks][kNTilesO];
#pragma unroll
    for (int c = 0; c < kRegChunks; ++c)
#pragma unroll
      for (int n = 0; n < kNTilesO; ++n) o_acc[c][n].zero();

    // Resident Q: every slice, one group committed before the ring's, so the first acquire
    // (which waits for item 0) also waits for it: groups complete in order.
    if constexpr (Traits::kQResident) {
#pragma unroll 1
      for (int c = 0; c < kChunksQK; ++c)
        load_slice<QTile, kBlockM>(b.q_smem + c * Traits::kQSliceBytes, b.q, p.q_row_stride, b.rows_q, c, tid);
      ptx::cp_async_commit_group();
    }
    // Prologue: fill num_stages - 1 buffers.
    Producer pr{b.first_tile, 0, 0};
    for (int s = 0; s < stages(b) - 1; ++s) {
      issue(p, w, b, pr, tid);
      ptx::cp_async_commit_group();
    }

    int slot = 0;  // the consumer's ring slot
    for (int j = b.first_tile, j_next; j < b.n_end; j = j_next) {
      j_next = next_tile(p, w, b, j + 1);
      const int n0 = j * kBlockN;
      // ---- S = Q @ K_j^T, one kChunkD slice of the head dim per pipeline step ----
      SFrag s_frag[kNTilesS];
#pragma unroll
      for (int n = 0; n < kNTilesS; ++n) s_frag[n].zero();

#pragma unroll 1
      for (int c = 0; c < kChunksQK; ++c, slot = next_slot(b, slot)) {
        acquire(p, w, b, pr, tid);
        const uint32_t q_smem = Traits::kQResident ? b.q_smem + c * Traits::kQSliceBytes : stage_addr(b, slot);
        const uint32_t k_smem = Traits::kQResident ? stage_addr(b, slot) : q_smem + Traits::kQSliceBytes;
#pragma unroll
        for (int ks = 0; ks < Traits::kKStepsQK; ++ks) {
          uint32_t a[4];
          ptx::ldmatrix_m8n8_x4(a, q_smem + QTile::unit_offset(wm * 16 + lane % 16, ks * 2 + lane / 16));
#pragma unroll
          for (int np = 0; np < kNTilesS / 2; ++np) {
            // Matrices: (n0-7,k0-7) (n0-7,k8-15) (n8-15,k0-7) (n8-15,k8-15) -> b0,b1 of two n8 tiles.
            uint32_t bk[4];
            const int krow = wn * Traits::kWarpColsS + np * 16 + (lane / 16) * 8 + lane % 8;
            ptx::ldmatrix_m8n8_x4(bk, k_smem + KTile::unit_offset(krow, ks * 2 + (lane / 8) % 2));
            const uint32_t b0[2] = {bk[0], bk[1]};
            const uint32_t b1[2] = {bk[2], bk[3]};
            s_frag[2 * np].mma(a, b0);
            s_frag[2 * np + 1].mma(a, b1);
          }
        }
      }

      // ---- online softmax on this tile (base 2) ----
      const uint8_t code = p.block_map != nullptr ? block_codes(p, w)[j] : static_cast<uint8_t>(kBlockFull);
      const bool need_mask = code == kBlockPartial || n0 + kBlockN > p.len_kv ||
                             (p.is_causal && n0 + kBlockN - 1 > b.m0 + p.causal_offset);
      float s_acc[kNTilesS][4];
#pragma unroll
      for (int n = 0; n < kNTilesS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s_acc[n][e] = s_frag[n].get(e) * p.scale_log2;
      // Masking is a per-tile branch (boundary and mixed-mask tiles only), kept out of the
      // unrolled hot loop; the mask itself is read only in kBlockPartial tiles.
      if (need_mask) {
        const int row0 = b.m0 + wm * 16 + g;
        const int col0 = n0 + wn * Traits::kWarpColsS + 2 * t4;
#pragma unroll
        for (int n = 0; n < kNTilesS; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = col0 + n * 8 + (e % 2);
            const int row = row0 + (e / 2) * 8;
            mask_invisible_key(s_acc[n][e], p, row, col);
          }
        if (code == kBlockPartial) {
#pragma unroll
          for (int n = 0; n < kNTilesS; ++n) {
            const float4 mq = mask_quad_log2(p, w.batch, w.head, row0, col0 + n * 8);
            s_acc[n][0] += mq.x, s_acc[n][1] += mq.y, s_acc[n][2] += mq.z, s_acc[n][3] += mq.w;
          }
        }
      }
      float tile_max[2] = {-CUDART_INF_F, -CUDART_INF_F};
#pragma unroll
      for (int n = 0; n < kNTilesS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], s_acc[n][e]);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tile_max[r] = quad_max(tile_max[r]);
      }
      if constexpr (kWarpsN > 1) {
        // Combine the row max across the warps sharing these rows. The buffer is safe to reuse
        // each tile: its previous readers all passed the P@V pipeline barriers since.
        if (t4 == 0) {
          red[wn * kBlockM + wm * 16 + g] = tile_max[0];
          red[wn * kBlockM + wm * 16 + g + 8] = tile_max[1];
        }
        __syncthreads();
#pragma unroll
        for (int w2 = 0; w2 < kWarpsN; ++w2) {
          tile_max[0] = fmaxf(tile_max[0], red[w2 * kBlockM + wm * 16 + g]);
          tile_max[1] = fmaxf(tile_max[1], red[w2 * kBlockM + wm * 16 + g + 8]);
        }
      }
      float alpha[2], neg_m[2];  // the -inf guards live in attn/state.cuh
#pragma unroll
      for (int r = 0; r < 2; ++r) alpha[r] = attn::online_update(row_max[r], row_sum[r], tile_max[r], neg_m[r]);
      if constexpr (kLevel != Level::kL3) {
#pragma unroll
        for (int c = 0; c < kChunksV; ++c)
#pragma unroll
          for (int n = 0; n < kNTilesO; ++n) o_acc[c][n].scale_rows(alpha[0], alpha[1]);
      }

      // P = exp2(S - m), summed in fp32, stored as b16 for the P@V MMA.
#pragma unroll
      for (int n = 0; n < kNTilesS; ++n) {
        float pv[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          pv[e] = ptx::ex2_approx_ftz(s_acc[n][e] + neg_m[e / 2]);
          row_sum[e / 2] += pv[e];
        }
        const int col = wn * Traits::kWarpColsS + n * 8 + 2 * t4;
        const int row = wm * 16 + g;
        const uint32_t lo = Num::pack2(pv[0], pv[1]);
        const uint32_t hi = Num::pack2(pv[2], pv[3]);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(p_smem + PTile::elem_offset(row, col)), "r"(lo));
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(p_smem + PTile::elem_offset(row + 8, col)), "r"(hi));
      }

      // ---- O += P @ V_j, one kChunkD slice of the block's Dv columns per pipeline step ----
      uint32_t p_frag[kHeldPSteps][4];  // P's A fragments when held through the V slices
      if constexpr (kLevel != Level::kL3) {
#pragma unroll
        for (int c = 0; c < kChunksV; ++c, slot = next_slot(b, slot)) {
          if (kLevel == Level::kL2 && c >= b.nv) break;  // narrower last group (block-uniform)
          acquire(p, w, b, pr, tid);  // its barrier also publishes the P tile written above
          if (c == 0) load_p(p_frag, p_smem, wm, lane);
          pv_slice(o_acc[c], p_frag, p_smem, stage_addr(b, slot), wm, wn, lane);
        }
      } else {
        const bool first = j == b.first_tile;
        const bool last = j_next >= b.n_end;
        float inv[2] = {0.f, 0.f};
        if (last) {
          total_row_sum(row_sum, red, wm, wn, g, t4);  // row_sum is final from here on
          inv[0] = inv_sum(row_sum[0]), inv[1] = inv_sum(row_sum[1]);
        }
#pragma unroll 1
        for (int c = 0; c < kChunksV; ++c, slot = next_slot(b, slot)) {
          acquire(p, w, b, pr, tid);
          if (c == 0) load_p(p_frag, p_smem, wm, lane);
          // O of this slice = its previous value (landed in the stage with V, rescaled) + P@V.
          const uint32_t stage = stage_addr(b, slot);
          float prev[kNTilesO][4];
          OFrag acc[kNTilesO];
          L3::seed_acc(acc, prev, stage, alpha, first, tid);
          pv_slice(acc, p_frag, p_smem, stage, wm, wn, lane);
          if (Traits::kPVHalf && !first) L3::load_prev(prev, stage, alpha, tid);
          float o[kNTilesO][4];
#pragma unroll
          for (int n = 0; n < kNTilesO; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              o[n][e] = acc[n].get(e);
              if (Traits::kPVHalf && !first) o[n][e] += prev[n][e];  // this tile's fp16 sum onto fp32
            }
          if (last) {
#pragma unroll
            for (int n = 0; n < kNTilesO; ++n)
#pragma unroll
              for (int e = 0; e < 4; ++e) o[n][e] *= inv[e / 2];
            store_o(p, w, b, c * kChunkD, o, wm, wn, g, t4);
          } else {
#pragma unroll
            for (int n = 0; n < kNTilesO; ++n) *L3::ws_frag(p, c, n, tid) = make_float4(o[n][0], o[n][1], o[n][2], o[n][3]);
          }
        }
      }
    }
    ptx::cp_async_wait_group<0>();

    // ---- epilogue: O / l (L1, L2), LSE ----
    if constexpr (kLevel != Level::kL3) {
      total_row_sum(row_sum, red, wm, wn, g, t4);
      const float inv[2] = {inv_sum(row_sum[0]), inv_sum(row_sum[1])};
#pragma unroll
      for (int c = 0; c < kChunksV; ++c) {
        if (kLevel == Level::kL2 && c >= b.nv) break;
        float o[kNTilesO][4];
#pragma unroll
        for (int n = 0; n < kNTilesO; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[n][e] = o_acc[c][n].get(e) * inv[e / 2];
        store_o(p, w, b, v_col0 + c * kChunkD, o, wm, wn, g, t4);
      }
    } else if (b.first_tile >= b.n_end) {
      // No visible key in the whole block (causal bottom-right with L > S, or all masked): O = 0.
      float o[kNTilesO][4] = {};
#pragma unroll 1
      for (int c = 0; c < kChunksV; ++c) store_o(p, w, b, c * kChunkD, o, wm, wn, g, t4);
    }
    if (p.lse != nullptr && w.group == 0 && wn == 0 && t4 == 0) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = b.m0 + wm * 16 + g + r * 8;
        if (row >= p.len_q) continue;
        p.lse[(static_cast<int64_t>(w.batch) * p.heads_q + w.head) * p.len_q + row] = attn::row_lse(row_max[r], row_sum[r]);
      }
    }
  }

  // The P tile's A fragments for all k-steps of P@V, loaded once per KV tile and held through
  // its V slices when they fit (kHoldP: Bc <= 128, 32 registers); wider KV tiles (L3's Bc = 256
  // would hold 64) read each k-step's fragment from shared memory in pv_slice instead.
  static constexpr bool kHoldP = Traits::kKStepsPV <= 8;
  static constexpr int kHeldPSteps = kHoldP ? Traits::kKStepsPV : 1;
  static __device__ __forceinline__ void load_p(uint32_t (&p_frag)[kHeldPSteps][4], uint32_t p_smem, int wm,
                                                int lane) {
    if constexpr (kHoldP) {
#pragma unroll
      for (int ks = 0; ks < Traits::kKStepsPV; ++ks)
        ptx::ldmatrix_m8n8_x4(p_frag[ks], p_smem + PTile::unit_offset(wm * 16 + lane % 16, ks * 2 + lane / 16));
    }
  }

  // acc += P @ V[:, slice]: this warp's kNTilesO n8 tiles of one kChunkD slice.
  static __device__ __forceinline__ void pv_slice(OFrag (&acc)[kNTilesO], const uint32_t (&p_frag)[kHeldPSteps][4],
                                                  uint32_t p_smem, uint32_t v_smem, int wm, int wn, int lane) {
#pragma unroll
    for (int ks = 0; ks < Traits::kKStepsPV; ++ks) {
      auto step = [&](const uint32_t(&a)[4]) {
#pragma unroll
        for (int np = 0; np < kNTilesO / 2; ++np) {
          // Transposed matrices: (k0-7,n0-7) (k8-15,n0-7) (k0-7,n8-15) (k8-15,n8-15).
          uint32_t bv[4];
          const int vrow = ks * 16 + ((lane / 8) % 2) * 8 + lane % 8;
          const int vunit = (wn * Traits::kWarpColsO + np * 16) / 8 + lane / 16;
          ptx::ldmatrix_m8n8_x4_trans(bv, v_smem + VTile::unit_offset(vrow, vunit));
          const uint32_t b0[2] = {bv[0], bv[1]};
          const uint32_t b1[2] = {bv[2], bv[3]};
          acc[2 * np].mma(a, b0);
          acc[2 * np + 1].mma(a, b1);
        }
      };
      if constexpr (kHoldP) {
        step(p_frag[ks]);
      } else {
        uint32_t a[4];
        ptx::ldmatrix_m8n8_x4(a, p_smem + PTile::unit_offset(wm * 16 + lane % 16, ks * 2 + lane / 16));
        step(a);
      }
    }
  }
};

// L1 and L2: one block per (query block [x L2 group], head, batch), heaviest (causal) blocks
// first within each head: the last query rows see the most keys. blockIdx.x is the query block,
// so the hardware dispatches a head's blocks together and they share its K/V in L2.
// L3: a persistent grid over the same head-major order (FfpaL3::run_persistent).
template <typename Traits, int kStages = 0>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocksPerSm) ffpa_fwd_kernel(const __grid_constant__ FwdParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) char smem[];
  using Fwd = FfpaFwd<Traits, kStages>;
  if constexpr (Traits::kLevel == Level::kL3) {
    FfpaL3<Traits, kStages>::run_persistent(p, smem);
  } else {
    const int m_blocks = gridDim.x / Traits::kGroups;
    const typename Fwd::Work w{m_blocks - 1 - static_cast<int>(blockIdx.x) / Traits::kGroups,
                               static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z),
                               static_cast<int>(blockIdx.x) % Traits::kGroups};
    Fwd::run(p, smem, w);
  }
#endif
}

}  // namespace ffpa::attn
