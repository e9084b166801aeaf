// FA-2 forward on Hopper (sm_90a): the structure of fa2_fwd_sm80.cuh (Q resident, one cp.async
// ring of K and V tiles, S and P in registers, the same online softmax, masks and epilogue, all
// from fa2_common.cuh), with both products on the warpgroup MMA (wgmma.mma_async) instead of
// mma.sync + ldmatrix. Also fa2_fwd_kernel_any, either kernel by tile table row (tools/tune_fa2.cu; the
// launcher has one registry entry per kernel and names its own).
#pragma once
#include <cstdint>
#include <math_constants.h>

#include "ffpa/kernels/fa2_common.cuh"
#include "ffpa/kernels/fa2_fwd_sm80.cuh"
#include "ffpa/ptx/cp_async.cuh"
#include "ffpa/ptx/wgmma.cuh"

namespace ffpa::attn {

// This kernel's ring hook (Fa2FwdCommon::acquire): wgmma reads shared memory through the async
// proxy, so each thread fences its own generic-proxy writes (its landed cp.async copies; at the
// first item also begin_block's sign flip of Q) before the barrier that publishes them.
struct Fa2AsyncProxyFence {
  static __device__ __forceinline__ void apply() { ptx::fence_proxy_async_shared(); }
};

// Block of kWarps / 4 warpgroups; warpgroup w owns query rows [64 w, 64 w + 64) and every key:
//
//                 S = Q K_j^T (kBlockN cols)         O (Dv cols)
//   rows  0..63   +----------------------------+     +--------------------+
//                 |  warpgroup 0 (warps 0..3)  |     |  warpgroup 0       |
//   rows 64..127  +----------------------------+     +--------------------+
//                 |  warpgroup 1 (warps 4..7)  |     |  warpgroup 1       |
//
// Within a warpgroup, warp i holds rows 16 i..16 i + 15 of each accumulator in the m16n8
// layout of mma.sync (wgmma_gen.cuh), so the shared softmax, masking and epilogue
// (fa2_common.cuh) run unchanged on kMTiles = 1. Per KV tile j (the two products are waited on
// before the softmax and before the next tile, so K/V slots are free when the ring's barrier
// passes):
//
//   S  = sum over k-steps ks  wgmma.ss m64n{Bc}k16 (Q chunk desc, K_j chunk desc)
//   P  = softmax(S) -> b16 registers (A operand, m16n8k16 layout)
//   O += sum over k-steps kk  wgmma.rs m64n{Dv}k16 (P[kk], V_j desc, transposed read)
template <typename Traits, int kStages>
struct Fa2FwdWgmma : Fa2FwdCommon<Traits, kStages, Fa2AsyncProxyFence> {
  using Base = Fa2FwdCommon<Traits, kStages, Fa2AsyncProxyFence>;
  using typename Base::Element;
  using typename Base::QTile;
  using typename Base::KTile;
  using typename Base::VTile;
  using typename Base::Block;
  using typename Base::Producer;
  using Mma = ptx::WgmmaM64<Traits::kBlockN, Element>;
  // P@V: one m64n{Dv}k16 per k-step (Dv <= 256, wgmma's largest N; on Hopper FFPA L1 runs wider heads).
  static_assert(Traits::kHeadDim <= 256 && Traits::kHeadDimV <= 256, "the wgmma FA-2 tiles stop at D = 256");
  using MmaO = ptx::WgmmaM64<Traits::kHeadDimV, Element>;
  using Base::kNTilesS;
  using Base::kNTilesO;
  using Base::kKStepsQK;
  using Base::kKStepsPV;
  static_assert(Traits::kWgmma, "Fa2FwdWgmma takes the wgmma tile table");

