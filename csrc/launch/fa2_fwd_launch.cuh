// Definition of the FA-2 forward launchers, one per kernel (kMma: mma.sync, or the sm_90a wgmma
// kernel): tile from its table, pipeline depth, shared-memory opt-in, the block map's tile size.
// The wgmma launcher runs the warp-specialised TMA kernel (fa2_fwd_sm90_ws.cuh) when num_stages is
// auto and TMA can describe q, k and v; otherwise (a stride TMA cannot take, an explicit
// num_stages) the cp.async wgmma kernel, on the same tile, up to D = 256, and the mma.sync kernel
// past it (ffpa_attn/_spec.py builds the wgmma line up to 320: FFPA L1 runs wider heads on Hopper).
// Which one a call runs is the chooser's (launch/route.cpp; registry data from ffpa_attn/_spec.py).
// Included only by the generated instantiation files.
#pragma once
#include <cuda_runtime.h>

#include "ffpa/traits/fa2_traits.h"
#include "ffpa/kernels/fa2_fwd_sm80.cuh"
#if FFPA_HAS_SM90A
#include "ffpa/kernels/fa2_fwd_sm90.cuh"
#include "ffpa/kernels/fa2_fwd_sm90_ws.cuh"
#include "launch/tma_desc.h"
#endif
#include "launch/fwd_launcher.h"
#include "launch/grid.cuh"
#include "launch/heuristics.h"

namespace ffpa::launch {

// The warp-specialised TMA kernel's side of the wgmma launcher (kOn: the wgmma launcher of an
// sm_90a build); off, it is never wanted. kVariantsOn = false: the plain kernel only (no look-ahead or P pair
// twin: the short-keys tile's calls never take them).
template <typename Element, typename TraitsT, bool kOn, bool kSplitOn = false, bool kVariantsOn = true>
struct Fa2WsLaunch {
  using Traits = TraitsT;
  static constexpr bool kTmaStore = false;
  static constexpr int kQSlots = 0;
  static constexpr bool kOwnEnd = false;
  static constexpr bool kOInK = false;
  static bool wanted(int) { return false; }
  static cudaError_t info(KernelInfo, bool, KernelInfo*) { return cudaErrorNotSupported; }
  static cudaError_t run(const FwdParams&, cudaStream_t) { return cudaErrorNotSupported; }
  static int64_t split_bytes(const FwdParams&) { return 0; }
};

#if FFPA_HAS_SM90A
template <typename Element, typename TraitsT, bool kSplitOn, bool kVariantsOn>
struct Fa2WsLaunch<Element, TraitsT, true, kSplitOn, kVariantsOn> {
  using Traits = TraitsT;
  static constexpr int kD = Traits::kHeadDim > Traits::kHeadDimV ? Traits::kHeadDim : Traits::kHeadDimV;
  // O out through shared memory by TMA (Fa2FwdWs kTmaStore) at D <= kFa2TmaStoreMaxDim (launch/heuristics.h),
  // where two K/V stages fit beside its buffer; the launcher's only kernel there (no register-store twin).
  static constexpr bool kTmaStore = kD <= kFa2TmaStoreMaxDim && attn::Fa2WsPlan<Traits, true>::kFits;
  // Two Q slots (Fa2FwdWs kQSlots) at D <= kFa2TwoQSlotsMaxDim (launch/heuristics.h) where the second
  // costs no K/V stage.
  using PlanQ1 = attn::Fa2WsPlan<Traits, kTmaStore, 1>;
  using PlanQ2 = attn::Fa2WsPlan<Traits, kTmaStore, 2>;
  static constexpr int kQSlots =
      kD <= kFa2TwoQSlotsMaxDim && PlanQ2::kFits && PlanQ2::kStages == PlanQ1::kStages ? 2 : 1;
  using Plan = attn::Fa2WsPlan<Traits, kTmaStore, kQSlots>;
  // Ping-pong turns between the consumer warpgroups: +0.5..1.5% at D = 64..256 (H200, one run;
  // docs/hopper_profile.md).
  static constexpr bool kPingPong = true;
  // [split twin][variant: 0, look-ahead, P buffer pair, the two with the standing max][device]
  static inline bool opted_in[2][5][64] = {};
  using Kernel = attn::Fa2FwdWs<Traits, kPingPong, false, kTmaStore, kQSlots>;
  static constexpr bool kOwnEnd = Kernel::kOwnEnd;  // each consumer's own end (the look-ahead twin's too)
  // O out by TMA through the item's last K stage (Fa2FwdWs kOInK: D = 97..128's deferred-wait kernel; not the
  // split twin, which stores from registers).
  static constexpr bool kOInK = attn::Fa2FwdWs<Traits, kPingPong, false, kTmaStore, kQSlots, false, true>::kOInK;
  // The look-ahead variant (Fa2FwdWs kAhead: the next item's first S issued before this item's
  // epilogue) where launch/heuristics.h fa2_ws_look_ahead says; compiled only at the head dims it may run.
  static constexpr bool kAheadBuilt = kVariantsOn && kD <= kFa2LookAheadMaxDim;
  // The split tail's twin (Fa2FwdWs kSplit) runs the calls that split; compiled on the table's tile only
  // (kSplitOn: the masked tile's calls are masked or short, launch/heuristics.h fa2_narrow_tile).
  // P in two register buffers (Fa2FwdWs kPfPair: the deferred-wait kernel, D = 97..128) from kFa2PfPairMinKeys
  // (launch/heuristics.h fa2_ws_pf_pair); the split twin, which runs long keys only, always.
  static constexpr bool kPfPairBuilt = kVariantsOn && Kernel::kDefer;
  // The standing max (Fa2FwdWs kStandingMaxOn: no tile row max once a warp's rows have theirs) where
  // launch/heuristics.h fa2_ws_standing_max says, in the look-ahead and P pair kernels; the split twins always.
  template <bool kSplit, bool kStanding>
  static attn::Fa2KernelWs kernel_of(bool ahead, bool pair) {
    if constexpr (kAheadBuilt) {
      if (ahead) return attn::fa2_fwd_ws_kernel<Traits, kPingPong, true, kTmaStore, kQSlots, kSplit, false, false, kStanding>;
    }
    if constexpr (kPfPairBuilt) {
      if (pair || kSplit)
        return attn::fa2_fwd_ws_kernel<Traits, kPingPong, false, kTmaStore, kQSlots, kSplit, !kSplit && kOInK, true, kStanding>;
    }
    return attn::fa2_fwd_ws_kernel<Traits, kPingPong, false, kTmaStore, kQSlots, kSplit, !kSplit && kOInK, false, false>;
  }
  static attn::Fa2KernelWs kernel(bool ahead = false, bool split = false, bool pair = false, bool standing = false) {
    if constexpr (kSplitOn) {
      if (split) return kernel_of<true, true>(ahead, pair);
    }
    return standing ? kernel_of<false, true>(ahead, pair) : kernel_of<false, false>(ahead, pair);
  }

