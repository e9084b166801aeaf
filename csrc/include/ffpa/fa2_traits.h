// Compile-time shape of one FA-2 forward instantiation (head dims <= 256, 320 and 384): the tile table and
// everything derived from it (warps, fragments per thread, shared memory). Host- and
// device-usable, so csrc/launch sizes launches from the numbers the kernel uses.
#pragma once
#include <type_traits>

#include "ffpa/smem_tile.cuh"

namespace ffpa {

// One row of the FA-2 tile table. Warps split the query rows only: warp w owns rows
// [w * 16 * m_tiles, +16 * m_tiles) of the block and every key column, so the softmax needs no
// cross-warp exchange and P stays in registers. m_tiles = 2 reuses each K/V fragment read from
// shared memory for two MMAs (halving ldmatrix traffic) at twice the accumulator registers.
// q_in_regs keeps the Q fragments in registers for the whole block (no ldmatrix of Q per KV tile).
// min_blocks is the blocks per SM the register allocation must allow (__launch_bounds__).
// prefetch loads the K/V (and Q) fragments of the next MMA step before the current step's MMAs
// (double-buffered fragment registers), which hides ldmatrix latency where registers allow.
// early_v waits for V_j (and issues the next K) before the softmax instead of after it.
// prefetch_q (with prefetch) double-buffers the Q fragments too; without it they are loaded
// just in time once per k-step (8 fewer registers per m-tile).
// stages, when nonzero, is the ring depth auto calls use (else the deepest of 3, 2 that fits).
template <int kWarps_, int kMTiles_, int kBlockN_, bool kQInRegs_, int kMinBlocks_ = 1, bool kPrefetch_ = true,
          bool kEarlyV_ = false, bool kPrefetchQ_ = true, int kStages_ = 0>
struct Fa2Tile {
  static constexpr int warps = kWarps_;
  static constexpr int m_tiles = kMTiles_;
  static constexpr int block_n = kBlockN_;
  static constexpr bool q_in_regs = kQInRegs_;
  static constexpr int min_blocks = kMinBlocks_;
  static constexpr bool prefetch = kPrefetch_;
  static constexpr bool early_v = kEarlyV_;
  static constexpr bool prefetch_q = kPrefetchQ_;
  static constexpr int stages = kStages_;
  static constexpr bool wgmma = false;
};

// A row of the Hopper (sm_90a) table: the same kernel structure, with both products on the
// warpgroup MMA (wgmma.mma_async m64nNk16). Each warpgroup of 4 warps owns 64 query rows (warp
// w: rows 16 w..16 w + 15, one m-tile, as in the mma.sync layout) and all kBlockN keys; S = Q K^T
// reads Q and K from shared memory, O += P V takes P from registers and reads V transposed.
// Q, K and V live in the 128-byte-swizzle layout wgmma reads (GmmaSw128Tile); no ldmatrix.
template <int kWarpGroups_, int kBlockN_, int kMinBlocks_ = 1, int kStages_ = 0>
struct Fa2WgmmaTile {
  static constexpr int warps = 4 * kWarpGroups_;
  static constexpr int m_tiles = 1;
  static constexpr int block_n = kBlockN_;
  static constexpr bool q_in_regs = false;
  static constexpr int min_blocks = kMinBlocks_;
  static constexpr bool prefetch = false;
  static constexpr bool early_v = true;
  static constexpr bool prefetch_q = false;
  static constexpr int stages = kStages_;
  static constexpr bool wgmma = true;
};

// The FA-2 tile table, keyed by head dim (D = max(E, Ev) for unequal pairs).
// Registers per thread ~ 4 * m_tiles * (Dv / 8 + block_n / 8) fp32 accumulators (+ D / 4 with
// q_in_regs); kept under ~200 so nothing spills at 255.
// Measured on an H100 (tools/tune_fa2.cu, 2026-11-21, bf16, B=1 H=32 N=8192 and B=8 H=16 N=2048;
// runs 1-7 in docs/tuning_fa2.md). Two m-tiles per warp (each K/V fragment feeds two MMAs) with
// fragment prefetch is the fastest shape up to D = 128, even where ptxas spills a few loop
// invariants (D=128: 360 TFLOPS against 305 for 8 warps x 1 m-tile at 128 registers; D=32 with
// Bc=128 spills 456 B and still runs 22% faster than the spill-free Bc=64). Above 128 the O
// accumulator (D / 2 registers per thread at one m-tile) leaves no room for prefetch buffers:
// one m-tile, no prefetch (prefetch there spills inside the MMA loop and runs ~6x slower).
// Run 9 (session 5, tree-shaped row max/sum, ffpa/softmax.cuh): D = 64 takes Q in registers at 2
// blocks per SM (293 vs 282), D = 192 loads V early (297 vs 290); all spill-free. D = 96 dropped
// fragment prefetch in run 9 (326 vs 319) and took it back in run 11, once the compile-time ring
// depth (run 10) had freed registers (335 vs 324).
// D = 320 (tools/tune_fa2.cu run 8, docs/tuning_fa2.md): the O accumulator takes 160 registers, so
// the key tile narrows to 32 and the ring to 2 stages to stay spill-free (268 TFLOPS after run 10;
// Bc = 64 spills 40-60 B); it beats every FFPA L1 tile at 320 (181), which is why the auto path
// sends D = 320 here. D = 384 takes the same row (246 against L1's ~200 in run 8, with 40 B of
// spill; session 6 added the (384, 384) pair once the Hopper kernel ran it at 352).
// Run 10 (one kernel per ring depth, K/V bases rebuilt per load instead of held): D = 64 282 ->
// 307, 96 321 -> 330, 128 367 -> 382 (now spill-free), 192 291 -> 305, 320 253 -> 268.
template <int kHeadDim>
using Fa2TileFor = std::conditional_t<
    (kHeadDim <= 32), Fa2Tile<4, 2, 128, true, 1>,
    std::conditional_t<
        (kHeadDim <= 64), Fa2Tile<4, 2, 64, true, 2, true, true>,
        std::conditional_t<
            (kHeadDim <= 96), Fa2Tile<4, 2, 64, false, 1, true, true>,
            std::conditional_t<(kHeadDim <= 128), Fa2Tile<4, 2, 64, false, 1>,
                               std::conditional_t<(kHeadDim <= 192), Fa2Tile<4, 1, 64, false, 1, false, true>,
                                                  std::conditional_t<(kHeadDim <= 256), Fa2Tile<8, 1, 64, false, 1, false, true>,
                                                                     Fa2Tile<8, 1, 32, false, 1, false, true, true, 2>>>>>>>;

// The Hopper table, keyed by head dim (D = max(E, Ev)). Measured on an H200 (tools/tune_fa2.cu
// -DTUNE_WGMMA, docs/tuning_fa2.md run 13, bf16 B=1 H=32 N=8192, TFLOPS against the mma.sync
// table in the same run): 64 390 vs 307, 96 394 vs 327, 128 513 vs 372, 192 455 vs 296, 256 468
// vs 307. Without overlap of the softmax and the tensor cores inside a warpgroup, residency
// decides: two blocks per SM (registers capped at 128 for 256 threads) win up to D = 128 even
// where ptxas spills a few bytes outside the MMA loop; 192 runs three warpgroups per block.
// Past 256 (run 16), P@V is two wgmmas (256 columns + the rest): 320 keeps two warpgroups and
// Bc = 64 (443 against 261 for the mma.sync tile and 362 for the less-spilling Bc = 32), 384
// narrows to Bc = 32 (352 against 248). Both spill (104 / 120 B of stack) and are still the
// fastest tiles measured there.
template <int kHeadDim>
using Fa2WgmmaTileFor = std::conditional_t<
    (kHeadDim <= 64), Fa2WgmmaTile<1, 128, 2>,
    std::conditional_t<
        (kHeadDim <= 128), Fa2WgmmaTile<2, 64, 2>,
        std::conditional_t<(kHeadDim <= 192), Fa2WgmmaTile<3, 64, 1>,
                           std::conditional_t<(kHeadDim <= 320), Fa2WgmmaTile<2, 64, 1>, Fa2WgmmaTile<2, 32, 1>>>>>;

template <typename Element_, int kHeadDim_, int kHeadDimV_, typename Cfg>
struct Fa2Traits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDimV_;

