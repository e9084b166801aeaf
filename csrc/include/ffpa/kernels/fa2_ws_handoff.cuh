// The consumer side of the warp-specialised FA-2 kernel's item hand-off (fa2_fwd_sm90_ws.cuh, whose picture says who
// waits on what): Q's slot released after an item's last S, the next item's index and key range read from the slot
// the producer filled (write_item), the key tiles a consumer's own rows see and the drain of the others, a negative
// scale's flip of Q, and the look-ahead kernels' next first S issued under this item's epilogue. K is the kernel
// (Fa2FwdWs).
#pragma once
#include <cstdint>

#include "ffpa/attn/tile_mask.cuh"
#include "ffpa/params.h"
#include "ffpa/ptx/warpgroup.cuh"
#include "ffpa/ptx/wgmma.cuh"

namespace ffpa::attn {

template <typename K>
struct Fa2WsHandoff {
  using Smem = typename K::Smem;
  using Reader = typename K::Reader;
  using Item = typename K::Item;
  using ItemDiv = typename K::ItemDiv;
  using Plan = typename K::Plan;
  using QTile = typename K::QTile;
  static constexpr int kNS = K::kNS;
  static constexpr int kBlockN = K::kBlockN;
  static constexpr int kConsumers = K::kConsumers;

  static __device__ __forceinline__ void release_q(const Smem& sm, Reader& rd, int lane) {
    __syncwarp();
    if (lane == 0) sm.ring_q.consumer_release(rd.sq);
    rd.sq.advance();
  }

  // The next item's index (-1: none left), after its Q has landed (write_item).
  static __device__ __forceinline__ int next_item(const Smem& sm, Reader& rd) {
    sm.ring_q.consumer_wait(rd.sq);  // the item's Q and its index (write_item)
    return slot_word(sm, rd, 0);
  }
  // Word w of the item hand-off in Q's current slot (0: the item, 1: its key range), read by lane 0 for
  // its warp: the lane that later releases Q's slot (release_q), so the read is ordered before the
  // producer's next write by that lane's own arrival. (Read by every lane, racecheck reported the other
  // lanes' reads against the next write: it does not carry their order through the __syncwarp before
  // lane 0's arrival; session 30, D = 320 / 384.) Valid until the slot's release.
  static __device__ __forceinline__ int slot_word(const Smem& sm, const Reader& rd, int w) {
    int v = 0;
    if (threadIdx.x % 32 == 0)
      asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(sm.item + 8 * rd.sq.stage + 4 * w) : "memory");
    return __shfl_sync(0xffffffffu, v, 0);
  }

  // The key tiles [0, own_end) of an item that consumer c's 64 rows see: with causal masking its last row's
  // limit, none for rows past len_q (the last query block's padding). The item's tiles past it (a
  // 192-row item's first consumers end up to a 128-key tile early on the diagonal) are drained.
  static __device__ __forceinline__ int own_end(const FwdParams& p, const Item& w, int c) {
    const int m0 = w.m0 + 64 * c, rows = min(64, p.len_q - m0);
    return rows <= 0 ? 0 : min(w.n_end, block_kv_tiles<kBlockN>(p, m0, rows));
  }
  // Key tiles [j, n_end) of the item that this warpgroup does not compute: each one's K and V stages
  // waited for (a release counts in the phase it was filled for) and released, and a null ping-pong turn,
  // so the other consumers' rotation and the rings go on as if it had.
  static __device__ __forceinline__ void drain(const Smem& sm, Reader& rd, int c, int lane, const uint8_t* codes,
                                               int j, int n_end) {
    for (; j < n_end; j = K::next_tile(codes, j + 1, n_end)) {
      sm.ring_k.consumer_wait(rd.sk);
      sm.ring_v.consumer_wait(rd.sv);
      K::turn_wait(c);
      K::turn_pass(c);
      if (lane == 0) {
        sm.ring_k.consumer_release(rd.sk);
        sm.ring_v.consumer_release(rd.sv);
      }
      rd.sk.advance();
      rd.sv.advance();
    }
  }

  // A negative scale is a positive one on -Q (row max of raw scores): this warpgroup's rows of Q flipped.
  static __device__ __forceinline__ void flip_q(uint32_t q_wg, int c) {
    QTile::xor_rows64(q_wg, 0x80008000u, threadIdx.x % 128);
    ptx::fence_proxy_async_shared();
    ptx::named_barrier_sync(1 + kConsumers + c, 128);
  }

  // kAhead, after this item's last P V: the next item's index; true where it has a key tile, whose
  // first S the caller issues (issue_first) under this item's epilogue.
  static __device__ __forceinline__ bool look_ahead(const FwdParams& p, const Smem& sm, const ItemDiv& dv, int c,
                                                    Reader& rd) {
    rd.ahead = next_item(sm, rd);
    rd.issued = false;
    if (rd.ahead < 0) return false;
    if (K::kSplitTail && slot_word(sm, rd, 1) != 0) return true;  // a split-tail piece: tiles by construction
    const Item w = K::item(p, rd.ahead, dv);
    const int e = K::kOwnEnd ? own_end(p, w, c) : w.n_end;  // this warpgroup's tiles (consume's)
    return K::next_tile(w.codes, 0, e) < e;
  }
  // An item's first S = Q K^T on this warpgroup's turn, once its first K tile has landed.
  static __device__ __forceinline__ void issue_s0(const Smem& sm, int c, const Reader& rd, uint32_t q_wg,
                                                  float (&s)[kNS][4]) {
    sm.ring_k.consumer_wait(rd.sk);
    K::turn_wait(c);
    K::issue_qk(s, q_wg, sm.k + rd.sk.stage * Plan::kKBytes);
    K::turn_pass(c);
  }
  // This warpgroup's 64 rows of Q in the slot rd.sq names (128 bytes each in a chunk), through an opaque
  // move: hoisted out of the item loop, the Q descriptors derived from it stayed live across items and
  // spilled (D=256).
  static __device__ __forceinline__ uint32_t q_rows(const Smem& sm, const Reader& rd, int c) {
    uint32_t q_wg;
    asm volatile("mov.b32 %0, %1;\n" : "=r"(q_wg) : "r"(sm.q + rd.sq.stage * Plan::kQBytes + c * 64 * 128));
    return q_wg;
  }
  // The next item's first S, issued before this item's epilogue (Q flipped first for a negative scale).
  static __device__ __forceinline__ void issue_first(const FwdParams& p, const Smem& sm, int c, Reader& rd,
                                                     float (&s)[kNS][4]) {
    const uint32_t q_wg = q_rows(sm, rd, c);
    if (p.scale_log2 < 0.f) flip_q(q_wg, c);
    issue_s0(sm, c, rd, q_wg, s);
    rd.issued = true;
  }
};

}  // namespace ffpa::attn
