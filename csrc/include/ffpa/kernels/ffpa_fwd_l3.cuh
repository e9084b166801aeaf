// What only FFPA level 3 runs (the kernel is in kernels/ffpa_fwd_sm80.cuh): O accumulates in a
// global fp32 workspace instead of registers, so neither registers nor shared memory grow with
// Dv and Q@K^T is computed once (L2 recomputes it per Dv group); the grid is persistent, one
// workspace slot (kBlockM x Dv floats) per resident block.
//
// Per KV tile and Dv slice, each thread's own fragment elements of O come in with the V slice's
// pipeline item (cp.async into the stage, issued num_stages - 1 items ahead, each thread copying
// only its own 16-byte runs, so no cross-thread dependency), are rescaled by the new row max, get
// P@V_slice added and go back with plain stores. The first visible tile starts from 0 without a
// load; the last one divides by the row sums and writes the output directly, so a sequence of one
// KV tile never touches the workspace.
#pragma once
#include <cstdint>

#include "ffpa/params.h"
#include "ffpa/ptx/cp_async.cuh"

namespace ffpa::attn {

template <typename Traits, int kStages>
struct FfpaFwd;  // kernels/ffpa_fwd_sm80.cuh

#ifdef FFPA_TRACE_ITEMS
__device__ uint64_t* g_ffpa_trace;  // tools/trace_l3.cu: per item start, end (%globaltimer) and SM
#endif

template <typename Traits, int kStages>
struct FfpaL3 {
  using Fwd = FfpaFwd<Traits, kStages>;
  using OFrag = typename Fwd::OFrag;
  static constexpr int kThreads = Traits::kThreads;
  static constexpr int kNTilesO = Traits::kNTilesO;

  // This thread's float4 of n-tile n of slice c in the block's workspace slot, in a
  // fragment-major layout so a warp's 32 float4 accesses are one contiguous 512-byte run.
  static __device__ __forceinline__ float4* ws_frag(const FwdParams& p, int c, int n, int tid) {
    float* slot = p.o_accum + static_cast<int64_t>(blockIdx.x) * (Traits::kBlockM * Traits::kHeadDimV);
    return reinterpret_cast<float4*>(slot) + (c * kNTilesO + n) * kThreads + tid;
  }
  // Where a V item's stage keeps that float4 (same fragment-major order: conflict-free).
  static __device__ __forceinline__ uint32_t o_stage_addr(uint32_t stage, int n, int tid) {
    return stage + Traits::kVSliceBytes + static_cast<uint32_t>((n * kThreads + tid) * 16);
  }

  // Issued with the producer's V item of slice c into `stage`: this thread's previous O elements
  // of the slice, except on the first visible tile (O starts from 0 there).
  static __device__ __forceinline__ void prefetch_o(const FwdParams& p, const typename Fwd::Block& b,
                                                    const typename Fwd::Producer& pr, uint32_t stage, int c,
                                                    int tid) {
    if (pr.tile != b.first_tile) {
#pragma unroll
      for (int n = 0; n < kNTilesO; ++n) ptx::cp_async_cg_16(o_stage_addr(stage, n, tid), ws_frag(p, c, n, tid), true);
    }
  }

  // prev = those elements, landed in the stage, rescaled to the new row max by alpha.
  static __device__ __forceinline__ void load_prev(float (&prev)[kNTilesO][4], uint32_t stage,
                                                   const float (&alpha)[2], int tid) {
#pragma unroll
    for (int n = 0; n < kNTilesO; ++n) {
      float4 x;
      asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                   : "=f"(x.x), "=f"(x.y), "=f"(x.z), "=f"(x.w) : "r"(o_stage_addr(stage, n, tid)));
      prev[n][0] = x.x * alpha[0], prev[n][1] = x.y * alpha[0];
      prev[n][2] = x.z * alpha[1], prev[n][3] = x.w * alpha[1];
    }
  }

  // The accumulators a slice's P@V MMAs start from. fp32 accumulation: the previous O (0 on the
  // first tile), loaded into prev here. fp16 accumulation: 0; the MMAs sum this tile alone and
  // the caller loads prev afterwards and adds it in fp32 (holding it through the MMAs would spill).
  static __device__ __forceinline__ void seed_acc(OFrag (&acc)[kNTilesO], float (&prev)[kNTilesO][4],
                                                  uint32_t stage, const float (&alpha)[2], bool first, int tid) {
    if (!Traits::kPVHalf && !first) load_prev(prev, stage, alpha, tid);
#pragma unroll
    for (int n = 0; n < kNTilesO; ++n) {
      if constexpr (!Traits::kPVHalf) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[n].v[e] = first ? 0.f : prev[n][e];
      } else {
        acc[n].zero();
      }
    }
  }

  // The kernel's body at L3. Work items in head-major order: item = (batch * heads + head) *
  // m_blocks + heaviest-first query block. Each block starts on item blockIdx.x, then takes the
  // next unclaimed item from p.work_counter (list scheduling: a block that finishes early takes
  // more), or strides by gridDim.x when the counter is null.
  // Why head-major (tools/trace_l3.cu, docs/tuning_l1.md run 9): the resident blocks then work on
  // one or two heads at a time and re-read their K/V from L2; query-block-major order spread them
  // over every head and, once causal items of unequal length drifted apart, the K/V streams of a
  // head no longer coincided: causal tiles cost 1.5x the non-causal ones.
  static __device__ __forceinline__ void run_persistent(const FwdParams& p, char* smem) {
    const int m_blocks = (p.len_q + Traits::kBlockM - 1) / Traits::kBlockM;
    const int64_t total = static_cast<int64_t>(m_blocks) * p.heads_q * p.batch;
    __shared__ int64_t next_item;
    for (int64_t item = blockIdx.x; item < total;) {
      const int64_t bh = item / m_blocks;
      const typename Fwd::Work w{m_blocks - 1 - static_cast<int>(item % m_blocks), static_cast<int>(bh % p.heads_q),
                                 static_cast<int>(bh / p.heads_q), 0};
#ifdef FFPA_TRACE_ITEMS
      uint64_t t0;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
#endif
      Fwd::run(p, smem, w);
      if (threadIdx.x == 0)
        next_item = p.work_counter != nullptr ? gridDim.x + static_cast<int64_t>(atomicAdd(p.work_counter, 1))
                                              : item + gridDim.x;
      __syncthreads();  // next_item is published; the next item refills the ring and `red`
#ifdef FFPA_TRACE_ITEMS
      if (threadIdx.x == 0) {
        uint64_t t1;
        uint32_t sm;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        g_ffpa_trace[3 * item] = t0, g_ffpa_trace[3 * item + 1] = t1, g_ffpa_trace[3 * item + 2] = sm;
      }
#endif
      item = next_item;
      __syncthreads();  // everyone read next_item before thread 0 may write it again
    }
  }
};

}  // namespace ffpa::attn
