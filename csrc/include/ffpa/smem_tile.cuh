// Shared-memory tile of b16 elements stored row-major in 16-byte units with an XOR swizzle, so
// that ldmatrix (8 rows, one unit each) and the cp.async fills hit 8 distinct bank groups.
// All swizzle arithmetic of the project lives here.
#pragma once
#include <cstdint>

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
  static constexpr int kRowsPerBankLine = kUnits >= 8 ? 1 : 8 / kUnits;
  static constexpr int kPhases = kUnits >= 8 ? 8 : kUnits;
  static constexpr int kBytes = kRows * kCols * 2;

  // Byte offset of 16-byte unit `unit` of row `row`.
  static __host__ __device__ __forceinline__ uint32_t unit_offset(int row, int unit) {
    const int phase = (row / kRowsPerBankLine) % kPhases;
    return static_cast<uint32_t>((row * kUnits + (unit ^ phase)) * 16);
  }
  // Byte offset of element `col` (any column) of row `row`.
  static __host__ __device__ __forceinline__ uint32_t elem_offset(int row, int col) {
    return unit_offset(row, col / 8) + static_cast<uint32_t>((col % 8) * 2);
  }
};

}  // namespace ffpa
