// Development probe (not part of the build): how fast blocks stream a decode cache from HBM by TMA,
// with no attention work, against a plain vectorised read and a device-to-device copy of the same
// run. It separates what the decode kernels' load pattern can reach from what their consumers cost:
// each block's consumer warpgroup waits for a stage, spins `delay` cycles (a stand-in for the tile's
// math), touches the stage and releases it.
//
// Patterns: "mla" (one cache, rows of 576 bf16 = 1152 bytes, contiguous: MLA's B=16 S=16384 cache)
// and "gqa" (8 KV heads of 128 bf16 interleaved per position: rows of 256 bytes 2 KiB apart, a
// block per head and key range: K of B=8 S=32768 32/8 D=128). A tile is `tile_rows` rows loaded as
// 64-column boxes (128-byte swizzle, as the kernels load them); `stages` tiles in the ring.
//
// Build and run on the device:
//   nvcc -std=c++17 -O3 -arch=sm_90a -Icsrc/include -Icsrc scripts/dev/stream_probe.cu -o /tmp/sp && /tmp/sp
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ffpa/ptx/cp_async.cuh"
#include "ffpa/ptx/mbarrier.cuh"
#include "ffpa/ptx/tma.cuh"
#include "launch/tma_desc.h"

using namespace ffpa;

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

struct Cfg {
  int heads;       // blocks of one key range go to heads round robin
  int rows;        // positions per head
  int cols;        // bf16 columns a row
  int tile_rows;   // rows a stage
  int stages;
  int blocks;
  int delay;       // consumer cycles per tile
  int mode = 0;    // 0: a box per 64-column chunk (tile_rows x 128 bytes); 1: a box per 8 rows (8 x all
                   // chunks, landing as 1 KiB swizzle atoms chunk after chunk); 2: the tile in one box
};

// Dynamic shared memory: stages x tile, then 2 x stages mbarriers.
__global__ void __launch_bounds__(160) tma_stream(const __grid_constant__ CUtensorMap map, Cfg c, int* sink) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int chunks = c.cols / 64;
  const int tile_bytes = c.tile_rows * c.cols * 2;
  const uint32_t base = ptx::smem_u32addr(smem);
  const uint32_t bars = base + c.stages * tile_bytes;
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < c.stages; ++s) {
      ptx::mbarrier_init(bars + 8 * s, 1);                 // full
      ptx::mbarrier_init(bars + 8 * (c.stages + s), 128);  // empty
    }
    ptx::fence_barrier_init();
  }
  __syncthreads();
  const int head = blockIdx.x % c.heads;
  const int parts = gridDim.x / c.heads;
  const int part = blockIdx.x / c.heads;
  const int tiles_total = c.rows / c.tile_rows;
  const int t0 = static_cast<int>(static_cast<long long>(tiles_total) * part / parts);
  const int t1 = static_cast<int>(static_cast<long long>(tiles_total) * (part + 1) / parts);
  if (warp == 0) {
    if (threadIdx.x == 0) {
      ptx::tma_prefetch_map(&map);
      for (int t = t0; t < t1; ++t) {
        const int k = t - t0, s = k % c.stages;
        if (k >= c.stages) ptx::mbarrier_wait_parity(bars + 8 * (c.stages + s), ((k / c.stages) - 1) & 1);
        ptx::mbarrier_arrive_expect_tx(bars + 8 * s, tile_bytes);
        if (c.mode == 0) {
          for (int ch = 0; ch < chunks; ++ch)
            ptx::tma_load_3d(base + s * tile_bytes + ch * c.tile_rows * 128, &map, bars + 8 * s, 64 * ch,
                             t * c.tile_rows, head);
        } else if (c.mode == 1) {
          for (int g = 0; g < c.tile_rows / 8; ++g)
            ptx::tma_load_3d(base + s * tile_bytes + g * chunks * 1024, &map, bars + 8 * s, 0, t * c.tile_rows + 8 * g, 0);
        } else {
          ptx::tma_load_4d(base + s * tile_bytes, &map, bars + 8 * s, 0, 0, 0, t * c.tile_rows / 8);
        }
      }
    }
    return;
  }
  int acc = 0;
  const int tid = threadIdx.x - 32;
  for (int t = t0; t < t1; ++t) {
    const int k = t - t0, s = k % c.stages;
    ptx::mbarrier_wait_parity(bars + 8 * s, (k / c.stages) & 1);
    if (c.delay > 0) {
      const long long start = clock64();
      while (clock64() - start < c.delay) {
      }
    }
    acc += reinterpret_cast<const int*>(smem + s * tile_bytes)[tid * 4];
    ptx::mbarrier_arrive(bars + 8 * (c.stages + s));
  }
  if (acc == 0x12345678) sink[0] = acc;
}

