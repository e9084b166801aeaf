// Where the time of L3's persistent grid goes: one traced launch records every work item's start
// and end (%globaltimer) and SM, then prints the makespan, how evenly the blocks were loaded, the
// idle tail, and the cost per KV tile by item length. For scheduling work on L3, not for users.
//
//   nvcc -std=c++17 -O3 --expt-relaxed-constexpr -Icsrc -Icsrc/include -Itools -DFFPA_TRACE_ITEMS \
//        -DTRACE_D=512 -gencode=arch=compute_90a,code=sm_90a -o build_tune/trace_l3 tools/trace_l3.cu
//   build_tune/trace_l3 [N] [H] [causal] [counter: 1 = work counter (as the library), 0 = static stride]
#include "tune_common.cuh"
#include "ffpa/traits/ffpa_traits.h"
#include "ffpa/kernels/ffpa_fwd_sm80.cuh"
#include "launch/heuristics.h"

#ifndef TRACE_D
#define TRACE_D 512
#endif

int main(int argc, char** argv) {
  constexpr int D = TRACE_D;
  const int N = argc > 1 ? std::atoi(argv[1]) : 8192;
  const int H = argc > 2 ? std::atoi(argv[2]) : 32;
  const bool causal = argc > 3 && std::atoi(argv[3]) != 0;
  const bool counter = argc <= 4 || std::atoi(argv[4]) != 0;
  using Traits = ffpa::FfpaTraits<Elem, D, D, ffpa::Level::kL3, ffpa::L3Tile>;
  auto kernel = ffpa::attn::ffpa_fwd_kernel<Traits>;
  const int stages = ffpa::launch::default_stages(Traits::kStageBytes, Traits::smem_bytes(0), 1);
  const int smem = Traits::smem_bytes(stages);
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int64_t n = (int64_t)H * N * D;
  Elem *q, *k, *v, *o;
  CK(cudaMalloc(&q, n * 2));
  CK(cudaMalloc(&k, n * 2));
  CK(cudaMalloc(&v, n * 2));
  CK(cudaMalloc(&o, n * 2));
  fill_random<<<1024, 256>>>(q, n, 1u);
  fill_random<<<1024, 256>>>(k, n, 2u);
  fill_random<<<1024, 256>>>(v, n, 3u);
  ffpa::FwdParams p = dense_params(q, k, v, o, 1, H, N, D, causal, stages);
  const int m_blocks = (N + Traits::kBlockM - 1) / Traits::kBlockM;
  const int items = m_blocks * H;
  int per_sm = 0, sms = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Traits::kThreads, smem));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int grid = std::min(per_sm * sms, items);
  float* ws;
  CK(cudaMalloc(&ws, (size_t)grid * Traits::kBlockM * D * 4));
  p.o_accum = ws, p.o_accum_slots = grid;
  int* d_counter;
  CK(cudaMalloc(&d_counter, 4));
  uint64_t* trace;
  CK(cudaMalloc(&trace, (size_t)items * 3 * 8));
  CK(cudaMemcpyToSymbol(ffpa::attn::g_ffpa_trace, &trace, sizeof(trace)));
  p.work_counter = counter ? d_counter : nullptr;
  for (int i = 0; i < 3; ++i) {  // warm-up; the last is traced
    CK(cudaMemsetAsync(d_counter, 0, 4));
    kernel<<<grid, Traits::kThreads, smem>>>(p);
  }
  CK(cudaDeviceSynchronize());
  std::vector<uint64_t> t((size_t)items * 3);
  CK(cudaMemcpy(t.data(), trace, t.size() * 8, cudaMemcpyDeviceToHost));

  uint64_t t_min = ~0ull, t_max = 0;
  for (int i = 0; i < items; ++i) t_min = std::min(t_min, t[3 * i]), t_max = std::max(t_max, t[3 * i + 1]);
  std::vector<double> busy(grid, 0.0), end(grid, 0.0), tiles_of(grid, 0.0);
  std::vector<double> ns_per_tile_by_len(m_blocks + 1, 0.0);
  std::vector<int> count_by_len(m_blocks + 1, 0);
  for (int i = 0; i < items; ++i) {
    const int b = static_cast<int>(t[3 * i + 2]) % grid;  // one block per SM: the SM names the block
    const double d = double(t[3 * i + 1] - t[3 * i]);
    busy[b] += d;
    end[b] = std::max(end[b], double(t[3 * i + 1] - t_min));
    const int m = m_blocks - 1 - i % m_blocks;  // head-major item order, heaviest first
    const int tiles = causal ? (std::min(N, (m + 1) * Traits::kBlockM) + Traits::kBlockN - 1) / Traits::kBlockN
                             : (N + Traits::kBlockN - 1) / Traits::kBlockN;
    ns_per_tile_by_len[tiles] += d / tiles;
    tiles_of[b] += tiles;
    count_by_len[tiles] += 1;
  }
  const double span = double(t_max - t_min);
  double bsum = 0, bmax = 0, bmin = 1e30, emin = 1e30;
  for (int b = 0; b < grid; ++b) bsum += busy[b], bmax = std::max(bmax, busy[b]), bmin = std::min(bmin, busy[b]),
                                 emin = std::min(emin, end[b]);
  double flops = 4.0 * H * (double)N * N * D;
  if (causal) flops = flops * (N + 1) / (2.0 * N);
  std::printf("D=%d N=%d H=%d causal=%d counter=%d grid=%d items=%d stages=%d: makespan %.3f ms (%.1f TFLOPS)\n", D,
              N, H, causal, counter, grid, items, stages, span / 1e6, flops / span / 1e3);
  std::printf("  block busy: mean %.3f  min %.3f  max %.3f ms; utilisation %.1f%%; first block done at %.3f ms\n",
              bsum / grid / 1e6, bmin / 1e6, bmax / 1e6, 100.0 * bsum / (grid * span), emin / 1e6);
  std::printf("  ns per KV tile by item length (tiles: ns/tile, items):");
  for (int l = 1; l <= m_blocks; ++l)
    if (count_by_len[l] && (l == 1 || l == 2 || l % 8 == 0 || l == m_blocks))
      std::printf(" %d:%.0f(%d)", l, ns_per_tile_by_len[l] / count_by_len[l], count_by_len[l]);
  std::printf("\n");
  // Spread over blocks (one per SM): tiles each was given and its ns per tile.
  double tmin = 1e30, tmax = 0, rmin = 1e30, rmax = 0;
  for (int b = 0; b < grid; ++b) {
    tmin = std::min(tmin, tiles_of[b]), tmax = std::max(tmax, tiles_of[b]);
    rmin = std::min(rmin, busy[b] / tiles_of[b]), rmax = std::max(rmax, busy[b] / tiles_of[b]);
  }
  std::printf("  tiles per block: min %.0f max %.0f; ns per tile per block: min %.0f max %.0f\n", tmin, tmax, rmin, rmax);
  return 0;
}
