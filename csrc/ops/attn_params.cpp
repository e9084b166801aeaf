// Tensors -> AttnParams (attn_params.h).
#include "ops/attn_params.h"

#include "ffpa/constants.h"

namespace ffpa::ops {

void fill_attn_params(AttnParams& p, Layout layout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const at::Tensor& out, at::Tensor& lse, int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S,
                      int64_t D, int64_t Dv, double scale, bool is_causal) {
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.o = out.data_ptr();
  p.lse = lse.data_ptr<float>();
  const int h = layout.head, r = layout.row;
  p.q_batch_stride = q.stride(0), p.q_head_stride = q.stride(h), p.q_row_stride = q.stride(r);
  p.k_batch_stride = k.stride(0), p.k_head_stride = k.stride(h), p.k_row_stride = k.stride(r);
  p.v_batch_stride = v.stride(0), p.v_head_stride = v.stride(h), p.v_row_stride = v.stride(r);
  p.o_batch_stride = out.stride(0), p.o_head_stride = out.stride(h), p.o_row_stride = out.stride(r);
  p.batch = static_cast<int>(B);
  p.heads_q = static_cast<int>(Hq);
  p.heads_kv = static_cast<int>(Hkv);
  p.len_q = static_cast<int>(L);
  p.len_kv = static_cast<int>(S);
  p.head_dim = static_cast<int>(D);
  p.head_dim_v = static_cast<int>(Dv);
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * kLog2eD);
  p.is_causal = is_causal;
}

void fill_mask(AttnParams& p, const at::Tensor& m, MaskKind kind) {
  p.mask = m.data_ptr();
  p.mask_kind = kind;
  p.mask_batch_stride = m.size(0) == 1 ? 0 : m.stride(0);
  p.mask_head_stride = m.size(1) == 1 ? 0 : m.stride(1);
  p.mask_row_stride = m.size(2) == 1 ? 0 : m.stride(2);
  p.mask_col_stride = m.size(3) == 1 ? 0 : m.stride(3);
}

}  // namespace ffpa::ops
