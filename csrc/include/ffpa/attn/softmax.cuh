// Row reductions of the online softmax over one thread's strip of m16n8 accumulator tiles
// (kN tiles; tile n holds rows g and g + 8 at two adjacent columns: elements {0, 1} of row g,
// {2, 3} of row g + 8). Shared by the FA-2 and FFPA kernels.
//
// Written as balanced trees (depth log2(2 kN)) rather than one running max / sum per row: the
// running form is a dependent chain of 2 kN FMNMX or FADD per row every KV tile, which ncu showed
// as the top stall ("fixed-latency dependency", a third of all stall cycles, at 2 warps per
// scheduler: FA-2 D = 96 and 192 on an H100).
#pragma once

#include "ffpa/attn/state.cuh"
#include "ffpa/ptx/math.cuh"
#include "ffpa/tile/quad.cuh"

namespace ffpa {

// max over tiles [kLo, kHi) of the two elements of row half r (0: row g, 1: row g + 8).
template <int kLo, int kHi>
struct StripMax {
  template <int kN>
  static __device__ __forceinline__ float run(const float (&acc)[kN][4], int r) {
    if constexpr (kHi - kLo == 1) {
      return fmaxf(acc[kLo][2 * r], acc[kLo][2 * r + 1]);
    } else {
      constexpr int kMid = (kLo + kHi) / 2;
      return fmaxf(StripMax<kLo, kMid>::run(acc, r), StripMax<kMid, kHi>::run(acc, r));
    }
  }
};

template <int kN>
__device__ __forceinline__ float strip_row_max(const float (&acc)[kN][4], int r) {
  return StripMax<0, kN>::run(acc, r);
}

// A row sum kept as kParts independent partial sums (element i of a strip goes to part i %
// kParts), added up as a tree once the strip is done: kParts chains of length 2 kN / kParts.
template <int kParts>
struct PartialSum {
  float part[kParts];
  __device__ __forceinline__ PartialSum() {
#pragma unroll
    for (int i = 0; i < kParts; ++i) part[i] = 0.f;
  }
  __device__ __forceinline__ void add(int i, float x) { part[i % kParts] += x; }
  __device__ __forceinline__ float total() const { return tree<0, kParts>(); }

 private:
  template <int kLo, int kHi>
  __device__ __forceinline__ float tree() const {
    if constexpr (kHi - kLo == 1) {
      return part[kLo];
    } else {
      constexpr int kMid = (kLo + kHi) / 2;
      return tree<kLo, kMid>() + tree<kMid, kHi>();
    }
  }
};

// A tile's row maxima over the quad (m[0]: rows g, m[1]: g + 8; the same in a quad's four lanes), times sf: what
// the online update compares with the running max. Every lane of the warp must call it.
template <int kN>
__device__ __forceinline__ void quad_row_max(const float (&s)[kN][4], float sf, float (&m)[2]) {
  m[0] = strip_row_max(s, 0);
  m[1] = strip_row_max(s, 1);
#pragma unroll
  for (int r = 0; r < 2; ++r) m[r] = quad_max(m[r]) * sf;
}

// P = exp2(s * sf + neg_m[row half]) in place over the strip, each row's sum (4 partial sums, a
// tree at the end) added to row_sum: the exponentiation step of the warp-specialised kernels.
template <int kN>
__device__ __forceinline__ void exp2_strip_add_sums(float (&s)[kN][4], float sf, const float (&neg_m)[2],
                                                    float (&row_sum)[2]) {
  PartialSum<4> tile_sum[2];
#pragma unroll
  for (int n = 0; n < kN; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = ptx::ex2_approx_ftz(fmaf(s[n][e], sf, neg_m[e / 2]));
      tile_sum[e / 2].add(2 * n + e % 2, s[n][e]);
    }
  row_sum[0] += tile_sum[0].total();
  row_sum[1] += tile_sum[1].total();
}

// O *= alpha over an accumulator strip (alpha[0] for its rows g, alpha[1] for g + 8), skipped where
// every alpha of the warp is 1: the row maxima settled (the lazy update, attn/state.cuh). The Hopper
// kernels' rescale of O after a tile's softmax.
template <int kN>
__device__ __forceinline__ void rescale_strip(float (&o)[kN][4], const float (&alpha)[2]) {
  if (__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) return;
#pragma unroll
  for (int n = 0; n < kN; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] *= alpha[e / 2];
}

// A tile's online softmax the exact way (the lazy max of attn/state.cuh, slack `slack`): the row maxima of S (scores
// times sf, base 2) over the quad, the update, P = exp2(s - m + p_offset) in place and the sums. The FP8 kernel's too
// (its own slack and offset: e4m3's range).
template <int kN>
__device__ __forceinline__ void exact_tile_softmax(float (&s)[kN][4], float sf, float (&row_max)[2], float (&row_sum)[2],
                                                   float (&alpha)[2], float slack = attn::kLazyMaxSlack, float p_offset = 0.f) {
  // (quad_row_max's work, each row's update right after its quad reduction)
  float tile_max[2] = {strip_row_max(s, 0), strip_row_max(s, 1)};
  float neg_m[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = quad_max(tile_max[r]);
    alpha[r] = attn::online_update_lazy(row_max[r], row_sum[r], tile_max[r] * sf, neg_m[r], slack);
    neg_m[r] += p_offset;
  }
  exp2_strip_add_sums(s, sf, neg_m, row_sum);
}

}  // namespace ffpa
