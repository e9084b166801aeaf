// Definition of the decode launcher on Hopper (sm_90a builds, compute capability 9.0 only, which the
// registry's arch says). Per call, where the group is a power of two, there is no attn_mask, pages
// are powers of two and TMA can describe q and the caches (launch/heuristics.h has the row limits):
//   - MLA's single cache (V = K[..., :Dv]) with at most kDecodeNarrowMaxRows packed rows per KV head:
//     the transposed narrow kernel (kernels/decode_sm90_narrow.cuh);
//   - kDecodeWgmmaMinRows rows or more: the 64-row wgmma kernel (kernels/decode_sm90_ws.cuh);
// else the mma.sync decode kernel (DecodeLauncher, whose instantiation is the "any" line of the same
// family, which every build that has this one compiles). Included only by the generated
// instantiation files.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ffpa/kernels/decode_sm90_narrow.cuh"
#include "ffpa/kernels/decode_sm90_ws.cuh"
#include "ffpa/traits/ffpa_traits.h"
#include "launch/decode_merge_launch.cuh"
#include "launch/fwd_launcher.h"
#include "launch/heuristics.h"
#include "launch/tma_desc.h"
#include "launch/ws_pipeline_info.h"

namespace ffpa::launch {

template <typename Element, int kHeadDim, int kHeadDimV>
struct DecodeWsLauncher<Element, kHeadDim, kHeadDimV>::Impl {
  using Traits = FfpaWsTraits<Element, kHeadDim, kHeadDimV>;
  using Problem = attn::DecodeWsProblem<Traits>;
  using Fallback = DecodeLauncher<Element, kHeadDim, kHeadDimV>;
  static inline bool opted_in[64] = {};
  static attn::DecodeKernelWs kernel() { return attn::decode_split_ws_kernel<Traits>; }
  static constexpr TmaElem kElem = std::is_same_v<Element, __half> ? TmaElem::kFloat16 : TmaElem::kBFloat16;

  // Blocks of one split: 64-row blocks x column groups x KV heads x batch.
  static int64_t base_blocks(const DecodeParams& p) {
    const int group = p.heads_q / p.heads_kv;
    return static_cast<int64_t>(Problem::row_blocks(group, p.len_q)) * Traits::kGroups * p.heads_kv * p.batch;
  }

  // The call's shape is this kernel's (TMA's say comes at encoding).
  static bool takes(const DecodeParams& p) {
    if (p.head_dim != kHeadDim || p.head_dim_v != kHeadDimV || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) return false;
    const int group = p.heads_q / p.heads_kv;
    if ((group & (group - 1)) != 0 || static_cast<int64_t>(group) * p.len_q < kDecodeWgmmaMinRows) return false;
    if (p.mask != nullptr || p.len_kv <= 0 || p.batch <= 0) return false;
    if (p.block_table != nullptr && (p.page_shift < 4 || p.page_size > 256)) return false;
    return Traits::kSmemBytes <= max_smem_optin();
  }

  static cudaError_t encode_maps(const DecodeParams& p, attn::DecodeTmaMaps* m) {
    const int group = p.heads_q / p.heads_kv;
    const int rows_per_i = std::min(group, Traits::kBlockM);
    const uint64_t q_dims[5] = {static_cast<uint64_t>(kHeadDim), static_cast<uint64_t>(group),
                                static_cast<uint64_t>(p.len_q), static_cast<uint64_t>(p.heads_kv),
                                static_cast<uint64_t>(p.batch)};
    const int64_t q_strides[5] = {1, p.q_head_stride, p.q_row_stride, p.q_head_stride * group, p.q_batch_stride};
    const uint32_t q_box[5] = {64, static_cast<uint32_t>(rows_per_i), static_cast<uint32_t>(Traits::kBlockM / rows_per_i),
                               1, 1};
    cudaError_t err = encode_strided_tma(&m->q, kElem, p.q, 5, q_dims, q_strides, q_box);
    // Rows of the cache's dim 1: a sequence's positions, or a page's.
    const bool paged = p.block_table != nullptr;
    if (err == cudaSuccess)
      err = encode_attn_tma(&m->k, kElem, p.k, kHeadDim, p.page_size, p.heads_kv, p.kv_pages, p.k_row_stride,
                            p.k_head_stride, p.k_batch_stride, paged ? std::min(p.page_size, Traits::kBlockN) : Traits::kBlockN);
    if (err == cudaSuccess)
      err = encode_attn_tma(&m->v, kElem, p.v, kHeadDimV, p.page_size, p.heads_kv, p.kv_pages, p.v_row_stride,
                            p.v_head_stride, p.v_batch_stride, paged ? std::min(p.page_size, Traits::kVKeys) : Traits::kVKeys);
    return err;
  }

