"""``ffpa_attn.forward``: a drop-in for ``torch.nn.functional.scaled_dot_product_attention``.

The call is validated exactly like SDPA validates it (same misuse -> an exception;
our classes also derive from what SDPA raises), then routed:

* to the FFPA CUDA kernel when every feature of the call is supported, or
* to the original torch SDPA (with a one-time ``FFPAFallbackWarning`` per reason).

Routing is plain Python on tensor metadata, so it traces under
``torch.compile(fullgraph=True)``.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import warnings
from typing import Iterator, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _ops
from .errors import (
    FFPAFallbackWarning,
    FFPAIndexError,
    FFPATypeError,
    FFPAUnsupportedError,
    FFPAValueError,
)

__all__ = [
    "forward",
    "scaled_dot_product_attention",
    "patch_sdpa",
    "unpatch_sdpa",
    "is_sdpa_patched",
    "sdpa_patched",
    "reset_fallback_warnings",
]

# The builtin itself, not whatever F.scaled_dot_product_attention points to now: the
# fallback must never recurse into a patched wrapper (ours or anybody else's).
_SDPA = torch._C._nn.scaled_dot_product_attention

_LEVELS = (1, 2, 3)
_BUILT_LEVELS = (1,)
_ACCS = ("auto", "fp32", "fp16", "mixed")
_BUILT_ACCS = ("auto", "fp32")
_NUM_STAGES = (1, 2, 3, 4)
_MAX_HEADS = 65535  # grid limit of the kernels
_KERNEL_DTYPES = (torch.float16, torch.bfloat16)
_DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16"}  # as in build_info()
_AUTOCAST_DEVICE_TYPES = ("cuda", "cpu")
_AUTOCAST_CASTS = (torch.float16, torch.bfloat16, torch.float32)

# Fallback reasons already warned about (see reset_fallback_warnings()).
_warned_reasons: set = set()
# Plain dicts keyed by CUDA device index (dynamo reads them; only eager code writes):
_capability_cache: dict = {}  # -> (major, minor)
_env_reason_cache: dict = {}  # -> why the device cannot run the kernels, or None


# ============================================================================ helpers
def _tname(x: object) -> str:
    return type(x).__name__


def _shape(t: Tensor) -> Tuple[int, ...]:
    return tuple(t.shape)


def _err_prefix() -> str:
    return "ffpa_attn.forward(): "


def _check_bool(name: str, value: object) -> None:
    # SDPA: "argument 'is_causal' must be bool, not int" (also for numpy/tensor bools).
    if type(value) is not bool:
        raise FFPATypeError(
            f"{_err_prefix()}argument '{name}' must be a bool, got {_tname(value)} ({value!r})"
        )


def _as_float(name: str, value: object) -> float:
    # SDPA accepts Python/numpy reals and 0-dim tensors that do not require grad.
    if type(value) in (float, int, bool):
        return float(value)
    if isinstance(value, Tensor):
        if value.dim() == 0 and not value.requires_grad and not value.is_complex():
            return float(value.item())
        raise FFPATypeError(
            f"{_err_prefix()}argument '{name}' must be a float, got a Tensor of shape "
            f"{_shape(value)} (requires_grad={value.requires_grad}, dtype={value.dtype})"
        )
    if isinstance(value, numbers.Real):
        return float(value)
    raise FFPATypeError(f"{_err_prefix()}argument '{name}' must be a float, got {_tname(value)}")


def _check_choice(name: str, value: object, allowed: tuple, allow_none: bool, kind: type) -> None:
    if value is None and allow_none:
        return
    if type(value) is kind and value in allowed:  # fast path (also excludes bool for int)
        return
    shown = ("None, " if allow_none else "") + ", ".join(repr(a) for a in allowed)
    ok_type = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok_type:
        raise FFPATypeError(
            f"{_err_prefix()}argument '{name}' must be one of {shown}, "
            f"got {_tname(value)} ({value!r})"
        )
    raise FFPAValueError(f"{_err_prefix()}argument '{name}' must be one of {shown}, got {value!r}")


def _broadcast(a: Tuple, b: Tuple) -> Optional[Tuple]:
    """numpy-style broadcast of two shapes, ``None`` when incompatible."""
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


def _autocast_dtype(device_type: str) -> Optional[torch.dtype]:
    if device_type in _AUTOCAST_DEVICE_TYPES and torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return None


def _effective_dtype(dtype: torch.dtype, autocast: Optional[torch.dtype]) -> torch.dtype:
    # Under autocast SDPA receives fp16/bf16/fp32 tensors already cast (fp64 is not cast).
    if autocast is not None and dtype in _AUTOCAST_CASTS:
        return autocast
    return dtype


# ========================================================================= validation
def _validate(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor],
    is_causal: bool,
    enable_gqa: bool,
    autocast: Optional[torch.dtype],
) -> Tuple[Optional[Tensor], torch.dtype, Tuple]:
    """Raise for every misuse SDPA rejects; return (normalized mask, dtype, out shape)."""
    p = _err_prefix()
    qkv = (("query", query), ("key", key), ("value", value))

    # -- rank: SDPA wants (..., L, E) / (..., S, E) / (..., S, Ev), i.e. >= 2-D.
    for name, t in qkv:
        if t.dim() < 2:
            raise FFPAValueError(
                f"{p}argument '{name}' must have at least 2 dimensions (..., seq_len, head_dim), "
                f"got a {t.dim()}-D tensor of shape {_shape(t)}"
            )

    # -- dtypes: floating point and all equal (after autocast's cast, as SDPA sees them).
    qdt = query.dtype if autocast is None else _effective_dtype(query.dtype, autocast)
    if not qdt.is_floating_point:
        raise FFPATypeError(
            f"{p}argument 'query' must be a floating-point tensor "
            f"(float16, bfloat16, float32 or float64), got dtype {query.dtype}"
        )
    for name, t in qkv[1:]:
        tdt = t.dtype if autocast is None else _effective_dtype(t.dtype, autocast)
        if tdt != qdt:
            raise FFPATypeError(
                f"{p}argument '{name}' must have the same dtype as query ({query.dtype}), "
                f"got {t.dtype}"
            )

    # -- devices
    qdev = query.device
    for name, t in qkv[1:]:
        if t.device != qdev:
            raise FFPAValueError(
                f"{p}argument '{name}' must be on the same device as query ({qdev}), "
                f"got {t.device}"
            )

    # -- sizes
    qsh, ksh, vsh = query.shape, key.shape, value.shape
    E = qsh[-1]
    if ksh[-1] != E:
        raise FFPAValueError(
            f"{p}argument 'key' must have the same head_dim E as query: expected "
            f"key.shape[-1] == {E}, got {ksh[-1]} (query {_shape(query)}, key {_shape(key)})"
        )
    if vsh[-2] != ksh[-2]:
        raise FFPAValueError(
            f"{p}argument 'value' must have the same sequence length S as key: expected "
            f"value.shape[-2] == {ksh[-2]}, got {vsh[-2]} "
            f"(key {_shape(key)}, value {_shape(value)})"
        )

    q_lead = tuple(qsh[:-2])
    k_lead = tuple(ksh[:-2])
    v_lead = tuple(vsh[:-2])
    if q_lead == k_lead and k_lead == v_lead and not enable_gqa:  # common case: no broadcast
        scores_shape = q_lead + (qsh[-2], ksh[-2])
        out_shape = q_lead + (qsh[-2], vsh[-1])
        if attn_mask is not None:
            attn_mask = _validate_mask(query, attn_mask, is_causal, qdt, autocast, scores_shape)
        return attn_mask, qdt, out_shape
    if enable_gqa:
        for name, t in qkv:
            if t.dim() < 3:
                raise FFPAIndexError(
                    f"{p}enable_gqa=True needs a heads dimension: argument '{name}' must be at "
                    f"least 3-D (..., heads, seq_len, head_dim), got shape {_shape(t)}"
                )
        hq = query.shape[-3]
        for name, t in qkv[1:]:
            h = t.shape[-3]
            if h == 0 or hq % h != 0:
                raise FFPAValueError(
                    f"{p}enable_gqa=True requires the number of query heads to be a multiple "
                    f"of the number of {name} heads: got {hq} query heads and {h} {name} heads"
                )
        # SDPA repeat_interleaves key/value heads up to Hq.
        k_lead = k_lead[:-1] + (hq,)
        v_lead = v_lead[:-1] + (hq,)

    scores_lead = _broadcast(q_lead, k_lead)
    if scores_lead is None:
        hint = ""
        if (
            not enable_gqa
            and query.dim() >= 3
            and key.dim() >= 3
            and key.shape[-3] not in (0, 1)
            and query.shape[-3] != key.shape[-3]
            and query.shape[-3] % key.shape[-3] == 0
        ):
            hint = "; for grouped-query attention pass enable_gqa=True"
        raise FFPAValueError(
            f"{p}argument 'key' has batch/head dims {tuple(key.shape[:-2])} that do not "
            f"broadcast with query's {tuple(query.shape[:-2])} "
            f"(query {_shape(query)}, key {_shape(key)}){hint}"
        )
    out_lead = _broadcast(scores_lead, v_lead)
    if out_lead is None:
        raise FFPAValueError(
            f"{p}argument 'value' has batch/head dims {tuple(value.shape[:-2])} that do not "
            f"broadcast with those of query/key {scores_lead} (value {_shape(value)})"
        )
    L, S = query.shape[-2], key.shape[-2]
    scores_shape = scores_lead + (L, S)
    out_shape = out_lead + (L, value.shape[-1])
    return _validate_mask(query, attn_mask, is_causal, qdt, autocast, scores_shape), qdt, out_shape


def _validate_mask(
    query: Tensor,
    attn_mask: Optional[Tensor],
    is_causal: bool,
    qdt: torch.dtype,
    autocast: Optional[torch.dtype],
    scores_shape: Tuple,
) -> Optional[Tensor]:
    """Raise for a mask SDPA rejects; return it normalized to >= 2-D."""
    p = _err_prefix()
    if attn_mask is not None:
        if attn_mask.dtype != torch.bool:
            mdt = _effective_dtype(attn_mask.dtype, autocast)
            if not mdt.is_floating_point or mdt not in (torch.float32, qdt):
                raise FFPATypeError(
                    f"{p}argument 'attn_mask' must be a bool tensor or a float tensor of "
                    f"dtype torch.float32 or query's dtype ({qdt}), got {attn_mask.dtype}"
                )
        if attn_mask.device != query.device:
            raise FFPAValueError(
                f"{p}argument 'attn_mask' must be on the same device as query "
                f"({query.device}), got {attn_mask.device}"
            )
        if attn_mask.dim() < 2:
            # Broadcasting prepends 1s anyway; SDPA's math path accepts this, its CPU
            # flash path raises IndexError, so normalize instead of passing it through.
            attn_mask = attn_mask.reshape((1,) * (2 - attn_mask.dim()) + _shape(attn_mask))
        if _broadcast(_shape(attn_mask), scores_shape) != scores_shape:
            raise FFPAValueError(
                f"{p}argument 'attn_mask' must be broadcastable to the attention-weight shape "
                f"{scores_shape} (..., L, S), got shape {_shape(attn_mask)}"
            )
        if is_causal:
            raise FFPAValueError(
                f"{p}arguments 'attn_mask' and 'is_causal' are mutually exclusive "
                "(SDPA: 'Explicit attn_mask should not be set when is_causal=True'); "
                "got an attn_mask and is_causal=True"
            )
    return attn_mask


# ============================================================================ routing
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
    """Why the FFPA kernel cannot run this (validated) call, ``None`` when it can."""
    if level is not None and level not in _BUILT_LEVELS:
        return f"level={level} (FFPA L{level}) is not in this build yet"
    if acc not in _BUILT_ACCS:
        return f"acc={acc!r} is not in this build yet"
    env = _environment_reason(query.device)
    if env is not None:
        return env
    if attn_mask is not None:
        return "attn_mask is not supported by the FFPA kernels"
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
    E = qsh[-1]
    if vsh[-1] != E:
        return "value head dim Ev differs from query/key head dim E"
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
    if dtype not in _KERNEL_DTYPES:
        return f"dtype {dtype} is not supported; the FFPA kernels take float16/bfloat16"
    dtypes = _ops.built_dtypes()
    if dtypes and _DTYPE_NAMES.get(dtype) not in dtypes:
        return f"dtype {dtype} is not compiled in this build (compiled: {', '.join(sorted(dtypes))})"
    head_dims = _ops.l1_head_dims()
    if E not in head_dims:
        shown = ", ".join(str(d) for d in sorted(head_dims)) or "none"
        return f"head dim {E} is not compiled in this build (compiled: {shown})"
    return None


def _fallback_notice(reason: str, strict: bool) -> None:
    if strict:
        raise FFPAUnsupportedError(
            f"ffpa_attn.forward(strict=True): the FFPA kernel cannot run this call: {reason}",
            reason,
        )
    if torch.compiler.is_compiling() or reason in _warned_reasons:
        return
    _warned_reasons.add(reason)
    warnings.warn(
        "ffpa_attn: falling back to torch.nn.functional.scaled_dot_product_attention: "
        f"{reason} (warned once per reason; pass strict=True to raise instead)",
        FFPAFallbackWarning,
        stacklevel=3,
    )


def reset_fallback_warnings() -> None:
    """Forget which fallback reasons were warned about, so they warn again."""
    _warned_reasons.clear()


# ======================================================================= computations
def _as_4d(t: Tensor) -> Tensor:
    nd = t.dim()
    if nd == 4:
        return t
    if nd == 3:
        return t.unsqueeze(0)
    if nd == 2:
        return t.unsqueeze(0).unsqueeze(0)
    return t.reshape((-1,) + tuple(t.shape[-3:]))


def _run_kernel(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    scale: Optional[float],
    is_causal: bool,
    level: Optional[int],
    num_stages: Optional[int],
    dtype: torch.dtype,
    out_shape: Tuple,
    return_lse: bool,
) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    if query.dtype != dtype:  # autocast: SDPA would have seen cast inputs
        query = query.to(dtype)
    if key.dtype != dtype:
        key = key.to(dtype)
    if value.dtype != dtype:
        value = value.to(dtype)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    q4, k4, v4 = _as_4d(query), _as_4d(key), _as_4d(value)
    lvl = 0 if level is None else level
    stages = 0 if num_stages is None else num_stages
    if torch.compiler.is_compiling():
        # Strides are known while tracing; the data pointer only at run time, which the
        # opaque realigning op checks.
        q4, k4, v4 = (
            t if _ops.strides_ok(t) else t.clone(memory_format=torch.contiguous_format)
            for t in (q4, k4, v4)
        )
        out, lse = _ops.ffpa_fwd_realigned(q4, k4, v4, scale, is_causal, lvl, stages)
    else:
        out, lse = _ops.ffpa_fwd(
            _ops.realign(q4), _ops.realign(k4), _ops.realign(v4), scale, is_causal, lvl, stages
        )
    if query.dim() != 4:
        out = out.reshape(out_shape)
        lse = lse.reshape(out_shape[:-1])
    if not return_lse:
        return out
    return out, lse


def _reference_scores(
    query: Tensor,
    key: Tensor,
    attn_mask: Optional[Tensor],
    is_causal: bool,
    scale: Optional[float],
    enable_gqa: bool,
    dtype: torch.dtype,
    autocast: Optional[torch.dtype],
) -> Tensor:
    """Pre-softmax scores (masked, scaled) in float32 (float64 for float64 inputs),
    from the inputs as SDPA sees them (i.e. after autocast's casts)."""
    ct = torch.float64 if dtype == torch.float64 else torch.float32
    q = query.to(dtype).to(ct)
    k = key.to(dtype).to(ct)
    if enable_gqa and k.shape[-3] != q.shape[-3]:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
    E = q.shape[-1]
    s = torch.matmul(q, k.transpose(-2, -1))
    if E > 0:  # with E == 0 the scores are 0 (SDPA scales q and k, not the product)
        s = s * (1.0 / math.sqrt(E) if scale is None else scale)
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        keep = torch.ones((L, S), dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            s = s.masked_fill(~attn_mask, float("-inf"))
        else:
            s = s + attn_mask.to(_effective_dtype(attn_mask.dtype, autocast)).to(ct)
    return s


def _run_fallback(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor],
    dropout_p: float,
    is_causal: bool,
    scale: Optional[float],
    enable_gqa: bool,
    dtype: torch.dtype,
    out_shape: Tuple,
    return_lse: bool,
    autocast: Optional[torch.dtype],
) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    empty = query.numel() == 0 or key.numel() == 0 or value.numel() == 0
    if not empty:
        out = _SDPA(
            query,
            key,
            value,
            attn_mask=attn_mask,
            dropout_p=dropout_p,
            is_causal=is_causal,
            scale=scale,
            enable_gqa=enable_gqa,
        )
        if not return_lse:
            return out
    # lse (and, for zero-size inputs, the output: SDPA's CPU kernel dies with SIGFPE
    # on zero heads) from explicit float32 scores.
    ctx = (
        torch.autocast(query.device.type, enabled=False)
        if autocast is not None
        else contextlib.nullcontext()
    )
    with ctx:
        s = _reference_scores(
            query, key, attn_mask, is_causal, scale, enable_gqa, dtype, autocast
        )
        if empty:
            probs = torch.softmax(s, dim=-1)
            if dropout_p > 0.0:
                probs = F.dropout(probs, p=dropout_p)
            v = value.to(dtype).to(s.dtype)
            if enable_gqa and v.shape[-3] != query.shape[-3]:
                v = v.repeat_interleave(query.shape[-3] // v.shape[-3], dim=-3)
            out = torch.matmul(probs, v).to(dtype).expand(out_shape)
            if not return_lse:
                return out
        lse = torch.logsumexp(s, dim=-1).to(torch.float32)
    return out, lse.expand(out_shape[:-1]).contiguous()


# ============================================================================ forward
def forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
    *,
    return_lse: bool = False,
    strict: bool = False,
    level: Optional[int] = None,
    acc: str = "auto",
    num_stages: Optional[int] = None,
) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    r"""Scaled dot-product attention with the semantics of
    :func:`torch.nn.functional.scaled_dot_product_attention`.

    Args:
        query: ``(..., Hq, L, E)``; key: ``(..., H, S, E)``; value: ``(..., H, S, Ev)``
            (2-D inputs without a heads dim are accepted too, as by SDPA).
        attn_mask: bool (True = takes part) or float (added) mask broadcastable to
            ``(..., Hq, L, S)``.
        dropout_p: dropout probability in ``[0, 1]``.
        is_causal: top-left causal mask ``tril(ones(L, S))``; exclusive with attn_mask.
        scale: softmax scale, default ``1 / sqrt(E)``.
        enable_gqa: grouped-query attention, ``Hq % H == 0``.
        return_lse: also return ``lse`` = logsumexp of the scaled, masked scores (natural
            log), shape ``(..., Hq, L)``, float32.
        strict: raise :class:`NotImplementedError` (``FFPAUnsupportedError``) instead of
            falling back to torch SDPA.
        level: FFPA level, ``None`` = auto, 1/2/3 (only 1 is in this build).
        acc: accumulation, ``"auto"``, ``"fp32"``, ``"fp16"``, ``"mixed"`` (only auto/fp32 built).
        num_stages: pipeline stages, ``None`` = auto, else 1..4.

    Returns:
        ``out`` of shape ``(..., Hq, L, Ev)``, or ``(out, lse)`` with ``return_lse=True``.
    """
    # ---- arguments that are not tensors
    _check_bool("is_causal", is_causal)
    _check_bool("enable_gqa", enable_gqa)
    _check_bool("return_lse", return_lse)
    _check_bool("strict", strict)
    if type(dropout_p) is not float:
        dropout_p = _as_float("dropout_p", dropout_p)
    if scale is not None and type(scale) is not float:
        scale = _as_float("scale", scale)
    if level is not None:
        _check_choice("level", level, _LEVELS, True, int)
    if type(acc) is not str or acc != "auto":
        _check_choice("acc", acc, _ACCS, False, str)
    if num_stages is not None:
        _check_choice("num_stages", num_stages, _NUM_STAGES, True, int)
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise FFPATypeError(
                f"{_err_prefix()}argument '{name}' must be a torch.Tensor, got {_tname(t)}"
            )
    if attn_mask is not None and not isinstance(attn_mask, Tensor):
        raise FFPATypeError(
            f"{_err_prefix()}argument 'attn_mask' must be None or a torch.Tensor, "
            f"got {_tname(attn_mask)}"
        )
    if not (0.0 <= dropout_p <= 1.0):  # also rejects NaN
        raise FFPAValueError(
            f"{_err_prefix()}argument 'dropout_p' must be a probability in [0, 1], "
            f"got {dropout_p}"
        )

    # ---- nested (jagged) tensors: SDPA validates and runs them itself
    if query.is_nested or key.is_nested or value.is_nested:
        if return_lse:
            raise FFPAUnsupportedError(
                "ffpa_attn.forward(): return_lse=True is not supported for nested tensors",
                "return_lse=True with nested tensors",
            )
        _fallback_notice("nested tensors are not supported by the FFPA kernels", strict)
        return _SDPA(
            query,
            key,
            value,
            attn_mask=attn_mask,
            dropout_p=dropout_p,
            is_causal=is_causal,
            scale=scale,
            enable_gqa=enable_gqa,
        )

    # ---- what SDPA would reject, rejected before routing
    autocast = _autocast_dtype(query.device.type)
    attn_mask, dtype, out_shape = _validate(
        query, key, value, attn_mask, is_causal, enable_gqa, autocast
    )

    # ---- route
    reason = _kernel_reason(
        query, key, value, attn_mask, dropout_p, scale, dtype, level, acc
    )
    if reason is None:
        return _run_kernel(
            query, key, value, scale, is_causal, level, num_stages, dtype, out_shape, return_lse
        )
    _fallback_notice(reason, strict)
    return _run_fallback(
        query,
        key,
        value,
        attn_mask,
        dropout_p,
        is_causal,
        scale,
        enable_gqa,
        dtype,
        out_shape,
        return_lse,
        autocast,
    )


#: Same function object as :func:`forward`, under SDPA's name.
scaled_dot_product_attention = forward


# ========================================================================== patching
_previous_sdpa: list = []  # what patch_sdpa() replaced (at most one entry)


def is_sdpa_patched() -> bool:
    """True when ``torch.nn.functional.scaled_dot_product_attention`` is ffpa_attn.forward."""
    return F.scaled_dot_product_attention is forward


def patch_sdpa() -> None:
    """Route ``torch.nn.functional.scaled_dot_product_attention`` through ffpa_attn.forward.

    Idempotent.  Affects code that looks the function up on ``torch.nn.functional`` at
    call time (``F.scaled_dot_product_attention(...)``, nn.MultiheadAttention, ...), not
    references taken earlier with ``from torch.nn.functional import ...``.
    """
    current = F.scaled_dot_product_attention
    if current is forward:
        return
    _previous_sdpa[:] = [current]
    F.scaled_dot_product_attention = forward


def unpatch_sdpa() -> None:
    """Undo :func:`patch_sdpa` (idempotent): restore what it replaced."""
    if F.scaled_dot_product_attention is forward:
        F.scaled_dot_product_attention = _previous_sdpa[0] if _previous_sdpa else _SDPA
    _previous_sdpa.clear()


@contextlib.contextmanager
def sdpa_patched() -> Iterator:
    """Context manager: SDPA routed through ffpa_attn.forward inside, previous state after."""
    previous = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = forward
    try:
        yield forward
    finally:
        F.scaled_dot_product_attention = previous
