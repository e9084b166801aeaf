"""Binding layer between the Python package and the compiled extension ``ffpa_attn._C``.

Importing ``ffpa_attn._C`` registers ``torch.ops.ffpa_attn.ffpa_fwd`` (CUDA only):

    ffpa_fwd(Tensor q, Tensor k, Tensor v, Tensor? attn_mask, float scale, bool is_causal,
             bool causal_bottom_right, int level, int acc, int num_stages) -> (Tensor out, Tensor lse)

with q: (B, Hq, L, D), k: (B, Hkv, S, D), v: (B, Hkv, S, Dv), out: (B, Hq, L, Dv) in q's
dtype and lse: (B, Hq, L) float32 (natural log).  attn_mask: None or 4-D, every dim 1 or
(B, Hq, L, S), any strides, bool (True = attend) or float16/bfloat16/float32 (added to the
scaled scores), varying over at most 65535 (batch, head) slices.  level: 0 = auto (FA-2 family
where the head-dim pair is compiled for it, else the FFPA level the C++ heuristic picks), 1..3 =
that FFPA level.  acc: 0 = auto (fp32), 1 = fp32, 2 = fp16, 3 = mixed (Q@K^T fp32, P@V fp16);
fp16/mixed take float16 inputs and FFPA kernels only.  Fully masked rows give out = 0 and
lse = -inf.

Also owns what the build contains (``build_info()``: families, head dims, (E, Ev) pairs,
dtypes, archs).  The extension may be missing (not built, built against something else,
or registering an older op schema); the package then still imports and
``ffpa_attn.forward`` falls back to torch SDPA.
"""

import copy
import importlib
import warnings
from typing import Any, Dict, FrozenSet, Optional, Tuple

import torch
from torch import Tensor

from . import _spec

__all__ = [
    "extension_available",
    "import_error",
    "build_info",
    "ffpa_fwd",
    "ffpa_fwd_realigned",
    "fa2_head_dims",
    "l1_head_dims",
    "head_dims",
    "head_dim_pairs",
    "built_families",
    "built_archs",
    "built_ptx_archs",
    "built_dtypes",
    "built_accs",
    "kernel_families",
    "chosen_kernel",
    "ACC_CODES",
]

_OP_QUALNAME = "ffpa_attn::ffpa_fwd"
# Argument names of the op schema this Python layer calls (ffpa_attn/_spec.py OPS, the schema the
# C++ side registers; checked against the registered one at import).
_OP_ARGS = _spec.op_args("ffpa_fwd")
# Forward kernel families, in spec order (which one runs is the C++ chooser's decision).
FAMILIES = _spec.FWD_NAMES
# Every family the manifest may list: the forward ones and the decode op's (ffpa_attn/_decode_ops.py).
ALL_FAMILIES = _spec.NAMES
ACC_CODES = _spec.ACC_CODES  # the op's `acc` argument

# --------------------------------------------------------------------------- loading
_C: Any = None
_IMPORT_ERROR: Optional[str] = None
try:
    # registers torch.ops.ffpa_attn.ffpa_fwd
    _C = importlib.import_module("ffpa_attn._C")
except (ImportError, OSError) as _exc:  # not built, or built against another torch/CUDA
    _C = None
    _IMPORT_ERROR = f"{type(_exc).__name__}: {_exc}"
    _not_built = isinstance(_exc, ModuleNotFoundError) and _exc.name == "ffpa_attn._C"
    if not _not_built:
        # The binary exists but cannot be loaded: that deserves a word at import time.
        warnings.warn(
            f"ffpa_attn: the compiled extension ffpa_attn._C failed to load ({_IMPORT_ERROR}); "
            "every call will fall back to torch.nn.functional.scaled_dot_product_attention.",
            RuntimeWarning,
            stacklevel=2,
        )
    del _not_built


def _lookup_op() -> Any:
    try:
        return torch.ops.ffpa_attn.ffpa_fwd
    except (AttributeError, RuntimeError):
        return None


def _schema_args(op: Any) -> Tuple[str, ...]:
    try:
        return tuple(a.name for a in op.default._schema.arguments)
    except (AttributeError, RuntimeError):
        return ()


