// Compile-time shape of one FFPA forward kernel instantiation: tile sizes, warp layout, shared
// memory footprint. Host- and device-usable (no device code), so csrc/launch can size launches
// from the same numbers the kernel uses. Impossible configurations fail here, at compile time.
#pragma once
#include <cstdint>
#include <type_traits>

#include "ffpa/smem_tile.cuh"

namespace ffpa {

// FFPA levels (see ffpa_fwd_sm80.cuh for the schemes):
//   L1: O accumulator in registers, all of Dv per block   -> registers O(Dv), shared memory O(1)
//   L2: O in registers one kGroupD-wide group of Dv per block, Q@K^T recomputed per group
//                                                          -> registers O(1), shared memory O(1)
//   L3: O accumulator in a global fp32 workspace, rescaled slice by slice per KV tile
//                                                          -> registers O(1), shared memory O(1)
enum class Level : int { kL1 = 1, kL2 = 2, kL3 = 3 };

// MMA accumulation: kF32 both products in fp32; kF16 both in fp16 (fp16 inputs only);
// kMixed Q@K^T in fp32 and P@V in fp16 (fp16 inputs only). Softmax statistics are fp32 always.
enum class AccMode : int { kF32 = 0, kF16 = 1, kMixed = 2 };

// How the staged Q/K/V slices sit in shared memory (smem_tile.cuh): an XOR swizzle (no extra
// bytes; conflict-free at 2, 4 or a multiple of 8 16-byte units per row), rows padded by one
// 16-byte unit (any even width, 1/units more bytes), or kAuto: the swizzle where it is
// conflict-free, else padding (slices of 160, 224, 320... columns).
enum class SmemLayout : int { kAuto = 0, kSwizzle = 1, kPad = 2 };

template <SmemLayout kLayout, int kRows, int kCols>
using StageTile = std::conditional_t<
    kLayout == SmemLayout::kSwizzle, SwizzledTile<kRows, kCols>,
    std::conditional_t<kLayout == SmemLayout::kPad, PaddedTile<kRows, kCols>, SmemTile<kRows, kCols>>>;

// One row of the tile table: how a block is cut. Warps form a kWarpsM x kWarpsN grid:
//   Q@K^T : warp (wm, wn) owns S rows [16*wm, +16) and columns [wn*BlockN/kWarpsN, +BlockN/kWarpsN)
//   P@V   : warp (wm, wn) owns O rows [16*wm, +16) and, in every kChunkD-wide slice of the head
//           dim, columns [wn*kChunkD/kWarpsN, +kChunkD/kWarpsN)
// chunk_d is the head-dim slice staged per pipeline step (a multiple of the 16-wide MMA k).
// group_d (L2 only) is the width of the Dv group one block owns.
// q_resident keeps the block's whole Q tile in shared memory, loaded once, instead of streaming
// it with every K slice: a third less L2 traffic per KV tile, at the price of Br x D x 2 bytes of
// shared memory (so no longer O(1) in D; a tuning variant, not the L1 default).
// stages, when nonzero, is the ring depth auto calls use (else the deepest of 3, 2 that fits).
template <int kWarpsM_, int kWarpsN_, int kBlockN_, int kChunkD_, bool kQResident_ = false, int kGroupD_ = 0,
          int kMinBlocks_ = 1, SmemLayout kLayout_ = SmemLayout::kAuto, int kStages_ = 0>
struct Tile {
  static constexpr int warps_m = kWarpsM_;
  static constexpr int warps_n = kWarpsN_;
  static constexpr int block_n = kBlockN_;
  static constexpr int chunk_d = kChunkD_;
  static constexpr bool q_resident = kQResident_;
  static constexpr int group_d = kGroupD_;
  static constexpr int min_blocks = kMinBlocks_;  // blocks per SM the registers are capped for
  static constexpr SmemLayout layout = kLayout_;   // staged slices: swizzled or padded rows
  static constexpr int stages = kStages_;
};

// The tile table for L1 (O accumulator in registers: per-thread O registers are
// Dv / (2 * warps_n), so wide heads use Br = 32 and spread O over 4 warps along N).
// Per head dim, the fastest spill-free tile measured by tools/tune_l1.cu (docs/tuning_l1.md): runs
// 2-3 on an H200 (session 2), runs 7-8 on an H100 (session 4). Larger Bc and chunk_d mean more MMAs
// per barrier, which is what this kernel's speed follows. Padded rows (SmemLayout::kPad) let the
// 64-row 4x2 tiles fit at D = 384..512: the swizzle's per-k-step XOR addresses cost ptxas ~10-40
// registers there and spilled (D = 384 4x2 Bc128 c192: 752 B swizzled, 0 padded), while with
// padding every k-step's address is the same register plus an immediate. Run 8, H100, bf16,
// N = 8192, against the session-3 table: 320 179 -> 183 (c160, padded by kAuto), 384 156 -> 195,
// 448 136 -> 177, 512 161 -> 181 TFLOPS. Where a swizzled tile fits it stays (320 c64 swizzled
// 179 vs padded 169; 1024 131 vs 118: fewer registers let ptxas hoist fewer fragment loads).
// Run 14 (session 5): with the ring depth compiled in (L1's 2- and 3-stage kernels), 384 196 -> 206,
// 448 177 -> 186, 512 182 -> 198, 640 163 -> 186, 768 140 -> 160, 1024 132 -> 155; D = 576 runs
// 2 stages (190; its 3-stage kernel spills 88 B and runs 177).
template <int kHeadDimV>
using L1TileForDv = std::conditional_t<
    (kHeadDimV == 320), Tile<4, 2, 128, 160>,
    std::conditional_t<(kHeadDimV == 384), Tile<4, 2, 128, 128, false, 0, 1, SmemLayout::kPad>,
    std::conditional_t<
        (kHeadDimV == 448 || kHeadDimV == 512), Tile<4, 2, 128, 64, false, 0, 1, SmemLayout::kPad>,
        std::conditional_t<
            (kHeadDimV <= 512), Tile<4, 2, 64, 64>,
            std::conditional_t<
                (kHeadDimV == 576), Tile<2, 4, 128, 192, false, 0, 1, SmemLayout::kAuto, 2>,
                std::conditional_t<
                    (kHeadDimV == 640), Tile<2, 4, 128, 128>,
                    std::conditional_t<(kHeadDimV == 768 || kHeadDimV == 960), Tile<2, 4, 64, 192>,
                                       Tile<2, 4, 128, 64>>>>>>>>;

// E != Ev (e.g. 576/512): the Dv entry when its slice width also divides E, else 64-wide slices.
template <int kHeadDim, int kHeadDimV>
using L1Tile = std::conditional_t<kHeadDim % L1TileForDv<kHeadDimV>::chunk_d == 0, L1TileForDv<kHeadDimV>,
                                  std::conditional_t<(kHeadDimV <= 512), Tile<4, 2, 64, 64>, Tile<2, 4, 128, 64>>>;

// L2: one tile at every head dim (registers and shared memory the same for all D): 64 x 128
// tiles, 64-wide slices, 256-wide Dv groups (the last group of a Dv that 256 does not divide
// is narrower; its block skips the missing slices).
using L2Tile = Tile<4, 2, 128, 64, false, 256>;
// L3: one tile at every head dim. Its speed follows FLOPs per byte of K/V and workspace traffic,
// which grows with Bc: runs 5 and 10-12 (docs/tuning_l1.md) went from Bc = 64 (2 blocks/SM, ~57
// TFLOPS) to 128 (~120-145) to 256 (~165-185 at D = 1024 and 2048, one block per SM). Bc = 256
// needs padded rows (the swizzle's addresses spilled 248 B) and P read from shared memory per
// k-step instead of 64 held registers (FfpaFwd::kHoldP).
using L3Tile = Tile<4, 2, 256, 64, false, 0, 1, SmemLayout::kPad>;

template <Level kLevel, int kHeadDim, int kHeadDimV>
using FfpaTile = std::conditional_t<kLevel == Level::kL1, L1Tile<kHeadDim, kHeadDimV>,
                                    std::conditional_t<kLevel == Level::kL2, L2Tile, L3Tile>>;

template <typename Element_, int kHeadDim_, int kHeadDimV_, Level kLevel_, typename Cfg,
          AccMode kAcc_ = AccMode::kF32>
struct FfpaTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr Level kLevel = kLevel_;
  static constexpr AccMode kAcc = kAcc_;
  static constexpr bool kQKHalf = kAcc == AccMode::kF16;   // Q@K^T accumulates in fp16
  static constexpr bool kPVHalf = kAcc != AccMode::kF32;   // P@V accumulates in fp16
  static constexpr int kMinBlocksPerSm = Cfg::min_blocks;  // __launch_bounds__ and default stages
  static constexpr int kStages = Cfg::stages;               // 0: auto

