// Compile-time shape of one FFPA forward kernel instantiation: tile sizes, warp layout, shared
// memory footprint. Host- and device-usable (no device code), so csrc/launch can size launches
// from the same numbers the kernel uses. Impossible configurations fail here, at compile time.
#pragma once
#include <cstdint>
#include <type_traits>

#include "ffpa/tile/smem_tile.cuh"

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
// The values are the codes of ffpa_attn/_spec.py ACCS (the ops' `acc` argument; 0 there is auto);
// the generated registry static_asserts them.
enum class AccMode : int { kF32 = 1, kF16 = 2, kMixed = 3 };
inline constexpr int kAccAuto = 0;  // the ops' `acc` code for "auto" (fp32)

// How the staged Q/K/V slices sit in shared memory (smem_tile.cuh): an XOR swizzle (no extra
// bytes; conflict-free at 2, 4 or a multiple of 8 16-byte units per row), rows padded by one
// 16-byte unit (any even width, 1/units more bytes), or kAuto: the swizzle where it is
// conflict-free, else padding (slices of 160, 224, 320... columns).
enum class SmemLayout : int { kAuto = 0, kSwizzle = 1, kPad = 2 };

template <SmemLayout kLayout, int kRows, int kCols>
using StageTile = std::conditional_t<
    kLayout == SmemLayout::kSwizzle, SwizzledTile<kRows, kCols>,
    std::conditional_t<kLayout == SmemLayout::kPad, PaddedTile<kRows, kCols>, SmemTile<kRows, kCols>>>;

// One row of an FFPA tile table, by name: how a block is cut. Warps form a warps_m x warps_n grid:
//   Q@K^T : warp (wm, wn) owns S rows [16*wm, +16) and columns [wn*block_n/warps_n, +block_n/warps_n)
//   P@V   : warp (wm, wn) owns O rows [16*wm, +16) and, in every chunk_d-wide slice of the head
//           dim, columns [wn*chunk_d/warps_n, +chunk_d/warps_n)
// Host- and device-usable (constexpr).
struct FfpaTileSpec {
  int warps_m = 0, warps_n = 0;           // the warp grid
  int block_n = 0;                        // keys per KV tile (Bc)
  int chunk_d = 0;                        // head-dim slice staged per pipeline step (a multiple of 16)
  bool q_resident = false;                // the whole Q tile stays in shared memory, loaded once, instead
                                          // of streaming with every K slice: a third less L2 traffic per
                                          // KV tile for Br x D x 2 bytes (no longer O(1) in D; tuning only)
  int group_d = 0;                        // L2 only: width of the Dv group one block owns
  int min_blocks = 1;                     // blocks per SM the registers are capped for (__launch_bounds__)
  SmemLayout layout = SmemLayout::kAuto;  // staged slices: swizzled or padded rows
  int stages = 0;                         // ring depth auto calls use; 0: the deepest of 3, 2 that fits

  constexpr FfpaTileSpec with_warps(int m, int n) const { FfpaTileSpec t = *this; t.warps_m = m; t.warps_n = n; return t; }
  constexpr FfpaTileSpec with_block_n(int v) const { FfpaTileSpec t = *this; t.block_n = v; return t; }
  constexpr FfpaTileSpec with_chunk_d(int v) const { FfpaTileSpec t = *this; t.chunk_d = v; return t; }
  constexpr FfpaTileSpec with_q_resident(bool v = true) const { FfpaTileSpec t = *this; t.q_resident = v; return t; }
  constexpr FfpaTileSpec with_group_d(int v) const { FfpaTileSpec t = *this; t.group_d = v; return t; }
  constexpr FfpaTileSpec with_min_blocks(int v) const { FfpaTileSpec t = *this; t.min_blocks = v; return t; }
  constexpr FfpaTileSpec with_layout(SmemLayout v) const { FfpaTileSpec t = *this; t.layout = v; return t; }
  constexpr FfpaTileSpec with_stages(int v) const { FfpaTileSpec t = *this; t.stages = v; return t; }
};

