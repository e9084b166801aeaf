// The FP8 kernel's register re-layout of P, alone (kernels/fa2_fwd_sm90_fp8.cuh, compute capability
// 9.0): one warpgroup holds a 64 x 128 P in the S accumulator layout, packs it with the kernel's own
// pack() (ptx::pack4_e4m3, no shuffles) and multiplies it by V through the kernel's own issue_pv()
// (wgmma m64n128k32 e4m3, V^T K-major in shared memory with its keys in fp8_p_key order, as
// fp8_v_transpose_kernel writes them). P and V hold values e4m3 represents exactly and whose
// products and sums fp32 holds exactly, so O must equal the double reference bit for bit; a wrong
// byte order, register order or key order moves products to the wrong keys. Also pack4_e4m3's
// rounding and saturation against the host's __nv_fp8_e4m3 conversion. And the V^T pre-pass alone
// (kernels/fp8_v_transpose.cuh): every byte against the definition.
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "device_harness.h"
#include "ffpa/kernels/fa2_fwd_sm90_fp8.cuh"
#include "ffpa/kernels/fp8_v_transpose.cuh"

namespace {

using Traits = ffpa::Fa2Fp8Traits<128>;
using Fp8 = ffpa::attn::Fa2FwdFp8<Traits, __nv_bfloat16>;
constexpr int kRows = 64, kKeys = Traits::kBlockN, kCols = Traits::kHeadDimV;

// O[64][128] = P[64][128] (row-major fp32) x V (given as V^T [128 cols][128 keys] bytes, keys permuted).
__global__ void __launch_bounds__(128) relayout_kernel(const float* p, const uint8_t* vt, float* o) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ __align__(1024) uint8_t vt_s[Traits::VtTile::kBytes];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
  for (int i = tid; i < kCols * kKeys / 16; i += 128) {
    const int row = i / (kKeys / 16), u = i % (kKeys / 16);
    *reinterpret_cast<uint4*>(vt_s + Traits::VtTile::unit_offset(row, u)) =
        *reinterpret_cast<const uint4*>(vt + row * kKeys + 16 * u);
  }
  ffpa::ptx::fence_proxy_async_shared();
  __syncthreads();
  float s[Traits::kNTilesS][4];
#pragma unroll
  for (int n = 0; n < Traits::kNTilesS; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] = p[(16 * warp + g + 8 * (e / 2)) * kKeys + 8 * n + 2 * t4 + e % 2];
  uint32_t pf[Traits::kKStepsPV][4];
  Fp8::pack(s, pf);
  float acc[Traits::kNTilesO][4];
#pragma unroll
  for (int n = 0; n < Traits::kNTilesO; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
  Fp8::issue_pv(acc, pf, ffpa::ptx::smem_u32addr(vt_s));
  ffpa::ptx::wgmma_wait_group<0>();
  ffpa::ptx::wgmma_fence_operand(acc);
#pragma unroll
  for (int n = 0; n < Traits::kNTilesO; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[(16 * warp + g + 8 * (e / 2)) * kCols + 8 * n + 2 * t4 + e % 2] = acc[n][e];
#endif
}

__global__ void pack_kernel(const float* x, uint32_t* out, int n4) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) out[i] = ffpa::ptx::pack4_e4m3(x[4 * i], x[4 * i + 1], x[4 * i + 2], x[4 * i + 3]);
}

uint32_t rng_state = 12345u;
uint32_t rnd() {
  rng_state = rng_state * 1664525u + 1013904223u;
  return rng_state >> 8;
}

void test_relayout() {
  std::vector<float> p(kRows * kKeys), v(kKeys * kCols);
  for (float& x : p) x = static_cast<float>(rnd() % 16) / 8.f;                     // 0 .. 1.875, exact in e4m3
  for (float& x : v) x = static_cast<float>(static_cast<int>(rnd() % 17) - 8) / 4.f;  // -2 .. 2
  std::vector<uint8_t> vt(kCols * kKeys);
  for (int c = 0; c < kCols; ++c)
    for (int pos = 0; pos < kKeys; ++pos) {
      const int key = 32 * (pos / 32) + ffpa::fp8_p_key(pos % 32);
      const __nv_fp8_e4m3 b(v[key * kCols + c]);
      vt[c * kKeys + pos] = *reinterpret_cast<const uint8_t*>(&b);
    }
  float *dp, *dout;
  uint8_t* dvt;
  CUDA_OK(cudaMalloc(&dp, p.size() * 4));
  CUDA_OK(cudaMalloc(&dout, kRows * kCols * 4));
  CUDA_OK(cudaMalloc(&dvt, vt.size()));
  CUDA_OK(cudaMemcpy(dp, p.data(), p.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dvt, vt.data(), vt.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dout, 0xff, kRows * kCols * 4));  // NaN: an unwritten element fails
  relayout_kernel<<<1, 128>>>(dp, dvt, dout);
  CUDA_OK(cudaGetLastError());
  std::vector<float> o(kRows * kCols);
  CUDA_OK(cudaMemcpy(o.data(), dout, o.size() * 4, cudaMemcpyDeviceToHost));
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) {
      double want = 0.0;
      for (int k = 0; k < kKeys; ++k) want += static_cast<double>(p[r * kKeys + k]) * v[k * kCols + c];
      const float got = o[r * kCols + c];
      if (harness::record(static_cast<double>(got) == want))
        std::printf("FAIL relayout O[%d][%d] = %.6f, want %.6f\n", r, c, got, want);
    }
  CUDA_OK(cudaFree(dp));
  CUDA_OK(cudaFree(dout));
  CUDA_OK(cudaFree(dvt));
}

