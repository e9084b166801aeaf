// The torch contract of ffpa_attn: op schemas (TORCH_LIBRARY) and their CUDA implementations
// (one file per op). The Python layer reads the argument names from ffpa_attn/_spec.py and checks the
// registered schemas against them at import.
#include <torch/library.h>

#include "generated/spec.h"
#include "ops/ops.h"

// The schemas are ffpa_attn/_spec.py's OPS, emitted by tools/gen_instantiations.py.
TORCH_LIBRARY(ffpa_attn, m) {
  m.def(FFPA_SCHEMA_FFPA_FWD);
  m.def(FFPA_SCHEMA_FFPA_DECODE);
  m.def(FFPA_SCHEMA_FFPA_FP8_FWD);
}

TORCH_LIBRARY_IMPL(ffpa_attn, CUDA, m) {
  m.impl("ffpa_fwd", &ffpa::ops::ffpa_fwd_cuda);
  m.impl("ffpa_decode", &ffpa::ops::ffpa_decode_cuda);
  m.impl("ffpa_fp8_fwd", &ffpa::ops::ffpa_fp8_fwd_cuda);
}