  // Auto depth only: an explicit num_stages pins the cp.async kernel's ring.
  static bool wanted(int num_stages) { return num_stages == 0; }

  // The split tail this tile runs a call with (kernels/fa2_ws_split.cuh; launch/heuristics.h fa2_split_tail)
  // and the fp32 workspace it takes (the op passes it as params.o_accum: partials, then the flags).
  using Split = attn::Fa2SplitTail;
  static_assert(Split::kMaxTiles == kFa2SplitTailMaxTiles, "the split tail's range word and its rule agree");
  static Fa2SplitPlan split_plan(const FwdParams& p) {
    if constexpr (!kSplitOn) return Fa2SplitPlan{};
    const int64_t items = static_cast<int64_t>((p.len_q + Traits::kBlockM - 1) / Traits::kBlockM) * p.heads_q * p.batch;
    return fa2_split_tail(items, num_sms(), p.len_kv, Traits::kBlockN, p.is_causal,
                          p.block_map != nullptr || p.mask != nullptr);
  }
  static int64_t split_bytes(const FwdParams& p) {
    const Fa2SplitPlan plan = split_plan(p);
    if (plan.shares == 0) return 0;
    return (Split::partial_floats<Traits::kNTilesO, Plan::kConsumers>(plan.shares) +
            Split::flag_count<Plan::kConsumers>(plan.shares)) * static_cast<int64_t>(sizeof(float));
  }