  static constexpr int kWarps = Cfg::warps;
  static constexpr int kMTiles = Cfg::m_tiles;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpRows = 16 * kMTiles;
  static constexpr int kBlockM = kWarpRows * kWarps;
  static constexpr int kBlockN = Cfg::block_n;
  static constexpr bool kQInRegs = Cfg::q_in_regs;
  static constexpr int kMinBlocks = Cfg::min_blocks;
  static constexpr bool kPrefetch = Cfg::prefetch;
  static constexpr bool kEarlyV = Cfg::early_v;
  static constexpr bool kPrefetchQ = Cfg::prefetch_q;
  static constexpr int kStages = Cfg::stages;  // 0: auto
  static constexpr bool kWgmma = Cfg::wgmma;

  static constexpr int kNTilesS = kBlockN / 8;     // m16n8 S tiles per m-tile
  static constexpr int kNTilesO = kHeadDimV / 8;   // m16n8 O tiles per m-tile
  static constexpr int kKStepsQK = kHeadDim / 16;  // MMA k-steps of Q@K^T
  static constexpr int kKStepsPV = kBlockN / 16;   // MMA k-steps of P@V

  template <int kRows, int kCols>
  using OperandTile = std::conditional_t<kWgmma, GmmaSw128Tile<kRows, kCols>, SmemTile<kRows, kCols>>;
  using QTile = OperandTile<kBlockM, kHeadDim>;
  using KTile = OperandTile<kBlockN, kHeadDim>;
  using VTile = OperandTile<kBlockN, kHeadDimV>;
  using OTile = SmemTile<kBlockM, kHeadDimV>;  // the epilogue's staging of O (over Q and the ring)

  // Shared memory: the block's Q tile (loaded once), then a ring of stages, each holding one
  // K tile or one V tile (the loads alternate K_j, V_j, K_j+1, ...). The wgmma layout needs
  // 1024-byte aligned chunks: the kernel rounds the dynamic base up, hence kAlignSlack.
  static constexpr int kAlignSlack = kWgmma ? 1024 : 0;
  static constexpr int kQBytes = QTile::kBytes;
  static constexpr int kStageBytes = KTile::kBytes > VTile::kBytes ? KTile::kBytes : VTile::kBytes;
  static constexpr int smem_bytes(int stages) { return kAlignSlack + kQBytes + stages * kStageBytes; }

  static_assert(kHeadDim % 16 == 0 && kHeadDimV % 16 == 0, "head dims must be multiples of 16");
  static_assert(kBlockN % 16 == 0, "MMA k-steps of P@V are 16 keys");
  static_assert(kQBytes % 128 == 0 && kStageBytes % 128 == 0, "keep buffers 128-byte aligned");
  static_assert(!kWgmma || (kQBytes % 1024 == 0 && kStageBytes % 1024 == 0 && kMTiles == 1 && kWarps % 4 == 0),
                "wgmma tiles: whole warpgroups of one m-tile per warp, 1024-byte aligned buffers");
  static_assert(kThreads <= 512, "at most 16 warps per block");
  static_assert(OTile::kBytes <= kQBytes + kStageBytes, "the O staging tile must fit the Q tile and one stage");
};

}  // namespace ffpa
