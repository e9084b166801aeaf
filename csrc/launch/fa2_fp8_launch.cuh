// Definition of the FP8 (e4m3) forward launcher: V^T by the pre-pass (kernels/fp8_v_transpose.cuh) or, where
// asked (set_fp8_v_transpose; D = 64, 128), by the kernel itself; the pre-pass writes p.vt (sized by the op where KernelInfo::fp8_vt_prepass
// says so), the TMA maps of Q, K and V (or V^T), the shared-memory opt-in and
// the kernel (kernels/fa2_fwd_sm90_fp8.cuh) over work items of kBlockM (128 or 192) query rows of a (batch, head),
// one block an SM or one an item (launch/heuristics.h fp8_persistent_grid), the output
// dtype picked by p.out_fp16; past D = 256 the FFPA-style kernel (launch/ffpa_fp8_launch.cuh).
// sm_90a builds only; included only by the generated instantiation files.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "ffpa/kernels/fa2_fwd_sm90_fp8.cuh"
#include "ffpa/traits/fp8_traits.h"
#include "launch/ffpa_fp8_launch.cuh"
#include "launch/fp8_run.cuh"
#include "launch/fwd_launcher.h"
#include "launch/heuristics.h"
#include "launch/tma_desc.h"

namespace ffpa::launch {

// One form of the FA-2-style kernel (D = 64, 128, 256): kVtInKernel, V as it lies and the kernel's own
// transpose; else V^T by the pre-pass.
template <int kHeadDim, bool kVtInKernel>
struct Fa2Fp8Form {
  static constexpr int kHeadDimV = kHeadDim;
  using Traits = Fa2Fp8Traits<kHeadDim, kVtInKernel>;
  template <typename Out>
  struct Variant {
    static inline bool opted_in[64] = {};
    static constexpr auto kernel = &attn::fa2_fwd_fp8_kernel<Traits, Out>;
  };

  // Q, K and V as it lies: 128-byte chunks (one TMA box of every chunk of box_rows positions; at D = 64
  // one chunk of which the box's second half is zero fill); V^T: boxes of 128 keys x Dv.
  static cudaError_t encode_maps(const FwdParams& p, attn::Fp8TmaMaps* m) {
    constexpr int kChunks = Traits::kRowBytes / 128;
    auto rows = [](CUtensorMap* map, const void* base, int n, int heads, int batch, int64_t row_stride,
                   int64_t head_stride, int64_t batch_stride, int box_rows) {
      const uint64_t dims[5] = {kHeadDim < 128 ? kHeadDim : 128, static_cast<uint64_t>(n), kChunks,
                                static_cast<uint64_t>(heads), static_cast<uint64_t>(batch)};
      const int64_t strides[5] = {1, row_stride, 128, head_stride, batch_stride};
      const uint32_t box[5] = {128, static_cast<uint32_t>(box_rows), kChunks, 1, 1};
      return encode_strided_tma(map, TmaElem::kUInt8, base, 5, dims, strides, box);
    };
    cudaError_t err = rows(&m->q, p.q, p.len_q, p.heads_q, p.batch, p.q_row_stride, p.q_head_stride,
                           p.q_batch_stride, Traits::kBlockM);
    if (err == cudaSuccess)
      err = rows(&m->k, p.k, p.len_kv, p.heads_kv, p.batch, p.k_row_stride, p.k_head_stride, p.k_batch_stride,
                 Traits::kBlockN);
    if (err != cudaSuccess) return err;
    if constexpr (kVtInKernel) {
      return rows(&m->v, p.v, p.len_kv, p.heads_kv, p.batch, p.v_row_stride, p.v_head_stride, p.v_batch_stride,
                  Traits::kBlockN);
    } else {
      const uint64_t dims[4] = {static_cast<uint64_t>(p.vt_len), kHeadDimV, static_cast<uint64_t>(p.heads_kv),
                                static_cast<uint64_t>(p.batch)};
      const int64_t strides[4] = {1, p.vt_len, static_cast<int64_t>(kHeadDimV) * p.vt_len,
                                  static_cast<int64_t>(p.heads_kv) * kHeadDimV * p.vt_len};
      const uint32_t box[4] = {128, kHeadDimV, 1, 1};  // one 128-key chunk of a tile
      return encode_strided_tma(&m->vt, TmaElem::kUInt8, p.vt, 4, dims, strides, box);
    }
  }