  static constexpr int kWarpsM = Cfg::warps_m;
  static constexpr int kWarpsN = Cfg::warps_n;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kBlockM = 16 * kWarpsM;
  static constexpr int kBlockN = Cfg::block_n;
  static constexpr int kChunkD = Cfg::chunk_d;
  static constexpr bool kQResident = Cfg::q_resident;

  static constexpr int kChunksQK = kHeadDim / kChunkD;    // pipeline steps of Q@K^T per KV tile
  // Dv columns one block produces: all of Dv, or one group for L2 (kGroups blocks per row block).
  static constexpr int kOutD = kLevel == Level::kL2 ? Cfg::group_d : kHeadDimV;
  static constexpr int kGroups = (kHeadDimV + kOutD - 1) / kOutD;
  static constexpr int kChunksV = kOutD / kChunkD;        // (at most) pipeline steps of P@V per KV tile
  static constexpr int kWarpColsS = kBlockN / kWarpsN;    // S columns per warp
  static constexpr int kNTilesS = kWarpColsS / 8;         // m16n8 S tiles per warp
  static constexpr int kWarpColsO = kChunkD / kWarpsN;    // O columns per warp per chunk
  static constexpr int kNTilesO = kWarpColsO / 8;         // m16n8 O tiles per warp per chunk
  static constexpr int kKStepsQK = kChunkD / 16;          // MMA k-steps per Q@K^T chunk
  static constexpr int kKStepsPV = kBlockN / 16;          // MMA k-steps per P@V chunk