  // ---- the narrow kernel (decode_sm90_narrow.cuh): MLA's single cache with fewer rows ----------
  static constexpr bool kHasNarrow = kHeadDimV < kHeadDim;
  // (a small stand-in where the pair has no narrow kernel: never launched)
  using NarrowTraits = DecodeNarrowTraits<Element, kHasNarrow ? kHeadDim : 128, kHasNarrow ? kHeadDimV : 64>;
  static inline bool narrow_opted_in[64] = {};
  static int narrow_row_blocks(const DecodeParams& p) {
    const int group = p.heads_q / p.heads_kv, rows_per_i = std::min(group, NarrowTraits::kRows);
    const int positions = NarrowTraits::kRows / rows_per_i;
    return (group / rows_per_i) * ((p.len_q + positions - 1) / positions);
  }
  static bool takes_narrow(const DecodeParams& p) {
    if constexpr (!kHasNarrow) {
      return false;
    } else {
      if (p.head_dim != kHeadDim || p.head_dim_v != kHeadDimV || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) return false;
      const bool shared = p.v == p.k && p.v_batch_stride == p.k_batch_stride && p.v_row_stride == p.k_row_stride &&
                          p.v_head_stride == p.k_head_stride;
      const int group = p.heads_q / p.heads_kv;
      if (!shared || (group & (group - 1)) != 0 || static_cast<int64_t>(group) * p.len_q > kDecodeNarrowMaxRows) return false;
      if (p.mask != nullptr || p.len_kv <= 0 || p.batch <= 0) return false;
      if (p.block_table != nullptr && (p.page_shift < 4 || p.page_size > 256)) return false;
      return NarrowTraits::kSmemBytes <= max_smem_optin();
    }
  }
  static cudaError_t run_narrow(const DecodeParams& p, cudaStream_t stream) {
    if constexpr (!kHasNarrow) return cudaErrorNotSupported;
    if (!takes_narrow(p) || p.num_splits < 1 || (p.num_splits > 1 && (p.o_part == nullptr || p.lse_part == nullptr)))
      return cudaErrorNotSupported;
    const int64_t blocks_x = static_cast<int64_t>(narrow_row_blocks(p)) * p.num_splits;
    if (blocks_x > INT32_MAX) return cudaErrorNotSupported;
    alignas(64) attn::DecodeTmaMaps maps;
    std::memset(&maps, 0, sizeof(maps));
    const int group = p.heads_q / p.heads_kv, rows_per_i = std::min(group, NarrowTraits::kRows);
    const uint64_t q_dims[5] = {static_cast<uint64_t>(kHeadDim), static_cast<uint64_t>(group),
                                static_cast<uint64_t>(p.len_q), static_cast<uint64_t>(p.heads_kv),
                                static_cast<uint64_t>(p.batch)};
    const int64_t q_strides[5] = {1, p.q_head_stride, p.q_row_stride, p.q_head_stride * group, p.q_batch_stride};
    const uint32_t q_box[5] = {64, static_cast<uint32_t>(rows_per_i), static_cast<uint32_t>(NarrowTraits::kRows / rows_per_i), 1, 1};
    if (encode_strided_tma(&maps.q, kElem, p.q, 5, q_dims, q_strides, q_box) != cudaSuccess) return cudaErrorNotSupported;
    const bool paged = p.block_table != nullptr;
    if (encode_attn_tma(&maps.k, kElem, p.k, kHeadDim, p.page_size, p.heads_kv, p.kv_pages, p.k_row_stride,
                        p.k_head_stride, p.k_batch_stride,
                        paged ? std::min(p.page_size, NarrowTraits::kBlockN) : NarrowTraits::kBlockN) != cudaSuccess)
      return cudaErrorNotSupported;
    if constexpr (kHasNarrow) {
      const auto fn = attn::decode_split_narrow_kernel<NarrowTraits>;
      cudaError_t err = opt_in_smem(fn, NarrowTraits::kSmemBytes, narrow_opted_in);
      if (err != cudaSuccess) return err;
      const dim3 grid(static_cast<unsigned>(blocks_x), p.heads_kv, p.batch);
      fn<<<grid, NarrowTraits::kThreads, NarrowTraits::kSmemBytes, stream>>>(p, maps);
      err = cudaGetLastError();
      if (err != cudaSuccess || p.num_splits == 1) return err;
      return launch_decode_merge<Element, kHeadDimV>(p, stream);
    }
    return cudaErrorNotSupported;
  }

