// Declarations of the torch-facing op implementations, one file each (fwd.cpp), registered in
// registration.cpp; tensor_checks.h holds the argument checks they share.
#pragma once
#include <ATen/ATen.h>

#include <optional>
#include <tuple>

namespace ffpa::ops {

// q [B, Hq, L, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv], optional attn_mask with each dim 1 or
// (B, Hq, L, S) -> (out [B, Hq, L, Dv], lse [B, Hq, L] fp32).
std::tuple<at::Tensor, at::Tensor> ffpa_fwd_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                 const std::optional<at::Tensor>& attn_mask, double scale,
                                                 bool is_causal, bool causal_bottom_right, int64_t level,
                                                 int64_t acc, int64_t num_stages);

}  // namespace ffpa::ops
