// Split-KV decode on mma.sync (sm_80+, and the decode path on Hopper): Lq = 1..32 query rows per
// sequence against a long KV cache, contiguous or paged, with per-sequence lengths.
//
// Grid: (m-tiles x splits, Hkv, B). A block packs 16 query rows of one KV head (GQA: every query
// head of the KV head times Lq, so each K/V byte is read once per 16 rows) and walks one key range
// of its sequence; with more than one split it writes a normalised fp32 partial and its LSE, and
// decode_merge_kernel (kernels/decode_merge.cuh) combines them (the merge of attn/state.cuh), or,
// with merge_counters, the last split block of each row block does (decode_merge_rows).
//
// Inside a block the warps (4, or 8 for Dv > 512 and for D = 64 / 128 / 192) split each KV tile (64 keys, 128 at
// D = 64; 32 with shared K/V) for S = Q K^T (warp w: block_n / warps keys, full head dim) and the output columns
// for O += P V (warp w: its share of every chunk's columns); the row max and P cross warps through shared
// memory. K and V stream through one cp.async ring of slots of a key tile x `chunk` head-dim columns, K
// chunks then V chunks of a tile (the loads: kernels/decode_kv_loads.cuh), so shared memory is bounded by
// the chunk and every head dim up to 1024 (and 576/512) runs here.
// With kSharedKV (MLA's single cache: V = the first Dv columns of K) only K is loaded and P V reads
// V from the K slots of the same tile. Fragment addresses are per-lane offsets computed once; the
// unrolled k-steps reach theirs through SmemTile::advance.
#pragma once
#include <cstdint>
#include <math_constants.h>

#include "ffpa/attn/state.cuh"
#include "ffpa/kernels/decode_grid.cuh"
#include "ffpa/kernels/decode_kv_loads.cuh"
#include "ffpa/kernels/decode_merge.cuh"
#include "ffpa/kernels/decode_tile_mask.cuh"
#include "ffpa/params.h"
#include "ffpa/ptx/cp_async.cuh"
#include "ffpa/ptx/ldmatrix.cuh"
#include "ffpa/ptx/math.cuh"
#include "ffpa/tile/numeric.cuh"
#include "ffpa/tile/quad.cuh"
#include "ffpa/tile/static_for.cuh"
#include "ffpa/traits/decode_traits.h"

namespace ffpa::kernels {

template <typename Element, int kHeadDim, int kHeadDimV, bool kSharedKV = false>
struct DecodeFwd {
  using Traits = DecodeTraits<kHeadDim, kHeadDimV, kSharedKV>;
  using Num = Numeric<Element>;
  using QTile = typename Traits::QTile;
  using KvTile = typename Traits::KvTile;
  using PTile = typename Traits::PTile;
  static constexpr int kThreads = Traits::kThreads;
  static constexpr int kWarps = Traits::kWarps;
  static constexpr int kRows = Traits::kRows;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kChunk = Traits::kChunk;
  static constexpr int kStages = Traits::kStages;
  static constexpr int kKChunks = Traits::kKChunks;
  static constexpr int kVChunks = Traits::kVChunks;
  static constexpr int kChunksPerTile = Traits::kChunksPerTile;
  static constexpr int kONTiles = Traits::kONTiles;
  static constexpr int kSNTiles = Traits::kSNTiles;
  static constexpr int kWarpKeys = Traits::kWarpKeys;
  static constexpr int kQkChains = Traits::kQkChains;
  static constexpr int kTileBuffers = Traits::kTileBuffers;
  static constexpr int kUnitsPerRow = Traits::kUnitsPerRow;

  // What one block works on.
  struct Work {
    int batch, head_kv;
    int group;           // query heads per KV head
    int rows;            // packed rows of this KV head: group * len_q
    int m0;              // first packed row of the block
    int split;
    int seqlen;          // keys of this sequence
    int n_begin, n_end;  // this block's keys [n_begin, n_end)
  };

