// Tensor checks and message helpers of the ops layer (tensor_checks.h).
#include "ops/tensor_checks.h"

#include <ATen/cuda/CUDAContext.h>

namespace ffpa::ops {

std::string num(int64_t x) { return std::to_string(x); }
std::string num(double x) { return std::to_string(x); }
std::string shape(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

launch::DType to_dtype(at::ScalarType t, const char* op) {
  if (t == at::kHalf) return launch::DType::kFloat16;
  TORCH_CHECK(t == at::kBFloat16, op, ": no kernel takes ", t, " inputs (float16 and bfloat16 only)");
  return launch::DType::kBFloat16;
}

launch::RouteQuery route_query(launch::Op op, const at::Tensor& q, const char* op_name, int64_t head_dim,
                               int64_t head_dim_v, int64_t len_q, int64_t len_kv, int64_t batch_heads) {
  launch::RouteQuery rq;
  rq.op = op;
  rq.dtype = to_dtype(q.scalar_type(), op_name);
  rq.head_dim = static_cast<int>(head_dim);
  rq.head_dim_v = static_cast<int>(head_dim_v);
  rq.len_q = static_cast<int>(len_q);
  rq.len_kv = static_cast<int>(len_kv);
  rq.batch_heads = batch_heads;
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(q.get_device());
  rq.device_cc = prop->major * 10 + prop->minor;
  rq.mma = launch::fa2_mma();
  return rq;
}

void check_qkv(const at::Tensor& t, const char* name, int64_t expect_dim, const at::Tensor& q, const char* op,
               const char* layout) {
  const char* q_name = std::string(op) == "ffpa_fwd" ? "query" : "q";
  TORCH_CHECK(t.is_cuda(), op, ": `", name, "` must be a CUDA tensor, got device ", t.device().str());
  TORCH_CHECK(t.device() == q.device(), op, ": `", name, "` must be on ", q.device().str(), " like `", q_name, "`, got ",
              t.device().str());
  TORCH_CHECK(t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16, op, ": `", name,
              "` must be float16 or bfloat16, got ", t.scalar_type());
  TORCH_CHECK(t.scalar_type() == q.scalar_type(), op, ": `", name, "` must have the dtype of `", q_name, "` (",
              q.scalar_type(), "), got ", t.scalar_type());
  TORCH_CHECK(t.dim() == expect_dim, op, ": `", name, "` must be ", num(expect_dim), "-D ", layout, ", got ",
              num(t.dim()), "-D with shape ", shape(t.sizes()));
  TORCH_CHECK(t.stride(-1) == 1, op, ": `", name, "` must have a contiguous last dimension (stride 1), got stride ",
              num(t.stride(-1)));
  for (int d = 0; d < 3; ++d)
    TORCH_CHECK(t.size(d) <= 1 || t.stride(d) % 8 == 0, op, ": `", name, "` stride of dim ", num(int64_t{d}),
                " must be a multiple of 8 elements for 16-byte loads, got ", num(t.stride(d)));
  TORCH_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, op, ": `", name,
              "` data pointer must be 16-byte aligned");
}

MaskKind check_mask(const at::Tensor& m, const at::Tensor& q, int64_t B, int64_t Hq, int64_t L, int64_t S,
                    const char* op) {
  TORCH_CHECK(m.device() == q.device(), op, ": `attn_mask` must be on ", q.device().str(), " like `", (std::string(op) == "ffpa_fwd" ? "query" : "q"), "`, got ",
              m.device().str());
  TORCH_CHECK(m.dim() == 4, op, ": `attn_mask` must be 4-D (batch, heads, L, S) with each dim 1 or full, got ",
              num(m.dim()), "-D with shape ", shape(m.sizes()));
  const int64_t full[4] = {B, Hq, L, S};
  const char* names[4] = {"batch", "heads", "L", "S"};
  for (int d = 0; d < 4; ++d)
    TORCH_CHECK(m.size(d) == 1 || m.size(d) == full[d], op, ": `attn_mask` dim ", num(int64_t{d}), " (", names[d],
                ") must be 1 or ", num(full[d]), ", got shape ", shape(m.sizes()));
  switch (m.scalar_type()) {
    case at::kBool: return MaskKind::kBool;
    case at::kHalf: return MaskKind::kFloat16;
    case at::kBFloat16: return MaskKind::kBFloat16;
    case at::kFloat: return MaskKind::kFloat32;
    default:
      TORCH_CHECK(false, op, ": `attn_mask` must be bool, float16, bfloat16 or float32, got ", m.scalar_type());
  }
  return MaskKind::kNone;
}

}  // namespace ffpa::ops
