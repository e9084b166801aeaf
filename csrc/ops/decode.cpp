// The decode op: a few query rows against a KV cache (contiguous or paged, per-sequence lengths).
// Argument checks, output and workspace allocation (the splits' partials, the fused merge's
// counters), the launcher's plan, tensors -> DecodeParams and cudaError_t -> TORCH_CHECK. Nothing here reads device memory, so the op can be captured in a
// CUDA graph; values inside cache_seqlens / block_table are the caller's contract (the Python
// layer checks them under FFPA_DEBUG_CHECKS=1, the kernel clamps lengths to the cache).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "ffpa/constants.h"
#include "generated/spec.h"
#include "launch/ffpa_fwd.h"
#include "launch/heuristics.h"
#include "ops/attn_params.h"
#include "ops/ops.h"
#include "ops/tensor_checks.h"

namespace ffpa::ops {

namespace {

constexpr const char* kOp = "ffpa_decode";
constexpr int64_t kMaxQueries = FFPA_DECODE_MAX_QUERIES;  // ffpa_attn/_spec.py

// An int32 index tensor on q's device with the given dims; its last dim contiguous.
void check_index(const at::Tensor& t, const char* name, int64_t dims, const char* layout, const at::Tensor& q) {
  TORCH_CHECK(t.device() == q.device(), kOp, ": `", name, "` must be on ", q.device().str(), " like `q`, got ",
              t.device().str());
  TORCH_CHECK(t.scalar_type() == at::kInt, kOp, ": `", name, "` must be int32 ", layout, ", got ", t.scalar_type());
  TORCH_CHECK(t.dim() == dims, kOp, ": `", name, "` must be ", num(dims), "-D ", layout, ", got shape ",
              shape(t.sizes()));
  TORCH_CHECK(t.stride(-1) == 1 || t.size(-1) <= 1, kOp, ": `", name, "` must have a contiguous last dimension, got stride ",
              num(t.stride(-1)));
}

// Arrival counters of the fused merge (DecodeParams::merge_counters), at least n: zero before a
// launch, and the kernel leaves them zero (each row block's last split resets its own). Eager calls
// share one buffer per (device, stream): calls on one stream run in launch order, so theirs never
// overlap, and streams never share one. That buffer comes from cudaMalloc, not torch's allocator:
// torch.compile's CUDA-graph trees run their warm-up calls with the stream's allocations routed into
// the graph's pool and fail on any block there that outlives the call (so does a user's
// torch.cuda.use_mem_pool block). It is zeroed on the stream when made; a grown one replaces it and
// the old one is left allocated (sizes double, so at most twice the largest), since freeing it would
// need the kernels still reading it to finish. A call being captured into a CUDA graph gets a buffer
// of its own (`keep`, a zero fill in the graph, the graph's pool keeps it): the graph may be replayed
// on any stream, beside eager calls. nullptr (no buffer could be made): the launcher merges in a
// second kernel instead.
int* merge_counters(int64_t n, const at::Tensor& q, cudaStream_t stream, at::Tensor& keep) {
  if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) {
    keep = at::zeros({n}, q.options().dtype(at::kInt));
    return keep.data_ptr<int>();
  }
  struct Buffer {
    int* ptr = nullptr;
    int64_t size = 0;
  };
  static std::mutex mu;
  // Never destroyed: no CUDA frees while the process tears down.
  static auto* buffers = new std::map<std::pair<int, cudaStream_t>, Buffer>();
  const std::lock_guard<std::mutex> lock(mu);
  Buffer& b = (*buffers)[{static_cast<int>(q.get_device()), stream}];
  if (b.size < n) {
    const int64_t size = std::max<int64_t>({n, 2 * b.size, 4096});
    void* ptr = nullptr;
    if (cudaMalloc(&ptr, size * sizeof(int)) != cudaSuccess ||
        cudaMemsetAsync(ptr, 0, size * sizeof(int), stream) != cudaSuccess) {
      (void)cudaGetLastError();  // clear it: the call goes on with the merge kernel
      if (ptr != nullptr) (void)cudaFree(ptr);
      return nullptr;
    }
    b = Buffer{static_cast<int*>(ptr), size};
  }
  return b.ptr;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> ffpa_decode_cuda(const at::Tensor& q, const at::Tensor& k_cache,
                                                    const at::Tensor& v_cache,
                                                    const std::optional<at::Tensor>& cache_seqlens,
                                                    const std::optional<at::Tensor>& block_table,
                                                    const std::optional<at::Tensor>& attn_mask, double scale,
                                                    bool causal, int64_t num_splits) {
  check_qkv(q, "q", 4, q, kOp, "(batch, Lq, heads_q, head_dim)");
  const bool paged = block_table.has_value();
  const char* cache_layout = paged ? "(num_pages, page_size, heads_kv, head_dim)" : "(batch, S, heads_kv, head_dim)";
  check_qkv(k_cache, "k_cache", 4, q, kOp, cache_layout);
  check_qkv(v_cache, "v_cache", 4, q, kOp, cache_layout);
  const int64_t B = q.size(0), Lq = q.size(1), Hq = q.size(2), D = q.size(3);
  const int64_t Hkv = k_cache.size(2), Dv = v_cache.size(3);
  TORCH_CHECK(Lq >= 1 && Lq <= kMaxQueries, kOp, ": `q` has ", num(Lq), " query rows; decode takes 1..", num(kMaxQueries),
              " (longer chunks: forward with is_causal and bottom-right alignment)");
  TORCH_CHECK(k_cache.size(0) == v_cache.size(0) && k_cache.size(1) == v_cache.size(1) && v_cache.size(2) == Hkv, kOp,
              ": `k_cache` ", shape(k_cache.sizes()), " and `v_cache` ", shape(v_cache.sizes()),
              " must agree in every dim but the last");
  TORCH_CHECK(k_cache.size(3) == D, kOp, ": head dim of `k_cache` (", num(k_cache.size(3)), ") must equal that of `q` (",
              num(D), ")");
  TORCH_CHECK(Hkv >= 1 && Hq % Hkv == 0, kOp, ": query heads (", num(Hq), ") must be a multiple of the cache's heads (",
              num(Hkv), ")");
  TORCH_CHECK(std::isfinite(scale), kOp, ": `scale` must be finite, got ", num(scale));
  TORCH_CHECK(num_splits >= 0 && num_splits <= launch::kMaxDecodeSplits, kOp, ": `num_splits` must be 0 (auto) or 1..",
              num(int64_t{launch::kMaxDecodeSplits}), ", got ", num(num_splits));
  TORCH_CHECK(B <= kMaxGridYZ && Hkv <= kMaxGridYZ, kOp, ": batch (", num(B), ") and cache heads (", num(Hkv),
              ") must be at most ", num(int64_t{kMaxGridYZ}));
  int64_t capacity, page_size;
  if (paged) {
    const at::Tensor& bt = *block_table;
    check_index(bt, "block_table", 2, "(batch, max_pages)", q);
    TORCH_CHECK(bt.size(0) == B, kOp, ": `block_table` has ", num(bt.size(0)), " rows, `q` has batch ", num(B));
    page_size = k_cache.size(1);
    TORCH_CHECK(page_size >= 16 && page_size <= 256 && page_size % 16 == 0, kOp, ": page size ", num(page_size),
                " (dim 1 of `k_cache`) is not supported: a multiple of 16 in 16..256");
    capacity = bt.size(1) * page_size;
  } else {
    TORCH_CHECK(k_cache.size(0) == B, kOp, ": `k_cache` has batch ", num(k_cache.size(0)), ", `q` has ", num(B),
                " (pass block_table for a page pool)");
    capacity = k_cache.size(1);
    page_size = capacity;
  }
  TORCH_CHECK(capacity <= INT32_MAX, kOp, ": a cache of ", num(capacity), " positions per sequence is too long");
  if (cache_seqlens.has_value()) {
    check_index(*cache_seqlens, "cache_seqlens", 1, "(batch,)", q);
    TORCH_CHECK(cache_seqlens->size(0) == B, kOp, ": `cache_seqlens` has ", num(cache_seqlens->size(0)),
                " entries, `q` has batch ", num(B));
  }
  // attn_mask (forward's short-query route): SDPA layout (B, Hq, Lq, S) over logical key positions.
  const MaskKind mask_kind =
      attn_mask.has_value() ? check_mask(*attn_mask, q, B, Hq, Lq, capacity, kOp) : MaskKind::kNone;
  const launch::RegistryEntry* kernel =
      launch::route(route_query(launch::Op::kDecode, q, kOp, D, Dv, Lq, capacity, B * Hq));
  TORCH_CHECK(kernel != nullptr && kernel->decode_run != nullptr, kOp, ": head dims (", num(D), ", ", num(Dv), ") for ",
              q.scalar_type(), " are not compiled into this build (see ffpa_attn.build_info()['head_dim_pairs']['decode'])");

  // Output follows the layout of `q`: a (B, Hq, Lq, D)-backed view in gives a (B, Hq, Lq, Dv)-backed output.
  const bool heads_outer = q.stride(2) > q.stride(1) && Lq > 1;
  auto opts = q.options();
  at::Tensor out = heads_outer ? at::empty({B, Hq, Lq, Dv}, opts).transpose(1, 2) : at::empty({B, Lq, Hq, Dv}, opts);
  at::Tensor lse = at::empty({B, Hq, Lq}, opts.dtype(at::kFloat));
  if (B == 0 || Hq == 0) return {out, lse};

  const c10::cuda::CUDAGuard guard(q.device());
  DecodeParams p{};
  fill_attn_params(p, kRowsOuter, q, k_cache, v_cache, out, lse, B, Hq, Hkv, Lq, capacity, D, Dv, scale, causal);
  p.seqlens = cache_seqlens.has_value() ? cache_seqlens->data_ptr<int>() : nullptr;
  p.block_table = paged ? block_table->data_ptr<int>() : nullptr;
  p.block_table_stride = paged ? block_table->stride(0) : 0;
  if (mask_kind != MaskKind::kNone) fill_mask(p, *attn_mask, mask_kind);
  p.page_size = static_cast<int>(page_size);
  p.kv_pages = static_cast<int>(std::min<int64_t>(k_cache.size(0), INT32_MAX));
  p.page_shift = -1;
  for (int sh = 0; sh < 31; ++sh)
    if ((int64_t{1} << sh) == page_size) p.page_shift = sh;
  if (capacity == 0) {  // an empty cache: every row is 0 with LSE -inf
    out.zero_();
    lse.fill_(-INFINITY);
    return {out, lse};
  }
  p.num_splits = static_cast<int>(num_splits);  // 0: the launcher's auto count (the heuristic only for auto)
  const launch::DecodePlan plan = kernel->decode_plan(p);
  p.num_splits = plan.splits;  // at least 1 (clamp_decode_splits)

  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(q.get_device()).stream();
  at::Tensor o_part, lse_part, counters;  // the splits' partials, kept alive until the kernels are enqueued
  if (p.num_splits > 1) {
    const int64_t rows = (Hq / Hkv) * Lq;
    lse_part = at::empty({p.num_splits, B, Hkv, rows}, opts.dtype(at::kFloat));
    o_part = at::empty({p.num_splits, B, Hkv, rows, Dv}, opts.dtype(at::kFloat));
    p.o_part = o_part.data_ptr<float>();
    p.lse_part = lse_part.data_ptr<float>();
    if (plan.fused_merge) p.merge_counters = merge_counters(B * Hkv * rows, q, stream, counters);  // >= the row blocks
    if (plan.spread_merge) {  // two counters per row block
      p.merge_counters = merge_counters(2 * B * Hkv * rows, q, stream, counters);
      p.merge_spread = p.merge_counters != nullptr;
      p.balanced_splits = plan.balanced && p.merge_spread;
    }
  }
  const cudaError_t err = kernel->decode_run(p, stream);
  TORCH_CHECK(err == cudaSuccess, kOp, ": kernel launch failed: ", cudaGetErrorString(err));
  return {out, lse};
}

}  // namespace ffpa::ops
