// Runtime launch heuristics shared by the forward launchers: pipeline depth from the device's
// shared memory, the one-time dynamic shared-memory opt-in. Torch-free host code.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ffpa/constants.h"

namespace ffpa::launch {


// One attribute of the current device, read once per device; `fallback` where it cannot be read
// (0 is a value: the minor compute capability of 9.0 is one).
template <cudaDeviceAttr kAttr>
inline int device_attribute(int fallback) {
  static int cached[64] = {0};
  static bool known[64] = {false};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return fallback;
  if (!known[dev]) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, kAttr, dev) != cudaSuccess || v < 0) v = fallback;
    cached[dev] = v;
    known[dev] = true;
  }
  return cached[dev];
}

// Compute capability of the current device, major * 10 + minor (0 where it cannot be read).
inline int device_cc() {
  return device_attribute<cudaDevAttrComputeCapabilityMajor>(0) * 10 +
         device_attribute<cudaDevAttrComputeCapabilityMinor>(0);
}

// Shared memory of one SM, and the SM count, of the current device.
inline int smem_per_sm() { return device_attribute<cudaDevAttrMaxSharedMemoryPerMultiprocessor>(100 * 1024); }
inline int num_sms() { return device_attribute<cudaDevAttrMultiProcessorCount>(1); }

// Blocks of `kernel` one SM holds at once with `smem` dynamic shared memory (at least 1).
template <typename Kernel>
int resident_blocks_per_sm(Kernel kernel, int threads, int smem) {
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem) != cudaSuccess || n < 1) n = 1;
  return n;
}

// Registers and local (spill/stack) bytes per thread of a compiled kernel.
template <typename Kernel, typename Info>
cudaError_t query_kernel_attributes(Kernel kernel, Info* out) {
  cudaFuncAttributes attr;
  const cudaError_t err = cudaFuncGetAttributes(&attr, kernel);
  if (err != cudaSuccess) return err;
  out->registers = attr.numRegs;
  out->local_bytes = static_cast<int>(attr.localSizeBytes);
  return cudaSuccess;
}

// Shared memory a block may opt into on the current device.
inline int max_smem_optin() { return device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(48 * 1024); }

// Default cp.async depth: the tile's `preferred` depth where it has one and it fits the per-block
// limit; else the deepest of 3, 2 that lets `blocks_per_sm` blocks share an SM (the residency the
// tile was sized for; 1 KB per block is reserved by the driver) and fits the per-block limit,
// else 1. fixed_bytes is the stage-independent part.
inline int default_stages(int stage_bytes, int fixed_bytes, int blocks_per_sm = 1, int preferred = 0) {
  if (preferred > 0 && fixed_bytes + preferred * stage_bytes <= max_smem_optin()) return preferred;
  const int per_block = smem_per_sm() / blocks_per_sm - 1024;
  const int limit = per_block < max_smem_optin() ? per_block : max_smem_optin();
  for (int s = 3; s > 1; --s)
    if (fixed_bytes + s * stage_bytes <= limit) return s;
  return 1;
}

// Dynamic shared memory a launch of `kernel` may use on the current device: the opt-in limit
// less the kernel's static __shared__ variables (they count against the same limit).
template <typename Kernel>
int max_dynamic_smem(Kernel kernel) {
  cudaFuncAttributes attr{};
  const int limit = max_smem_optin();
  if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) return limit;
  return limit - static_cast<int>(attr.sharedSizeBytes);
}

// Raise a kernel's dynamic shared-memory limit once per device (not a stream operation, so it
// is also safe before CUDA-graph capture) to `bytes`, clamped to what the device allows.
// `done` is the caller's per-kernel flag array: the kernels share one function-pointer type, so
// the flags cannot live here.
template <typename Kernel>
cudaError_t opt_in_smem(Kernel kernel, int bytes, bool (&done)[64]) {
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (dev >= 0 && dev < 64 && done[dev]) return cudaSuccess;
  const int limit = max_dynamic_smem(kernel);
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes < limit ? bytes : limit);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it so it does not surface at the caller's next CUDA call
    return err;
  }
  if (dev >= 0 && dev < 64) done[dev] = true;
  return err;
}