// The L1 table (O accumulator in registers: Dv / (2 * warps_n) O registers per thread, so wide
// heads use 32-row blocks and spread O over 4 warps along N), keyed by Dv: per head dim the fastest
// spill-free tile measured by tools/tune_l1.cu. Larger Bc and chunk_d mean more MMAs per barrier,
// which this kernel's speed follows; padded rows let the 64-row 4x2 tiles fit at 384..512 (the
// swizzle's per-k-step addresses spilled there). Each row's measurements: docs/tuning_l1.md.
constexpr FfpaTileSpec l1_tile_for_dv(int dv) {
  const FfpaTileSpec t{};
  if (dv == 320) return t.with_warps(4, 2).with_block_n(128).with_chunk_d(160);
  if (dv == 384) return t.with_warps(4, 2).with_block_n(128).with_chunk_d(128).with_layout(SmemLayout::kPad);
  if (dv == 448 || dv == 512) return t.with_warps(4, 2).with_block_n(128).with_chunk_d(64).with_layout(SmemLayout::kPad);
  if (dv <= 512) return t.with_warps(4, 2).with_block_n(64).with_chunk_d(64);
  if (dv == 576) return t.with_warps(2, 4).with_block_n(128).with_chunk_d(192).with_stages(2);
  if (dv == 640) return t.with_warps(2, 4).with_block_n(128).with_chunk_d(128);
  if (dv == 768 || dv == 960) return t.with_warps(2, 4).with_block_n(64).with_chunk_d(192);
  return t.with_warps(2, 4).with_block_n(128).with_chunk_d(64);
}

// E != Ev (e.g. 576/512): the Dv row when its slice width also divides E, else 64-wide slices.
constexpr FfpaTileSpec l1_tile(int head_dim, int head_dim_v) {
  const FfpaTileSpec row = l1_tile_for_dv(head_dim_v);
  if (head_dim % row.chunk_d == 0) return row;
  return head_dim_v <= 512 ? FfpaTileSpec{}.with_warps(4, 2).with_block_n(64).with_chunk_d(64)
                           : FfpaTileSpec{}.with_warps(2, 4).with_block_n(128).with_chunk_d(64);
}

// L2: one tile at every head dim (registers and shared memory the same for all D): 64 x 128
// tiles, 64-wide slices, 256-wide Dv groups (the last group of a Dv that 256 does not divide
// is narrower; its block skips the missing slices).
constexpr FfpaTileSpec l2_tile() { return FfpaTileSpec{}.with_warps(4, 2).with_block_n(128).with_chunk_d(64).with_group_d(256); }

// L3: one tile at every head dim. Its speed follows FLOPs per byte of K/V and workspace traffic,
// which grows with Bc (64 -> 128 -> 256 doubled it twice, docs/tuning_l1.md); Bc = 256 needs padded
// rows (the swizzle's addresses spilled) and P read from shared memory per k-step (FfpaFwd::kHoldP).
constexpr FfpaTileSpec l3_tile() {
  return FfpaTileSpec{}.with_warps(4, 2).with_block_n(256).with_chunk_d(64).with_layout(SmemLayout::kPad);
}

constexpr FfpaTileSpec ffpa_tile(Level level, int head_dim, int head_dim_v) {
  return level == Level::kL1 ? l1_tile(head_dim, head_dim_v) : level == Level::kL2 ? l2_tile() : l3_tile();
}

// A tile as a type, what FfpaTraits takes: any type with `static constexpr FfpaTileSpec value`.
template <Level kLevel, int kHeadDim, int kHeadDimV>
struct FfpaTableTile {
  static constexpr FfpaTileSpec value = ffpa_tile(kLevel, kHeadDim, kHeadDimV);
};
template <Level kLevel, int kHeadDim, int kHeadDimV>
using FfpaTile = FfpaTableTile<kLevel, kHeadDim, kHeadDimV>;
template <int kHeadDim, int kHeadDimV>
using L1Tile = FfpaTableTile<Level::kL1, kHeadDim, kHeadDimV>;
using L2Tile = FfpaTableTile<Level::kL2, 0, 0>;
using L3Tile = FfpaTableTile<Level::kL3, 0, 0>;

