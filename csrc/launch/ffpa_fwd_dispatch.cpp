// Looks kernels up in the generated registry: by family, or by the routing rule of level 0.
// The only non-generated code that knows instantiations exist; torch-free.
#include "launch/ffpa_fwd.h"

namespace ffpa::launch {

const RegistryEntry* find_kernel(DType dtype, Family family, int level, int head_dim, int head_dim_v) {
  for (const RegistryEntry* e = registry_begin(); e != registry_end(); ++e)
    if (e->dtype == dtype && e->family == family && e->level == level && e->head_dim == head_dim &&
        e->head_dim_v == head_dim_v)
      return e;
  return nullptr;
}

const RegistryEntry* route(DType dtype, int level, int head_dim, int head_dim_v) {
  if (level == 0) {
    if (const RegistryEntry* e = find_kernel(dtype, Family::kFa2, 0, head_dim, head_dim_v)) return e;
    level = 1;
  }
  return find_kernel(dtype, Family::kFfpa, level, head_dim, head_dim_v);
}

}  // namespace ffpa::launch