// Split-KV decode: how many key ranges each sequence is cut into. `base_blocks` blocks run
// without splitting (batch x KV heads x row tiles); each split multiplies them and divides the
// key tiles one block walks. The kernel is memory-bound: a wave of n resident blocks moves bytes at
// the full rate once n reaches kDecodeSaturation of the slots (sms x blocks_per_sm), and
// proportionally slower below (measured on an H200 at B=8, S=32768, 32/8, D=128: a wave filled to
// 81% ran at 0.90x the copy ceiling, one filled to 97% at 0.96x, hence 1.0). So a wave costs max(n, saturation x slots) block-times, and
//   T(s) = (key_tiles / s + kDecodeBlockOverheadTiles) x sum over waves of max(n_wave, saturation x slots)
// is minimised over s = 1 .. min(key_tiles / 2, 256). Small batches with long contexts get one
// wave that fills the GPU; a batch that fills it alone stays at one split or a few (a last wave
// mostly empty costs as much as a saturated one). Sizes only: no device read, so a CUDA graph can
// capture the call.
//
// Per-sequence lengths (`varlen`: cache_seqlens with a batch above one) cut each sequence's own
// keys into s ranges, so a short sequence's blocks end early and their slots idle while the longest
// finish: T(s) gains kDecodeVarlenTail block-times of every slot (the host cannot read the lengths;
// fitted to lengths spread over up to 2x). More, shorter blocks shrink that tail. Same-run
// sweep on an H200 (bf16, B=8 S=32768 32/8 D=128, lengths in [S/2, S], x copy): 6 splits (one wave,
// the count without the term) 0.87x, 12 0.90x, 18 and 24 0.91x, 36 0.87x; the term picks 18. The
// contiguous cache of the same shape: 6 0.97x, 12 0.97x, 18 0.96x, 24 0.94x (docs/tuning_decode.md).
// Only the mma.sync split kernel takes it: the narrow MLA kernel ran slower with more splits there
// (B=16 S=16384 16/1 varlen: 8 splits 0.70x, 16 0.68x, 24 0.65x). And only where one split leaves
// the grid within one wave (base_blocks < slots): past a wave the blocks take their sequences longest
// first (kernels/decode_grid.cuh), which fills the tail itself, and the term's extra splits cost
// partials and a merge. Session 31, forced counts interleaved on an H200 (bf16, lengths in [S/2, S],
// scripts/dev/decode_splits_ab.py, us; the term's count / one split): B=64 S=8192 32/8 D = 128 367.9
// (2) / 358.0, D = 64 240.0 (2) / 227.1, D = 256 705.8 (2) / 695.8; within a wave the term still
// pays: B=32 S=8192 D = 256 364.8 (3) against 390.6, B=16 S=8192 D = 128 97.9 against 154.4.
//
// Short key ranges once every SM has a block run unsplit (kDecodeShortRangeTiles): there the kernel is
// bound by DRAM, not by blocks in flight, so splits moved no more bytes per microsecond and added the
// merge. Same-run sweep on an H200 (bf16, D = 128, L2 flushed, us per call, model's count -> one split):
// B=4 S=1056 32/32 33.0 -> 30.7, B=8 S=2048 32/32 80.7 -> 76.4, B=6 S=1500 32/32 54.3 -> 49.9, B=4
// S=2048 32/32 50.8 -> 50.5, B=16 S=2048 32/8 51.1 -> 50.0, B=32 S=1024 32/8 50.3 -> 45.6, B=24 S=1536
// 32/8 57.5 -> 51.4 (docs/tuning_decode.md, session 22). Longer ranges keep the model (B=8 S=32768: one
// block per SM streams at well under the copy rate), and so do calls with attn_mask (`masked`): their
// per-tile mask reads make a block latency-bound, and one split ran them 12-31% slower (B=4 S=1056 32/32
// with a key-padding mask: 50.1 us against 38-40 split).
constexpr int kMaxDecodeSplits = 256;
constexpr int kDecodeShortRangeTiles = 32;
constexpr double kDecodeBlockOverheadTiles = 2.0;  // Q load, pipeline fill, epilogue, the merge's share
constexpr double kDecodeSaturation = 1.0;
constexpr double kDecodeVarlenTail = 0.33;
inline double decode_time_model(int64_t base_blocks, int key_tiles, int64_t slots, int s, bool varlen = false) {
  const int64_t blocks = base_blocks * s;
  const int64_t full = blocks / slots, rest = blocks % slots;
  const double sat = kDecodeSaturation * static_cast<double>(slots);
  double cost = static_cast<double>(full * slots) + (rest > 0 ? (rest > sat ? static_cast<double>(rest) : sat) : 0.0);
  if (varlen && base_blocks < slots) cost += kDecodeVarlenTail * static_cast<double>(slots);
  return (static_cast<double>(key_tiles) / s + kDecodeBlockOverheadTiles) * cost;
}
//
// One block per SM (`one_per_sm_min`, the kernel's DecodeTileSpec::one_per_sm_min_splits; 0: off): where the
// model above would put two blocks on every SM, a grid of one block per SM (at least 90% of the SMs) streams
// as fast and writes half the partials. Session 38, one H100 (bf16, 32/8, scripts/dev/decode_splits_ab.py,
// us, one per SM / the model's count, two rounds): D = 64 (128-key tiles) B=1 S=131072 100.8, 102.1 / 104.9,
// 104.4 (16 / 33 splits), B=1 S=65536 55.9, 56.1 / 58.2, 58.5, B=2 S=65536 100.6, 102.3 / 102.5, 102.8 (8 / 16),
// B=4 S=32768 100.0, 100.2 / 102.3, 102.6 (4 / 8), B=1 with a length 97.8, 97.4 / 101.1, 101.1; D = 128 B=1
// S=131072 184.0, 183.6 / 186.7, 185.9 (16 / 33), but B=2 S=65536 182.8, 183.2 / 183.7, 183.5 (8 / 16), B=4
// S=32768 184.5, 184.4 / 181.8, 182.0 (4 / 8) and B=8 S=32768 356.7, 363.3 / 357.1, 357.1 (2 / 4). Hence from
// 4 splits at D = 64 and from 16 at D = 128 (the many splits' merge is what one block per SM saves there);
// not with per-sequence lengths (a batch's short sequences leave their SMs idle: more, shorter blocks
// balance), a mask (latency-bound blocks) or pages of a size that is not a power of two (`odd_pages`: each
// paged tile divides keys by the page size, and a second block an SM hides that). The same host, the rule in
// place (us, auto / the model's count): D = 128 B=1 183.5 / 185.2, with a length 176.8 / 178.4; D = 64 B=1
// 100.9 / 104.7, with a length 98.3 / 101.2, B=2 101.3 / 102.4, B=4 100.6 / 102.3. Paged caches took the
// model's count until session 40 gave a thread's load passes one table entry and address per page
// (kernels/decode_kv_loads.cuh): one H100, B=1 S=131072 32/8, a shuffled table, us, one per SM / the model's
// count, old loads in the same run: D = 64 pages of 64 103.0, 102.8 / 108.4, 108.9 (old 119.4 / 111.1), of 16
// 105.3 / 111.8, of 256 103.1 / 107.0, contiguous 100.6; D = 128 pages of 64 190.1, 190.0 / 188.5, 189.3 (old
// 204.0 / 190.8), of 16 190.0 / 192.6, of 256 188.1 / 187.9, contiguous 185.2; pages of 48 (D = 64, S=122880)
// 118.7 / 104.8.
inline int decode_one_per_sm_splits(int64_t base_blocks, int key_tiles, int sms, int one_per_sm_min, bool varlen,
                                    bool masked, bool odd_pages) {
  if (one_per_sm_min <= 0 || varlen || masked || odd_pages || base_blocks <= 0 || sms <= 0) return 0;
  const int64_t s = sms / base_blocks;
  if (s < one_per_sm_min || s > key_tiles / 2 || s > kMaxDecodeSplits || 10 * base_blocks * s < 9 * sms) return 0;
  return static_cast<int>(s);
}
// The device side of that rule: one block an SM streams as fast as two only where the SM's share of DRAM bandwidth
// is small enough for one block's ring to cover. Session 55, one H200 (peak 4814 GB/s by its attributes, 36.5 a SM;
// bf16 B=1 S=131072 32/8, scripts/dev/decode_splits_ab.py, us, 16 splits (one an SM) / 33 (the model's, two an SM)):
// D = 128 contiguous 135.6 / 130.6, pages of 64 157.7 / 133.4; D = 64 82.1 / 73.9, pages of 64 91.5 / 76.9. Sessions
// 38-40's H100 SXM (3352 GB/s by its spec's 2619 MHz x 5120 bits, not read there: 25.4 a SM) had one an SM 4-5% ahead
// at D = 64 and within 1% at D = 128 (above). The bound lies between the two; a device whose attributes cannot be
// read keeps the rule. Host attributes only, read once a device: no sync, CUDA-graph capture unaffected.
constexpr double kDecodeOnePerSmMaxGBpsPerSm = 30.0;
inline bool decode_one_per_sm_device(double dram_gbps, int sms) {
  return !(dram_gbps > 0.0) || sms <= 0 || dram_gbps / sms <= kDecodeOnePerSmMaxGBpsPerSm;
}
// Peak DRAM bandwidth of the current device in GB/s from its memory clock (kHz, double data rate) and bus width
// (bits); 0 where either cannot be read.
inline double dram_peak_gbps() {
  const int khz = device_attribute<cudaDevAttrMemoryClockRate>(0);
  const int bits = device_attribute<cudaDevAttrGlobalMemoryBusWidth>(0);
  return static_cast<double>(khz) * bits / 4e6;
}
inline int choose_decode_splits(int64_t base_blocks, int key_tiles, int blocks_per_sm, int sms, bool varlen = false,
                                bool masked = false, int one_per_sm_min = 0, bool odd_pages = false) {
  if (base_blocks <= 0 || key_tiles <= 2) return 1;
  if (blocks_per_sm > 1)
    if (const int s = decode_one_per_sm_splits(base_blocks, key_tiles, sms, one_per_sm_min, varlen, masked, odd_pages))
      return s;
  const int64_t slots = static_cast<int64_t>(sms > 0 ? sms : 1) * (blocks_per_sm > 0 ? blocks_per_sm : 1);
  if (!varlen && !masked && key_tiles <= kDecodeShortRangeTiles && 10 * base_blocks >= 9 * static_cast<int64_t>(sms) &&
      base_blocks <= slots)
    return 1;  // short ranges, a block for (nearly) every SM already, one wave
  int limit = key_tiles / 2;
  if (limit > kMaxDecodeSplits) limit = kMaxDecodeSplits;
  // A count must beat the best fewer splits by 2% (each split adds partials and merge work).
  int best = 1;
  for (int s = 2; s <= limit; ++s)
    if (decode_time_model(base_blocks, key_tiles, slots, s, varlen) <
        0.98 * decode_time_model(base_blocks, key_tiles, slots, best, varlen))
      best = s;
  return best;
}

