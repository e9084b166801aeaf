// Looks kernels up in the generated registry: by family, or by the routing rule of level 0.
// The only non-generated code that knows instantiations exist; torch-free.
#include <atomic>
#include <cstring>

#include "launch/ffpa_fwd.h"
#include "launch/ffpa_heuristic.h"

namespace ffpa::launch {

namespace {
std::atomic<int> g_fa2_mma{static_cast<int>(Fa2Mma::kAuto)};
}  // namespace

void set_fa2_mma(Fa2Mma mode) { g_fa2_mma.store(static_cast<int>(mode), std::memory_order_relaxed); }
Fa2Mma fa2_mma() { return static_cast<Fa2Mma>(g_fa2_mma.load(std::memory_order_relaxed)); }

const RegistryEntry* find_kernel(DType dtype, Family family, int level, AccMode acc, int head_dim, int head_dim_v) {
  for (const RegistryEntry* e = registry_begin(); e != registry_end(); ++e)
    if (e->dtype == dtype && e->family == family && e->level == level && e->acc == acc && e->head_dim == head_dim &&
        e->head_dim_v == head_dim_v)
      return e;
  return nullptr;
}

const RegistryEntry* find_kernel(const char* family, DType dtype, AccMode acc, int head_dim, int head_dim_v) {
  for (const RegistryEntry* e = registry_begin(); e != registry_end(); ++e)
    if (std::strcmp(e->name, family) == 0 && e->dtype == dtype && e->acc == acc && e->head_dim == head_dim &&
        e->head_dim_v == head_dim_v)
      return e;
  return nullptr;
}

const RegistryEntry* route(const RouteQuery& q) {
  if (q.level != 0) return find_kernel(q.dtype, Family::kFfpa, q.level, q.acc, q.head_dim, q.head_dim_v);
  if (q.acc == AccMode::kF32)
    if (const RegistryEntry* e = find_kernel(q.dtype, Family::kFa2, 0, q.acc, q.head_dim, q.head_dim_v)) return e;
  bool compiled[4] = {false, false, false, false};
  for (int level = 1; level <= 3; ++level)
    compiled[level] = find_kernel(q.dtype, Family::kFfpa, level, q.acc, q.head_dim, q.head_dim_v) != nullptr;
  const int level = pick_ffpa_level(q, compiled);
  return level == 0 ? nullptr : find_kernel(q.dtype, Family::kFfpa, level, q.acc, q.head_dim, q.head_dim_v);
}

}  // namespace ffpa::launch