def _stale_schema_error(op: Any) -> Optional[str]:
    """Why the registered op cannot be called by this layer (``None`` when it can)."""
    args = _schema_args(op)
    if args == _OP_ARGS:
        return None
    return (
        f"ffpa_attn._C registers ffpa_fwd({', '.join(args)}), this Python layer calls "
        f"ffpa_fwd({', '.join(_OP_ARGS)}): the extension is stale, rebuild it "
        "(pip install --no-build-isolation .)"
    )


_OP = _lookup_op() if _C is not None else None
if _C is not None and _OP is None:
    _IMPORT_ERROR = (
        "ffpa_attn._C was imported but did not register torch.ops.ffpa_attn.ffpa_fwd"
    )
elif _OP is not None and (_stale := _stale_schema_error(_OP)) is not None:
    # A binary built from older sources: calling it with this layer's arguments would fail
    # (or worse, bind them to the wrong parameters). Treat it as unavailable, loudly.
    _IMPORT_ERROR = _stale
    _OP = None
    warnings.warn(
        f"ffpa_attn: {_IMPORT_ERROR}; every call will fall back to "
        "torch.nn.functional.scaled_dot_product_attention.",
        RuntimeWarning,
        stacklevel=2,
    )


def extension_available() -> bool:
    """True when ``ffpa_attn._C`` loaded and registered ``torch.ops.ffpa_attn.ffpa_fwd``."""
    return _OP is not None