  // `scratch`: shared memory for decode_longest_first_batch where the launcher asked for that order.
  static __device__ __forceinline__ Work work_of_block(const DecodeParams& p, int* scratch) {
    Work w;
    w.group = p.heads_q / p.heads_kv;
    w.rows = w.group * p.len_q;
    const int m_tiles = (w.rows + kRows - 1) / kRows;
    const DecodeBlock b = decode_block();
    w.m0 = b.x % m_tiles * kRows;
    w.split = b.x / m_tiles;
    w.head_kv = b.y;
    w.batch = p.longest_first ? decode_longest_first_batch(p.seqlens, p.batch, static_cast<int>(blockIdx.z), scratch) : b.z;
    // Lengths are not checked on the host (no sync): clamp them to the cache so a bad one cannot
    // read outside it (FFPA_DEBUG_CHECKS reports them).
    const int len = p.seqlens != nullptr ? __ldg(p.seqlens + w.batch) : p.len_kv;
    w.seqlen = min(max(len, 0), p.len_kv);
    const int tiles = (w.seqlen + kBlockN - 1) / kBlockN;
    const int per_split = (tiles + p.num_splits - 1) / p.num_splits;
    w.n_begin = min(w.split * per_split, tiles) * kBlockN;
    w.n_end = min(w.n_begin + per_split * kBlockN, w.seqlen);
    if (p.is_causal) {  // bottom-right: packed row r sees keys < seqlen - len_q + r / group + 1
      const int last_lq = (min(w.m0 + kRows, w.rows) - 1) / w.group;
      w.n_end = min(w.n_end, w.seqlen - p.len_q + last_lq + 1);
    }
    return w;
  }

  // Query position and query head of packed row r.
  static __device__ __forceinline__ int row_lq(const Work& w, int r) { return r / w.group; }
  static __device__ __forceinline__ int row_head(const Work& w, int r) { return w.head_kv * w.group + r % w.group; }

  // The block's 16 packed rows of Q (rows past the last are zero).
  static __device__ __forceinline__ void load_q(const DecodeParams& p, const Work& w, uint32_t q_smem, int tid) {
    constexpr int kUnits = kHeadDim / 8;
    const Element* q = static_cast<const Element*>(p.q) + w.batch * p.q_batch_stride;
    for (int i = tid; i < kRows * kUnits; i += kThreads) {
      const int r = i / kUnits, u = i % kUnits;
      const int row = w.m0 + r;
      const bool valid = row < w.rows;
      const int rr = valid ? row : 0;
      const Element* src = q + row_lq(w, rr) * p.q_row_stride + row_head(w, rr) * p.q_head_stride + u * 8;
      ptx::cp_async_cg_16(q_smem + (u / kUnitsPerRow) * QTile::kBytes + QTile::unit_offset(r, u % kUnitsPerRow), src,
                          valid);
    }
  }

  // The K/V loads: kernels/decode_kv_loads.cuh.
  using Loads = DecodeKvLoads<Element, Traits, Work>;
  using Rows = typename Loads::Rows;

  // S (16 rows x this warp's keys) += Q chunk x K chunk^T. k-step ks accumulates into chain ks %
  // kQkChains: with two chains the dependent MMA sequence of a wide head dim is half as long.
  // Per-lane byte offsets of the fragments this lane's ldmatrix addresses at k-step 0, computed once;
  // the unrolled k-steps reach theirs with SmemTile::advance (an XOR and an immediate), not the
  // swizzle arithmetic per load.
  struct Frag {
    uint32_t q;  // A of Q K^T: Q tile (row lane % 16, unit 0 or 1)
    uint32_t k;  // B of Q K^T: this warp's keys of a K slot
    uint32_t v;  // B of P V (transposed): this warp's columns of a V slot
    uint32_t p;  // A of P V: the P tile
  };

  static __device__ __forceinline__ Frag frag_offsets(int warp, int lane) {
    Frag f;
    f.q = QTile::elem_offset((lane % 8) + 8 * ((lane / 8) % 2), 8 * (lane / 16));
    f.k = kSNTiles == 1 ? KvTile::elem_offset(kWarpKeys * warp + (lane % 8), 8 * ((lane / 8) % 2))
                        : KvTile::elem_offset(kWarpKeys * warp + (lane % 8) + 8 * (lane / 16), 8 * ((lane / 8) % 2));
    const int key = (lane % 8) + 8 * ((lane / 8) % 2);
    f.v = kONTiles == 1 ? KvTile::elem_offset(key, warp * Traits::kWarpCols)
                        : KvTile::elem_offset(key, warp * Traits::kWarpCols + 8 * (lane / 16));
    f.p = PTile::elem_offset((lane % 8) + 8 * ((lane / 8) % 2), 8 * (lane / 16));
    return f;
  }

