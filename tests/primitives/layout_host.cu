// Host-side unit tests of the shared-memory primitives the kernels are built on (no GPU needed;
// tests/test_primitives.py compiles and runs this with nvcc):
//  * every tile layout (SwizzledTile, PaddedTile, GmmaSw128Tile) places each element of the tile
//    at its own 2-byte slot inside kBytes, 16-byte units stay whole;
//  * the 8 rows an ldmatrix phase (or a wgmma core matrix) reads at one 16-byte unit sit on 8
//    different bank groups (no bank conflicts);
//  * advance() agrees with unit_offset() wherever its comment says it may be used;
//  * GmmaSw128Tile is the 128-byte swizzle the hardware applies (address bits 4-6 XOR bits 7-9),
//    and the wgmma descriptors the Hopper kernel builds (ptx::gmma_desc_sw128 with the tile's
//    k_major_kstep / mn_major_kstep / chunk offsets) address exactly the tile's elements, as the
//    PTX ISA's canonical K-major and MN-major layouts read them;
//  * FastDivmod (tile/fast_divmod.cuh) against / and %: every dividend below 4096 for divisors 1..2048, the
//    top of the range (2^31 - 1 down) for those and for divisors at powers of two +-2, and random pairs.
// Prints one line per failed check and "N checks, M failed"; exits 1 on any failure.
#include <cstdint>
#include <cstdio>
#include <set>
#include <vector>

#include "ffpa/ptx/wgmma.cuh"
#include "ffpa/tile/fast_divmod.cuh"
#include "ffpa/tile/smem_tile.cuh"

namespace {

long g_checks = 0, g_failed = 0;

void check(bool ok, const char* what, int rows, int cols, int a = -1, int b = -1, int c = -1) {
  ++g_checks;
  if (!ok && ++g_failed <= 40) std::printf("FAIL %s (tile %dx%d; %d %d %d)\n", what, rows, cols, a, b, c);
}

// Every element of a kRows x kCols tile at a distinct, in-range, 2-byte aligned offset; the 8
// elements of one 16-byte unit contiguous; 8 rows at one unit on 8 different bank groups.
template <typename Tile, int kRows, int kCols>
void check_layout(const char* name) {
  std::set<uint32_t> seen;
  bool distinct = true, in_range = true, unit_whole = true;
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) {
      const uint32_t off = Tile::elem_offset(r, c);
      distinct &= seen.insert(off).second;
      in_range &= off + 2 <= static_cast<uint32_t>(Tile::kBytes) && off % 2 == 0;
      unit_whole &= off == Tile::unit_offset(r, c / 8) + (c % 8) * 2 && Tile::unit_offset(r, c / 8) % 16 == 0;
    }
  check(distinct, name, kRows, kCols);
  check(in_range, name, kRows, kCols);
  check(unit_whole, name, kRows, kCols);
  for (int r0 = 0; r0 + 8 <= kRows; r0 += 8)
    for (int u = 0; u < kCols / 8; ++u) {
      std::set<uint32_t> groups;
      for (int r = r0; r < r0 + 8; ++r) groups.insert((Tile::unit_offset(r, u) / 16) % 8);
      check(groups.size() == 8, "8 rows at one unit hit 8 bank groups", kRows, kCols, r0, u);
    }
}

// advance(addr of (row, unit), dr, du) == addr of (row + dr, unit + du): any step for padded
// tiles; for the swizzled ones dr a multiple of 8 (the phase repeats) and du even from unit 0 or 1.
template <typename Tile, int kRows, int kCols>
void check_advance() {
  constexpr int kUnits = kCols / 8;
  for (int r = 0; r < kRows; ++r)
    for (int u = 0; u < (Tile::kAnyRowStep ? kUnits : 2) && u < kUnits; ++u)
      for (int dr = 0; r + dr < kRows; dr += Tile::kAnyRowStep ? 1 : 8)
        for (int du = 0; u + du < kUnits; du += Tile::kAnyRowStep ? 1 : 2)
          check(Tile::advance(Tile::unit_offset(r, u), dr, du) == Tile::unit_offset(r + dr, u + du),
                "advance agrees with unit_offset", kRows, kCols, r * 1000 + u, dr, du);
}

