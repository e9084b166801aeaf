// Definition of the FFPA forward launcher: grid, pipeline depth, shared-memory opt-in.
// Included only by the generated instantiation files (one per family x dtype x head dim).
#pragma once
#include <cuda_runtime.h>

#include "ffpa/ffpa_traits.h"
#include "ffpa/kernels/ffpa_fwd_sm80.cuh"
#include "launch/ffpa_fwd_launcher.h"
#include "launch/heuristics.h"

namespace ffpa::launch {

namespace detail {
template <typename Element, int kHeadDim, int kHeadDimV, Level kLevel>
struct FfpaKernelOf {
  using Traits = FfpaTraits<Element, kHeadDim, kHeadDimV, kLevel, L1Tile<kHeadDimV>>;
  static constexpr int kMaxStages = 4;
  static inline bool smem_opted_in[64] = {};

  static int pick_stages(int requested) {
    return requested > 0 ? requested : default_stages(Traits::kStageBytes, Traits::smem_bytes(0));
  }
};
}  // namespace detail

template <typename Element, int kHeadDim, int kHeadDimV, Level kLevel>
cudaError_t FfpaLauncher<Element, kHeadDim, kHeadDimV, kLevel>::info(int num_stages, bool query_attributes,
                                                                     KernelInfo* out) {
  using K = detail::FfpaKernelOf<Element, kHeadDim, kHeadDimV, kLevel>;
  using Traits = typename K::Traits;
  if (num_stages < 0 || num_stages > K::kMaxStages) return cudaErrorInvalidValue;
  KernelInfo k;
  k.level = static_cast<int>(kLevel);
  k.head_dim = kHeadDim;
  k.head_dim_v = kHeadDimV;
  k.block_m = Traits::kBlockM;
  k.block_n = Traits::kBlockN;
  k.warps_m = Traits::kWarpsM;
  k.warps_n = Traits::kWarpsN;
  k.chunk_d = Traits::kChunkD;
  k.threads = Traits::kThreads;
  k.num_stages = K::pick_stages(num_stages);
  k.smem_bytes = Traits::smem_bytes(k.num_stages);
  if (query_attributes) {
    cudaFuncAttributes attr;
    const cudaError_t err = cudaFuncGetAttributes(&attr, attn::ffpa_fwd_kernel<Traits>);
    if (err != cudaSuccess) return err;
    k.registers = attr.numRegs;
    k.local_bytes = static_cast<int>(attr.localSizeBytes);
  }
  *out = k;
  return cudaSuccess;
}

template <typename Element, int kHeadDim, int kHeadDimV, Level kLevel>
cudaError_t FfpaLauncher<Element, kHeadDim, kHeadDimV, kLevel>::run(FwdParams p, cudaStream_t stream) {
  using K = detail::FfpaKernelOf<Element, kHeadDim, kHeadDimV, kLevel>;
  using Traits = typename K::Traits;
  if (p.num_stages < 0 || p.num_stages > K::kMaxStages) return cudaErrorInvalidValue;
  if (p.head_dim != kHeadDim || p.head_dim_v != kHeadDimV) return cudaErrorInvalidValue;
  if (p.batch <= 0 || p.len_q <= 0 || p.len_kv <= 0 || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0)
    return cudaErrorInvalidValue;
  p.num_stages = K::pick_stages(p.num_stages);
  const int smem = Traits::smem_bytes(p.num_stages);
  if (smem > max_smem_optin()) return cudaErrorInvalidConfiguration;
  cudaError_t err = opt_in_smem(attn::ffpa_fwd_kernel<Traits>, Traits::smem_bytes(K::kMaxStages), K::smem_opted_in);
  if (err != cudaSuccess) return err;

  const int m_blocks = (p.len_q + Traits::kBlockM - 1) / Traits::kBlockM;
  // gridDim.y/z are capped at 65535: launch the batch in slices, offsetting the pointers.
  constexpr int kMaxGridYZ = 65535;
  if (p.heads_q > kMaxGridYZ) return cudaErrorInvalidConfiguration;
  for (int b0 = 0; b0 < p.batch; b0 += kMaxGridYZ) {
    FwdParams s = p;
    s.batch = p.batch - b0 < kMaxGridYZ ? p.batch - b0 : kMaxGridYZ;
    s.q = static_cast<const Element*>(p.q) + b0 * p.q_batch_stride;
    s.k = static_cast<const Element*>(p.k) + b0 * p.k_batch_stride;
    s.v = static_cast<const Element*>(p.v) + b0 * p.v_batch_stride;
    s.o = static_cast<Element*>(p.o) + b0 * p.o_batch_stride;
    if (p.lse != nullptr) s.lse = p.lse + static_cast<int64_t>(b0) * p.heads_q * p.len_q;
    const dim3 grid(m_blocks, s.heads_q, s.batch);
    attn::ffpa_fwd_kernel<Traits><<<grid, Traits::kThreads, smem, stream>>>(s);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace ffpa::launch
