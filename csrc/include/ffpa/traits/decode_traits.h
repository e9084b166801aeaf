// Compile-time shape of one split-KV decode instantiation (kernels/decode_sm80.cuh): the tile spec
// and everything derived from it (ring, shared memory, fragments per warp). Host- and
// device-usable, so csrc/launch sizes launches from the numbers the kernel uses.
#pragma once

#include "ffpa/constants.h"
#include "ffpa/tile/smem_tile.cuh"

namespace ffpa {

// The decode tile, by name. One block owns 16 packed query rows (the query heads of one KV head
// times Lq) and one key range of one sequence. Its warps split the keys of a KV tile for S = Q K^T
// (warp w: keys w * block_n / warps..) and the output columns for O += P V (warp w: columns
// w * chunk / warps.. of every chunk), exchanging the row max and P through shared memory. K and
// V stream through one ring of slots of block_n keys x chunk columns, so shared memory is bounded
// by the chunk, not the head dim (D up to 1024 and MLA's 576/512 use the same kernel).
struct DecodeTileSpec {
  int warps = 4;       // warps per block: 4, or 8 (more than 64 O accumulators with 4; D <= 192 on 64+-column chunks)
  int block_n = 64;    // keys per KV tile
  int chunk = 0;       // head-dim columns per ring slot; divides D and Dv
  int stages = 0;      // ring slots (cp.async groups in flight: stages - 1)
  int min_blocks = 2;  // blocks per SM the register allocation must allow (__launch_bounds__)
  int tile_buffers = 0;  // shared K/V: whole KV tiles the ring holds (0: a ring of chunk slots)
  bool tile_wait = false;  // shared K/V: wait for a whole tile once (one barrier) instead of per chunk
  int qk_chains = 0;       // independent S accumulator chains (0: 2 at D >= 256, else 1)
  bool qk_prefetch = false;  // load a chunk's Q and K fragments before its MMAs
  int one_per_sm_min_splits = 0;  // one block per SM from this many splits (launch/heuristics.h; 0: off)
};

// The widest of 128, 64, 32 columns dividing both head dims (wider slots: fewer block-wide
// barriers per key tile).
constexpr int decode_chunk(int head_dim, int head_dim_v) {
  return (head_dim % 128 == 0 && head_dim_v % 128 == 0) ? 128 : (head_dim % 64 == 0 && head_dim_v % 64 == 0) ? 64 : 32;
}

// A ring of ~64 KiB: 48 KiB of K/V in flight per block, two blocks per SM (three at D = 96 / 160). The output
// accumulator is 16 x Dv fp32 over the block's threads: Dv / 8 registers a thread with 4 warps,
// which spills past Dv = 512 (D = 1024: 255 registers and 250 bytes of spills), so wider heads
// take 8 warps (Dv / 16).
//
// Up to D = 192 with 64- or 128-column chunks (D = 64, 128, 192 and 192/128): 8 warps and a 96 KiB ring,
// two blocks per SM (each warp 8 keys of S and 16 or 8 output columns a chunk: 96-114 registers). Session 28,
// three builds alternating on one H100 (bf16, L2 flushed, scripts/dev/decode_tile_ab.sh; us, contiguous /
// per-sequence lengths, against 4 warps, a 64 KiB ring and three blocks per SM): D = 128 B=64 S=8192 32/8
// 702 / 542 against 725 / 541, B=1 S=131072 189 / 182 against 195 / 189, B=8 S=32768 360 / 267 against
// 364 / 274 (SDPA cuDNN 695, 184, 357); D = 64 B=64 378 against 392, B=1 108 against 112; D = 192 within
// 1%. 8 warps with 128-key tiles spilled 40 bytes at D = 128 (and D = 256 spills 4 at 8 warps); D = 96
// and 160 (32-column chunks) keep 4 warps: a warp's share of a chunk would be 4 columns.
//
// shared_kv (MLA: V is the first Dv columns of K, one cache): only K is loaded, and P V reads V
// from the K slots of the same tile, so a tile's slots stay until its P V is done and the ring holds
// whole tiles: two of 32 keys (D = 576: 72 KiB), 4 warps, two blocks per SM (each block's barriers
// overlap the other's work), one wait per tile, four S chains with a chunk's fragments loaded before
// its MMAs (docs/tuning_decode.md: 0.60x -> 0.72x copy at B=16, S=16384, 16/1 on an H200).
constexpr DecodeTileSpec decode_tile(int head_dim, int head_dim_v, bool shared_kv = false) {
  DecodeTileSpec t{};
  t.warps = head_dim_v > 512 && !shared_kv ? 8 : 4;
  t.chunk = decode_chunk(head_dim, head_dim_v);
  if (shared_kv) {
    t.block_n = 32;
    t.warps = 4;
    t.min_blocks = 2;
    t.tile_buffers = 2;
    t.tile_wait = true;
    t.qk_chains = 4;
    t.qk_prefetch = true;
    t.stages = t.tile_buffers * (head_dim / t.chunk);
    return t;
  }
  if (head_dim <= 192 && t.chunk >= 64) {  // 8 warps, two blocks per SM, a 96 KiB ring (above)
    t.warps = 8;
    // D = 64: 128-key tiles (each warp 16 keys of S), the per-tile work of a 64-key tile of 128-byte rows
    // being too little for its barriers and exchanges. Session 32, one H200 (decode_tile_ab.sh, bf16, us,
    // 64 / 128 keys; SDPA cuDNN beside): B=64 S=8192 32/8 260 / 247 (240), B=8 S=32768 136 / 131 (126),
    // per-sequence lengths 111 / 101, B=1 S=131072 76 / 73 (71). D = 128 stays at 64 keys (133 against 130
    // at B=1, the rest within 1%).
    t.block_n = head_dim == 64 && head_dim_v == 64 ? 128 : 64;
    t.min_blocks = 2;
    // One block per SM where the split model would put two on every SM (launch/heuristics.h
    // decode_one_per_sm_splits, measured at these two only).
    t.one_per_sm_min_splits = head_dim == 64 && head_dim_v == 64 ? 4 : head_dim == 128 && head_dim_v == 128 ? 16 : 0;
    t.stages = 96 * 1024 / (t.block_n * t.chunk * 2);
    return t;
  }
  // D = 96 and 160: three blocks share an SM (their shared memory, a 64 KiB ring beside a few KiB of Q and
  // P, allows it); the launch bounds hold the registers to that (168).
  t.min_blocks = t.warps == 8 ? 1 : head_dim <= 192 ? 3 : 2;
  // One 8-warp block per SM gets the ring two smaller blocks would share.
  t.stages = (t.min_blocks == 1 ? 128 : 64) * 1024 / (t.block_n * t.chunk * 2);
  return t;
}

template <int kHeadDim_, int kHeadDimV_, bool kSharedKV_ = false>
struct DecodeTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr bool kSharedKV = kSharedKV_;
  static constexpr DecodeTileSpec kSpec = decode_tile(kHeadDim, kHeadDimV, kSharedKV);
  static constexpr bool kTileWait = kSpec.tile_wait;
  static constexpr int kWarps = kSpec.warps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 16;  // packed query rows per block (one m16 MMA tile)
  static constexpr int kBlockN = kSpec.block_n;
  static constexpr int kChunk = kSpec.chunk;
  static constexpr int kStages = kSpec.stages;
  static constexpr int kMinBlocks = kSpec.min_blocks;
  static constexpr int kOnePerSmMinSplits = kSpec.one_per_sm_min_splits;
  static constexpr int kTileBuffers = kSpec.tile_buffers;
  static constexpr int kKChunks = kHeadDim / kChunk;   // ring slots of K per KV tile
  static constexpr int kVChunks = kHeadDimV / kChunk;  // ring slots of V per KV tile
  static constexpr int kChunksPerTile = kSharedKV ? kKChunks : kKChunks + kVChunks;  // ring loads per tile
  static constexpr int kWarpKeys = kBlockN / kWarps;   // S columns (keys) of a tile a warp owns
  static constexpr int kSNTiles = kWarpKeys / 8;       // its n8 score tiles
  // Independent accumulator chains of S = Q K^T: two where the head dim is wide (D / 16 dependent
  // MMAs a tile otherwise) and the registers are there: not at D < 256, where the 4-warp tiles
  // keep three blocks per SM.
  static constexpr int kQkChains = kSpec.qk_chains > 0 ? kSpec.qk_chains : kHeadDim >= 256 ? 2 : 1;
  static constexpr bool kQkPrefetch = kSpec.qk_prefetch;
  static constexpr int kWarpCols = kChunk / kWarps;    // O columns of one chunk a warp owns
  static constexpr int kONTiles = kWarpCols / 8;       // its n8 accumulator tiles per chunk
  static constexpr int kUnitsPerRow = kChunk / 8;      // 16-byte units of one slot row
  static constexpr int kLoadPasses = kBlockN * kUnitsPerRow / kThreads;

