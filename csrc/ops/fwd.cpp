// The forward op: argument checks, output allocation, stream and device guard, the translation
// tensors -> FwdParams, the mask block map, the L3 workspace and the persistent grids' work counter,
// and cudaError_t -> TORCH_CHECK.
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

std::tuple<at::Tensor, at::Tensor> ffpa_fwd_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                 const std::optional<at::Tensor>& attn_mask, double scale,
                                                 bool is_causal, bool causal_bottom_right, int64_t level,
                                                 int64_t acc, int64_t num_stages) {
  check_qkv(q, "query", 4, q);
  check_qkv(k, "key", 4, q);
  check_qkv(v, "value", 4, q);
  const int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), D = q.size(3);
  const int64_t Hkv = k.size(1), S = k.size(2), Dv = v.size(3);
  TORCH_CHECK(k.size(0) == B && v.size(0) == B, "ffpa_fwd: batch of `key` (", num(k.size(0)), ") and `value` (",
              num(v.size(0)), ") must equal the batch of `query` (", num(B), ")");
  TORCH_CHECK(k.size(3) == D, "ffpa_fwd: head dim of `key` must equal that of `query` (", num(D), "), got ", num(k.size(3)));
  TORCH_CHECK(v.size(1) == Hkv && v.size(2) == S, "ffpa_fwd: `value` must have the heads and length of `key` (",
              num(Hkv), ", ", num(S), "), got (", num(v.size(1)), ", ", num(v.size(2)), ")");
  TORCH_CHECK(Hkv >= 1 && Hq % Hkv == 0, "ffpa_fwd: query heads (", num(Hq), ") must be a multiple of key/value heads (",
              num(Hkv), ")");
  TORCH_CHECK(S >= 1, "ffpa_fwd: `key` must have at least one position, got length ", num(S));
  TORCH_CHECK(std::isfinite(scale), "ffpa_fwd: `scale` must be finite, got ", num(scale));
  TORCH_CHECK(level >= 0 && level <= 3, "ffpa_fwd: `level` must be 0 (auto: FA-2 where compiled, else the FFPA "
              "level the heuristic picks) or an FFPA level 1..3, got ", num(level));
  TORCH_CHECK(acc == kAccAuto || acc == static_cast<int>(AccMode::kF32) || acc == static_cast<int>(AccMode::kF16) ||
              acc == static_cast<int>(AccMode::kMixed),
              "ffpa_fwd: `acc` must be 0 (auto = fp32), 1 (fp32), 2 (fp16) or 3 (mixed: Q@K^T fp32, P@V fp16), got ",
              num(acc));
  const AccMode acc_mode = acc == kAccAuto ? AccMode::kF32 : static_cast<AccMode>(acc);
  TORCH_CHECK(acc_mode == AccMode::kF32 || q.scalar_type() == at::kHalf, "ffpa_fwd: `acc`=", num(acc),
              " (fp16 accumulation) needs float16 inputs, got ", q.scalar_type());
  TORCH_CHECK(num_stages >= 0 && num_stages <= 4, "ffpa_fwd: `num_stages` must be 0 (auto) or 1..4, got ",
              num(num_stages));
  TORCH_CHECK(B <= INT32_MAX && Hq <= kMaxGridYZ && L <= INT32_MAX && S <= INT32_MAX,
              "ffpa_fwd: sizes out of range: batch ", num(B), ", heads ", num(Hq), " (at most ", num(int64_t{kMaxGridYZ}), "), L ", num(L),
              ", S ", num(S));
  const MaskKind mask_kind = attn_mask.has_value() ? check_mask(*attn_mask, q, B, Hq, L, S) : MaskKind::kNone;
  launch::RouteQuery rq = route_query(launch::Op::kFwd, q, "ffpa_fwd", D, Dv, L, S, B * Hq);
  rq.level = static_cast<int>(level);
  rq.acc = acc_mode;
  const launch::RegistryEntry* kernel = launch::route(rq);
  TORCH_CHECK(kernel != nullptr, "ffpa_fwd: head dims (", num(D), ", ", num(Dv), ") for ", q.scalar_type(),
              level == 0 ? std::string(" (auto level)") : " at FFPA level " + num(level),
              acc_mode == AccMode::kF32 ? std::string() : " with acc=" + num(acc),
              " are not compiled into this build (see ffpa_attn.build_info())");

  // Output follows the layout of `query`: a BLHD view in gives a BLHD-backed output.
  const bool blhd = q.stride(1) < q.stride(2);
  auto opts = q.options();
  at::Tensor out = blhd ? at::empty({B, L, Hq, Dv}, opts).transpose(1, 2) : at::empty({B, Hq, L, Dv}, opts);
  at::Tensor lse = at::empty({B, Hq, L}, opts.dtype(at::kFloat));
  if (B == 0 || L == 0 || Hq == 0) return {out, lse};

  const c10::cuda::CUDAGuard guard(q.device());
  FwdParams p{};
  fill_attn_params(p, kHeadsOuter, q, k, v, out, lse, B, Hq, Hkv, L, S, D, Dv, scale, is_causal);
  p.causal_offset = is_causal && causal_bottom_right ? static_cast<int>(S - L) : 0;
  p.num_stages = static_cast<int>(num_stages);

  launch::KernelInfo info;
  cudaError_t err = kernel->info(p.num_stages, false, &info);
  TORCH_CHECK(err == cudaSuccess, "ffpa_fwd: no launch configuration: ", cudaGetErrorString(err));
  const int smem_limit = launch::max_smem_optin();
  TORCH_CHECK(info.smem_bytes <= smem_limit, "ffpa_fwd: `num_stages`=", num(int64_t{info.num_stages}), " needs ",
              num(int64_t{info.smem_bytes}), " bytes of shared memory per block, the device allows ",
              num(int64_t{smem_limit}));

  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(q.get_device()).stream();
  at::Tensor block_map;  // kept alive until the kernel is enqueued (the caching allocator is stream-ordered)
  if (mask_kind != MaskKind::kNone) {
    const at::Tensor& m = *attn_mask;
    const int mb = static_cast<int>(m.size(0)), mh = static_cast<int>(m.size(1));
    TORCH_CHECK(static_cast<int64_t>(mb) * mh <= kMaxGridYZ, "ffpa_fwd: `attn_mask` with ", num(int64_t{mb}),
                " batches x ", num(int64_t{mh}), " heads is not supported (at most ", num(int64_t{kMaxGridYZ}), " (batch, head) slices; "
                "broadcast the mask over batch or heads)");
    fill_mask(p, m, mask_kind);
    // The tile masked calls run (the launcher picks its kernel by the map's tile).
    const int map_m = info.mask_block_m > 0 ? info.mask_block_m : info.block_m;
    const int map_n = info.mask_block_n > 0 ? info.mask_block_n : info.block_n;
    block_map = at::empty({launch::block_map_bytes(mb, mh, p.len_q, p.len_kv, map_m, map_n)}, opts.dtype(at::kByte));
    err = launch::build_block_map(p, mb, mh, map_m, map_n, block_map.data_ptr<uint8_t>(), stream);
    TORCH_CHECK(err == cudaSuccess, "ffpa_fwd: mask block-map launch failed: ", cudaGetErrorString(err));
  }
  at::Tensor workspace;     // FFPA L3's O accumulator (one slot per resident block); FA-2's split tail
  at::Tensor work_counter;  // FFPA L3's and the warp-specialised FA-2 kernel's work-item counter
  const int64_t bytes = kernel->workspace != nullptr ? kernel->workspace(p) : 0;
  TORCH_CHECK(bytes >= 0, "ffpa_fwd: no launch configuration for the L3 workspace");
  if (bytes > 0) {
    const int64_t slot = static_cast<int64_t>(info.block_m) * Dv * static_cast<int64_t>(sizeof(float));
    workspace = at::empty({bytes / static_cast<int64_t>(sizeof(float))}, opts.dtype(at::kFloat));
    p.o_accum = workspace.data_ptr<float>();
    p.o_accum_slots = static_cast<int>(bytes / slot);  // (L3's; FA-2 sizes its own use: launch/fa2_fwd_launch.cuh)
    work_counter = at::zeros({1}, opts.dtype(at::kInt));  // stream-ordered zero fill
    p.work_counter = work_counter.data_ptr<int>();
  } else if (info.work_counter) {
    // A persistent grid with more slots (items; causal: pairs) than SMs balances on the counter;
    // below that every block has one slot and the zero fill would only cost a launch. The launcher
    // may run the masked calls' tile instead of the table's (a mask; on Hopper short or causal calls
    // at D <= 96, launch/heuristics.h fa2_narrow_tile): counted on the shorter of the two.
    const int block_m = info.mask_block_m > 0 ? std::min(info.block_m, info.mask_block_m) : info.block_m;
    const int64_t m_blocks = (L + block_m - 1) / block_m;
    const int64_t slots = (is_causal ? (m_blocks + 1) / 2 : m_blocks) * Hq * B;
    if (slots > at::cuda::getCurrentDeviceProperties()->multiProcessorCount) {
      work_counter = at::zeros({1}, opts.dtype(at::kInt));
      p.work_counter = work_counter.data_ptr<int>();
    }
  }
  err = kernel->run(p, stream);
  TORCH_CHECK(err == cudaSuccess, "ffpa_fwd: kernel launch failed: ", cudaGetErrorString(err));
  return {out, lse};
}

}  // namespace ffpa::ops
