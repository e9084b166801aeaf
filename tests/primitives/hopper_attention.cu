// Device test of the Hopper pipeline pieces working together as attention (#15's kernel in
// miniature): one block, one head, 128 query rows, D = Dv = 64, S = 37 x 64 keys, bf16.
//   producer warpgroup (one thread): Q once by TMA, then K and V tiles of 64 keys through the stage
//     ring (tile/stage_ring.cuh), 128-byte swizzled boxes that land as GmmaSw128Tile;
//   two consumer warpgroups of 64 rows: S = Q K^T on wgmma (both operands by descriptor), the
//     online softmax in registers (base 2, attn/state.cuh), O += P V on wgmma with P from registers
//     and V read transposed by descriptor; stage released after the P V wait.
// Checked against a double-precision reference on the host (ring depths 2 and 3). Prints one line
// per failed check and "N checks, M failed"; exits 1 on any failure.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "ffpa/attn/state.cuh"
#include "ffpa/ptx/cp_async.cuh"
#include "ffpa/ptx/mbarrier.cuh"
#include "ffpa/ptx/tma.cuh"
#include "ffpa/ptx/wgmma.cuh"
#include "ffpa/ptx/wgmma_gen.cuh"
#include "ffpa/tile/numeric.cuh"
#include "ffpa/tile/smem_tile.cuh"
#include "ffpa/tile/stage_ring.cuh"
#include "launch/tma_desc.h"
#include "device_harness.h"

namespace {

void check(bool ok, const char* what, long a = -1, long b = -1, double got = 0, double want = 0) {
  if (harness::record(ok)) std::printf("FAIL %s (%ld %ld): got %.6f want %.6f\n", what, a, b, got, want);
}


constexpr int kRowsQ = 128, kD = 64, kBlockN = 64;
using QTile = ffpa::GmmaSw128Tile<kRowsQ, kD>;
using KvTile = ffpa::GmmaSw128Tile<kBlockN, kD>;
using Mma = ffpa::ptx::WgmmaM64<kBlockN, __nv_bfloat16>;  // S: 64 rows x 64 keys per warpgroup
using MmaO = ffpa::ptx::WgmmaM64<kD, __nv_bfloat16>;      // O: 64 rows x 64 columns
using Num = ffpa::Numeric<__nv_bfloat16>;
constexpr int kStageBytes = 2 * KvTile::kBytes;  // K then V of one key tile

template <typename TileT>
__device__ __forceinline__ uint64_t k_major_desc(uint32_t tile, int ks) {
  return ffpa::ptx::gmma_desc_sw128(tile + TileT::k_major_kstep(ks), 16, 1024);
}

template <int kStages>
__global__ void __launch_bounds__(384, 1) attention_kernel(const __grid_constant__ CUtensorMap q_map,
                                                           const __grid_constant__ CUtensorMap k_map,
                                                           const __grid_constant__ CUtensorMap v_map, int n_tiles,
                                                           float scale_log2, float* out) {
  using Ring = ffpa::StageRing<kStages>;
  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t q_smem = ffpa::ptx::smem_u32addr(smem);
  const uint32_t stages = q_smem + QTile::kBytes;
  const uint32_t q_bar = stages + kStages * kStageBytes;
  const Ring ring{q_bar + 8};
  if (threadIdx.x == 0) {
    ffpa::ptx::mbarrier_init(q_bar, 1);
    ring.init(8);  // the 8 consumer warps release a stage
  }
  __syncthreads();
  const int wg = threadIdx.x / 128;
  typename Ring::State st;
  if (wg == 0) {  // producer
    if (threadIdx.x == 0) {
      ffpa::ptx::mbarrier_arrive_expect_tx(q_bar, QTile::kBytes);
      ffpa::ptx::tma_load_2d(q_smem, &q_map, q_bar, 0, 0);
      for (int t = 0; t < n_tiles; ++t, st.advance()) {
        ring.producer_acquire(st);
        ring.producer_expect(st, kStageBytes);
        const uint32_t k_smem = stages + st.stage * kStageBytes;
        ffpa::ptx::tma_load_2d(k_smem, &k_map, ring.full(st.stage), 0, t * kBlockN);
        ffpa::ptx::tma_load_2d(k_smem + KvTile::kBytes, &v_map, ring.full(st.stage), 0, t * kBlockN);
      }
    }
    return;
  }
  const int c = wg - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const uint32_t q_wg = q_smem + c * 64 * 128;  // this warpgroup's 64 rows (128 bytes each in the chunk)
  float o[kD / 8][4] = {}, row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  ffpa::ptx::mbarrier_wait_parity(q_bar, 0);
  for (int t = 0; t < n_tiles; ++t, st.advance()) {
    ring.consumer_wait(st);
    const uint32_t k_smem = stages + st.stage * kStageBytes, v_smem = k_smem + KvTile::kBytes;
    float s[kBlockN / 8][4];
    ffpa::ptx::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) Mma::ss(s, k_major_desc<QTile>(q_wg, ks), k_major_desc<KvTile>(k_smem, ks), ks > 0);
    ffpa::ptx::wgmma_commit_group();
    ffpa::ptx::wgmma_wait_group<0>();
    ffpa::ptx::wgmma_fence_operand(s);
    // Online softmax of rows g and g + 8 of this warp (a quad shares a row).
    float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kBlockN / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] *= scale_log2;
        tmax[e / 2] = fmaxf(tmax[e / 2], s[n][e]);
      }
    float alpha[2], neg_m[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 1));
      tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 2));
      alpha[r] = ffpa::attn::online_update(row_max[r], row_sum[r], tmax[r], neg_m[r]);
    }
    uint32_t p[kBlockN / 16][4];
