// The epilogue of a wgmma consumer warpgroup's rows (m64 accumulator layout: lane (g, t4) holds rows
// g and g + 8 of its warp's 16, columns 2 t4, 2 t4 + 1 of each n8 tile): O / l in the output dtype,
// a quad's 64 contiguous bytes a row (tile/quad.cuh), and the LSE, into FwdParams' o and lse. Shared
// by the FA-2 Hopper kernels (bf16 / fp16 and FP8). Every lane of the warp calls it (quad shuffles).
#pragma once
#include <cstdint>

#include "ffpa/attn/state.cuh"
#include "ffpa/params.h"
#include "ffpa/ptx/ldmatrix.cuh"
#include "ffpa/tile/numeric.cuh"
#include "ffpa/tile/quad.cuh"

namespace ffpa::attn {

template <typename Out, int kNO>
struct RowsOut {
  using Num = Numeric<Out>;

  static __device__ __forceinline__ Out* base(const FwdParams& p, int batch, int head) {
    return static_cast<Out*>(p.o) + batch * p.o_batch_stride + head * p.o_head_stride;
  }
  static __device__ __forceinline__ void store_lse(const FwdParams& p, int batch, int head, int row, int t4, float lse) {
    if (row < p.len_q && p.lse != nullptr && t4 == 0)
      p.lse[(static_cast<int64_t>(batch) * p.heads_q + head) * p.len_q + row] = lse;
  }

  // O * out_scale / l and the LSE (of row_max - max_offset: the max a kernel's P was offset by) at once.
  static __device__ __forceinline__ void store(const FwdParams& p, int batch, int head, int row0, int g, int t4,
                                               const float (&o)[kNO][4], const float (&row_max)[2],
                                               const float (&row_sum)[2], float out_scale = 1.f,
                                               float max_offset = 0.f) {
    Out* o_base = base(p, batch, head);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = quad_sum(row_sum[r]);
      const int row = row0 + g + 8 * r;
      store_acc_row(o_base + static_cast<int64_t>(row) * p.o_row_stride, o, r, inv_row_sum(l) * out_scale, t4,
                    row < p.len_q);
      store_lse(p, batch, head, row, t4, row_lse(row_max[r] - max_offset, l));
    }
  }

  // The same in two halves, for a kernel that issues its next GEMM between them (the accumulators free
  // once packed): O / l in b16 pairs and the LSE, then the stores.
  struct Packed {
    uint32_t o[2][kNO];
    float lse[2];
  };
  // What the rows' statistics give the store: 1 / l and the LSE of both rows. From the finished row max and
  // sums alone, so a kernel may compute it while its last P V still runs (shuffles, MUFU.RCP and .LG2).
  struct Finish {
    float inv[2], lse[2];
  };
  static __device__ __forceinline__ Finish finish(const float (&row_max)[2], const float (&row_sum)[2]) {
    Finish f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = quad_sum(row_sum[r]);
      f.inv[r] = inv_row_sum(l);
      f.lse[r] = row_lse(row_max[r], l);
    }
    return f;
  }
  static __device__ __forceinline__ void pack(const float (&o)[kNO][4], const Finish& f, Packed& out) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int n = 0; n < kNO; ++n) out.o[r][n] = Num::pack2(o[n][2 * r] * f.inv[r], o[n][2 * r + 1] * f.inv[r]);
      out.lse[r] = f.lse[r];
    }
  }
  static __device__ __forceinline__ void pack(const float (&o)[kNO][4], const float (&row_max)[2],
                                              const float (&row_sum)[2], Packed& out) {
    pack(o, finish(row_max, row_sum), out);
  }
  static __device__ __forceinline__ void store_packed(const FwdParams& p, int batch, int head, int row0, int g, int t4,
                                                      const Packed& in) {
    static_assert(kNO % 4 == 0, "16-byte stores of four n8 tiles");
    Out* o_base = base(p, batch, head);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + g + 8 * r;
#pragma unroll
      for (int k = 0; k < kNO / 4; ++k) {
        uint32_t a[4] = {in.o[r][4 * k], in.o[r][4 * k + 1], in.o[r][4 * k + 2], in.o[r][4 * k + 3]};
        store_quad_run(o_base + static_cast<int64_t>(row) * p.o_row_stride, a, k, t4, row < p.len_q);
      }
      store_lse(p, batch, head, row, t4, in.lse[r]);
    }
  }

  // The packed rows into shared memory as the 128-byte-swizzled box of a TMA store (64 rows x 64 columns
  // a chunk, 8 KB, 1024-byte aligned; row r's 16-byte unit u at u ^ (r % 8)): stmatrix, two n8 tiles
  // (both row halves) an instruction. warp: which 16 rows of the warpgroup's 64 this warp holds.
  static constexpr int kChunkBytes = 64 * 128;
  static __device__ __forceinline__ void to_smem_sw128(uint32_t o_wg, const Packed& in, int warp, int lane) {
    static_assert(kNO % 2 == 0, "stmatrix x4: two n8 tiles at once");
    const int i = lane / 8, row = 16 * warp + 8 * (i % 2) + lane % 8;  // lane: row lane % 8 of matrix i
#pragma unroll
    for (int n = 0; n < kNO; n += 2) {
      const int nn = n + i / 2;  // matrix i: tile n + i / 2, row half i % 2
      const uint32_t r[4] = {in.o[0][n], in.o[1][n], in.o[0][n + 1], in.o[1][n + 1]};
      ptx::stmatrix_m8n8_x4(o_wg + (nn / 8) * kChunkBytes + row * 128 + (((nn % 8) ^ (row % 8)) << 4), r);
    }
  }
  static __device__ __forceinline__ void store_lse_rows(const FwdParams& p, int batch, int head, int row0, int g, int t4,
                                                        const Packed& in) {
#pragma unroll
    for (int r = 0; r < 2; ++r) store_lse(p, batch, head, row0 + g + 8 * r, t4, in.lse[r]);
  }
};

}  // namespace ffpa::attn
