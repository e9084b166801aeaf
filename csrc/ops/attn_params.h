// Tensors -> the AttnParams fields every op fills the same way (pointers, element strides, sizes,
// scale, causal flag) and the attn_mask fields. Torch-facing; used by the op files.
#pragma once
#include <ATen/ATen.h>

#include "ffpa/params.h"

namespace ffpa::ops {

// Which dim of the 4-D q / k / v / out tensors is the head dim and which the row (position) dim;
// dim 0 is the batch (a page for a paged cache), dim 3 the contiguous feature dim.
struct Layout {
  int head;
  int row;
};
constexpr Layout kHeadsOuter{1, 2};  // forward: (B, H, L, D)
constexpr Layout kRowsOuter{2, 1};   // decode: (B, L, H, D)

void fill_attn_params(AttnParams& p, Layout layout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const at::Tensor& out, at::Tensor& lse, int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S,
                      int64_t D, int64_t Dv, double scale, bool is_causal);

// attn_mask (4-D, each dim 1 or full): pointer, kind and element strides, broadcast dims read with stride 0.
void fill_mask(AttnParams& p, const at::Tensor& m, MaskKind kind);

}  // namespace ffpa::ops