  // S (16 rows x this warp's keys) += Q chunk x K chunk^T. k-step ks accumulates into chain ks %
  // kQkChains: with two chains the dependent MMA sequence of a wide head dim is half as long.
  static __device__ __forceinline__ void qk_chunk(uint32_t q_chunk, uint32_t slot, const Frag& f,
                                                  float (&s_acc)[kQkChains][kSNTiles][4]) {
    constexpr int kSteps = kChunk / 16;
    const uint32_t qa = q_chunk + f.q, kb = slot + f.k;
    if constexpr (Traits::kQkPrefetch) {  // every fragment of the chunk first, then the MMAs
      uint32_t a[kSteps][4], b[kSteps][2 * kSNTiles];
#pragma unroll
      for (int ks = 0; ks < kSteps; ++ks) {
        ptx::ldmatrix_m8n8_x4(a[ks], QTile::advance(qa, 0, 2 * ks));
        if constexpr (kSNTiles == 1) ptx::ldmatrix_m8n8_x2(b[ks], KvTile::advance(kb, 0, 2 * ks));
        else ptx::ldmatrix_m8n8_x4(b[ks], KvTile::advance(kb, 0, 2 * ks));
      }
#pragma unroll
      for (int ks = 0; ks < kSteps; ++ks)
#pragma unroll
        for (int n = 0; n < kSNTiles; ++n) {
          const uint32_t bn[2] = {b[ks][2 * n], b[ks][2 * n + 1]};
          Num::mma_f32acc(s_acc[ks % kQkChains][n], a[ks], bn);
        }
    } else {  // each k-step's fragments just before its MMAs
#pragma unroll
      for (int ks = 0; ks < kSteps; ++ks) {
        float (&acc)[kSNTiles][4] = s_acc[ks % kQkChains];
        uint32_t a[4];
        ptx::ldmatrix_m8n8_x4(a, QTile::advance(qa, 0, 2 * ks));
        if constexpr (kSNTiles == 1) {
          uint32_t b[2];
          ptx::ldmatrix_m8n8_x2(b, KvTile::advance(kb, 0, 2 * ks));
          Num::mma_f32acc(acc[0], a, b);
        } else {
          uint32_t b[4];
          ptx::ldmatrix_m8n8_x4(b, KvTile::advance(kb, 0, 2 * ks));
          const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
          Num::mma_f32acc(acc[0], a, b0);
          Num::mma_f32acc(acc[1], a, b1);
        }
      }
    }
  }

  // The chains' sum: the tile's scores.
  static __device__ __forceinline__ void sum_chains(const float (&s_part)[kQkChains][kSNTiles][4],
                                                    float (&s_acc)[kSNTiles][4]) {
#pragma unroll
    for (int n = 0; n < kSNTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s_acc[n][e] = s_part[0][n][e];
#pragma unroll
        for (int c = 1; c < kQkChains; ++c) s_acc[n][e] += s_part[c][n][e];
      }
  }

  // O (16 rows x this warp's columns of the chunk) += P x V chunk.
  static __device__ __forceinline__ void pv_chunk(uint32_t slot, const Frag& f, const uint32_t (&p_frag)[kBlockN / 16][4],
                                                  float (&o)[kONTiles][4]) {
    const uint32_t vb = slot + f.v;
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) {
      if constexpr (kONTiles == 1) {
        uint32_t b[2];
        ptx::ldmatrix_m8n8_x2_trans(b, KvTile::advance(vb, 16 * ks, 0));
        Num::mma_f32acc(o[0], p_frag[ks], b);
      } else {
#pragma unroll
        for (int np = 0; np < kONTiles / 2; ++np) {
          uint32_t b[4];
          ptx::ldmatrix_m8n8_x4_trans(b, KvTile::advance(vb, 16 * ks, 2 * np));
          const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
          Num::mma_f32acc(o[2 * np], p_frag[ks], b0);
          Num::mma_f32acc(o[2 * np + 1], p_frag[ks], b1);
        }
      }
    }
  }

  // attn_mask's rows of this thread and its bits a tile ahead: kernels/decode_tile_mask.cuh.
  using TileMask = DecodeTileMask<Traits>;
  using MaskRows = typename TileMask::Rows;

