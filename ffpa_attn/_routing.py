"""Routing for ``ffpa_attn.forward``: can our kernels run a validated call on this device and
build (``_kernel_reason`` returns why not, or ``None``): is a kernel compiled for it (the build
manifest's registry, ``_ops.kernel_families``). Which one runs is decided in C++ only (the chooser,
csrc/launch/route.cpp). Plain Python on tensor metadata and cached device facts, so it traces under
``torch.compile(fullgraph=True)``.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _ops, _spec
from ._masks import mask_slices

_HALF_ACCS = tuple(a for a in _spec.ACCS if a != "fp32")  # need float16 inputs and an FFPA kernel
# CUDA's gridDim.y/z limit (ffpa_attn/_spec.py; the generated registry static_asserts ffpa::kMaxGridYZ
# equals it, and the build reports it as build_info()["limits"]["max_grid_yz"]).
_MAX_GRID_YZ = _spec.MAX_GRID_YZ
_MAX_HEADS = _MAX_GRID_YZ  # query heads: grid y of the kernels
_MAX_MASK_SLICES = _MAX_GRID_YZ  # (batch, head) slices of a mask: grid z of the block-map pass
_KERNEL_DTYPES = tuple(getattr(torch, t) for t in _spec.B16_TORCH)  # the ffpa_fwd op's (FP8: _fp8.py)
_MASK_DTYPES = (torch.bool, torch.float16, torch.bfloat16, torch.float32)
_LEVEL_FAMILY = _spec.LEVEL_NAMES  # families a forced level runs
_DTYPE_NAMES = {getattr(torch, t): t for t in _spec.B16_TORCH}  # as in build_info()

# Plain dicts keyed by CUDA device index (dynamo reads them; only eager code writes):
_capability_cache: dict = {}  # -> (major, minor)
_env_reason_cache: dict = {}  # -> why the device cannot run the kernels, or None


def _cuda_capability(index: int) -> Tuple[int, int]:
    cap = _capability_cache.get(index)
    if cap is None:
        props = torch.cuda.get_device_properties(index)
        cap = (props.major, props.minor)
        if not torch.compiler.is_compiling():
            _capability_cache[index] = cap
    return cap


def _parse_arch(arch: str) -> Optional[Tuple[int, int, str]]:
    """"80" / "sm_90a" / "compute_100f" -> (major, minor, suffix); None if unparsable."""
    a = arch.strip().lower()
    for prefix in ("sm_", "compute_"):
        if a.startswith(prefix):
            a = a[len(prefix):]
    suffix = a[-1:] if a[-1:] in ("a", "f") else ""
    digits = a[: len(a) - len(suffix)]
    if len(digits) < 2 or not digits.isdigit():
        return None
    return int(digits[:-1]), int(digits[-1]), suffix


def _arch_runs_on(arch: str, major: int, minor: int, ptx: bool = False) -> bool:
    """Can code built for ``arch`` run on a device of compute capability major.minor?

    SASS: same major and minor <= the device's ("a": that exact chip only; "f": the
    family).  PTX: JIT-compiled on any device at least as new ("a": exact chip only).
    """
    parsed = _parse_arch(arch)
    if parsed is None:
        return False
    am, an, suffix = parsed
    if suffix == "a":
        return (am, an) == (major, minor)
    if ptx and suffix == "":
        return (major, minor) >= (am, an)
    return am == major and an <= minor


def _build_runs_on(major: int, minor: int) -> bool:
    archs = _ops.built_archs()
    if not archs:  # the build did not say: trust it
        return True
    return any(_arch_runs_on(a, major, minor) for a in archs) or any(
        _arch_runs_on(a, major, minor, ptx=True) for a in _ops.built_ptx_archs()
    )


def _cuda_environment_reason(index: int) -> Optional[str]:
    """Why CUDA device ``index`` cannot run the FFPA kernels (``None`` when it can)."""
    if not _ops.extension_available():
        return f"the ffpa_attn._C extension is not available ({_ops.import_error()})"
    major, minor = _cuda_capability(index)
    if major < 8:
        return f"compute capability {major}.{minor} < 8.0; the FFPA kernels need sm_80 or newer"
    if not _build_runs_on(major, minor):
        ptx = ", ".join(_ops.built_ptx_archs()) or "none"
        return (
            f"this build has no kernels for sm_{major}{minor} "
            f"(SASS for {', '.join(_ops.built_archs())}; PTX for {ptx})"
        )
    return None


def _environment_reason(device: torch.device) -> Optional[str]:
    """Why this device cannot run the FFPA kernels (``None`` when it can)."""
    if device.type != "cuda":
        return f"inputs are on '{device.type}'; the FFPA kernels are CUDA-only"
    index = device.index
    if index is None:
        index = torch.cuda.current_device()
    if index in _env_reason_cache:
        return _env_reason_cache[index]
    reason = _cuda_environment_reason(index)
    if not torch.compiler.is_compiling():
        _env_reason_cache[index] = reason
    return reason


def _compiled_text() -> str:
    """What head dims each family has, e.g. 'fa2: 64, 128 and E/Ev 192/128; ffpa_l1: 320'."""
    parts = []
    for family in _ops.FAMILIES:
        pairs = _ops.head_dim_pairs(family)
        if not pairs:
            continue
        text = ", ".join(str(e) for e in sorted(e for e, ev in pairs if e == ev))
        odd = sorted((e, ev) for e, ev in pairs if e != ev)
        if odd:
            text += (" and " if text else "") + "E/Ev " + ", ".join(f"{e}/{ev}" for e, ev in odd)
        parts.append(f"{family}: {text}")
    return "; ".join(parts) or "none"


def _family_for(
    E: int, Ev: int, level: Optional[int], acc: str = "auto", dtype_name: Optional[str] = None,
    cc: Optional[Tuple[int, int]] = None,
) -> Optional[str]:
    """A compiled forward family with a kernel for head dims (E, Ev) at ``level`` (None = auto)
    with accumulation ``acc`` for inputs of dtype ``dtype_name`` on compute capability ``cc``
    (the first in spec order), or None. Whether one exists is all the Python side decides; which
    runs is the C++ chooser's."""
    found = _ops.kernel_families("fwd", E, Ev, dtype_name, acc, level, cc)
    return found[0] if found else None


