// Definition of the FFPA forward launcher: grid (per level), pipeline depth, shared-memory opt-in,
// L3's workspace size. Included only by the generated instantiation files (one per family x
// dtype x head dims x accumulation mode).
#pragma once
#include <cuda_runtime.h>

#include "ffpa/traits/ffpa_traits.h"
#include "ffpa/kernels/ffpa_fwd_sm80.cuh"
#include "launch/fwd_launcher.h"
#include "launch/grid.cuh"
#include "launch/heuristics.h"

namespace ffpa::launch {

template <typename Element, int kHeadDim, int kHeadDimV, Level kLevel, AccMode kAcc>
struct FfpaLauncher<Element, kHeadDim, kHeadDimV, kLevel, kAcc>::Impl {
  using Traits = FfpaTraits<Element, kHeadDim, kHeadDimV, kLevel, FfpaTile<kLevel, kHeadDim, kHeadDimV>, kAcc>;
  static constexpr int kMaxStages = 4;
  // L1 with fp32 accumulation has kernels compiled for a ring depth of 2 and 3 (the depths
  // default_stages picks; H100 tools/tune_l1.cu run 14: D=512 182 -> 198, D=1024 132 -> 155 TFLOPS
  // at 3 stages); other depths, fp16/mixed accumulation and L2/L3 (no gain measured for L3) run
  // the kernel that reads the depth from the launch (two more kernels per instantiation cost
  // build time: the full build stays within the GPU check's budget this way).
  static constexpr bool kStaticDepths = kLevel == Level::kL1 && kAcc == AccMode::kF32;
  static inline bool smem_opted_in[kMaxStages + 1][64] = {};  // [static depth, or 0 for the runtime-depth kernel][device]
  static int kernel_slot(int stages) { return kStaticDepths && (stages == 2 || stages == 3) ? stages : 0; }
  static auto kernel(int stages) {
    if constexpr (kStaticDepths) {
      if (stages == 2) return attn::ffpa_fwd_kernel<Traits, 2>;
      if (stages == 3) return attn::ffpa_fwd_kernel<Traits, 3>;
    }
    return attn::ffpa_fwd_kernel<Traits, 0>;
  }
  static int pick_stages(int requested) {
    return requested > 0 ? requested
                         : default_stages(Traits::kStageBytes, Traits::smem_bytes(0), Traits::kMinBlocksPerSm,
                                          Traits::kStages);
  }
  // Stage count, shared memory and the opt-in every launch (and the L3 workspace query) needs.
  static cudaError_t prepare(int requested_stages, int* stages, int* smem) {
    *stages = pick_stages(requested_stages);
    *smem = Traits::smem_bytes(*stages);
    // The cached device limit here (this runs on every launch); the opt-in below, once per device,
    // clamps to what is left after the kernel's static shared memory.
    if (*smem > max_smem_optin()) return cudaErrorInvalidConfiguration;
    const int slot = kernel_slot(*stages);
    return opt_in_smem(kernel(*stages), slot > 0 ? *smem : Traits::smem_bytes(kMaxStages), smem_opted_in[slot]);
  }
  // L3's persistent grid: the blocks that are resident on the device at once, at most one per
  // (query block, head, batch) item. Each owns one workspace slot.
  static int64_t persistent_blocks(const FwdParams& p, int stages, int smem) {
    const int64_t items = static_cast<int64_t>((p.len_q + Traits::kBlockM - 1) / Traits::kBlockM) * p.heads_q * p.batch;
    const int64_t resident = static_cast<int64_t>(resident_blocks_per_sm(kernel(stages), Traits::kThreads, smem)) * num_sms();
    return items < resident ? items : resident;
  }
};

template <typename Element, int kHeadDim, int kHeadDimV, Level kLevel, AccMode kAcc>
cudaError_t FfpaLauncher<Element, kHeadDim, kHeadDimV, kLevel, kAcc>::info(int num_stages, bool query_attributes,
                                                                           KernelInfo* out) {
  using Traits = typename Impl::Traits;
  if (num_stages < 0 || num_stages > Impl::kMaxStages) return cudaErrorInvalidValue;
  KernelInfo k;
  k.family = Family::kFfpa;
  k.level = static_cast<int>(kLevel);
  k.acc = kAcc;
  k.head_dim = kHeadDim;
  k.head_dim_v = kHeadDimV;
  k.block_m = Traits::kBlockM;
  k.block_n = Traits::kBlockN;
  k.warps_m = Traits::kWarpsM;
  k.warps_n = Traits::kWarpsN;
  k.chunk_d = Traits::kChunkD;
  k.smem_padded = Traits::kSmemPadded;
  k.group_d = Traits::kOutD;
  k.threads = Traits::kThreads;
  k.num_stages = Impl::pick_stages(num_stages);
  k.smem_bytes = Traits::smem_bytes(k.num_stages);
  if (query_attributes) {
    const cudaError_t err = query_kernel_attributes(Impl::kernel(k.num_stages), &k);
    if (err != cudaSuccess) return err;
  }
  *out = k;
  return cudaSuccess;
}

template <typename Element, int kHeadDim, int kHeadDimV, Level kLevel, AccMode kAcc>
int64_t FfpaLauncher<Element, kHeadDim, kHeadDimV, kLevel, kAcc>::workspace_bytes(FwdParams p) {
  if constexpr (kLevel != Level::kL3) {
    return 0;
  } else {
    int stages = 0, smem = 0;
    if (p.num_stages < 0 || p.num_stages > Impl::kMaxStages || Impl::prepare(p.num_stages, &stages, &smem) != cudaSuccess)
      return -1;
    return Impl::persistent_blocks(p, stages, smem) * Impl::Traits::kBlockM * kHeadDimV * static_cast<int64_t>(sizeof(float));
  }
}

template <typename Element, int kHeadDim, int kHeadDimV, Level kLevel, AccMode kAcc>
cudaError_t FfpaLauncher<Element, kHeadDim, kHeadDimV, kLevel, kAcc>::run(FwdParams p, cudaStream_t stream) {
  using Traits = typename Impl::Traits;
  if (p.num_stages < 0 || p.num_stages > Impl::kMaxStages || !params_ok(p, kHeadDim, kHeadDimV))
    return cudaErrorInvalidValue;
  if (p.block_map != nullptr && (p.block_map_m != Traits::kBlockM || p.block_map_n != Traits::kBlockN))
    return cudaErrorInvalidValue;
  int smem = 0;
  const cudaError_t err = Impl::prepare(p.num_stages, &p.num_stages, &smem);
  if (err != cudaSuccess) return err;
  if constexpr (kLevel == Level::kL3) {
    if (p.o_accum == nullptr || p.o_accum_slots < 1) return cudaErrorInvalidValue;
    int64_t blocks = Impl::persistent_blocks(p, p.num_stages, smem);
    if (blocks > p.o_accum_slots) blocks = p.o_accum_slots;  // correct with any slot count; fewer is slower
    Impl::kernel(p.num_stages)<<<static_cast<unsigned>(blocks), Traits::kThreads, smem, stream>>>(p);
    return cudaGetLastError();
  } else {
    return launch_batched<Element>(Impl::kernel(p.num_stages), p, Traits::kBlockM, Traits::kThreads, smem, stream,
                                   Traits::kGroups);
  }
}

}  // namespace ffpa::launch
