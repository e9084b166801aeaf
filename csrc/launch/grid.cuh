// The grid of the non-persistent forward kernels, (query blocks x groups, query heads, batch),
// launched in batch slices because gridDim.z is capped at kMaxGridYZ (65535): each slice offsets the
// pointers. `groups` blocks share each query block (FFPA L2's Dv groups; 1 elsewhere). Torch-free.
#pragma once
#include <cuda_runtime.h>

#include "ffpa/constants.h"
#include "ffpa/attn/mask.cuh"
#include "ffpa/params.h"

namespace ffpa::launch {

template <typename Element, typename Kernel>
cudaError_t launch_batched(Kernel kernel, const FwdParams& p, int block_m, int threads, int smem,
                           cudaStream_t stream, int groups = 1) {
  if (p.heads_q > kMaxGridYZ) return cudaErrorInvalidConfiguration;
  const int m_blocks = (p.len_q + block_m - 1) / block_m;
  for (int b0 = 0; b0 < p.batch; b0 += kMaxGridYZ) {
    FwdParams s = p;
    s.batch = p.batch - b0 < kMaxGridYZ ? p.batch - b0 : kMaxGridYZ;
    s.q = static_cast<const Element*>(p.q) + b0 * p.q_batch_stride;
    s.k = static_cast<const Element*>(p.k) + b0 * p.k_batch_stride;
    s.v = static_cast<const Element*>(p.v) + b0 * p.v_batch_stride;
    s.o = static_cast<Element*>(p.o) + b0 * p.o_batch_stride;
    if (p.lse != nullptr) s.lse = p.lse + static_cast<int64_t>(b0) * p.heads_q * p.len_q;
    if (p.mask != nullptr)
      s.mask = static_cast<const char*>(p.mask) + b0 * p.mask_batch_stride * attn::mask_elem_bytes(p.mask_kind);
    if (p.block_map != nullptr) s.block_map = p.block_map + b0 * p.block_map_batch_stride;
    const dim3 grid(static_cast<unsigned>(m_blocks) * groups, s.heads_q, s.batch);
    kernel<<<grid, threads, smem, stream>>>(s);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// Checks shared by every launcher before it launches.
inline bool params_ok(const FwdParams& p, int head_dim, int head_dim_v) {
  if (p.head_dim != head_dim || p.head_dim_v != head_dim_v) return false;
  if (p.batch <= 0 || p.len_q <= 0 || p.len_kv <= 0 || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) return false;
  if ((p.mask == nullptr) != (p.mask_kind == MaskKind::kNone)) return false;
  return true;
}

}  // namespace ffpa::launch
