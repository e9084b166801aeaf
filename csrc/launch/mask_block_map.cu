// Launch of the attn_mask block-map pre-pass (kernel in ffpa/attn/mask.cuh): one small block per
// (mask batch, mask head, query block, key block) tile. Torch-free.
#include "ffpa/constants.h"
#include "ffpa/kernels/mask_block_map.cuh"
#include "launch/ffpa_fwd.h"

namespace ffpa::launch {

int64_t block_map_bytes(int mask_batches, int mask_heads, int len_q, int len_kv, int block_m, int block_n) {
  const int64_t m_blocks = (len_q + block_m - 1) / block_m;
  const int64_t n_blocks = (len_kv + block_n - 1) / block_n;
  return static_cast<int64_t>(mask_batches) * mask_heads * m_blocks * n_blocks;
}

cudaError_t build_block_map(FwdParams& p, int mask_batches, int mask_heads, int block_m, int block_n,
                            uint8_t* map, cudaStream_t stream) {
  if (p.mask == nullptr || map == nullptr || block_m <= 0 || block_n <= 0 || mask_batches <= 0 || mask_heads <= 0)
    return cudaErrorInvalidValue;
  const int m_blocks = (p.len_q + block_m - 1) / block_m;
  const int n_blocks = (p.len_kv + block_n - 1) / block_n;
  const int64_t per_head = static_cast<int64_t>(m_blocks) * n_blocks;
  if (m_blocks > kMaxGridYZ || static_cast<int64_t>(mask_batches) * mask_heads > kMaxGridYZ) return cudaErrorInvalidConfiguration;
  p.block_map = map;
  p.block_map_m = block_m;
  p.block_map_n = block_n;
  p.block_map_n_blocks = n_blocks;
  p.block_map_head_stride = mask_heads > 1 ? per_head : 0;
  p.block_map_batch_stride = mask_batches > 1 ? per_head * mask_heads : 0;
  const dim3 grid(n_blocks, m_blocks, mask_batches * mask_heads);
  attn::mask_block_map_kernel<<<grid, 128, 0, stream>>>(p, mask_heads, map);
  return cudaGetLastError();
}

}  // namespace ffpa::launch
