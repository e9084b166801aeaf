// Level choice for auto calls (see ffpa_heuristic.h). The rule, from the H100 level sweep of
// session 3 (bench/bench.py --kernels ffpa_l1 ffpa_l2 ffpa_l3, B=1 H=32 N=8192 bf16, README
// "FFPA levels"; L1 / L2 / L3 TFLOPS at D=512: 163 / 128 / 150, at D=1024: 131 / 79 / 117):
//  * L1 (O in registers) wherever it is compiled (Dv <= 1024): no recomputation, no workspace.
//  * L3 beyond, where L1's registers run out: Q@K^T once, O through the fp32 workspace.
//  * L2 never on its own: it recomputes Q@K^T once per 256-wide Dv group and lost to L1 at
//    every head dim measured; it runs when forced, or when it is the only level compiled.
// The rule depends on the head dim only: the sweep covered one length (N = 8192) on one device, so
// there is no measured reason yet to branch on lengths, batch x heads (they stay in RouteQuery for
// the rules that will need them) or device facts.
#include "launch/ffpa_heuristic.h"

namespace ffpa::launch {

int pick_ffpa_level(const RouteQuery& q, const bool (&compiled)[4]) {
  if (compiled[1] && q.head_dim_v <= 1024) return 1;
  if (compiled[3]) return 3;
  if (compiled[1]) return 1;
  if (compiled[2]) return 2;
  return 0;
}

}  // namespace ffpa::launch