  template <typename Out>
  static cudaError_t launch(const FwdParams& p, const attn::Fp8TmaMaps& maps, int64_t items, cudaStream_t stream) {
    using V = Variant<Out>;
    cudaError_t err = opt_in_smem(V::kernel, Traits::kSmemBytes, V::opted_in);
    if (err != cudaSuccess) return err;
    // Causal: pairs of query blocks on one block an SM, or single items longest first, one block each
    // (launch/heuristics.h fp8_causal_walk); the kernel walks Fa2WsItems::Walk either way.
    FwdParams q = p;
    int64_t grid = fp8_persistent_grid(q.is_causal, q.mask != nullptr, items, num_sms());
    if (q.is_causal) {
      const bool pairs = fp8_causal_walk(q.mask != nullptr, kHeadDim, q.len_kv) && num_sms() > 0;
      const int m_blocks = (q.len_q + Traits::kBlockM - 1) / Traits::kBlockM;
      q.causal_tail_bh = pairs ? 0 : q.heads_q * q.batch;
      const int64_t slots = attn::Fa2WsItems<Traits::kBlockM, Traits::kBlockN>::walk_slots(q, m_blocks);
      grid = pairs ? std::min<int64_t>(slots, num_sms()) : slots;
    }
    V::kernel<<<static_cast<unsigned>(grid), Traits::kThreads, Traits::kSmemBytes, stream>>>(q, maps);
    return cudaGetLastError();
  }

  static cudaError_t run(const FwdParams& p, cudaStream_t stream) {
    // V^T in P's fragment order, by the kernel or the pre-pass
    return fp8_run<Fa2Fp8Form, attn::Fp8TmaMaps, kHeadDim, true, !kVtInKernel>(p, stream);
  }
};

// The FA-2-style kernel: the pre-pass form by default; the in-kernel transpose (where its shared memory
// allows it: fp8_vt_in_kernel_fits) when set_fp8_v_transpose asks for it. Session 24 measured it correct
// (the same output to the bit) but slower: one H200, B=4 H=8 N=8448, 669 against 807 TFLOPS at D = 128, 500
// against 534 at D = 64 (docs/fp8.md).
template <int kHeadDim>
struct Fa2Fp8Launch {
  static constexpr int kHeadDimV = kHeadDim;
  static constexpr bool kHasInKernel = fp8_vt_in_kernel_fits(kHeadDim);
  using Prepass = Fa2Fp8Form<kHeadDim, false>;
  using InKernel = Fa2Fp8Form<kHeadDim, true>;
  using Traits = typename std::conditional_t<kHasInKernel, InKernel, Prepass>::Traits;

  static bool in_kernel() {
    return kHasInKernel && fp8_v_transpose() == Fp8VTranspose::kKernel;
  }

  static cudaError_t run(const FwdParams& p, cudaStream_t stream) {
    // In-kernel where asked and built; also where the caller passed no V^T buffer (it asked info() before).
    if constexpr (kHasInKernel)
      if (in_kernel() || p.vt == nullptr) return InKernel::run(p, stream);
    return Prepass::run(p, stream);
  }

  template <typename F>
  static cudaError_t fill_info(bool query_attributes, KernelInfo* out) {
    using T = typename F::Traits;
    KernelInfo k;
    k.family = Family::kFp8;
    k.level = 0;
    k.wgmma = true;
    k.head_dim = kHeadDim;
    k.head_dim_v = kHeadDimV;
    k.block_m = T::kBlockM;
    k.block_n = T::kBlockN;
    k.warps_m = 4 * T::kConsumers;
    k.warps_n = 1;
    k.producer_warps = 4;
    k.chunk_d = kHeadDim;
    k.group_d = kHeadDimV;
    k.threads = T::kThreads;
    k.num_stages = T::kStages;
    k.smem_bytes = T::kSmemBytes;
    k.fp8_vt_prepass = !T::kVtInKernel;
    if (query_attributes) {
      const cudaError_t err = query_kernel_attributes(F::template Variant<__nv_bfloat16>::kernel, &k);
      if (err != cudaSuccess) return err;
    }
    *out = k;
    return cudaSuccess;
  }

  // The form a call made now runs (the op sizes p.vt by fp8_vt_prepass).
  static cudaError_t info(bool query_attributes, KernelInfo* out) {
    if constexpr (kHasInKernel)
      if (in_kernel()) return fill_info<InKernel>(query_attributes, out);
    return fill_info<Prepass>(query_attributes, out);
  }
};

// Head dims up to 256 run the FA-2-style kernel, wider ones FFPA's (launch/ffpa_fp8_launch.cuh).
template <typename Element, int kHeadDim, int kHeadDimV>
struct Fp8Launcher<Element, kHeadDim, kHeadDimV>::Impl
    : std::conditional_t<(kHeadDim > 256), FfpaFp8Launch<kHeadDim>, Fa2Fp8Launch<kHeadDim>> {
  static_assert(std::is_same_v<Element, __nv_fp8_e4m3> && kHeadDim == kHeadDimV, "e4m3, E = Ev");
};

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t Fp8Launcher<Element, kHeadDim, kHeadDimV>::run(FwdParams p, cudaStream_t stream) {
  return Impl::run(p, stream);
}

template <typename Element, int kHeadDim, int kHeadDimV>
cudaError_t Fp8Launcher<Element, kHeadDim, kHeadDimV>::info(int num_stages, bool query_attributes, KernelInfo* out) {
  if (num_stages != 0) return cudaErrorInvalidValue;  // the ring's depth is the traits'
  return Impl::info(query_attributes, out);
}

}  // namespace ffpa::launch