// The hardware's 128-byte swizzle of a shared-memory byte address (1024-byte aligned atoms).
uint32_t sw128(uint32_t addr) { return addr ^ (((addr >> 7) & 7u) << 4); }

struct Desc {
  uint32_t start, lbo, sbo, mode;
};
Desc decode(uint64_t d) {
  return {static_cast<uint32_t>(d & 0x3FFF) << 4, static_cast<uint32_t>((d >> 16) & 0x3FFF) << 4,
          static_cast<uint32_t>((d >> 32) & 0x3FFF) << 4, static_cast<uint32_t>(d >> 62)};
}

template <int kRows, int kCols>
void check_gmma_tile() {
  using Tile = ffpa::GmmaSw128Tile<kRows, kCols>;
  check_layout<Tile, kRows, kCols>("GmmaSw128Tile layout");
  check(Tile::kChunkBytes % 1024 == 0, "GmmaSw128Tile chunks 1024-byte aligned", kRows, kCols);
  // The tile is the hardware swizzle of the plain row-major chunked layout.
  for (int r = 0; r < kRows; ++r)
    for (int u = 0; u < kCols / 8; ++u)
      check(Tile::unit_offset(r, u) == sw128(Tile::chunk(u / 8) + r * 128 + (u % 8) * 16),
            "GmmaSw128Tile is the hardware 128-byte swizzle", kRows, kCols, r, u);
  const uint32_t base = 4096;  // a 1024-byte aligned tile base, as the kernel's
  // K-major operand (rows = M or N, columns = k), as Q@K^T reads Q and K: element (r, kb) of k-step
  // ks at swizzle(start + (r / 8) * SBO + (r % 8) * 128 + 2 * kb).
  for (int ks = 0; ks < kCols / 16; ++ks) {
    const Desc d = decode(ffpa::ptx::gmma_desc_sw128(base + Tile::k_major_kstep(ks), 16, 1024));
    check(d.mode == 1 && d.sbo == 1024, "K-major descriptor fields", kRows, kCols, ks);
    for (int r = 0; r < kRows; ++r)
      for (int k = 0; k < 16; ++k)
        check(sw128(d.start + (r / 8) * d.sbo + (r % 8) * 128 + 2 * k) == base + Tile::elem_offset(r, 16 * ks + k),
              "K-major descriptor reads the tile's element", kRows, kCols, ks, r, k);
  }
  // MN-major operand (rows = k, columns = N), as P@V reads V: element (k, n) of k-step kk at
  // swizzle(start + (n / 64) * LBO + (k / 8) * SBO + (k % 8) * 128 + 2 * (n % 64)), from each
  // 64-column chunk's own descriptor too (the kernel's second P@V product starts at a chunk).
  for (int kk = 0; kk < kRows / 16; ++kk)
    for (int c0 = 0; c0 < Tile::kChunks; ++c0) {
      const Desc d = decode(ffpa::ptx::gmma_desc_sw128(base + Tile::chunk(c0) + Tile::mn_major_kstep(kk),
                                                       Tile::kChunkBytes, 1024));
      check(d.mode == 1 && d.lbo == static_cast<uint32_t>(Tile::kChunkBytes) && d.sbo == 1024,
            "MN-major descriptor fields", kRows, kCols, kk, c0);
      for (int k = 0; k < 16; ++k)
        for (int n = 0; n < kCols - 64 * c0; ++n)
          check(sw128(d.start + (n / 64) * d.lbo + (k / 8) * d.sbo + (k % 8) * 128 + 2 * (n % 64)) ==
                    base + Tile::elem_offset(16 * kk + k, 64 * c0 + n),
                "MN-major descriptor reads the tile's element", kRows, kCols, kk * 100 + c0, k, n);
    }
}

