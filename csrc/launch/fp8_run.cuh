// What both FP8 launchers do around their kernel (launch/fa2_fp8_launch.cuh up to D = 256,
// launch/ffpa_fp8_launch.cuh past it): the parameter checks, the V^T pre-pass into p.vt
// (kernels/fp8_v_transpose.cuh; keys in the FA-2-style kernel's fragment order where kPermute) unless
// the kernel transposes V itself (kPrepass false), and the kernel in the output dtype p.out_fp16 picks.
// Included only by the generated instantiation files.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ffpa/constants.h"
#include "ffpa/kernels/fp8_v_transpose.cuh"
#include "ffpa/params.h"
#include "launch/heuristics.h"

namespace ffpa::launch {

// L: the launcher (L::Traits' kBlockM, kBlockN and kSmemBytes; L::encode_maps(p, &maps) and
// L::launch<Out>(p, maps, items, stream)); `items`: the kBlockM query rows of each (batch, head), which the launcher
// sizes its grid by.
// kPrepass false: the kernel reads V as it lies (p.vt is not used).
template <typename L, typename Maps, int kHeadDim, bool kPermute, bool kPrepass = true>
cudaError_t fp8_run(const FwdParams& p, cudaStream_t stream) {
  using Traits = typename L::Traits;
  if (p.head_dim != kHeadDim || p.head_dim_v != kHeadDim)
    return cudaErrorInvalidValue;
  if (kPrepass && (p.vt == nullptr || p.vt_len % 32 != 0 || p.vt_len < p.len_kv))
    return cudaErrorInvalidValue;
  if (p.mask != nullptr &&
      (p.block_map == nullptr || p.block_map_m != Traits::kBlockM || p.block_map_n != Traits::kBlockN))
    return cudaErrorInvalidValue;  // a mask comes with its block map at the kernel's tile
  if (Traits::kSmemBytes > max_smem_optin()) return cudaErrorNotSupported;
  const int64_t items = static_cast<int64_t>((p.len_q + Traits::kBlockM - 1) / Traits::kBlockM) * p.heads_q * p.batch;
  constexpr int kTKeys = kernels::fp8_transpose_keys(kHeadDim);
  const int64_t key_blocks = kPrepass ? (p.vt_len + kTKeys - 1) / kTKeys : 0;
  if (items > INT32_MAX || key_blocks > INT32_MAX || p.heads_kv > kMaxGridYZ || p.batch > kMaxGridYZ)
    return cudaErrorNotSupported;
  alignas(64) Maps maps;
  if (L::encode_maps(p, &maps) != cudaSuccess) return cudaErrorNotSupported;
  if constexpr (kPrepass) {
    kernels::fp8_v_transpose_kernel<kHeadDim, kPermute>
        <<<dim3(static_cast<unsigned>(key_blocks), p.heads_kv, p.batch), kernels::kFp8TransposeThreads, 0, stream>>>(p);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return p.out_fp16 ? L::template launch<__half>(p, maps, items, stream)
                    : L::template launch<__nv_bfloat16>(p, maps, items, stream);
}

}  // namespace ffpa::launch
