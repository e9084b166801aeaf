// Device unit tests of the Hopper primitives (ptx/tma.cuh, ptx/mbarrier.cuh, ptx/ldmatrix.cuh's
// stmatrix, ptx/warpgroup.cuh; host side launch/tma_desc.h), compiled for sm_90a and run by
// tests/test_primitives.py on a compute capability 9.0 GPU:
//  * TMA tile loads of a strided 2-D tensor (rows padded) into shared memory, one mbarrier reused
//    for two phases (parity 0, then 1), a box reaching past both ends (zero fill), no swizzle;
//  * the same with the 128-byte swizzle: every element lands where GmmaSw128Tile (the layout the
//    wgmma kernels read through descriptors) says;
//  * a rank-4 map over (D, L, H, B) with the batch stride of a BLHD view (heads between positions);
//  * stmatrix x4 and x4.trans: every lane's b16 pair at the place the m8n8 fragment layout says;
//  * named barriers: a producer warpgroup's writes seen by two consumer warpgroups after
//    bar.arrive / bar.sync; setmaxnreg moving registers from a producer warpgroup to two consumers;
//  * tma_ok / encode_tma refuse what TMA cannot take (misaligned base or stride, wide swizzled rows);
//  * the stage ring (tile/stage_ring.cuh) at depths 1..4: a producer warpgroup (registers given back)
//    streams 37 tiles by TMA to two consumer warpgroups (registers raised) that checksum every tile,
//    so a stage read before it landed or after it was refilled shows up in the sums;
//  * clusters (ptx/cluster.cuh): in two clusters of two blocks, each block's threads store into the
//    peer's shared memory (mapa + st.shared::cluster) round after round, every warp arrives on both
//    blocks' mbarrier (release.cluster) and each block waits on its own (acquire.cluster, parity per
//    round) before reading what the peer stored; the ranks the blocks read.
// Prints one line per failed check and "N checks, M failed"; exits 1 on any failure.
#include <cuda_bf16.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "ffpa/ptx/cluster.cuh"
#include "ffpa/ptx/cp_async.cuh"
#include "ffpa/ptx/ldmatrix.cuh"
#include "ffpa/ptx/mbarrier.cuh"
#include "ffpa/ptx/tma.cuh"
#include "ffpa/ptx/warpgroup.cuh"
#include "ffpa/tile/smem_tile.cuh"
#include "ffpa/tile/stage_ring.cuh"
#include "launch/cluster_launch.h"
#include "launch/tma_desc.h"
#include "device_harness.h"

namespace {

void check(bool ok, const char* what, long a = -1, long b = -1, long c = -1) {
  if (harness::record(ok)) std::printf("FAIL %s (%ld %ld %ld)\n", what, a, b, c);
}


// ---- TMA: two loads through one barrier (phases 0 and 1); the raw shared bytes go to `out` ----
constexpr int kBoxCols = 64, kBoxRows = 32;
constexpr int kBoxBytes = kBoxCols * kBoxRows * 2;

__global__ void tma_two_phases(const __grid_constant__ CUtensorMap map, int c0a, int r0a, int c0b, int r0b,
                               uint16_t* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t base = ffpa::ptx::smem_u32addr(smem);
  const uint32_t bar = base + 2 * kBoxBytes;
  if (threadIdx.x == 0) {
    ffpa::ptx::mbarrier_init(bar, 1);
    ffpa::ptx::fence_barrier_init();
    ffpa::ptx::tma_prefetch_map(&map);
  }
  __syncthreads();
  for (int phase = 0; phase < 2; ++phase) {
    if (threadIdx.x == 0) {
      ffpa::ptx::mbarrier_arrive_expect_tx(bar, kBoxBytes);
      ffpa::ptx::tma_load_2d(base + phase * kBoxBytes, &map, bar, phase ? c0b : c0a, phase ? r0b : r0a);
    }
    ffpa::ptx::mbarrier_wait_parity(bar, phase);
  }
  const uint16_t* s = reinterpret_cast<const uint16_t*>(smem);
  for (int i = threadIdx.x; i < 2 * kBoxBytes / 2; i += blockDim.x) out[i] = s[i];
}

// ---- a rank-4 load: box (64 dims, 16 positions, 1 head, 1 batch) ----
__global__ void tma_rank4(const __grid_constant__ CUtensorMap map, int d0, int l0, int h0, int b0, uint16_t* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t base = ffpa::ptx::smem_u32addr(smem);
  const uint32_t bar = base + 64 * 16 * 2;
  if (threadIdx.x == 0) {
    ffpa::ptx::mbarrier_init(bar, 1);
    ffpa::ptx::fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ffpa::ptx::mbarrier_arrive_expect_tx(bar, 64 * 16 * 2);
    ffpa::ptx::tma_load_4d(base, &map, bar, d0, l0, h0, b0);
  }
  ffpa::ptx::mbarrier_wait_parity(bar, 0);
  const uint16_t* s = reinterpret_cast<const uint16_t*>(smem);
  for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) out[i] = s[i];
}

