// FA-2 forward kernel family (mma.sync, sm_80+) for head dims <= 256 (and 320, 384): coarse-grained tiling,
// the whole head dim per tile. Q is loaded once per block; K and V tiles stream through one
// cp.async ring; S and P never leave registers. Masks (block-map skip), causal (top-left or
// bottom-right), GQA and Lq != Lk are runtime features of the same instantiation. The ring,
// softmax, masking and epilogue are shared with the wgmma kernel (fa2_common.cuh); this file
// holds the mma.sync products and their ldmatrix fragment loads.
#pragma once
#include <cstdint>
#include <math_constants.h>

#include "ffpa/kernels/fa2_common.cuh"
#include "ffpa/ptx/cp_async.cuh"
#include "ffpa/ptx/ldmatrix.cuh"

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
// Per KV tile j: S = Q K_j^T by m16n8k16 mma.sync (Q from registers or ldmatrix, K by ldmatrix),
// the shared online softmax packs P into A fragments, O += P V_j with V read by ldmatrix.trans.
template <typename Traits, int kStages>
struct Fa2Fwd : Fa2FwdCommon<Traits, kStages> {
  using Base = Fa2FwdCommon<Traits, kStages>;
  using typename Base::Num;
  using typename Base::QTile;
  using typename Base::KTile;
  using typename Base::VTile;
  using typename Base::Block;
  using typename Base::Producer;
  using typename Base::BlockStart;
  using Base::kMTiles;
  using Base::kWarpRows;
  using Base::kNTilesS;
  using Base::kNTilesO;
  using Base::kKStepsQK;
  using Base::kKStepsPV;
  static_assert(!Traits::kWgmma, "Fa2Fwd takes the mma.sync tile table (wgmma rows: fa2_fwd_sm90.cuh)");

  static __device__ __forceinline__ void run(const FwdParams& p, char* smem) {
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int g = lane / 4;   // fragment row (and g + 8) within an m-tile
    const int t4 = lane % 4;  // fragment column pair

    Block b;
    Producer pr;
    const BlockStart st0 = Base::begin_block(p, smem, tid, b, pr);
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
    for (int j = first_tile; j < b.n_end; j = Base::next_tile(b, j + 1)) {
      // ---- S = Q @ K_j^T over the whole head dim ----
      Base::template acquire<false>(p, b, pr, tid);
      const uint32_t k_smem = Base::slot_addr(b, slot) + k_lane;
      slot = Base::next_slot(b, slot);
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
        Base::template acquire<true>(p, b, pr, tid);
        v_smem = Base::slot_addr(b, slot) + v_lane;
        slot = Base::next_slot(b, slot);
      }

      // ---- scale, mask, online softmax (base 2) ----
      uint32_t p_frag[kMTiles][kKStepsPV][4];  // P as the A operand of P@V, b16
      Base::softmax_tile(p, b, j, m0, warp_row0, g, t4, scale_log2, s_acc, row_max, row_sum, o_acc, p_frag);

      // ---- O += P @ V_j: P from registers, V fragments double-buffered like K's ----
      if constexpr (!Traits::kEarlyV) {
        Base::template acquire<true>(p, b, pr, tid);
        v_smem = Base::slot_addr(b, slot) + v_lane;
        slot = Base::next_slot(b, slot);
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

    Base::store_o(p, q_smem, m0, rows_q, warp_row0, g, t4, tid, o_acc, row_max, row_sum);
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
