// The attn_mask block-map pre-pass: summarises each (query block, key block) tile of the mask so
// the forward kernels skip fully masked tiles and read the mask only where a tile is mixed.
// A non-template kernel: included by exactly one translation unit (csrc/launch/mask_block_map.cu).
#pragma once
#include "ffpa/mask.cuh"

namespace ffpa::attn {

// One block per tile: grid (n_blocks, m_blocks, mask_batches * mask_heads). A tile is kBlockSkip
// when no valid element attends (all false / all -inf), kBlockFull when every valid element is
// true (bool) or exactly 0 (float: nothing to add), else kBlockPartial. Elements past len_q /
// len_kv do not count.
__global__ void mask_block_map_kernel(const FwdParams p, int mask_heads, uint8_t* out) {
  const int nb = blockIdx.x, mb = blockIdx.y;
  const int b = blockIdx.z / mask_heads, h = blockIdx.z % mask_heads;
  const MaskRef m = mask_ref(p, b, h);
  const int r0 = mb * p.block_map_m, c0 = nb * p.block_map_n;
  const int rows = min(p.block_map_m, p.len_q - r0), cols = min(p.block_map_n, p.len_kv - c0);
  bool any_keep = false, all_plain = true;
  for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const float x = mask_value(m, r0 + i / cols, c0 + i % cols);
    any_keep |= x != -CUDART_INF_F;
    all_plain &= x == 0.f;
  }
  any_keep = __syncthreads_or(any_keep);
  all_plain = __syncthreads_and(all_plain);
  if (threadIdx.x == 0)
    out[(static_cast<int64_t>(blockIdx.z) * gridDim.y + mb) * gridDim.x + nb] =
        !any_keep ? kBlockSkip : (all_plain ? kBlockFull : kBlockPartial);
}

}  // namespace ffpa::attn
