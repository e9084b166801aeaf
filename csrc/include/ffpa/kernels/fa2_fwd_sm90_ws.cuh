// FA-2 forward on Hopper, warp-specialised (sm_90a): the kernel the FA-2 family runs on H100/H200
// wherever TMA can describe the tensors (launch/fa2_fwd_launch.cuh; otherwise fa2_fwd_sm90.cuh's
// cp.async kernel runs, with the same tile, so one mask block map serves both).
//
// A block of 3 warpgroups owns 128 query rows of one (batch, head):
//
//   warpgroup 0, producer (24 registers): one thread issues TMA loads -- Q once, then K_j and V_j
//     of every key tile the block sees (causal cut, block-map skip) through two stage rings
//     (tile/stage_ring.cuh), K's and V's, so S = Q K_j^T may start before V_j has landed.
//   warpgroups 1 and 2, consumers (240 registers): rows [64 c, 64 c + 64) each; per key tile
//
//       issue S_j = Q K_j^T (wgmma, both operands by descriptor)
//       issue O += P_{j-1} V_{j-1} (wgmma, P from registers, V read transposed)   [ping-pong turn]
//       wait S_j -> release K_j -> softmax of S_j in place, alpha_j   (while P_{j-1} V_{j-1} runs)
//       wait P V -> release V_{j-1} -> O *= alpha_j -> P_j packed to b16 operand registers
//
//     so the softmax of one tile runs under the previous tile's P V on the tensor cores. With
//     kPingPong the two consumer warpgroups also take turns issuing (named barriers 1 and 2):
//     one's softmax runs under the other's GEMMs.
//
// Who waits on what (mbarriers, ring depth kStages; q_bar single use):
//   producer:  empty_k[s] -> TMA K_j -> full_k[s]     empty_v[s] -> TMA V_j -> full_v[s]
//   consumers: full_k[s] -> S_j -> arrive empty_k[s]   full_v[s] -> P V_j -> arrive empty_v[s]
//
// TMA zero-fills rows past L and S (finite, so masked columns of P V stay 0); scores past S and
// above the causal limit are masked per element in boundary tiles (FwdCommon::mask_tile, shared
// with the cp.async kernels), attn_mask in the block map's partial tiles.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <math_constants.h>

#include "ffpa/kernels/fa2_common.cuh"
#include "ffpa/ptx/mbarrier.cuh"
#include "ffpa/ptx/tma.cuh"
#include "ffpa/ptx/warpgroup.cuh"
#include "ffpa/ptx/wgmma.cuh"
#include "ffpa/tile/stage_ring.cuh"

namespace ffpa::attn {

// The kernel's TMA maps (rank 4: head dim, position, head, batch), encoded by the launcher, and
// the batch of blockIdx.z = 0 (launches are sliced in batch, the maps cover all of it).
struct Fa2TmaMaps {
  CUtensorMap q, k, v;
  int batch0;
};

// Shared-memory plan of the warp-specialised kernel for a wgmma tile table row (Fa2Traits).
template <typename Traits>
struct Fa2WsPlan {
  static constexpr int kQBytes = Traits::QTile::kBytes;
  static constexpr int kKBytes = Traits::KTile::kBytes;
  static constexpr int kVBytes = Traits::VTile::kBytes;
  static constexpr int kBarrierBytes = 8 + 2 * 2 * 4 * 8;  // q_bar + two rings of up to 4 stages
  static constexpr int bytes(int stages) { return 1024 + kQBytes + stages * (kKBytes + kVBytes) + kBarrierBytes; }
  static constexpr int kMaxSmem = 227 * 1024;
  static constexpr int kStages = bytes(4) <= kMaxSmem ? 4 : bytes(3) <= kMaxSmem ? 3 : 2;
  static constexpr int kSmemBytes = bytes(kStages);
  static_assert(bytes(2) <= kMaxSmem, "two stages of K and V must fit");
  static_assert(Traits::kWarps == 8 && Traits::kBlockM == 128, "two consumer warpgroups of 64 rows");
  static_assert(Traits::kHeadDim <= 256 && Traits::kHeadDimV <= 256, "one wgmma per product (N <= 256)");
  static_assert(Traits::VTile::kChunks <= Traits::QTile::kChunks, "O is staged over the Q tile's chunks");
  static constexpr int kThreads = 384;
};

template <typename Traits, bool kPingPong>
struct Fa2FwdWs {
  using Element = typename Traits::Element;
  using Num = Numeric<Element>;
  using QTile = typename Traits::QTile;
  using KTile = typename Traits::KTile;
  using VTile = typename Traits::VTile;
  using Plan = Fa2WsPlan<Traits>;
  using Ring = StageRing<Plan::kStages>;
  using Common = Fa2FwdCommon<Traits, 2>;  // mask_tile only (static, register-free)
  using MmaS = ptx::WgmmaM64<Traits::kBlockN, Element>;
  using MmaO = ptx::WgmmaM64<Traits::kHeadDimV, Element>;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kNS = Traits::kNTilesS;
  static constexpr int kNO = Traits::kNTilesO;
  static constexpr int kKStepsQK = Traits::kKStepsQK;
  static constexpr int kKStepsPV = Traits::kKStepsPV;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static constexpr uint32_t kConsumerWarps = 8;  // arrivals that release a stage

