// Definition of the decode launcher on Hopper (sm_90a builds, compute capability 9.0 only, which the
// registry's arch says). Per call, where the group is a power of two, there is no attn_mask, pages
// are powers of two and TMA can describe q and the caches (launch/heuristics.h has the row limits):
//   - MLA's single cache (V = K[..., :Dv]) with at most kDecodeNarrowMaxRows packed rows per KV head:
//     the transposed narrow kernel (kernels/decode_sm90_narrow.cuh); with more, the MLA kernel
//     (kernels/decode_sm90_mla.cuh: Q resident, V read from K's stages);
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

#include "ffpa/kernels/decode_sm90_mla.cuh"
#include "ffpa/kernels/decode_sm90_narrow.cuh"
#include "ffpa/kernels/decode_sm90_ws.cuh"
#include "ffpa/traits/ffpa_traits.h"
#include "launch/cluster_launch.h"
#include "launch/decode_merge_launch.cuh"
#include "launch/fwd_launcher.h"
#include "launch/heuristics.h"
#include "launch/tma_desc.h"
#include "launch/ws_pipeline_info.h"

namespace ffpa::launch {

template <typename Element, int kHeadDim, int kHeadDimV>
struct DecodeWsLauncher<Element, kHeadDim, kHeadDimV>::Impl {
  using Traits = FfpaWsTraits<Element, kHeadDim, kHeadDimV>;
  using Fallback = DecodeLauncher<Element, kHeadDim, kHeadDimV>;
  static inline bool opted_in[64] = {};
  static attn::DecodeKernelWs kernel() { return attn::decode_split_ws_kernel<Traits>; }
  static constexpr TmaElem kElem = std::is_same_v<Element, __half> ? TmaElem::kFloat16 : TmaElem::kBFloat16;

  // Blocks of one split: 64-row blocks x column groups x KV heads x batch.
  static int64_t base_blocks(const DecodeParams& p) {
    const RowPacking<Traits::kBlockM> pack(p.heads_q / p.heads_kv, p.len_q);
    return static_cast<int64_t>(pack.blocks) * Traits::kGroups * p.heads_kv * p.batch;
  }

  // What both Hopper kernels need of a call: these head dims, a power-of-two group, no attn_mask,
  // power-of-two pages (TMA's say comes at encoding).
  static bool hopper_ok(const DecodeParams& p) {
    if (p.head_dim != kHeadDim || p.head_dim_v != kHeadDimV || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) return false;
    const int group = p.heads_q / p.heads_kv;
    if ((group & (group - 1)) != 0 || p.mask != nullptr || p.len_kv <= 0 || p.batch <= 0) return false;
    return p.block_table == nullptr || (p.page_shift >= 4 && p.page_size <= 256);
  }
  static int64_t packed_rows(const DecodeParams& p) { return static_cast<int64_t>(p.heads_q / p.heads_kv) * p.len_q; }

  // The 64-row kernel's calls.
  static bool takes(const DecodeParams& p) {
    return hopper_ok(p) && packed_rows(p) >= kDecodeWgmmaMinRows && Traits::kSmemBytes <= max_smem_optin();
  }

  // The rank-5 Q map (head dim, head in group, position, KV head, batch) in boxes of one block's
  // kRows packed rows (RowPacking).
  template <int kRows>
  static cudaError_t encode_q(const DecodeParams& p, CUtensorMap* map) {
    const int group = p.heads_q / p.heads_kv;
    const RowPacking<kRows> pack(group, p.len_q);
    const uint64_t dims[5] = {static_cast<uint64_t>(kHeadDim), static_cast<uint64_t>(group),
                              static_cast<uint64_t>(p.len_q), static_cast<uint64_t>(p.heads_kv),
                              static_cast<uint64_t>(p.batch)};
    const int64_t strides[5] = {1, p.q_head_stride, p.q_row_stride, p.q_head_stride * group, p.q_batch_stride};
    const uint32_t box[5] = {64, static_cast<uint32_t>(pack.rows_per_i), static_cast<uint32_t>(pack.positions), 1, 1};
    return encode_strided_tma(map, kElem, p.q, 5, dims, strides, box);
  }

  // A cache's rank-4 map: rows of dim 1 are a sequence's positions, or a page's; boxes of box_rows
  // rows (at most a page).
  static cudaError_t encode_cache(const DecodeParams& p, CUtensorMap* map, const void* base, int cols, int64_t row_stride,
                                  int64_t head_stride, int64_t page_stride, int box_rows) {
    const int rows = p.block_table != nullptr ? std::min(p.page_size, box_rows) : box_rows;
    return encode_attn_tma(map, kElem, base, cols, p.page_size, p.heads_kv, p.kv_pages, row_stride, head_stride,
                           page_stride, rows);
  }