void check_descriptor_encoding() {
  // Fields land where the PTX ISA puts them; the address keeps its low 18 bits (shared window).
  const uint64_t d = ffpa::ptx::gmma_desc_sw128(0x12340u, 0x400u, 0x2000u);
  check((d & 0x3FFF) == (0x12340u >> 4), "descriptor start address bits 0-13", 0, 0);
  check(((d >> 16) & 0x3FFF) == (0x400u >> 4), "descriptor leading byte offset bits 16-29", 0, 0);
  check(((d >> 32) & 0x3FFF) == (0x2000u >> 4), "descriptor stride byte offset bits 32-45", 0, 0);
  check((d >> 62) == 1 && ((d >> 46) & 0xFFFF) == 0 && ((d >> 14) & 3) == 0 && ((d >> 30) & 3) == 0,
        "descriptor swizzle mode 128 B, reserved bits clear", 0, 0);
  check((ffpa::ptx::gmma_desc_sw128(0x40000u + 0x100u, 16, 1024) & 0x3FFF) == (0x100u >> 4),
        "descriptor address wraps at 256 KiB", 0, 0);
}

}  // namespace

// One divisor against the dividends [0, n) and the n largest (up to 2^31 - 1).
void check_divmod_at(int d, int n) {
  const ffpa::FastDivmod f(d);
  bool ok = true;
  for (int i = 0; i < n; ++i)
    for (const int x : {i, 0x7fffffff - i}) {
      int r = -1;
      const int q = f.divmod(x, r);
      ok &= q == x / d && r == x % d;
    }
  check(ok, "FastDivmod against / and %", d, n);
}

void check_divmod() {
  for (int d = 1; d <= 2048; ++d) check_divmod_at(d, 4096);
  for (int s = 1; s < 31; ++s)
    for (int e = -2; e <= 2; ++e)
      if ((int64_t{1} << s) + e > 2048) check_divmod_at(static_cast<int>((int64_t{1} << s) + e), 256);
  check_divmod_at(0x7fffffff, 256);
  uint64_t z = 88172645463325252ull;  // xorshift64: random divisors and dividends below 2^31
  bool ok = true;
  for (int i = 0; i < 200000; ++i) {
    z ^= z << 13, z ^= z >> 7, z ^= z << 17;
    const int d = 1 + static_cast<int>(z % 0x7fffffffull), x = static_cast<int>((z >> 31) % 0x80000000ull);
    int r = -1;
    const int q = ffpa::FastDivmod(d).divmod(x, r);
    ok &= q == x / d && r == x % d;
  }
  check(ok, "FastDivmod on random pairs", 0, 0);
}

#define SMEM_TILE(R, C)                                                                   \
  check_layout<ffpa::SmemTile<R, C>, R, C>("SmemTile<" #R ", " #C "> layout");            \
  check_advance<ffpa::SmemTile<R, C>, R, C>()

int main() {
  // Widths the FA-2 and FFPA tables use: swizzled (2, 4 or a multiple of 8 units) and padded
  // (12, 20, 28 units), at the row counts of their Q, K/V and P tiles.
  SMEM_TILE(16, 16);
  SMEM_TILE(64, 32);
  SMEM_TILE(128, 64);
  SMEM_TILE(64, 96);
  SMEM_TILE(128, 128);
  SMEM_TILE(64, 160);
  SMEM_TILE(64, 192);
  SMEM_TILE(128, 224);
  SMEM_TILE(32, 256);
  SMEM_TILE(32, 320);
  SMEM_TILE(64, 384);
  SMEM_TILE(32, 1024);
  check_layout<ffpa::PaddedTile<64, 128>, 64, 128>("PaddedTile<64, 128> layout");
  check_advance<ffpa::PaddedTile<64, 128>, 64, 128>();
  // The Hopper kernel's Q, K and V tiles (64-row warpgroups; K/V of 32..128 keys; 32..384 columns).
  check_gmma_tile<64, 32>();
  check_gmma_tile<128, 64>();
  check_gmma_tile<64, 96>();
  check_gmma_tile<128, 128>();
  check_gmma_tile<192, 160>();
  check_gmma_tile<64, 256>();
  check_gmma_tile<64, 320>();
  check_gmma_tile<32, 384>();
  check_descriptor_encoding();
  check_divmod();
  std::printf("%ld checks, %ld failed\n", g_checks, g_failed);
  return g_failed == 0 ? 0 : 1;
}