#pragma unroll
    for (int n = 0; n < kBlockN / 8; ++n) {
      float pe[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        pe[e] = ffpa::ptx::ex2_approx_ftz(s[n][e] + neg_m[e / 2]);
        row_sum[e / 2] += pe[e];
      }
      // A fragment of k-step n / 2: regs {0, 1} from n8 tile 2 kk (rows g, g + 8), {2, 3} from 2 kk + 1.
      p[n / 2][2 * (n % 2)] = Num::pack2(pe[0], pe[1]);
      p[n / 2][2 * (n % 2) + 1] = Num::pack2(pe[2], pe[3]);
    }
#pragma unroll
    for (int n = 0; n < kD / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] *= alpha[e / 2];
    ffpa::ptx::wgmma_fence_operand(o);
    ffpa::ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
      MmaO::rs(o, p[kk], ffpa::ptx::gmma_desc_sw128(v_smem + KvTile::mn_major_kstep(kk), KvTile::kChunkBytes, 1024), 1);
    ffpa::ptx::wgmma_commit_group();
    ffpa::ptx::wgmma_wait_group<0>();
    ffpa::ptx::wgmma_fence_operand(o);
    __syncwarp();
    if (lane == 0) ring.consumer_release(st);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
  }
  const int row0 = 64 * c + 16 * warp + g;
#pragma unroll
  for (int n = 0; n < kD / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      out[(row0 + 8 * (e / 2)) * kD + 8 * n + 2 * t4 + e % 2] = o[n][e] * ffpa::attn::inv_row_sum(row_sum[e / 2]);
}

uint16_t to_bf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);  // round to nearest even
}

float from_bf16(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

CUtensorMap make_map(const uint16_t* dev, int rows, int box_rows) {
  ffpa::launch::TmaTensor t;
  t.base = dev;
  t.rank = 2;
  t.dims[0] = kD;
  t.dims[1] = rows;
  t.strides[1] = kD * 2;
  t.box[0] = kD;
  t.box[1] = box_rows;
  alignas(64) CUtensorMap map;
  CUDA_OK(ffpa::launch::encode_tma(&map, t, ffpa::launch::TmaSwizzle::k128B));
  return map;
}

template <int kStages>
void test_attention(std::mt19937& rng) {
  const int n_tiles = 37, S = n_tiles * kBlockN;
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<uint16_t> q(kRowsQ * kD), k(static_cast<size_t>(S) * kD), v(static_cast<size_t>(S) * kD);
  for (auto& x : q) x = to_bf16(normal(rng));
  for (auto& x : k) x = to_bf16(normal(rng));
  for (auto& x : v) x = to_bf16(normal(rng));
  uint16_t *dq, *dk, *dv;
  float* dout;
  CUDA_OK(cudaMalloc(&dq, q.size() * 2));
  CUDA_OK(cudaMalloc(&dk, k.size() * 2));
  CUDA_OK(cudaMalloc(&dv, v.size() * 2));
  CUDA_OK(cudaMalloc(&dout, kRowsQ * kD * 4));
  CUDA_OK(cudaMemcpy(dq, q.data(), q.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dk, k.data(), k.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dv, v.data(), v.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dout, 0xff, kRowsQ * kD * 4));  // NaN where a row is not written
  const CUtensorMap qm = make_map(dq, kRowsQ, kRowsQ), km = make_map(dk, S, kBlockN), vm = make_map(dv, S, kBlockN);
  const float scale = 1.f / std::sqrt(static_cast<float>(kD));
  const int smem = QTile::kBytes + kStages * kStageBytes + 8 + ffpa::StageRing<kStages>::kBarrierBytes;
  CUDA_OK(cudaFuncSetAttribute(attention_kernel<kStages>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  attention_kernel<kStages><<<1, 384, smem>>>(qm, km, vm, n_tiles, scale * 1.4426950408889634f, dout);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> got(kRowsQ * kD);
  CUDA_OK(cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<double> p(S);
  for (int r = 0; r < kRowsQ; ++r) {
    double mx = -INFINITY;
    for (int j = 0; j < S; ++j) {
      double acc = 0;
      for (int d = 0; d < kD; ++d) acc += double(from_bf16(q[r * kD + d])) * from_bf16(k[static_cast<size_t>(j) * kD + d]);
      p[j] = acc * scale;
      mx = std::fmax(mx, p[j]);
    }
    double sum = 0;
    for (int j = 0; j < S; ++j) sum += (p[j] = std::exp(p[j] - mx));
    for (int d = 0; d < kD; ++d) {
      double want = 0;
      for (int j = 0; j < S; ++j) want += p[j] * from_bf16(v[static_cast<size_t>(j) * kD + d]);
      want /= sum;
      const double have = got[r * kD + d];
      check(std::fabs(have - want) <= 1e-2 + 1e-2 * std::fabs(want), kStages == 2 ? "attention, ring depth 2" : "attention, ring depth 3",
            r, d, have, want);
    }
  }
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(dout);
}

}  // namespace

int main() {
  harness::require_compute_capability(9, 0);
  std::mt19937 rng(7);
  test_attention<2>(rng);
  test_attention<3>(rng);
  return harness::report();
}
