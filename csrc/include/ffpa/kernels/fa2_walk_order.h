// The order the warp-specialised FA-2 kernel's blocks take work items in (Fa2WsItems::Walk,
// kernels/fa2_ws_schedule.cuh): plain integer math on slots, shared by the kernel and by the host (ops/module.cpp
// fa2_walk_items, which tests/test_fa2_schedule.py checks). Items are in item()'s numbering: t = bh x M + k is query
// block M - 1 - k of (batch, head) bh, M query blocks a head, so k = 0 is the last (with causal masking, the longest).
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define FFPA_WALK_FN __host__ __device__ __forceinline__
#else
#define FFPA_WALK_FN inline
#endif

namespace ffpa::attn {

struct Fa2WalkOrder {
  // Slots [0, paired) are items (no causal mask) or pairs of query blocks M - 1 - q and q of one head (causal: the
  // longest left and the shortest, whose lengths add up to about the same); the last `tail` heads' items follow as
  // single slots.
  static FFPA_WALK_FN int paired(int bh, bool causal, int tail, int m_blocks) {
    return causal ? (bh - tail) * ((m_blocks + 1) / 2) : bh * m_blocks;
  }
  // Every slot of the walk (pairs or items, then the tail's single items), in 64 bits for the launchers' sizing.
  static FFPA_WALK_FN int64_t slots(int64_t bh, bool causal, int64_t tail, int m_blocks) {
    return causal ? (bh - tail) * ((m_blocks + 1) / 2) + tail * m_blocks : bh * m_blocks;
  }
  // The item of slot s (half: which of a pair). The tail deals rank r of every tail head in turn, r = 0 the longest
  // (query block M - 1), so the walk ends on ever shorter items.
  static FFPA_WALK_FN int item(int bh, bool causal, int tail, int m_blocks, int s, int half) {
    const int head_slots = paired(bh, causal, tail, m_blocks);
    if (s >= head_slots) {
      const int u = s - head_slots, r = u / tail;
      return (bh - tail + (u - r * tail)) * m_blocks + r;
    }
    if (!causal) return s;
    const int n = (m_blocks + 1) / 2, h = s / n, q = s - h * n;
    return h * m_blocks + (half ? m_blocks - 1 - q : q);
  }
  // Whether slot s has a second item (a pair whose two query blocks differ).
  static FFPA_WALK_FN bool pair_has_second(bool causal, int tail, int bh, int m_blocks, int s) {
    const int q = s % ((m_blocks + 1) / 2);
    return causal && s < paired(bh, causal, tail, m_blocks) && m_blocks - 1 - q != q;
  }
};

}  // namespace ffpa::attn
