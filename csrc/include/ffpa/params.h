// The plain parameter block every forward kernel takes: pointers, int64 element strides, sizes and
// the pre-multiplied softmax scale. Torch-free; filled by csrc/ops, read by csrc/launch and kernels.
#pragma once
#include <cstdint>

namespace ffpa {

struct FwdParams {
  const void* q;  // [B, Hq, L, D]   last dim contiguous
  const void* k;  // [B, Hkv, S, D]  last dim contiguous
  const void* v;  // [B, Hkv, S, Dv] last dim contiguous
  void* o;        // [B, Hq, L, Dv]  last dim contiguous
  float* lse;     // [B, Hq, L] contiguous, natural log; may be null

  int64_t q_batch_stride, q_head_stride, q_row_stride;
  int64_t k_batch_stride, k_head_stride, k_row_stride;
  int64_t v_batch_stride, v_head_stride, v_row_stride;
  int64_t o_batch_stride, o_head_stride, o_row_stride;

  int batch;
  int heads_q;
  int heads_kv;  // heads_q % heads_kv == 0; query head h reads kv head h / (heads_q / heads_kv)
  int len_q;     // L >= 1
  int len_kv;    // S >= 1
  int head_dim;
  int head_dim_v;

  float scale;       // softmax scale applied to q.k
  float scale_log2;  // scale * log2(e): kernels work in base 2
  bool is_causal;    // SDPA's top-left convention: query i sees keys j <= i
  int num_stages;    // cp.async pipeline depth, 1..4 (0 = let the launcher choose)
};

}  // namespace ffpa
