// The runtime choice of FFPA level for level=0 (auto) calls: one function of the call's sizes and
// the device's facts. Tiles per level come from the constexpr tables in ffpa/ffpa_traits.h and
// pipeline depth from launch/heuristics.h (shared memory per SM); this file picks the level.
#pragma once
#include "launch/ffpa_fwd.h"

namespace ffpa::launch {

struct DeviceFacts {
  int cc_major = 0, cc_minor = 0;
  int sms = 1;
  int smem_per_sm = 0;
};

// The current device's facts (read once per device).
DeviceFacts current_device_facts();

// The FFPA level (1..3) that runs `q` fastest among the compiled ones (compiled[level]), or 0
// when none is compiled.
int pick_ffpa_level(const RouteQuery& q, const bool (&compiled)[4], const DeviceFacts& dev);

}  // namespace ffpa::launch
