// The plain parameter block every forward kernel takes: pointers, int64 element strides, sizes and
// the pre-multiplied softmax scale. Torch-free; filled by csrc/ops, read by csrc/launch and kernels.
#pragma once
#include <cstdint>

namespace ffpa {

// How attn_mask is stored: absent, bool (true = attend) or an additive float mask.
enum class MaskKind : int { kNone = 0, kBool = 1, kFloat16 = 2, kBFloat16 = 3, kFloat32 = 4 };

// Per (query block, key block) summary of the mask, written by the block-map pre-pass for the
// launch's tile sizes: kernels skip kSkip tiles (no load, no math) and read the mask only in
// kPartial tiles.
enum BlockCode : uint8_t { kBlockSkip = 0, kBlockPartial = 1, kBlockFull = 2 };

struct FwdParams {
  const void* q;  // [B, Hq, L, D]   last dim contiguous
  const void* k;  // [B, Hkv, S, D]  last dim contiguous
  const void* v;  // [B, Hkv, S, Dv] last dim contiguous
  void* o;        // [B, Hq, L, Dv]  last dim contiguous
  float* lse;     // [B, Hq, L] contiguous, natural log; may be null
  // FFPA L3 only: fp32 O-accumulator workspace, o_accum_slots slots of BlockM x Dv floats (one
  // per resident block of the persistent grid; see launch::FfpaLauncher::workspace_bytes).
  float* o_accum;
  int o_accum_slots;
  // FFPA L3 only: a zero-initialised counter the persistent blocks take work items from after
  // their first (list scheduling, so causal items of unequal length balance); null: a static
  // grid stride.
  int* work_counter;

  int64_t q_batch_stride, q_head_stride, q_row_stride;
  int64_t k_batch_stride, k_head_stride, k_row_stride;
  int64_t v_batch_stride, v_head_stride, v_row_stride;
  int64_t o_batch_stride, o_head_stride, o_row_stride;

  int batch;
  int heads_q;
  int heads_kv;  // heads_q % heads_kv == 0; query head h reads kv head h / (heads_q / heads_kv)
  int len_q;     // L >= 1
  int len_kv;    // S >= 1
  int head_dim;
  int head_dim_v;

  float scale;       // softmax scale applied to q.k
  float scale_log2;  // scale * log2(e): kernels work in base 2
  bool is_causal;    // query i sees keys j <= i + causal_offset
  int causal_offset; // 0: SDPA's top-left convention; len_kv - len_q: bottom-right
  int num_stages;    // cp.async pipeline depth, 1..4 (0 = let the launcher choose)

  // Optional mask broadcastable to [B, Hq, L, S]: element (b, h, i, j) lives at
  // mask + b * mask_batch_stride + h * mask_head_stride + i * mask_row_stride + j * mask_col_stride
  // (element strides; 0 where broadcast). Bool: false = masked out. Float: added to scale * q.k.
  const void* mask;
  MaskKind mask_kind;
  int64_t mask_batch_stride, mask_head_stride, mask_row_stride, mask_col_stride;
  // The mask's block map [mask_batches][mask_heads][m_blocks][n_blocks] (uint8 BlockCode), for
  // tiles of block_map_m x block_map_n; its batch/head strides are 0 where the mask broadcasts.
  const uint8_t* block_map;
  int64_t block_map_batch_stride, block_map_head_stride;
  int block_map_m, block_map_n, block_map_n_blocks;
};

}  // namespace ffpa
