// Level choice for auto calls (see ffpa_heuristic.h). The rule follows the query rows a block
// keeps, which set the FLOPs per byte of K/V (and, for L3, workspace) traffic:
//  * L1 (O in registers) up to Dv = 640: 64-row blocks up to 512 (Dv / 4 O registers per thread
//    with 4 x 2 warps), then 32-row blocks that still win with the ring depth compiled in.
//  * L3 beyond: O through the fp32 workspace lets it keep 64 x 256 tiles at any Dv, where L1's
//    32-row blocks halve its FLOPs per byte. H100, bf16, B=1 H=32 N=8192, tools/tune_l1.cu run 14
//    (docs/tuning_l1.md), L1 / L3 TFLOPS: Dv = 576 190 / 184, 640 186 / 183, 768 160 / 176,
//    1024 155 / 174; causal 768 159 / 165.
//  * L2 never on its own: it recomputes Q@K^T once per 256-wide Dv group and lost to L1 at
//    every head dim measured; it runs when forced, or when it is the only level compiled.
//  * On Hopper, L1 is the wgmma kernel, O in registers at any Dv (two column groups above 512, S
//    computed by each): L1 at every head dim (H200, bf16, B=1 H=32 N=8192, one run; README table).
// The rule depends on the head dim only: the sweeps covered N = 4096..8192 on H100/H200, so there
// is no measured reason yet to branch on lengths, batch x heads (they stay in RouteQuery for the
// rules that will need them) or device facts.
#include "launch/ffpa_heuristic.h"

namespace ffpa::launch {

int pick_ffpa_level(const RouteQuery& q, const bool (&compiled)[4], bool l1_hopper) {
  if (compiled[1] && (l1_hopper || q.head_dim_v <= 640)) return 1;
  if (compiled[3]) return 3;
  if (compiled[1]) return 1;
  if (compiled[2]) return 2;
  return 0;
}

}  // namespace ffpa::launch
