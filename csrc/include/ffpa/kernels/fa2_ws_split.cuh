// The warp-specialised FA-2 kernel's split tail (fa2_fwd_sm90_ws.cuh; calls without causal masking or a
// mask): the walk's items are equal, so a persistent grid of G blocks over T items ends on a last
// round of T mod G items while the other SMs idle (B=1 H=32 N=8192 at D = 128: 2048 items, 15.5 rounds
// on 132 SMs; ncu: SM active cycles 3.3% under elapsed). With p.split_shares = G > 0, the walk's slots
// from p.split_from (the last G + T mod G items, one round plus the remainder) are G shares of equal
// length in key tiles instead of items (stream-K, as GEMMs split K): share k covers the split part's
// tiles [k W / G, (k + 1) W / G), W = (T - split_from) x n (n key tiles an item), item by item. A
// share holds at least n tiles, so an item a share boundary cuts falls in two pieces: the left one
// (tiles [0, b)) and the right one ([b, n)), on two blocks. Each warp of the piece that finishes
// second merges the other's partial (O unnormalised, row max, row sum, in the accumulator layout: the
// same thread of the same warp holds the same rows on either block) into its registers by their row
// maxima and stores the rows; the first stores its partial and leaves. No block waits on another.
#pragma once
#include <cstdint>
#include <math_constants.h>

#include "ffpa/attn/state.cuh"
#include "ffpa/kernels/fa2_split_plan.h"
#include "ffpa/params.h"
#include "ffpa/ptx/math.cuh"

namespace ffpa::attn {

struct Fa2SplitTail : Fa2SplitSchedule {
  // Floats of one warp's partial: O's accumulators, then the row maxima and sums, each a column of
  // 32 lanes (coalesced).
  template <int kNO>
  static constexpr int kWarpFloats = 32 * (4 * kNO + 4);
  // Workspace of a split call: partials [boundary][consumer][warp][side] and flags [boundary][consumer][warp].
  template <int kNO, int kConsumers>
  static constexpr int64_t partial_floats(int shares) {
    return static_cast<int64_t>(shares) * kConsumers * 4 * 2 * kWarpFloats<kNO>;
  }
  template <int kConsumers>
  static constexpr int64_t flag_count(int shares) {
    return static_cast<int64_t>(shares) * kConsumers * 4;
  }

  // At a unit's end: the boundary that cut its item, or -1 (a whole item, or no split tail); left: the
  // unit is the item's left piece (it ends before the item's last tile: n_end). From the item's
  // coordinates, so no register holds the unit's range across its tiles.
  template <int kBlockM, int kBlockN>
  static __device__ __forceinline__ int item_cut(const FwdParams& p, int batch, int head, int m0, int n_end,
                                                 int m_blocks, bool& left) {
    if (p.split_shares == 0) return -1;
    const int n = (p.len_kv + kBlockN - 1) / kBlockN;
    const int i = (batch * p.heads_q + head + 1) * m_blocks - 1 - m0 / kBlockM - p.split_from;  // (Fa2WsItems::item)
    left = n_end < n;
    if (i < 0) return -1;
    return cut_at(i, n, tiles(static_cast<int64_t>(p.heads_q) * p.batch * m_blocks, p.split_from, n), p.split_shares);
  }

  // A piece's end for one warp (o / row_max / row_sum: its rows' partial state, after its last P V).
  // left: the item's left piece (else its right one); b: the boundary between them. True: this warp
  // finished second and its registers now hold the item's whole state (the caller stores it).
  template <int kNO, int kConsumers>
  static __device__ __forceinline__ bool merge(const FwdParams& p, int b, bool left, int c, int warp, int lane,
                                               float (&o)[kNO][4], float (&row_max)[2], float (&row_sum)[2]) {
    const int slot = (b * kConsumers + c) * 4 + warp;  // (an int: shares x 12 warps x 2 x 32 x (4 kNO + 4) floats)
    int* flag = p.split_flags + slot;
    float* mine = p.split_partials + ((slot * 2 + (left ? 0 : 1)) * kWarpFloats<kNO> + lane);
    const float* other = p.split_partials + ((slot * 2 + (left ? 1 : 0)) * kWarpFloats<kNO> + lane);
    int seen = 0;  // 1: the other piece's partial is stored (its flag raised after a fence)
    if (lane == 0) asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(seen) : "l"(flag) : "memory");
    seen = __shfl_sync(0xffffffffu, seen, 0);
    if (seen == 0) {
#pragma unroll
      for (int n = 0; n < kNO; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) __stcg(mine + 32 * (4 * n + e), o[n][e]);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        __stcg(mine + 32 * (4 * kNO + r), row_max[r]);
        __stcg(mine + 32 * (4 * kNO + 2 + r), row_sum[r]);
      }
      __threadfence();
      __syncwarp();
      int old = 0;
      if (lane == 0) old = atomicAdd(flag, 1);
      if (__shfl_sync(0xffffffffu, old, 0) == 0) return false;  // first: the other piece merges
    }
    __syncwarp();
    __threadfence();
    float a[2], x[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float om = __ldcg(other + 32 * (4 * kNO + r)), os = __ldcg(other + 32 * (4 * kNO + 2 + r));
      const float m = fmaxf(row_max[r], om), mu = exp_base(m);
      a[r] = ptx::ex2_approx_ftz(row_max[r] - mu);
      x[r] = ptx::ex2_approx_ftz(om - mu);
      row_sum[r] = row_sum[r] * a[r] + os * x[r];
      row_max[r] = m;
    }
    // In groups of 4 n8 tiles (16 loads in flight): all at once, the loads' registers beside O pushed
    // the three-consumer D = 64 look-ahead kernel (160 registers) into a spill.
#pragma unroll
    for (int n = 0; n < kNO; ++n) {
      if (n % 4 == 0) asm volatile("" ::: "memory");
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] = o[n][e] * a[e / 2] + __ldcg(other + 32 * (4 * n + e)) * x[e / 2];
    }
    return true;
  }
};

}  // namespace ffpa::attn
