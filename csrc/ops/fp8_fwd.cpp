// The FP8 forward op: argument checks, the output and the V^T workspace, descale pointers and
// strides, the translation tensors -> FwdParams, the mask block map, and cudaError_t -> TORCH_CHECK. The kernel
// (kernels/fa2_fwd_sm90_fp8.cuh; ffpa_fwd_sm90_fp8.cuh at D = 512) is the registry's fp8 family, found by the
// chooser like any other.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>
#include <tuple>

#include "ffpa/constants.h"
#include "launch/ffpa_fwd.h"
#include "launch/heuristics.h"
#include "ops/attn_params.h"
#include "ops/ops.h"
#include "ops/tensor_checks.h"

namespace ffpa::ops {
namespace {

constexpr const char* kOp = "ffpa_fp8_fwd";

void check_fp8(const at::Tensor& t, const char* name, const at::Tensor& q) {
  TORCH_CHECK(t.is_cuda(), kOp, ": `", name, "` must be a CUDA tensor, got device ", t.device().str());
  TORCH_CHECK(t.device() == q.device(), kOp, ": `", name, "` must be on ", q.device().str(), " like `q`, got ",
              t.device().str());
  TORCH_CHECK(t.scalar_type() == at::kFloat8_e4m3fn, kOp, ": `", name, "` must be float8_e4m3fn, got ", t.scalar_type());
  TORCH_CHECK(t.dim() == 4, kOp, ": `", name, "` must be 4-D (B, H, L, D), got shape ", shape(t.sizes()));
  TORCH_CHECK(t.stride(-1) == 1, kOp, ": `", name, "` must have a contiguous last dimension, got stride ",
              num(t.stride(-1)));
  for (int d = 0; d < 3; ++d)
    TORCH_CHECK(t.size(d) <= 1 || t.stride(d) % 16 == 0, kOp, ": `", name, "` stride of dim ", num(int64_t{d}),
                " must be a multiple of 16 bytes (TMA), got ", num(t.stride(d)));
  TORCH_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, kOp, ": `", name,
              "` data pointer must be 16-byte aligned");
}

// A descale of tensor `of` (B x H): float32 on its device, 2-D (B|1, H|1); its element pointer and
// strides (0 where broadcast).
void fill_descale(const std::optional<at::Tensor>& d, const char* name, const at::Tensor& of, const float** ptr,
                  int64_t* batch_stride, int64_t* head_stride) {
  *ptr = nullptr;
  *batch_stride = *head_stride = 0;
  if (!d.has_value()) return;
  const at::Tensor& t = *d;
  TORCH_CHECK(t.device() == of.device() && t.scalar_type() == at::kFloat, kOp, ": `", name,
              "` must be a float32 tensor on ", of.device().str(), ", got ", t.scalar_type(), " on ", t.device().str());
  TORCH_CHECK(t.dim() == 2 && (t.size(0) == 1 || t.size(0) == of.size(0)) && (t.size(1) == 1 || t.size(1) == of.size(1)),
              kOp, ": `", name, "` must be 2-D and broadcast to (", num(of.size(0)), ", ", num(of.size(1)),
              "), got shape ", shape(t.sizes()));
  *ptr = t.data_ptr<float>();
  *batch_stride = t.size(0) == 1 ? 0 : t.stride(0);
  *head_stride = t.size(1) == 1 ? 0 : t.stride(1);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> ffpa_fp8_fwd_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                     const std::optional<at::Tensor>& q_descale,
                                                     const std::optional<at::Tensor>& k_descale,
                                                     const std::optional<at::Tensor>& v_descale,
                                                     const std::optional<at::Tensor>& attn_mask, double scale,
                                                     double v_scale, bool is_causal, bool causal_bottom_right,
                                                     bool out_fp16) {
  check_fp8(q, "q", q);
  check_fp8(k, "k", q);
  check_fp8(v, "v", q);
  const int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), D = q.size(3);
  const int64_t Hkv = k.size(1), S = k.size(2), Dv = v.size(3);
  TORCH_CHECK(k.size(0) == B && v.size(0) == B, kOp, ": batch of `k` (", num(k.size(0)), ") and `v` (", num(v.size(0)),
              ") must equal the batch of `q` (", num(B), ")");
  TORCH_CHECK(k.size(3) == D && Dv == D, kOp, ": head dims of `k` and `v` must equal that of `q` (", num(D), "), got ",
              num(k.size(3)), " and ", num(Dv));
  TORCH_CHECK(v.size(1) == Hkv && v.size(2) == S, kOp, ": `v` must have the heads and length of `k` (", num(Hkv), ", ",
              num(S), "), got (", num(v.size(1)), ", ", num(v.size(2)), ")");
  TORCH_CHECK(Hkv >= 1 && Hq % Hkv == 0, kOp, ": query heads (", num(Hq), ") must be a multiple of key/value heads (",
              num(Hkv), ")");
  TORCH_CHECK(S >= 1, kOp, ": `k` must have at least one position, got length ", num(S));
  TORCH_CHECK(std::isfinite(scale) && std::isfinite(v_scale), kOp, ": `scale` and `v_scale` must be finite, got ",
              num(scale), " and ", num(v_scale));
  TORCH_CHECK(B <= INT32_MAX && Hq <= kMaxGridYZ && L <= INT32_MAX && S <= INT32_MAX - 32, kOp,
              ": sizes out of range: batch ", num(B), ", heads ", num(Hq), ", L ", num(L), ", S ", num(S));
  const MaskKind mask_kind = attn_mask.has_value() ? check_mask(*attn_mask, q, B, Hq, L, S, kOp) : MaskKind::kNone;
  launch::RouteQuery rq;
  rq.op = launch::Op::kFwd;
  rq.dtype = launch::DType::kE4M3;
  rq.head_dim = static_cast<int>(D);
  rq.head_dim_v = static_cast<int>(Dv);
  rq.len_q = static_cast<int>(L);
  rq.len_kv = static_cast<int>(S);
  rq.batch_heads = B * Hq;
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(q.get_device());
  rq.device_cc = prop->major * 10 + prop->minor;
  const launch::RegistryEntry* kernel = launch::route(rq);
  TORCH_CHECK(kernel != nullptr, kOp, ": no FP8 kernel for head dim ", num(D), " on this device in this build (see "
              "ffpa_attn.build_info(); the FP8 kernels are sm_90a code for head dims 64, 128, 256 and 512)");

