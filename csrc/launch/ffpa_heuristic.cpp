// Level choice for auto calls (see ffpa_heuristic.h). The rule, from the H100 level sweep of
// session 3 (bench/bench.py --kernels ffpa_l1 ffpa_l2 ffpa_l3, B=1 H=32 N=8192 bf16, README
// "FFPA levels"; L1 / L2 / L3 TFLOPS at D=512: 163 / 128 / 150, at D=1024: 131 / 79 / 117):
//  * L1 (O in registers) wherever it is compiled (Dv <= 1024): no recomputation, no workspace.
//  * L3 beyond, where L1's registers run out: Q@K^T once, O through the fp32 workspace.
//  * L2 never on its own: it recomputes Q@K^T once per 256-wide Dv group and lost to L1 at
//    every head dim measured; it runs when forced, or when it is the only level compiled.
#include "launch/ffpa_heuristic.h"

#include <cuda_runtime_api.h>

#include "launch/heuristics.h"

namespace ffpa::launch {

DeviceFacts current_device_facts() {
  DeviceFacts f;
  f.cc_major = device_attribute<cudaDevAttrComputeCapabilityMajor>(8);
  f.cc_minor = device_attribute<cudaDevAttrComputeCapabilityMinor>(0);
  f.sms = num_sms();
  f.smem_per_sm = smem_per_sm();
  return f;
}

int pick_ffpa_level(const RouteQuery& q, const bool (&compiled)[4], const DeviceFacts& dev) {
  (void)dev;  // the measured ranking held on the one device measured; kept in the signature for
              // rules that depend on it (SM count, shared memory per SM)
  if (compiled[1] && q.head_dim_v <= 1024) return 1;
  if (compiled[3]) return 3;
  if (compiled[1]) return 1;
  if (compiled[2]) return 2;
  return 0;
}

}  // namespace ffpa::launch