  struct Smem {
    uint32_t q, k, v, q_bar;
    Ring ring_k, ring_v;
  };

  static __device__ __forceinline__ Smem layout(char* smem_raw) {
    const uint32_t raw = ptx::smem_u32addr(smem_raw);
    Smem s;
    s.q = (raw + 1023u) & ~1023u;
    s.k = s.q + Plan::kQBytes;
    s.v = s.k + Plan::kStages * Plan::kKBytes;
    s.q_bar = s.v + Plan::kStages * Plan::kVBytes;
    s.ring_k = Ring{s.q_bar + 8};
    s.ring_v = Ring{s.q_bar + 8 + Ring::kBarrierBytes};
    return s;
  }

  static __device__ __forceinline__ int next_tile(const uint8_t* codes, int j, int n_end) {
    return codes != nullptr ? skip_masked_tiles(codes, j, n_end) : j;
  }

  // ---- producer ----------------------------------------------------------------------------
  template <typename TileT>
  static __device__ __forceinline__ void load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int row, int head,
                                              int batch) {
#pragma unroll
    for (int c = 0; c < TileT::kChunks; ++c) ptx::tma_load_4d(dst + TileT::chunk(c), map, bar, 64 * c, row, head, batch);
  }

  static __device__ __forceinline__ void produce(const Fa2TmaMaps& maps, const Smem& s, int m0, int head, int head_kv,
                                                 int batch, const uint8_t* codes, int n_end) {
    ptx::tma_prefetch_map(&maps.q);
    ptx::tma_prefetch_map(&maps.k);
    ptx::tma_prefetch_map(&maps.v);
    ptx::mbarrier_arrive_expect_tx(s.q_bar, Plan::kQBytes);
    load<QTile>(s.q, &maps.q, s.q_bar, m0, head, batch);
    typename Ring::State st;
    for (int j = next_tile(codes, 0, n_end); j < n_end; j = next_tile(codes, j + 1, n_end), st.advance()) {
      s.ring_k.producer_acquire(st);
      s.ring_k.producer_expect(st, Plan::kKBytes);
      load<KTile>(s.k + st.stage * Plan::kKBytes, &maps.k, s.ring_k.full(st.stage), j * kBlockN, head_kv, batch);
      s.ring_v.producer_acquire(st);
      s.ring_v.producer_expect(st, Plan::kVBytes);
      load<VTile>(s.v + st.stage * Plan::kVBytes, &maps.v, s.ring_v.full(st.stage), j * kBlockN, head_kv, batch);
    }
  }