// Decode on Hopper at FFPA head dims: the wgmma + TMA kernel (kernels/decode_sm90_ws.cuh, 64-row
// tiles) takes calls whose packed rows per KV head (group x Lq) reach this; fewer rows run the
// mma.sync kernel's 16-row tiles, which waste no MMA rows on padding. Same-run A/B on an H200 (bf16,
// x copy ceiling, contiguous / paged 64 / varlen): 32 rows favour wgmma (MLA B=32 S=8192 32/1:
// 0.49 / 0.47 / 0.41 against 0.41 / 0.40 / 0.32; D=512 64/8 Lq=4: 0.97 / 0.97 / 0.85 against 0.94 /
// 0.85 / 0.72), 16 rows and fewer mma.sync (MLA 16/1: 0.73 against 0.51; D=1024 32/8 Lq=2: 1.05
// against 0.94; D=512 64/8 Lq=1: 1.03 against 0.99).
constexpr int kDecodeWgmmaMinRows = 32;
// MLA's single cache (V = K[..., :Dv]) with at most this many packed rows per KV head runs the
// transposed narrow kernel (kernels/decode_sm90_narrow.cuh: 16 rows a block, the rows as the wgmma's
// N); with more, the MLA kernel (kernels/decode_sm90_mla.cuh: 64 rows a block, Q resident, V read from
// K's stages). Session 12 (H200, x copy, contiguous / paged 64 / varlen): 16 rows (B=16 S=16384 16/1)
// 0.76 / 0.75 / 0.68 against the mma.sync kernel's 0.71 / 0.70 / 0.61. Session 26, same-run A/B on an
// H200 (bf16, contiguous, us, scripts/dev/decode_variants.py): narrow / MLA kernel 93.6 / 95.0 at
// B=16 S=16384 16/1, 92.6 / 93.5 at B=64 S=4096 8/1, 113.3 / 95.8 at B=32 S=8192 32/1 (half the
// MLA kernel's tile is padding there, and it still reads each K byte once where the narrow kernel's
// two row blocks read it twice).
constexpr int kDecodeNarrowMaxRows = 16;

// The split-KV merge (kernels/decode_merge.cuh) gives each unit (packed row x 128 output columns) a
// warp from this many units up, and a whole 4-warp block below (its splits spread over the warps):
// few rows with many splits would otherwise leave the GPU idle (B=1 S=131072 32/8 D=128, 32 units
// of 49 splits: 8.1 us with a warp per unit).
constexpr int64_t kMergeWarpUnitsMin = 1024;