  static cudaError_t encode_maps(const DecodeParams& p, attn::DecodeTmaMaps* m) {
    cudaError_t err = encode_q<Traits::kBlockM>(p, &m->q);
    if (err == cudaSuccess)
      err = encode_cache(p, &m->k, p.k, kHeadDim, p.k_row_stride, p.k_head_stride, p.k_batch_stride, Traits::kBlockN);
    if (err == cudaSuccess) {  // V: a whole stage's column group per load (per chunk where pages are shorter)
      const int rows = p.block_table != nullptr ? std::min(p.page_size, Traits::kVKeys) : Traits::kVKeys;
      err = encode_attn_tma_chunked(&m->v, kElem, p.v, kHeadDimV, p.page_size, p.heads_kv, p.kv_pages, p.v_row_stride,
                                    p.v_head_stride, p.v_batch_stride, rows,
                                    rows == Traits::kVKeys ? Traits::kGroupCols / 64 : 1);
    }
    return err;
  }

  // ---- the narrow kernel (decode_sm90_narrow.cuh): MLA's single cache with fewer rows ----------
  static constexpr bool kHasNarrow = kHeadDimV < kHeadDim;
  // (a small stand-in where the pair has no narrow kernel: never launched)
  using NarrowTraits = DecodeNarrowTraits<Element, kHasNarrow ? kHeadDim : 128, kHasNarrow ? kHeadDimV : 64>;
  static inline bool narrow_opted_in[64] = {};
  // Row blocks per KV head of a kernel whose blocks take Tr::kRows packed rows.
  template <typename Tr>
  static int row_blocks(const DecodeParams& p) {
    return RowPacking<Tr::kRows>(p.heads_q / p.heads_kv, p.len_q).blocks;
  }

  static bool takes_narrow(const DecodeParams& p) {
    return kHasNarrow && decode_v_is_k_prefix(p) && hopper_ok(p) && packed_rows(p) <= kDecodeNarrowMaxRows &&
           NarrowTraits::kSmemBytes <= max_smem_optin();
  }
  static cudaError_t run_narrow(const DecodeParams& p, cudaStream_t stream) {
    if constexpr (kHasNarrow) {
      if (!takes_narrow(p)) return cudaErrorNotSupported;
      return launch_single_cache<NarrowTraits>(p, stream, attn::decode_split_narrow_kernel<NarrowTraits>, narrow_opted_in,
                                               p.merge_counters != nullptr);  // merged in the kernel (fused or spread)
    }
    return cudaErrorNotSupported;
  }

  // The split count of a kernel on MLA's single cache (blocks of Tr::kRows rows, Tr::kBlockN-key tiles).
  template <typename Tr>
  static int single_cache_splits(const DecodeParams& p) {
    const int key_tiles = (p.len_kv + Tr::kBlockN - 1) / Tr::kBlockN;
    const int s = p.num_splits > 0
                      ? p.num_splits
                      : choose_decode_splits(static_cast<int64_t>(row_blocks<Tr>(p)) * p.heads_kv * p.batch, key_tiles, 1,
                                             num_sms());
    return clamp_decode_splits(s, key_tiles);
  }

  // A kernel on MLA's single cache (the narrow or the MLA kernel: K's map only, V read from its
  // stages), grid (row blocks x splits, KV heads, batch); then the merge kernel unless the split
  // kernel merges (`fused_merge`).
  template <typename Tr>
  static cudaError_t launch_single_cache(const DecodeParams& p, cudaStream_t stream, attn::DecodeKernelWs fn,
                                         bool (&opted)[64], bool fused_merge) {
    if (p.num_splits < 1 || (p.num_splits > 1 && (p.o_part == nullptr || p.lse_part == nullptr)))
      return cudaErrorNotSupported;
    const int64_t blocks_x = static_cast<int64_t>(row_blocks<Tr>(p)) * p.num_splits;
    if (blocks_x > INT32_MAX) return cudaErrorNotSupported;
    alignas(64) attn::DecodeTmaMaps maps;
    std::memset(&maps, 0, sizeof(maps));  // v stays unset
    if (encode_q<Tr::kRows>(p, &maps.q) != cudaSuccess ||
        encode_cache(p, &maps.k, p.k, kHeadDim, p.k_row_stride, p.k_head_stride, p.k_batch_stride, Tr::kBlockN) !=
            cudaSuccess)
      return cudaErrorNotSupported;
    cudaError_t err = opt_in_smem(fn, Tr::kSmemBytes, opted);
    if (err != cudaSuccess) return err;
    const dim3 grid(static_cast<unsigned>(blocks_x), p.heads_kv, p.batch);
    DecodeParams run = p;  // one block per SM (the kernels' shared memory)
    run.longest_first =
        decode_longest_first(p.seqlens != nullptr, p.batch, blocks_x * p.heads_kv * p.batch, num_sms(), decode_order());
    // The spread merge: every block resident (the blocks of a row block wait for each other), or the merge kernel.
    if (run.merge_spread) {
      err = launch_cooperative(fn, grid, dim3(Tr::kThreads), Tr::kSmemBytes, stream, run, maps);
      if (err == cudaSuccess) return err;
      (void)cudaGetLastError();
      run.merge_counters = nullptr, run.merge_spread = 0, run.balanced_splits = 0, fused_merge = false;
    }
    fn<<<grid, Tr::kThreads, Tr::kSmemBytes, stream>>>(run, maps);
    err = cudaGetLastError();
    if (err != cudaSuccess || p.num_splits == 1 || fused_merge) return err;
    return launch_decode_merge<Element, kHeadDimV>(p, stream);
  }

