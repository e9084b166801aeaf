// Shared-memory tile of b16 elements stored row-major in 16-byte units with an XOR swizzle, so
// that ldmatrix (8 rows, one unit each) and the cp.async fills hit 8 distinct bank groups.
// All swizzle arithmetic of the project lives here.
#pragma once
#include <cstdint>
#include <type_traits>

namespace ffpa {

// kRows x kCols b16 elements; kCols a multiple of 16 (two 16-byte units).
//
//   logical unit u of row r  ->  physical unit  u ^ phase(r)
//   phase(r) = (r / kRowsPerBankLine) % min(kUnits, 8)
// A 128-byte bank line holds kRowsPerBankLine = max(1, 8 / kUnits) rows, so the 8 rows an
// ldmatrix phase reads at one logical unit land on 8 different 16-byte bank groups.
template <int kRows, int kCols>
struct SwizzledTile {
  static_assert(kCols % 16 == 0, "tile width must be a multiple of 16 elements");
  static constexpr int kUnits = kCols / 8;  // 16-byte units per row
  static_assert(kUnits == 2 || kUnits == 4 || kUnits % 8 == 0,
                "the XOR swizzle stays inside a row only for 2, 4 or a multiple of 8 units (else PaddedTile)");
  static constexpr int kRowsPerBankLine = kUnits >= 8 ? 1 : 8 / kUnits;
  static constexpr int kPhases = kUnits >= 8 ? 8 : kUnits;
  static constexpr int kBytes = kRows * kCols * 2;
  static constexpr bool kAnyRowStep = false;  // advance() needs row steps that keep the phase

  // Byte offset of 16-byte unit `unit` of row `row`.
  static __host__ __device__ __forceinline__ uint32_t unit_offset(int row, int unit) {
    const int phase = (row / kRowsPerBankLine) % kPhases;
    return static_cast<uint32_t>((row * kUnits + (unit ^ phase)) * 16);
  }
  // Byte offset of element `col` (any column) of row `row`.
  static __host__ __device__ __forceinline__ uint32_t elem_offset(int row, int col) {
    return unit_offset(row, col / 8) + static_cast<uint32_t>((col % 8) * 2);
  }

  // Shared address of (row + dr, unit + du) from a lane's `addr` of (row, unit), for dr a
  // multiple of 8 rows (same phase) and du even with unit in {0, 1} (no carry into the lane's
  // bit): an XOR with a small constant plus an immediate, so unrolled fragment loops keep one
  // base register per lane instead of one precomputed address per (dr, du). Needs the tile
  // base aligned to min(kUnits, 8) * 16 bytes.
  static __host__ __device__ __forceinline__ uint32_t advance(uint32_t addr, int dr, int du) {
    constexpr int kP = kPhases;
    return (addr ^ static_cast<uint32_t>((du % kP) * 16)) + static_cast<uint32_t>(dr * kUnits * 16 + (du - du % kP) * 16);
  }
};

// Same interface, but rows padded by one 16-byte unit instead of swizzled: the 8 rows an
// ldmatrix phase reads sit (kUnits + 1) units apart, an odd stride, hence on 8 different bank
// groups for any even kUnits. For widths the XOR swizzle cannot cover (96, 160, 224: 12, 20, 28
// units), at 1/kUnits extra shared memory.
template <int kRows, int kCols>
struct PaddedTile {
  static_assert(kCols % 16 == 0, "tile width must be a multiple of 16 elements");
  static constexpr int kUnits = kCols / 8;
  static constexpr int kStrideUnits = kUnits + 1;
  static constexpr int kBytes = kRows * kStrideUnits * 16;
  static constexpr bool kAnyRowStep = true;  // advance() is linear