// ---- stmatrix: lane l's register i holds b16 pair (i * 256 + 2 l, i * 256 + 2 l + 1) ----
__global__ void stmatrix_kernel(uint16_t* out, uint16_t* out_trans) {
  __shared__ __align__(128) uint16_t tile[2][4 * 64];
  const int lane = threadIdx.x;
  uint32_t r[4];
  for (int i = 0; i < 4; ++i)
    r[i] = static_cast<uint32_t>(i * 256 + 2 * lane) | (static_cast<uint32_t>(i * 256 + 2 * lane + 1) << 16);
  const int m = lane / 8, row = lane % 8;  // lanes 8m..8m+7 address the rows of matrix m
  ffpa::ptx::stmatrix_m8n8_x4(ffpa::ptx::smem_u32addr(&tile[0][m * 64 + row * 8]), r);
  ffpa::ptx::stmatrix_m8n8_x4_trans(ffpa::ptx::smem_u32addr(&tile[1][m * 64 + row * 8]), r);
  __syncwarp();
  for (int i = lane; i < 4 * 64; i += 32) {
    out[i] = tile[0][i];
    out_trans[i] = tile[1][i];
  }
}

// ---- named barriers: warpgroup 0 produces, 1 and 2 consume; setmaxnreg assembled ----
__global__ void __launch_bounds__(384, 1) named_barrier_kernel(int* out) {
  __shared__ int data[1024];
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (wg == 0) {
    for (int i = t; i < 1024; i += 128) data[i] = 3 * i + 1;
    ffpa::ptx::named_barrier_arrive(1, 384);  // signal; the producer does not wait
  } else {
    ffpa::ptx::named_barrier_sync(1, 384);
    for (int i = t; i < 1024; i += 128) out[(wg - 1) * 1024 + i] = data[i];
  }
}

// A kernel with setmaxnreg gets the launch bound's whole allocation (168 registers at 384 threads):
// the producer warpgroup gives 144 a thread back, the two consumer warpgroups take 72 more (240),
// 128 x 24 + 256 x 240 = 64,512 registers, what the block holds. Each warpgroup then writes.
__global__ void __launch_bounds__(384, 1) setmaxnreg_kernel(int* out) {
  const int wg = threadIdx.x / 128;
  if (wg == 0) ffpa::ptx::setmaxnreg_dec<24>();
  else ffpa::ptx::setmaxnreg_inc<240>();
  out[threadIdx.x] = 10 * wg + 7;
}

// ---- the stage ring: 64 x 64 tiles of a (n_tiles * 64, 64) tensor, 8 consumer warps x 8 rows ----
constexpr int kRingTile = 64 * 64 * 2;