def _head_dim_reason(E: int, Ev: int, level: Optional[int], acc: str = "auto") -> str:
    dims = f"head dim {E}" if E == Ev else f"head dims E={E}, Ev={Ev}"
    compiled = f"(compiled: {_compiled_text()})"
    if acc in _HALF_ACCS and _family_for(E, Ev, level) is not None:
        return (
            f"acc={acc!r} is not compiled for {dims}"
            + (f" at level={level}" if level is not None else "")
            + " (fp16/mixed accumulation is built for float16 inputs of the FFPA levels only)"
        )
    if level is None:
        return f"{dims} {'is' if E == Ev else 'are'} not compiled in this build {compiled}"
    auto = _family_for(E, Ev, None)
    hint = f"; level=None runs it on the {auto} kernel" if auto is not None else ""
    return (
        f"level={level} ({_LEVEL_FAMILY[level]}) has no kernel for {dims} in this build "
        f"{compiled}{hint}"
    )


def _mask_reason(attn_mask: Tensor, q_shape: Tuple) -> Optional[str]:
    if attn_mask.dtype not in _MASK_DTYPES:
        return (
            f"attn_mask dtype {attn_mask.dtype} is not supported; the kernels take bool, "
            "float16, bfloat16 or float32 masks"
        )
    if torch.is_grad_enabled() and attn_mask.requires_grad:
        return "attn_mask requires grad; the kernels are forward-only"
    if mask_slices(attn_mask, q_shape) > _MAX_MASK_SLICES:
        return (
            f"attn_mask varies over more than {_MAX_MASK_SLICES} (batch, head) slices; "
            "broadcast it over batch or heads to run on the kernels"
        )
    return None


