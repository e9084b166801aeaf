// forward()'s eager fast path (ffpa_attn/interface.py), in C++: a call whose metadata matches one the
// Python full path already validated and routed to our kernels (same shapes, strides, dtypes, devices,
// flags, grad mode and autocast state; without a mask or causal alignment any key length of contiguous
// keys and values, so a growing KV cache keeps it) goes straight to the op, through the dispatcher (so
// profilers and dispatch modes see the same op call as on the full path).
//
// Why C++: on a decode step the Python fast path (call key, transposes, realignment, the op packet)
// cost about as much host time as SDPA's whole call; here the key is built from the tensors' metadata
// without Python attribute lookups and the views are C++ views.
//
// Only calls with the arguments' canonical types are keyed (tensors of type torch.Tensor exactly, bool
// flags as bool, ...): anything else takes the full path, which validates it. Only inputs of at most
// 4 dims (and masks of at most 4) are remembered. The table is bounded (cleared when full) and lives
// under the GIL (both entry points run holding it).
#include <Python.h>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "generated/spec.h"
#include "launch/ffpa_fwd.h"  // kAccAuto
#include "ops/fastpath.h"

namespace ffpa::ops {

namespace {

// forward()'s arguments, in its order (the Python layer passes all of them positionally).
enum Arg {
  kQuery, kKey, kValue, kMask, kDropout, kCausal, kScale, kGqa, kAlign, kReturnLse, kStrict, kLevel, kAcc, kStages,
  kNumArgs
};
constexpr int64_t kNone = -1;
constexpr size_t kMaxEntries = 512;

// What the full path decided for a call.
struct Route {
  at::ScalarType dtype;              // the kernels' dtype (autocast's, or the inputs')
  std::vector<int64_t> out_shape;    // SDPA's output shape (for inputs of fewer than 4 dims)
  bool decode;                       // runs on the decode op
  bool bottom_right;                 // the causal alignment flag the full path passed
  int64_t level, acc, stages;        // the fwd op's level, accumulation and depth codes (part of the key)
};

struct KeyHash {
  size_t operator()(const std::vector<int64_t>& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t x : k) h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

std::unordered_map<std::vector<int64_t>, Route, KeyHash>& routes() {
  static auto* table = new std::unordered_map<std::vector<int64_t>, Route, KeyHash>();  // never destroyed
  return *table;
}

int64_t bits(double x) {
  int64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

void put_device(std::vector<int64_t>& key, const at::Tensor& t) {
  key.push_back(static_cast<int64_t>(t.device().type()));
  key.push_back(t.device().index());
  key.push_back(static_cast<int64_t>(t.scalar_type()));
}

void put_layout(std::vector<int64_t>& key, const at::Tensor& t, int64_t dims_from, int64_t dims_to, bool strides) {
  key.push_back(dims_to - dims_from);
  for (int64_t d = dims_from; d < dims_to; ++d) key.push_back(t.size(d));
  if (strides)
    for (int64_t d = dims_from; d < dims_to; ++d) key.push_back(t.stride(d));
}

// An optional int argument (None or an int) into the key, as (value, present); false (no key) where
// it does not fit 64 bits.
bool put_optional_int(std::vector<int64_t>& key, PyObject* o) {
  if (o == Py_None) {
    key.push_back(kNone);
    key.push_back(0);
    return true;
  }
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow != 0 || (x == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  key.push_back(x);
  key.push_back(1);
  return true;
}

// False, with a TypeError set, where a METH_FASTCALL entry point got other than `want` arguments.
bool arity_ok(const char* fn, Py_ssize_t nargs, int want) {
  if (nargs == want) return true;
  PyErr_Format(PyExc_TypeError, "%s() takes %d arguments (%zd given)", fn, want, nargs);
  return false;
}

// `s` if it is one of `names` (its index), else -1.
template <size_t N>
int64_t choice(PyObject* s, const char* const (&names)[N]) {
  const char* text = PyUnicode_AsUTF8(s);
  if (text == nullptr) {
    PyErr_Clear();
    return -1;
  }
  for (size_t i = 0; i < N; ++i)
    if (std::strcmp(text, names[i]) == 0) return static_cast<int64_t>(i);
  return -1;
}

constexpr const char* kAligns[] = {"top_left", "bottom_right"};
constexpr const char* kAccNames[] = {"auto", "fp32", "fp16", "mixed"};

int64_t acc_code(int64_t index) {
  if (index == 0) return ffpa::kAccAuto;
  struct Named {
    const char* name;
    int code;
  };
  constexpr Named table[] = FFPA_ACC_NAMES;
  for (const Named& n : table)
    if (std::strcmp(n.name, kAccNames[index]) == 0) return n.code;
  return -1;
}

// The call's metadata as a key; false when the call must take the full path.
bool make_key(PyObject* const* a, std::vector<int64_t>& key) {
  for (int i : {kQuery, kKey, kValue})
    if (!THPVariable_CheckExact(a[i])) return false;
  const bool has_mask = a[kMask] != Py_None;
  if (has_mask && !THPVariable_CheckExact(a[kMask])) return false;
  for (int i : {kCausal, kGqa, kReturnLse, kStrict})
    if (!PyBool_Check(a[i])) return false;
  if (!PyFloat_CheckExact(a[kDropout]) || !PyUnicode_CheckExact(a[kAlign]) || !PyUnicode_CheckExact(a[kAcc]))
    return false;
  if (a[kScale] != Py_None && !PyFloat_CheckExact(a[kScale])) return false;
  if (a[kLevel] != Py_None && !PyLong_CheckExact(a[kLevel])) return false;
  if (a[kStages] != Py_None && !PyLong_CheckExact(a[kStages])) return false;
  const int64_t align = choice(a[kAlign], kAligns), acc = choice(a[kAcc], kAccNames);
  if (align < 0 || acc < 0) return false;  // the full path rejects these
  const at::Tensor& q = THPVariable_Unpack(a[kQuery]);
  const at::Tensor& k = THPVariable_Unpack(a[kKey]);
  const at::Tensor& v = THPVariable_Unpack(a[kValue]);
  if (q.is_nested() || k.is_nested() || v.is_nested()) return false;
  if (q.dim() > 4 || k.dim() > 4 || v.dim() > 4) return false;  // the run below views up to 4 dims
  const bool grad = at::GradMode::is_enabled();
  bool needs_grad = grad && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  const bool is_causal = a[kCausal] == Py_True;
  key.clear();
  put_layout(key, q, 0, q.dim(), true);
  put_device(key, q);
  put_device(key, k);
  put_device(key, v);
  if (has_mask) {
    const at::Tensor& m = THPVariable_Unpack(a[kMask]);
    if (m.dim() > 4) return false;
    put_layout(key, m, 0, m.dim(), true);
    put_device(key, m);
    needs_grad = needs_grad || (grad && m.requires_grad());
  } else {
    key.push_back(kNone);
  }
  // key's and value's part. Without a mask and without causal alignment the key length S changes
  // nothing the full path decides as long as S >= 1, key and value agree on it and both stay
  // contiguous (validation and routing read S only there): S and the strides are left out, so a
  // KV cache that grows by a row per decode step keeps the fast path.
  const int64_t kd = k.dim(), vd = v.dim();
  if (!has_mask && !is_causal && kd >= 2 && kd == vd && k.size(-2) >= 1 && k.size(-2) == v.size(-2) &&
      k.is_contiguous() && v.is_contiguous()) {
    key.push_back(1);
    put_layout(key, k, 0, kd - 2, false);
    key.push_back(k.size(-1));
    put_layout(key, v, 0, vd - 2, false);
    key.push_back(v.size(-1));
  } else {
    key.push_back(0);
    put_layout(key, k, 0, kd, true);
    put_layout(key, v, 0, vd, true);
  }
  key.push_back(bits(PyFloat_AS_DOUBLE(a[kDropout])));
  key.push_back(is_causal);
  key.push_back(a[kScale] == Py_None ? kNone : bits(PyFloat_AS_DOUBLE(a[kScale])));
  key.push_back(a[kScale] == Py_None ? 0 : 1);
  key.push_back(a[kGqa] == Py_True);
  key.push_back(align);
  key.push_back(a[kReturnLse] == Py_True);
  key.push_back(a[kStrict] == Py_True);
  for (int i : {kLevel, kStages})
    if (!put_optional_int(key, a[i])) return false;
  key.push_back(acc);
  key.push_back(needs_grad);
  const at::DeviceType dev = q.device().type();
  const bool autocast = (dev == at::kCUDA || dev == at::kCPU) && at::autocast::is_autocast_enabled(dev);
  key.push_back(autocast ? static_cast<int64_t>(at::autocast::get_autocast_dtype(dev)) : kNone);
  return true;
}

// ------------------------------------------------------------------ the kernel call (interface._run_kernel)
constexpr int64_t kVecBytes = 16;  // _ops._VEC_BYTES

bool strides_ok(const at::Tensor& t) {
  const int64_t es = t.element_size();
  if (t.is_contiguous()) return t.dim() == 0 || t.size(-1) * es % kVecBytes == 0 || t.numel() == t.size(-1);
  if (t.stride(-1) != 1) return false;
  for (int64_t d = 0; d + 1 < t.dim(); ++d)
    if (t.size(d) != 1 && t.stride(d) * es % kVecBytes != 0) return false;
  return true;
}

// `t` itself when kernel-friendly, else a contiguous copy (_ops.realign).
at::Tensor realign(const at::Tensor& t) {
  if (strides_ok(t) && reinterpret_cast<uintptr_t>(t.data_ptr()) % kVecBytes == 0) return t;
  return t.clone(at::MemoryFormat::Contiguous);
}

at::Tensor as_4d(const at::Tensor& t) {
  at::Tensor r = t;
  while (r.dim() < 4) r = r.unsqueeze(0);
  return r;
}

// The kernel's view of a mask for a query of at most 4 dims (_masks.mask_as_4d): leading broadcast
// dims added, expanded (stride-0) dims narrowed to size 1.
at::Tensor mask_as_4d(const at::Tensor& m) {
  at::Tensor r = as_4d(m);
  for (int64_t d = 0; d < 4; ++d)
    if (r.size(d) != 1 && r.stride(d) == 0) r = r.narrow(d, 0, 1);
  return r;
}

using OpResult = std::tuple<at::Tensor, at::Tensor>;
using FwdSig = OpResult(const at::Tensor&, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                        double, bool, bool, int64_t, int64_t, int64_t);
using DecodeSig = OpResult(const at::Tensor&, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                           const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, double, bool, int64_t);

OpResult run(PyObject* const* a, const Route& r) {
  static const auto fwd_op =
      c10::Dispatcher::singleton().findSchemaOrThrow("ffpa_attn::ffpa_fwd", "").typed<FwdSig>();
  static const auto decode_op =
      c10::Dispatcher::singleton().findSchemaOrThrow("ffpa_attn::ffpa_decode", "").typed<DecodeSig>();
  at::Tensor q = THPVariable_Unpack(a[kQuery]), k = THPVariable_Unpack(a[kKey]), v = THPVariable_Unpack(a[kValue]);
  const int64_t q_dims = q.dim();
  if (q.scalar_type() != r.dtype) q = q.to(r.dtype);  // autocast: SDPA would have seen cast inputs
  if (k.scalar_type() != r.dtype) k = k.to(r.dtype);
  if (v.scalar_type() != r.dtype) v = v.to(r.dtype);
  const double scale = a[kScale] == Py_None ? 1.0 / std::sqrt(static_cast<double>(q.size(-1)))
                                            : PyFloat_AS_DOUBLE(a[kScale]);
  const bool is_causal = a[kCausal] == Py_True;
  std::optional<at::Tensor> mask;
  if (a[kMask] != Py_None) mask = mask_as_4d(THPVariable_Unpack(a[kMask]));
  q = as_4d(q), k = as_4d(k), v = as_4d(v);
  at::Tensor out, lse;
  if (r.decode) {  // decode's layout is (B, L, H, D): the transposed views; out comes back in q's layout
    std::tie(out, lse) = decode_op.call(realign(q.transpose(1, 2)), realign(k.transpose(1, 2)),
                                        realign(v.transpose(1, 2)), std::nullopt, std::nullopt, mask, scale,
                                        is_causal, 0);
    out = out.transpose(1, 2);
  } else {
    std::tie(out, lse) = fwd_op.call(realign(q), realign(k), realign(v), mask, scale, is_causal, r.bottom_right,
                                     r.level, r.acc, r.stages);
  }
  if (q_dims != 4) {
    out = out.reshape(r.out_shape);
    lse = lse.reshape(at::IntArrayRef(r.out_shape).slice(0, r.out_shape.size() - 1));
  }
  return {out, lse};
}

// `out`, or (out, lse) with return_lse, as Python objects.
PyObject* wrap_result(at::Tensor out, at::Tensor lse, bool return_lse) {
  if (!return_lse) return THPVariable_Wrap(std::move(out));
  PyObject* o = THPVariable_Wrap(std::move(out));
  if (o == nullptr) return nullptr;
  PyObject* l = THPVariable_Wrap(std::move(lse));
  if (l == nullptr) {
    Py_DECREF(o);
    return nullptr;
  }
  PyObject* pair = PyTuple_Pack(2, o, l);  // takes its own references
  Py_DECREF(o);
  Py_DECREF(l);
  return pair;
}

// fast_call(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, causal_align,
// return_lse, strict, level, acc, num_stages): forward's result for a remembered call, else None.
PyObject* fast_call(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (!arity_ok("fast_call", nargs, kNumArgs)) return nullptr;
  thread_local std::vector<int64_t> key;
  if (!make_key(args, key)) Py_RETURN_NONE;
  const auto it = routes().find(key);
  if (it == routes().end()) Py_RETURN_NONE;
  const Route route = it->second;  // a copy: the call may re-enter Python (dispatch modes) and clear()
  auto [out, lse] = run(args, route);
  return wrap_result(std::move(out), std::move(lse), args[kReturnLse] == Py_True);
  END_HANDLE_TH_ERRORS
}

// fast_remember(<forward's 14 arguments>..., dtype_is_half, out_shape, decode, bottom_right): remember
// what the full path decided for this call (a no-op for calls the fast path does not key).
PyObject* fast_remember(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (!arity_ok("fast_remember", nargs, kNumArgs + 4)) return nullptr;
  std::vector<int64_t> key;
  if (!make_key(args, key)) Py_RETURN_NONE;
  Route route;
  route.dtype = PyObject_IsTrue(args[kNumArgs]) ? at::kHalf : at::kBFloat16;
  PyObject* shape = args[kNumArgs + 1];
  if (!PyTuple_Check(shape)) {
    PyErr_SetString(PyExc_TypeError, "fast_remember(): out_shape must be a tuple");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); ++i) {
    const long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
    if (d == -1 && PyErr_Occurred()) return nullptr;
    route.out_shape.push_back(d);
  }
  route.decode = PyObject_IsTrue(args[kNumArgs + 2]);
  // Keyed calls carry an int or None here and a valid acc name (make_key checked both).
  route.level = args[kLevel] == Py_None ? 0 : PyLong_AsLongLong(args[kLevel]);
  route.stages = args[kStages] == Py_None ? 0 : PyLong_AsLongLong(args[kStages]);
  route.acc = acc_code(choice(args[kAcc], kAccNames));
  route.bottom_right = PyObject_IsTrue(args[kNumArgs + 3]);
  auto& table = routes();
  if (table.size() >= kMaxEntries) table.clear();
  table[std::move(key)] = std::move(route);
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

// ------------------------------------------------------------------ decode()'s fast path (ffpa_attn/_decode.py)
// decode(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, return_lse, num_splits, strict):
// a call whose metadata the Python path validated and ran on the decode op before goes straight to it.
enum DecodeArg { kDq, kDk, kDv, kDSeqlens, kDTable, kDCausal, kDScale, kDReturnLse, kDSplits, kDStrict, kNumDecodeArgs };

std::unordered_set<std::vector<int64_t>, KeyHash>& decode_calls() {
  static auto* table = new std::unordered_set<std::vector<int64_t>, KeyHash>();  // never destroyed
  return *table;
}

// FFPA_DEBUG_CHECKS=1 (read per call, as the Python path does): every call validates the index tensors.
bool debug_checks() {
  const char* v = std::getenv("FFPA_DEBUG_CHECKS");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

bool make_decode_key(PyObject* const* a, std::vector<int64_t>& key) {
  for (int i : {kDq, kDk, kDv})
    if (!THPVariable_CheckExact(a[i])) return false;
  for (int i : {kDSeqlens, kDTable})
    if (a[i] != Py_None && !THPVariable_CheckExact(a[i])) return false;
  for (int i : {kDCausal, kDReturnLse, kDStrict})
    if (!PyBool_Check(a[i])) return false;
  if (a[kDScale] != Py_None && !PyFloat_CheckExact(a[kDScale])) return false;  // an int scale: the full path
  if (a[kDSplits] != Py_None && !PyLong_CheckExact(a[kDSplits])) return false;
  const at::Tensor& q = THPVariable_Unpack(a[kDq]);
  const at::Tensor& k = THPVariable_Unpack(a[kDk]);
  const at::Tensor& v = THPVariable_Unpack(a[kDv]);
  if (q.is_nested() || k.is_nested() || v.is_nested()) return false;
  const bool grad = at::GradMode::is_enabled();
  key.clear();
  for (const at::Tensor* t : {&q, &k, &v}) {
    put_layout(key, *t, 0, t->dim(), true);
    put_device(key, *t);
  }
  for (int i : {kDSeqlens, kDTable}) {
    if (a[i] == Py_None) {
      key.push_back(kNone);
      continue;
    }
    const at::Tensor& t = THPVariable_Unpack(a[i]);
    put_layout(key, t, 0, t.dim(), true);
    put_device(key, t);
  }
  key.push_back(a[kDCausal] == Py_True);
  key.push_back(a[kDScale] == Py_None ? kNone : bits(PyFloat_AS_DOUBLE(a[kDScale])));
  key.push_back(a[kDScale] == Py_None ? 0 : 1);
  key.push_back(a[kDReturnLse] == Py_True);
  key.push_back(a[kDStrict] == Py_True);
  if (!put_optional_int(key, a[kDSplits])) return false;
  key.push_back(grad && (q.requires_grad() || k.requires_grad() || v.requires_grad()));
  return true;
}

// decode_fast_call(<decode()'s 10 arguments>): decode()'s result for a remembered call, else None.
PyObject* decode_fast_call(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (!arity_ok("decode_fast_call", nargs, kNumDecodeArgs)) return nullptr;
  thread_local std::vector<int64_t> key;
  if (debug_checks() || !make_decode_key(args, key) || decode_calls().count(key) == 0) Py_RETURN_NONE;
  static const auto decode_op =
      c10::Dispatcher::singleton().findSchemaOrThrow("ffpa_attn::ffpa_decode", "").typed<DecodeSig>();
  const at::Tensor& q = THPVariable_Unpack(args[kDq]);
  std::optional<at::Tensor> seqlens, table;
  if (args[kDSeqlens] != Py_None) seqlens = THPVariable_Unpack(args[kDSeqlens]);
  if (args[kDTable] != Py_None) table = THPVariable_Unpack(args[kDTable]);
  const double scale = args[kDScale] == Py_None ? 1.0 / std::sqrt(static_cast<double>(q.size(-1)))
                                                : PyFloat_AS_DOUBLE(args[kDScale]);
  const int64_t splits = args[kDSplits] == Py_None ? 0 : PyLong_AsLongLong(args[kDSplits]);
  auto [out, lse] = decode_op.call(realign(q), realign(THPVariable_Unpack(args[kDk])),
                                   realign(THPVariable_Unpack(args[kDv])), seqlens, table, std::nullopt, scale,
                                   args[kDCausal] == Py_True, splits);
  return wrap_result(std::move(out), std::move(lse), args[kDReturnLse] == Py_True);
  END_HANDLE_TH_ERRORS
}

// decode_fast_remember(<decode()'s 10 arguments>): the Python path ran this call on the decode op.
PyObject* decode_fast_remember(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (!arity_ok("decode_fast_remember", nargs, kNumDecodeArgs)) return nullptr;
  std::vector<int64_t> key;
  if (!make_decode_key(args, key)) Py_RETURN_NONE;
  auto& table = decode_calls();
  if (table.size() >= kMaxEntries) table.clear();
  table.insert(std::move(key));
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyObject* fast_clear(PyObject* /*self*/, PyObject* /*unused*/) {
  routes().clear();
  decode_calls().clear();
  Py_RETURN_NONE;
}

PyObject* fast_size(PyObject* /*self*/, PyObject* /*unused*/) {
  return PyLong_FromSize_t(routes().size() + decode_calls().size());
}

PyMethodDef kMethods[] = {
    {"fast_call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_call)), METH_FASTCALL,
     "forward()'s result for a call whose metadata was routed to the kernels before, else None"},
    {"fast_remember", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_remember)), METH_FASTCALL,
     "Remember the full path's route for a call: (14 forward args, dtype_is_half, out_shape, decode, bottom_right)"},
    {"decode_fast_call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&decode_fast_call)),
     METH_FASTCALL, "decode()'s result for a call whose metadata ran on the decode op before, else None"},
    {"decode_fast_remember", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&decode_fast_remember)),
     METH_FASTCALL, "Remember that decode() ran this call (its 10 arguments) on the decode op"},
    {"fast_clear", &fast_clear, METH_NOARGS, "Forget every remembered call"},
    {"fast_size", &fast_size, METH_NOARGS, "How many calls are remembered"},
};

}  // namespace

bool add_fastpath(PyObject* module) {
  for (PyMethodDef& def : kMethods) {
    PyObject* fn = PyCFunction_NewEx(&def, nullptr, nullptr);
    if (fn == nullptr || PyModule_AddObject(module, def.ml_name, fn) != 0) {
      Py_XDECREF(fn);
      return false;
    }
  }
  return true;
}

}  // namespace ffpa::ops
