// Stand-alone tile/pipeline sweep of the FFPA forward kernel family (no torch): builds several
// Tile variants of one head dim, checks each against the first variant's output on random
// inputs, and prints TFLOPS from CUDA-event medians. For choosing the tile table, not for users.
//
//   nvcc -std=c++17 -O3 -Icsrc -Icsrc/include -gencode=arch=compute_90a,code=sm_90a \
//        -o /tmp/tune_l1 tools/tune_l1.cu && /tmp/tune_l1 [N] [H]
#include "tune_common.cuh"
#include "ffpa/ffpa_traits.h"
#include "ffpa/kernels/ffpa_fwd_sm80.cuh"

struct Problem {
  int B, H, N, D;
  bool causal;
  Elem *q, *k, *v;
};

template <int D, typename Cfg>
void variant(const char* name, const Problem& pr, int stages, Elem* out, Elem* ref, bool is_ref) {
  using Traits = ffpa::FfpaTraits<Elem, D, D, ffpa::Level::kL1, Cfg>;
  auto kernel = ffpa::attn::ffpa_fwd_kernel<Traits>;
  const int smem = Traits::smem_bytes(stages);
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const ffpa::FwdParams p = dense_params(pr.q, pr.k, pr.v, out, pr.B, pr.H, pr.N, D, pr.causal, stages);
  const dim3 grid((pr.N + Traits::kBlockM - 1) / Traits::kBlockM, pr.H, pr.B);
  cudaFuncAttributes attr;
  CK(cudaFuncGetAttributes(&attr, kernel));
  kernel<<<grid, Traits::kThreads, smem>>>(p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  const float diff = is_ref ? 0.f : max_diff(out, ref, (int64_t)pr.B * pr.H * pr.N * D);
  const double t = median_ms([&] { kernel<<<grid, Traits::kThreads, smem>>>(p); }, 2, 10);
  double flops = 4.0 * pr.B * pr.H * (double)pr.N * pr.N * D;
  if (pr.causal) flops = flops * (pr.N + 1) / (2.0 * pr.N);
  std::printf("D=%4d %-34s stages=%d Br=%3d Bc=%3d thr=%3d regs=%3d local=%3d smem=%6d  %7.3f ms  %6.1f TFLOPS  maxdiff=%.2e\n",
              D, name, stages, Traits::kBlockM, Traits::kBlockN, Traits::kThreads, attr.numRegs,
              (int)attr.localSizeBytes, smem, t, flops / t / 1e9, diff);
}

template <int D>
void sweep(int N, int H, bool causal) {
  Problem pr{1, H, N, D, causal, nullptr, nullptr, nullptr};
  const int64_t n = (int64_t)pr.B * H * N * D;
  CK(cudaMalloc(&pr.q, n * 2));
  CK(cudaMalloc(&pr.k, n * 2));
  CK(cudaMalloc(&pr.v, n * 2));
  Elem *out, *ref;
  CK(cudaMalloc(&out, n * 2));
  CK(cudaMalloc(&ref, n * 2));
  fill_random<<<1024, 256>>>(pr.q, n, 1u);
  fill_random<<<1024, 256>>>(pr.k, n, 2u);
  fill_random<<<1024, 256>>>(pr.v, n, 3u);
  using namespace ffpa;
  // Run 3: wider head-dim slices (chunk 192/256) for the head dims whose spill-free tile is still
  // the 2x4 Bc128 c64 one; the first variant of each D is the current table entry.
  if constexpr (D == 448) {
    variant<D, Tile<4, 2, 64, 64>>("table 4x2 Bc64 c64", pr, 3, ref, ref, true);
    variant<D, Tile<4, 2, 128, 64>>("4x2 Bc128 c64 (spills)", pr, 3, out, ref, false);
    variant<D, Tile<2, 4, 128, 64>>("2x4 Bc128 c64", pr, 3, out, ref, false);
  } else if constexpr (D % 192 == 0) {
    variant<D, Tile<2, 4, 128, 64>>("table 2x4 Bc128 c64", pr, 3, ref, ref, true);
    variant<D, Tile<2, 4, 64, 192>>("2x4 Bc64 c192", pr, 2, out, ref, false);
    variant<D, Tile<2, 4, 64, 192>>("2x4 Bc64 c192", pr, 3, out, ref, false);
    variant<D, Tile<2, 4, 128, 192>>("2x4 Bc128 c192", pr, 2, out, ref, false);
  } else {
    variant<D, Tile<2, 4, 128, 64>>("table 2x4 Bc128 c64", pr, 3, ref, ref, true);
    variant<D, Tile<2, 4, 64, 256>>("2x4 Bc64 c256", pr, 2, out, ref, false);
    variant<D, Tile<2, 4, 128, 128>>("2x4 Bc128 c128 (spills)", pr, 2, out, ref, false);
  }
  CK(cudaFree(pr.q));
  CK(cudaFree(pr.k));
  CK(cudaFree(pr.v));
  CK(cudaFree(out));
  CK(cudaFree(ref));
}

int main(int argc, char** argv) {
  const int N = argc > 1 ? std::atoi(argv[1]) : 8192;
  const int H = argc > 2 ? std::atoi(argv[2]) : 32;
  sweep<448>(N, H, false);
  sweep<576>(N, H, false);
  sweep<768>(N, H, false);
  sweep<960>(N, H, false);
  sweep<1024>(N, H, false);
  return 0;
}