  using QTile = SmemTile<kRows, kChunk>;     // Q is kKChunks of these
  using KvTile = SmemTile<kBlockN, kChunk>;  // one ring slot
  using PTile = SmemTile<kRows, kBlockN>;    // the packed P of one KV tile (b16)

  static constexpr int kQBytes = kKChunks * QTile::kBytes;
  static constexpr int kRingBytes = kStages * KvTile::kBytes;
  static constexpr int kPBytes = PTile::kBytes;
  static constexpr int kRedBytes = 2 * kWarps * kRows * 4;  // per-warp row max and row sum (fp32)
  static_assert(kWarps % 4 == 0 && (kQBytes + kRingBytes + kPBytes) % 16 == 0,
                "the row maxima are read four warps (16 bytes) at a time");
  static constexpr int kSmemBytes = kQBytes + kRingBytes + kPBytes + kRedBytes;

  static_assert(kHeadDim % kChunk == 0 && kHeadDimV % kChunk == 0, "the chunk must divide both head dims");
  static_assert(kHeadDim <= 1024 && kHeadDimV <= 1024, "decode head dims go to 1024");
  static_assert(kSNTiles == 1 || kSNTiles == 2, "each warp owns 8 or 16 keys of a KV tile");
  static_assert(kWarpCols % 8 == 0 && kONTiles >= 1 && kONTiles <= 4, "each warp owns 1..4 n8 tiles of a chunk");
  static_assert(kLoadPasses >= 1 && kBlockN * kUnitsPerRow % kThreads == 0, "a slot loads in whole passes");
  static_assert(kStages >= 3, "the ring keeps at least two slots in flight");
  static_assert(!kSharedKV || (kHeadDimV <= kHeadDim && kTileBuffers >= 2 && kStages == kTileBuffers * kKChunks),
                "shared K/V: V is a prefix of K, the ring whole tiles");
  static_assert(QTile::kBytes % 128 == 0 && KvTile::kBytes % 128 == 0 && PTile::kBytes % 128 == 0,
                "every shared region stays 128-byte aligned (the swizzle phase of a slot starts at 0)");
  static_assert(kSmemBytes >= 4 * (kDecodeLongestFirstMaxBatch + 1), "the longest-first order's scratch fits");
};

}  // namespace ffpa