template <int kStages>
__global__ void __launch_bounds__(384, 1) ring_kernel(const __grid_constant__ CUtensorMap map, int n_tiles, float* out) {
  using Ring = ffpa::StageRing<kStages>;
  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t tiles = ffpa::ptx::smem_u32addr(smem);
  const Ring ring{tiles + kStages * kRingTile};
  if (threadIdx.x == 0) ring.init(8);
  __syncthreads();
  const int wg = threadIdx.x / 128;
  typename Ring::State st;
  if (wg == 0) {
    ffpa::ptx::setmaxnreg_dec<40>();
    if (threadIdx.x == 0)
      for (int t = 0; t < n_tiles; ++t, st.advance()) {
        ring.producer_acquire(st);
        ring.producer_expect(st, kRingTile);
        ffpa::ptx::tma_load_2d(tiles + st.stage * kRingTile, &map, ring.full(st.stage), 0, t * 64);
      }
    return;
  }
  ffpa::ptx::setmaxnreg_inc<232>();
  const int warp = threadIdx.x / 32 - 4, lane = threadIdx.x % 32;  // consumer warps 0..7
  for (int t = 0; t < n_tiles; ++t, st.advance()) {
    ring.consumer_wait(st);
    const __nv_bfloat16* tile = reinterpret_cast<const __nv_bfloat16*>(smem + st.stage * kRingTile);
    float sum = 0.f;
    for (int r = 8 * warp; r < 8 * warp + 8; ++r)
      sum += __bfloat162float(tile[r * 64 + lane]) * (r + 1) + __bfloat162float(tile[r * 64 + 32 + lane]);
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    __syncwarp();
    if (lane == 0) {
      out[t * 8 + warp] = sum;
      ring.consumer_release(st);
    }
  }
}

float ring_value(int t, int r, int c) { return static_cast<float>((t * 7 + r * 3 + c) % 17 - 8); }