  // ---- consumers ---------------------------------------------------------------------------
  template <typename TileT>
  static __device__ __forceinline__ uint64_t k_major_desc(uint32_t tile, int ks) {
    return ptx::gmma_desc_sw128(tile + TileT::k_major_kstep(ks), 16, 1024);
  }

  static __device__ __forceinline__ void issue_qk(float (&s)[kNS][4], uint32_t q_wg, uint32_t k_tile) {
    ptx::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kKStepsQK; ++ks) MmaS::ss(s, k_major_desc<QTile>(q_wg, ks), k_major_desc<KTile>(k_tile, ks), ks > 0);
    ptx::wgmma_commit_group();
  }

  static __device__ __forceinline__ void issue_pv(float (&o)[kNO][4], const uint32_t (&pf)[kKStepsPV][4], uint32_t v_tile) {
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKStepsPV; ++kk)
      MmaO::rs(o, pf[kk], ptx::gmma_desc_sw128(v_tile + VTile::mn_major_kstep(kk), VTile::kChunkBytes, 1024), 1);
    ptx::wgmma_commit_group();
  }

  // Online softmax of S_j (base 2): masks boundary tiles, updates the row max and sum, leaves
  // P = exp2(S - m) in s (fp32) and returns the factor O must be rescaled by. Neither O nor the P
  // operand registers are touched: the previous tile's P V may still be reading them (a register
  // definition of a running wgmma's operands makes ptxas serialise the pipeline).
  static __device__ __forceinline__ void softmax(const FwdParams& p, const uint8_t* codes, int j, int m0, int row0, int g,
                                                 int t4, float scale_log2, float (&s)[kNS][4], float (&row_max)[2],
                                                 float (&row_sum)[2], float (&alpha)[2]) {
    const int n0 = j * kBlockN;
    const uint8_t code = codes != nullptr ? codes[j] : static_cast<uint8_t>(kBlockFull);
    const bool per_elem = code == kBlockPartial || n0 + kBlockN > p.len_kv ||
                          (p.is_causal && n0 + kBlockN - 1 > m0 + p.causal_offset);
    if (per_elem) Common::mask_tile(*reinterpret_cast<float(*)[1][kNS][4]>(&s), p, code, scale_log2, row0, n0, g, t4);
    const float sf = per_elem ? 1.f : scale_log2;
    float tile_max[2] = {strip_row_max(s, 0), strip_row_max(s, 1)};
    float neg_m[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      alpha[r] = online_update(row_max[r], row_sum[r], tile_max[r] * sf, neg_m[r]);
    }
    PartialSum<4> tile_sum[2];
#pragma unroll
    for (int n = 0; n < kNS; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = ptx::ex2_approx_ftz(fmaf(s[n][e], sf, neg_m[e / 2]));
        tile_sum[e / 2].add(2 * n + e % 2, s[n][e]);
      }
    row_sum[0] += tile_sum[0].total();
    row_sum[1] += tile_sum[1].total();
  }

  // P in b16 as the A operand of P V: the accumulator layout of S n8 tiles 2 kk and 2 kk + 1 is
  // the A layout of k-step kk.
  static __device__ __forceinline__ void pack(const float (&s)[kNS][4], uint32_t (&pf)[kKStepsPV][4]) {
#pragma unroll
    for (int n = 0; n < kNS; ++n) {
      pf[n / 2][(n % 2) * 2 + 0] = Num::pack2(s[n][0], s[n][1]);
      pf[n / 2][(n % 2) * 2 + 1] = Num::pack2(s[n][2], s[n][3]);
    }
  }

  static __device__ __forceinline__ void rescale(float (&o)[kNO][4], const float (&alpha)[2]) {
    if (__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) return;  // the row maxima settled
#pragma unroll
    for (int n = 0; n < kNO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] *= alpha[e / 2];
  }

  // Ping-pong turns between the two consumer warpgroups: named barrier 1 + c is c's turn.
  static __device__ __forceinline__ void turn_wait(int c) {
    if constexpr (kPingPong) ptx::named_barrier_sync(1 + c, 256);
  }
  static __device__ __forceinline__ void turn_pass(int c) {
    if constexpr (kPingPong) ptx::named_barrier_arrive(2 - c, 256);
  }

  static __device__ __forceinline__ void consume(const FwdParams& p, const Smem& sm, int c, int m0, int rows_q,
                                                 const uint8_t* codes, int n_end) {
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    const int row0 = m0 + 64 * c + 16 * warp;  // first query row of this warp's accumulators
    const uint32_t q_wg = sm.q + c * 64 * 128;  // this warpgroup's 64 rows (128 bytes each in a chunk)
    const float scale_log2 = fabsf(p.scale_log2);
    float o[kNO][4], row_max[2] = {-CUDART_INF_F, -CUDART_INF_F}, row_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int n = 0; n < kNO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] = 0.f;

    ptx::mbarrier_wait_parity(sm.q_bar, 0);
    if (p.scale_log2 < 0.f) {  // a negative scale is a positive one on -Q (row max of raw scores)
      for (int i = tid; i < QTile::kChunks * 64 * 32; i += 128) {
        const uint32_t addr = q_wg + (i / (64 * 32)) * QTile::kChunkBytes + (i % (64 * 32)) * 4;
        uint32_t w;
        asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(w) : "r"(addr));
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(w ^ 0x80008000u));
      }
      ptx::fence_proxy_async_shared();
      ptx::named_barrier_sync(3 + c, 128);
    }
    if (kPingPong && c == 1) ptx::named_barrier_arrive(1, 256);  // warpgroup 1 (c = 0) goes first

    typename Ring::State sk, sv;
    int j = next_tile(codes, 0, n_end);
    if (j < n_end) {
      float s[kNS][4];
      uint32_t pf[kKStepsPV][4];
      float alpha[2];
      sm.ring_k.consumer_wait(sk);
      turn_wait(c);
      issue_qk(s, q_wg, sm.k + sk.stage * Plan::kKBytes);
      turn_pass(c);
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(s);
      if (lane == 0) sm.ring_k.consumer_release(sk);
      sk.advance();
      softmax(p, codes, j, m0, row0, g, t4, scale_log2, s, row_max, row_sum, alpha);
      pack(s, pf);
      for (j = next_tile(codes, j + 1, n_end); j < n_end; j = next_tile(codes, j + 1, n_end)) {
        sm.ring_k.consumer_wait(sk);
        sm.ring_v.consumer_wait(sv);
        turn_wait(c);
        ptx::wgmma_fence_operand(o);  // before S's issue: no register definitions inside the stage
        issue_qk(s, q_wg, sm.k + sk.stage * Plan::kKBytes);
        issue_pv(o, pf, sm.v + sv.stage * Plan::kVBytes);
        turn_pass(c);
        ptx::wgmma_wait_group<1>();
        ptx::wgmma_fence_operand(s);
        if (lane == 0) sm.ring_k.consumer_release(sk);
        sk.advance();
        softmax(p, codes, j, m0, row0, g, t4, scale_log2, s, row_max, row_sum, alpha);
        ptx::wgmma_wait_group<0>();
        ptx::wgmma_fence_operand(o);
        if (lane == 0) sm.ring_v.consumer_release(sv);
        sv.advance();
        rescale(o, alpha);
        pack(s, pf);
      }
      sm.ring_v.consumer_wait(sv);
      ptx::wgmma_fence_operand(o);
      issue_pv(o, pf, sm.v + sv.stage * Plan::kVBytes);
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operand(o);
      if (lane == 0) sm.ring_v.consumer_release(sv);
    }
    if (kPingPong && c == 0) ptx::named_barrier_sync(1, 256);  // the turn warpgroup 2 passed last
    store(p, sm.q + c * 64 * 128, c, m0, rows_q, row0, g, t4, tid, o, row_max, row_sum);
  }

  // Epilogue of one warpgroup: O / l in b16 over its own 64 rows of the Q tile (same swizzle, so
  // 8 rows at one unit hit 8 bank groups), then whole 16-byte units to global; the LSE.
  static __device__ __forceinline__ void store(const FwdParams& p, uint32_t q_wg, int c, int m0, int rows_q, int row0,
                                               int g, int t4, int tid, const float (&o)[kNO][4], const float (&row_max)[2],
                                               const float (&row_sum)[2]) {
    const int head = blockIdx.y, batch = blockIdx.z;
    const int wrow0 = 16 * (tid / 32);  // this warp's first row within the warpgroup
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = row_sum[r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = inv_row_sum(l);
      const int rr = wrow0 + g + 8 * r;
#pragma unroll
      for (int n = 0; n < kNO; ++n) {
        const uint32_t addr = q_wg + QTile::chunk(n / 8) + rr * 128 + ((((n % 8)) ^ (rr % 8)) * 16) + t4 * 4;
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(Num::pack2(o[n][2 * r] * inv, o[n][2 * r + 1] * inv)));
      }
      const int row = row0 + g + 8 * r;
      if (p.lse != nullptr && t4 == 0 && row < p.len_q)
        p.lse[(static_cast<int64_t>(batch) * p.heads_q + head) * p.len_q + row] = row_lse(row_max[r], l);
    }
    ptx::named_barrier_sync(3 + c, 128);
    const int rows = min(64, rows_q - 64 * c);
    Element* o_base = static_cast<Element*>(p.o) + batch * p.o_batch_stride + head * p.o_head_stride +
                      static_cast<int64_t>(m0 + 64 * c) * p.o_row_stride;
    constexpr int kUnits = Traits::kHeadDimV / 8;
    for (int i = tid; i < rows * kUnits; i += 128) {
      const int r = i / kUnits, u = i % kUnits;
      uint4 val;
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(val.x), "=r"(val.y), "=r"(val.z), "=r"(val.w)
                   : "r"(q_wg + QTile::chunk(u / 8) + r * 128 + (((u % 8) ^ (r % 8)) * 16)));
      *reinterpret_cast<uint4*>(o_base + r * p.o_row_stride + u * 8) = val;
    }
  }

  static __device__ __forceinline__ void run(const FwdParams& p, const Fa2TmaMaps& maps, char* smem_raw) {
    const Smem sm = layout(smem_raw);
    const int m_block = gridDim.x - 1 - blockIdx.x;  // heaviest (causal) blocks first
    const int head = blockIdx.y, batch = blockIdx.z;
    const int m0 = m_block * kBlockM;
    const int rows_q = min(kBlockM, p.len_q - m0);
    const int n_end = block_kv_tiles<kBlockN>(p, m0, rows_q);
    const uint8_t* codes = p.block_map == nullptr ? nullptr : block_map_row(p, batch, head, m_block);
    if (threadIdx.x == 0) {
      ptx::mbarrier_init(sm.q_bar, 1);
      sm.ring_k.init(kConsumerWarps);
      sm.ring_v.init(kConsumerWarps);
    }
    __syncthreads();
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
      ptx::setmaxnreg_dec<kProducerRegs>();
      if (threadIdx.x == 0)
        produce(maps, sm, m0, head, head / (p.heads_q / p.heads_kv), batch + maps.batch0, codes, n_end);
      return;
    }
    ptx::setmaxnreg_inc<kConsumerRegs>();
    consume(p, sm, wg - 1, m0, rows_q, codes, n_end);
  }
};

using Fa2KernelWs = void (*)(FwdParams, Fa2TmaMaps);

template <typename Traits, bool kPingPong>
__global__ void __launch_bounds__(384, 1)
    fa2_fwd_ws_kernel(const __grid_constant__ FwdParams p, const __grid_constant__ Fa2TmaMaps maps) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) char smem[];
  Fa2FwdWs<Traits, kPingPong>::run(p, maps, smem);
#elif defined(__CUDA_ARCH__)
  __trap();  // no wgmma / TMA in this pass (the launcher only picks this kernel on sm_90a)
#endif
}

}  // namespace ffpa::attn