namespace ffpa {

// How the Hopper decode kernels (decode_sm90_ws.cuh: 64 rows a block, decode_sm90_narrow.cuh: 16)
// pack query rows into blocks of kRows: a KV head's rows are (position i, head g of its group),
// position-major, and a block is one position's kRows heads (group >= kRows) or kRows / group
// positions of every head (group < kRows): row r of block m is position i0(m) + r / rows_per_i of
// head g0(m) + r % rows_per_i. Groups are powers of two (the launcher's condition), so one rank-5
// TMA box of rows_per_i heads x positions loads a block's Q.
template <int kRows>
struct RowPacking {
  int rows_per_i;    // heads of the group a block takes per position
  int positions;     // positions a block takes
  int blocks_per_i;  // blocks of one position's heads
  int blocks;        // blocks per KV head
  __host__ __device__ __forceinline__ RowPacking(int group, int len_q)
      : rows_per_i(group < kRows ? group : kRows),
        positions(kRows / rows_per_i),
        blocks_per_i(group / rows_per_i),
        blocks(blocks_per_i * ((len_q + positions - 1) / positions)) {}
  __host__ __device__ __forceinline__ int g0(int m_block) const { return (m_block % blocks_per_i) * kRows; }
  __host__ __device__ __forceinline__ int i0(int m_block) const { return (m_block / blocks_per_i) * positions; }
};

// The narrow decode kernel on Hopper (kernels/decode_sm90_narrow.cuh): MLA's single cache (V = the
// first Dv columns of K) with few query rows per KV head, computed transposed so the 16 packed rows
// are the wgmma's N: S^T = K Q^T (M = 64 keys) and O^T += V^T P^T (M = 64 output columns at a time).
// A stage is one 64-key tile of K, all D columns (V is read from it): two stages beside Q fill the
// shared memory (a third would not fit beside Q at D = 576).
template <typename Element_, int kHeadDim_, int kHeadDimV_>
struct DecodeNarrowTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr int kRows = 16;    // packed query rows per block: the N of every wgmma
  static constexpr int kBlockN = 64;  // keys per stage: the M of S^T
  static constexpr int kStages = 2;
  static constexpr int kConsumerWarps = 4;            // one warpgroup
  static constexpr int kThreads = 32 * (kConsumerWarps + 1);  // + one producer warp
  using KTile = GmmaSw128Tile<kBlockN, kHeadDim>;     // one stage
  using QTile = GmmaSw128Tile<kRows, kHeadDim>;
  using PTile = GmmaSw128Tile<kRows, kBlockN>;        // P^T as the B operand: rows x keys, K-major
  static constexpr int kStageBytes = KTile::kBytes;
  static constexpr int kRedBytes = 2 * kConsumerWarps * kRows * 4;  // per-warp row max and row sum
  static constexpr int kBarrierBytes = 8 * (2 * kStages + 1);       // full, empty, Q
  static constexpr int kSmemBytes = 1024 + kStages * kStageBytes + QTile::kBytes + PTile::kBytes + kRedBytes + kBarrierBytes;