template <int kStages>
void test_stage_ring() {
  const int n = 37;
  std::vector<uint16_t> host(static_cast<size_t>(n) * 64 * 64);
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 64; ++c) {
        const float v = ring_value(t, r, c);  // small integers: exact in bf16 and in the fp32 sums
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        host[(static_cast<size_t>(t) * 64 + r) * 64 + c] = static_cast<uint16_t>(bits >> 16);
      }
  uint16_t* dev = nullptr;
  float* out = nullptr;
  CUDA_OK(cudaMalloc(&dev, host.size() * 2));
  CUDA_OK(cudaMalloc(&out, n * 8 * 4));
  CUDA_OK(cudaMemcpy(dev, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(out, 0xff, n * 8 * 4));
  ffpa::launch::TmaTensor t;
  t.base = dev;
  t.rank = 2;
  t.dims[0] = 64;
  t.dims[1] = static_cast<uint64_t>(n) * 64;
  t.strides[1] = 128;
  t.box[0] = 64;
  t.box[1] = 64;
  alignas(64) CUtensorMap map;
  CUDA_OK(ffpa::launch::encode_tma(&map, t, ffpa::launch::TmaSwizzle::kNone));
  const int smem = kStages * kRingTile + ffpa::StageRing<kStages>::kBarrierBytes;
  CUDA_OK(cudaFuncSetAttribute(ring_kernel<kStages>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  ring_kernel<kStages><<<1, 384, smem>>>(map, n, out);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> got(n * 8);
  CUDA_OK(cudaMemcpy(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost));
  for (int tt = 0; tt < n; ++tt)
    for (int w = 0; w < 8; ++w) {
      float want = 0.f;
      for (int r = 8 * w; r < 8 * w + 8; ++r)
        for (int l = 0; l < 32; ++l) want += ring_value(tt, r, l) * (r + 1) + ring_value(tt, r, 32 + l);
      check(got[tt * 8 + w] == want, "stage ring: a consumer warp's checksum of a tile", kStages, tt, w);
    }
  cudaFree(dev);
  cudaFree(out);
}

uint16_t value_at(long row, long col) { return static_cast<uint16_t>((row * 977 + col * 13 + 5) & 0xffff); }

void test_tma_2d(ffpa::launch::TmaSwizzle swizzle, const char* name) {
  const int rows = 100, cols = 200, pitch = 256;  // elements; rows padded to 512 bytes
  std::vector<uint16_t> host(static_cast<size_t>(rows) * pitch);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < pitch; ++c) host[static_cast<size_t>(r) * pitch + c] = c < cols ? value_at(r, c) : 0xdead;
  uint16_t *dev = nullptr, *out = nullptr;
  CUDA_OK(cudaMalloc(&dev, host.size() * 2));
  CUDA_OK(cudaMalloc(&out, 2 * kBoxBytes));
  CUDA_OK(cudaMemcpy(dev, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  ffpa::launch::TmaTensor t;
  t.base = dev;
  t.elem = ffpa::launch::TmaElem::kBFloat16;
  t.rank = 2;
  t.dims[0] = cols;
  t.dims[1] = rows;
  t.strides[1] = pitch * 2;
  t.box[0] = kBoxCols;
  t.box[1] = kBoxRows;
  alignas(64) CUtensorMap map;
  CUDA_OK(ffpa::launch::encode_tma(&map, t, swizzle));
  const int c0[2] = {160, 0}, r0[2] = {80, 5};  // the first box reaches past both ends
  CUDA_OK(cudaFuncSetAttribute(tma_two_phases, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * kBoxBytes + 64));
  tma_two_phases<<<1, 128, 2 * kBoxBytes + 64>>>(map, c0[0], r0[0], c0[1], r0[1], out);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> got(2 * kBoxBytes / 2);
  CUDA_OK(cudaMemcpy(got.data(), out, 2 * kBoxBytes, cudaMemcpyDeviceToHost));
  using Sw = ffpa::GmmaSw128Tile<kBoxRows, kBoxCols>;
  for (int phase = 0; phase < 2; ++phase)
    for (int r = 0; r < kBoxRows; ++r)
      for (int c = 0; c < kBoxCols; ++c) {
        const long gr = r0[phase] + r, gc = c0[phase] + c;
        const uint16_t want = gr < rows && gc < cols ? value_at(gr, gc) : 0;
        const uint32_t off = swizzle == ffpa::launch::TmaSwizzle::k128B ? Sw::elem_offset(r, c) : (r * kBoxCols + c) * 2;
        check(got[phase * kBoxBytes / 2 + off / 2] == want, name, phase, r, c);
      }
  cudaFree(dev);
  cudaFree(out);
}

void test_tma_rank4() {
  // A BLHD tensor (B=2, L=40, H=3, D=64) read as (D, L, H, B): L's stride is H * D elements.
  const int B = 2, L = 40, H = 3, D = 64;
  std::vector<uint16_t> host(static_cast<size_t>(B) * L * H * D);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint16_t>((i * 7 + 3) & 0xffff);
  uint16_t *dev = nullptr, *out = nullptr;
  CUDA_OK(cudaMalloc(&dev, host.size() * 2));
  CUDA_OK(cudaMalloc(&out, 64 * 16 * 2));
  CUDA_OK(cudaMemcpy(dev, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  ffpa::launch::TmaTensor t;
  t.base = dev;
  t.rank = 4;
  const uint64_t dims[4] = {D, L, H, B}, strides[4] = {0, H * D * 2, D * 2, static_cast<uint64_t>(L) * H * D * 2};
  const uint32_t box[4] = {64, 16, 1, 1};
  for (int i = 0; i < 4; ++i) {
    t.dims[i] = dims[i];
    t.strides[i] = strides[i];
    t.box[i] = box[i];
  }
  alignas(64) CUtensorMap map;
  CUDA_OK(ffpa::launch::encode_tma(&map, t, ffpa::launch::TmaSwizzle::kNone));
  const int l0 = 30, h0 = 2, b0 = 1;  // positions 30..45: 40.. read zeros
  tma_rank4<<<1, 128, 64 * 16 * 2 + 64>>>(map, 0, l0, h0, b0, out);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> got(64 * 16);
  CUDA_OK(cudaMemcpy(got.data(), out, got.size() * 2, cudaMemcpyDeviceToHost));
  for (int l = 0; l < 16; ++l)
    for (int d = 0; d < 64; ++d) {
      const long pos = l0 + l;
      const uint16_t want = pos < L ? host[((static_cast<size_t>(b0) * L + pos) * H + h0) * D + d] : 0;
      check(got[l * 64 + d] == want, "tma rank-4 BLHD box", l, d);
    }
  cudaFree(dev);
  cudaFree(out);
}

void test_stmatrix() {
  uint16_t *out = nullptr, *out_t = nullptr;
  CUDA_OK(cudaMalloc(&out, 4 * 64 * 2));
  CUDA_OK(cudaMalloc(&out_t, 4 * 64 * 2));
  stmatrix_kernel<<<1, 32>>>(out, out_t);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> got(4 * 64), got_t(4 * 64);
  CUDA_OK(cudaMemcpy(got.data(), out, got.size() * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(got_t.data(), out_t, got_t.size() * 2, cudaMemcpyDeviceToHost));
  for (int m = 0; m < 4; ++m)
    for (int lane = 0; lane < 32; ++lane)
      for (int h = 0; h < 2; ++h) {
        const uint16_t v = static_cast<uint16_t>(m * 256 + 2 * lane + h);
        // x4: lane holds row lane/4, columns 2 (lane%4) + h; x4.trans: column lane/4, rows 2 (lane%4) + h
        check(got[m * 64 + (lane / 4) * 8 + 2 * (lane % 4) + h] == v, "stmatrix x4", m, lane, h);
        check(got_t[m * 64 + (2 * (lane % 4) + h) * 8 + lane / 4] == v, "stmatrix x4.trans", m, lane, h);
      }
  cudaFree(out);
  cudaFree(out_t);
}

void test_named_barriers() {
  int* out = nullptr;
  CUDA_OK(cudaMalloc(&out, 2 * 1024 * 4));
  CUDA_OK(cudaMemset(out, 0xff, 2 * 1024 * 4));
  named_barrier_kernel<<<1, 384>>>(out);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<int> got(2 * 1024);
  CUDA_OK(cudaMemcpy(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 2 * 1024; ++i) check(got[i] == 3 * (i % 1024) + 1, "named barrier hand-off", i);
  cudaFuncAttributes attr;
  CUDA_OK(cudaFuncGetAttributes(&attr, setmaxnreg_kernel));
  check(attr.numRegs == 168, "setmaxnreg kernel allocated the launch bound's registers", attr.numRegs);
  CUDA_OK(cudaMemset(out, 0xff, 384 * 4));
  setmaxnreg_kernel<<<1, 384>>>(out);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(got.data(), out, 384 * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 384; ++i) check(got[i] == 10 * (i / 128) + 7, "setmaxnreg dec / inc, every warpgroup ran", i);
  cudaFree(out);
}

// ---- clusters: two blocks of a cluster hand values to each other through distributed shared memory ----
constexpr int kClusterRounds = 5, kClusterThreads = 256;

__global__ void __launch_bounds__(kClusterThreads, 1) cluster_kernel(int* out, int* ranks) {
  __shared__ int buf[kClusterRounds][kClusterThreads];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t rank = ffpa::ptx::cluster_ctarank(), peer = rank ^ 1u;
  const uint32_t bar_addr = ffpa::ptx::smem_u32addr(&bar);
  if (threadIdx.x == 0) {
    ffpa::ptx::mbarrier_init(bar_addr, 2 * kClusterThreads / 32);  // every warp of both blocks
    ffpa::ptx::fence_barrier_init();
  }
  ffpa::ptx::cluster_sync();
  for (int r = 0; r < kClusterRounds; ++r) {
    const uint32_t slot = ffpa::ptx::smem_u32addr(&buf[r][threadIdx.x]);
    ffpa::ptx::st_shared_cluster_b32(ffpa::ptx::map_shared_rank(slot, peer),
                                     static_cast<uint32_t>(1000 * r + 10 * threadIdx.x + rank));
    ffpa::ptx::fence_proxy_async_shared_cluster();  // harmless here; the kernels' P path uses it
    __syncwarp();
    if (threadIdx.x % 32 == 0) {
      ffpa::ptx::mbarrier_arrive_cluster(ffpa::ptx::map_shared_rank(bar_addr, 0));
      ffpa::ptx::mbarrier_arrive_cluster(ffpa::ptx::map_shared_rank(bar_addr, 1));
    }
    ffpa::ptx::mbarrier_wait_parity<true>(bar_addr, r & 1);
    // Read a neighbour's slot (written by the peer's thread threadIdx.x ^ 1, another warp's lane).
    out[(blockIdx.x * kClusterRounds + r) * kClusterThreads + threadIdx.x] = buf[r][threadIdx.x ^ 1];
  }
  if (threadIdx.x == 0) ranks[blockIdx.x] = static_cast<int>(rank);
}

void test_cluster() {
  constexpr int kBlocks = 4;
  int *out = nullptr, *ranks = nullptr;
  CUDA_OK(cudaMalloc(&out, kBlocks * kClusterRounds * kClusterThreads * 4));
  CUDA_OK(cudaMalloc(&ranks, kBlocks * 4));
  CUDA_OK(cudaMemset(out, 0xff, kBlocks * kClusterRounds * kClusterThreads * 4));
  CUDA_OK(ffpa::launch::launch_clusters(cluster_kernel, 2, dim3(kBlocks), dim3(kClusterThreads), 0, nullptr, out,
                                        ranks));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<int> got(kBlocks * kClusterRounds * kClusterThreads), got_ranks(kBlocks);
  CUDA_OK(cudaMemcpy(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(got_ranks.data(), ranks, kBlocks * 4, cudaMemcpyDeviceToHost));
  for (int b = 0; b < kBlocks; ++b) {
    check(got_ranks[b] == b % 2, "cluster rank of a block of a 2-block cluster", b, got_ranks[b]);
    for (int r = 0; r < kClusterRounds; ++r)
      for (int t = 0; t < kClusterThreads; ++t)
        check(got[(b * kClusterRounds + r) * kClusterThreads + t] == 1000 * r + 10 * (t ^ 1) + ((b % 2) ^ 1),
              "a value the peer block stored into this block's shared memory, round by round", b, r, t);
  }
  cudaFree(out);
  cudaFree(ranks);
}

void test_refusals() {
  alignas(64) CUtensorMap map;
  static __align__(16) uint16_t dummy[64];
  ffpa::launch::TmaTensor t;
  t.base = reinterpret_cast<const unsigned char*>(dummy) + 2;  // not 16-byte aligned
  t.rank = 2;
  t.dims[0] = 64;
  t.dims[1] = 64;
  t.strides[1] = 128;
  t.box[0] = 64;
  t.box[1] = 8;
  check(!ffpa::launch::tma_ok(t, ffpa::launch::TmaSwizzle::kNone), "misaligned base refused");
  check(ffpa::launch::encode_tma(&map, t, ffpa::launch::TmaSwizzle::kNone) == cudaErrorInvalidValue,
        "misaligned base: cudaErrorInvalidValue");
  t.base = dummy;
  t.strides[1] = 136;  // not a multiple of 16 bytes
  check(!ffpa::launch::tma_ok(t, ffpa::launch::TmaSwizzle::kNone), "stride not a multiple of 16 refused");
  t.strides[1] = 256;
  t.box[0] = 128;  // 256-byte rows: too wide for the 128-byte swizzle
  check(!ffpa::launch::tma_ok(t, ffpa::launch::TmaSwizzle::k128B), "swizzled rows over 128 bytes refused");
  t.box[0] = 64;
  check(ffpa::launch::tma_ok(t, ffpa::launch::TmaSwizzle::k128B), "a good map accepted");
}

}  // namespace

int main() {
  harness::require_compute_capability(9, 0);
  test_tma_2d(ffpa::launch::TmaSwizzle::kNone, "tma 2-D, no swizzle");
  test_tma_2d(ffpa::launch::TmaSwizzle::k128B, "tma 2-D, 128-byte swizzle = GmmaSw128Tile");
  test_tma_rank4();
  test_stmatrix();
  test_named_barriers();
  test_refusals();
  test_cluster();
  test_stage_ring<1>();
  test_stage_ring<2>();
  test_stage_ring<3>();
  test_stage_ring<4>();
  return harness::report();
}