// A grid-stride read of 16-byte units, 4 in flight a thread.
__global__ void ldg_stream(const int4* __restrict__ p, size_t n, int* sink) {
  int4 a = {0, 0, 0, 0};
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const int4 x0 = __ldcs(p + i), x1 = __ldcs(p + i + stride), x2 = __ldcs(p + i + 2 * stride),
               x3 = __ldcs(p + i + 3 * stride);
    a.x ^= x0.x ^ x1.x ^ x2.x ^ x3.x;
    a.y ^= x0.y ^ x1.y ^ x2.y ^ x3.y;
  }
  for (; i < n; i += stride) a.x ^= __ldcs(p + i).x;
  if (a.x == 0x12345678 && a.y == 0x1234) sink[0] = a.x;
}

static void* g_flush = nullptr;
static const size_t kFlush = 256u << 20;
// 0: memset (leaves the L2 full of dirty lines); 1: a read of the buffer (plain loads); 2: a memset,
// then that read; 3: a read by evict-first loads
static int g_flush_mode = 0;
static int* g_sink = nullptr;
static int g_sms = 132;
__global__ void ldg_stream(const int4* __restrict__ p, size_t n, int* sink);
__global__ void plain_read(const int4* p, size_t n, int* sink) {
  int a = 0;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    a ^= p[i].x;
  if (a == 0x12345678) sink[0] = a;
}
static void flush_l2(int i) {
  if (g_flush_mode == 0 || g_flush_mode == 2) CK(cudaMemsetAsync(g_flush, i & 0xff, kFlush));
  if (g_flush_mode == 1 || g_flush_mode == 2)
    plain_read<<<g_sms * 8, 256>>>(static_cast<const int4*>(g_flush), kFlush / 16, g_sink);
  if (g_flush_mode == 3) ldg_stream<<<g_sms * 8, 256>>>(static_cast<const int4*>(g_flush), kFlush / 16, g_sink);
}