// The merge fused into the split kernel (kernels/decode_merge.cuh: the last split block of each row
// block merges it) or the second kernel above. Fused saves that kernel's launch and the drain and fill
// between the two kernels (the merge measured 3-4 us a call, session 13; the MLA 16/1 call lost ~9 us of
// ~93 to the merge and the gap before it, session 16), but one block then does its row block's whole
// merge: rows x Dv / 4 units over its threads, `units_at_once` a thread at a time, the splits read
// `batch` at a time, each round of loads a trip to L2 after the block's own work. Fused where that is at
// most kFusedMergeMaxRounds rounds per thread: D = 128 GQA (4 rows, up to 40 splits: one to five rounds), the
// repeated-heads static-cache step (one row): yes; MLA 16/1 (16 rows x 512 columns over 128 threads, two
// units at once: 8 rounds), a batch of one with 254 splits (one KV head: 32 rounds): no. Session 24's A/B on an
// H200 (scripts/dev/decode_merge_ab.py, docs/tuning_decode.md) set 2 rounds: fused 0-2% faster at D = 128 (11%
// on the masked static-cache step), even at D = 256 / 512, 6-9% slower on MLA 16/1 and 32/1. Session 28, with
// D = 128's 8-warp blocks (one unit a thread), same run on an H100 (us, merge kernel / fused): B=1 32/8 at
// S = 16384 / 32768 / 65536 / 131072 (33 splits: 5 rounds) 38.1 / 34.3, 59.6 / 56.0, 102.8 / 99.3, 189.4 /
// 185.8 (SDPA cuDNN 32.9, 54.6, 98.0, 184.2); B=1 S=131072 8/1 (254 splits, 32 rounds) 41.9 / 56.5; MLA 16/1
// (8 rounds) 113.0 / 122.9. Hence 5.
// kSpread: the narrow MLA kernel's split blocks of a row block each merge a slice of its columns once all
// stored theirs, launched cooperatively (every block resident, else the plain launch and the merge
// kernel); auto picks it where that kernel's grid is one wave of a few splits (decode_spread_merge
// below). Session 36, one H100, modes interleaved (us, merge kernel / spread / fused): MLA B=16 S=16384
// 16/1 114.3 / 111.0 / 126.1, per-sequence lengths 96.4 / 94.2 / 106.2.
enum class DecodeMerge : int { kAuto = 0, kFused = 1, kKernel = 2, kSpread = 3 };
constexpr int kFusedMergeMaxRounds = 5;
// A split count (asked by the caller, or the auto one) within a kernel's key tiles: at least one split,
// at most one per tile (an empty range merges as zeros, but more splits than tiles only add blocks).
inline int clamp_decode_splits(int splits, int key_tiles) {
  const int most = key_tiles > 1 ? key_tiles : 1;
  return splits < 1 ? 1 : splits > most ? most : splits;
}

// Longest first (kernels/decode_grid.cuh decode_longest_first_batch): with per-sequence lengths the
// split kernels' blocks (the batch their grid's slowest index) take their sequences in decreasing
// length, so the last wave's gaps fill with short sequences instead of the SMs idling behind the last
// long ones (same-run A/Bs: docs/tuning_decode.md, session 27). Auto:
// only where the blocks exceed one wave (within one all start together) and the batch is small enough
// for each block to rank the lengths itself (O(batch) per thread, before its first load).
// kLongest forces it wherever it can run (per-sequence lengths, that batch), kLaunch never (the
// process-wide setting: tests and the A/B). kBalanced: balanced splits (decode_balanced_splits below).
enum class DecodeOrder : int { kAuto = 0, kLaunch = 1, kLongest = 2, kBalanced = 3 };
inline bool decode_longest_first(bool varlen, int batch, int64_t blocks, int64_t slots, DecodeOrder mode) {
  if (mode == DecodeOrder::kLaunch || !varlen || batch <= 1 || batch > kDecodeLongestFirstMaxBatch) return false;
  return mode == DecodeOrder::kLongest || blocks > slots;
}

// The spread merge (kSpread above) for a kernel with one block per SM: more than one split, every block
// resident at once (blocks <= SMs: the blocks of a row block wait for each other), not forced off; in
// auto at most kSpreadMergeMaxSplits splits: every block reads all the splits' LSEs of its rows and
// waits for the slowest split, which outweighs the saved kernel as the count grows. Session 37, one H100,
// MLA 576/512 bf16, modes interleaved (us, merge kernel / spread): B=16 S=16384 16/1 (8 splits) 113.3 /
// 111.0, per-sequence lengths 96.0 / 93.9; B=8 S=8192 4/1 (16) 38.6 / 38.0, 33.7 / 33.4; B=4 S=65536 16/1
// (33) 114.2 / 115.6, 97.5 / 98.2; B=1 S=65536 16/1 (132) 41.7 / 53.2, 38.3 / 50.3.
constexpr int kSpreadMergeMaxSplits = 16;
inline bool decode_spread_merge(int splits, int64_t blocks, int64_t sms, DecodeMerge mode) {
  if (splits <= 1 || blocks > sms) return false;
  return mode == DecodeMerge::kSpread || (mode == DecodeMerge::kAuto && splits <= kSpreadMergeMaxSplits);
}

// Balanced splits (kernels/decode_grid.cuh decode_balanced_starts) for the narrow MLA kernel under the
// spread merge (one wave: longest first has nothing to reorder there): with per-sequence lengths, 2..256
// sequences and at least kBalancedMinSplits splits a sequence (the shares are whole blocks: with two a
// sequence, rounding left some sequences one block with twice the keys, session 28's B=64 S=4096 8/1 16%
// slower); kBalanced drops the split bound, kLaunch / kLongest turn it off. Session 38, one H100, two
// rounds (scripts/dev/decode_varlen_probe.py, bf16 B=16 S=16384 16/1, 8 splits, x copy ceiling, launch
// order / balanced): lengths drawn in [S/2, S] 0.813 / 0.826, 0.806 / 0.819; every length 3S/4 0.851 /
// 0.842, 0.845 / 0.835 (the shares' arithmetic before the first load; nothing to balance there).
constexpr int kBalancedMinSplits = 4;
inline bool decode_balanced_splits(bool varlen, int batch, int splits, DecodeOrder mode) {
  if (!varlen || batch <= 1 || batch > kDecodeLongestFirstMaxBatch || splits <= 1) return false;
  if (mode == DecodeOrder::kLaunch || mode == DecodeOrder::kLongest) return false;
  return mode == DecodeOrder::kBalanced || splits >= kBalancedMinSplits;
}