def lookup_secondary_op(name: str, meanwhile: str) -> Any:
    """``torch.ops.ffpa_attn.<name>`` (an op besides ffpa_fwd: ffpa_decode, ffpa_fp8_fwd) when the
    extension registers it with the schema of ``_spec.OPS`` this layer calls, else None; a binary
    from other sources is warned about (``meanwhile``: what runs instead), never bound by position."""
    if _OP is None:
        return None
    try:
        op = getattr(torch.ops.ffpa_attn, name)
    except (AttributeError, RuntimeError):
        return None
    want = _spec.op_args(name)
    if _schema_args(op) != want:
        warnings.warn(
            f"ffpa_attn: ffpa_attn._C registers {name}({', '.join(_schema_args(op))}), this Python layer "
            f"calls {name}({', '.join(want)}): rebuild the extension; {meanwhile} meanwhile.",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return op


def import_error() -> Optional[str]:
    """Why the extension is unavailable (``None`` when it is available)."""
    return _IMPORT_ERROR


# ------------------------------------------------------------- FA-2 tensor-core path
_FA2_MMA_MODES = ("auto", "sync", "wgmma")
_fa2_mma_fallback = "auto"  # remembered when the extension is missing (nothing to set then)


def set_fa2_mma(mode: str) -> None:
    """Which tensor-core instruction the FA-2 kernels use, process-wide.

    ``"auto"`` (the default): the warpgroup MMA (``wgmma``) kernel on compute capability 9.0
    (H100, H200) when the build has sm_90a code, else the ``mma.sync`` kernel. ``"sync"``: the
    ``mma.sync`` kernel everywhere (for comparison, or to rule the Hopper kernel out).
    ``"wgmma"``: the same as ``"auto"`` (the wgmma kernel cannot run elsewhere).
    """
    global _fa2_mma_fallback
    from .errors import FFPATypeError, FFPAValueError

    if not isinstance(mode, str):
        raise FFPATypeError(f"set_fa2_mma: `mode` must be a str, one of {_FA2_MMA_MODES}; got {type(mode).__name__}")
    if mode not in _FA2_MMA_MODES:
        raise FFPAValueError(f"set_fa2_mma: `mode` must be one of {_FA2_MMA_MODES}; got {mode!r}")
    if _C is not None:
        _C.set_fa2_mma(mode)
    _fa2_mma_fallback = mode


def get_fa2_mma() -> str:
    """The FA-2 tensor-core setting of :func:`set_fa2_mma` (``"auto"`` unless changed)."""
    return _C.get_fa2_mma() if _C is not None else _fa2_mma_fallback


# ----------------------------------------------------------------------- build info
def _package_version() -> str:
    try:
        from ffpa_attn import __version__

        return __version__
    except ImportError:  # pragma: no cover - only when _ops is used stand-alone
        return "unknown"


def _load_build_info() -> Dict[str, Any]:
    info: Dict[str, Any] = {
        "version": _package_version(),
        "cuda_version": None,
        "archs": [],
        "families": [],
        "head_dims": {},
        "head_dim_pairs": {},
        "dtypes": [],
        "accs": {},
    }
    if _OP is not None and hasattr(_C, "build_info"):
        try:
            info.update(dict(_C.build_info()))
        except Exception as exc:  # a broken build_info must not break the import
            warnings.warn(
                f"ffpa_attn: _C.build_info() failed ({type(exc).__name__}: {exc})",
                RuntimeWarning,
                stacklevel=2,
            )
    if not info.get("head_dim_pairs"):  # manifests before Ev != E: pairs (d, d)
        info["head_dim_pairs"] = {
            f: [[d, d] for d in dims] for f, dims in (info.get("head_dims") or {}).items()
        }
    info["extension_available"] = _OP is not None
    info["import_error"] = _IMPORT_ERROR
    return info


_BUILD_INFO: Dict[str, Any] = _load_build_info()


def build_info() -> Dict[str, Any]:
    """What this installation was built with.

    Keys: ``version``, ``cuda_version`` (``None`` when not built), ``archs`` (e.g.
    ``["80", "89", "90a"]``), ``ptx`` (archs whose PTX is embedded), ``families`` (e.g.
    ``["fa2", "ffpa_l1", "ffpa_l2", "ffpa_l3"]``), ``head_dims`` (family -> list of compiled head dims E),
    ``head_dim_pairs`` (family -> list of compiled ``[E, Ev]`` pairs; ``[d, d]`` per head
    dim when the build does not list them), ``dtypes``, ``accs`` (family -> dtype -> MMA
    accumulation modes compiled, e.g. ``{"ffpa_l1": {"float16": ["fp16", "fp32", "mixed"]}}``),
    ``extension_available`` and
    ``import_error`` (why the extension is missing, else ``None``).  Returns a copy.
    """
    return copy.deepcopy(_BUILD_INFO)


def _int_set(values: Any) -> FrozenSet[int]:
    out = set()
    for v in values or ():
        try:
            out.add(int(v))
        except (TypeError, ValueError):
            pass
    return frozenset(out)


def _pair_set(values: Any) -> FrozenSet[Tuple[int, int]]:
    out = set()
    for p in values or ():
        try:
            e, ev = p
            out.add((int(e), int(ev)))
        except (TypeError, ValueError):
            pass
    return frozenset(out)


# Plain module globals: cheap in eager mode and constant for torch.compile.
_HEAD_DIMS: Dict[str, FrozenSet[int]] = {
    f: _int_set((_BUILD_INFO.get("head_dims") or {}).get(f, ())) for f in ALL_FAMILIES
}
_PAIRS: Dict[str, FrozenSet[Tuple[int, int]]] = {
    f: _pair_set((_BUILD_INFO.get("head_dim_pairs") or {}).get(f, ())) for f in ALL_FAMILIES
}
_ARCHS: Tuple[str, ...] = tuple(str(a) for a in (_BUILD_INFO.get("archs") or ()))
_DTYPES: FrozenSet[str] = frozenset(str(d) for d in (_BUILD_INFO.get("dtypes") or ()))
_ACCS: Dict[Tuple[str, str], FrozenSet[str]] = {
    (str(f), str(dt)): frozenset(str(a) for a in accs)
    for f, per_dtype in (_BUILD_INFO.get("accs") or {}).items()
    for dt, accs in (per_dtype or {}).items()
}


def _arch_number(arch: str) -> int:
    digits = "".join(c for c in arch if c.isdigit())
    return int(digits) if digits else 1 << 30


def _default_ptx_archs(archs: Tuple[str, ...]) -> Tuple[str, ...]:
    # For builds whose manifest predates its "ptx" key: setup.py embeds the PTX of the lowest
    # SM target next to the SASS of every target.
    return (min(archs, key=_arch_number),) if archs else ()


_PTX_ARCHS: Tuple[str, ...] = (
    tuple(str(a) for a in _BUILD_INFO["ptx"])
    if isinstance(_BUILD_INFO.get("ptx"), (list, tuple))
    else _default_ptx_archs(_ARCHS)
)


def _registry_entries() -> Tuple[Tuple[str, str, str, str, str, int, int, int], ...]:
    """build_info()["registry"] as tuples (op, family, arch, dtype, acc, E, Ev, level)."""
    out = []
    for e in _BUILD_INFO.get("registry") or ():
        try:
            out.append((str(e["op"]), str(e["family"]), str(e.get("arch", "any")), str(e["dtype"]), str(e["acc"]),
                        int(e["E"]), int(e["Ev"]), int(e.get("level", 0))))
        except (KeyError, TypeError, ValueError):
            pass
    return tuple(out)


def build_index(registry) -> Dict[Tuple[str, int, int, str, str], Tuple[Tuple[str, str, int], ...]]:
    """(op, E, Ev, dtype, acc) -> ((family, arch, level), ...) of registry entries (_REGISTRY's form)."""
    index: Dict[Tuple[str, int, int, str, str], list] = {}
    for (o, fam, arch, dt, a, e, ev, lv) in registry:
        index.setdefault((o, e, ev, dt, a), []).append((fam, arch, lv))
    return {k: tuple(v) for k, v in index.items()}


# Every compiled kernel, and the index per-call lookups read (a linear scan of a full build's few
# hundred entries would cost more than the rest of the routing). Plain module globals, constant for
# the process: whoever replaces _REGISTRY replaces _INDEX with build_index of it (the CPU tests' mock).
# Under torch.compile the lookup must touch _INDEX only: a read of _REGISTRY (or a test of it, such as
# an identity check against the tuple the index was built from) makes dynamo guard every field of
# every entry -- about 6000 guards in a full build, evaluated at every call of the compiled function
# (a transformers static-cache step: 651 us of guard evaluation a step against 169 without them on an
# H200; docs/tuning_decode.md, session 31).
_REGISTRY = _registry_entries()
_INDEX = build_index(_REGISTRY)


def kernel_families(op: str, E: int, Ev: int, dtype: Optional[str] = None, acc: str = "auto",
                    level: Optional[int] = None, cc: Optional[Tuple[int, int]] = None) -> Tuple[str, ...]:
    """Families with a compiled kernel of ``op`` ("fwd" or "decode") for head dims (E, Ev), dtype name
    ``dtype`` (None: fp16 or bf16), accumulation ``acc`` ("auto" = fp32), FFPA ``level`` (None: any) that runs
    on compute capability ``cc`` (None: any), in spec order. Whether one exists decides fallback;
    which one runs is the C++ chooser's (csrc/launch/route.cpp; ``chosen_kernel`` asks it)."""
    want_acc = "fp32" if acc == "auto" else acc
    dtypes = (dtype,) if dtype is not None else _spec.B16_TORCH
    found = set()
    for dt in dtypes:
        for fam, arch, lv in _INDEX.get((op, E, Ev, dt, want_acc), ()):
            if (level is None or lv == level) and (cc is None or _spec.arch_runs(arch, cc)):
                found.add(fam)
    return tuple(f for f in ALL_FAMILIES if f in found)


def chosen_kernel(dtype: str, E: int, Ev: int, level: int = 0, acc: str = "auto", len_q: int = 1024,
                  len_kv: int = 1024, batch_heads: int = 32, op: str = "fwd") -> Optional[Dict[str, Any]]:
    """What the C++ chooser runs for such a call on the current CUDA device (family, level, mma), or
    None if nothing is compiled for it. Needs the extension (and a device to see its arch)."""
    if _C is None:
        raise RuntimeError(f"the extension is not available: {_IMPORT_ERROR}")
    got = _C.route(op, dtype, E, Ev, level, ACC_CODES[acc], len_q, len_kv, batch_heads)
    return dict(got) if got is not None else None


def built_families() -> Tuple[str, ...]:
    """Kernel families with at least one compiled head-dim pair, e.g. ``("fa2", "ffpa_l1")``."""
    return tuple(f for f in FAMILIES if _PAIRS.get(f))


def head_dims(family: str) -> FrozenSet[int]:
    """Head dims E compiled for ``family`` (one of ALL_FAMILIES; empty when not built)."""
    return _HEAD_DIMS.get(family, frozenset())


def head_dim_pairs(family: str) -> FrozenSet[Tuple[int, int]]:
    """(E, Ev) head-dim pairs compiled for ``family`` (empty when not built)."""
    return _PAIRS.get(family, frozenset())


def fa2_head_dims() -> FrozenSet[int]:
    """Head dims compiled for the FA-2 kernel family (empty when not built)."""
    return head_dims("fa2")


def l1_head_dims() -> FrozenSet[int]:
    """Head dims compiled for the FFPA L1 kernel (empty when not built)."""
    return head_dims("ffpa_l1")


def built_archs() -> Tuple[str, ...]:
    """CUDA archs the extension has SASS for, e.g. ``("80", "89", "90a")``."""
    return _ARCHS


def built_ptx_archs() -> Tuple[str, ...]:
    """CUDA archs the extension embeds PTX for (JIT-compiled on newer GPUs).

    ``build_info()["ptx"]`` when the build reports it, else the lowest of ``archs``
    (what setup.py embeds).
    """
    return _PTX_ARCHS


def built_accs(family: str, dtype: str) -> FrozenSet[str]:
    """MMA accumulation modes compiled for ``family`` and dtype name (e.g. "float16");
    ``{"fp32"}`` for a build whose manifest predates accumulation modes."""
    if not _ACCS and _PAIRS.get(family):
        return frozenset(("fp32",))
    return _ACCS.get((family, dtype), frozenset())


def built_dtypes() -> FrozenSet[str]:
    """dtype names compiled in, e.g. ``{"float16", "bfloat16"}`` (empty when not built)."""
    return _DTYPES


# ------------------------------------------------------------------- fake (meta) kernel
def _expected_out_strides(q: Tensor, dv: Any) -> Tuple[Any, Any, Any, Any]:
    """Strides of ``out`` promised by the C++ op for a 4-D ``q`` (see module doc)."""
    b, h, l, _ = q.shape
    if q.stride(1) < q.stride(2):  # BLHD view in, BLHD memory out
        return (l * h * dv, dv, h * dv, 1)
    return (h * l * dv, l * dv, dv, 1)


def _ffpa_fwd_fake(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Optional[Tensor],
    scale: float,
    is_causal: bool,
    causal_bottom_right: bool,
    level: int,
    acc: int,
    num_stages: int,
) -> Tuple[Tensor, Tensor]:
    torch._check(q.dim() == 4, lambda: f"ffpa_fwd: q must be 4-D, got {q.dim()}-D")
    torch._check(k.dim() == 4, lambda: f"ffpa_fwd: k must be 4-D, got {k.dim()}-D")
    torch._check(v.dim() == 4, lambda: f"ffpa_fwd: v must be 4-D, got {v.dim()}-D")
    if attn_mask is not None:
        torch._check(
            attn_mask.dim() == 4,
            lambda: f"ffpa_fwd: attn_mask must be None or 4-D, got {attn_mask.dim()}-D",
        )
    b, h, l, _ = q.shape
    dv = v.shape[-1]
    out = torch.empty_strided(
        (b, h, l, dv), _expected_out_strides(q, dv), dtype=q.dtype, device=q.device
    )
    lse = q.new_empty((b, h, l), dtype=torch.float32)
    return out, lse


def register_fake_once(qualname: str, fake: Any) -> None:
    """The fake (meta) kernel of op ``qualname`` for torch.compile, unless the extension is missing or
    the C++ side registered its own; a module reload's "already registered" is not an error."""
    if _OP is None or torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "Meta"):
        return
    try:
        torch.library.register_fake(qualname)(fake)
    except RuntimeError as exc:  # e.g. already registered (module reloaded)
        if "already" not in str(exc):
            warnings.warn(
                f"ffpa_attn: could not register the fake kernel of {qualname} ({exc}); "
                "torch.compile of that path may fail.",
                RuntimeWarning,
                stacklevel=2,
            )