// Rows written positionally, for the tile sweeps of tools/tune_l1.cu only (the tables above name
// their fields).
template <int kWarpsM, int kWarpsN, int kBlockN, int kChunkD, bool kQResident = false, int kGroupD = 0,
          int kMinBlocks = 1, SmemLayout kLayout = SmemLayout::kAuto, int kStages = 0>
struct Tile {
  static constexpr FfpaTileSpec value = FfpaTileSpec{}
                                            .with_warps(kWarpsM, kWarpsN)
                                            .with_block_n(kBlockN)
                                            .with_chunk_d(kChunkD)
                                            .with_q_resident(kQResident)
                                            .with_group_d(kGroupD)
                                            .with_min_blocks(kMinBlocks)
                                            .with_layout(kLayout)
                                            .with_stages(kStages);
};

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
  static constexpr FfpaTileSpec kTile = Cfg::value;
  static constexpr int kMinBlocksPerSm = kTile.min_blocks;  // __launch_bounds__ and default stages
  static constexpr int kStages = kTile.stages;               // 0: auto

  static constexpr int kWarpsM = kTile.warps_m;
  static constexpr int kWarpsN = kTile.warps_n;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kBlockM = 16 * kWarpsM;
  static constexpr int kBlockN = kTile.block_n;
  static constexpr int kChunkD = kTile.chunk_d;
  static constexpr bool kQResident = kTile.q_resident;

  static constexpr int kChunksQK = kHeadDim / kChunkD;    // pipeline steps of Q@K^T per KV tile
  // Dv columns one block produces: all of Dv, or one group for L2 (kGroups blocks per row block).
  static constexpr int kOutD = kLevel == Level::kL2 ? kTile.group_d : kHeadDimV;
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
  using QTile = StageTile<kTile.layout, kBlockM, kChunkD>;
  using KTile = StageTile<kTile.layout, kBlockN, kChunkD>;
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
  static_assert(kWarpsM > 0 && kWarpsN > 0 && kBlockN > 0 && kChunkD > 0 && kMinBlocksPerSm > 0,
                "a tile names its warp grid, keys and slice width");
  static_assert(kStages == 0 || (kStages >= 1 && kStages <= 4), "ring depths are 1..4 (0: auto)");
  static_assert(kLevel != Level::kL2 || (kTile.group_d > 0 && kTile.group_d % kChunkD == 0),
                "L2 needs a Dv group width that is a multiple of the slice width");
  static_assert(kLevel == Level::kL2 || kTile.group_d == 0, "group_d is an L2 tile parameter");
  static_assert(kChunkD % 16 == 0 && kBlockN % 16 == 0, "MMA k-steps are 16 wide");
  static_assert(kNTilesS % 2 == 0 && kNTilesO % 2 == 0,
                "ldmatrix.x4 feeds two n8 tiles: warp column spans must be multiples of 16");
  static_assert(kStageBytes % 128 == 0 && kPBytes % 128 == 0, "keep buffers 128-byte aligned");
  static_assert(kThreads <= 512, "at most 16 warps per block");
};