  static __host__ __device__ __forceinline__ uint32_t unit_offset(int row, int unit) {
    return static_cast<uint32_t>((row * kStrideUnits + unit) * 16);
  }
  static __host__ __device__ __forceinline__ uint32_t elem_offset(int row, int col) {
    return unit_offset(row, col / 8) + static_cast<uint32_t>((col % 8) * 2);
  }
  static __host__ __device__ __forceinline__ uint32_t advance(uint32_t addr, int dr, int du) {
    return addr + static_cast<uint32_t>((dr * kStrideUnits + du) * 16);
  }
};

// The canonical 128-byte-swizzle layout the Hopper tensor cores (wgmma) read through a
// descriptor (ptx/wgmma.cuh). Columns are cut into chunks of 64 (128 bytes); each chunk is a
// contiguous kRows x 128-byte block, 1024-byte aligned, and 16-byte unit u of row r sits at
//
//   chunk(u / 8) + r * 128 + ((u % 8) ^ (r % 8)) * 16
//
// (row r's units rotate by r % 8, so 8 consecutive rows at one unit hit 8 bank groups). A width
// that is not a multiple of 64 (96, 160, 224) leaves the last chunk partly unused: wgmma reads
// only the k-steps (or, transposed, the columns) that exist.
template <int kRows, int kCols>
struct GmmaSw128Tile {
  static_assert(kCols % 16 == 0, "tile width must be a multiple of 16 elements");
  static_assert(kRows % 8 == 0, "the swizzle pattern repeats every 8 rows");
  static constexpr int kUnits = kCols / 8;
  static constexpr int kChunks = (kCols + 63) / 64;
  static constexpr int kChunkBytes = kRows * 128;
  static constexpr int kBytes = kChunks * kChunkBytes;
  static constexpr bool kAnyRowStep = false;  // advance() needs row steps that keep the phase

  static __host__ __device__ __forceinline__ uint32_t unit_offset(int row, int unit) {
    return static_cast<uint32_t>((unit / 8) * kChunkBytes + row * 128 + (((unit % 8) ^ (row % 8)) * 16));
  }
  static __host__ __device__ __forceinline__ uint32_t elem_offset(int row, int col) {
    return unit_offset(row, col / 8) + static_cast<uint32_t>((col % 8) * 2);
  }
  // (row + dr, unit) from (row, unit) for dr a multiple of 8; only the copies use it, with du = 0
  // (no fragment loads: wgmma addresses its operands through descriptors).
  static __host__ __device__ __forceinline__ uint32_t advance(uint32_t addr, int dr, int /*du*/) {
    return addr + static_cast<uint32_t>(dr * 128);
  }

  // Start offsets of wgmma descriptors (ptx::gmma_desc_sw128), whose reads apply the swizzle:
  // k-step ks (16 columns) of a K-major operand (Q, K: rows = M or N, columns = k) is chunk ks / 4,
  // 32 bytes per k-step inside its 128-byte rows; k-step kk (16 rows) of an MN-major operand (V:
  // rows = k) starts 16 rows, 2048 bytes, further; 64-column chunk c starts c chunks further.
  static __host__ __device__ __forceinline__ uint32_t k_major_kstep(int ks) {
    return static_cast<uint32_t>((ks / 4) * kChunkBytes + (ks % 4) * 32);
  }
  static __host__ __device__ __forceinline__ uint32_t mn_major_kstep(int kk) {
    return static_cast<uint32_t>(kk * 16 * 128);
  }
  static __host__ __device__ __forceinline__ uint32_t chunk(int c) {
    return static_cast<uint32_t>(c * kChunkBytes);
  }

  // XOR every 32-bit word of 64 rows of each chunk with `mask`: a warpgroup's rows (`rows`: the shared
  // address of the first in chunk 0), by its 128 threads (tid 0..127). A negative scale's Q flip (the sign
  // bits: 0x80008000 in b16, 0x80808080 in e4m3); the caller fences the async proxy and syncs after.
  static __device__ __forceinline__ void xor_rows64(uint32_t rows, uint32_t mask, int tid) {
    for (int i = tid; i < kChunks * 64 * 32; i += 128) {
      const uint32_t addr = rows + (i / (64 * 32)) * kChunkBytes + (i % (64 * 32)) * 4;
      uint32_t x;
      asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(x) : "r"(addr));
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(x ^ mask));
    }
  }
};

// The XOR swizzle where it is conflict-free (2 or 4 units, or a multiple of 8), padding elsewhere.
template <int kRows, int kCols>
using SmemTile = std::conditional_t<((kCols / 8) == 2 || (kCols / 8) == 4 || (kCols / 8) % 8 == 0),
                                    SwizzledTile<kRows, kCols>, PaddedTile<kRows, kCols>>;

}  // namespace ffpa
