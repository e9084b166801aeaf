// Tensor checks and message helpers of the ops layer: every argument problem a TORCH_CHECK naming
// the argument, what was expected and what came. Torch-facing; used by the op files (fwd.cpp).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "ffpa/params.h"
#include "launch/ffpa_fwd.h"

namespace ffpa::ops {

// Numbers in messages go through std::to_string (snprintf), never std::ostream's numeric
// insertion: with the GPU machine's g++ (/opt/gcc) ostream-formatted integers inside this
// extension crashed while TORCH_CHECK built its message, while strings were fine.
std::string num(int64_t x);
std::string num(double x);
std::string shape(at::IntArrayRef sizes);

// The kernels' element type of a tensor dtype; a clear error for any dtype no kernel takes.
launch::DType to_dtype(at::ScalarType t, const char* op = "ffpa_fwd");
// What the chooser (launch/route.cpp) needs of a call on `q`: the op, q's dtype (checked), the head
// dims and lengths, batch x query heads, the compute capability of q's device and the process-wide
// FA-2 MMA preference (level and accumulation: auto / fp32 unless the caller sets them).
launch::RouteQuery route_query(launch::Op op, const at::Tensor& q, const char* op_name, int64_t head_dim,
                               int64_t head_dim_v, int64_t len_q, int64_t len_kv, int64_t batch_heads);

// q / k / v: a CUDA fp16/bf16 tensor on q's device, of q's dtype, expect_dim-D, last dim
// contiguous, other strides and the data pointer fit for 16-byte loads. `op` and `layout` name
// the op and the expected dims in messages.
void check_qkv(const at::Tensor& t, const char* name, int64_t expect_dim, const at::Tensor& q,
               const char* op = "ffpa_fwd", const char* layout = "(batch, heads, seq, head_dim)");

// attn_mask: 4-D, every dim 1 or the full size (B, Hq, L, S), bool or a float kind; any strides.
MaskKind check_mask(const at::Tensor& m, const at::Tensor& q, int64_t B, int64_t Hq, int64_t L, int64_t S,
                    const char* op = "ffpa_fwd");

}  // namespace ffpa::ops
