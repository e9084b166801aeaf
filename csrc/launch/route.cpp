// The chooser: which compiled kernel a call runs, decided here only, from the generated registry's
// data (ffpa_attn/_spec.py: op, family, arch, priority, auto) and the FFPA level heuristic. The
// only non-generated code that knows instantiations exist; torch-free.
#include <atomic>
#include <cstring>

#include "launch/ffpa_fwd.h"
#include "launch/ffpa_heuristic.h"

namespace ffpa::launch {

namespace {
std::atomic<int> g_fa2_mma{static_cast<int>(Fa2Mma::kAuto)};
std::atomic<int> g_decode_merge{static_cast<int>(DecodeMerge::kAuto)};
std::atomic<int> g_decode_order{static_cast<int>(DecodeOrder::kAuto)};
std::atomic<int> g_fp8_v_transpose{static_cast<int>(Fp8VTranspose::kAuto)};

// The entry runs on the device and the MMA preference allows it.
bool available(const RegistryEntry& e, const RouteQuery& q) {
  if (e.exact_cc != 0 && e.exact_cc != q.device_cc) return false;
  return !(q.mma == Fa2Mma::kSync && e.family == Family::kFa2 && e.exact_cc != 0);
}

// Compiled for what the call asks (op, dtype, accumulation, head dims) and available on its device.
bool serves(const RegistryEntry& e, const RouteQuery& q) {
  return e.op == q.op && e.dtype == q.dtype && e.acc == q.acc && e.head_dim == q.head_dim &&
         e.head_dim_v == q.head_dim_v && available(e, q);
}

// The lowest-priority entry serving q that `pred` accepts (the first in registry order on a tie).
template <typename Pred>
const RegistryEntry* best(const RouteQuery& q, Pred pred) {
  const RegistryEntry* pick = nullptr;
  for (const RegistryEntry* e = registry_begin(); e != registry_end(); ++e)
    if (serves(*e, q) && pred(*e) && (pick == nullptr || e->priority < pick->priority)) pick = e;
  return pick;
}
}  // namespace

void set_fa2_mma(Fa2Mma mode) { g_fa2_mma.store(static_cast<int>(mode), std::memory_order_relaxed); }
Fa2Mma fa2_mma() { return static_cast<Fa2Mma>(g_fa2_mma.load(std::memory_order_relaxed)); }
void set_decode_merge(DecodeMerge mode) { g_decode_merge.store(static_cast<int>(mode), std::memory_order_relaxed); }
DecodeMerge decode_merge() { return static_cast<DecodeMerge>(g_decode_merge.load(std::memory_order_relaxed)); }
void set_decode_order(DecodeOrder mode) { g_decode_order.store(static_cast<int>(mode), std::memory_order_relaxed); }
DecodeOrder decode_order() { return static_cast<DecodeOrder>(g_decode_order.load(std::memory_order_relaxed)); }
void set_fp8_v_transpose(Fp8VTranspose mode) { g_fp8_v_transpose.store(static_cast<int>(mode), std::memory_order_relaxed); }
Fp8VTranspose fp8_v_transpose() {
  return static_cast<Fp8VTranspose>(g_fp8_v_transpose.load(std::memory_order_relaxed));
}

const RegistryEntry* find_kernel(const char* name, const RouteQuery& q) {
  for (const RegistryEntry* e = registry_begin(); e != registry_end(); ++e)
    if (std::strcmp(e->name, name) == 0) {  // the family's op, whatever q.op says
      RouteQuery named = q;
      named.op = e->op;
      return best(named, [name](const RegistryEntry& x) { return std::strcmp(x.name, name) == 0; });
    }
  return nullptr;
}

const RegistryEntry* route(const RouteQuery& q) {
  if (q.level != 0) return best(q, [&q](const RegistryEntry& e) { return e.level == q.level; });
  // Kernels built for this GPU's arch (exact_cc: Hopper's wgmma + TMA ones) first: where one serves
  // the call, an auto call picks among those only (FA-2's Hopper line, where FA-2 has the pair,
  // before its mma.sync line). set_fa2_mma("sync") keeps the portable order.
  const bool arch_only =
      q.mma != Fa2Mma::kSync && best(q, [](const RegistryEntry& e) { return e.exact_cc != 0; }) != nullptr;
  auto ok = [arch_only](const RegistryEntry& e) { return !arch_only || e.exact_cc != 0; };
  if (q.acc == AccMode::kF32)
    if (const RegistryEntry* e = best(q, [&ok](const RegistryEntry& e) { return e.auto_first && ok(e); })) return e;
  auto ffpa = [&ok](int level) {
    return [&ok, level](const RegistryEntry& e) { return !e.auto_first && e.level == level && ok(e); };
  };
  bool compiled[4] = {false, false, false, false};
  for (int level = 1; level <= 3; ++level) compiled[level] = best(q, ffpa(level)) != nullptr;
  const RegistryEntry* l1 = best(q, ffpa(1));
  const int level = pick_ffpa_level(q, compiled, l1 != nullptr && l1->exact_cc != 0);
  if (level == 0) return nullptr;
  return best(q, ffpa(level));
}

}  // namespace ffpa::launch
