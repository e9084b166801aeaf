// The FP8 (e4m3) attention kernel's tile (kernels/fa2_fwd_sm90_fp8.cuh): FA-2 style on Hopper, two or
// three consumer warpgroups of 64 query rows and one producer warpgroup, the whole head dim per tile.
// Torch-free.
//
// Shared-memory operands are 128-byte-swizzled rows of bytes: a 128-byte chunk holds 128 e4m3
// values, so the layouts are GmmaSw128Tile's with half the columns (a b16 "column" = two bytes), and a
// k-step of 32 e4m3 is the same 32 bytes as a b16 k-step of 16. V arrives transposed (V^T: Dv rows of
// 128 keys) because 8-bit wgmma reads B K-major only.
#pragma once
#include <cuda_fp8.h>

#include "ffpa/tile/smem_tile.cuh"

namespace ffpa {

// The key position that k-column c (0..31) of a 32-key group of the P A-fragment holds. The S
// accumulator gives thread (g, t4) keys 8 j + 2 t4 + {0, 1} (n8 tile j); the 8-bit A fragment wants
// columns 4 t4 + {0..3} and 16 + 4 t4 + {0..3}. Packing the accumulator as it lies (tiles 0 and 1
// into the first register pair, 2 and 3 into the second) puts key 16 h + 8 (i / 2) + 2 t + i % 2 at
// column 16 h + 4 t + i; V^T stores its keys in that order (kernels/fp8_v_transpose.cuh), so P V
// needs no register shuffle at all.
__host__ __device__ constexpr int fp8_p_key(int c) {
  return 16 * (c / 16) + 8 * ((c % 4) / 2) + 2 * ((c % 16) / 4) + (c % 2);
}

// kVtInKernel_: V arrives as it lies (keys x Dv bytes, TMA, into a staging ring) and the producer
// warpgroup's three idle warps transpose it into the V^T stages the consumers read (ldmatrix.trans of
// byte pairs, two prmt per output word, stmatrix: kernels/fa2_fwd_sm90_fp8.cuh `transpose`); else the
// launcher's pre-pass writes V^T to global memory (kernels/fp8_v_transpose.cuh) and TMA loads it.
// The FA-2-style FP8 kernel's tile by head dim: consumer warpgroups of 64 query rows and keys per tile.
// Three consumers (160 registers each) up to D = 128, on the widest key tile whose S, O and P fit them
// (D = 64: S 64 + O 32 + P 16 at 128 keys; D = 128: S 48 + O 64 + P 12 at 96; at 128 keys ptxas spilled
// 144 bytes and serialised the wgmmas); D = 256 two (240 registers: O alone takes 128) on 128 keys.
// Session 39, one H100, same runs (scripts/dev/fp8_probe.py, TFLOPS, non-causal / causal; B=4 H=8
// N=8448, B=1 H=32 N=8192): D = 64 three x 128 keys 608-610 / 515-516 and 591 / 496-506 against two x 192
// keys' 541 / 458-459 and 518 / 446-455 (+12-14%; three x 160 keys read the same within 1%); D = 128 three
// x 96 keys 848-890 / 735-746 and 820-870 / 757-765 against two x 192's 828-845 / 709-722 and 805-813 /
// 737-748 (+2-7%). Two x 224 keys (FlashAttention-3's FP8 tile at D = 128) ran 3-5% slower than 192. Where
// the grid is under a wave the 192-row blocks cost: B=1 H=8 N=2048 D = 128 358-363 / 187-188 against
// 369-377 / 200-204.
struct Fp8TileSpec {
  int consumers;
  int block_n;
};
constexpr Fp8TileSpec fp8_tile(int head_dim) {
  return head_dim <= 64 ? Fp8TileSpec{3, 128} : head_dim <= 128 ? Fp8TileSpec{3, 96} : Fp8TileSpec{2, 128};
}

template <int kHeadDim_, bool kVtInKernel_ = false>
struct Fa2Fp8Traits {
  // The row max: the standing max with e4m3's policy (attn/standing_max.cuh StandingMaxE4m3; the kernel's
  // header has the measurement). Before it (session 33, one H200, FP8 / bf16 of the same pass): eager at D <= 128,
  // slack 2 at D = 256 (1.47x against 1.41x eager at B=4 H=8 N=8448), P offset 8 - slack.
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDim_;
  static constexpr bool kVtInKernel = kVtInKernel_;
  static constexpr Fp8TileSpec kTile = fp8_tile(kHeadDim_);
  static constexpr int kConsumers = kTile.consumers;
  static constexpr int kBlockM = 64 * kConsumers;  // query rows per block
  // Keys per tile (fp8_tile). A V^T row is 128-byte chunks of keys, the last one of a 96-key tile part used.
  static constexpr int kBlockN = kTile.block_n;
  static constexpr int kKStepsQK = kHeadDim / 32;
  static constexpr int kKStepsPV = kBlockN / 32;
  static constexpr int kNTilesS = kBlockN / 8;
  static constexpr int kNTilesO = kHeadDimV / 8;
  // Bytes: kHeadDim e4m3 per row, in whole 128-byte rows: at D = 64 the row's second half is TMA's
  // zero fill past the head dim (the box is 128 bytes wide), which no k-step reads.
  static constexpr int kRowBytes = kHeadDim_ < 128 ? 128 : kHeadDim_;
  using QTile = GmmaSw128Tile<kBlockM, kRowBytes / 2>;
  using KTile = GmmaSw128Tile<kBlockN, kRowBytes / 2>;
  using VnTile = KTile;  // V as it lies (in-kernel transpose): keys x Dv bytes, loaded as K is
  using VtTile = GmmaSw128Tile<kHeadDimV, 64 * ((kBlockN + 127) / 128)>;  // V^T: Dv rows of whole 128-key chunks
  static constexpr int kThreads = 128 * (kConsumers + 1);
  // The block starts with 168 registers a thread with two consumers (65536 / 384, in steps of 8; 128 with
  // three): 128 x 24 + 256 x 240 (or 384 x 160) = 64512 is all of it, so the consumers' setmaxnreg.inc can
  // complete (a first in-kernel form gave the producer 32 and the consumers waited there forever). At 24
  // the transposers' loop spills 16 bytes (56 since session 51: the item walk of the persistent grid).
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = kConsumers == 3 ? 160 : 240;
  static constexpr int kTransposeWarps = 3;  // producer warps 1..3
  static constexpr int kBarrierBytes = 2 * 8 + 3 * 2 * 4 * 8;  // Q's two barriers, up to three rings of up to 4 stages
  static constexpr int kMaxSmem = 227 * 1024;
  // Shared memory for Q, k_stages K tiles, v_stages V^T tiles and n_stages staged V tiles.
  static constexpr int bytes(int k_stages, int v_stages, int n_stages) {
    return 1024 + QTile::kBytes + k_stages * KTile::kBytes + v_stages * VtTile::kBytes + n_stages * VnTile::kBytes +
           kBarrierBytes;
  }
  static constexpr int pick_stages(int v_stages, int n_stages) {
    return bytes(4, v_stages, n_stages) <= kMaxSmem ? 4 : bytes(3, v_stages, n_stages) <= kMaxSmem ? 3 : 2;
  }
  // Pre-pass form: K and V^T stages in step (one ring depth). In-kernel form: two staged V tiles and two
  // V^T stages (a V tile lands while the previous one is transposed), the rest to K.
  static constexpr int kVnStages = kVtInKernel ? 2 : 0;
  static constexpr int kVtStages = kVtInKernel ? 2 : bytes(4, 4, 0) <= kMaxSmem ? 4 : bytes(3, 3, 0) <= kMaxSmem ? 3 : 2;
  static constexpr int kKStages = kVtInKernel ? pick_stages(kVtStages, kVnStages) : kVtStages;
  static constexpr int kStages = kKStages;  // the K ring's depth (what KernelInfo reports)
  static constexpr int kSmemBytes = bytes(kKStages, kVtStages, kVnStages);
  // The transpose's work per tile: 32 keys x 16 bytes of V (one ldmatrix.x4) a warp at a time.
  static constexpr int kTransposeUnits = (kBlockN / 32) * (kHeadDimV / 16);

  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "whole k-steps in 128-byte rows, one wgmma for O (N <= 256)");
  static_assert(kBlockN % 32 == 0 && kKStepsPV * 32 == kBlockN, "whole k-steps of P V");
  static_assert((kConsumers == 2 || kConsumers == 3) && kBlockM <= 256 && kBlockN <= 256,
                "two or three consumers; Q's and K's TMA boxes take at most 256 rows");
  static_assert(fp8_p_key(0) == 0 && fp8_p_key(3) == 9 && fp8_p_key(4) == 2 && fp8_p_key(31) == 31,
                "the key order of the P fragment");
  static_assert(bytes(2, 2, 0) <= kMaxSmem, "two stages of K and V^T fit beside Q");
  static_assert(!kVtInKernel || (kKStages >= 3 && bytes(kKStages, kVtStages, kVnStages) <= kMaxSmem),
                "in-kernel transpose: at least three K stages beside two V^T stages and two staged V tiles");
  static_assert(kKStages <= 4 && kVtStages <= 4 && kVnStages <= 4, "the barrier bytes cover rings of up to 4 stages");
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;  // what __launch_bounds__(kThreads, 1) leaves a thread
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= kThreads * kLaunchRegs,
                "setmaxnreg moves registers within the block's launch allocation");
};

