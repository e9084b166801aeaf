// Looks a (dtype, level, head dim) up in the generated registry and forwards to its launcher.
// The only non-generated code that knows instantiations exist; torch-free.
#include "launch/ffpa_fwd.h"

namespace ffpa::launch {

namespace {
const RegistryEntry* find(DType dtype, int level, int head_dim, int head_dim_v) {
  for (const RegistryEntry* e = registry_begin(); e != registry_end(); ++e)
    if (e->dtype == dtype && e->level == level && e->head_dim == head_dim && e->head_dim_v == head_dim_v)
      return e;
  return nullptr;
}
}  // namespace

bool ffpa_fwd_compiled(DType dtype, int level, int head_dim, int head_dim_v) {
  return find(dtype, level, head_dim, head_dim_v) != nullptr;
}

cudaError_t ffpa_fwd_info(DType dtype, int level, int head_dim, int head_dim_v, int num_stages,
                          bool query_attributes, KernelInfo* info) {
  const RegistryEntry* e = find(dtype, level, head_dim, head_dim_v);
  if (e == nullptr || info == nullptr) return cudaErrorInvalidValue;
  return e->info(num_stages, query_attributes, info);
}

cudaError_t ffpa_fwd(DType dtype, int level, FwdParams params, cudaStream_t stream) {
  const RegistryEntry* e = find(dtype, level, params.head_dim, params.head_dim_v);
  if (e == nullptr) return cudaErrorInvalidValue;
  return e->run(params, stream);
}

}  // namespace ffpa::launch
