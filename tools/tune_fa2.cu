// Stand-alone tile/pipeline sweep of the FA-2 forward kernel family (no torch): builds several
// Fa2Tile variants per head dim, checks each against the first variant's output on random
// inputs, and prints TFLOPS from CUDA-event medians. For choosing the FA-2 tile table.
//
//   nvcc -std=c++17 -O3 --expt-relaxed-constexpr -Icsrc -Icsrc/include \
//        -gencode=arch=compute_90a,code=sm_90a -o /tmp/tune_fa2 tools/tune_fa2.cu
//   /tmp/tune_fa2 [B H N causal]      (default 1 32 8192 0)
#include "tune_common.cuh"
#include "ffpa/traits/fa2_traits.h"
#include "ffpa/kernels/fa2_fwd_sm90.cuh"

struct Problem {
  int B, H, N;
  bool causal;
  Elem *q, *k, *v, *out, *ref;
};

template <int D, typename Cfg>
void variant(const char* name, const Problem& pr, int stages, bool is_ref) {
  using Traits = ffpa::Fa2Traits<Elem, D, D, Cfg>;
  auto kernel = ffpa::attn::fa2_fwd_kernel_any<Traits>(stages);
  if (kernel == nullptr) return;
  const int smem = Traits::smem_bytes(stages);
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) {
    std::printf("D=%4d %-28s stages=%d smem=%d: does not fit\n", D, name, stages, smem);
    cudaGetLastError();
    return;
  }
  Elem* out = is_ref ? pr.ref : pr.out;
  const ffpa::FwdParams p = dense_params(pr.q, pr.k, pr.v, out, pr.B, pr.H, pr.N, D, pr.causal, stages);
  const dim3 grid((pr.N + Traits::kBlockM - 1) / Traits::kBlockM, pr.H, pr.B);
  cudaFuncAttributes attr;
  CK(cudaFuncGetAttributes(&attr, kernel));
  kernel<<<grid, Traits::kThreads, smem>>>(p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  const float diff = is_ref ? 0.f : max_diff(out, pr.ref, (int64_t)pr.B * pr.H * pr.N * D);
  const double t = median_ms([&] { kernel<<<grid, Traits::kThreads, smem>>>(p); }, 3, 12);
  double flops = 4.0 * pr.B * pr.H * (double)pr.N * pr.N * D;
  if (pr.causal) flops = flops * (pr.N + 1) / (2.0 * pr.N);
  std::printf("D=%4d %-28s stages=%d Br=%3d Bc=%3d thr=%3d regs=%3d local=%3d smem=%6d  %7.3f ms  %6.1f TFLOPS  maxdiff=%.2e\n",
              D, name, stages, Traits::kBlockM, Traits::kBlockN, Traits::kThreads, attr.numRegs,
              (int)attr.localSizeBytes, smem, t, flops / t / 1e9, diff);
}