  const auto opts = q.options().dtype(out_fp16 ? at::kHalf : at::kBFloat16);
  at::Tensor out = at::empty({B, Hq, L, Dv}, opts);
  at::Tensor lse = at::empty({B, Hq, L}, opts.dtype(at::kFloat));
  if (B == 0 || L == 0 || Hq == 0) return {out, lse};
  launch::KernelInfo info;
  cudaError_t info_err = kernel->info(0, false, &info);
  TORCH_CHECK(info_err == cudaSuccess, kOp, ": no launch configuration: ", cudaGetErrorString(info_err));
  // V^T for the launcher's pre-pass, where the kernel does not transpose V itself
  const int64_t vt_len = (S + 31) / 32 * 32;
  at::Tensor vt;
  if (info.fp8_vt_prepass) vt = at::empty({B, Hkv, Dv, vt_len}, q.options().dtype(at::kByte));

  const c10::cuda::CUDAGuard guard(q.device());
  FwdParams p{};
  fill_attn_params(p, kHeadsOuter, q, k, v, out, lse, B, Hq, Hkv, L, S, D, Dv, scale, is_causal);
  p.causal_offset = is_causal && causal_bottom_right ? static_cast<int>(S - L) : 0;
  p.vt = vt.defined() ? vt.data_ptr() : nullptr;
  p.vt_len = static_cast<int>(vt_len);
  fill_descale(q_descale, "q_descale", q, &p.q_descale, &p.q_descale_batch_stride, &p.q_descale_head_stride);
  fill_descale(k_descale, "k_descale", k, &p.k_descale, &p.k_descale_batch_stride, &p.k_descale_head_stride);
  fill_descale(v_descale, "v_descale", v, &p.v_descale, &p.v_descale_batch_stride, &p.v_descale_head_stride);
  p.v_scale = static_cast<float>(v_scale);
  p.out_fp16 = out_fp16;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(q.get_device()).stream();
  at::Tensor block_map;  // kept alive until the kernel is enqueued (the caching allocator is stream-ordered)
  if (mask_kind != MaskKind::kNone) {
    const at::Tensor& m = *attn_mask;
    const int mb = static_cast<int>(m.size(0)), mh = static_cast<int>(m.size(1));
    TORCH_CHECK(static_cast<int64_t>(mb) * mh <= kMaxGridYZ, kOp, ": `attn_mask` with ", num(int64_t{mb}),
                " batches x ", num(int64_t{mh}), " heads is not supported (at most ", num(int64_t{kMaxGridYZ}),
                " (batch, head) slices; broadcast the mask over batch or heads)");
    fill_mask(p, m, mask_kind);
    block_map = at::empty({launch::block_map_bytes(mb, mh, p.len_q, p.len_kv, info.block_m, info.block_n)},
                          q.options().dtype(at::kByte));
    const cudaError_t e =
        launch::build_block_map(p, mb, mh, info.block_m, info.block_n, block_map.data_ptr<uint8_t>(), stream);
    TORCH_CHECK(e == cudaSuccess, kOp, ": mask block-map launch failed: ", cudaGetErrorString(e));
  }
  const cudaError_t err = kernel->run(p, stream);
  TORCH_CHECK(err == cudaSuccess, kOp, ": kernel launch failed: ", cudaGetErrorString(err));
  return {out, lse};
}

}  // namespace ffpa::ops
