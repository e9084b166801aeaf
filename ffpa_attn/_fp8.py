"""FP8 (e4m3) inputs of ``ffpa_attn.forward`` and ``quantize_fp8``.

``forward(q, k, v, ..., q_descale=None, k_descale=None, v_descale=None, out_dtype=None)`` takes
``torch.float8_e4m3fn`` query, key and value: the attention of the dequantized tensors
``x.float() * x_descale`` (per tensor, or per (batch, head) of that tensor), returned in ``out_dtype``
(bfloat16 by default, or float16). Each descale is None (1.0), a positive float, a 0-d tensor, or a
float32 tensor of the tensor's leading dims (``(B, H)`` for a 4-D tensor, with that tensor's own head
count: ``(B, Hkv)`` for key and value under GQA).

This build has no FP8 kernel yet (issue #17: ``wgmma`` e4m3 on Hopper): the call runs on the inputs
dequantized to ``out_dtype`` -- our bf16/fp16 kernels where they take the call, else SDPA -- with a
one-time ``FFPAFallbackWarning``; ``strict=True`` raises ``FFPAUnsupportedError`` instead. Other FP8
kinds (e5m2, the fnuz variants) are a ``FFPATypeError`` naming what is supported.

``quantize_fp8(x)`` -> ``(x_fp8, descale)``: per (batch, head) amax scaling of a tensor ``(..., H, L, D)``
into e4m3's range, so ``forward(*quantize_fp8(q)...)`` is one line from bf16.
Plain tensor code (no data-dependent checks), so it traces under ``torch.compile``.
"""
from __future__ import annotations

import math
from typing import Any, Tuple, Union

import torch
from torch import Tensor

from ._validate import _FP8_DTYPES, _err_prefix, _tname
from .errors import FFPATypeError, FFPAValueError

__all__ = ["quantize_fp8", "E4M3", "E4M3_MAX"]

E4M3 = torch.float8_e4m3fn
E4M3_MAX = float(torch.finfo(E4M3).max)  # 448
_OUT_DTYPES = (torch.bfloat16, torch.float16)
#: Why an FP8 call does not run on an FP8 kernel (the fallback's reason, warned once).
REASON = "FP8 (float8_e4m3fn) inputs: no FP8 kernel in this build yet; running on the inputs dequantized to {dtype}"


def is_fp8(t: Any) -> bool:
    return isinstance(t, Tensor) and t.dtype in _FP8_DTYPES


def _descale(name: str, d: Any, t: Tensor, tname: str) -> Union[None, float, Tensor]:
    """Check descale `d` of tensor `t` (argument `tname`); None, a float or a tensor that broadcasts
    against t's leading dims."""
    p = _err_prefix()
    if d is None:
        return None
    lead = tuple(t.shape[:-2])
    if isinstance(d, bool) or not isinstance(d, (int, float, Tensor)):
        raise FFPATypeError(f"{p}argument '{name}' must be None, a float, a 0-d tensor or a float32 tensor of shape "
                            f"{lead} (the leading dims of '{tname}'), got {_tname(d)}")
    if not isinstance(d, Tensor):
        x = float(d)
        if not (math.isfinite(x) and x > 0.0):
            raise FFPAValueError(f"{p}argument '{name}' must be a positive finite number, got {d!r}")
        return x
    if d.dtype != torch.float32:
        raise FFPATypeError(f"{p}argument '{name}' must be a float32 tensor, got dtype {d.dtype}")
    if d.device != t.device:
        raise FFPAValueError(f"{p}argument '{name}' must be on the device of '{tname}' ({t.device}), got {d.device}")
    if d.dim() == 0:
        return d
    if tuple(d.shape) != lead:
        raise FFPAValueError(f"{p}argument '{name}' must be a 0-d tensor or have shape {lead} (the leading dims of "
                             f"'{tname}' {tuple(t.shape)}: batch and heads), got shape {tuple(d.shape)}")
    return d.unsqueeze(-1).unsqueeze(-1)


