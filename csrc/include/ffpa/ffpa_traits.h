// Compile-time shape of one FFPA forward kernel instantiation: tile sizes, warp layout, shared
// memory footprint. Host- and device-usable (no device code), so csrc/launch can size launches
// from the same numbers the kernel uses. Impossible configurations fail here, at compile time.
#pragma once
#include <cstdint>
#include <type_traits>

namespace ffpa {

enum class Level : int { kL1 = 1 };

// One row of the tile table: how a block is cut. Warps form a kWarpsM x kWarpsN grid:
//   Q@K^T : warp (wm, wn) owns S rows [16*wm, +16) and columns [wn*BlockN/kWarpsN, +BlockN/kWarpsN)
//   P@V   : warp (wm, wn) owns O rows [16*wm, +16) and, in every kChunkD-wide slice of the head
//           dim, columns [wn*kChunkD/kWarpsN, +kChunkD/kWarpsN)
// chunk_d is the head-dim slice staged per pipeline step (a multiple of the 16-wide MMA k).
// q_resident keeps the block's whole Q tile in shared memory, loaded once, instead of streaming
// it with every K slice: a third less L2 traffic per KV tile, at the price of Br x D x 2 bytes of
// shared memory (so no longer O(1) in D; a tuning variant, not the L1 default).
template <int kWarpsM_, int kWarpsN_, int kBlockN_, int kChunkD_, bool kQResident_ = false>
struct Tile {
  static constexpr int warps_m = kWarpsM_;
  static constexpr int warps_n = kWarpsN_;
  static constexpr int block_n = kBlockN_;
  static constexpr int chunk_d = kChunkD_;
  static constexpr bool q_resident = kQResident_;
};

// The tile table for L1 (O accumulator in registers: per-thread O registers are
// Dv / (2 * warps_n), so wide heads use Br = 32 and spread O over 4 warps along N).
// Per head dim, the fastest spill-free tile measured by tools/tune_l1.cu on an H200
// (2026-11-21, bf16, B=1 H=32 N=8192; numbers in docs/tuning_l1.md, runs 2 and 3). Larger Bc and chunk_d
// mean more MMAs per barrier, which is what this kernel's speed follows. D=448, 768, 960 and 1024
// have faster tiles that spill a few registers (+35% at 448, +24% at 768); left out for now.
template <int kHeadDimV>
using L1Tile = std::conditional_t<
    (kHeadDimV == 320 || kHeadDimV == 384), Tile<4, 2, 128, 64>,
    std::conditional_t<
        (kHeadDimV == 512), Tile<4, 2, 64, 128>,
        std::conditional_t<
            (kHeadDimV <= 512), Tile<4, 2, 64, 64>,
            std::conditional_t<
                (kHeadDimV == 576), Tile<2, 4, 128, 192>,
                std::conditional_t<
                    (kHeadDimV == 640 || kHeadDimV == 896), Tile<2, 4, 128, 128>,
                    std::conditional_t<(kHeadDimV == 768 || kHeadDimV == 960), Tile<2, 4, 64, 192>,
                                       std::conditional_t<(kHeadDimV == 1024), Tile<2, 4, 64, 256>,
                                                          Tile<2, 4, 128, 64>>>>>>>>;

template <typename Element_, int kHeadDim_, int kHeadDimV_, Level kLevel_, typename Cfg>
struct FfpaTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr Level kLevel = kLevel_;

  static constexpr int kWarpsM = Cfg::warps_m;
  static constexpr int kWarpsN = Cfg::warps_n;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kBlockM = 16 * kWarpsM;
  static constexpr int kBlockN = Cfg::block_n;
  static constexpr int kChunkD = Cfg::chunk_d;
  static constexpr bool kQResident = Cfg::q_resident;

  static constexpr int kChunksQK = kHeadDim / kChunkD;    // pipeline steps of Q@K^T per KV tile
  static constexpr int kChunksV = kHeadDimV / kChunkD;    // pipeline steps of P@V per KV tile
  static constexpr int kWarpColsS = kBlockN / kWarpsN;    // S columns per warp
  static constexpr int kNTilesS = kWarpColsS / 8;         // m16n8 S tiles per warp
  static constexpr int kWarpColsO = kChunkD / kWarpsN;    // O columns per warp per chunk
  static constexpr int kNTilesO = kWarpColsO / 8;         // m16n8 O tiles per warp per chunk
  static constexpr int kKStepsQK = kChunkD / 16;          // MMA k-steps per Q@K^T chunk
  static constexpr int kKStepsPV = kBlockN / 16;          // MMA k-steps per P@V chunk

  // Shared memory: [resident Q, if kQResident] then a ring of kStages buffers, each holding a
  // (Q, K) slice pair (K alone when Q is resident) or a V slice, then the P tile and the
  // cross-warp row-statistics exchange. Without kQResident none of it depends on D.
  static constexpr int kQSliceBytes = kBlockM * kChunkD * 2;
  static constexpr int kKSliceBytes = kBlockN * kChunkD * 2;
  static constexpr int kVSliceBytes = kBlockN * kChunkD * 2;
  static constexpr int kQKItemBytes = (kQResident ? 0 : kQSliceBytes) + kKSliceBytes;
  static constexpr int kStageBytes = kQKItemBytes > kVSliceBytes ? kQKItemBytes : kVSliceBytes;
  static constexpr int kQResidentBytes = kQResident ? kChunksQK * kQSliceBytes : 0;
  static constexpr int kPBytes = kBlockM * kBlockN * 2;
  static constexpr int kRedBytes = kWarpsN * kBlockM * 4;
  static constexpr int smem_bytes(int stages) {
    return kQResidentBytes + stages * kStageBytes + kPBytes + kRedBytes;
  }

  static_assert(kHeadDim % kChunkD == 0 && kHeadDimV % kChunkD == 0,
                "head dims must be multiples of the staged slice width");
  static_assert(kChunkD % 16 == 0 && kBlockN % 16 == 0, "MMA k-steps are 16 wide");
  static_assert(kNTilesS % 2 == 0 && kNTilesO % 2 == 0,
                "ldmatrix.x4 feeds two n8 tiles: warp column spans must be multiples of 16");
  static_assert(kStageBytes % 128 == 0 && kPBytes % 128 == 0, "keep buffers 128-byte aligned");
  static_assert(kThreads <= 512, "at most 16 warps per block");
};

}  // namespace ffpa
