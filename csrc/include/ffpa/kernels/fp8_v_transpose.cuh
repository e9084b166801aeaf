// The FP8 kernel's pre-pass: V [B, Hkv, S, Dv] (e4m3 bytes, any strides with a contiguous last dim)
// to V^T [B][Hkv][Dv][vt_len] (vt_len = S rounded up to 32), the keys of each group of 16 in the order
// the FA-2-style kernel's P fragments hold them (fp8_p_key, traits/fp8_traits.h) or in order, zeros past S.
// 8-bit wgmma reads its B operand K-major only, and P V's K is the keys. One block moves 128 (64) keys x Dv
// through shared memory: 16-byte loads of V's rows into a swizzled tile; then each thread takes one 4-byte
// word (4 columns) of 16 consecutive keys, 16 word loads, a 4 x 4 byte transpose by `prmt` per output word
// pair (8 per 4 words), and writes 16 bytes of each of the 4 V^T rows. Reads and writes V once.
// Session 53: the earlier form gathered single bytes from shared memory (one load a byte): on an H200 it ran
// at 1.05 TB/s, L1-bound (ncu: L1 92%, DRAM 22%), 84 us of a 1.9 ms D = 256 call.
#pragma once
#include <cstdint>

#include "ffpa/params.h"
#include "ffpa/traits/fp8_traits.h"

namespace ffpa::kernels {

// Keys per block: 128, or 64 past Dv = 256 (the tile within 48 KB of static shared memory).
__host__ __device__ constexpr int fp8_transpose_keys(int dv) { return dv > 256 ? 64 : 128; }
constexpr int kFp8TransposeThreads = 256;

// The source keys of output word q (positions 4q..4q+3) of a group of 16: {a, a + 1, c, c + 1}.
// kPermute: fp8_p_key's order (positions 4q, 4q+1, 4q+2, 4q+3 hold keys 2q, 2q+1, 2q+8, 2q+9); else in order.
template <bool kPermute>
__host__ __device__ constexpr int fp8_vt_word_key(int q, int half) {
  return kPermute ? 2 * q + 8 * half : 4 * q + 2 * half;
}
static_assert(fp8_vt_word_key<true>(1, 0) == fp8_p_key(4) && fp8_vt_word_key<true>(1, 0) + 1 == fp8_p_key(5) &&
                  fp8_vt_word_key<true>(1, 1) == fp8_p_key(6) && fp8_vt_word_key<true>(3, 1) + 1 == fp8_p_key(15),
              "the pre-pass's word order is fp8_p_key's");

// Grid (ceil(vt_len / fp8_transpose_keys(kDv)), Hkv, B). kPermute = false: the keys in order (the FFPA-style FP8 kernel,
// kernels/ffpa_fwd_sm90_fp8.cuh, whose P goes through shared memory in key order).
template <int kDv, bool kPermute = true>
__global__ void __launch_bounds__(kFp8TransposeThreads) fp8_v_transpose_kernel(FwdParams p) {
  constexpr int kKeys = fp8_transpose_keys(kDv);
  constexpr int kChunks = kDv / 16;   // 16-byte chunks of a row
  constexpr int kGroups = kKeys / 16;  // groups of 16 keys (one output vector of a V^T row each)
  // Chunk c of row r lies at chunk c ^ swz(r), swz = (r / 16) x kStep: the 8 (4) key groups a warp reads
  // at once fall on distinct 16-byte bank groups (conflict-free at Dv >= 128; two-way at Dv = 64).
  constexpr int kStep = 8 / kGroups;
  static_assert(kDv % 64 == 0 && (kChunks & (kChunks - 1)) == 0 && (kGroups == 8 || kGroups == 4),
                "a power-of-two count of 16-byte chunks, 4 or 8 key groups");
  __shared__ __align__(16) uint8_t tile[kKeys * kDv];
  const int key0 = blockIdx.x * kKeys, head = blockIdx.y, batch = blockIdx.z;
  const uint8_t* v = static_cast<const uint8_t*>(p.v) + batch * p.v_batch_stride + head * p.v_head_stride;
  constexpr int kLoads = kKeys * kChunks / kFp8TransposeThreads;
  static_assert(kLoads * kFp8TransposeThreads == kKeys * kChunks, "whole load passes");
  uint4 x[kLoads];
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const int i = threadIdx.x + j * kFp8TransposeThreads, key = key0 + i / kChunks;
    x[j] = make_uint4(0u, 0u, 0u, 0u);
    if (key < p.len_kv)
      x[j] = *reinterpret_cast<const uint4*>(v + static_cast<int64_t>(key) * p.v_row_stride + 16 * (i % kChunks));
  }
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const int i = threadIdx.x + j * kFp8TransposeThreads, r = i / kChunks;
    const int c = (i % kChunks) ^ (((r / 16) * kStep) & (kChunks - 1));
    *reinterpret_cast<uint4*>(tile + r * kDv + 16 * c) = x[j];
  }
  __syncthreads();
  uint8_t* vt = static_cast<uint8_t*>(p.vt) + (static_cast<int64_t>(batch) * p.heads_kv + head) * kDv * p.vt_len;
  constexpr int kUnits = kGroups * (kDv / 4);  // (key group, column word) pairs; the group varies fastest
#pragma unroll
  for (int t0 = 0; t0 < kUnits; t0 += kFp8TransposeThreads) {
    const int t = t0 + threadIdx.x;
    if (kUnits % kFp8TransposeThreads != 0 && t >= kUnits) break;
    const int g = t % kGroups, cw = t / kGroups, pos0 = key0 + 16 * g;
    if (pos0 >= p.vt_len) continue;
    const int c = (cw / 4) ^ ((g * kStep) & (kChunks - 1));
    const uint8_t* src = tile + 16 * g * kDv + 16 * c + 4 * (cw % 4);
    uint32_t w[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) w[k] = *reinterpret_cast<const uint32_t*>(src + k * kDv);
    uint32_t o[4][4];  // o[column b of the word][output word q]
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int a = fp8_vt_word_key<kPermute>(q, 0), c2 = fp8_vt_word_key<kPermute>(q, 1);
      const uint32_t lo = __byte_perm(w[a], w[a + 1], 0x5140), hi = __byte_perm(w[a], w[a + 1], 0x7362);
      const uint32_t lo2 = __byte_perm(w[c2], w[c2 + 1], 0x5140), hi2 = __byte_perm(w[c2], w[c2 + 1], 0x7362);
      o[0][q] = __byte_perm(lo, lo2, 0x5410);
      o[1][q] = __byte_perm(lo, lo2, 0x7632);
      o[2][q] = __byte_perm(hi, hi2, 0x5410);
      o[3][q] = __byte_perm(hi, hi2, 0x7632);
    }
#pragma unroll
    for (int b = 0; b < 4; ++b)
      *reinterpret_cast<uint4*>(vt + static_cast<int64_t>(4 * cw + b) * p.vt_len + pos0) =
          make_uint4(o[b][0], o[b][1], o[b][2], o[b][3]);
  }
}

}  // namespace ffpa::kernels
