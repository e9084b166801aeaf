// Definition of the FA-2 forward launchers, one per kernel (kMma: mma.sync, or the sm_90a wgmma
// kernel): tile from its table, pipeline depth, shared-memory opt-in, the block map's tile size.
// Which one a call runs is the chooser's (launch/route.cpp; registry data from ffpa_attn/_spec.py).
// Included only by the generated instantiation files.
#pragma once
#include <cuda_runtime.h>

#include "ffpa/traits/fa2_traits.h"
#include "ffpa/kernels/fa2_fwd_sm80.cuh"
#if FFPA_HAS_SM90A
#include "ffpa/kernels/fa2_fwd_sm90.cuh"
#endif
#include "launch/fwd_launcher.h"
#include "launch/grid.cuh"
#include "launch/heuristics.h"

namespace ffpa::launch {

template <typename Element, int kHeadDim, int kHeadDimV, Fa2Mma kMma>
struct Fa2Launcher<Element, kHeadDim, kHeadDimV, kMma>::Impl {
  static constexpr int kD = kHeadDim > kHeadDimV ? kHeadDim : kHeadDimV;
  static constexpr int kMaxStages = 4;
  static constexpr bool kWgmma = kMma == Fa2Mma::kWgmma;
  static_assert(kMma == Fa2Mma::kSync || kMma == Fa2Mma::kWgmma, "a launcher runs one of the two kernels");
#if !FFPA_HAS_SM90A
  static_assert(!kWgmma, "the wgmma launcher needs sm_90a code in the build (tools/gen_instantiations.py emits it "
                "only then)");
#endif

  // One kernel variant (a tile table row): its traits, its kernels per ring depth, its opt-in flags.
  template <typename TraitsT>
  struct Variant {
    using Traits = TraitsT;
    static inline bool smem_opted_in[kMaxStages + 1][64] = {};  // per ring depth (one kernel each), per device
    static int pick_stages(int requested) {
      const int s = requested > 0 ? requested
                                  : default_stages(Traits::kStageBytes, Traits::smem_bytes(0), Traits::kMinBlocks,
                                                   Traits::kStages);
      return Traits::kWgmma && s < 2 ? 2 : s;  // the wgmma kernel has no single-slot ring
    }
    static attn::Fa2KernelFn kernel(int stages) {
      if constexpr (Traits::kWgmma) {
#if FFPA_HAS_SM90A
        return attn::fa2_fwd_wgmma_kernel_for<Traits>(stages);
#else
        return nullptr;  // unreachable: the static_assert above
#endif
      } else {
        return attn::fa2_fwd_kernel_for<Traits>(stages);
      }
    }
  };
  using V = Variant<Fa2Traits<Element, kHeadDim, kHeadDimV, std::conditional_t<kWgmma, Fa2WgmmaTileFor<kD>, Fa2TileFor<kD>>>>;
  static_assert(V::Traits::kWgmma == kWgmma, "the tile table row and the launcher disagree on the MMA");

  static cudaError_t info(int num_stages, bool query_attributes, KernelInfo* out) {
    using Traits = typename V::Traits;
    KernelInfo k;
    k.family = Family::kFa2;
    k.level = 0;
    k.wgmma = Traits::kWgmma;
    k.head_dim = kHeadDim;
    k.head_dim_v = kHeadDimV;
    k.block_m = Traits::kBlockM;
    k.block_n = Traits::kBlockN;
    k.warps_m = Traits::kWarps;
    k.warps_n = 1;
    k.chunk_d = kHeadDim;
    k.smem_padded = Traits::QTile::kAnyRowStep;
    k.group_d = kHeadDimV;
    k.threads = Traits::kThreads;
    k.num_stages = V::pick_stages(num_stages);
    k.smem_bytes = Traits::smem_bytes(k.num_stages);
    if (query_attributes) {
      const cudaError_t err = query_kernel_attributes(V::kernel(k.num_stages), &k);
      if (err != cudaSuccess) return err;
    }
    *out = k;
    return cudaSuccess;
  }

  static cudaError_t run(FwdParams p, cudaStream_t stream) {
    using Traits = typename V::Traits;
    if (p.block_map != nullptr && (p.block_map_m != Traits::kBlockM || p.block_map_n != Traits::kBlockN))
      return cudaErrorInvalidValue;
    p.num_stages = V::pick_stages(p.num_stages);
    const int smem = Traits::smem_bytes(p.num_stages);
    if (smem > max_smem_optin()) return cudaErrorInvalidConfiguration;
    const auto kernel = V::kernel(p.num_stages);
    if (kernel == nullptr) return cudaErrorInvalidValue;
    const cudaError_t err = opt_in_smem(kernel, smem, V::smem_opted_in[p.num_stages]);
    if (err != cudaSuccess) return err;
    return launch_batched<Element>(kernel, p, Traits::kBlockM, Traits::kThreads, smem, stream);
  }
};

template <typename Element, int kHeadDim, int kHeadDimV, Fa2Mma kMma>
cudaError_t Fa2Launcher<Element, kHeadDim, kHeadDimV, kMma>::info(int num_stages, bool query_attributes,
                                                                  KernelInfo* out) {
  if (num_stages < 0 || num_stages > Impl::kMaxStages) return cudaErrorInvalidValue;
  return Impl::info(num_stages, query_attributes, out);
}

template <typename Element, int kHeadDim, int kHeadDimV, Fa2Mma kMma>
cudaError_t Fa2Launcher<Element, kHeadDim, kHeadDimV, kMma>::run(FwdParams p, cudaStream_t stream) {
  if (p.num_stages < 0 || p.num_stages > Impl::kMaxStages || !params_ok(p, kHeadDim, kHeadDimV))
    return cudaErrorInvalidValue;
  return Impl::run(p, stream);
}

}  // namespace ffpa::launch
