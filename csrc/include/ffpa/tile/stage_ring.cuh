// The producer/consumer ring of shared-memory stages a warp-specialised Hopper kernel runs on (sm_90):
// a producer (one thread of a producer warp) fills stages by TMA, consumers (MMA warpgroups) use and
// release them, and two mbarriers per stage say who may go on:
//
//            full[s]: 1 arrival + the stage's TMA bytes        empty[s]: one arrival per consumer warp
//   producer ------------------------------------------------------------------------------------
//     wait empty[s] (phase ^ 1)  ->  arrive_expect_tx(full[s], bytes)  ->  tma_load(.., full[s])
//   consumers -----------------------------------------------------------------------------------
//     wait full[s] (phase)  ->  use stage s  ->  arrive empty[s]
//
// Both sides walk the stages 0, 1, .., kStages - 1, 0, .. with a phase bit that flips at each wrap
// (State). The producer's first pass finds every stage free: it waits for the parity of the phase
// before a fresh barrier's first, which counts as complete. Depth (kStages) is the number of tiles
// the producer may run ahead. Barriers only: the stages' addresses are the kernel's business.
#pragma once
#include <cstdint>

#include "ffpa/ptx/mbarrier.cuh"

namespace ffpa {

template <int kStages_>
struct StageRing {
  static constexpr int kStages = kStages_;
  static_assert(kStages >= 1 && kStages <= 16, "a ring of 1..16 stages");
  static constexpr int kBarrierBytes = 2 * kStages * 8;  // full[kStages], then empty[kStages]

  // Where a side is: the stage it works on next and that stage's phase parity.
  struct State {
    int stage = 0;
    uint32_t phase = 0;
    __device__ __forceinline__ void advance() {
      if (++stage == kStages) {
        stage = 0;
        phase ^= 1u;
      }
    }
  };

  uint32_t bars;  // shared address of full[0] (8-byte aligned); empty[0] follows the full barriers

  __device__ __forceinline__ uint32_t full(int s) const { return bars + 8u * static_cast<uint32_t>(s); }
  __device__ __forceinline__ uint32_t empty(int s) const { return bars + 8u * static_cast<uint32_t>(kStages + s); }

  // One thread, then a block barrier before any side uses the ring: full barriers take the
  // producer's arrivals (one: the TMA thread's, with the stage's bytes; or one per warp where warps
  // fill the stage with ordinary stores), empty barriers `consumer_arrivals` (the consumer warps, one
  // lane each).
  __device__ __forceinline__ void init(uint32_t consumer_arrivals, uint32_t producer_arrivals = 1) const {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(full(s), producer_arrivals);
      ptx::mbarrier_init(empty(s), consumer_arrivals);
    }
    ptx::fence_barrier_init();
  }

  // Producer: wait until the consumers released st's stage, then announce its bytes; the TMA loads
  // that follow name full(st.stage) as their barrier.
  __device__ __forceinline__ void producer_acquire(const State& st) const {
    ptx::mbarrier_wait_parity(empty(st.stage), st.phase ^ 1u);
  }
  __device__ __forceinline__ void producer_expect(const State& st, uint32_t bytes) const {
    ptx::mbarrier_arrive_expect_tx(full(st.stage), bytes);
  }

  // Consumers: wait until st's stage has landed; release it when done (one lane per warp, after the
  // warp's last read of the stage).
  __device__ __forceinline__ void consumer_wait(const State& st) const { ptx::mbarrier_wait_parity(full(st.stage), st.phase); }
  __device__ __forceinline__ void consumer_release(const State& st) const { ptx::mbarrier_arrive(empty(st.stage)); }
};

}  // namespace ffpa