  // Shared memory: [resident Q, if kQResident] then a ring of kStages buffers, each holding a
  // (Q, K) slice pair (K alone when Q is resident) or a V slice (+ O slice for L3), then the P tile and the
  // cross-warp row-statistics exchange. Without kQResident none of it depends on D.
  using QTile = StageTile<Cfg::layout, kBlockM, kChunkD>;
  using KTile = StageTile<Cfg::layout, kBlockN, kChunkD>;
  using VTile = KTile;
  using PTile = SmemTile<kBlockM, kBlockN>;  // swizzled where conflict-free (Bc = 64, 128, 256), else padded
  static constexpr bool kSmemPadded = QTile::kAnyRowStep;  // padded rows (else swizzled)
  static constexpr int kQSliceBytes = QTile::kBytes;
  static constexpr int kKSliceBytes = KTile::kBytes;
  static constexpr int kVSliceBytes = VTile::kBytes;
  // L3: a V item also brings the block's fp32 O slice from the workspace (cp.async, as far
  // ahead as the pipeline runs), so its latency hides like the V slice's.
  static constexpr int kOSliceBytes = kLevel == Level::kL3 ? kBlockM * kChunkD * 4 : 0;
  static constexpr int kQKItemBytes = (kQResident ? 0 : kQSliceBytes) + kKSliceBytes;
  static constexpr int kVItemBytes = kVSliceBytes + kOSliceBytes;
  static constexpr int kStageBytes = kQKItemBytes > kVItemBytes ? kQKItemBytes : kVItemBytes;
  static constexpr int kQResidentBytes = kQResident ? kChunksQK * kQSliceBytes : 0;
  static constexpr int kPBytes = PTile::kBytes;
  static constexpr int kRedBytes = kWarpsN * kBlockM * 4;
  static constexpr int smem_bytes(int stages) {
    return kQResidentBytes + stages * kStageBytes + kPBytes + kRedBytes;
  }

  static_assert(kHeadDim % kChunkD == 0 && kHeadDimV % kChunkD == 0,
                "head dims must be multiples of the staged slice width");
  static_assert(kLevel != Level::kL2 || (Cfg::group_d > 0 && Cfg::group_d % kChunkD == 0),
                "L2 needs a Dv group width that is a multiple of the slice width");
  static_assert(kLevel == Level::kL2 || Cfg::group_d == 0, "group_d is an L2 tile parameter");
  static_assert(kChunkD % 16 == 0 && kBlockN % 16 == 0, "MMA k-steps are 16 wide");
  static_assert(kNTilesS % 2 == 0 && kNTilesO % 2 == 0,
                "ldmatrix.x4 feeds two n8 tiles: warp column spans must be multiples of 16");
  static_assert(kStageBytes % 128 == 0 && kPBytes % 128 == 0, "keep buffers 128-byte aligned");
  static_assert(kThreads <= 512, "at most 16 warps per block");
};

}  // namespace ffpa
