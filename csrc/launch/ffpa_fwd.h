// Host entry points of the forward kernels, torch-free: what csrc/ops calls. Every function
// reports failure as a cudaError_t; nothing here throws or knows about tensors.
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

#include "ffpa/traits/ffpa_traits.h"
#include "ffpa/params.h"
#include "launch/heuristics.h"

namespace ffpa::launch {

// Codes of ffpa_attn/_spec.py DTYPES (static_asserts in the generated registry).
enum class DType : int { kFloat16 = 0, kBFloat16 = 1, kE4M3 = 2 };  // kE4M3: the FP8 family's inputs

// The op a kernel serves.
enum class Op : int { kFwd = 0, kDecode = 1 };

// Kernel families: FFPA (large head dims, fine-grained head-dim slices; has levels), FA-2
// (head dims <= 256, 320 and 384, whole head dim per tile) and split-KV decode (the decode op).
enum class Family : int { kFfpa = 0, kFa2 = 1, kDecode = 2, kFp8 = 3 };

// The FA-2 family's two kernels (Fa2Launcher's kMma): mma.sync (every arch) and the warpgroup MMA
// (wgmma; sm_90a code, compute capability 9.0). As a preference passed to the chooser: kAuto takes
// the registry's choice (wgmma where it runs), kSync rules the arch-specific FA-2 entries out,
// kWgmma is kAuto (the wgmma kernel cannot run elsewhere). The ops layer passes the process-wide
// setting below (tests and benchmarks compare the two kernels on one Hopper GPU).
enum class Fa2Mma : int { kAuto = 0, kSync = 1, kWgmma = 2 };
void set_fa2_mma(Fa2Mma mode);
Fa2Mma fa2_mma();

// The split-KV merge, process-wide (launch/heuristics.h DecodeMerge): kAuto lets the decode
// launchers choose per call, kFused / kKernel force one form where the kernel has it (tests and
// benchmarks compare the two).
void set_decode_merge(DecodeMerge mode);
DecodeMerge decode_merge();

// The order split-KV decode blocks take their sequences, process-wide (launch/heuristics.h
// DecodeOrder): kAuto lets the launchers choose per call, kLaunch / kLongest / kBalanced force one.
void set_decode_order(DecodeOrder mode);
DecodeOrder decode_order();

// Where the FA-2-style FP8 kernel gets V^T, process-wide: kAuto lets its launcher choose per head dim
// (the pre-pass today: the in-kernel transpose measured slower), kKernel / kPrepass force one form where
// the head dim has it (kKernel: D = 64, 128; tests and benchmarks compare the two).
enum class Fp8VTranspose : int { kAuto = 0, kKernel = 1, kPrepass = 2 };
void set_fp8_v_transpose(Fp8VTranspose mode);
Fp8VTranspose fp8_v_transpose();

// How one launch is cut, as the kernel will see it; registers/local memory filled on request.
struct KernelInfo {
  Family family = Family::kFfpa;
  int level = 0;            // FFPA level; 0 for FA-2
  bool wgmma = false;       // FA-2 on the warpgroup MMA (fa2_fwd_sm90.cuh), else mma.sync
  AccMode acc = AccMode::kF32;
  int head_dim = 0;
  int head_dim_v = 0;
  int block_m = 0;
  int block_n = 0;
  int mask_block_m = 0;     // the tile calls with attn_mask run (and their block map's): FA-2 on
  int mask_block_n = 0;     // Hopper aligns it to mask blocks; 0: block_m x block_n
  int warps_m = 0;
  int warps_n = 0;
  int producer_warps = 0;   // warps that only load (the warp-specialised Hopper FA-2 kernel: 4)
  int chunk_d = 0;          // head-dim slice per pipeline step (the whole head dim for FA-2)
  bool smem_padded = false; // staged tiles use padded rows (else the XOR swizzle)
  int group_d = 0;          // Dv columns one block produces (FFPA L2: a group; else all of Dv)
  int threads = 0;
  int num_stages = 0;
  int smem_bytes = 0;       // dynamic shared memory per block
  bool o_tma_store = false;       // the warp-specialised FA-2 kernel stores O through shared memory by TMA
  bool mask_o_tma_store = false;  // .. on the tile of attn_mask calls (and of short ones: fa2_narrow_tile)
  int q_slots = 0;                // .. its Q slots (the next item's Q loads into the other); 0: no such kernel
  int mask_q_slots = 0;           // .. on the tile of attn_mask calls
  bool own_end = false;       // .. each consumer warpgroup computes only the key tiles its rows see (causal
  bool mask_own_end = false;  //    diagonals, rows past len_q; Fa2FwdWs kOwnEnd); .. on the attn_mask calls' tile
  int short_block_n = 0;      // FA-2 on Hopper: the key tile of short calls (one an item, fa2_short_tile); 0: none
  bool work_counter = false;  // run() balances its persistent grid on a zeroed params.work_counter
  bool fp8_vt_prepass = false;  // FP8: run() writes V^T into params.vt (the caller sizes it), else the kernel transposes V
  int registers = -1;       // per thread (cudaFuncGetAttributes); -1 if not queried
  int local_bytes = -1;     // spill/stack bytes per thread; -1 if not queried
};

// ---- registry: filled by the generated instantiation list (csrc/generated/) ----
using RunFn = cudaError_t (*)(FwdParams, cudaStream_t);
using InfoFn = cudaError_t (*)(int num_stages, bool query_attributes, KernelInfo*);
using WorkspaceFn = int64_t (*)(FwdParams);  // fp32 workspace bytes run() needs (-1: error)
using DecodeRunFn = cudaError_t (*)(DecodeParams, cudaStream_t);
// How a decode call runs, decided by its launcher for these sizes on the current device
// (launch/heuristics.h): the split count (params.num_splits where the caller forces one, else the
// auto count; at most the key tiles of the kernel that runs) and whether the splits' merge is fused
// into the split kernel (the caller then passes zeroed DecodeParams::merge_counters) or is a second
// kernel.
struct DecodePlan {
  int splits = 1;
  bool fused_merge = false;
  bool spread_merge = false;  // DecodeParams::merge_spread (two counters per row block)
  bool balanced = false;      // DecodeParams::balanced_splits (with spread_merge only)
};
using DecodePlanFn = DecodePlan (*)(DecodeParams);
struct RegistryEntry {
  Op op;
  DType dtype;
  Family family;
  int level;  // FFPA level; 0 for FA-2 and decode
  AccMode acc;
  int head_dim;
  int head_dim_v;
  int exact_cc;     // 0: runs wherever the build runs; else only on that compute capability (90: sm_90a code)
  int priority;     // among the entries an auto call could take on a device, the lowest runs
  bool auto_first;  // an auto call takes it wherever it has the pair; else the FFPA level heuristic picks
  RunFn run;              // forward families (null for decode)
  InfoFn info;
  WorkspaceFn workspace;  // null: none needed
  DecodeRunFn decode_run = nullptr;        // decode family
  DecodePlanFn decode_plan = nullptr;      // decode family
  const char* name = "";                   // the family's name in ffpa_attn/_spec.py ("fa2", "ffpa_l1", ...)
};
const RegistryEntry* registry_begin();
const RegistryEntry* registry_end();

// ---- the chooser (route.cpp): the one place that decides which compiled kernel runs ----
// What a call asks for, where it runs, and the sizes the level heuristic looks at.
struct RouteQuery {
  Op op = Op::kFwd;
  DType dtype = DType::kBFloat16;
  int level = 0;  // 0 = auto, 1..3 = that FFPA level (forward only)
  AccMode acc = AccMode::kF32;
  int head_dim = 0, head_dim_v = 0;
  int len_q = 0, len_kv = 0;
  int64_t batch_heads = 0;  // batch x query heads
  int device_cc = 0;        // compute capability of the device, major * 10 + minor
  Fa2Mma mma = Fa2Mma::kAuto;
};

// The kernel a call runs, or null if none is compiled for it: among the entries of the op for the
// dtype, accumulation and head dims that run on the device (and the MMA preference allows), a forced
// level takes that FFPA level; an auto call takes the lowest-priority "auto first" entry (FA-2,
// decode; fp32 accumulation), else the FFPA level ffpa_heuristic.cpp picks among those compiled.
const RegistryEntry* route(const RouteQuery& q);
// The entry of family `name` (ffpa_attn/_spec.py; of whichever op it serves, q.op aside) a call with
// (q.dtype, q.acc, head dims) would run on the device: the lowest priority there. Null if not compiled.
const RegistryEntry* find_kernel(const char* name, const RouteQuery& q);

// ---- attn_mask block map (see ffpa/attn/mask.cuh) ----
// Bytes of the block map for a mask of mask_batches x mask_heads over (len_q, len_kv), cut in
// block_m x block_n tiles.
int64_t block_map_bytes(int mask_batches, int mask_heads, int len_q, int len_kv, int block_m, int block_n);
// Fills `map` (device memory of block_map_bytes) from p.mask and points p's block-map fields at it.
cudaError_t build_block_map(FwdParams& p, int mask_batches, int mask_heads, int block_m, int block_n,
                            uint8_t* map, cudaStream_t stream);

}  // namespace ffpa::launch