  // k: the cp.async kernel's description of the same tile.
  static cudaError_t info(KernelInfo k, bool query_attributes, KernelInfo* out) {
    k.wgmma = true;
    k.block_m = Traits::kBlockM;
    k.block_n = Traits::kBlockN;
    k.warps_m = Traits::kWarps;
    k.threads = Plan::kThreads;
    k.producer_warps = 4;
    k.num_stages = Plan::kStages;
    k.smem_bytes = Plan::kSmemBytes;
    k.o_tma_store = kTmaStore || kOInK;
    k.q_slots = kQSlots;
    k.own_end = kOwnEnd;
    k.work_counter = true;
    if (query_attributes) {
      const cudaError_t err = query_kernel_attributes(kernel(), &k);
      if (err != cudaSuccess) return err;
    }
    *out = k;
    return cudaSuccess;
  }

  static cudaError_t encode(CUtensorMap* map, const void* base, int cols, int rows, int heads, int batch,
                            int64_t row_stride, int64_t head_stride, int64_t batch_stride, int box_rows) {
    return encode_attn_tma(map, std::is_same_v<Element, __half> ? TmaElem::kFloat16 : TmaElem::kBFloat16, base, cols,
                           rows, heads, batch, row_stride, head_stride, batch_stride, box_rows);
  }

  static cudaError_t encode_maps(const FwdParams& p, attn::Fa2TmaMaps* m) {
    cudaError_t err = encode(&m->q, p.q, Traits::kHeadDim, p.len_q, p.heads_q, p.batch, p.q_row_stride, p.q_head_stride,
                             p.q_batch_stride, Traits::kBlockM);
    if (err == cudaSuccess)
      err = encode(&m->k, p.k, Traits::kHeadDim, p.len_kv, p.heads_kv, p.batch, p.k_row_stride, p.k_head_stride,
                   p.k_batch_stride, Traits::kBlockN);
    if (err == cudaSuccess)
      err = encode(&m->v, p.v, Traits::kHeadDimV, p.len_kv, p.heads_kv, p.batch, p.v_row_stride, p.v_head_stride,
                   p.v_batch_stride, Traits::kBlockN);
    return err;
  }

