// The Python module ffpa_attn._C: importing it registers the ops (TORCH_LIBRARY in registration.cpp)
// and exposes what this build contains and how each kernel would be launched.
#include <cuda_runtime_api.h>
#include <pybind11/pybind11.h>
#include <torch/python.h>

#include <string>

#include "ffpa/constants.h"
#include "ffpa/kernels/fa2_split_plan.h"
#include "ffpa/kernels/fa2_walk_order.h"
#include "generated/build_manifest.h"
#include "generated/spec.h"
#include "launch/ffpa_fwd.h"
#include "launch/ffpa_heuristic.h"
#include "launch/heuristics.h"
#include "ops/fastpath.h"

namespace py = pybind11;

namespace {

py::dict build_info() {
  py::dict d = py::module_::import("json").attr("loads")(std::string(FFPA_BUILD_MANIFEST_JSON));
  d["cuda_version"] = std::to_string(CUDART_VERSION / 1000) + "." + std::to_string((CUDART_VERSION % 1000) / 10);
  py::dict limits;
  limits["max_grid_yz"] = ffpa::kMaxGridYZ;  // query heads, mask (batch, head) slices
  d["limits"] = limits;
  return d;
}

// Names and codes of ffpa_attn/_spec.py (generated/spec.h).
struct Named {
  const char* name;
  int code;
};
constexpr Named kDtypes[] = FFPA_DTYPE_NAMES;
constexpr Named kAccs[] = FFPA_ACC_NAMES;

template <size_t N>
int lookup(const Named (&table)[N], const std::string& name, const char* fn, const char* arg) {
  std::string known;
  for (const Named& n : table) {
    if (name == n.name) return n.code;
    known += (known.empty() ? "'" : ", '") + std::string(n.name) + "'";
  }
  throw py::value_error(std::string(fn) + ": `" + arg + "` must be one of " + known + ", got '" + name + "'");
}

ffpa::launch::DType dtype_code(const std::string& dtype, const char* fn) {
  const std::string name = dtype == "fp16" ? "float16" : dtype == "bf16" ? "bfloat16" : dtype;
  return static_cast<ffpa::launch::DType>(lookup(kDtypes, name, fn, "dtype"));
}

// Launch configuration of one compiled kernel; registers/local memory need a CUDA device.
// `family` is one of the family names of build_info() (the registry's, from ffpa_attn/_spec.py), the
// entry of it a call would run on the current device (FA-2: wgmma or mma.sync, as set_fa2_mma prefers);
// `acc` is "fp32", "fp16" or "mixed" (FFPA only).
py::dict kernel_info(const std::string& dtype, const std::string& family, int head_dim, int head_dim_v, int num_stages,
                     bool query_attributes, const std::string& acc) {
  const ffpa::launch::DType dt = dtype_code(dtype, "kernel_info");
  // Family names come from the registry (ffpa_attn/_spec.py), not a list restated here.
  bool known = false;
  std::string names;
  for (const ffpa::launch::RegistryEntry* e = ffpa::launch::registry_begin(); e != ffpa::launch::registry_end(); ++e) {
    known = known || family == e->name;
    if (names.find(std::string("'") + e->name + "'") == std::string::npos)
      names += (names.empty() ? "" : ", ") + std::string("'") + e->name + "'";
  }
  if (!known)
    throw py::value_error("kernel_info: `family` must be one of the families of this build (" + names + "), got '" +
                          family + "'");
  const auto mode = static_cast<ffpa::AccMode>(lookup(kAccs, acc, "kernel_info", "acc"));
  ffpa::launch::RouteQuery q;
  q.dtype = dt;
  q.acc = mode;
  q.head_dim = head_dim;
  q.head_dim_v = head_dim_v;
  q.device_cc = ffpa::launch::device_cc();
  q.mma = ffpa::launch::fa2_mma();
  const ffpa::launch::RegistryEntry* e = ffpa::launch::find_kernel(family.c_str(), q);
  if (e == nullptr)
    throw py::value_error("kernel_info: (" + dtype + ", " + family + ", acc " + acc + ", head dims " +
                          std::to_string(head_dim) + "/" + std::to_string(head_dim_v) + ") is not compiled");
  ffpa::launch::KernelInfo k;
  const cudaError_t err = e->info(num_stages, query_attributes, &k);
  if (err != cudaSuccess) throw py::value_error(std::string("kernel_info: ") + cudaGetErrorString(err));
  py::dict d;
  d["family"] = family;
  d["level"] = k.level;
  d["mma"] = k.wgmma ? "wgmma" : "mma.sync";
  d["head_dim"] = k.head_dim;
  d["head_dim_v"] = k.head_dim_v;
  d["block_m"] = k.block_m;
  d["block_n"] = k.block_n;
  d["mask_block_m"] = k.mask_block_m > 0 ? k.mask_block_m : k.block_m;
  d["mask_block_n"] = k.mask_block_n > 0 ? k.mask_block_n : k.block_n;
  d["warps_m"] = k.warps_m;
  d["warps_n"] = k.warps_n;
  d["chunk_d"] = k.chunk_d;
  d["smem_padded"] = k.smem_padded;
  d["group_d"] = k.group_d;
  d["acc"] = acc;
  d["threads"] = k.threads;
  d["producer_warps"] = k.producer_warps;
  d["num_stages"] = k.num_stages;
  d["smem_bytes"] = k.smem_bytes;
  if (k.family == ffpa::launch::Family::kFp8) d["fp8_vt_prepass"] = k.fp8_vt_prepass;
  if (k.family == ffpa::launch::Family::kFa2) {
    d["o_tma_store"] = k.o_tma_store;
    d["mask_o_tma_store"] = k.mask_o_tma_store;
    d["q_slots"] = k.q_slots;
    d["mask_q_slots"] = k.mask_q_slots;
    d["own_end"] = k.own_end;
    d["mask_own_end"] = k.mask_own_end;
    d["short_block_n"] = k.short_block_n;
  }
  if (query_attributes) {
    d["registers"] = k.registers;
    d["local_bytes"] = k.local_bytes;
  }
  return d;
}

// The level heuristic of auto calls on explicit inputs (no GPU needed): which FFPA level (1..3, 0 =
// none) runs head dims (D, Dv) at lengths (L, S) when the levels in `compiled` exist; l1_hopper: the
// level-1 kernel there is the Hopper (wgmma + TMA) one.
int pick_ffpa_level(int head_dim, int head_dim_v, int len_q, int len_kv, int64_t batch_heads, const py::list& compiled,
                    bool l1_hopper) {
  using namespace ffpa::launch;
  bool have[4] = {false, false, false, false};
  for (const auto& x : compiled) {
    const int level = x.cast<int>();
    if (level < 1 || level > 3) throw py::value_error("pick_ffpa_level: levels are 1..3, got " + std::to_string(level));
    have[level] = true;
  }
  RouteQuery q;
  q.head_dim = head_dim;
  q.head_dim_v = head_dim_v;
  q.len_q = len_q;
  q.len_kv = len_kv;
  q.batch_heads = batch_heads;
  return pick_ffpa_level(q, have, l1_hopper);
}

// What the chooser (launch/route.cpp) runs for a call with these arguments on the current device:
// {family, level, mma} or None. `acc` is the ops' code (0 = auto); `op` "fwd" or "decode".
py::object route(const std::string& op, const std::string& dtype, int head_dim, int head_dim_v, int level, int acc,
                 int len_q, int len_kv, int64_t batch_heads) {
  using namespace ffpa::launch;
  if (op != "fwd" && op != "decode") throw py::value_error("route: `op` must be 'fwd' or 'decode', got '" + op + "'");
  bool known_acc = acc == ffpa::kAccAuto;
  for (const Named& n : kAccs) known_acc = known_acc || acc == n.code;
  if (!known_acc) throw py::value_error("route: `acc` must be an acc code of ffpa_attn/_spec.py, got " + std::to_string(acc));
  RouteQuery q;
  q.op = op == "fwd" ? Op::kFwd : Op::kDecode;
  q.dtype = dtype_code(dtype, "route");
  q.level = level;
  q.acc = acc == ffpa::kAccAuto ? ffpa::AccMode::kF32 : static_cast<ffpa::AccMode>(acc);
  q.head_dim = head_dim;
  q.head_dim_v = head_dim_v;
  q.len_q = len_q;
  q.len_kv = len_kv;
  q.batch_heads = batch_heads;
  q.device_cc = device_cc();
  q.mma = fa2_mma();
  const RegistryEntry* e = ffpa::launch::route(q);
  if (e == nullptr) return py::none();
  py::dict d;
  d["family"] = e->name;
  d["level"] = e->level;
  KernelInfo k;
  d["mma"] = e->info(0, false, &k) == cudaSuccess && k.wgmma ? "wgmma" : "mma.sync";
  d["arch"] = e->exact_cc != 0 ? std::to_string(e->exact_cc) + "a" : std::string("any");
  return d;
}

// The split count an auto decode call uses (launch/heuristics.h), for explicit sizes (no GPU needed).
int decode_splits(int64_t base_blocks, int key_tiles, int blocks_per_sm, int sms, bool varlen, bool masked,
                  int one_per_sm_min, bool odd_pages) {
  return ffpa::launch::choose_decode_splits(base_blocks, key_tiles, blocks_per_sm, sms, varlen, masked, one_per_sm_min,
                                            odd_pages);
}

// The process-wide modes (launch/ffpa_fwd.h): each enum's names in its order, 0 = "auto".
// FA-2's tensor-core path (Fa2Mma), the split-KV merge's form (DecodeMerge, launch/heuristics.h), where
// the FA-2-style FP8 kernel gets V^T (Fp8VTranspose).
constexpr const char* kFa2MmaNames[] = {"auto", "sync", "wgmma"};
constexpr const char* kDecodeMergeNames[] = {"auto", "fused", "kernel", "spread"};
constexpr const char* kFp8VTransposeNames[] = {"auto", "kernel", "prepass"};
constexpr const char* kDecodeOrderNames[] = {"auto", "launch", "longest", "balanced"};
static_assert(static_cast<int>(ffpa::launch::Fa2Mma::kWgmma) == 2 &&
                  static_cast<int>(ffpa::launch::DecodeMerge::kKernel) == 2 &&
                  static_cast<int>(ffpa::launch::Fp8VTranspose::kPrepass) == 2,
              "the name tables follow the enums' order");

// `fn`: the Python setter's name, for the error that lists the accepted modes.
template <typename E, size_t N>
void set_mode(const char* fn, const char* const (&names)[N], void (*set)(E), const std::string& mode) {
  for (size_t i = 0; i < N; ++i)
    if (mode == names[i]) return set(static_cast<E>(i));
  std::string known;
  for (size_t i = 0; i < N; ++i) known += std::string(i == 0 ? "'" : i + 1 == N ? " or '" : ", '") + names[i] + "'";
  throw py::value_error(std::string(fn) + ": `mode` must be " + known + ", got '" + mode + "'");
}

template <typename E, size_t N>
std::string mode_name(const char* const (&names)[N], E mode) {
  const auto i = static_cast<size_t>(mode);
  return i < N ? names[i] : names[0];
}

// set_<name>(mode) and get_<name>() of one process-wide mode (names[i]: the mode of value i).
template <typename E, size_t N>
void def_mode(py::module_& m, const std::string& name, const char* const (&names)[N], void (*set)(E), E (*get)(),
              const char* set_doc, const char* get_doc) {
  const std::string setter = "set_" + name;
  m.def(setter.c_str(), [setter, &names, set](const std::string& mode) { set_mode(setter.c_str(), names, set, mode); },
        py::arg("mode"), set_doc);
  m.def(("get_" + name).c_str(), [&names, get] { return mode_name(names, get()); }, get_doc);
}

// Whether an auto-merge decode call fuses its merge (launch/heuristics.h), for explicit sizes (units:
// how many a thread merges at once, 1 in the mma.sync kernel, 2 in the narrow one).
bool decode_fused_merge(int rows, int head_dim_v, int splits, int threads, int units) {
  return ffpa::launch::decode_fused_merge(rows, head_dim_v, splits, threads, ffpa::kFusedMergeBatch, units,
                                          ffpa::launch::DecodeMerge::kAuto);
}

// Whether a decode call's merge is spread over its split blocks (launch/heuristics.h), for explicit
// sizes, under the process-wide merge setting.
bool decode_spread_merge(int splits, int64_t blocks, int64_t sms) {
  return ffpa::launch::decode_spread_merge(splits, blocks, sms, ffpa::launch::decode_merge());
}

// Whether a narrow-MLA decode call under the spread merge deals its split blocks by length
// (launch/heuristics.h), for explicit sizes, under the process-wide order setting.
bool decode_balanced_splits(bool varlen, int batch, int splits) {
  return ffpa::launch::decode_balanced_splits(varlen, batch, splits, ffpa::launch::decode_order());
}

// The split tail's pieces, share by share, as the FA-2 kernel's producer walks them (tests/test_fa2_schedule.py).
py::list fa2_split_pieces(int64_t items, int64_t from_slot, int shares, int tiles) {
  using S = ffpa::attn::Fa2SplitSchedule;
  py::list out;
  if (shares <= 0 || tiles <= 0 || from_slot < 0 || items <= from_slot) return out;
  if ((items - from_slot) * tiles > INT32_MAX) return out;  // (the kernel's launcher never splits so much)
  const int w = S::tiles(items, from_slot, tiles);
  for (int k = 0; k < shares; ++k)
    S::for_each_piece(k, w, shares, tiles, [&](const S::Piece& pc) {
      out.append(py::make_tuple(k, pc.item, pc.jb, pc.je, S::cut_at(pc.item, tiles, w, shares)));
    });
  return out;
}

// The warp-specialised FA-2 kernel's walk (kernels/fa2_walk_order.h) on the host: every item in slot order (a pair's
// two in turn) as (batch x head, query block); empty for sizes the launcher never makes.
py::list fa2_walk_items(int bh, int m_blocks, bool causal, int tail) {
  using W = ffpa::attn::Fa2WalkOrder;
  py::list out;
  if (bh <= 0 || m_blocks <= 0 || tail < 0 || tail > bh || (!causal && tail != 0)) return out;
  if (static_cast<int64_t>(bh) * m_blocks > INT32_MAX) return out;
  const int slots = static_cast<int>(W::slots(bh, causal, tail, m_blocks));
  for (int s = 0; s < slots; ++s)
    for (int half = 0; half < (W::pair_has_second(causal, tail, bh, m_blocks, s) ? 2 : 1); ++half) {
      const int t = W::item(bh, causal, tail, m_blocks, s, half);
      out.append(py::make_tuple(t / m_blocks, m_blocks - 1 - t % m_blocks));
    }
  return out;
}

// Whether a decode call's blocks take their sequences longest first (launch/heuristics.h), for
// explicit sizes, under the process-wide order setting.
bool decode_longest_first(bool varlen, int batch, int64_t blocks, int64_t slots) {
  return ffpa::launch::decode_longest_first(varlen, batch, blocks, slots, ffpa::launch::decode_order());
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "ffpa_attn CUDA extension: registers torch.ops.ffpa_attn.* and reports build contents";
  m.def("build_info", &build_info, "Version, archs, kernel families, head dims and dtypes compiled in");
  m.def("kernel_info", &kernel_info, py::arg("dtype"), py::arg("family"), py::arg("head_dim"),
        py::arg("head_dim_v"), py::arg("num_stages") = 0, py::arg("query_attributes") = false, py::arg("acc") = "fp32",
        "Launch configuration (tile, threads, stages, shared memory; registers on request) of one kernel");
  m.def("pick_ffpa_level", &pick_ffpa_level, py::arg("head_dim"), py::arg("head_dim_v"), py::arg("len_q"),
        py::arg("len_kv"), py::arg("batch_heads"), py::arg("compiled"), py::arg("l1_hopper") = false,
        "The FFPA level an auto call would run (csrc/launch/ffpa_heuristic.cpp), for explicit inputs");
  m.def("route", &route, py::arg("op"), py::arg("dtype"), py::arg("head_dim"), py::arg("head_dim_v"),
        py::arg("level"), py::arg("acc"), py::arg("len_q"), py::arg("len_kv"), py::arg("batch_heads"),
        "The kernel the chooser (csrc/launch/route.cpp) runs for such a call on the current device, or None");
  m.def("decode_splits", &decode_splits, py::arg("base_blocks"), py::arg("key_tiles"), py::arg("blocks_per_sm"),
        py::arg("sms"), py::arg("varlen") = false, py::arg("masked") = false, py::arg("one_per_sm_min") = 0, py::arg("odd_pages") = false,
        "The split-KV count an auto decode call picks (csrc/launch/heuristics.h), for explicit sizes; "
        "one_per_sm_min: the kernel's one-block-per-SM bound (4 for D = 64, 16 for D = 128, 0 off)");
  m.def("decode_one_per_sm_device", &ffpa::launch::decode_one_per_sm_device, py::arg("dram_gbps"), py::arg("sms"),
        "Whether a device of this peak DRAM bandwidth (GB/s) and SM count takes the decode kernel's one-block-per-SM "
        "rule (csrc/launch/heuristics.h; an unknown bandwidth, 0, keeps it)");
  m.def("dram_peak_gbps", &ffpa::launch::dram_peak_gbps,
        "Peak DRAM bandwidth of the current device (GB/s) from its memory clock and bus width; 0 where unknown");
  def_mode(m, "fa2_mma", kFa2MmaNames, &ffpa::launch::set_fa2_mma, &ffpa::launch::fa2_mma,
           "FA-2 tensor-core path, process-wide: 'auto' (wgmma on compute capability 9.0 where the build has "
           "sm_90a code, else mma.sync), 'sync' (mma.sync everywhere) or 'wgmma' (same as auto)",
           "The FA-2 tensor-core path set by set_fa2_mma");
  def_mode(m, "decode_merge", kDecodeMergeNames, &ffpa::launch::set_decode_merge, &ffpa::launch::decode_merge,
           "Split-KV decode's merge, process-wide: 'auto' (the launcher's heuristic: spread over the split "
           "blocks where the narrow MLA kernel's grid is one wave of at most 16 splits, else fused into the "
           "split kernel where small, else the merge kernel), 'fused' (wherever the kernel has it), 'kernel' "
           "or 'spread' (wherever the narrow MLA kernel's grid is one wave)",
           "The split-KV merge's form set by set_decode_merge");
  def_mode(m, "decode_order", kDecodeOrderNames, &ffpa::launch::set_decode_order, &ffpa::launch::decode_order,
           "The order split-KV decode blocks take their sequences, process-wide: 'auto' (longest first where "
           "per-sequence lengths, at most 256 sequences and more blocks than one wave; the narrow MLA kernel's "
           "spread merge: balanced splits from 4 splits a sequence; else launch order), 'launch', 'longest' "
           "(wherever per-sequence lengths and at most 256 sequences) or 'balanced' (split blocks dealt in "
           "proportion to the lengths wherever the narrow MLA kernel spreads its merge)",
           "The decode block order set by set_decode_order");
  def_mode(m, "fp8_v_transpose", kFp8VTransposeNames, &ffpa::launch::set_fp8_v_transpose,
           &ffpa::launch::fp8_v_transpose,
           "Where the FA-2-style FP8 kernel (head dims 64..256) gets V^T, process-wide: 'auto' (the launcher's "
           "choice: the pre-pass, the faster today), 'kernel' (the kernel transposes V in shared memory itself, "
           "at D = 64 and 128) or 'prepass' (a pre-pass kernel writes V^T to global memory first)",
           "The FP8 V^T form set by set_fp8_v_transpose");
  m.def("decode_fused_merge", &decode_fused_merge, py::arg("rows"), py::arg("head_dim_v"), py::arg("splits"),
        py::arg("threads"), py::arg("units") = 1, "Whether an auto decode call fuses its merge (csrc/launch/heuristics.h), for explicit sizes");
  m.def("decode_spread_merge", &decode_spread_merge, py::arg("splits"), py::arg("blocks"), py::arg("sms"),
        "Whether a decode call of the narrow MLA kernel spreads its merge over its split blocks "
        "(csrc/launch/heuristics.h), for explicit sizes, under the process-wide merge setting");
  m.def("decode_balanced_splits", &decode_balanced_splits, py::arg("varlen"), py::arg("batch"), py::arg("splits"),
        "Whether a narrow-MLA decode call under the spread merge deals its split blocks by length "
        "(csrc/launch/heuristics.h), for explicit sizes");
  m.def("fa2_causal_tail_bh", &ffpa::launch::fa2_causal_tail_bh, py::arg("bh"), py::arg("m_blocks"), py::arg("sms"),
        py::arg("waves") = ffpa::launch::kFa2CausalTailWaves,
        "The (batch, head)s the warp-specialised FA-2 kernel's causal walk ends on as single items "
        "(csrc/launch/heuristics.h), for explicit sizes");
  m.def("fa2_narrow_tile", &ffpa::launch::fa2_narrow_tile, py::arg("head_dim"), py::arg("bh"), py::arg("len_q"),
        py::arg("len_kv"), py::arg("causal"), py::arg("causal_offset"), py::arg("sms"), py::arg("table_m"),
        py::arg("table_n"), py::arg("narrow_m"), py::arg("narrow_n"),
        "Whether an FA-2 call without a mask runs on the masked (narrower) tile on Hopper "
        "(csrc/launch/heuristics.h), for explicit sizes");
  m.def("fa2_short_tile", &ffpa::launch::fa2_short_tile, py::arg("head_dim"), py::arg("len_kv"), py::arg("causal"),
        py::arg("short_n"),
        "Whether an FA-2 call without a mask runs on the short-keys tile (one key tile of short_n keys an item) on "
        "Hopper (csrc/launch/heuristics.h), for explicit sizes");
  m.def("fa2_ws_look_ahead", &ffpa::launch::fa2_ws_look_ahead, py::arg("head_dim"), py::arg("len_kv"),
        "Whether an FA-2 call without a mask runs the Hopper kernel that issues its next item's first S before "
        "the epilogue (csrc/launch/heuristics.h), for explicit sizes");
  m.def("fa2_ws_pf_pair", &ffpa::launch::fa2_ws_pf_pair, py::arg("len_kv"),
        "Whether the deferred-wait FA-2 Hopper kernel (D = 97..128) keeps P in two register buffers, each tile "
        "packing its P after its softmax (csrc/launch/heuristics.h), for an explicit key length");
  m.def("fa2_ws_standing_max", &ffpa::launch::fa2_ws_standing_max, py::arg("head_dim"), py::arg("len_kv"),
        py::arg("causal"),
        "Whether the look-ahead and P pair FA-2 Hopper kernels run with the standing max (no tile row max once a "
        "warp's rows have theirs; csrc/launch/heuristics.h), for explicit sizes");
  m.def("fp8_persistent_grid", &ffpa::launch::fp8_persistent_grid, py::arg("causal"), py::arg("masked"),
        py::arg("items"), py::arg("sms"),
        "The FA-2-style FP8 kernel's grid: one block an SM where every item sees the same keys, else one an item "
        "(csrc/launch/heuristics.h), for explicit sizes");
  m.def("fp8_causal_walk", &ffpa::launch::fp8_causal_walk, py::arg("masked"), py::arg("head_dim"), py::arg("len_kv"),
        "Whether a causal FA-2-style FP8 call walks pairs of query blocks on one block an SM (else single items "
        "longest first, one block each; csrc/launch/heuristics.h), for explicit sizes");
  m.def(
      "fa2_split_tail",
      [](int64_t items, int sms, int len_kv, int block_n, bool causal, bool masked) {
        const auto plan = ffpa::launch::fa2_split_tail(items, sms, len_kv, block_n, causal, masked);
        return py::make_tuple(plan.from, plan.shares);
      },
      py::arg("items"), py::arg("sms"), py::arg("len_kv"), py::arg("block_n"), py::arg("causal"), py::arg("masked"),
      "(first share slot, shares) of the warp-specialised FA-2 walk's split tail; shares 0: items throughout "
      "(csrc/launch/heuristics.h), for explicit sizes");
  m.def("fa2_split_pieces", &fa2_split_pieces, py::arg("items"), py::arg("from_slot"), py::arg("shares"),
        py::arg("tiles"),
        "The split tail's pieces per share as the kernel's producer walks them (kernels/fa2_ws_split.cuh): "
        "[(share, item, first tile, end tile, the boundary that cuts the item or -1)]");
  m.def("fa2_walk_items", &fa2_walk_items, py::arg("bh"), py::arg("m_blocks"), py::arg("causal"), py::arg("tail"),
        "The warp-specialised FA-2 kernel's work items in walk order (kernels/fa2_walk_order.h): [(batch x head, "
        "query block)], a causal pair's two in turn, then the tail's single items");
  m.def("fa2_tile_work", &ffpa::launch::fa2_tile_work, py::arg("len_q"), py::arg("len_kv"), py::arg("causal"),
        py::arg("causal_offset"), py::arg("block_m"), py::arg("block_n"),
        "An FA-2 call's work on block_m x block_n tiles, padding included (csrc/launch/heuristics.h)");
  m.def("decode_longest_first", &decode_longest_first, py::arg("varlen"), py::arg("batch"), py::arg("blocks"),
        py::arg("slots"), "Whether a decode call's blocks take their sequences longest first (csrc/launch/heuristics.h)");
  if (!ffpa::ops::add_fastpath(m.ptr())) throw py::error_already_set();
}