register_fake_once(_OP_QUALNAME, _ffpa_fwd_fake)


# ----------------------------------------------------------------------------- calls
def ffpa_fwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Optional[Tensor],
    scale: float,
    is_causal: bool,
    causal_bottom_right: bool = False,
    level: int = 0,
    acc: int = 0,
    num_stages: int = 0,
) -> Tuple[Tensor, Tensor]:
    """Thin typed wrapper of ``torch.ops.ffpa_attn.ffpa_fwd`` (no checks, no fallback).

    attn_mask: None or 4-D (see the module doc); causal_bottom_right: with is_causal,
    query i sees keys j <= i + S - L (else j <= i); level: 0 = auto (FA-2 family where
    compiled, else the FFPA level the C++ heuristic picks), 1..3 = that FFPA level; acc: an
    ACC_CODES value; num_stages: 0 = auto, else 1..4.
    """
    if _OP is None:
        raise RuntimeError(
            f"torch.ops.ffpa_attn.ffpa_fwd is not available: {_IMPORT_ERROR}"
        )
    # The overload itself: the packet would resolve it on every call.
    return _OP.default(q, k, v, attn_mask, scale, is_causal, causal_bottom_right, level, acc, num_stages)


# 16-byte vector loads: every non-unit stride and the data pointer must be 16-byte aligned.
_VEC_BYTES = 16