inline bool decode_fused_merge(int rows, int head_dim_v, int splits, int threads, int batch, int units_at_once,
                               DecodeMerge mode) {
  if (splits <= 1 || mode == DecodeMerge::kKernel || mode == DecodeMerge::kSpread) return false;
  if (mode == DecodeMerge::kFused) return true;
  const int64_t units = static_cast<int64_t>(rows) * (head_dim_v / 4);
  const int64_t per_round = static_cast<int64_t>(threads) * units_at_once;
  const int64_t rounds = (units + per_round - 1) / per_round * ((splits + batch - 1) / batch);
  return rounds <= kFusedMergeMaxRounds;
}

// The warp-specialised FA-2 kernel's causal walk (kernels/fa2_fwd_sm90_ws.cuh, Fa2FwdWs::Walk): pairs of
// query blocks weigh the same, so with the work counter the walk's last round is one pair coarse (B=8 H=16
// N=2048 D=64, 192-row items: 704 pairs' work over 132 SMs, 5.33 rounds: the SMs idle 11% of 6). So the last
// (batch, head)s go as single items, longest first across them, and the walk ends on short items: enough of
// them for `waves` pairs' work an SM (tail x M (M + 1) / 2 tiles >= waves x SMs x (M + 1)). A list-scheduling
// model of the walk (items of m + 1 tiles plus half a tile each, 132 SMs): pairs 0.89 / 0.87 of ideal at D = 64
// (B=8 N=2048 / B=1 H=32 N=8192), 0.97 at D = 128 and 256 (7.76 rounds); a tail of one wave 0.98-0.99.
// Sessions 38-51 dealt the tail shortest first (a bug in Walk::t) and kept it off below 6% idle, where it
// measured slower. Session 52, one H100, the order fixed (scripts/dev/fa2_tail_rule_ab.patch, fa2_ws_variants.py,
// bf16 causal TFLOPS, two interleaved rounds, the old rule / a tail of one wave / of two / none):
// D = 128 B=8 H=16 N=2048 482.5, 482.1 / 495.7, 495.6 / 495.2, 495.7 / 483.0, 482.9; B=1 H=32 N=8192 622 / 636-637
// / 638 / 619-622; B=16 H=16 N=1024 412 / 421 / 413-415 / 411; D = 256 B=8 N=2048 521-523 / 533-535 / 526-532 /
// 523; B=1 H=32 N=8192 688-694 / 707-711 / 710-712 / 684-690; B=16 N=1024 445 / 444 / 420-422 / 444. D = 64
// (s51_tail_order.sh, the old order / longest first, both with the tail): B=8 N=2048 400 / 419-421, B=1 H=32
// N=8192 523-534 / 558-563. Hence a tail of one wave wherever the pairs take more than one round.
constexpr double kFa2CausalTailWaves = 1.0;
inline int fa2_causal_tail_bh(int64_t bh, int m_blocks, int sms, double waves = kFa2CausalTailWaves) {
  if (m_blocks < 3 || waves <= 0.0 || sms <= 0 || bh <= 0) return 0;
  // Rounds of pairs (M + 1 tiles each) the walk's work makes per SM: under one, every slot has its SM.
  const double rounds = static_cast<double>(bh) * m_blocks / (2.0 * sms);
  if (rounds <= 1.0) return 0;
  const int64_t t = static_cast<int64_t>(2.0 * waves * sms / m_blocks + 0.999999);
  return static_cast<int>(t < bh ? t : bh);
}

// FA-2 on Hopper, calls without a mask at D <= 96: the masked tile (two consumers x 64 rows, 128 keys) in place
// of the table's (D = 64: three consumers x 64 rows on 128 keys; D = 96: two on 176 keys) where it computes
// enough less: short sequences, whose last query block or key tile the wider tile pads more (ViT's N = 197
// computes 2 x 192 rows on the table's tile, 2 x 128 on the narrow one), and causal diagonals. The work:
// query-block rows x the key tiles each block reaches (causal: its last row, the kernels' block_kv_tiles),
// padding included. The narrow tile runs that work at kFa2NarrowPace of the table's pace (D = 64: two
// consumers against three; D = 96: 128-key tiles against 176), where the walk has work for 2+ rounds of
// its slots (items; causal: pairs) an SM; under that the narrow tile's shorter, more numerous items fill
// the SMs better and the paces count as equal. Refitted to 58 cells on one H100 in session 46
// (scripts/dev/fa2_narrow_retune.sh: fa2_ws_variants.py, bf16, TFLOPS, table / narrow, two interleaved pairs;
// first fitted in session 41): D = 64 B=128 H=12 N=197 142.8 / 155.1 (SDPA cuDNN 170.6), B=64 H=16 N=256
// 241.1 / 274.2, N=577 296.9 / 278.2, B=8 N=2048 463.5 / 389.8, causal B=16 N=1024 270.3 / 276.9, B=32 H=12
// N=1370 318.7 / 300.1; D = 96 N=197 159.6 / 202.1, B=1 H=32 N=8192 540.0 / 512.4, B=4 H=32 N=4096 514.9 /
// 500.9. Each consumer's own end (session 45: the table's tile at D = 64 ends a consumer early on causal
// diagonals) moved causal D = 64 towards the table (B=32 N=1370: narrow under session 41's 0.82), and D = 96's
// mid-length non-causal cells favour the table as session 44's re-measure had read. The paces that pick
// the faster tile: 0.76-0.80 at D = 64 (every cell), 0.96 at D = 96 (all but B=32 H=16 N=512 non-causal,
// 351.1 / 358.6, whose padding ratio equals B=4 H=32 N=4096's; tests/test_fa2_schedule.py holds them).
constexpr double kFa2NarrowPace64 = 0.78;
constexpr double kFa2NarrowPace96 = 0.96;
constexpr double kFa2NarrowMinRounds = 2.0;
inline double fa2_tile_work(int len_q, int len_kv, bool causal, int causal_offset, int block_m, int block_n) {
  const auto tiles = [block_n](int64_t keys) { return static_cast<double>((keys + block_n - 1) / block_n * block_n); };
  if (!causal) return static_cast<double>((static_cast<int64_t>(len_q) + block_m - 1) / block_m * block_m) * tiles(len_kv);
  double work = 0.0;
  for (int64_t m0 = 0; m0 < len_q; m0 += block_m) {
    const int64_t last = std::min<int64_t>(m0 + block_m, len_q) - 1;
    work += static_cast<double>(block_m) * tiles(std::clamp<int64_t>(last + causal_offset + 1, 0, len_kv));
  }
  return work;
}
// table_m x table_n: the table's tile; narrow_m x narrow_n: the masked tile (the launcher's traits).
inline bool fa2_narrow_tile(int head_dim, int64_t bh, int len_q, int len_kv, bool causal, int causal_offset, int sms,
                            int table_m, int table_n, int narrow_m, int narrow_n) {
  if (head_dim > 96 || bh <= 0 || len_q <= 0 || len_kv <= 0 || sms <= 0) return false;
  const int64_t table_blocks = (len_q + table_m - 1) / table_m;
  const double rounds = static_cast<double>(bh) * (causal ? (table_blocks + 1) / 2 : table_blocks) / sms;
  const double pace = rounds < kFa2NarrowMinRounds ? 1.0 : head_dim <= 64 ? kFa2NarrowPace64 : kFa2NarrowPace96;
  return fa2_tile_work(len_q, len_kv, causal, causal_offset, narrow_m, narrow_n) <
         pace * fa2_tile_work(len_q, len_kv, causal, causal_offset, table_m, table_n);
}