  // cudaErrorNotSupported: TMA cannot take these tensors (the caller runs the cp.async kernel).
  static cudaError_t run(FwdParams p, cudaStream_t stream) {
    alignas(64) attn::Fa2TmaMaps maps;
    if (encode_maps(p, &maps) != cudaSuccess) return cudaErrorNotSupported;
    // (the op's outputs are contiguous, so TMA takes O wherever it takes Q; the check stays for other callers)
    if ((kTmaStore || kOInK) && encode(&maps.o, p.o, Traits::kHeadDimV, p.len_q, p.heads_q, p.batch, p.o_row_stride,
                            p.o_head_stride, p.o_batch_stride, 64) != cudaSuccess)
      return cudaErrorNotSupported;
    const int smem = Plan::kSmemBytes;
    if (smem > max_smem_optin()) return cudaErrorNotSupported;
    const bool ahead = kAheadBuilt && p.block_map == nullptr && p.mask == nullptr && fa2_ws_look_ahead(kD, p.len_kv);
    // The split tail (launch/heuristics.h fa2_split_tail) where the op gave its workspace (split_bytes).
    const Fa2SplitPlan split = split_plan(p);
    const bool splits = split.shares > 0 && p.work_counter != nullptr && p.o_accum != nullptr;
    const bool pair = kPfPairBuilt && !ahead && (splits || fa2_ws_pf_pair(p.len_kv));
    const bool standing = splits || ((ahead || pair) && fa2_ws_standing_max(kD, p.len_kv, p.is_causal));
    const auto fn = kernel(ahead, splits, pair, standing);
    const int variant = ahead ? 1 : pair ? 2 : 0;
    const cudaError_t err = opt_in_smem(fn, smem, opted_in[splits ? 1 : 0][variant + (standing && variant ? 2 : 0)]);
    if (err != cudaSuccess) return err;
    const int m_blocks = (p.len_q + Traits::kBlockM - 1) / Traits::kBlockM;
    if (static_cast<int64_t>(m_blocks) * p.heads_q * p.batch > INT32_MAX) return cudaErrorNotSupported;
    // Persistent: one block per SM walks the slots (an item, or a causal pair; Fa2FwdWs::Walk), taking
    // them from p.work_counter where the op gave one (KernelInfo::work_counter).
    // Same-run A/B on an H200 against one block per item (docs/hopper_profile.md, session 17):
    // non-causal D = 256 +0..3%, causal +4..14% at D = 128 and 256.
    // Causal with the counter: the walk's last (batch, head)s as single items (fa2_causal_tail_bh).
    p.causal_tail_bh = 0;
    if (p.is_causal && p.work_counter != nullptr)
      p.causal_tail_bh = fa2_causal_tail_bh(static_cast<int64_t>(p.heads_q) * p.batch, m_blocks, num_sms());
    p.split_shares = 0;
    if (splits) {
      p.split_from = static_cast<int>(split.from);
      p.split_shares = split.shares;
      p.split_partials = p.o_accum;
      p.split_flags = reinterpret_cast<int*>(p.o_accum + Split::partial_floats<Traits::kNTilesO, Plan::kConsumers>(split.shares));
      if (cudaMemsetAsync(p.split_flags, 0, Split::flag_count<Plan::kConsumers>(split.shares) * sizeof(int), stream) !=
          cudaSuccess)
        return cudaErrorLaunchFailure;
    }
    const int64_t slots = Kernel::walk_slots(p, m_blocks);
    const int grid = static_cast<int>(slots > num_sms() ? num_sms() : slots);
    fn<<<grid, Plan::kThreads, smem, stream>>>(p, maps);
    return cudaGetLastError();
  }
};
#endif

template <typename Element, int kHeadDim, int kHeadDimV, Fa2Mma kMma>
struct Fa2Launcher<Element, kHeadDim, kHeadDimV, kMma>::Impl {
  static constexpr int kD = kHeadDim > kHeadDimV ? kHeadDim : kHeadDimV;
  static constexpr int kMaxStages = 4;
  static constexpr bool kWgmma = kMma == Fa2Mma::kWgmma;
  static_assert(kMma == Fa2Mma::kSync || kMma == Fa2Mma::kWgmma, "a launcher runs one of the two kernels");
#if !FFPA_HAS_SM90A
  static_assert(!kWgmma, "the wgmma launcher needs sm_90a code in the build (tools/gen_instantiations.py emits it "
                "only then)");
#endif

  // One kernel variant (a tile table row): its traits, its kernels per ring depth, its opt-in flags.
  template <typename TraitsT>
  struct Variant {
    using Traits = TraitsT;
    static inline bool smem_opted_in[kMaxStages + 1][64] = {};  // per ring depth (one kernel each), per device
    static int pick_stages(int requested) {
      const int s = requested > 0 ? requested
                                  : default_stages(Traits::kStageBytes, Traits::smem_bytes(0), Traits::kMinBlocks,
                                                   Traits::kStages);
      return Traits::kWgmma && s < 2 ? 2 : s;  // the wgmma kernel has no single-slot ring
    }
    static attn::Fa2KernelFn kernel(int stages) {
      if constexpr (Traits::kWgmma) {
#if FFPA_HAS_SM90A
        return attn::fa2_fwd_wgmma_kernel_for<Traits>(stages);
#else
        return nullptr;  // unreachable: the static_assert above
#endif
      } else {
        return attn::fa2_fwd_kernel_for<Traits>(stages);
      }
    }
  };
  // Past D = 256 the wgmma launcher has the warp-specialised kernel only (P V in two wgmmas; the
  // cp.async wgmma kernel stops at 256): where it does not run (TMA cannot take the tensors, an
  // explicit num_stages) the mma.sync kernel runs, on its own table's tile.
  static constexpr bool kWsOnly = kWgmma && kD > 256;
  using V = Variant<Fa2Traits<Element, kHeadDim, kHeadDimV,
                              std::conditional_t<kWgmma && !kWsOnly, Fa2WgmmaTileFor<kD>, Fa2TileFor<kD>>>>;
  static_assert(V::Traits::kWgmma == (kWgmma && !kWsOnly), "the tile table row and the launcher disagree on the MMA");

