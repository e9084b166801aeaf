// Definition of the FA-2 forward launcher: tile from the table, pipeline depth, shared-memory
// opt-in, the block map's tile size, and which of the two kernels runs (mma.sync, or wgmma on
// compute capability 9.0 where the build has sm_90a code). Included only by the generated
// instantiation files.
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

template <typename Element, int kHeadDim, int kHeadDimV>
struct Fa2Launcher<Element, kHeadDim, kHeadDimV>::Impl {
  static constexpr int kD = kHeadDim > kHeadDimV ? kHeadDim : kHeadDimV;
  static constexpr int kMaxStages = 4;

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
#if FFPA_HAS_SM90A
      return attn::fa2_fwd_kernel_any<Traits>(stages);
#else
      return attn::fa2_fwd_kernel_for<Traits>(stages);
#endif
    }
  };
  using Sync = Variant<Fa2Traits<Element, kHeadDim, kHeadDimV, Fa2TileFor<kD>>>;
#if FFPA_HAS_SM90A
  static constexpr bool kHasWgmma = kD <= 384;  // the Hopper table's last row
#else
  static constexpr bool kHasWgmma = false;
#endif
  using Wgmma =
      std::conditional_t<kHasWgmma, Variant<Fa2Traits<Element, kHeadDim, kHeadDimV, Fa2WgmmaTileFor<kD>>>, Sync>;
  static bool use_wgmma() { return kHasWgmma && fa2_mma() != Fa2Mma::kSync && device_is_sm90(); }

  template <typename V>
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

  template <typename V>
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

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t Fa2Launcher<Element, kHeadDim, kHeadDimV>::info(int num_stages, bool query_attributes, KernelInfo* out) {
  if (num_stages < 0 || num_stages > Impl::kMaxStages) return cudaErrorInvalidValue;
  return Impl::use_wgmma() ? Impl::template info<typename Impl::Wgmma>(num_stages, query_attributes, out)
                           : Impl::template info<typename Impl::Sync>(num_stages, query_attributes, out);
}

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t Fa2Launcher<Element, kHeadDim, kHeadDimV>::run(FwdParams p, cudaStream_t stream) {
  if (p.num_stages < 0 || p.num_stages > Impl::kMaxStages || !params_ok(p, kHeadDim, kHeadDimV))
    return cudaErrorInvalidValue;
  return Impl::use_wgmma() ? Impl::template run<typename Impl::Wgmma>(p, stream)
                           : Impl::template run<typename Impl::Sync>(p, stream);
}

}  // namespace ffpa::launch