// FA-2 on Hopper, calls without a mask at D <= kFa2ShortMaxDim that fa2_narrow_tile gives
// the 128 x 128 tile: whether the short-keys tile (128 rows, one key tile of `short_n` keys per item,
// fa2_tile_sm90_short) runs them instead. It does where every key fits its one tile and the 128-key tiles would take
// two (129..short_n keys), without causal masking. One H200, bf16, TFLOPS 128 x 128 tile / short tile, same run
// (session 54, scripts/dev/fa2_short_tile_ab.patch; both masking ragged keys as mask_cut does): D = 64 B=128 H=12
// N=197 169 / 184 (SDPA cuDNN 171), B=32 H=16 N=208 153 / 171; causal N=197 89 / 78 (a causal call's first query block
// sees 128 keys or fewer: one narrow tile, which the short tile pads to short_n). Where fa2_narrow_tile keeps the
// table's 192-row tile (one query block an item: B=256 H=16 N=150, 157 against the short tile's 120) the table's
// runs.
constexpr int kFa2ShortMaxDim = 64;  // (the launcher compiles the short-keys tile up to it)
inline bool fa2_short_tile(int head_dim, int len_kv, bool causal, int short_n) {
  return head_dim > 0 && head_dim <= kFa2ShortMaxDim && !causal && len_kv > 128 && len_kv <= short_n;
}

// FA-2 on Hopper, calls without a mask: whether the warp-specialised kernel issues each consumer's next
// item's first S before this item's epilogue (Fa2FwdWs kAhead), so the O stores run under that S. One
// H100, bf16, TFLOPS today's / look-ahead, same run (session 42, scripts/dev/fa2_ws_variants.py): D = 96
// +2..5% from 512 keys (B=32 H=16 N=512 350 / 367, causal 230 / 236; B=4 N=4096 492 / 506, causal 451 /
// 468); D = 64 +1..5% from 1024 keys (B=16 N=1024 373 / 378; B=8 N=2048 441 / 453, causal 336 / 345; B=1
// H=32 N=8192 475 / 490, causal 430 / 452), -1..3% at 512, -5% at 256 (64x16x256 259 / 247); D = 32 -8% at
// 256, +0..3% at 2048; D = 128 -1..4% at every length (its deferred P V wait, kDefer, already overlaps
// there), D = 256 +-2%. The look-ahead kernel is compiled at D <= kFa2LookAheadMaxDim only.
constexpr int kFa2LookAheadMaxDim = 96;
constexpr int kFa2LookAheadMinKeys64 = 1024;  // D <= 64
constexpr int kFa2LookAheadMinKeys96 = 512;   // 64 < D <= 96
inline bool fa2_ws_look_ahead(int head_dim, int len_kv) {
  if (head_dim <= 0 || head_dim > kFa2LookAheadMaxDim) return false;
  return len_kv >= (head_dim <= 64 ? kFa2LookAheadMinKeys64 : kFa2LookAheadMinKeys96);
}

// FA-2 on Hopper, the deferred-wait kernel (D = 97..128): whether P goes to two register buffers in turn, each
// tile packing its P right after its softmax (Fa2FwdWs kPfPair). One H100, bf16, D = 128, TFLOPS one buffer /
// two, same run (session 48, scripts/dev/fa2_patch_ab.sh fa2_pf_pair.patch): B=8 H=16 N=2048 590.6 / 605.1
// (causal 526 / 539), B=1 H=32 N=8192 634 / 658 (causal 593 / 619), B=16 N=1024 536 / 543 (causal 407 / 411);
// B=32 N=512 462 / 459 (causal 310 / 305), B=64 N=256 347 / 333, B=128 H=12 N=197 242 / 238 (causal 132 / 127).
// The split tail's twin (4096+ keys) always takes the pair.
constexpr int kFa2PfPairMinKeys = 1024;
inline bool fa2_ws_pf_pair(int len_kv) { return len_kv >= kFa2PfPairMinKeys; }

// FA-2 on Hopper, the look-ahead and P pair kernels: whether they run with the standing max (Fa2FwdWs kStandingMaxOn,
// attn/standing_max.cuh: no tile row max once a warp's rows have theirs). It pays on long rows and costs on short
// ones, so it goes by the keys an item sees (causal: half of them on average). One H100, bf16, TFLOPS without /
// with, same run (session 50, fa2_patch_ab.sh with the since-removed fa2_standing_max_ab.patch): B=8 H=16 N=2048
// D=64 454 / 485 (causal 368 / 381), D=96 480 / 504 (causal 408 / 415), D=128 636 / 659 (causal 484 / 493); B=1
// H=32 N=8192 D=64 498 / 547, D=96 531 / 599, D=128 683 / 711; B=16 N=1024 D=64 395 / 410 (causal 292 / 288),
// D=96 419 / 413 (causal 328 / 318), D=128 542 / 550 (causal 400 / 392); B=32 N=512 D=96 358 / 322 (causal
// 241 / 223). The split twins (4096+ keys) always take it.
constexpr int kFa2StandingMaxMinKeys = 1024;    // keys an item sees (causal: len_kv / 2)
constexpr int kFa2StandingMaxMinKeys96 = 2048;  // 64 < D <= 96: len_kv
inline bool fa2_ws_standing_max(int head_dim, int len_kv, bool causal) {
  if (head_dim > 64 && head_dim <= 96 && len_kv < kFa2StandingMaxMinKeys96) return false;
  return (causal ? len_kv / 2 : len_kv) >= kFa2StandingMaxMinKeys;
}

