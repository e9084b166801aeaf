// Compile-time shape of one FA-2 forward instantiation (head dims <= 256, 320 and 384): the tile table and
// everything derived from it (warps, fragments per thread, shared memory). Host- and
// device-usable, so csrc/launch sizes launches from the numbers the kernel uses.
#pragma once
#include <type_traits>

#include "ffpa/tile/smem_tile.cuh"

namespace ffpa {

// One row of an FA-2 tile table, by name. Warps split the query rows only: warp w owns rows
// [w * 16 * m_tiles, +16 * m_tiles) of the block and every key column, so the softmax needs no
// cross-warp exchange and P stays in registers. Host- and device-usable (constexpr).
struct Fa2TileSpec {
  int warps = 0;            // warps per block (4 per warpgroup on the wgmma kernel)
  int m_tiles = 0;          // 16-row MMA tiles per warp; 2 reuses each K/V fragment for two MMAs
                            // (half the ldmatrix traffic) at twice the accumulator registers
  int block_n = 0;          // keys per KV tile (Bc)
  bool q_in_regs = false;   // Q fragments stay in registers for the whole block
  int min_blocks = 1;       // blocks per SM the register allocation must allow (__launch_bounds__)
  bool prefetch = true;     // next MMA step's K/V (and Q) fragments loaded before this step's MMAs
  bool early_v = false;     // wait for V_j (and issue the next K) before the softmax, not after it
  bool prefetch_q = true;   // with prefetch, double-buffer the Q fragments too (else just in time)
  int stages = 0;           // ring depth auto calls use; 0: the deepest of 3, 2 that fits
  bool wgmma = false;       // both products on the warpgroup MMA (sm_90a kernel)