  // ---- the MLA kernel (decode_sm90_mla.cuh): MLA's single cache with more rows -------------------
  // (Q and two stages of D columns fit shared memory up to D = 576)
  static constexpr bool kHasMla = kHasNarrow && kHeadDimV % 128 == 0 && kHeadDimV <= 512 && kHeadDim <= 576;
  using MlaTraits = DecodeMlaTraits<Element, kHasMla ? kHeadDim : 128, kHasMla ? kHeadDimV : 128>;
  static inline bool mla_opted_in[64] = {};
  static bool takes_mla(const DecodeParams& p) {
    return kHasMla && decode_v_is_k_prefix(p) && hopper_ok(p) && packed_rows(p) > kDecodeNarrowMaxRows &&
           MlaTraits::kSmemBytes <= max_smem_optin();
  }
  static cudaError_t run_mla(const DecodeParams& p, cudaStream_t stream) {
    if constexpr (kHasMla) {
      if (!takes_mla(p)) return cudaErrorNotSupported;
      return launch_single_cache<MlaTraits>(p, stream, attn::decode_split_mla_kernel<MlaTraits>, mla_opted_in, false);
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
    // (this kernel has no fused merge: plan() never asks for one, and merge_counters is not read)
    DecodeParams run = p;  // one block per SM (the kernel's shared memory)
    run.longest_first = decode_longest_first(p.seqlens != nullptr, p.batch, blocks, num_sms(), decode_order());
    fn<<<static_cast<unsigned>(blocks), Traits::kThreads, Traits::kSmemBytes, stream>>>(run, maps);
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

// One block per SM (the kernels' shared memory); the narrow kernel's 64-key tiles (its merge spread over
// the split blocks where decode_spread_merge says, else fused where decode_fused_merge says), the MLA
// kernel's 64-key tiles and the 64-row kernel's 128-key tiles
// (the merge kernel always).
template <typename Element, int kHeadDim, int kHeadDimV>
DecodePlan DecodeWsLauncher<Element, kHeadDim, kHeadDimV>::plan(DecodeParams p) {
  DecodePlan out;
  if (Impl::takes_narrow(p)) {
    using Tr = typename Impl::NarrowTraits;
    out.splits = Impl::template single_cache_splits<Tr>(p);
    const int rows = static_cast<int>(std::min<int64_t>(Tr::kRows, Impl::packed_rows(p)));
    const int64_t blocks = static_cast<int64_t>(Impl::template row_blocks<Tr>(p)) * out.splits * p.heads_kv * p.batch;
    out.spread_merge = decode_spread_merge(out.splits, blocks, num_sms(), decode_merge());
    out.balanced = out.spread_merge && Impl::template row_blocks<Tr>(p) == 1 &&
                   decode_balanced_splits(p.seqlens != nullptr, p.batch, out.splits, decode_order());
    out.fused_merge = !out.spread_merge && decode_fused_merge(rows, kHeadDimV, out.splits, 32 * Tr::kConsumerWarps,
                                                              kFusedMergeBatch, kFusedMergeUnitsNarrow, decode_merge());
    return out;
  }
  if (Impl::takes_mla(p)) {
    out.splits = Impl::template single_cache_splits<typename Impl::MlaTraits>(p);
    return out;
  }
  if (!Impl::takes(p)) return Impl::Fallback::plan(p);
  const int key_tiles = (p.len_kv + Impl::Traits::kBlockN - 1) / Impl::Traits::kBlockN;
  const int s = p.num_splits > 0 ? p.num_splits : choose_decode_splits(Impl::base_blocks(p), key_tiles, 1, num_sms());
  out.splits = clamp_decode_splits(s, key_tiles);
  return out;
}

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t DecodeWsLauncher<Element, kHeadDim, kHeadDimV>::run(DecodeParams p, cudaStream_t stream) {
  cudaError_t err = Impl::run_narrow(p, stream);
  if (err != cudaErrorNotSupported) return err;
  err = Impl::run_mla(p, stream);
  if (err != cudaErrorNotSupported) return err;
  err = Impl::run_ws(p, stream);
  if (err != cudaErrorNotSupported) return err;
  return Impl::Fallback::run(p, stream);
}

}  // namespace ffpa::launch
