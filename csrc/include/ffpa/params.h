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

// What every attention kernel reads: the tensors (element strides, last dim contiguous), sizes and
// the pre-multiplied softmax scale. Forward and decode extend it with what only they use.
struct AttnParams {
  const void* q;  // forward: [B, Hq, L, D]; decode: [B, Lq, Hq, D]
  const void* k;  // forward: [B, Hkv, S, D]; decode: cache [B, S, Hkv, D] or page pool
  const void* v;  // as k, last dim Dv
  void* o;        // as q, last dim Dv
  float* lse;     // [B, Hq, L] contiguous, natural log; may be null

  // Element strides of batch (decode with a page table: of a page), head and row (position).
  int64_t q_batch_stride, q_head_stride, q_row_stride;
  int64_t k_batch_stride, k_head_stride, k_row_stride;
  int64_t v_batch_stride, v_head_stride, v_row_stride;
  int64_t o_batch_stride, o_head_stride, o_row_stride;

  int batch;
  int heads_q;
  int heads_kv;  // heads_q % heads_kv == 0; query head h reads kv head h / (heads_q / heads_kv)
  int len_q;     // L >= 1
  int len_kv;    // S >= 1 (decode: the cache capacity per sequence)
  int head_dim;
  int head_dim_v;

  float scale;       // softmax scale applied to q.k
  float scale_log2;  // scale * log2(e): kernels work in base 2
  bool is_causal;    // query i sees keys j <= i + causal_offset
  int causal_offset; // 0: SDPA's top-left convention; len_kv - len_q: bottom-right

  // Optional mask broadcastable to [B, Hq, L, S]: element (b, h, i, j) lives at
  // mask + b * mask_batch_stride + h * mask_head_stride + i * mask_row_stride + j * mask_col_stride
  // (element strides; 0 where broadcast). Bool: false = masked out. Float: added to scale * q.k.
  const void* mask;
  MaskKind mask_kind;
  int64_t mask_batch_stride, mask_head_stride, mask_row_stride, mask_col_stride;
};

struct FwdParams : AttnParams {
  // FFPA L3: fp32 O-accumulator workspace, o_accum_slots slots of BlockM x Dv floats (one per
  // resident block of the persistent grid; see launch::FfpaLauncher::workspace_bytes). The FA-2
  // launcher's split tail: its partials and flags (launch::Fa2Launcher::workspace_bytes).
  float* o_accum;
  int o_accum_slots;
  // FFPA L3 and the warp-specialised FA-2 kernel (KernelInfo::work_counter): a zero-initialised
  // counter the persistent blocks take work items from after their first (list scheduling, so
  // items of unequal length, or SMs of unequal speed, balance); null: a static grid stride.
  int* work_counter;
  // The warp-specialised FA-2 kernel with causal masking and a work counter: the last causal_tail_bh
  // (batch, head)s of its walk are single items, longest first across them, instead of pairs
  // (Fa2FwdWs::Walk; launch::fa2_causal_tail_bh); 0: pairs throughout.
  int causal_tail_bh;
  // The warp-specialised FA-2 kernel without causal masking or a mask: split_shares > 0 turns the walk's
  // slots [split_from, split_from + split_shares) into shares of equal length in key tiles of its last
  // items (kernels/fa2_ws_split.cuh), whose cut items merge through split_partials (fp32) and
  // split_flags (zeroed); 0: items throughout.
  int split_from, split_shares;
  float* split_partials;
  int* split_flags;
  int num_stages;    // cp.async pipeline depth, 1..4 (0 = let the launcher choose)

  // The mask's block map [mask_batches][mask_heads][m_blocks][n_blocks] (uint8 BlockCode), for
  // tiles of block_map_m x block_map_n; its batch/head strides are 0 where the mask broadcasts.
  const uint8_t* block_map;
  int64_t block_map_batch_stride, block_map_head_stride;
  int block_map_m, block_map_n, block_map_n_blocks;

  // FP8 (e4m3) only (kernels/fa2_fwd_sm90_fp8.cuh). vt: V transposed by the launcher's pre-pass,
  // [B][Hkv][Dv][vt_len] bytes, vt_len = S rounded up to 32 (kernels/fp8_v_transpose.cuh: each 32
  // keys in the order P's registers hold them, zeros past S). Descales per (batch, head) of their
  // tensor (element strides, 0 where broadcast; null: 1): q's and k's scale the scores, v's (times
  // v_scale) the output. out_fp16: the output is fp16, else bf16.
  void* vt;
  int vt_len;
  const float* q_descale;
  const float* k_descale;
  const float* v_descale;
  int64_t q_descale_batch_stride, q_descale_head_stride;
  int64_t k_descale_batch_stride, k_descale_head_stride;
  int64_t v_descale_batch_stride, v_descale_head_stride;
  float v_scale;
  bool out_fp16;
};

// Split-KV decode (kernels/decode_sm80.cuh): len_q = Lq query rows (1..32) per sequence against a
// KV cache; the query heads of one KV head are packed into the rows of one tile (row r is query
// position r / group of head kv * group + r % group, group = heads_q / heads_kv). causal_offset is
// unused: causal is bottom-right against each sequence's own length.
struct DecodeParams : AttnParams {
  const int* seqlens;      // [B] keys per sequence; null: len_kv each
  const int* block_table;  // [B, block_table_stride] page indices; null: a contiguous cache
  int64_t block_table_stride;
  int page_size;           // keys per page (a multiple of 16); len_kv when contiguous
  int kv_pages;            // dim 0 of the caches: pages of the pool, or the batch when contiguous
  int page_shift;          // log2(page_size) when a power of two (a shift, not a division), else -1
  int num_splits;          // key ranges per sequence, 1..; > 1 writes partials the merge combines
  // num_splits > 1: fp32 partial outputs [splits][B][Hkv][rows][Dv] (normalised) and their LSE
  // (base 2) [splits][B][Hkv][rows], rows = group * len_q.
  float* o_part;
  float* lse_part;
  // num_splits > 1, the merge fused into the split kernel (kernels/decode_merge.cuh,
  // decode_split_arrive): one arrival counter per row block [B][Hkv][row blocks], zero before the
  // launch and left zero after it (the last block of a row block resets its own); null: the
  // separate merge kernel combines the partials.
  int* merge_counters;
  // With merge_counters: every split block of a row block merges a slice of its columns after all
  // stored theirs (the narrow kernel, launched cooperatively so all are resident; kernels/decode_merge.cuh
  // decode_spread_arrive); merge_counters then holds two counters per row block [2][B][Hkv][row blocks].
  int merge_spread;
  // Blocks take their sequence longest first (kernels/decode_grid.cuh, decode_longest_first_batch):
  // set by the launcher with per-sequence lengths, few enough sequences and more blocks than one wave.
  int longest_first;
  // Balanced splits (kernels/decode_grid.cuh decode_balanced_starts; the narrow MLA kernel with the spread
  // merge): a KV head's batch x num_splits split blocks dealt to the sequences in proportion to their
  // lengths; block k's partial in slot k ([slot][Hkv][rows] of the layout above, slot in place of split x
  // B + batch).
  int balanced_splits;
};

// V is the first Dv columns of K, read through the same pointer and strides (MLA's single cache):
// the decode kernels then load K only and read V from its tiles.
inline bool decode_v_is_k_prefix(const DecodeParams& p) {
  return p.v == p.k && p.v_batch_stride == p.k_batch_stride && p.v_row_stride == p.k_row_stride &&
         p.v_head_stride == p.k_head_stride;
}

}  // namespace ffpa

