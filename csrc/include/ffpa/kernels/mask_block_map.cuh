// The attn_mask block-map pre-pass: summarises each (query block, key block) tile of the mask so
// the forward kernels skip fully masked tiles and read the mask only where a tile is mixed.
// A non-template kernel: included by exactly one translation unit (csrc/launch/mask_block_map.cu).
#pragma once
#include "ffpa/attn/mask.cuh"

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
  const int eb = mask_elem_bytes(m.kind);
  // Rows of contiguous columns whose 16-byte units are aligned (the common case: a dense or
  // broadcast mask with a 16-byte multiple row pitch) are read 16 bytes at a time; the rest
  // element by element. The block map is built on every masked call, so its cost counts.
  const bool vec = m.col_stride == 1 && (reinterpret_cast<uintptr_t>(m.base) % 16) == 0 &&
                   (m.row_stride * eb) % 16 == 0 && (c0 * eb) % 16 == 0 && (cols * eb) % 16 == 0;
  if (vec) {
    const int units = cols * eb / 16;
    for (int i = threadIdx.x; i < rows * units; i += blockDim.x) {
      const int r = i / units, u = i % units;
      const uint4 w = *reinterpret_cast<const uint4*>(m.base + ((r0 + r) * m.row_stride + c0) * eb + u * 16);
      const uint32_t word[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if (m.kind == MaskKind::kBool) {
          any_keep |= word[k] != 0u;
          all_plain &= ((word[k] - 0x01010101u) & ~word[k] & 0x80808080u) == 0u;  // no zero (false) byte
        } else if (m.kind == MaskKind::kFloat32) {
          const float x = __uint_as_float(word[k]);
          any_keep |= x != -CUDART_INF_F;
          all_plain &= x == 0.f;
        } else {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const uint16_t bits = static_cast<uint16_t>(word[k] >> (16 * half));
            const float x = m.kind == MaskKind::kFloat16 ? __half2float(__ushort_as_half(bits))
                                                         : __bfloat162float(__ushort_as_bfloat16(bits));
            any_keep |= x != -CUDART_INF_F;
            all_plain &= x == 0.f;
          }
        }
      }
    }
  } else {
    for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
      const float x = mask_value(m, r0 + i / cols, c0 + i % cols);
      any_keep |= x != -CUDART_INF_F;
      all_plain &= x == 0.f;
    }
  }
  any_keep = __syncthreads_or(any_keep);
  all_plain = __syncthreads_and(all_plain);
  if (threadIdx.x == 0)
    out[(static_cast<int64_t>(blockIdx.z) * gridDim.y + mb) * gridDim.x + nb] =
        !any_keep ? kBlockSkip : (all_plain ? kBlockFull : kBlockPartial);
}

}  // namespace ffpa::attn
