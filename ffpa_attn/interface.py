"""``ffpa_attn.forward``: a drop-in for ``torch.nn.functional.scaled_dot_product_attention``.
Owns the entry point, the kernel call, the torch-SDPA fallback (with LSE), the one-time
fallback warnings and SDPA patching; validation lives in _validate, routing in _routing.

The call is validated exactly like SDPA validates it (same misuse -> an exception;
our classes also derive from what SDPA raises), then routed:

* to our CUDA kernels when every feature of the call is supported (the FA-2 family for
  head dims <= 256, 320 and 384, FFPA above; bool/float masks and both causal alignments included), or
* to the original torch SDPA (with a one-time ``FFPAFallbackWarning`` per reason); a
  bottom-right causal call becomes SDPA with the equivalent bool mask.

Routing is plain Python on tensor metadata, so it traces under
``torch.compile(fullgraph=True)``.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import Iterator, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _fastpath, _fp8, _hf, _ops
from ._masks import CAUSAL_ALIGNS, causal_keep, mask_as_4d
from ._routing import _kernel_reason, decode_route
from ._validate import (
    _ACCS,
    _LEVELS,
    _NUM_STAGES,
    _as_float,
    _autocast_dtype,
    _check_bool,
    _check_choice,
    _effective_dtype,
    _err_prefix,
    _tname,
    _validate,
)
from ._compile import keep_error_classes
from .errors import (
    FFPAFallbackWarning,
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

# ================================================================== fallback warnings
# Fallback reasons already warned about (see reset_fallback_warnings()).
_warned_reasons: set = set()


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
        stacklevel=5,  # _fallback_notice <- _forward <- keep_error_classes <- forward <- the caller
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


def _decode_route(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor], is_causal: bool,
                  bottom_right: bool, level: Optional[int], acc: str, num_stages: Optional[int]) -> bool:
    """Whether a kernel-routed call runs on the decode op (_routing.decode_route, on the 4-D views)."""
    m4 = None if attn_mask is None else mask_as_4d(attn_mask, query.shape)
    return decode_route(_as_4d(query), _as_4d(key), _as_4d(value), m4, is_causal, bottom_right, level, acc,
                        num_stages)


def _run_kernel(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor],
    scale: Optional[float],
    is_causal: bool,
    bottom_right: bool,
    level: Optional[int],
    acc: str,
    num_stages: Optional[int],
    dtype: torch.dtype,
    out_shape: Tuple,
    return_lse: bool,
    decode: bool,
) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Our kernels on a validated, routed call; ``decode``: on the decode op (``_decode_route``)."""
    if query.dtype != dtype:  # autocast: SDPA would have seen cast inputs
        query = query.to(dtype)
    if key.dtype != dtype:
        key = key.to(dtype)
    if value.dtype != dtype:
        value = value.to(dtype)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    q4, k4, v4 = _as_4d(query), _as_4d(key), _as_4d(value)
    # The mask keeps its dtype (also under autocast: the kernel reads fp32 masks); its 4-D
    # view follows q's flattening, broadcast (and expanded, stride-0) dims as size 1.
    m4 = None if attn_mask is None else mask_as_4d(attn_mask, query.shape)
    lvl = 0 if level is None else level
    acc_code = _ops.ACC_CODES[acc]
    stages = 0 if num_stages is None else num_stages
    if decode:
        from . import _decode_ops

        # Decode's layout is (B, L, H, D): the transposed views, no copy; out comes back in q's layout.
        out, lse = _decode_ops.call(q4.transpose(1, 2), k4.transpose(1, 2), v4.transpose(1, 2), None, None, scale,
                                    is_causal, 0, m4)
        out = out.transpose(1, 2)
    elif torch.compiler.is_compiling():
        # Strides are known while tracing; the data pointer only at run time, which the
        # opaque realigning op checks.
        q4, k4, v4 = (
            t if _ops.strides_ok(t) else t.clone(memory_format=torch.contiguous_format)
            for t in (q4, k4, v4)
        )
        out, lse = _ops.ffpa_fwd_realigned(
            q4, k4, v4, m4, scale, is_causal, bottom_right, lvl, acc_code, stages
        )
    else:
        out, lse = _ops.ffpa_fwd(
            _ops.realign(q4), _ops.realign(k4), _ops.realign(v4), m4, scale, is_causal,
            bottom_right, lvl, acc_code, stages,
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
    from the inputs as SDPA sees them (i.e. after autocast's casts); a bottom-right causal
    call arrives here as its bool mask (see _run_fallback)."""
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
        keep = causal_keep(q.shape[-2], k.shape[-2], False, q.device)
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
    bottom_right: bool = False,
) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    if is_causal and bottom_right and query.shape[-2] != key.shape[-2]:
        # SDPA has no bottom-right flag: its equivalent bool mask (attn_mask is None here:
        # _validate rejects it together with is_causal). L == S is plain top-left causal.
        attn_mask = causal_keep(query.shape[-2], key.shape[-2], True, query.device)
        is_causal = False
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
    causal_align: str = "top_left",
    return_lse: bool = False,
    strict: bool = False,
    level: Optional[int] = None,
    acc: str = "auto",
    num_stages: Optional[int] = None,
    q_descale: Union[None, float, Tensor] = None,
    k_descale: Union[None, float, Tensor] = None,
    v_descale: Union[None, float, Tensor] = None,
    out_dtype: Optional[torch.dtype] = None,
) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    r"""Scaled dot-product attention with the semantics of
    :func:`torch.nn.functional.scaled_dot_product_attention`.

    Args:
        query: ``(..., Hq, L, E)``; key: ``(..., H, S, E)``; value: ``(..., H, S, Ev)``
            (2-D inputs without a heads dim are accepted too, as by SDPA).
        attn_mask: bool (True = takes part) or float (added) mask broadcastable to
            ``(..., Hq, L, S)``; float masks of dtype float32 or the query's dtype.  Both
            run on our kernels; a row with no key left gives output 0 (lse -inf).
        dropout_p: dropout probability in ``[0, 1]``.
        is_causal: causal mask aligned as ``causal_align`` says; exclusive with attn_mask.
        scale: softmax scale, default ``1 / sqrt(E)``.
        enable_gqa: grouped-query attention, ``Hq % H == 0``.
        causal_align: only read with ``is_causal=True`` (ignored otherwise).
            ``"top_left"`` (default, SDPA's convention): query i sees keys ``j <= i``, i.e.
            ``tril(ones(L, S))``.  ``"bottom_right"`` (flash-attn's KV-cache prefill
            convention): query i sees keys ``j <= i + S - L``, i.e.
            ``tril(ones(L, S), diagonal=S - L)``; with ``L > S`` the first ``L - S`` queries
            see no key (output 0, lse -inf).  Both are the same when ``L == S``.
        return_lse: also return ``lse`` = logsumexp of the scaled, masked scores (natural
            log), shape ``(..., Hq, L)``, float32.
        strict: raise :class:`NotImplementedError` (``FFPAUnsupportedError``) instead of
            falling back to torch SDPA.
        level: ``None`` = auto: the FA-2 kernel family for head dims <= 256, 320 and 384 (the (E, Ev)
            pairs compiled for it), above that the FFPA level the heuristic picks for the
            shape and device.  ``1``/``2``/``3`` force FFPA L1 (O in registers), L2 (O(1)
            registers, Q@K^T recomputed per 256-wide Dv group) or L3 (O accumulated in a
            global fp32 workspace; any head dim); falls back where not compiled.
        acc: MMA accumulation: ``"auto"`` (= ``"fp32"``), ``"fp32"``, ``"fp16"`` (both
            products in fp16) or ``"mixed"`` (Q@K^T fp32, P@V fp16); fp16/mixed need
            float16 inputs and run on the FFPA levels only (else the call falls back).
            Softmax statistics are fp32 in every mode.
        num_stages: pipeline stages, ``None`` = auto, else 1..4.
        q_descale, k_descale, v_descale: for ``torch.float8_e4m3fn`` query/key/value: the factor each
            tensor is dequantized by (None = 1.0, a positive float, a 0-d tensor, or a float32 tensor
            of the tensor's leading dims, e.g. ``(B, H)`` with its own head count);
            :func:`ffpa_attn.quantize_fp8` makes both from a bf16/fp16/fp32 tensor.
        out_dtype: the output dtype of an FP8 call, ``torch.bfloat16`` (default) or ``torch.float16``.
            FP8 calls run on the dequantized inputs for now (no FP8 kernel in this build; a one-time
            ``FFPAFallbackWarning``, or ``FFPAUnsupportedError`` with ``strict=True``); other float8
            kinds raise.

    Errors keep their class under ``torch.compile`` (also ``fullgraph=True``): while
    tracing, a validation or ``strict`` error becomes an op that raises it when the compiled code
    runs (``_compile.py``).

    Returns:
        ``out`` of shape ``(..., Hq, L, Ev)``, or ``(out, lse)`` with ``return_lse=True``.
    """
    descaled = q_descale is not None or k_descale is not None or v_descale is not None or out_dtype is not None
    compiling = torch.compiler.is_compiling()
    if _fastpath.CALL is not None and not descaled and not compiling:  # routed before: straight to the kernel (C++)
        out = _fastpath.CALL(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, causal_align,
                             return_lse, strict, level, acc, num_stages)
        if out is not None:
            return out
    args = (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, causal_align,
            return_lse, strict, level, acc, num_stages)
    if descaled or _fp8.is_fp8(query):  # FP8 calls are never remembered by the fast path
        return keep_error_classes(_forward_fp8, args + (q_descale, k_descale, v_descale, out_dtype), query, return_lse)
    if compiling:
        return keep_error_classes(_forward, args, query, return_lse)
    _fastpath.begin()
    out = keep_error_classes(_forward, args, query, return_lse)
    _fastpath.remember(args)
    return out


def _plain_args(is_causal, enable_gqa, return_lse, strict, dropout_p, scale, level, acc, num_stages, causal_align):
    """Checks of forward's arguments that are not tensors; returns dropout_p and scale as floats."""
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
    if type(causal_align) is not str or causal_align != "top_left":
        _check_choice("causal_align", causal_align, CAUSAL_ALIGNS, False, str)
    return dropout_p, scale


def _forward_fp8(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, causal_align, return_lse,
                 strict, level, acc, num_stages, q_descale, k_descale, v_descale, out_dtype):
    """An FP8 call (_fp8.py): validated, then run on the FP8 kernel where it takes the call; else
    dequantized and run as a call in out_dtype (a fallback: warned once, or raised under strict)."""
    dtype, qd, kd, vd = _fp8.check(query, key, value, q_descale, k_descale, v_descale, out_dtype)
    dropout_p, scale = _plain_args(is_causal, enable_gqa, return_lse, strict, dropout_p, scale, level, acc,
                                   num_stages, causal_align)
    why = _fp8.kernel_why_not(query, key, value, attn_mask, dropout_p, enable_gqa, is_causal)
    if not why and (level is not None or acc != "auto" or num_stages is not None):
        why = "level, acc and num_stages choose among the bf16/fp16 kernels"
    if not why:
        out, lse = _fp8.kernel_call(query, key, value, attn_mask, is_causal, scale, causal_align, dtype, qd, kd, vd)
        return (out, lse) if return_lse else out
    if not _fp8.sdpa_rejects(query, key, attn_mask, is_causal):  # else forward raises SDPA's error below
        _fallback_notice(_fp8.REASON.format(why=why, dtype=str(dtype).replace("torch.", "")), strict)
    q, k, v, v_factor = _fp8.dequantize(query, key, value, dtype, qd, kd, vd)
    res = forward(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, causal_align=causal_align,
                  return_lse=return_lse, strict=strict, level=level, acc=acc, num_stages=num_stages)
    if v_factor is None:
        return res
    out = res[0] if return_lse else res
    out = (out.to(torch.float32) * v_factor).to(dtype)
    return (out, res[1]) if return_lse else out


def _forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor],
    dropout_p: float,
    is_causal: bool,
    scale: Optional[float],
    enable_gqa: bool,
    causal_align: str,
    return_lse: bool,
    strict: bool,
    level: Optional[int],
    acc: str,
    num_stages: Optional[int],
) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    # ---- arguments that are not tensors
    dropout_p, scale = _plain_args(is_causal, enable_gqa, return_lse, strict, dropout_p, scale, level, acc,
                                   num_stages, causal_align)
    bottom_right = is_causal and causal_align == "bottom_right"
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
        if bottom_right:
            raise FFPAUnsupportedError(
                "ffpa_attn.forward(): causal_align='bottom_right' is not supported for nested "
                "tensors",
                "causal_align='bottom_right' with nested tensors",
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
    passed_mask = attn_mask
    attn_mask, dtype, out_shape = _validate(
        query, key, value, attn_mask, is_causal, enable_gqa, autocast
    )

    # ---- route
    reason = _kernel_reason(
        query, key, value, attn_mask, dropout_p, scale, dtype, level, acc
    )
    if reason is None:
        decode = _decode_route(query, key, value, attn_mask, is_causal, bottom_right, level, acc, num_stages)
        if attn_mask is passed_mask and not torch.compiler.is_compiling():
            _fastpath.decided(_fastpath.Route(dtype, out_shape, decode, bottom_right))
        return _run_kernel(
            query,
            key,
            value,
            attn_mask,
            scale,
            is_causal,
            bottom_right,
            level,
            acc,
            num_stages,
            dtype,
            out_shape,
            return_lse,
            decode,
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
        bottom_right,
    )


#: Same function object as :func:`forward`, under SDPA's name.
scaled_dot_product_attention = forward


# ========================================================================== patching
_previous_sdpa: list = []  # what patch_sdpa() replaced (at most one entry)
_restore_hf: list = []  # patch_sdpa()'s undo of the transformers SDPA backend's K/V-head decision


def is_sdpa_patched() -> bool:
    """True when ``torch.nn.functional.scaled_dot_product_attention`` is ffpa_attn.forward."""
    return F.scaled_dot_product_attention is forward


def patch_sdpa() -> None:
    """Route ``torch.nn.functional.scaled_dot_product_attention`` through ffpa_attn.forward.

    Idempotent.  Affects code that looks the function up on ``torch.nn.functional`` at
    call time (``F.scaled_dot_product_attention(...)``, nn.MultiheadAttention, ...), not
    references taken earlier with ``from torch.nn.functional import ...``.

    With transformers loaded, its SDPA backend also stops repeating grouped K/V heads for masked
    calls our kernels take (:func:`ffpa_attn._hf.keep_kv_heads_in_sdpa_backend`).
    """
    current = F.scaled_dot_product_attention
    if current is forward:
        return
    _previous_sdpa[:] = [current]
    F.scaled_dot_product_attention = forward
    restore = _hf.keep_kv_heads_in_sdpa_backend()
    _restore_hf[:] = [restore] if restore is not None else []


def unpatch_sdpa() -> None:
    """Undo :func:`patch_sdpa` (idempotent): restore what it replaced."""
    if F.scaled_dot_product_attention is forward:
        F.scaled_dot_product_attention = _previous_sdpa[0] if _previous_sdpa else _SDPA
    _previous_sdpa.clear()
    for restore in _restore_hf:
        restore()
    _restore_hf.clear()


@contextlib.contextmanager
def sdpa_patched() -> Iterator:
    """Context manager: SDPA routed through ffpa_attn.forward inside, previous state after (as
    :func:`patch_sdpa`, transformers' K/V-head decision included)."""
    previous = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = forward
    restore = _hf.keep_kv_heads_in_sdpa_backend()
    try:
        yield forward
    finally:
        F.scaled_dot_product_attention = previous
        if restore is not None:
            restore()
