// The order the split-KV decode kernels take their blocks in: the reverse of the launch order.
//
// The block scheduler starts blocks in increasing linear index (x fastest, then y, then z), and the
// decode grids put the batch in z, the KV head in y and the splits in x: launch order is the cache's
// memory order. K/V that were written just before the call (a Hugging Face model's `repeat_kv` copy of a
// static cache, a dynamic cache's `torch.cat`) leave their last-written part in L2. Read front to back,
// the first reads miss and their lines evict the oldest lines still resident, which are the next ones to
// be read: nothing hits. Read back to front, the resident part is read first.
// Measured (docs/tuning_decode.md "Session 25", scripts/dev/l2_order_probe.py): the static cache's
// repeated-heads call right after its repeat 27 us against 35 front to back (SDPA 35); with L2 flushed
// between the repeat and the call it still gained (33 against 38 us), which the L2 alone does not
// explain. The bench's decode shapes (L2 flushed, cache written long before) moved less than 1%; the
// compiled Hugging Face step did not move.
#pragma once
#include <cstdint>

namespace ffpa::kernels {

struct DecodeBlock {
  int x, y, z;
};

// This block's coordinates in the grid read in reverse launch order.
__device__ __forceinline__ DecodeBlock decode_block() {
  return {static_cast<int>(gridDim.x - 1 - blockIdx.x), static_cast<int>(gridDim.y - 1 - blockIdx.y),
          static_cast<int>(gridDim.z - 1 - blockIdx.z)};
}

// Block t (blockIdx.x) of a one-dimensional grid read in reverse launch order.
__device__ __forceinline__ int decode_block_1d(int t) { return static_cast<int>(gridDim.x) - 1 - t; }

// Longest first (DecodeParams::longest_first): with per-sequence lengths, the sequence of the blocks
// launched `rank`-th (blockIdx.z of a grid with the batch in z; the 64-row kernel's one-dimensional
// grid has the batch slowest) is the one of that rank in decreasing length, ties by index (so the
// ranks are a permutation of the batch). The longest sequences' blocks then start first and the
// short ones fill the last wave's gaps: list scheduling's longest-first rule,
// where launch order leaves SMs idle while the last long blocks finish (compute-bound blocks, a
// simulation of B = 128 lengths in [S/2, S], two blocks a sequence, 132 SMs: 1.29x the ideal time in
// launch order, 1.04x longest first; launch/heuristics.h decode_longest_first says when). Every
// thread of the block calls it (three barriers, a branch the whole block takes alike); `scratch`:
// batch + 1 ints of shared memory, free again when it returns; batch at most
// kDecodeLongestFirstMaxBatch (constants.h). O(batch) per thread.
__device__ __forceinline__ int decode_longest_first_batch(const int* seqlens, int batch, int rank, int* scratch) {
  for (int b = threadIdx.x; b < batch; b += blockDim.x) scratch[b] = __ldg(seqlens + b);
  __syncthreads();
  for (int b = threadIdx.x; b < batch; b += blockDim.x) {
    const int len = scratch[b];
    int before = 0;  // sequences ranked ahead of b
#pragma unroll 4
    for (int j = 0; j < batch; ++j) {
      const int other = scratch[j];
      before += (other > len || (other == len && j < b)) ? 1 : 0;
    }
    if (before == rank) scratch[batch] = b;
  }
  __syncthreads();
  const int mine = scratch[batch];
  __syncthreads();  // every thread has read it: the caller may write scratch
  return mine;
}

// Balanced splits (DecodeParams::balanced_splits; the narrow MLA kernel with per-sequence lengths, its
// grid one wave): the batch x splits split blocks of a KV head are dealt to the sequences in proportion
// to their lengths instead of `splits` each, so every block walks about as many keys: within one wave
// nothing fills the SMs a short sequence's blocks leave, and the blocks left streaming at the end run no
// faster (two stages in flight an SM; docs/tuning_decode.md session 37). Sequence b takes the blocks
// [start_b, start_b+1): one each, and of extra = batch x (splits - 1) the share
//   start_b = b + floor(extra x W_b / W),  W_b the keys before b, W all (lengths clamped to the cache),
// in 64-bit integers (exact: every block derives the same starts). A block's partial goes to slot k, its
// index among the KV head's split blocks, so a sequence's partials are consecutive slots.
// Every thread of the block calls it (two barriers): writes start_b, b = 0 .. batch (start_batch = batch
// x splits) into scratch (batch + 1 ints, batch at most kDecodeLongestFirstMaxBatch); warp 0 scans.
__device__ __forceinline__ void decode_balanced_starts(const int* seqlens, int len_kv, int batch, int splits,
                                                       int* scratch) {
  __syncthreads();  // scratch may still be read by the caller's earlier use
  if (threadIdx.x < 32) {
    const int lane = static_cast<int>(threadIdx.x);
    const int64_t extra = static_cast<int64_t>(batch) * (splits - 1);
    int64_t total = 0;
    for (int b = lane; b < batch; b += 32) total += min(max(__ldg(seqlens + b), 0), len_kv);
#pragma unroll
    for (int o = 16; o > 0; o /= 2) total += __shfl_xor_sync(0xffffffffu, total, o);
    int64_t before = 0;  // keys of the sequences of earlier chunks
    for (int c = 0; c < batch; c += 32) {
      const int b = c + lane;
      const int64_t len = b < batch ? min(max(__ldg(seqlens + b), 0), len_kv) : 0;
      int64_t incl = len;
#pragma unroll
      for (int o = 1; o < 32; o *= 2) {
        const int64_t y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
      }
      // all empty: no weights, the last sequence takes the extras
      if (b < batch) scratch[b] = b + static_cast<int>(total > 0 ? extra * (before + incl - len) / total : 0);
      before += __shfl_sync(0xffffffffu, incl, 31);
    }
    if (lane == 0) scratch[batch] = batch * splits;
  }
  __syncthreads();
}

// Split block k (0 .. batch x splits - 1) under balanced splits: its sequence, its key range's index
// among the sequence's, and their count. Every thread calls it (three barriers); scratch as above, free
// again when it returns.
struct DecodeSplitOf {
  int batch, split, splits;
};
__device__ __forceinline__ DecodeSplitOf decode_balanced_split(const int* seqlens, int len_kv, int batch, int splits,
                                                               int k, int* scratch) {
  decode_balanced_starts(seqlens, len_kv, batch, splits, scratch);
  int lo = 0, hi = batch - 1;  // the last sequence whose first block is at or before k
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (scratch[mid] <= k) lo = mid;
    else hi = mid - 1;
  }
  const DecodeSplitOf out{lo, k - scratch[lo], scratch[lo + 1] - scratch[lo]};
  __syncthreads();  // every thread has read scratch
  return out;
}

}  // namespace ffpa::kernels