  static_assert(kHeadDim % 64 == 0 && kHeadDimV % 64 == 0 && kHeadDimV <= kHeadDim, "V is a 64-aligned prefix of K");
  static_assert(kSmemBytes <= 227 * 1024, "two stages and Q fit shared memory");
  static_assert(PTile::kBytes >= 4 * (kDecodeLongestFirstMaxBatch + 1), "P holds the longest-first order's scratch");
};


// The MLA decode kernel on Hopper (kernels/decode_sm90_mla.cuh): MLA's single cache (V = the first Dv
// columns of K) with a full 64-row tile per block (MLA's 128 heads at one position, 16 heads x 4
// positions, ...): compute-bound, so each K byte crosses from L2 once per block and Q stays resident.
// A stage is one 64-key tile of K, all D columns, with a full barrier per 64-column chunk (the first
// chunks' Q K^T runs while the last land). Two consumer warpgroups each own Dv / 2 output columns and
// take the key tiles' Q K^T and softmax in turns (even tiles the first, odd the second); the third
// warpgroup's first thread issues the TMA loads. Q (72 KiB at D = 576), two stages (144 KiB) and one
// P buffer (8 KiB) fill the shared memory.
template <typename Element_, int kHeadDim_, int kHeadDimV_>
struct DecodeMlaTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr int kRows = 64;     // packed query rows per block: the M of every wgmma
  static constexpr int kBlockN = 64;   // keys per stage
  static constexpr int kStages = 2;
  static constexpr int kConsumers = 2;
  static constexpr int kHalf = kHeadDimV / kConsumers;  // output columns per consumer warpgroup
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  using KTile = GmmaSw128Tile<kBlockN, kHeadDim>;  // one stage
  using QTile = GmmaSw128Tile<kRows, kHeadDim>;
  using PTile = GmmaSw128Tile<kRows, kBlockN>;     // P of one tile: rows x keys, K-major
  static constexpr int kChunks = KTile::kChunks;   // 64-column chunks of a stage (a full barrier each)
  static constexpr int kStatBytes = 4 * 4 * kRows;  // row max, alpha, the two consumers' row sums
  // full per chunk, empty per consumer, Q, and the consumers' hand-offs (row max, P)
  static constexpr int kBarrierBytes = 8 * (kStages * kChunks + kStages * kConsumers + 1 + 2 * kConsumers);
  static constexpr int kSmemBytes =
      1024 + QTile::kBytes + kStages * KTile::kBytes + PTile::kBytes + kStatBytes + kBarrierBytes;

  static_assert(kHeadDim % 64 == 0 && kHeadDimV % 64 == 0 && kHeadDimV <= kHeadDim, "V is a 64-aligned prefix of K");
  static_assert(kHalf % 64 == 0 && kHalf <= 256, "a consumer's columns are whole chunks, one wgmma wide");
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= 65536, "the register file holds the block");
  static_assert(kSmemBytes <= 227 * 1024, "Q, two stages and P fit shared memory");
  static_assert(PTile::kBytes >= 4 * (kDecodeLongestFirstMaxBatch + 1), "P holds the longest-first order's scratch");
};

}  // namespace ffpa