// FA-2 on Hopper: the warp-specialised kernel stores O through shared memory by TMA (Fa2FwdWs kTmaStore:
// stmatrix into a 128-byte-swizzled buffer per consumer, one bulk tensor store a 64-column chunk) at
// D <= kFa2TmaStoreMaxDim, on the tiles where two K/V stages fit beside the buffer (compile-time: the
// launcher's only kernel there). Why: SDPA cuDNN stores O by TMA and ran 12-15% fewer cycles on short
// sequences at D = 64 (ncu, session 42). One H100, bf16, TFLOPS register store / TMA store, same run
// (session 43, scripts/dev/fa2_ws_variants.py, A/A of the same kernel within 1%): D = 64 (both tiles keep
// 4 stages) B=128 H=12 N=197 153 / 156, causal 83 / 89; B=64 H=16 N=256 254 / 262, causal 129 / 134;
// B=32 N=512 323 / 343, causal 201 / 206; N=2048 and 8192 +0..1%. D = 96 on the 128 x 128 tile (short
// calls, fa2_narrow_tile; 3 stages -> 2) N=197 196 / 206, causal 101 / 113, N=256 294 / 313, causal 153 /
// 161; its 176-key table tile has no room for the buffer (registers store there). D = 128 (3 stages -> 2)
// mixed: N=197 228 / 215, causal 114 / 126; N=256 328 / 340, causal 169 / 166; N=512 +-1%: not taken.
constexpr int kFa2TmaStoreMaxDim = 96;

// FA-2 on Hopper: the warp-specialised kernel with two Q slots (Fa2FwdWs kQSlots = 2, an item word each: the
// producer loads the next item's Q into the other slot while this item runs; with one, only once both
// consumers have done this item's last S) at D <= kFa2TwoQSlotsMaxDim, on the tiles where the second slot
// costs no K/V stage (compile-time). Why: ncu at B=64 H=16 N=256 D=64 (session 43) showed cuDNN's
// instruction count with 14% more cycles, the gap in fixed-latency and long-scoreboard stalls; such short
// items (2 key tiles) wait on their Q. One H100, bf16, TFLOPS one slot / two (session 44,
// scripts/dev/fa2_q_slots.sh, variants 0,1,0,1: the A/A within 1%): D = 64 B=128 H=12 N=197 154.5 / 160.3,
// causal 87.0 / 88.8; B=64 H=16 N=256 262.0 / 271.5, causal 135.4 / 141.6; B=32 N=512 342.3 / 350.7,
// causal 211.1 / 220.5; B=8 N=2048 and B=1 H=32 N=8192 within 0.5%. D = 96 (its 128 x 128 tile; the
// 176-key tile has no room) within 1% everywhere: not taken.
constexpr int kFa2TwoQSlotsMaxDim = 64;

// FA-2 on Hopper, calls without causal masking or a mask: the warp-specialised walk's items are equal, so
// T items on G SMs end on a last round of T mod G (B=1 H=32 N=8192 at D = 128: 2048 items, 15.5 rounds on
// 132 SMs; ncu: SM active cycles 3.3% under elapsed). Where len_kv >= kFa2SplitTailMinKeys and T mod G > 0,
// the walk's last G + T mod G items run as G equal shares of their key tiles (kernels/fa2_ws_split.cuh,
// stream-K style; Fa2SplitPlan: from the walk's slot T - G - T mod G, G shares). One H100, bf16, TFLOPS
// items / shares, two interleaved pairs each (session 44, scripts/dev/fa2_split_tail.sh): D = 64 / 128 / 256
// B=1 H=32 N=8192 +3.5 / +2.1 / +3.9%, B=2 N=6144 +2.3 / +1.7 / +2.2%, B=4 H=32 N=4096 +1.9 / -0.2 / +2.3%,
// B=1 H=16 N=16384 +4.2 / +3.2 / +3.8%; at 3072 keys and under +-1%, at B=64 N=256 -5% (a piece's extra
// start, partial write and merge weigh against short items; docs/hopper_profile.md session 44).
constexpr int kFa2SplitTailMinKeys = 4096;
constexpr int kFa2SplitTailMaxTiles = 1 << 15;  // (a piece's key range is two tile indices in one word)
constexpr int kFa2SplitTailMaxShares = 4096;    // (the kernel indexes its partials in ints)
struct Fa2SplitPlan {
  int64_t from = 0;  // the walk's first share slot
  int shares = 0;    // 0: items throughout
};
inline Fa2SplitPlan fa2_split_tail(int64_t items, int sms, int len_kv, int block_n, bool causal, bool masked) {
  if (causal || masked || sms <= 0 || sms > kFa2SplitTailMaxShares || block_n <= 0 || len_kv < kFa2SplitTailMinKeys)
    return {};
  const int64_t tiles = (static_cast<int64_t>(len_kv) + block_n - 1) / block_n;
  const int64_t rounds = items / sms, rest = items % sms;
  if (tiles < 2 || tiles >= kFa2SplitTailMaxTiles || rounds < 1 || rest == 0) return {};
  return {(rounds - 1) * sms, sms};
}

