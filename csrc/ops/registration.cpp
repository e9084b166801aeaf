// The torch contract of ffpa_attn: op schemas (TORCH_LIBRARY) and their CUDA implementations
// (one file per op). The Python layer reads the argument names from these schemas.
#include <torch/library.h>

#include "ops/ops.h"

TORCH_LIBRARY(ffpa_attn, m) {
  m.def(
      "ffpa_fwd(Tensor q, Tensor k, Tensor v, Tensor? attn_mask, float scale, bool is_causal, "
      "bool causal_bottom_right, int level, int acc, int num_stages) -> (Tensor out, Tensor lse)");
  m.def(
      "ffpa_decode(Tensor q, Tensor k_cache, Tensor v_cache, Tensor? cache_seqlens, Tensor? block_table, "
      "Tensor? attn_mask, float scale, bool causal, int num_splits) -> (Tensor out, Tensor lse)");
}

TORCH_LIBRARY_IMPL(ffpa_attn, CUDA, m) {
  m.impl("ffpa_fwd", &ffpa::ops::ffpa_fwd_cuda);
  m.impl("ffpa_decode", &ffpa::ops::ffpa_decode_cuda);
}