  // P (b16, the whole tile) as the A fragments of P V's k-steps.
  static __device__ __forceinline__ void load_p(uint32_t p_smem, const Frag& f, uint32_t (&p_frag)[kBlockN / 16][4]) {
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) ptx::ldmatrix_m8n8_x4(p_frag[ks], PTile::advance(p_smem + f.p, 0, 2 * ks));
  }

  // Online softmax of one KV tile across the warps: mask and scale this warp's scores, the tile's
  // row max through shared memory, the shared state update (every warp holds the same row max, so
  // the per-warp sums and output slices stay consistent), P (b16) into shared memory.
  static __device__ __forceinline__ void softmax_tile(const DecodeParams& p, int n0, const int (&lim)[2], int warp,
                                                      int g, int t4, float* red_max, uint32_t p_smem,
                                                      float (&s_acc)[kSNTiles][4], const float (&madd)[kSNTiles][4],
                                                      float (&row_max)[2], float (&row_sum)[2],
                                                      float (&o_acc)[kVChunks][kONTiles][4]) {
    float tmax[2] = {-CUDART_INF_F, -CUDART_INF_F};
#pragma unroll
    for (int n = 0; n < kSNTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = n0 + kWarpKeys * warp + 8 * n + 2 * t4 + (e % 2);
        s_acc[n][e] = key < lim[e / 2] ? fmaf(s_acc[n][e], p.scale_log2, madd[n][e]) : -CUDART_INF_F;
        tmax[e / 2] = fmaxf(tmax[e / 2], s_acc[n][e]);
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tmax[r] = quad_max(tmax[r]);
      if (t4 == 0) red_max[(g + 8 * r) * kWarps + warp] = tmax[r];  // a row's warps side by side
    }
    __syncthreads();
    float alpha[2], neg_m[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float4* row_maxes = reinterpret_cast<const float4*>(red_max + (g + 8 * r) * kWarps);
      float m = -CUDART_INF_F;
#pragma unroll
      for (int q = 0; q < kWarps / 4; ++q) {  // 16-byte reads: four warps' maxima each
        const float4 x = row_maxes[q];
        m = fmaxf(m, fmaxf(fmaxf(x.x, x.y), fmaxf(x.z, x.w)));
      }
      alpha[r] = attn::online_update(row_max[r], row_sum[r], m, neg_m[r]);
    }
    if (!__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) {
#pragma unroll
      for (int c = 0; c < kVChunks; ++c)
#pragma unroll
        for (int n = 0; n < kONTiles; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) o_acc[c][n][e] *= alpha[e / 2];
    }
#pragma unroll
    for (int n = 0; n < kSNTiles; ++n) {
      float pe[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        pe[e] = ptx::ex2_approx_ftz(s_acc[n][e] + neg_m[e / 2]);
        row_sum[e / 2] += pe[e];
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const uint32_t packed = Num::pack2(pe[2 * r], pe[2 * r + 1]);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(p_smem + PTile::elem_offset(g + 8 * r, kWarpKeys * warp + 8 * n + 2 * t4)),
                     "r"(packed));
      }
    }
  }

  // A block whose key range is empty (length 0, a split past the end, or causal rows with no key):
  // its rows read nothing. One split: output 0 and LSE -inf; else a zero partial of LSE -inf.
  static __device__ __forceinline__ void write_empty(const DecodeParams& p, const Work& w, int tid) {
    const int rows = min(kRows, w.rows - w.m0);
    if (p.num_splits > 1) {  // LSE -inf (weight 0) and zeros, so the merge reads no garbage
      const int64_t item0 = ((static_cast<int64_t>(w.split) * p.batch + w.batch) * p.heads_kv + w.head_kv) * w.rows + w.m0;
      for (int r = tid; r < rows; r += kThreads) p.lse_part[item0 + r] = -CUDART_INF_F;
      float4* o = reinterpret_cast<float4*>(p.o_part + item0 * kHeadDimV);
      for (int i = tid; i < rows * kHeadDimV / 4; i += kThreads) o[i] = make_float4(0.f, 0.f, 0.f, 0.f);
      return;
    }
    constexpr int kUnits = kHeadDimV / 8;
    for (int i = tid; i < rows * kUnits; i += kThreads) {
      const int row = w.m0 + i / kUnits;
      Element* o = static_cast<Element*>(p.o) + w.batch * p.o_batch_stride + row_lq(w, row) * p.o_row_stride +
                   row_head(w, row) * p.o_head_stride;
      reinterpret_cast<uint4*>(o)[i % kUnits] = make_uint4(0u, 0u, 0u, 0u);
    }
    if (p.lse != nullptr)
      for (int r = tid; r < rows; r += kThreads) {
        const int row = w.m0 + r;
        p.lse[(static_cast<int64_t>(w.batch) * p.heads_q + row_head(w, row)) * p.len_q + row_lq(w, row)] = -CUDART_INF_F;
      }
  }

  // Row sums across quads and warps; O / l into the output (one split) or the fp32 partials.
  static __device__ __forceinline__ void store(const DecodeParams& p, const Work& w, int warp, int g, int t4,
                                               float* red_sum, const float (&o_acc)[kVChunks][kONTiles][4],
                                               const float (&row_max)[2], const float (&row_sum)[2]) {
    float l[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[r] = quad_sum(row_sum[r]);
      if (t4 == 0) red_sum[warp * kRows + g + 8 * r] = l[r];
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float total = 0.f;
#pragma unroll
      for (int v = 0; v < kWarps; ++v) total += red_sum[v * kRows + g + 8 * r];
      const int row = w.m0 + g + 8 * r;
      if (row >= w.rows) continue;
      const float inv = attn::inv_row_sum(total);
      const int lq = row_lq(w, row), hq = row_head(w, row);
      if (p.num_splits == 1) {
        Element* o = static_cast<Element*>(p.o) + w.batch * p.o_batch_stride + lq * p.o_row_stride + hq * p.o_head_stride;
#pragma unroll
        for (int c = 0; c < kVChunks; ++c)
#pragma unroll
          for (int n = 0; n < kONTiles; ++n) {
            const int col = c * kChunk + warp * Traits::kWarpCols + 8 * n + 2 * t4;
            *reinterpret_cast<uint32_t*>(o + col) = Num::pack2(o_acc[c][n][2 * r] * inv, o_acc[c][n][2 * r + 1] * inv);
          }
        if (p.lse != nullptr && warp == 0 && t4 == 0)
          p.lse[(static_cast<int64_t>(w.batch) * p.heads_q + hq) * p.len_q + lq] = attn::row_lse(row_max[r], total);
      } else {
        const int64_t item = ((static_cast<int64_t>(w.split) * p.batch + w.batch) * p.heads_kv + w.head_kv) * w.rows + row;
        float* o = p.o_part + item * kHeadDimV;
#pragma unroll
        for (int c = 0; c < kVChunks; ++c)
#pragma unroll
          for (int n = 0; n < kONTiles; ++n) {
            const int col = c * kChunk + warp * Traits::kWarpCols + 8 * n + 2 * t4;
            *reinterpret_cast<float2*>(o + col) = make_float2(o_acc[c][n][2 * r] * inv, o_acc[c][n][2 * r + 1] * inv);
          }
        if (warp == 0 && t4 == 0) p.lse_part[item] = attn::row_lse2(row_max[r], total);
      }
    }
  }

  // The tile loop of separate K and V: one ring of chunk slots, K chunks then V chunks of each tile,
  // a ring step (wait, barrier, next load) per chunk.
  static __device__ __forceinline__ void tiles_ring(const DecodeParams& p, const Work& w, const MaskRows& mrows, int n_tiles, int n_chunks,
                                                    uint32_t ring, uint32_t q_smem, uint32_t p_smem, float* red_max,
                                                    const int (&lim)[2], int tid, int warp, int lane, int g, int t4,
                                                    Rows& rows, uint32_t (&ahead)[kSNTiles][4],
                                                    float (&o_acc)[kVChunks][kONTiles][4], float (&row_max)[2],
                                                    float (&row_sum)[2]) {
    const Frag f = frag_offsets(warp, lane);
    int i = 0;
    for (int t = 0; t < n_tiles; ++t) {
      float s_part[kQkChains][kSNTiles][4], s_acc[kSNTiles][4], madd[kSNTiles][4];
      TileMask::begin_tile(p, mrows, w.n_begin + t * kBlockN, w.n_end, warp, t4, s_part, ahead, madd);
      static_for<kKChunks>([&](auto kc) {
        constexpr int c = decltype(kc)::value;
        const uint32_t slot = Loads::template ring_step<c>(p, w, ring, t, i++, n_chunks, tid, rows);
        qk_chunk(q_smem + c * QTile::kBytes, slot, f, s_part);
      });
      sum_chains(s_part, s_acc);
      softmax_tile(p, w.n_begin + t * kBlockN, lim, warp, g, t4, red_max, p_smem, s_acc, madd, row_max, row_sum, o_acc);
      uint32_t p_frag[kBlockN / 16][4];
      static_for<kVChunks>([&](auto kc) {
        constexpr int c = decltype(kc)::value;
        const uint32_t slot = Loads::template ring_step<kKChunks + c>(p, w, ring, t, i++, n_chunks, tid, rows);  // its barrier also publishes P
        if constexpr (c == 0) load_p(p_smem, f, p_frag);
        pv_chunk(slot, f, p_frag, o_acc[c]);
      });
    }
  }

  // The tile loop of the shared-K/V variant (V = the first Dv columns of K): the ring holds
  // kTileBuffers whole tiles of K chunks; the next ones land while tile t is multiplied, and tile
  // t + kTileBuffers is issued into t's buffer once every warp has read it. P V reads V from the K
  // slots of its own tile.
  static __device__ __forceinline__ void tiles_shared(const DecodeParams& p, const Work& w, const MaskRows& mrows, int n_tiles, int n_chunks,
                                                      uint32_t ring, uint32_t q_smem, uint32_t p_smem, float* red_max,
                                                      const int (&lim)[2], int tid, int warp, int lane, int g, int t4,
                                                      Rows& rows, uint32_t (&ahead)[kSNTiles][4],
                                                      float (&o_acc)[kVChunks][kONTiles][4], float (&row_max)[2],
                                                      float (&row_sum)[2]) {
    const Frag f = frag_offsets(warp, lane);
    for (int t = 0; t < n_tiles; ++t) {
      const uint32_t half = ring + static_cast<uint32_t>((t % kTileBuffers) * kKChunks * KvTile::kBytes);
      float s_part[kQkChains][kSNTiles][4], s_acc[kSNTiles][4], madd[kSNTiles][4];
      TileMask::begin_tile(p, mrows, w.n_begin + t * kBlockN, w.n_end, warp, t4, s_part, ahead, madd);
      if constexpr (Traits::kTileWait) {  // the whole tile (pending: the kTileBuffers - 1 tiles after it)
        ptx::cp_async_wait_group<(kTileBuffers - 1) * kKChunks>();
        __syncthreads();
      }
#pragma unroll
      for (int c = 0; c < kKChunks; ++c) {
        if constexpr (!Traits::kTileWait) {
          // Pending: this tile's chunks after c and the kTileBuffers - 1 tiles after it.
          ptx::cp_async_wait_group_upto<kTileBuffers * kKChunks - 1>(kTileBuffers * kKChunks - 1 - c);
          __syncthreads();
        }
        qk_chunk(q_smem + c * QTile::kBytes, half + c * KvTile::kBytes, f, s_part);
      }
      sum_chains(s_part, s_acc);
      softmax_tile(p, w.n_begin + t * kBlockN, lim, warp, g, t4, red_max, p_smem, s_acc, madd, row_max, row_sum, o_acc);
      __syncthreads();  // P is complete
      uint32_t p_frag[kBlockN / 16][4];
      load_p(p_smem, f, p_frag);
#pragma unroll
      for (int c = 0; c < kVChunks; ++c) pv_chunk(half + c * KvTile::kBytes, f, p_frag, o_acc[c]);
      __syncthreads();  // every warp is done with this half of the ring
      static_for<kKChunks>([&](auto kc) {
        constexpr int c = decltype(kc)::value;
        const int j = (t + kTileBuffers) * kKChunks + c;
        Loads::template issue<c>(p, w, ring + static_cast<uint32_t>((j % kStages) * KvTile::kBytes), t + kTileBuffers, j < n_chunks,
                                 tid, rows);
      });
    }
  }

  static __device__ __forceinline__ void run(const DecodeParams& p) {
    extern __shared__ __align__(1024) char smem[];
    const int tid = threadIdx.x;
    const Work w = work_of_block(p, reinterpret_cast<int*>(smem));
    if (w.n_end <= w.n_begin) write_empty(p, w, tid);
    else tiles(p, w, smem, tid);
    if (p.num_splits > 1 && p.merge_counters != nullptr) merge_if_last(p, w, tid, reinterpret_cast<int*>(smem));
  }

  // The fused merge (DecodeParams::merge_counters): this split counts itself in on its row block;
  // the last to do so merges the row block (kernels/decode_merge.cuh). `flag`: shared memory no
  // thread reads any more (the Q tile).
  static __device__ __forceinline__ void merge_if_last(const DecodeParams& p, const Work& w, int tid, int* flag) {
    const int m_tiles = (w.rows + kRows - 1) / kRows;
    const int64_t row_block = (static_cast<int64_t>(w.batch) * p.heads_kv + w.head_kv) * m_tiles + w.m0 / kRows;
    if (!decode_split_arrive(p, row_block, tid, flag, [] { __syncthreads(); })) return;
    const int m0 = w.m0;
    decode_merge_rows<Element, kHeadDimV, kThreads, kFusedMergeUnitsSync>(
        p, w.batch, w.head_kv, min(kRows, w.rows - m0), [m0](int j) { return m0 + j; }, tid);
  }

  // A block with keys: the tile loop and the output or partial.
  static __device__ __forceinline__ void tiles(const DecodeParams& p, const Work& w, char* smem, int tid) {
    const int warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    const uint32_t q_smem = ptx::smem_u32addr(smem);
    const uint32_t ring = q_smem + Traits::kQBytes;
    const uint32_t p_smem = ring + Traits::kRingBytes;
    float* red_max = reinterpret_cast<float*>(smem + Traits::kQBytes + Traits::kRingBytes + Traits::kPBytes);
    float* red_sum = red_max + kWarps * kRows;

    const int n_tiles = (w.n_end - w.n_begin + kBlockN - 1) / kBlockN;
    const int n_chunks = n_tiles * kChunksPerTile;
    // The first tile's mask bits before anything else is issued (later tiles': a tile ahead).
    const MaskRows mrows = TileMask::rows(p, w.m0, w.rows, w.batch, w.head_kv, w.group, g);
    uint32_t ahead[kSNTiles][4] = {};
    if (p.mask != nullptr) TileMask::load_bits(p, mrows, w.n_begin, w.n_end, warp, t4, ahead);
    Rows rows;
    if (p.block_table != nullptr) Loads::lookup(p, w, 0, tid, rows.next_page);
    load_q(p, w, q_smem, tid);  // joins the group of ring load 0
    // The ring's first loads: kStages - 1 slots ahead (shared K/V: the first kTileBuffers whole tiles).
#pragma unroll
    for (int i = 0; i < (kSharedKV ? kStages : kStages - 1); ++i) Loads::issue_at(p, w, ring, i, n_chunks, tid, rows);

    // Per-row key limits (exclusive) of rows g and g + 8: the range end, and bottom-right causal.
    int lim[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = w.m0 + g + 8 * r;
      lim[r] = w.n_end;
      if (p.is_causal && row < w.rows) lim[r] = min(lim[r], w.seqlen - p.len_q + row_lq(w, row) + 1);
    }
    float o_acc[kVChunks][kONTiles][4];
#pragma unroll
    for (int c = 0; c < kVChunks; ++c)
#pragma unroll
      for (int n = 0; n < kONTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) o_acc[c][n][e] = 0.f;
    float row_max[2] = {-CUDART_INF_F, -CUDART_INF_F}, row_sum[2] = {0.f, 0.f};

    if constexpr (kSharedKV) {
      tiles_shared(p, w, mrows, n_tiles, n_chunks, ring, q_smem, p_smem, red_max, lim, tid, warp, lane, g, t4, rows, ahead,
                   o_acc, row_max, row_sum);
    } else {
      tiles_ring(p, w, mrows, n_tiles, n_chunks, ring, q_smem, p_smem, red_max, lim, tid, warp, lane, g, t4, rows, ahead, o_acc,
                 row_max, row_sum);
    }
    ptx::cp_async_wait_group<0>();
    store(p, w, warp, g, t4, red_sum, o_acc, row_max, row_sum);
  }
};

}  // namespace ffpa::kernels