  constexpr Fa2TileSpec with_warps(int v) const { Fa2TileSpec t = *this; t.warps = v; return t; }
  constexpr Fa2TileSpec with_m_tiles(int v) const { Fa2TileSpec t = *this; t.m_tiles = v; return t; }
  constexpr Fa2TileSpec with_block_n(int v) const { Fa2TileSpec t = *this; t.block_n = v; return t; }
  constexpr Fa2TileSpec with_q_in_regs(bool v = true) const { Fa2TileSpec t = *this; t.q_in_regs = v; return t; }
  constexpr Fa2TileSpec with_min_blocks(int v) const { Fa2TileSpec t = *this; t.min_blocks = v; return t; }
  constexpr Fa2TileSpec with_prefetch(bool v = true) const { Fa2TileSpec t = *this; t.prefetch = v; return t; }
  constexpr Fa2TileSpec with_early_v(bool v = true) const { Fa2TileSpec t = *this; t.early_v = v; return t; }
  constexpr Fa2TileSpec with_prefetch_q(bool v = true) const { Fa2TileSpec t = *this; t.prefetch_q = v; return t; }
  constexpr Fa2TileSpec with_stages(int v) const { Fa2TileSpec t = *this; t.stages = v; return t; }
};

// A row of the Hopper (sm_90a) table: the same kernel structure, with both products on the
// warpgroup MMA (wgmma.mma_async m64nNk16). Each warpgroup of 4 warps owns 64 query rows (warp
// w: rows 16 w..16 w + 15, one m-tile, as in the mma.sync layout) and all block_n keys; S = Q K^T
// reads Q and K from shared memory, O += P V takes P from registers and reads V transposed.
// Q, K and V live in the 128-byte-swizzle layout wgmma reads (GmmaSw128Tile); no ldmatrix.
constexpr Fa2TileSpec fa2_wgmma_tile(int warpgroups, int block_n) {
  Fa2TileSpec t = Fa2TileSpec{}.with_warps(4 * warpgroups).with_m_tiles(1).with_block_n(block_n);
  t.prefetch = false;
  t.early_v = true;
  t.prefetch_q = false;
  t.wgmma = true;
  return t;
}

// The mma.sync table, keyed by head dim (D = max(E, Ev) for unequal pairs): registers per thread
// ~ 4 * m_tiles * (Dv / 8 + block_n / 8) fp32 accumulators (+ D / 4 with q_in_regs), kept under ~200
// so nothing spills at 255. Two m-tiles with fragment prefetch win up to D = 128; above that the O
// accumulator leaves no room for prefetch buffers (one m-tile, no prefetch); D = 320 and 384 narrow
// the key tile to 32 and the ring to 2 stages. Each row's measurements: docs/tuning_fa2.md.
constexpr Fa2TileSpec fa2_tile_sm80(int head_dim) {
  const Fa2TileSpec t{};
  if (head_dim <= 32) return t.with_warps(4).with_m_tiles(2).with_block_n(128).with_q_in_regs();
  if (head_dim <= 64)
    return t.with_warps(4).with_m_tiles(2).with_block_n(64).with_q_in_regs().with_min_blocks(2).with_early_v();
  if (head_dim <= 96) return t.with_warps(4).with_m_tiles(2).with_block_n(64).with_early_v();
  if (head_dim <= 128) return t.with_warps(4).with_m_tiles(2).with_block_n(64);
  if (head_dim <= 192) return t.with_warps(4).with_m_tiles(1).with_block_n(64).with_prefetch(false).with_early_v();
  if (head_dim <= 256) return t.with_warps(8).with_m_tiles(1).with_block_n(64).with_prefetch(false).with_early_v();
  return t.with_warps(8).with_m_tiles(1).with_block_n(32).with_prefetch(false).with_early_v().with_stages(2);
}

// The Hopper table, keyed by head dim (D = max(E, Ev)). Up to 256 the tile is the warp-specialised
// kernel's (fa2_fwd_sm90_ws.cuh: consumer warpgroups of 64 rows, softmax overlapped with the
// previous tile's P V), which the cp.async wgmma kernel shares as its fallback so one mask block map
// serves both. Up to D = 64 three consumer warpgroups (192 rows, 160 registers each) on 128 keys;
// above, two (128 rows, 240 registers) on the widest key tile whose S, O and P fit the registers and
// whose two K/V stages fit shared memory beside Q -- 176 up to D = 96, 96 up to 192, 80 up to 256
// (each 4-13% faster than 128 / 96 / 64 on an H200: docs/hopper_profile.md) -- except D = 97..128:
// 128 keys, where S, O and P fit the registers together so the softmax runs under P V (the kernel's
// kDefer; with 176 keys ptxas ran it after P V: 0.4-11% slower, sessions 19-20). Past 256 the
// warp-specialised kernel alone (P V in two wgmmas): 48 keys at 320, where two stages of K and V
// fit beside Q's 80 KB and O's 160 registers leave room for S and P (0 spills; 675 against FFPA
// L1's 461 TFLOPS on an H200, session 25). At 384 only 32 keys fit, and O's 192 registers leave
// no room for S_j beside P_{j-1}: the kernel waits for each P V before writing S (Fa2FwdWs::kInOrder;
// 586 against FFPA L1's 484 on an H100, session 25; overlapped, ptxas serialised the wgmmas: 278).
constexpr Fa2TileSpec fa2_tile_sm90(int head_dim) {
  if (head_dim <= 64) return fa2_wgmma_tile(3, 128);
  if (head_dim <= 96) return fa2_wgmma_tile(2, 176);
  if (head_dim <= 128) return fa2_wgmma_tile(2, 128);
  if (head_dim <= 192) return fa2_wgmma_tile(2, 96);
  if (head_dim <= 256) return fa2_wgmma_tile(2, 80);
  if (head_dim <= 320) return fa2_wgmma_tile(2, 48);
  return fa2_wgmma_tile(2, 32);
}

// The Hopper tile of calls with attn_mask: key tiles of a power of two (128 up to D = 128, 64 up to
// 256, 32 past it) under 128 query rows, so a mask made of 64- or 128-wide blocks lines up with
// whole tiles, which the block map then skips or keeps without reading the mask per element. The table's wider
// tiles (192 rows, 176 / 80 keys) straddle such blocks and read the mask in most tiles: 0.07-0.21x
// of these at D = 64..256 with a 128 x 128 checkerboard (H200, docs/hopper_profile.md).
constexpr Fa2TileSpec fa2_tile_sm90_masked(int head_dim) {
  if (head_dim <= 128) return fa2_wgmma_tile(2, 128);
  if (head_dim <= 256) return fa2_wgmma_tile(2, 64);
  // Past 256 two stages of 64 keys do not fit beside Q: 32, the key tile of the mma.sync table's row,
  // which the launcher falls back to on the same block map (fa2_fwd_launch.cuh).
  return fa2_wgmma_tile(2, 32);
}
template <int kHeadDim>
struct Fa2WgmmaMaskedTileFor {
  static constexpr Fa2TileSpec value = fa2_tile_sm90_masked(kHeadDim);
};

// The Hopper tile of short keys (launch/heuristics.h fa2_short_tile): one key tile holds every key of a call
// with 129..kFa2ShortKeys of them, so an item is one S, one softmax and one P V. On the 128-key tiles such a
// call takes two key tiles, the second mostly padding (ViT's N = 197: 256 keys computed, two softmaxes in
// series, session 41's trace), where 208 computes 208. Two consumers of 64 rows (S 104, P 52 and O 32
// registers at D = 64 fit their 240); compiled at D <= kFa2ShortMaxDim (launch/heuristics.h) only.
constexpr int kFa2ShortKeys = 208;
constexpr Fa2TileSpec fa2_tile_sm90_short() { return fa2_wgmma_tile(2, kFa2ShortKeys); }
struct Fa2WgmmaShortTile {
  static constexpr Fa2TileSpec value = fa2_tile_sm90_short();
};

// A tile as a type, what Fa2Traits takes: any type with `static constexpr Fa2TileSpec value`.
template <int kHeadDim, bool kWgmma>
struct Fa2TableTile {
  static constexpr Fa2TileSpec value = kWgmma ? fa2_tile_sm90(kHeadDim) : fa2_tile_sm80(kHeadDim);
};
template <int kHeadDim>
using Fa2TileFor = Fa2TableTile<kHeadDim, false>;
template <int kHeadDim>
using Fa2WgmmaTileFor = Fa2TableTile<kHeadDim, true>;

// Rows written positionally, for the tile sweeps of tools/tune_fa2.cu only (the tables above
// name their fields).
template <int kWarps, int kMTiles, int kBlockN, bool kQInRegs, int kMinBlocks = 1, bool kPrefetch = true,
          bool kEarlyV = false, bool kPrefetchQ = true, int kStages = 0>
struct Fa2Tile {
  static constexpr Fa2TileSpec value = Fa2TileSpec{}
                                           .with_warps(kWarps)
                                           .with_m_tiles(kMTiles)
                                           .with_block_n(kBlockN)
                                           .with_q_in_regs(kQInRegs)
                                           .with_min_blocks(kMinBlocks)
                                           .with_prefetch(kPrefetch)
                                           .with_early_v(kEarlyV)
                                           .with_prefetch_q(kPrefetchQ)
                                           .with_stages(kStages);
};
template <int kWarpGroups, int kBlockN, int kMinBlocks = 1, int kStages = 0>
struct Fa2WgmmaTile {
  static constexpr Fa2TileSpec value = fa2_wgmma_tile(kWarpGroups, kBlockN).with_min_blocks(kMinBlocks).with_stages(kStages);
};

template <typename Element_, int kHeadDim_, int kHeadDimV_, typename Cfg>
struct Fa2Traits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDimV_;

