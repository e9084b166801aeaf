// The FP8 kernel's pre-pass: V [B, Hkv, S, Dv] (e4m3 bytes, any strides with a contiguous last dim)
// to V^T [B][Hkv][Dv][vt_len] (vt_len = S rounded up to 32), the keys of each group of 32 in the order
// the FA-2-style kernel's P fragments hold them (fp8_p_key, traits/fp8_traits.h) or in order, zeros past S. 8-bit wgmma reads its B
// operand K-major only, and P V's K is the keys. One block moves 128 (64) keys x Dv through shared
// memory: 16-byte loads of V's rows, byte gathers, 16-byte stores of V^T's. Reads and writes V once
// (a few percent of the attention's time at the lengths FP8 serves).
#pragma once
#include <cstdint>

#include "ffpa/params.h"
#include "ffpa/traits/fp8_traits.h"

namespace ffpa::kernels {

// Keys per block: 128, or 64 past Dv = 256 (the staged rows within 48 KB of static shared memory).
constexpr int fp8_transpose_keys(int dv) { return dv > 256 ? 64 : 128; }
constexpr int kFp8TransposeThreads = 256;

// Grid (ceil(vt_len / fp8_transpose_keys(kDv)), Hkv, B). kPermute = false: the keys in order (the FFPA-style FP8 kernel,
// kernels/ffpa_fwd_sm90_fp8.cuh, whose P goes through shared memory in key order).
template <int kDv, bool kPermute = true>
__global__ void __launch_bounds__(kFp8TransposeThreads) fp8_v_transpose_kernel(FwdParams p) {
  constexpr int kKeys = fp8_transpose_keys(kDv);
  constexpr int kPitch = kDv + 16;  // bytes per staged key row (16-byte aligned, banks staggered)
  __shared__ __align__(16) uint8_t tile[kKeys * kPitch];
  const int key0 = blockIdx.x * kKeys, head = blockIdx.y, batch = blockIdx.z;
  const uint8_t* v = static_cast<const uint8_t*>(p.v) + batch * p.v_batch_stride + head * p.v_head_stride;
  constexpr int kUnits = kDv / 16;
  for (int i = threadIdx.x; i < kKeys * kUnits; i += kFp8TransposeThreads) {
    const int r = i / kUnits, u = i % kUnits, key = key0 + r;
    uint4 x = make_uint4(0u, 0u, 0u, 0u);
    if (key < p.len_kv) x = *reinterpret_cast<const uint4*>(v + static_cast<int64_t>(key) * p.v_row_stride + 16 * u);
    *reinterpret_cast<uint4*>(tile + r * kPitch + 16 * u) = x;
  }
  __syncthreads();
  uint8_t* vt = static_cast<uint8_t*>(p.vt) + (static_cast<int64_t>(batch) * p.heads_kv + head) * kDv * p.vt_len;
  constexpr int kVecs = kKeys / 16;  // 16-byte runs of one V^T row per block
  for (int i = threadIdx.x; i < kDv * kVecs; i += kFp8TransposeThreads) {
    const int col = i / kVecs, vec = i % kVecs, pos0 = key0 + 16 * vec;
    if (pos0 >= p.vt_len) continue;
    uint32_t w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t x = 0u;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int c = 16 * vec + 4 * q + b;  // position inside the block's keys
        const int src = kPermute ? 32 * (c / 32) + fp8_p_key(c % 32) : c;
        x |= static_cast<uint32_t>(tile[src * kPitch + col]) << (8 * b);
      }
      w[q] = x;
    }
    *reinterpret_cast<uint4*>(vt + static_cast<int64_t>(col) * p.vt_len + pos0) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

}  // namespace ffpa::kernels