def _kernel_reason(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor],
    dropout_p: float,
    scale: Optional[float],
    dtype: torch.dtype,
    level: Optional[int],
    acc: str,
) -> Optional[str]:
    """Why our kernels cannot run this (validated) call, ``None`` when they can."""
    if level is not None and not _ops.head_dim_pairs(_LEVEL_FAMILY[level]):
        return f"level={level} (FFPA L{level}) is not compiled in this build"
    env = _environment_reason(query.device)
    if env is not None:
        return env
    if dropout_p > 0.0:
        return "dropout_p > 0 is not supported by the FFPA kernels"
    if scale is not None and not (-math.inf < scale < math.inf):
        return "a non-finite scale is not supported by the FFPA kernels"
    if torch.is_grad_enabled() and (
        query.requires_grad or key.requires_grad or value.requires_grad
    ):
        return "inputs require grad; the FFPA kernels are forward-only"
    if query.numel() == 0 or key.numel() == 0 or value.numel() == 0:
        return "zero-size input"
    qsh, ksh, vsh = query.shape, key.shape, value.shape
    nd = len(qsh)
    if len(ksh) != nd or len(vsh) != nd:
        return "query, key and value have different numbers of dimensions (broadcast)"
    if qsh[:-3] != ksh[:-3] or qsh[:-3] != vsh[:-3]:
        return "query, key and value have different batch dimensions (broadcast)"
    if nd >= 3:
        hq, hk = qsh[-3], ksh[-3]
        if vsh[-3] != hk:
            return "key and value have different numbers of heads"
        if hq % hk != 0:
            return "query heads broadcast against more key/value heads"
        if hq > _MAX_HEADS:
            return f"more than {_MAX_HEADS} query heads"
    if attn_mask is not None:
        mask = _mask_reason(attn_mask, qsh)
        if mask is not None:
            return mask
    if dtype not in _KERNEL_DTYPES:
        return f"dtype {dtype} is not supported; the FFPA kernels take float16/bfloat16"
    dtypes = _ops.built_dtypes()
    if dtypes and _DTYPE_NAMES.get(dtype) not in dtypes:
        return f"dtype {dtype} is not compiled in this build (compiled: {', '.join(sorted(dtypes))})"
    if acc in _HALF_ACCS and dtype != torch.float16:
        return (
            f"acc={acc!r} (fp16 MMA accumulation) needs float16 inputs, got {dtype} "
            "(bfloat16 tensor-core MMAs accumulate in fp32 only)"
        )
    E, Ev = qsh[-1], vsh[-1]
    cc = _cuda_capability(query.device.index if query.device.index is not None else torch.cuda.current_device()) \
        if query.device.type == "cuda" else None
    if _family_for(E, Ev, level, acc, _DTYPE_NAMES.get(dtype), cc) is None:
        return _head_dim_reason(E, Ev, level, acc)
    return None


# Forward calls with at most _decode_ops.MAX_QUERIES query rows run on the decode family where it is
# compiled for the pair. The prefill kernels give each query head its own block, so a KV head's bytes
# are read once per query head and a long key range runs in one block; the decode kernel packs the
# heads of a KV head and splits the keys.


def decode_route(q4: Tensor, k4: Tensor, v4: Tensor, attn_mask: Optional[Tensor], is_causal: bool,
                 bottom_right: bool, level: Optional[int], acc: str, num_stages: Optional[int]) -> bool:
    """Whether a forward call (4-D SDPA layout, our kernels already chosen, any mask already accepted
    by the kernels and in its 4-D broadcast form) runs on the decode family: no forced level /
    accumulation / ring depth, at most _decode_ops.MAX_QUERIES query rows, causal only where it means
    what decode's does (bottom-right, or L == S; with a mask, not at all: forward applies both)."""
    if level is not None or acc != "auto" or num_stages is not None:
        return False
    from . import _decode_ops  # the decode op module imports _ops only; imported late to keep startup light

    L, S = q4.shape[2], k4.shape[2]
    if L > _decode_ops.MAX_QUERIES or S < 1:
        return False
    if is_causal and (attn_mask is not None or not (bottom_right or L == S)):
        return False
    return (q4.shape[-1], v4.shape[-1]) in _decode_ops.decode_pairs()