// FFPA L1 on Hopper (launch/ffpa_fwd_ws_launch.cuh, up to Dv = 640): whether query blocks 2 q + 1, 2 q
// run as a cluster pair whose K slices are loaded once for both (traits/ffpa_traits.h, kShareK). Causal
// calls only: their blocks do not run in step (items of every length), and lone causal blocks spent
// 4.44 us per 128-key tile at D = 512 against non-causal blocks' 4.06 (globaltimer stamps of every block,
// H100, B=1 H=32 N=8192: scripts/dev/ffpa_spans.sh), no faster with idle gaps for the clocks to rise in.
// Same host, four builds in turn twice (a switch in the working tree, not kept; bf16 D = 512, TFLOPS back to back /
// with 20 ms gaps): lone 491-494 / 524-527 non-causal, 452-453 / 453-458 causal; K shared 479-481 /
// 504-507, 475-476 / 494-499; V shared 466 / 490, 468-469 / 486-488; both 456-458 / 479, 451-454 / 472.
// So causal calls share K and non-causal ones (in step already: sharing only coupled them) run lone.
// The bench in turn twice on one H100 (ffpa_auto, bf16, TFLOPS, lone -> shared, causal): B=1 H=32 N=8192
// (128 query blocks) D = 448 459-461 -> 486-491, 512 461-463 -> 490-491, 640 440-443 -> 447-448, 576/512
// 448-455 -> 483-488, non-causal unchanged; B=4 H=16 N=2048 (32 query blocks) 448 380 -> 370-379, 512
// 391-393 -> 395-402, 640 373-376 -> 362-370: no gain there, so only from kShareKMinBlocks query blocks;
// at 64 (N = 4096) it gains already: B=1 H=32 448 415 -> 446, 512 407-411 -> 452, B=2 424-431 / 459-461
// against 409-410, and B=1 H=16 N=16384 448 466 -> 484, 512 463-465 -> 494-496 (lone -> shared, same run).
// An odd count gives the last pair a block past L, which walks the longest key range for nothing
// (about 2 / m_blocks of the work: under 3% from 64 blocks).
constexpr int kShareKMinBlocks = 64;
inline bool ffpa_ws_share_k(bool causal, int m_blocks) { return causal && m_blocks >= kShareKMinBlocks; }

// FP8 at D = 512 (launch/ffpa_fp8_launch.cuh: the same pipeline on e4m3, half the bytes a tile and twice the
// MMA rate, so twice the K/V bytes per second at the same pace): the pairs causal or not, from
// kShareKMinBlocksFp8 query blocks. Session 39, one H100, a switch in the working tree (scripts/dev/fp8_probe.py,
// TFLOPS, lone -> shared, non-causal / causal): B=4 H=8 N=8448 664-667 -> 877-881 / (shared already), B=1 H=32
// N=8192 660-669 -> 811-857, B=1 H=8 N=16384 650 -> 889, B=2 H=16 N=4096 (64 query blocks) 647 -> 779 / 561 ->
// 690, B=4 H=16 N=2048 (32) 643 -> 682 / 502 -> 586; the FP8 GPU tests passed with pairs at every size. On an
// H200 lone blocks had read ~800 non-causal and the pairs 3-4% less (sessions 29-30: B=4 H=8 N=8448 791 / 761-771,
// B=1 H=32 N=8192 747-760 / 697-741; causal from 128 blocks +8-10%, at 64 611-613 -> 603 in one run and 633-634 ->
// 651-659 in another): the H100's lone blocks run 20% below the H200's and the pairs take that back, while
// the H200 gives up 3-4%; one rule for both (the bars hold on either host).
constexpr int kShareKMinBlocksFp8 = 32;
inline bool ffpa_ws_share_k_fp8(int m_blocks) { return m_blocks >= kShareKMinBlocksFp8; }

// The FA-2-style FP8 kernel's grid (kernels/fa2_fwd_sm90_fp8.cuh walks items b, b + grid, ..): one block an SM
// where every item sees the same keys (no causal mask, no attn_mask), so a block's next Q and first tiles load
// under its last P V and epilogue; one block an item otherwise (causal calls: fp8_causal_walk below decides). Session 51, one H100 (scripts/dev/s51_fp8_persist.sh: fp8_probe.py, TFLOPS, one block an
// SM / one an item, two interleaved pairs): B=4 H=8 N=8448 D = 64 666, 667 / 658, 658; D = 128 996, 994 / 982,
// 984; D = 256 1269, 1266 / 1242, 1232; B=1 H=32 N=8192 652, 653 / 645, 645; 906, 907 / 894, 895; 1190 / 1168, 1169.
inline int64_t fp8_persistent_grid(bool causal, bool masked, int64_t items, int sms) {
  return causal || masked || sms <= 0 ? items : std::min<int64_t>(items, sms);
}
// Causal FP8 calls without an attn_mask: walk the bf16 kernel's query-block pairs (M - 1 - q, q: Fa2WsItems::Walk) on
// one block an SM, or run one block an item with single items dealt longest first (the tail covering every head).
// Session 52, one H100 (scripts/dev/s52_fp8_causal_walk.sh, fp8_probe.py, TFLOPS, pairs / singles, two interleaved
// runs, pre-pass V^T): D = 256 pairs win everywhere (B=4 H=8 N=8448 1233 / 1119, B=1 H=32 N=8192 1169, 1073 / 1102,
// 1032, B=8 H=16 N=2048 717 / 478); D = 128 at B=8 H=16 N=2048 530 / 501; D = 64 there a tie (325 / 324); at long
// keys D = 64 / 128 singles win (B=4 H=8 N=8448 537 / 577, 821 / 880; B=1 H=32 N=8192 517 / 568, 813 / 886).
constexpr int64_t kFp8CausalWalkMaxKeys = 2048;
inline bool fp8_causal_walk(bool masked, int head_dim, int64_t len_kv) {
  return !masked && (head_dim >= 256 || len_kv <= kFp8CausalWalkMaxKeys);
}
// The query blocks a K-sharing launch covers: whole pairs (an odd count's last pair has a block past L,
// which walks its partner's tiles and stores nothing). The bf16 / fp16 and FP8 launchers size by it.
inline int64_t ffpa_ws_share_k_blocks(int m_blocks) { return static_cast<int64_t>(m_blocks) + m_blocks % 2; }

}  // namespace ffpa::launch