def _to_query_heads(d: Union[None, float, Tensor], heads: int, heads_q: int) -> Union[None, float, Tensor]:
    """A key/value descale (its tensor's leading dims, unsqueezed twice) for the query heads it serves (GQA)."""
    if isinstance(d, Tensor) and d.dim() >= 3 and heads != heads_q and d.shape[-3] == heads:
        return d.repeat_interleave(heads_q // heads, dim=-3)
    return d


def _times(d1: Union[None, float, Tensor], d2: Union[None, float, Tensor]) -> Union[None, float, Tensor]:
    if d1 is None:
        return d2
    return d1 if d2 is None else d1 * d2


def check(query: Any, key: Any, value: Any, q_descale: Any, k_descale: Any, v_descale: Any,
          out_dtype: Any) -> Tuple[Tensor, Tensor, Tensor, torch.dtype, Union[None, float, Tensor]]:
    """Validate an FP8 call; return query, key and value in the output dtype and the factor the
    output is multiplied by. e4m3 values are exact in bf16 and fp16, so key and value are cast as they
    are; query carries the query and key descales (the FP8 kernel will fold them into the softmax
    scale), the output the value descale (as the kernel's epilogue will)."""
    p = _err_prefix()
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise FFPATypeError(f"{p}argument '{name}' must be a torch.Tensor, got {_tname(t)}")
    if query.dtype not in _FP8_DTYPES:
        raise FFPATypeError(f"{p}q_descale, k_descale, v_descale and out_dtype apply to torch.float8_e4m3fn inputs; "
                            f"got query of dtype {query.dtype}")
    if query.dtype != E4M3:
        raise FFPATypeError(f"{p}argument 'query' has dtype {query.dtype}: the FP8 path takes torch.float8_e4m3fn "
                            "inputs only (ffpa_attn.quantize_fp8 makes them from bf16/fp16/fp32 tensors)")
    for name, t in (("key", key), ("value", value)):
        if t.dtype != query.dtype:
            raise FFPATypeError(f"{p}argument '{name}' must have the dtype of query ({query.dtype}), got {t.dtype}")
        if t.dim() < 2:
            raise FFPAValueError(f"{p}argument '{name}' must have at least 2 dimensions, got shape {tuple(t.shape)}")
    if query.dim() < 2:
        raise FFPAValueError(f"{p}argument 'query' must have at least 2 dimensions, got shape {tuple(query.shape)}")
    if out_dtype is not None and out_dtype not in _OUT_DTYPES:
        raise FFPATypeError(f"{p}argument 'out_dtype' must be None (bfloat16), torch.bfloat16 or torch.float16, "
                            f"got {out_dtype!r}")
    dtype = torch.bfloat16 if out_dtype is None else out_dtype
    qd, kd, vd = (_descale(n, d, t, tn) for n, d, t, tn in (("q_descale", q_descale, query, "query"),
                                                            ("k_descale", k_descale, key, "key"),
                                                            ("v_descale", v_descale, value, "value")))
    heads_q = query.shape[-3] if query.dim() >= 3 else 1
    heads_kv = key.shape[-3] if key.dim() >= 3 else 1
    qk = _times(qd, _to_query_heads(kd, heads_kv, heads_q))
    q = query.to(dtype) if qk is None else (query.to(torch.float32) * qk).to(dtype)
    return q, key.to(dtype), value.to(dtype), dtype, _to_query_heads(vd, heads_kv, heads_q)


def quantize_fp8(x: Tensor) -> Tuple[Tensor, Tensor]:
    """``(x_fp8, descale)``: ``x`` (``(..., H, L, D)``, floating point, finite) scaled per (batch, head)
    into e4m3's range and cast to ``torch.float8_e4m3fn``, with ``descale`` (float32, shape
    ``x.shape[:-2]``) such that ``x ~= x_fp8.float() * descale[..., None, None]``; an all-zero slice gets
    descale 1. Pass ``descale`` as forward's ``q_descale`` / ``k_descale`` / ``v_descale``."""
    p = "ffpa_attn.quantize_fp8(): "
    if not isinstance(x, Tensor):
        raise FFPATypeError(f"{p}argument 'x' must be a torch.Tensor, got {_tname(x)}")
    if not x.is_floating_point() or x.dtype in _FP8_DTYPES:
        raise FFPATypeError(f"{p}argument 'x' must be a float16, bfloat16, float32 or float64 tensor, got {x.dtype}")
    if x.dim() < 2:
        raise FFPAValueError(f"{p}argument 'x' must have at least 2 dimensions (..., L, D), got shape {tuple(x.shape)}")
    xf = x.detach().to(torch.float32)
    amax = xf.abs().amax(dim=(-2, -1))
    descale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    q = (xf / descale.unsqueeze(-1).unsqueeze(-1)).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
    return q, descale