template <int D>
void sweep(int B, int H, int N, bool causal) {
  Problem pr{B, H, N, causal};
  const int64_t n = (int64_t)B * H * N * D;
  CK(cudaMalloc(&pr.q, n * 2));
  CK(cudaMalloc(&pr.k, n * 2));
  CK(cudaMalloc(&pr.v, n * 2));
  CK(cudaMalloc(&pr.out, n * 2));
  CK(cudaMalloc(&pr.ref, n * 2));
  fill_random<<<1024, 256>>>(pr.q, n, 1u);
  fill_random<<<1024, 256>>>(pr.k, n, 2u);
  fill_random<<<1024, 256>>>(pr.v, n, 3u);
  using ffpa::Fa2Tile;
  // The first variant of each D is the reference (the current table entry).
  variant<D, ffpa::Fa2TileFor<D>>("table", pr, 2, true);
  variant<D, ffpa::Fa2TileFor<D>>("table", pr, 3, false);
#if defined(TUNE_WGMMA)
  // Runs 13-15 (session 6): the Hopper kernel (fa2_fwd_sm90.cuh), warpgroups x key tile x
  // residency. Run 15: narrower key tiles (Bc = 48, 32) to shed the spills of the 2-block and
  // 3-warpgroup tiles.
  using ffpa::Fa2WgmmaTile;
  if constexpr (D <= 256) {
    variant<D, ffpa::Fa2WgmmaTileFor<D>>("wgmma table", pr, 2, false);
    variant<D, ffpa::Fa2WgmmaTileFor<D>>("wgmma table", pr, 3, false);
  }
  if constexpr (D <= 128) {
    variant<D, Fa2WgmmaTile<2, 48, 2>>("wg2 Bc48 2blk", pr, 3, false);
    variant<D, Fa2WgmmaTile<2, 32, 2>>("wg2 Bc32 2blk", pr, 3, false);
    variant<D, Fa2WgmmaTile<1, 64, 2>>("wg1 Bc64 2blk", pr, 3, false);
  }
  if constexpr (D > 128 && D <= 192) {
    variant<D, Fa2WgmmaTile<3, 48, 1>>("wg3 Bc48", pr, 3, false);
    variant<D, Fa2WgmmaTile<3, 32, 1>>("wg3 Bc32", pr, 3, false);
    variant<D, Fa2WgmmaTile<2, 64, 1>>("wg2 Bc64", pr, 3, false);
  }
  // Run 16: past 256 (P@V as two wgmmas, 256 + the rest): 320 and 384.
  if constexpr (D > 256) {
    variant<D, Fa2WgmmaTile<2, 32, 1>>("wg2 Bc32", pr, 2, false);
    variant<D, Fa2WgmmaTile<2, 32, 1>>("wg2 Bc32", pr, 3, false);
    variant<D, Fa2WgmmaTile<2, 64, 1>>("wg2 Bc64", pr, 2, false);
    variant<D, Fa2WgmmaTile<2, 48, 1>>("wg2 Bc48", pr, 3, false);
    variant<D, Fa2WgmmaTile<1, 32, 2>>("wg1 Bc32 2blk", pr, 2, false);
    variant<D, Fa2WgmmaTile<1, 64, 2>>("wg1 Bc64 2blk", pr, 2, false);
  }
#else
  // Run 7: wider tiles where registers allow (D=32: Bc 128; 8 warps x 2 m-tiles = 256 rows).
  if constexpr (D <= 32) {
    variant<D, Fa2Tile<4, 2, 128, true, 1>>("4w x2 Bc128 qreg", pr, 3, false);
    variant<D, Fa2Tile<4, 2, 128, false, 1, true, true>>("4w x2 Bc128 earlyV", pr, 3, false);
    variant<D, Fa2Tile<8, 2, 64, false, 1, true, true>>("8w x2 Bc64 earlyV", pr, 3, false);
  } else if constexpr (D <= 64) {
    variant<D, Fa2Tile<8, 2, 64, false, 1, true, true>>("8w x2 Bc64 earlyV", pr, 3, false);
    variant<D, Fa2Tile<4, 2, 64, true, 2, true, true>>("4w x2 Bc64 qreg 2blk earlyV", pr, 3, false);
  } else if constexpr (D <= 96) {
    variant<D, Fa2Tile<8, 2, 64, false, 1, true, true>>("8w x2 Bc64 earlyV", pr, 3, false);
    variant<D, Fa2Tile<4, 2, 64, false, 1, true, true>>("4w x2 Bc64 pf earlyV", pr, 3, false);
    variant<D, Fa2Tile<4, 2, 64, false, 1, false, false>>("4w x2 Bc64 nopf", pr, 3, false);
    variant<D, Fa2Tile<4, 2, 64, false, 1, false, true>>("4w x2 Bc64 nopf earlyV 2st", pr, 2, false);
  } else if constexpr (D > 256) {
    // Session 5: the coarse tiling past its table (D = 320), against FFPA L1 in tune_l1 run 13.
    variant<D, Fa2Tile<8, 1, 64, false, 1, false, true>>("8w x1 Bc64 nopf earlyV", pr, 2, false);
    variant<D, Fa2Tile<8, 1, 32, false, 1, false, true>>("8w x1 Bc32 nopf earlyV", pr, 3, false);
    variant<D, Fa2Tile<8, 1, 32, false, 1, false, false>>("8w x1 Bc32 nopf", pr, 3, false);
    variant<D, Fa2Tile<4, 1, 32, false, 1, false, true>>("4w x1 Bc32 nopf earlyV", pr, 3, false);
    variant<D, Fa2Tile<8, 1, 48, false, 1, false, true>>("8w x1 Bc48 nopf earlyV", pr, 3, false);
    variant<D, Fa2Tile<8, 1, 16, false, 1, false, true>>("8w x1 Bc16 nopf earlyV", pr, 4, false);
  } else {
    variant<D, Fa2Tile<8, 1, 64, false, 1, false, true>>("8w x1 Bc64 nopf earlyV", pr, 2, false);
    variant<D, Fa2Tile<4, 1, 64, false, 1, false, true>>("4w x1 Bc64 nopf earlyV", pr, 3, false);
    variant<D, Fa2Tile<8, 2, 32, false, 1, false, true>>("8w x2 Bc32 nopf earlyV", pr, 2, false);
    // Run 11 (session 5): after run 10 freed registers, wider or doubled tiles again.
    variant<D, Fa2Tile<4, 1, 64, false, 1, false, false>>("4w x1 Bc64 nopf", pr, 3, false);
    variant<D, Fa2Tile<8, 1, 64, false, 1, false, false>>("8w x1 Bc64 nopf", pr, 2, false);
    variant<D, Fa2Tile<4, 1, 128, false, 1, false, true>>("4w x1 Bc128 nopf earlyV", pr, 2, false);
  }
#endif
  CK(cudaFree(pr.q));
  CK(cudaFree(pr.k));
  CK(cudaFree(pr.v));
  CK(cudaFree(pr.out));
  CK(cudaFree(pr.ref));
}

int main(int argc, char** argv) {
  const int B = argc > 1 ? std::atoi(argv[1]) : 1;
  const int H = argc > 2 ? std::atoi(argv[2]) : 32;
  const int N = argc > 3 ? std::atoi(argv[3]) : 8192;
  const bool causal = argc > 4 && std::atoi(argv[4]) != 0;
#if defined(TUNE_D)
  sweep<TUNE_D>(B, H, N, causal);  // -DTUNE_D=320: one head dim (the table beyond 256 is for study)
#elif !defined(TUNE_DIMS)
  sweep<32>(B, H, N, causal);
  sweep<64>(B, H, N, causal);
  sweep<96>(B, H, N, causal);
  sweep<192>(B, H, N, causal);
#else
  TUNE_DIMS
#endif
  return 0;
}