  static constexpr Fa2TileSpec kTile = Cfg::value;
  static constexpr int kWarps = kTile.warps;
  static constexpr int kMTiles = kTile.m_tiles;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpRows = 16 * kMTiles;
  static constexpr int kBlockM = kWarpRows * kWarps;
  static constexpr int kBlockN = kTile.block_n;
  static constexpr bool kQInRegs = kTile.q_in_regs;
  static constexpr int kMinBlocks = kTile.min_blocks;
  static constexpr bool kPrefetch = kTile.prefetch;
  static constexpr bool kEarlyV = kTile.early_v;
  static constexpr bool kPrefetchQ = kTile.prefetch_q;
  static constexpr int kStages = kTile.stages;  // 0: auto
  static constexpr bool kWgmma = kTile.wgmma;

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
  static_assert(kWarps > 0 && kMTiles > 0 && kBlockN > 0 && kMinBlocks > 0, "a tile names its warps, m-tiles and keys");
  static_assert(kStages == 0 || (kStages >= 1 && kStages <= 4), "ring depths are 1..4 (0: auto)");
  static_assert(kThreads <= 512, "at most 16 warps per block");
  static_assert(OTile::kBytes <= kQBytes + kStageBytes, "the O staging tile must fit the Q tile and one stage");
};

}  // namespace ffpa
