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

// q [B, Lq, Hq, D] (1 <= Lq <= 32) against k_cache / v_cache [B, S, Hkv, D|Dv], or with block_table
// [B, max_pages] int32 a page pool [pages, page_size, Hkv, D|Dv]; optional cache_seqlens [B] int32;
// optional attn_mask in SDPA layout (B|1, Hq|1, Lq|1, S) over logical key positions; causal
// bottom-right per sequence; num_splits 0 = auto -> (out [B, Lq, Hq, Dv], lse [B, Hq, Lq] fp32).
std::tuple<at::Tensor, at::Tensor> ffpa_decode_cuda(const at::Tensor& q, const at::Tensor& k_cache,
                                                    const at::Tensor& v_cache,
                                                    const std::optional<at::Tensor>& cache_seqlens,
                                                    const std::optional<at::Tensor>& block_table,
                                                    const std::optional<at::Tensor>& attn_mask, double scale,
                                                    bool causal, int64_t num_splits);

// FP8: q [B, Hq, L, D], k [B, Hkv, S, D], v [B, Hkv, S, D] float8_e4m3fn (D 64, 128, 256 or 512, 16-byte aligned
// rows); descales float32 broadcastable to (B, H) of their tensor; optional attn_mask as ffpa_fwd's;
// out bf16 (fp16 with out_fp16) [B, Hq, L, D], lse [B, Hq, L] fp32.
std::tuple<at::Tensor, at::Tensor> ffpa_fp8_fwd_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                     const std::optional<at::Tensor>& q_descale,
                                                     const std::optional<at::Tensor>& k_descale,
                                                     const std::optional<at::Tensor>& v_descale,
                                                     const std::optional<at::Tensor>& attn_mask, double scale,
                                                     double v_scale, bool is_causal, bool causal_bottom_right,
                                                     bool out_fp16);

}  // namespace ffpa::ops
