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

}  // namespace ffpa::kernels
