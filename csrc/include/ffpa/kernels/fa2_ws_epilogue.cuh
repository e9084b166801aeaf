// The epilogue of the warp-specialised FA-2 kernel's consumers (fa2_fwd_sm90_ws.cuh, whose picture says who
// waits on what): O / l and the LSE of a consumer warpgroup's 64 rows out, from registers
// (attn/rows_out.cuh) or by TMA through shared memory, staged with stmatrix in the 128-byte swizzle and
// stored a 64-column chunk at a time by one thread (rows past len_q and columns past Dv clipped by the map;
// the LSE from registers). The staging buffer is the kernel's own (K::kTmaStore) or, at D = 97..128
// (K::kOInK), the item's last K tile once every consumer's last S has read it; that stage goes back to the
// producer at the next item, once the store has read it. K is the kernel (Fa2FwdWs).
#pragma once
#include <cstdint>

#include "ffpa/kernels/fa2_ws_schedule.cuh"
#include "ffpa/params.h"
#include "ffpa/ptx/mbarrier.cuh"
#include "ffpa/ptx/tma.cuh"
#include "ffpa/ptx/warpgroup.cuh"

namespace ffpa::attn {

template <typename K>
struct Fa2WsEpilogue {
  using Smem = typename K::Smem;
  using Plan = typename K::Plan;
  using Item = typename K::Item;
  using Reader = typename K::Reader;
  using Out = typename K::Out;
  using Packed = typename Out::Packed;
  static constexpr int kConsumers = K::kConsumers;

  // Consumer c's packed rows staged at o_wg (o_bytes: Dv in 64-column chunks of 64 rows) and stored by TMA.
  // The caller has made the buffer free for this warpgroup's writes.
  static __device__ __forceinline__ void stage_and_store(const FwdParams& p, const Fa2TmaMaps& maps, const Item& w,
                                                         int c, int row0, int g, int t4, const Packed& po,
                                                         uint32_t o_wg, int o_bytes) {
    const int tid = threadIdx.x % 128;
    Out::to_smem_sw128(o_wg, po, tid / 32, tid % 32);
    ptx::fence_proxy_async_shared();
    ptx::named_barrier_sync(1 + kConsumers + c, 128);
    if (tid == 0) {
#pragma unroll
      for (int ch = 0; ch < o_bytes / Out::kChunkBytes; ++ch)
        ptx::tma_store_4d(&maps.o, o_wg + ch * Out::kChunkBytes, 64 * ch, w.m0 + 64 * c, w.head, w.batch);
      ptx::tma_store_commit();
    }
    Out::store_lse_rows(p, w.batch, w.head, row0, g, t4, po);
  }

  // Packed O / LSE out: straight from registers, or (kTmaStore) through this warpgroup's own buffer,
  // rewritten once the storing thread's stores of the last item have read it (bulk groups are per thread).
  static __device__ __forceinline__ void store_out(const FwdParams& p, const Fa2TmaMaps& maps, const Smem& sm,
                                                   const Item& w, int c, int row0, int g, int t4, const Packed& po) {
    if constexpr (Plan::kOWgBytes > 0) {  // (the kernel's kTmaStore)
      if (threadIdx.x % 128 == 0) ptx::tma_store_wait_read<0>();
      ptx::named_barrier_sync(1 + kConsumers + c, 128);
      stage_and_store(p, maps, w, c, row0, g, t4, po, sm.o + c * Plan::kOWgBytes, Plan::kOWgBytes);
    } else {
      Out::store_packed(p, w.batch, w.head, row0, g, t4, po);
    }
  }

  // A unit's packed rows out: a whole item's by store_out; a split-tail piece's (store: this warpgroup
  // finished second and merged the other's partial) from registers, nothing where it left its partial.
  static __device__ __forceinline__ void store_unit(const FwdParams& p, const Fa2TmaMaps& maps, const Smem& sm,
                                                    const Item& w, int c, int row0, int g, int t4, const Packed& po,
                                                    bool piece, bool store) {
    if (!piece) store_out(p, maps, sm, w, c, row0, g, t4, po);
    else if (store) Out::store_packed(p, w.batch, w.head, row0, g, t4, po);
  }

  // kOInK: O / l packed and staged in this warpgroup's half of the held K tile once every consumer's last S
  // of the item has read it (kread); the stage stays held until release_held. fin: the rows' 1 / l and LSE
  // (RowsOut::finish, computed under the last P V).
  static __device__ __forceinline__ void store_in_k(const FwdParams& p, const Fa2TmaMaps& maps, const Smem& sm,
                                                    const Item& w, int c, Reader& rd, int row0, int g, int t4,
                                                    const float (&o)[K::kNO][4], const typename Out::Finish& fin) {
    Packed po;
    Out::pack(o, fin, po);
    const int st = rd.held;
    ptx::mbarrier_wait_parity(sm.kread + 8 * st, (rd.kread_phase >> st) & 1u);
    rd.kread_phase ^= 1u << st;
    stage_and_store(p, maps, w, c, row0, g, t4, po, sm.k + st * Plan::kKBytes + c * K::kOInKBytes, K::kOInKBytes);
  }

  // kOInK: the stage held for the last item's O back to the producer once its TMA store has read it (the
  // storing thread waits, and arrives for its warpgroup's four warps).
  static __device__ __forceinline__ void release_held(const Smem& sm, Reader& rd) {
    if (rd.held < 0) return;
    if (threadIdx.x % 128 == 0) {
      ptx::tma_store_wait_read<0>();
      ptx::mbarrier_arrive_n(sm.ring_k.empty(rd.held), 4);
    }
    rd.held = -1;
  }
};

}  // namespace ffpa::attn