  // The warp-specialised kernel (the wgmma launcher's head dims all take it).
  static constexpr bool kWsOn = kWgmma;
  using Ws = Fa2WsLaunch<
      Element, std::conditional_t<kWsOn, Fa2Traits<Element, kHeadDim, kHeadDimV, Fa2WgmmaTileFor<kD>>, typename V::Traits>,
      kWsOn, true>;
  // Calls with attn_mask: the same two kernels on a tile aligned to mask blocks where the table's
  // is not (fa2_tile_sm90_masked, 128 query rows by a power-of-two key tile). Picked by the block
  // map's tile. Past 256 (kWsOnly) the warp-specialised kernel on 32-key tiles, its fallback the
  // mma.sync kernel's table tile, of the same blocks.
  using VM = std::conditional_t<kWsOn && !kWsOnly, Variant<Fa2Traits<Element, kHeadDim, kHeadDimV, Fa2WgmmaMaskedTileFor<kD>>>, V>;
  using WsM = Fa2WsLaunch<
      Element, std::conditional_t<kWsOn, Fa2Traits<Element, kHeadDim, kHeadDimV, Fa2WgmmaMaskedTileFor<kD>>, typename VM::Traits>,
      kWsOn>;
  static_assert(!kWsOn || (VM::Traits::kBlockM == WsM::Traits::kBlockM && VM::Traits::kBlockN == WsM::Traits::kBlockN),
                "a masked call's two kernels share the block map's tile");
  // (kWsOnly: V and VM are the same mma.sync tile, Ws and WsM differ in key tile at 320: 48 and 32. At
  // 384 both are 32 keys but distinct types, so the kernel is compiled twice: found in session 25's review
  // after the last device check, left for a run on the device.)
  static constexpr bool kMaskTile =
      kWsOnly || VM::Traits::kBlockM != V::Traits::kBlockM || VM::Traits::kBlockN != V::Traits::kBlockN;
  // Calls of 129..kFa2ShortKeys keys at D <= kFa2ShortMaxDim without a mask that the masked tile would run
  // (fa2_narrow_tile): the warp-specialised kernel on one key tile an item (fa2_tile_sm90_short; launch/heuristics.h
  // fa2_short_tile), its plain form only.
  static constexpr bool kShortOn = kWsOn && !kWsOnly && kD <= kFa2ShortMaxDim;
  using WsS = Fa2WsLaunch<
      Element,
      std::conditional_t<kShortOn, Fa2Traits<Element, kHeadDim, kHeadDimV, Fa2WgmmaShortTile>, typename V::Traits>,
      kShortOn, false, false>;
  static_assert(!kShortOn || WsS::Traits::kBlockM == WsM::Traits::kBlockM,
                "the op counts the short tile's work items on the masked tile's query blocks (ops/fwd.cpp)");

  static cudaError_t info(int num_stages, bool query_attributes, KernelInfo* out) {
    using Traits = typename V::Traits;
    KernelInfo k;
    k.family = Family::kFa2;
    k.level = 0;
    k.wgmma = Traits::kWgmma;
    k.head_dim = kHeadDim;
    k.head_dim_v = kHeadDimV;
    k.block_m = Traits::kBlockM;
    k.block_n = Traits::kBlockN;
    k.mask_block_m = VM::Traits::kBlockM;
    k.mask_block_n = VM::Traits::kBlockN;
    k.warps_m = Traits::kWarps;
    k.warps_n = 1;
    k.chunk_d = kHeadDim;
    k.smem_padded = Traits::QTile::kAnyRowStep;
    k.group_d = kHeadDimV;
    k.threads = Traits::kThreads;
    k.num_stages = V::pick_stages(num_stages);
    k.smem_bytes = Traits::smem_bytes(k.num_stages);
    if (Ws::wanted(num_stages)) {  // (kWsOnly: with the fallback's mask tile)
      k.mask_o_tma_store = WsM::kTmaStore || WsM::kOInK;
      k.mask_q_slots = WsM::kQSlots;
      k.mask_own_end = WsM::kOwnEnd;
      if constexpr (kShortOn) k.short_block_n = WsS::Traits::kBlockN;
      return Ws::info(k, query_attributes, out);
    }
    if (query_attributes) {
      const cudaError_t err = query_kernel_attributes(V::kernel(k.num_stages), &k);
      if (err != cudaSuccess) return err;
    }
    *out = k;
    return cudaSuccess;
  }

