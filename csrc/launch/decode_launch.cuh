// Definition of the split-KV decode launcher: the split count and the merge's form
// (launch/heuristics.h), the shared-memory opt-in, the split kernel's grid (row tiles x splits, KV
// heads, batch) and the merge (fused into the split kernel, or decode_merge_launch.cuh). Included
// only by the generated instantiation files.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>

#include "ffpa/constants.h"
#include "ffpa/kernels/decode_sm80.cuh"
#include "ffpa/traits/decode_traits.h"
#include "launch/decode_merge_launch.cuh"
#include "launch/fwd_launcher.h"
#include "launch/heuristics.h"

namespace ffpa::launch {

template <typename Element, int kHeadDim, int kHeadDimV, bool kSharedKV>
__global__ void __launch_bounds__(DecodeTraits<kHeadDim, kHeadDimV, kSharedKV>::kThreads,
                                  DecodeTraits<kHeadDim, kHeadDimV, kSharedKV>::kMinBlocks)
    decode_split_kernel(DecodeParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  ptx::launch_dependents();  // the merge kernel's blocks may take SMs this grid frees (launch_decode_merge)
  kernels::DecodeFwd<Element, kHeadDim, kHeadDimV, kSharedKV>::run(p);
#endif
}

template <typename Element, int kHeadDim, int kHeadDimV>
struct DecodeLauncher<Element, kHeadDim, kHeadDimV>::Impl {
  // One kernel variant: separate K and V, or (pairs with Dv < D: MLA) V read from K's slots.
  template <bool kShared>
  struct Variant {
    using Traits = DecodeTraits<kHeadDim, kHeadDimV, kShared>;
    static inline bool smem_opted_in[64] = {};
    static constexpr auto kernel = &decode_split_kernel<Element, kHeadDim, kHeadDimV, kShared>;
    static cudaError_t prepare() { return opt_in_smem(kernel, Traits::kSmemBytes, smem_opted_in); }
  };
  using Traits = typename Variant<false>::Traits;
  static constexpr auto kernel = Variant<false>::kernel;
  static constexpr bool kHasShared = kHeadDimV < kHeadDim;
  // V is the first Dv columns of K (same memory, same strides): MLA's single cache.
  static bool shared_kv(const DecodeParams& p) { return kHasShared && decode_v_is_k_prefix(p); }
  // Resident blocks of a variant per SM on the current device, queried once per device (the
  // occupancy query costs microseconds of host time on every decode step otherwise).
  template <bool kShared>
  static int blocks_per_sm() {
    using V = Variant<kShared>;
    static int cached[64] = {};
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) dev = 0;
    if (cached[dev] == 0)
      cached[dev] = V::prepare() == cudaSuccess
                        ? resident_blocks_per_sm(V::kernel, V::Traits::kThreads, V::Traits::kSmemBytes)
                        : 1;
    return cached[dev];
  }
  template <bool kShared>
  static int splits(const DecodeParams& p) {
    using V = Variant<kShared>;
    const int per_sm = blocks_per_sm<kShared>();
    const int64_t base = static_cast<int64_t>(p.batch) * p.heads_kv * row_tiles(p);
    const int key_tiles = (p.len_kv + V::Traits::kBlockN - 1) / V::Traits::kBlockN;
    const int sms = num_sms();
    const int one_per_sm = decode_one_per_sm_device(dram_peak_gbps(), sms) ? V::Traits::kOnePerSmMinSplits : 0;
    return choose_decode_splits(base, key_tiles, per_sm, sms, p.seqlens != nullptr && p.batch > 1,
                                p.mask != nullptr, one_per_sm, p.block_table != nullptr && p.page_shift < 0);
  }
  // The split count (as asked, else auto) within the variant's key tiles, and the merge's form.
  template <bool kShared>
  static DecodePlan plan(const DecodeParams& p) {
    using V = Variant<kShared>;
    const int key_tiles = (p.len_kv + V::Traits::kBlockN - 1) / V::Traits::kBlockN;
    DecodePlan out;
    out.splits = clamp_decode_splits(p.num_splits > 0 ? p.num_splits : splits<kShared>(p), key_tiles);
    const int rows = std::min(Traits::kRows, (p.heads_q / p.heads_kv) * p.len_q);
    out.fused_merge = decode_fused_merge(rows, kHeadDimV, out.splits, V::Traits::kThreads, kFusedMergeBatch,
                                         kFusedMergeUnitsSync, decode_merge());
    return out;
  }
  template <bool kShared>
  static cudaError_t launch(const DecodeParams& p, cudaStream_t stream) {
    using V = Variant<kShared>;
    if (V::Traits::kSmemBytes > max_smem_optin()) return cudaErrorInvalidConfiguration;
    cudaError_t err = V::prepare();
    if (err != cudaSuccess) return err;
    const int64_t blocks_x = static_cast<int64_t>(row_tiles(p)) * p.num_splits;
    if (blocks_x > 0x7fffffff) return cudaErrorInvalidConfiguration;
    const dim3 grid(static_cast<unsigned>(blocks_x), p.heads_kv, p.batch);
    DecodeParams run = p;
    run.longest_first = decode_longest_first(p.seqlens != nullptr, p.batch, blocks_x * p.heads_kv * p.batch,
                                             static_cast<int64_t>(blocks_per_sm<kShared>()) * num_sms(), decode_order());
    V::kernel<<<grid, V::Traits::kThreads, V::Traits::kSmemBytes, stream>>>(run);
    return cudaGetLastError();
  }

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
DecodePlan DecodeLauncher<Element, kHeadDim, kHeadDimV>::plan(DecodeParams p) {
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0 || p.len_q <= 0) return {};
  if constexpr (Impl::kHasShared)
    if (Impl::shared_kv(p)) return Impl::template plan<true>(p);
  return Impl::template plan<false>(p);
}

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t DecodeLauncher<Element, kHeadDim, kHeadDimV>::run(DecodeParams p, cudaStream_t stream) {
  if (!Impl::params_ok(p)) return cudaErrorInvalidValue;
  cudaError_t err;
  if constexpr (Impl::kHasShared)
    err = Impl::shared_kv(p) ? Impl::template launch<true>(p, stream) : Impl::template launch<false>(p, stream);
  else
    err = Impl::template launch<false>(p, stream);
  if (err != cudaSuccess || p.num_splits == 1 || p.merge_counters != nullptr) return err;  // one split, or merged in it
  return launch_decode_merge<Element, kHeadDimV>(p, stream);
}

}  // namespace ffpa::launch
