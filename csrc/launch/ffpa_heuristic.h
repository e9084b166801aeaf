// The runtime choice of FFPA level for level=0 (auto) calls, from the call's sizes. Tiles per level
// come from the constexpr tables in ffpa/traits/ffpa_traits.h and pipeline depth from launch/heuristics.h
// (shared memory per SM read off the device); this file picks the level.
#pragma once
#include "launch/ffpa_fwd.h"

namespace ffpa::launch {

// The FFPA level (1..3) that runs `q` fastest among the compiled ones (compiled[level]), or 0
// when none is compiled. l1_hopper: the level-1 kernel the call would run is the Hopper one
// (wgmma + TMA, kernels/ffpa_fwd_sm90_ws.cuh), not mma.sync.
int pick_ffpa_level(const RouteQuery& q, const bool (&compiled)[4], bool l1_hopper);

}  // namespace ffpa::launch