  // The table's tile splits (its split twin); the masked one never does (split_plan: none).
  static int64_t workspace_bytes(const FwdParams& p) {
    if (!Ws::wanted(p.num_stages)) return 0;
    return Ws::split_bytes(p);
  }

  static cudaError_t run(FwdParams p, cudaStream_t stream) {
    if constexpr (kMaskTile) {
      if (p.block_map != nullptr && p.block_map_m == VM::Traits::kBlockM && p.block_map_n == VM::Traits::kBlockN)
        return run_on<VM, WsM>(p, stream);
      // Calls without a mask that compute less on the masked tile (short sequences, causal diagonals):
      // launch/heuristics.h fa2_narrow_tile; the warp-specialised kernel only.
      if (kWsOn && !kWsOnly && WsM::wanted(p.num_stages) && p.block_map == nullptr && p.mask == nullptr &&
          fa2_narrow_tile(kD, static_cast<int64_t>(p.batch) * p.heads_q, p.len_q, p.len_kv, p.is_causal,
                          p.causal_offset, num_sms(), V::Traits::kBlockM, V::Traits::kBlockN, VM::Traits::kBlockM,
                          VM::Traits::kBlockN)) {
        // Of those, the ones whose keys fill one short-keys tile where 128-key tiles take two (fa2_short_tile).
        if constexpr (kShortOn) {
          if (fa2_short_tile(kD, p.len_kv, p.is_causal, WsS::Traits::kBlockN)) {
            const cudaError_t err = WsS::run(p, stream);
            if (err != cudaErrorNotSupported) return err;
          }
        }
        return run_on<VM, WsM>(p, stream);
      }
    }
    return run_on<V, Ws>(p, stream);
  }

  // One tile: the warp-specialised kernel where wanted and TMA takes the tensors, else the
  // variant's kernel (cp.async wgmma, or mma.sync past 256) at the requested (or default) depth.
  template <typename Var, typename WsT>
  static cudaError_t run_on(FwdParams p, cudaStream_t stream) {
    using Traits = typename Var::Traits;
    if (p.block_map != nullptr && (p.block_map_m != Traits::kBlockM || p.block_map_n != Traits::kBlockN))
      return cudaErrorInvalidValue;
    if (WsT::wanted(p.num_stages)) {
      const cudaError_t err = WsT::run(p, stream);
      if (err != cudaErrorNotSupported) return err;
    }
    p.num_stages = Var::pick_stages(p.num_stages);
    const int smem = Traits::smem_bytes(p.num_stages);
    if (smem > max_smem_optin()) return cudaErrorInvalidConfiguration;
    const auto kernel = Var::kernel(p.num_stages);
    if (kernel == nullptr) return cudaErrorInvalidValue;
    const cudaError_t err = opt_in_smem(kernel, smem, Var::smem_opted_in[p.num_stages]);
    if (err != cudaSuccess) return err;
    return launch_batched<Element>(kernel, p, Traits::kBlockM, Traits::kThreads, smem, stream);
  }
};

template <typename Element, int kHeadDim, int kHeadDimV, Fa2Mma kMma>
cudaError_t Fa2Launcher<Element, kHeadDim, kHeadDimV, kMma>::info(int num_stages, bool query_attributes,
                                                                  KernelInfo* out) {
  if (num_stages < 0 || num_stages > Impl::kMaxStages) return cudaErrorInvalidValue;
  return Impl::info(num_stages, query_attributes, out);
}

template <typename Element, int kHeadDim, int kHeadDimV, Fa2Mma kMma>
int64_t Fa2Launcher<Element, kHeadDim, kHeadDimV, kMma>::workspace_bytes(FwdParams p) {
  if (p.num_stages < 0 || p.num_stages > Impl::kMaxStages || !params_ok(p, kHeadDim, kHeadDimV)) return 0;
  return Impl::workspace_bytes(p);
}

template <typename Element, int kHeadDim, int kHeadDimV, Fa2Mma kMma>
cudaError_t Fa2Launcher<Element, kHeadDim, kHeadDimV, kMma>::run(FwdParams p, cudaStream_t stream) {
  if (p.num_stages < 0 || p.num_stages > Impl::kMaxStages || !params_ok(p, kHeadDim, kHeadDimV))
    return cudaErrorInvalidValue;
  return Impl::run(p, stream);
}

}  // namespace ffpa::launch
