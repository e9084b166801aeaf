// Stand-alone tile/pipeline sweep of the FFPA forward kernel family (no torch): builds several
// Tile variants of one head dim and level, checks each against the first variant's output on
// random inputs, and prints TFLOPS from CUDA-event medians. For choosing the tile tables, not
// for users. L3 variants get the persistent grid and workspace the launcher would give them.
//
//   nvcc -std=c++17 -O3 --expt-relaxed-constexpr -Icsrc -Icsrc/include \
//        -gencode=arch=compute_90a,code=sm_90a -o build_tune/tune_l1 tools/tune_l1.cu
//   build_tune/tune_l1 [N] [H]
#include "tune_common.cuh"
#include "ffpa/traits/ffpa_traits.h"
#include "ffpa/kernels/ffpa_fwd_sm80.cuh"
#include "launch/heuristics.h"

struct Problem {
  int B, H, N, D;
  bool causal;
  Elem *q, *k, *v;
};

// kStatic > 0: the kernel compiled for that ring depth (stages is then kStatic).
template <int D, typename Cfg, ffpa::Level kLevel = ffpa::Level::kL1, int kStatic = 0>
void variant(const char* name, const Problem& pr, int stages, Elem* out, Elem* ref, bool is_ref) {
  using Traits = ffpa::FfpaTraits<Elem, D, D, kLevel, Cfg>;
  auto kernel = ffpa::attn::ffpa_fwd_kernel<Traits, kStatic>;
  if (kStatic > 0) stages = kStatic;
  if (stages <= 0)
    stages = ffpa::launch::default_stages(Traits::kStageBytes, Traits::smem_bytes(0), Traits::kMinBlocksPerSm, Traits::kStages);
  const int smem = Traits::smem_bytes(stages);
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  ffpa::FwdParams p = dense_params(pr.q, pr.k, pr.v, out, pr.B, pr.H, pr.N, D, pr.causal, stages);
  dim3 grid((pr.N + Traits::kBlockM - 1) / Traits::kBlockM * Traits::kGroups, pr.H, pr.B);
  float* ws = nullptr;
  if constexpr (kLevel == ffpa::Level::kL3) {
    int per_sm = 0, sms = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Traits::kThreads, smem));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int items = grid.x * grid.y * grid.z;
    grid = dim3(per_sm * sms < items ? per_sm * sms : items, 1, 1);
    CK(cudaMalloc(&ws, (size_t)grid.x * Traits::kBlockM * D * 4));
    p.o_accum = ws, p.o_accum_slots = grid.x;
  }
  cudaFuncAttributes attr;
  CK(cudaFuncGetAttributes(&attr, kernel));
  kernel<<<grid, Traits::kThreads, smem>>>(p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  const float diff = is_ref ? 0.f : max_diff(out, ref, (int64_t)pr.B * pr.H * pr.N * D);
  const double t = median_ms([&] { kernel<<<grid, Traits::kThreads, smem>>>(p); }, 2, 10);
  double flops = 4.0 * pr.B * pr.H * (double)pr.N * pr.N * D;
  if (pr.causal) flops = flops * (pr.N + 1) / (2.0 * pr.N);
  std::printf("D=%4d L%d %-30s stages=%d Br=%3d Bc=%3d thr=%3d regs=%3d local=%3d smem=%6d grid=%5d  %7.3f ms  %6.1f TFLOPS  maxdiff=%.2e\n",
              D, static_cast<int>(kLevel), name, stages, Traits::kBlockM, Traits::kBlockN, Traits::kThreads,
              attr.numRegs, (int)attr.localSizeBytes, smem, grid.x, t, flops / t / 1e9, diff);
  if (ws) CK(cudaFree(ws));
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
  constexpr auto kPad = SmemLayout::kPad;
  // Run 7 (session 4): wider head-dim slices per pipeline step (fewer barriers per KV tile), with
  // padded rows where the XOR swizzle cannot cover the width (160, 224). The first variant of
  // each D is L1's table entry at its default stage count: the reference output and speed.
  if constexpr (D <= 1024) variant<D, L1Tile<D, D>>("L1 table", pr, 0, ref, ref, true);
  else variant<D, L3Tile, Level::kL3>("L3 table", pr, 0, ref, ref, true);
  // Runs 10-11: L3 with wider KV tiles (more FLOPs per byte of K/V and workspace traffic);
  // run 12: the adopted Bc = 256 tile (P re-read per k-step) against L1 from D = 576.
  if constexpr (D >= 576) {
    if constexpr (D <= 1024) variant<D, L3Tile, Level::kL3>("L3 table 4x2 Bc256 c64 pad", pr, 0, out, ref, false);
    variant<D, Tile<4, 2, 128, 64>, Level::kL3>("L3 4x2 Bc128 c64 (session 3)", pr, 3, out, ref, false);
    variant<D, Tile<4, 2, 224, 64, false, 0, 1, kPad>, Level::kL3>("L3 4x2 Bc224 c64 pad", pr, 2, out, ref, false);
  }
  // Run 14 (session 5): the same kernels with the ring depth fixed at compile time.
  if constexpr (D <= 1024) {
    variant<D, L1Tile<D, D>, Level::kL1, 2>("L1 table, static 2 stages", pr, 0, out, ref, false);
    variant<D, L1Tile<D, D>, Level::kL1, 3>("L1 table, static 3 stages", pr, 0, out, ref, false);
  }
  if constexpr (D >= 576) {
    variant<D, L3Tile, Level::kL3>("L3 table, dynamic", pr, 0, out, ref, false);
    variant<D, L3Tile, Level::kL3, 2>("L3 table, static 2 stages", pr, 0, out, ref, false);
    variant<D, L3Tile, Level::kL3, 3>("L3 table, static 3 stages", pr, 0, out, ref, false);
  }
  // Run 13 (session 5): D = 320, the one head dim short of its target: L3's Bc = 256 tile, L1 with
  // Bc = 256, and warps split along the rows only (FA-2's shape, the head dim still sliced).
  if constexpr (D == 320) {
    variant<D, L3Tile, Level::kL3>("L3 table 4x2 Bc256 c64 pad", pr, 0, out, ref, false);
    variant<D, Tile<4, 2, 256, 64, false, 0, 1, kPad>>("L1 4x2 Bc256 c64 pad", pr, 0, out, ref, false);
    variant<D, Tile<8, 1, 64, 64, false, 0, 1, kPad>>("L1 8x1 Bc64 c64 pad", pr, 0, out, ref, false);
    variant<D, Tile<4, 1, 64, 64, false, 0, 1, kPad>>("L1 4x1 Bc64 c64 pad", pr, 0, out, ref, false);
    variant<D, Tile<8, 1, 32, 64, false, 0, 1, kPad>>("L1 8x1 Bc32 c64 pad", pr, 0, out, ref, false);
  }
  CK(cudaFree(pr.q));
  CK(cudaFree(pr.k));
  CK(cudaFree(pr.v));
  CK(cudaFree(out));
  CK(cudaFree(ref));
}

// One head dim per binary (-DTUNE_D=320) keeps each compile short; without it, every D of run 7.
int main(int argc, char** argv) {
  const int N = argc > 1 ? std::atoi(argv[1]) : 8192;
  const int H = argc > 2 ? std::atoi(argv[2]) : 32;
  const bool causal = argc > 3 && std::atoi(argv[3]) != 0;
#ifdef TUNE_D
  sweep<TUNE_D>(N, H, causal);
#else
  sweep<320>(N, H, causal);
  sweep<384>(N, H, causal);
  sweep<448>(N, H, causal);
  sweep<512>(N, H, causal);
  sweep<576>(N, H, causal);
  sweep<640>(N, H, causal);
  sweep<768>(N, H, causal);
  sweep<1024>(N, H, causal);
  sweep<2048>(N / 2, H, causal);
#endif
  return 0;
}
