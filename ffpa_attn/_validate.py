"""SDPA-compatible argument validation for ``ffpa_attn.forward``: the same misuse raises
what ``torch.nn.functional.scaled_dot_product_attention`` raises (our classes derive from it),
before any routing. Owns the argument checks, shape broadcasting and autocast dtype rules.
"""

from __future__ import annotations

import numbers
from typing import Optional, Tuple

import torch
from torch import Tensor

from .errors import FFPAIndexError, FFPATypeError, FFPAValueError

# Values the keyword-only FFPA arguments accept (what this build runs: see _routing).
_LEVELS = (1, 2, 3)
_ACCS = ("auto", "fp32", "fp16", "mixed")
_NUM_STAGES = (1, 2, 3, 4)
_AUTOCAST_DEVICE_TYPES = ("cuda", "cpu")
_AUTOCAST_CASTS = (torch.float16, torch.bfloat16, torch.float32)
# torch's 8-bit float dtypes (those this torch has).
_FP8_DTYPES = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
                    if hasattr(torch, n))


def _sdpa_takes_4d_mask_for_3d_inputs() -> bool:
    """Does this torch's SDPA accept a (1, H, L, S) mask for 3-D (H, L, E) inputs? torch 2.15
    does (it drops the leading 1), 2.11 raises; probed once at import on tiny CPU tensors."""
    q = torch.zeros(2, 1, 8)
    try:
        torch._C._nn.scaled_dot_product_attention(q, q, q, attn_mask=torch.zeros(1, 2, 1, 1))
    except RuntimeError:
        return False
    return True


_SDPA_4D_MASK_FOR_3D = _sdpa_takes_4d_mask_for_3d_inputs()


# ============================================================================ helpers
def _tname(x: object) -> str:
    return type(x).__name__


def _shape(t: Tensor) -> Tuple[int, ...]:
    return tuple(t.shape)


def _show(x: object) -> str:
    """``type (value)`` for an error message; the value only for plain Python scalars, whose repr
    is cheap and traceable (a tensor's or numpy value's repr is neither under torch.compile)."""
    if x is None or type(x) in (bool, int, float, str):
        return f"{_tname(x)} ({x!r})"
    return _tname(x)


def _err_prefix() -> str:
    return "ffpa_attn.forward(): "


def _check_bool(name: str, value: object) -> None:
    # SDPA: "argument 'is_causal' must be bool, not int" (also for numpy/tensor bools).
    if type(value) is not bool:
        raise FFPATypeError(
            f"{_err_prefix()}argument '{name}' must be a bool, got {_show(value)}"
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
            f"got {_show(value)}"
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
    # (FP8 inputs never get here: forward sends them to _fp8.py first.)
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
        if (_SDPA_4D_MASK_FOR_3D and query.dim() == 3 and attn_mask.dim() == 4
                and attn_mask.shape[0] == 1):
            attn_mask = attn_mask[0]  # as this torch's SDPA does
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