  static __device__ __forceinline__ void run(const FwdParams& p, char* smem_raw) {
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int g = lane / 4;
    const int t4 = lane % 4;
    // The swizzle is read off address bits: round the base up to 1024 bytes (kAlignSlack).
    const uint32_t raw = ptx::smem_u32addr(smem_raw);
    char* smem = smem_raw + (((raw + 1023u) & ~1023u) - raw);
    const uint32_t q_smem = ptx::smem_u32addr(smem);

    Block b;
    Producer pr;
    const auto st0 = Base::begin_block(p, smem, tid, b, pr);
    const int m0 = st0.m0;
    const int warp_row0 = warp * 16;
    // This warpgroup's 64 rows of Q (rows are 128 bytes apart inside each chunk).
    const uint32_t q_wg = q_smem + (warp / 4) * 64 * 128;

    float row_max[1][2], row_sum[1][2];
    float o_acc[1][kNTilesO][4];
#pragma unroll
    for (int r = 0; r < 2; ++r) row_max[0][r] = -CUDART_INF_F, row_sum[0][r] = 0.f;
#pragma unroll
    for (int n = 0; n < kNTilesO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[0][n][e] = 0.f;

    int slot = 0;
    for (int j = st0.first_tile; j < b.n_end; j = Base::next_tile(b, j + 1)) {
      // ---- S = Q @ K_j^T ----
      Base::template acquire<false>(p, b, pr, tid);
      const uint32_t k_smem = Base::slot_addr(b, slot);
      slot = Base::next_slot(b, slot);
      float s_acc[1][kNTilesS][4];
      const ptx::GmmaDescSw128 qd(q_wg, 16, 1024), kd(k_smem, 16, 1024);
      ptx::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kKStepsQK; ++ks)
        Mma::ss(s_acc[0], qd.at(QTile::k_major_kstep(ks)), kd.at(KTile::k_major_kstep(ks)), ks > 0);
      ptx::wgmma_commit_group();
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(s_acc[0]);

      // V_j's slot is claimed before the softmax, so the K_j+1 copy overlaps softmax and P@V.
      Base::template acquire<true>(p, b, pr, tid);
      const uint32_t v_smem = Base::slot_addr(b, slot);
      slot = Base::next_slot(b, slot);

      uint32_t p_frag[1][kKStepsPV][4];
      Base::softmax_tile(p, b, j, m0, warp_row0, g, t4, st0.scale_log2, s_acc, row_max, row_sum, o_acc, p_frag);

      // ---- O += P @ V_j: V is [keys][Dv] (MN-major for this product): k-step kk covers keys
      // 16 kk..16 kk + 15, two 8-row groups of 1024 bytes; chunks of 64 columns are kChunkBytes apart.
      ptx::wgmma_fence_operand(o_acc[0]);
      const ptx::GmmaDescSw128 vd(v_smem, VTile::kChunkBytes, 1024);
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kKStepsPV; ++kk) MmaO::rs(o_acc[0], p_frag[0][kk], vd.at(VTile::mn_major_kstep(kk)), 1);
      ptx::wgmma_commit_group();
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(o_acc[0]);
    }
    ptx::cp_async_wait_group<0>();

    Base::store_o(p, q_smem, m0, st0.rows_q, warp_row0, g, t4, tid, o_acc, row_max, row_sum);
  }
};

template <typename Traits, int kStages>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocks)
    fa2_fwd_wgmma_kernel(const __grid_constant__ FwdParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) char smem[];
  Fa2FwdWgmma<Traits, kStages>::run(p, smem);
#elif defined(__CUDA_ARCH__)
  __trap();  // no wgmma in this pass (the launcher only picks this kernel on sm_90a): never silently
#endif
}

// The kernel for a ring depth of `stages` (2..4; anything else: null). Depth 1 is left out: the
// single slot would serialise every copy behind both products.
template <typename Traits>
Fa2KernelFn fa2_fwd_wgmma_kernel_for(int stages) {
  switch (stages) {
    case 2: return fa2_fwd_wgmma_kernel<Traits, 2>;
    case 3: return fa2_fwd_wgmma_kernel<Traits, 3>;
    case 4: return fa2_fwd_wgmma_kernel<Traits, 4>;
    default: return nullptr;
  }
}

// Either family member by its tile table row: wgmma rows to the kernel above, others to sm80's.
template <typename Traits>
Fa2KernelFn fa2_fwd_kernel_any(int stages) {
  if constexpr (Traits::kWgmma) return fa2_fwd_wgmma_kernel_for<Traits>(stages);
  else return fa2_fwd_kernel_for<Traits>(stages);
}

}  // namespace ffpa::attn
