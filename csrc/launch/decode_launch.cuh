// Definition of the split-KV decode launcher: the split count (launch/heuristics.h), the
// shared-memory opt-in, the split kernel's grid (row tiles x splits, KV heads, batch) and the
// merge. Included only by the generated instantiation files.
#pragma once
#include <cuda_runtime.h>

#include "ffpa/constants.h"
#include "ffpa/kernels/decode_sm80.cuh"
#include "ffpa/traits/decode_traits.h"
#include "launch/fwd_launcher.h"
#include "launch/heuristics.h"

namespace ffpa::launch {

template <typename Element, int kHeadDim, int kHeadDimV>
__global__ void __launch_bounds__(DecodeTraits<kHeadDim, kHeadDimV>::kThreads,
                                  DecodeTraits<kHeadDim, kHeadDimV>::kMinBlocks)
    decode_split_kernel(DecodeParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  kernels::DecodeFwd<Element, kHeadDim, kHeadDimV>::run(p);
#endif
}

template <typename Element, int kHeadDim, int kHeadDimV>
struct DecodeLauncher<Element, kHeadDim, kHeadDimV>::Impl {
  using Traits = DecodeTraits<kHeadDim, kHeadDimV>;
  static inline bool smem_opted_in[64] = {};
  static constexpr auto kernel = &decode_split_kernel<Element, kHeadDim, kHeadDimV>;

  static cudaError_t prepare() { return opt_in_smem(kernel, Traits::kSmemBytes, smem_opted_in); }
  static int row_tiles(const DecodeParams& p) {
    return ((p.heads_q / p.heads_kv) * p.len_q + Traits::kRows - 1) / Traits::kRows;
  }
  static bool params_ok(const DecodeParams& p) {
    if (p.head_dim != kHeadDim || p.head_dim_v != kHeadDimV) return false;
    if (p.batch <= 0 || p.batch > kMaxGridYZ || p.heads_kv <= 0 || p.heads_kv > kMaxGridYZ) return false;
    if (p.heads_q % p.heads_kv != 0 || p.len_q <= 0 || p.len_kv <= 0 || p.num_splits < 1) return false;
    if (p.block_table != nullptr && (p.page_size <= 0 || p.page_size % 16 != 0)) return false;
    if (p.num_splits > 1 && (p.o_part == nullptr || p.lse_part == nullptr)) return false;
    return true;
  }
};

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t DecodeLauncher<Element, kHeadDim, kHeadDimV>::info(int num_stages, bool query_attributes, KernelInfo* out) {
  using Traits = typename Impl::Traits;
  if (num_stages != 0 && num_stages != Traits::kStages) return cudaErrorInvalidValue;
  KernelInfo k;
  k.family = Family::kDecode;
  k.level = 0;
  k.head_dim = kHeadDim;
  k.head_dim_v = kHeadDimV;
  k.block_m = Traits::kRows;
  k.block_n = Traits::kBlockN;
  k.warps_m = 1;
  k.warps_n = Traits::kWarps;
  k.chunk_d = Traits::kChunk;
  k.smem_padded = Traits::KvTile::kAnyRowStep;
  k.group_d = kHeadDimV;
  k.threads = Traits::kThreads;
  k.num_stages = Traits::kStages;
  k.smem_bytes = Traits::kSmemBytes;
  if (query_attributes) {
    const cudaError_t err = query_kernel_attributes(Impl::kernel, &k);
    if (err != cudaSuccess) return err;
  }
  *out = k;
  return cudaSuccess;
}

template <typename Element, int kHeadDim, int kHeadDimV>
int DecodeLauncher<Element, kHeadDim, kHeadDimV>::splits(DecodeParams p) {
  using Traits = typename Impl::Traits;
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) return 1;
  const int per_sm = Impl::prepare() == cudaSuccess
                         ? resident_blocks_per_sm(Impl::kernel, Traits::kThreads, Traits::kSmemBytes)
                         : 1;
  const int64_t base = static_cast<int64_t>(p.batch) * p.heads_kv * Impl::row_tiles(p);
  const int key_tiles = (p.len_kv + Traits::kBlockN - 1) / Traits::kBlockN;
  return choose_decode_splits(base, key_tiles, per_sm, num_sms());
}

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t DecodeLauncher<Element, kHeadDim, kHeadDimV>::run(DecodeParams p, cudaStream_t stream) {
  using Traits = typename Impl::Traits;
  if (!Impl::params_ok(p)) return cudaErrorInvalidValue;
  if (Traits::kSmemBytes > max_smem_optin()) return cudaErrorInvalidConfiguration;
  cudaError_t err = Impl::prepare();
  if (err != cudaSuccess) return err;
  const int64_t blocks_x = static_cast<int64_t>(Impl::row_tiles(p)) * p.num_splits;
  if (blocks_x > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(blocks_x), p.heads_kv, p.batch);
  Impl::kernel<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(p);
  err = cudaGetLastError();
  if (err != cudaSuccess || p.num_splits == 1) return err;
  const int64_t items = static_cast<int64_t>(p.batch) * p.heads_kv * (p.heads_q / p.heads_kv) * p.len_q;
  if (items > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const int threads = kHeadDimV >= 512 ? 128 : (kHeadDimV >= 256 ? 64 : 32);
  kernels::decode_merge_kernel<Element><<<static_cast<unsigned>(items), threads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace ffpa::launch