  // cudaErrorNotSupported: this call is the fallback's.
  static cudaError_t run_ws(const DecodeParams& p, cudaStream_t stream) {
    if (!takes(p) || p.num_splits < 1 || (p.num_splits > 1 && (p.o_part == nullptr || p.lse_part == nullptr)))
      return cudaErrorNotSupported;
    const int64_t blocks = base_blocks(p) * p.num_splits;
    if (blocks > INT32_MAX) return cudaErrorNotSupported;
    alignas(64) attn::DecodeTmaMaps maps;
    if (encode_maps(p, &maps) != cudaSuccess) return cudaErrorNotSupported;
    const auto fn = kernel();
    cudaError_t err = opt_in_smem(fn, Traits::kSmemBytes, opted_in);
    if (err != cudaSuccess) return err;
    fn<<<static_cast<unsigned>(blocks), Traits::kThreads, Traits::kSmemBytes, stream>>>(p, maps);
    err = cudaGetLastError();
    if (err != cudaSuccess || p.num_splits == 1) return err;
    return launch_decode_merge<Element, kHeadDimV>(p, stream);
  }
};

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t DecodeWsLauncher<Element, kHeadDim, kHeadDimV>::info(int num_stages, bool query_attributes,
                                                                 KernelInfo* out) {
  using Traits = typename Impl::Traits;
  if (num_stages != 0) return Impl::Fallback::info(num_stages, query_attributes, out);
  KernelInfo k;
  k.family = Family::kDecode;
  k.level = 0;
  return ws_pipeline_info<Traits>(k, Impl::kernel(), query_attributes, out);
}

// One block per SM (the kernel's shared memory), 128-key tiles.
template <typename Element, int kHeadDim, int kHeadDimV>
int DecodeWsLauncher<Element, kHeadDim, kHeadDimV>::splits(DecodeParams p) {
  if (Impl::takes_narrow(p)) {
    const int key_tiles = (p.len_kv + Impl::NarrowTraits::kBlockN - 1) / Impl::NarrowTraits::kBlockN;
    return choose_decode_splits(static_cast<int64_t>(Impl::narrow_row_blocks(p)) * p.heads_kv * p.batch, key_tiles, 1,
                                num_sms());
  }
  if (!Impl::takes(p)) return Impl::Fallback::splits(p);
  const int key_tiles = (p.len_kv + Impl::Traits::kBlockN - 1) / Impl::Traits::kBlockN;
  return choose_decode_splits(Impl::base_blocks(p), key_tiles, 1, num_sms());
}

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t DecodeWsLauncher<Element, kHeadDim, kHeadDimV>::run(DecodeParams p, cudaStream_t stream) {
  cudaError_t err = Impl::run_narrow(p, stream);
  if (err != cudaErrorNotSupported) return err;
  err = Impl::run_ws(p, stream);
  if (err != cudaErrorNotSupported) return err;
  return Impl::Fallback::run(p, stream);
}

}  // namespace ffpa::launch