void test_pack_rounding() {
  std::vector<float> x;
  for (int i = 0; i < 4096; ++i) x.push_back((static_cast<float>(rnd() % 2000001) - 1000000.f) / 1000.f);  // +-1000
  for (float y : {0.f, -0.f, 448.f, 449.f, 1e6f, -1e6f, 1.0625f, 1.1875f, 0.001953125f, 0.0009765625f, 240.f, 464.f})
    x.push_back(y);
  while (x.size() % 4) x.push_back(0.5f);
  const int n4 = static_cast<int>(x.size() / 4);
  float* dx;
  uint32_t* dout;
  CUDA_OK(cudaMalloc(&dx, x.size() * 4));
  CUDA_OK(cudaMalloc(&dout, n4 * 4));
  CUDA_OK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  pack_kernel<<<(n4 + 127) / 128, 128>>>(dx, dout, n4);
  CUDA_OK(cudaGetLastError());
  std::vector<uint32_t> out(n4);
  CUDA_OK(cudaMemcpy(out.data(), dout, n4 * 4, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < x.size(); ++i) {
    const __nv_fp8_e4m3 b(x[i]);  // round to nearest even, saturating to +-448
    const uint32_t want = *reinterpret_cast<const uint8_t*>(&b), got = (out[i / 4] >> (8 * (i % 4))) & 0xffu;
    if (harness::record(got == want)) std::printf("FAIL pack4_e4m3(%g): byte %02x, want %02x\n", x[i], got, want);
  }
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dout));
}

// The V^T pre-pass (kernels/fp8_v_transpose.cuh) alone: every byte of V^T [B][Hkv][Dv][vt_len] against the
// definition (position pos of a row holds key 32 (pos / 32) + fp8_p_key(pos % 32), or key pos in order; zero
// past S), on a strided V (rows padded, heads and batches apart) and a length that ends inside a 32-key group
// and inside the block's last 128 (64) keys; V^T poisoned before the run.
template <int kDv, bool kPermute>
void test_v_transpose() {
  constexpr int B = 2, H = 3, S = 300, kPad = 48;
  const int vt_len = (S + 31) / 32 * 32;
  const int64_t row = kDv + kPad, head = static_cast<int64_t>(S) * row + 16, batch = H * head + 32;
  std::vector<uint8_t> v(static_cast<size_t>(B * batch));
  for (uint8_t& x : v) x = static_cast<uint8_t>(rnd());
  std::vector<uint8_t> vt(static_cast<size_t>(B) * H * kDv * vt_len);
  uint8_t *dv, *dvt;
  CUDA_OK(cudaMalloc(&dv, v.size()));
  CUDA_OK(cudaMalloc(&dvt, vt.size()));
  CUDA_OK(cudaMemcpy(dv, v.data(), v.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dvt, 0xab, vt.size()));
  ffpa::FwdParams p{};
  p.v = dv;
  p.v_row_stride = row;
  p.v_head_stride = head;
  p.v_batch_stride = batch;
  p.heads_kv = H;
  p.batch = B;
  p.len_kv = S;
  p.vt = dvt;
  p.vt_len = vt_len;
  constexpr int kKeys = ffpa::kernels::fp8_transpose_keys(kDv);
  ffpa::kernels::fp8_v_transpose_kernel<kDv, kPermute>
      <<<dim3((vt_len + kKeys - 1) / kKeys, H, B), ffpa::kernels::kFp8TransposeThreads>>>(p);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaMemcpy(vt.data(), dvt, vt.size(), cudaMemcpyDeviceToHost));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int c = 0; c < kDv; ++c)
        for (int pos = 0; pos < vt_len; ++pos) {
          const int key = kPermute ? 32 * (pos / 32) + ffpa::fp8_p_key(pos % 32) : pos;
          const uint8_t want = key < S ? v[b * batch + h * head + key * row + c] : 0;
          const uint8_t got = vt[((static_cast<size_t>(b) * H + h) * kDv + c) * vt_len + pos];
          if (harness::record(got == want))
            std::printf("FAIL v_transpose<%d, %d> b %d h %d col %d pos %d: %02x, want %02x\n", kDv, kPermute, b, h, c,
                        pos, got, want);
        }
  CUDA_OK(cudaFree(dv));
  CUDA_OK(cudaFree(dvt));
}

}  // namespace

int main() {
  harness::require_compute_capability(9, 0);
  test_relayout();
  test_pack_rounding();
  test_v_transpose<64, true>();
  test_v_transpose<128, true>();
  test_v_transpose<256, true>();
  test_v_transpose<512, false>();
  test_v_transpose<128, false>();  // the generic forms too
  test_v_transpose<512, true>();
  return harness::report();
}