template <typename F>
static float median_ms(F&& f, int iters = 15) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  f();
  f();
  std::vector<float> ts;
  for (int i = 0; i < iters; ++i) {
    flush_l2(i);
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

int main(int argc, char** argv) {
  const bool size_sweep = argc > 1;
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  CK(cudaMalloc(&g_flush, kFlush));
  int* sink;
  CK(cudaMalloc(&sink, 64));
  const size_t bytes = 1ull << 30;
  void* buf;
  CK(cudaMalloc(&buf, bytes));
  CK(cudaMemset(buf, 1, bytes));
  void* dst;
  CK(cudaMalloc(&dst, bytes));
  CK(cudaFuncSetAttribute(tma_stream, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));

  const float copy_ms = median_ms([&] { CK(cudaMemcpyAsync(dst, buf, bytes, cudaMemcpyDeviceToDevice)); });
  const double copy_gbps = 2.0 * bytes / (copy_ms * 1e-3) / 1e9;
  const float ldg_ms = median_ms([&] { ldg_stream<<<sms * 8, 256>>>(static_cast<const int4*>(buf), bytes / 16, sink); });
  std::printf("%s, %d SMs: copy ceiling %.0f GB/s; plain 16-byte reads of 1 GiB %.0f GB/s (%.2fx copy)\n", prop.name,
              sms, copy_gbps, bytes / (ldg_ms * 1e-3) / 1e9, bytes / (ldg_ms * 1e-3) / 1e9 / copy_gbps);
  std::printf("pattern | tile rows x bytes | stages | blocks (per SM) | delay | GB/s | x copy\n");

  struct Run {
    const char* name;
    Cfg c;
    int per_sm;  // blocks an SM may hold (through the shared memory asked for)
  };
  std::vector<Run> runs;
  const int mla_rows = 16 * 16384, gqa_rows = 8 * 32768;
  auto run_one = [&](const Run& r) {
    const Cfg& c = r.c;
    CUtensorMap map;
    launch::TmaTensor t;
    t.base = buf;
    t.elem = launch::TmaElem::kBFloat16;
    t.rank = 3;
    t.dims[0] = c.cols;
    t.dims[1] = c.rows;
    t.dims[2] = c.heads;
    t.strides[1] = static_cast<uint64_t>(c.cols) * 2 * c.heads;  // positions: all heads' rows
    t.strides[2] = static_cast<uint64_t>(c.cols) * 2;            // heads interleaved per position
    if (c.heads == 1) t.strides[2] = t.strides[1] * c.rows;
    t.box[0] = 64;
    t.box[1] = c.tile_rows;
    t.box[2] = 1;
    if (c.mode == 1) {  // (64 columns, position, chunk)
      t.dims[2] = c.cols / 64;
      t.strides[2] = 128;
      t.box[1] = 8;
      t.box[2] = c.cols / 64;
    } else if (c.mode == 2) {  // (64 columns, 8 positions, chunk, 8-position group)
      t.rank = 4;
      t.dims[1] = 8;
      t.dims[2] = c.cols / 64;
      t.dims[3] = c.rows / 8;
      t.strides[1] = static_cast<uint64_t>(c.cols) * 2;
      t.strides[2] = 128;
      t.strides[3] = static_cast<uint64_t>(c.cols) * 2 * 8;
      t.box[1] = 8;
      t.box[2] = c.cols / 64;
      t.box[3] = c.tile_rows / 8;
    }
    alignas(64) static CUtensorMap m;
    if (launch::encode_tma(&m, t, launch::TmaSwizzle::k128B) != cudaSuccess) {
      std::printf("encode failed\n");
      std::exit(1);
    }
    map = m;
    const int tile_bytes = c.tile_rows * c.cols * 2;
    const size_t need = static_cast<size_t>(c.stages) * tile_bytes + 16 * c.stages;
    const size_t smem = std::max(need, static_cast<size_t>(220 * 1024 / r.per_sm));
    const double moved = static_cast<double>(c.rows) * c.cols * 2 * c.heads;
    const float ms = median_ms([&] { tma_stream<<<c.blocks, 160, smem>>>(map, c, sink); });
    CK(cudaGetLastError());
    const double gbps = moved / (ms * 1e-3) / 1e9;
    std::printf("%s | %d x %d | %d | %d (%d) | %d | %.0f | %.2f\n", r.name, c.tile_rows, c.cols * 2, c.stages, c.blocks,
                r.per_sm, c.delay, gbps, gbps / copy_gbps);
  };
  g_sink = sink;
  g_sms = sms;
  if (size_sweep) {
   for (int fm : {0, 1, 2, 3}) {
    g_flush_mode = fm;
    const char* how[] = {"a memset of 256 MiB", "a read of 256 MiB", "a memset, then a read", "a read by evict-first loads"};
    std::printf("-- L2 flushed by %s\n", how[fm]);
    for (size_t mb : {151, 302, 906}) {
      const size_t n = (mb << 20) / 16;
      const float r_ms = median_ms([&] { ldg_stream<<<sms * 8, 256>>>(static_cast<const int4*>(buf), n, sink); });
      const float c_ms = median_ms([&] { CK(cudaMemcpyAsync(dst, buf, n * 16 / 2, cudaMemcpyDeviceToDevice)); });
      std::printf("%zu MiB: plain reads %.2fx copy, a copy of half of it %.2fx\n", mb, n * 16 / (r_ms * 1e-3) / 1e9 / copy_gbps,
                  n * 16 / (c_ms * 1e-3) / 1e9 / copy_gbps);
      run_one({"mla by TMA, this size", {1, static_cast<int>((mb << 20) / 1152 / 64 * 64), 576, 64, 2, 128, 0}, 1});
    }
   }
  }
  // FLUSH=0..3 picks the L2 flush of the timed runs below (default 0, the memset; the bench flushes by a
  // read, 1). PROBE=stages: only MLA's cache at 1 block an SM, tile rows x stages that fit beside Q
  // (64 x 2, 56 x 3, 48 x 3, 32 x 6) and 64 x 3 (no Q), 128 blocks (MLA 16/1's grid) and one per SM.
  // PROBE=delay: MLA 16/1's ring (64 x 2, 128 blocks) at consumer delays up to 9000 cycles a tile, to read
  // off the delay at which the bare stream falls to the narrow kernel's 0.85 (docs/tuning_decode.md, session 33).
  if (const char* f = std::getenv("FLUSH")) g_flush_mode = std::atoi(f);
  const bool stages_only = std::getenv("PROBE") != nullptr && std::string(std::getenv("PROBE")) == "stages";
  if (std::getenv("PROBE") != nullptr && std::string(std::getenv("PROBE")) == "delay") {
    for (int delay : {0, 1500, 3000, 4500, 6000, 7500, 9000}) runs.push_back({"mla", {1, mla_rows, 576, 64, 2, 128, delay}, 1});
  }
  if (stages_only) {
    for (int delay : {0, 1500, 3000}) {
      for (int blocks : {128, sms}) {
        runs.push_back({"mla", {1, mla_rows, 576, 64, 2, blocks, delay}, 1});
        runs.push_back({"mla", {1, mla_rows, 576, 56, 3, blocks, delay * 56 / 64}, 1});
        runs.push_back({"mla", {1, mla_rows, 576, 48, 3, blocks, delay * 48 / 64}, 1});
        runs.push_back({"mla", {1, mla_rows, 576, 64, 3, blocks, delay}, 1});
        runs.push_back({"mla", {1, mla_rows, 576, 32, 6, blocks, delay / 2}, 1});
      }
    }
  }
  if (!size_sweep && !stages_only && std::getenv("PROBE") == nullptr) {
  for (int delay : {0, 1500, 3000, 4500}) {
    runs.push_back({"mla", {1, mla_rows, 576, 64, 2, 128, delay}, 1});
    runs.push_back({"mla", {1, mla_rows, 576, 64, 2, sms, delay}, 1});
    runs.push_back({"mla", {1, mla_rows, 576, 64, 3, sms, delay}, 1});
    runs.push_back({"mla", {1, mla_rows, 576, 32, 4, sms, delay / 2}, 1});
    runs.push_back({"mla", {1, mla_rows, 576, 32, 6, sms, delay / 2}, 1});
    runs.push_back({"mla", {1, mla_rows, 576, 32, 2, 2 * sms, delay / 2}, 2});
    runs.push_back({"mla", {1, mla_rows, 576, 32, 3, 2 * sms, delay / 2}, 2});
  }
  for (int delay : {0, 1500, 3000, 4500}) {
    for (int mode : {1, 2}) {
      const char* nm = mode == 1 ? "mla 8-row boxes" : "mla one box";
      runs.push_back({nm, {1, mla_rows, 576, 64, 2, 128, delay, mode}, 1});
      runs.push_back({nm, {1, mla_rows, 576, 64, 2, sms, delay, mode}, 1});
      runs.push_back({nm, {1, mla_rows, 576, 32, 4, sms, delay / 2, mode}, 1});
      runs.push_back({nm, {1, mla_rows, 576, 32, 2, 2 * sms, delay / 2, mode}, 2});
    }
  }
  for (int delay : {0, 500, 1000}) {
    runs.push_back({"gqa", {8, gqa_rows, 128, 64, 4, 3 * 8 * 16, delay}, 3});
    runs.push_back({"gqa", {8, gqa_rows, 128, 64, 3, 3 * 8 * 16, delay}, 3});
    runs.push_back({"gqa", {8, gqa_rows, 128, 64, 6, 2 * 8 * 16, delay}, 2});
    runs.push_back({"gqa", {8, gqa_rows, 128, 128, 3, 2 * 8 * 16, 2 * delay}, 2});
    runs.push_back({"gqa", {8, gqa_rows, 128, 64, 8, 8 * 16, delay}, 1});
  }
  }
  for (const Run& r : runs) run_one(r);
  CK(cudaDeviceSynchronize());
  return 0;
}