def strides_ok(t: Tensor) -> bool:
    """Last dim contiguous and every other stride a multiple of 16 bytes.

    Works on fake tensors, i.e. under torch.compile.
    """
    if t.is_contiguous():  # the common case, one call: only the row length's 16 bytes to check
        return t.dim() == 0 or t.shape[-1] * t.element_size() % _VEC_BYTES == 0 or t.numel() == t.shape[-1]
    st = t.stride()
    if st[-1] != 1:
        return False
    es = t.element_size()
    sh = t.shape
    for i in range(len(st) - 1):
        if sh[i] != 1 and (st[i] * es) % _VEC_BYTES != 0:
            return False
    return True


def pointer_ok(t: Tensor) -> bool:
    """Data pointer 16-byte aligned (real tensors only; dynamo cannot trace it)."""
    return t.data_ptr() % _VEC_BYTES == 0


def realign(t: Tensor) -> Tensor:
    """``t`` itself when kernel-friendly, else a contiguous copy (fresh, aligned storage)."""
    if strides_ok(t) and pointer_ok(t):
        return t
    return t.clone(memory_format=torch.contiguous_format)


def with_strides(out: Tensor, expected: Tuple[Any, ...]) -> Tensor:
    """``out`` itself when it has the ``expected`` strides, else a copy that has them."""
    if out.stride() == expected:
        return out
    fixed = torch.empty_strided(out.shape, expected, dtype=out.dtype, device=out.device)
    fixed.copy_(out)
    return fixed


def _ffpa_fwd_realigned_impl(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Optional[Tensor],
    scale: float,
    is_causal: bool,
    causal_bottom_right: bool,
    level: int,
    acc: int,
    num_stages: int,
) -> Tuple[Tensor, Tensor]:
    expected = _expected_out_strides(q, v.shape[-1])
    # The mask has no alignment requirement: any strides, passed as is.
    out, lse = ffpa_fwd(
        realign(q), realign(k), realign(v), attn_mask, scale, is_causal, causal_bottom_right,
        level, acc, num_stages,
    )
    # A copy changed q's layout; keep the layout the fake kernel promised.
    return with_strides(out, expected), lse


# Used under torch.compile, where the data pointer can only be checked at run time:
# an opaque op (with the same fake kernel) that realigns its inputs before the call.
ffpa_fwd_realigned = torch.library.custom_op(
    "ffpa_attn::ffpa_fwd_realigned",
    _ffpa_fwd_realigned_impl,
    mutates_args=(),
    schema=_spec.op_signature("ffpa_fwd"),
)
ffpa_fwd_realigned.register_fake(_ffpa_fwd_fake)