// ---- L1 on Hopper (kernels/ffpa_fwd_sm90_ws.cuh): one tile, the warpgroup MMA and TMA ----------------
// A block is a producer warpgroup (TMA) and two consumer warpgroups on kBlockM = 64 query rows and one
// group of Dv columns. Per key tile of kBlockN = 128 keys, consumer c computes S for keys
// [64 c, 64 c + 64) over E in 64-wide slices (a Q slice and a K slice per stage, so shared memory
// does not grow with E); the two exchange row maxima through shared memory, write P (b16) to it, and
// each accumulates O for its share of the group's columns in registers (kCols0 / kCols1: whole
// 64-column chunks, at most 320 -- one wgmma of N = 256 and one of 64 per k-step above 256 -- half a
// register per column) from V stages of kVKeys keys.
// Dv up to 640 is one group (576 / 640: shares of 320 + 256 / 320 + 320, S computed once: 1.5x the
// two groups of 320 it replaced, docs/hopper_ffpa.md); above, two groups of 64 * ceil(Dv / 128) columns
// (the last one padded with zero columns where that does not divide Dv), one block each. Without kPair_
// both blocks compute the whole S (Q K^T twice: the price of O in registers). With kPair_ (prefill above Dv = 640: the
// launcher says why) the two blocks are a cluster pair on 256-key tiles: block r computes S for keys
// [128 r, 128 r + 128) of each (consumer c 64 of them, as alone), the four consumers exchange row
// maxima and P (64 x 256, one buffer) through distributed shared memory, and each block multiplies
// P by V for its own group. Per 256 keys a block then moves half of Q (each Q slice is loaded by one
// block into both), 128 keys of K and 256 of V instead of Q twice and 256 keys of each. Dv = 2048 and
// 4096 (kPair_ only): groups of 512 columns, pairs of them as clusters (S computed once per pair: Dv /
// 1024 times per query block), where the mma.sync levels need L3's fp32 workspace.
// With kShareK_ (causal prefill up to Dv = 640, one group: launch/heuristics.h says when and why) the
// blocks of query blocks 2 i + 1 and 2 i of a (batch, head) are a cluster pair that walks the same key
// tiles and shares their K slices: each Q@K^T stage's K slice is loaded by one of the two (alternating)
// and multicast into both blocks' shared memory, each block loading its own Q slice beside it; a
// Q@K^T stage is refilled once the consumers of both blocks released it. V stays per block (sharing
// it too coupled the two blocks' V rings and ran slower: docs/hopper_ffpa.md, session 29).
template <typename Element_, int kHeadDim_, int kHeadDimV_, bool kPair_ = false, bool kShareK_ = false>
struct FfpaWsTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr int kBlockM = 64;
  static constexpr int kConsumers = 2;
  static constexpr int kSliceD = 64;                       // head-dim slice of one Q@K^T stage
  static constexpr int kGroupCols = kHeadDimV <= 640    ? kHeadDimV
                                    : kHeadDimV <= 1024 ? 64 * ((kHeadDimV + 127) / 128)
                                                        : 512;
  static constexpr int kGroups = (kHeadDimV + kGroupCols - 1) / kGroupCols;
  static constexpr bool kPair = kPair_ && kGroups % 2 == 0;  // groups 2 i, 2 i + 1 share S (a cluster)
  static constexpr bool kShareK = kShareK_;                  // query blocks 2 i + 1, 2 i share K loads (a cluster)
  static constexpr bool kShareV = false;                     // and V loads (FP8's pairs: traits/fp8_traits.h)
  static constexpr int kPairSize = kPair ? 2 : 1;
  static constexpr int kVKeys = 32;                        // keys of one V stage
  static constexpr int kKRows = 128;                       // keys of a tile whose S this block computes
  static constexpr int kBlockN = kKRows * kPairSize;       // keys of a tile
  static constexpr int kColsS = kKRows / kConsumers;       // S columns per consumer (a pair's four slots)
  static constexpr int kPBuffers = kPair ? 1 : 2;          // P double-buffered, a pair's (twice as wide) not
  static constexpr bool kPadded = kGroups * kGroupCols != kHeadDimV;  // the last group's columns pass Dv
  static constexpr int kCols0 = 64 * ((kGroupCols + 127) / 128);    // O columns of consumer 0
  static constexpr int kCols1 = kGroupCols - kCols0;                // O columns of consumer 1
  // Keys of a tile whose S consumer 0 / 1 of a lone block computes. Where consumer 0 owns more O
  // columns (Dv / 64 odd) it takes 48 keys and consumer 1 80 if that evens their tensor work per
  // tile (keys x E for S plus kKRows x columns for P V): Dv = E = 320 goes from 45056 / 36864 to
  // 39936 / 41984 multiply-adds per row, 448 from 61440 / 53248 to 54272 / 60416. Same-run A/B on
  // an H200 (bf16, TFLOPS, even split -> this): D = 320 B=1 H=32 N=8192 454 -> 471, causal 434 -> 445,
  // B=4 H=16 N=2048 411 -> 422; D = 448 457 -> 462 (docs/hopper_ffpa.md). A pair splits the keys
  // evenly (kColsS each).
  static constexpr int work(int keys, int cols) { return keys * kHeadDim + kKRows * cols; }
  static constexpr int max2(int a, int b) { return a > b ? a : b; }
  static constexpr bool kUnevenS = !kPair && kCols0 > kCols1 &&
                                   max2(work(48, kCols0), work(kKRows - 48, kCols1)) <
                                       max2(work(kColsS, kCols0), work(kColsS, kCols1));
  static constexpr int kColsS0 = kUnevenS ? 48 : kColsS;
  static constexpr int kColsS1 = kKRows - kColsS0;
  static constexpr int kSlicesQK = kHeadDim / kSliceD;     // Q@K^T stages per key tile
  static constexpr int kStagesV = kBlockN / kVKeys;        // V stages per key tile
  static constexpr int kThreads = 128 * (kConsumers + 1);

  using QSlice = GmmaSw128Tile<kBlockM, kSliceD>;
  using KSlice = GmmaSw128Tile<kKRows, kSliceD>;
  using VStage = GmmaSw128Tile<kVKeys, kGroupCols>;
  using PTile = GmmaSw128Tile<kBlockM, kBlockN>;
  static constexpr int kQKStageBytes = QSlice::kBytes + KSlice::kBytes;
  static constexpr int kVStageBytes = VStage::kBytes;
  // Row maxima and row sums per consumer; a pair's four consumers' maxima, then (the last exchange)
  // their row sums in the same slots.
  static constexpr int kStatBytes = 4 * kBlockM * 4;
  // Shared memory is the same at every head dim: 32 KB of P (two buffers, a pair's one), 4 Q@K^T
  // stages of 24 KB and a fixed 96 KB for the V ring, which holds 2 stages of a 576- or 640-column
  // group, 3 of a 512-column group and 4 of a group up to 384 columns. (At 576 / 640, 3 Q@K^T stages
  // and 3 V stages of 120 KB ran 3-4% slower: docs/hopper_ffpa.md, session 15.)
  static constexpr int kQKStages = 4;
  static constexpr int kVRingBytes = 3 * kVKeys * 512 * 2;
  static constexpr int kVStages = kVRingBytes / kVStageBytes >= 4 ? 4 : kVRingBytes / kVStageBytes;
  static constexpr int kBarrierBytes = 256;  // both rings' barriers and a pair's four exchange barriers
  static constexpr int kSmemBytes =
      1024 + kPBuffers * PTile::kBytes + kStatBytes + kQKStages * kQKStageBytes + kVRingBytes + kBarrierBytes;
  static constexpr int kMaxSmem = 227 * 1024;

  // Registers after setmaxnreg: the producer keeps 24, the consumers 240 (O: kCols0 / 2 of them).
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;

  static_assert(kHeadDim % kSliceD == 0 && kHeadDimV % 64 == 0, "E and Dv: multiples of the 64-wide slice");
  static_assert(kCols0 <= 320 && kCols1 > 0 && kCols1 <= kCols0,
                "whole chunks per consumer, at most two wgmmas (N = 256 + 64) per k-step");
  static_assert(kGroups <= 2 || (kPair && kGroups * kGroupCols == kHeadDimV && kGroups <= 8),
                "Dv up to 1024 in at most two groups; wider (a multiple of 1024 up to 4096) only as cluster pairs");
  static_assert(kSmemBytes <= kMaxSmem && kVStages >= 2, "the stages fit shared memory");
  static_assert(kQKStages * kQKStageBytes == 96 * 1024, "the Q@K^T stages take the same bytes at every head dim");
  static_assert(2 * 8 * (kQKStages + kVStages) + 4 * 8 <= kBarrierBytes, "the barriers fit their bytes");
  static_assert(kPBuffers * PTile::kBytes == 32 * 1024, "P takes the same bytes at every head dim");
  static_assert(kColsS % 16 == 0 && kColsS0 % 16 == 0 && kColsS1 % 16 == 0, "S columns per consumer: whole k-steps of P V");
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= 65536, "the register file holds the block");
  static_assert(!kShareK || (!kPair_ && kGroups == 1), "K sharing pairs lone blocks of one column group");
};

}  // namespace ffpa