// Whether the FA-2-style FP8 kernel can transpose V itself at this head dim (its shared memory holds the
// staged V tiles beside at least three K stages): D = 64 and 128; D = 256 keeps the pre-pass.
constexpr bool fp8_vt_in_kernel_fits(int head_dim) {
  return head_dim <= 128;
}

// The FP8 kernel past D = 256 (kernels/ffpa_fwd_sm90_fp8.cuh): FFPA level 1's Hopper pipeline
// (kernels/ffpa_ws_pipeline.cuh) on e4m3, named as FfpaWsTraits names its tile (traits/ffpa_traits.h,
// whose picture applies): 64 query rows, 128-key tiles whose S the two consumers split (64 keys each,
// Q@K^T over the head dim in slices of 128 e4m3: one 128-byte row), P through shared memory as e4m3,
// and O split by columns (Dv / 2 each, in registers). What 8-bit operands change:
// * P V reads B K-major only, so V arrives transposed (the launcher's pre-pass, keys in order): a V
//   stage is 32 keys (one k-step) of every output column, Dv rows of 32 bytes in the 32-byte swizzle
//   (TMA writes it, wgmma reads it: ptx::gmma_desc_sw32_k);
// * P is stored as e4m3 (times 2^4, below the lazy row max) in a 64 x 128-byte tile.
// One column group (Dv <= 512: O 128 registers a consumer), no cluster pair of column groups; with
// kShareK_ (from 32 query blocks, causal or not: launch/heuristics.h ffpa_ws_share_k_fp8) query blocks
// 2 q + 1, 2 q run as a cluster pair loading each K slice and each V^T stage once for both
// (traits/ffpa_traits.h, FfpaWsTraits; bf16's pairs share K only). Sharing V^T too, session 39, one H100
// (fp8_probe.py, TFLOPS, K / K and V, two rounds): B=4 H=8 N=8448 867-872 / 881, causal 624-642 / 670-710;
// B=1 H=32 N=8192 867 / 871-876, causal 698-717 / 719-723; B=2 H=16 N=4096 767-770 / 799-804, causal 689-691
// / 710-726.
template <typename Out_, int kHeadDim_, bool kShareK_ = false>
struct FfpaWsFp8Traits {
  using Element = __nv_fp8_e4m3;
  // The row max: lazy with a slack of 4 (base 2) and P = 2^(s - m + 4) <= 2^8 (e4m3's largest normal
  // is 448), where the FA-2-style kernel runs the eager max and 2^(s - m + 8). Same-run A/B on an H200
  // (docs/fp8.md): +6% non-causal at D = 512 (O's 128-register rescale, on the pipeline's critical path
  // between P V and the next P, runs rarely), even causal; relative RMSE 2.65e-2 against 2.55e-2.
  static constexpr float kMaxSlack = 4.f;  // the lazy row max's slack (base 2)
  static constexpr float kPOffset = 4.f;   // P = 2^(s - m + kPOffset)
  static_assert(kMaxSlack + kPOffset <= 8.f, "P stays within e4m3's range (largest normal 448)");
  using Out = Out_;  // the output dtype (bf16 or fp16)
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDim_;
  static constexpr int kBlockM = 64;
  static constexpr int kConsumers = 2;
  static constexpr int kSliceD = 128;  // e4m3 of one Q@K^T stage: one 128-byte row
  static constexpr int kGroupCols = kHeadDimV;
  static constexpr int kGroups = 1;
  static constexpr bool kPair = false;
  static constexpr bool kShareK = kShareK_;
  static constexpr bool kShareV = kShareK_;  // the pair shares V^T's stages too (FfpaWsPipeline::kShareV)
  static constexpr int kPairSize = 1;
  static constexpr int kVKeys = 32;  // keys of one V stage: one e4m3 k-step
  static constexpr int kKRows = 128;
  static constexpr int kBlockN = kKRows;
  static constexpr int kColsS = kKRows / kConsumers;
  static constexpr int kPBuffers = 2;
  static constexpr bool kPadded = false;
  static constexpr int kCols0 = kHeadDimV / 2;
  static constexpr int kCols1 = kHeadDimV / 2;
  static constexpr int kColsS0 = kColsS;
  static constexpr int kColsS1 = kColsS;
  static constexpr int kSlicesQK = kHeadDim / kSliceD;
  static constexpr int kStagesV = kBlockN / kVKeys;
  static constexpr int kThreads = 128 * (kConsumers + 1);

