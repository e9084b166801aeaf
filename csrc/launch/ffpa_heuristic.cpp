// Level choice for auto calls (see ffpa_heuristic.h). The rule, from the H100 level sweep
// (bench/bench.py --kernels ffpa_l1 ffpa_l2 ffpa_l3; README "FFPA levels"):
//  * L1 (O in registers) wherever it is compiled: no recomputation and no workspace traffic,
//    and its tile table is spill-free or nearly so up to Dv = 1024.
//  * L3 beyond (Dv > 1024, where L1's registers run out): Q@K^T once, O through the workspace.
//  * L2 last: it recomputes Q@K^T once per 256-wide Dv group, so it only wins when a call has
//    too few query blocks to fill the device and L1 is missing.
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
  // Query blocks of 64 rows the call has: below one per SM the device idles unless work is split.
  const int64_t items = static_cast<int64_t>((q.len_q + 63) / 64) * q.batch_heads;
  const bool starved = items < dev.sms;
  if (compiled[1] && q.head_dim_v <= 1024 && !(starved && compiled[2])) return 1;
  if (starved && compiled[2] && q.head_dim_v <= 1024) return 2;
  if (compiled[3]) return 3;
  if (compiled[1]) return 1;
  if (compiled[2]) return 2;
  return 0;
}

}  // namespace ffpa::launch
