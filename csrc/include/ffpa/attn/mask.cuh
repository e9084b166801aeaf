// attn_mask inside the kernels: how one mask element is read and turned into a base-2 additive
// value. The block-map pre-pass (kernels/mask_block_map.cuh) summarises each tile. Torch-free.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

#include "ffpa/constants.h"
#include "ffpa/params.h"

namespace ffpa::attn {

// The mask of one (batch, head): a byte pointer at element (b, h, 0, 0) plus element strides.
struct MaskRef {
  const char* base;
  MaskKind kind;
  int64_t row_stride, col_stride;
};

__host__ __device__ __forceinline__ int mask_elem_bytes(MaskKind k) {
  return k == MaskKind::kBool ? 1 : (k == MaskKind::kFloat32 ? 4 : 2);
}

__device__ __forceinline__ MaskRef mask_ref(const AttnParams& p, int batch, int head) {
  const int64_t off = batch * p.mask_batch_stride + head * p.mask_head_stride;
  return {static_cast<const char*>(p.mask) + off * mask_elem_bytes(p.mask_kind), p.mask_kind, p.mask_row_stride,
          p.mask_col_stride};
}

// Raw mask value as "keep" (bool) or additive natural-log value (float kinds).
__device__ __forceinline__ float mask_value(const MaskRef& m, int row, int col) {
  const int64_t i = row * m.row_stride + col * m.col_stride;
  switch (m.kind) {
    case MaskKind::kBool: return reinterpret_cast<const uint8_t*>(m.base)[i] ? 0.f : -CUDART_INF_F;
    case MaskKind::kFloat16: return __half2float(reinterpret_cast<const __half*>(m.base)[i]);
    case MaskKind::kBFloat16: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(m.base)[i]);
    default: return reinterpret_cast<const float*>(m.base)[i];
  }
}

// What the scores of (row, col) get added in base 2: 0 or -inf for bool masks.
__device__ __forceinline__ float mask_log2(const MaskRef& m, int row, int col) {
  const float x = mask_value(m, row, col);
  return m.kind == MaskKind::kBool ? x : x * kLog2e;
}

// The same in two steps, so a kernel can issue a tile's loads early and convert the values where it
// uses them (a load's latency then hides behind whatever runs in between): the element's raw bits
// (bool 0/1, the 16 bits of a half or bfloat16, the 32 of a float), and the base-2 additive value of
// such bits. mask_neutral_bits(kind) converts to 0 (for a key or row outside the mask).
__device__ __forceinline__ uint32_t mask_bits(const MaskRef& m, int row, int col) {
  const int64_t i = row * m.row_stride + col * m.col_stride;
  switch (m.kind) {
    case MaskKind::kBool: return reinterpret_cast<const uint8_t*>(m.base)[i];
    case MaskKind::kFloat16:
    case MaskKind::kBFloat16: return reinterpret_cast<const uint16_t*>(m.base)[i];
    default: return reinterpret_cast<const uint32_t*>(m.base)[i];
  }
}

__host__ __device__ __forceinline__ uint32_t mask_neutral_bits(MaskKind kind) { return kind == MaskKind::kBool ? 1u : 0u; }

__device__ __forceinline__ float mask_bits_log2(MaskKind kind, uint32_t bits) {
  switch (kind) {
    case MaskKind::kBool: return bits != 0u ? 0.f : -CUDART_INF_F;
    case MaskKind::kFloat16: return __half2float(__ushort_as_half(static_cast<unsigned short>(bits))) * kLog2e;
    case MaskKind::kBFloat16: return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(bits))) * kLog2e;
    default: return __uint_as_float(bits) * kLog2e;
  }
}

// The additive base-2 mask values of one accumulator quad: (row, col), (row, col + 1),
// (row + 8, col), (row + 8, col + 1); 0 outside [0, len_q) x [0, len_kv).
__device__ __forceinline__ float4 mask_quad_log2_inline(const FwdParams& p, int batch, int head, int row, int col) {
  const MaskRef m = mask_ref(p, batch, head);
  float v[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int r = row + (e / 2) * 8, c = col + (e % 2);
    v[e] = (r < p.len_q && c < p.len_kv) ? mask_log2(m, r, c) : 0.f;
  }
  return make_float4(v[0], v[1], v[2], v[3]);
}

// The same, not inlined: it runs only in mixed-mask tiles, and inlined its address arithmetic raised
// the register pressure of the whole hot loop (spills in FFPA L1 at D = 384..1024). The FP8 kernel
// inlines it instead: there the call's saved registers spilled (56 / 64 bytes at D = 256) and the
// inlined form fits without.
static __device__ __noinline__ float4 mask_quad_log2(const FwdParams& p, int batch, int head, int row, int col) {
  return mask_quad_log2_inline(p, batch, head, row, col);
}

}  // namespace ffpa::attn