  using QSlice = GmmaSw128Tile<kBlockM, kSliceD / 2>;  // bytes as b16 columns (Fa2Fp8Traits' convention)
  using KSlice = GmmaSw128Tile<kKRows, kSliceD / 2>;
  struct VStage {  // V^T: kHeadDimV rows (output columns) of kVKeys bytes (keys)
    static constexpr int kBytes = kHeadDimV * kVKeys;
  };
  using PTile = GmmaSw128Tile<kBlockM, kBlockN / 2>;  // P: 64 rows of 128 keys (bytes)
  static constexpr int kQKStageBytes = QSlice::kBytes + KSlice::kBytes;
  static constexpr int kVStageBytes = VStage::kBytes;
  static constexpr int kStatBytes = 4 * kBlockM * 4;
  static constexpr int kQKStages = 4;
  static constexpr int kVStages = 4;
  static constexpr int kVRingBytes = kVStages * kVStageBytes;
  static constexpr int kBarrierBytes = 256;
  static constexpr int kSmemBytes =
      1024 + kPBuffers * PTile::kBytes + kStatBytes + kQKStages * kQKStageBytes + kVRingBytes + kBarrierBytes;
  static constexpr int kMaxSmem = 227 * 1024;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;

  static_assert(kHeadDim % kSliceD == 0 && kHeadDim > 256 && kHeadDim <= 512,
                "whole 128-byte slices; past the FA-2-style kernel, O within the registers");
  static_assert(kCols0 == 192 || kCols0 == 256, "one e4m3 wgmma per V stage (N = Dv / 2: a generated shape)");
  static_assert(kVStageBytes % 1024 == 0 && kQKStageBytes % 1024 == 0 && PTile::kBytes % 1024 == 0,
                "stages stay 1024-byte aligned");
  static_assert(kSmemBytes <= kMaxSmem, "the stages fit shared memory");
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= 65536, "the register file holds the block");
};

}  // namespace ffpa
