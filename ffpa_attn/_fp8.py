"""FP8 (e4m3) inputs of ``ffpa_attn.forward`` and ``quantize_fp8``.

``forward(q, k, v, ..., q_descale=None, k_descale=None, v_descale=None, out_dtype=None)`` takes
``torch.float8_e4m3fn`` query, key and value: the attention of the dequantized tensors
``x.float() * x_descale`` (per tensor, or per (batch, head) of that tensor), returned in ``out_dtype``
(bfloat16 by default, or float16). Each descale is None (1.0), a positive float, a 0-d tensor, or a
float32 tensor of the tensor's leading dims (``(B, H)`` for a 4-D tensor, with that tensor's own head
count: ``(B, Hkv)`` for key and value under GQA).

On Hopper (compute capability 9.0, an sm_90a build) the FP8 kernels run the call (wgmma e4m3, fp32
accumulation: ``kernels/fa2_fwd_sm90_fp8.cuh`` at D = 64, 128 and 256, FFPA's ``kernels/ffpa_fwd_sm90_fp8.cuh``
at 512) where they take it: 4-D ``(B, H, L, D)`` inputs with D = 64, 128, 256 or 512 (key and value the
same), bool or additive ``attn_mask`` or causal in either
alignment, GQA, any lengths, rows 16-byte aligned, no dropout. Elsewhere the call runs on the inputs dequantized to
``out_dtype`` -- our bf16/fp16 kernels where they take the call, else SDPA -- with a one-time
``FFPAFallbackWarning``; ``strict=True`` raises ``FFPAUnsupportedError`` instead. Other FP8 kinds (e5m2,
the fnuz variants) are a ``FFPATypeError`` naming what is supported.

``quantize_fp8(x)`` -> ``(x_fp8, descale)``: per (batch, head) amax scaling of a tensor ``(..., H, L, D)``
into e4m3's range, so ``forward(*quantize_fp8(q)...)`` is one line from bf16.
Plain tensor code (no data-dependent checks), so it traces under ``torch.compile``.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple, Union

import torch
from torch import Tensor

from ._validate import _FP8_DTYPES, _err_prefix, _tname
from .errors import FFPATypeError, FFPAValueError

__all__ = ["quantize_fp8", "E4M3", "E4M3_MAX"]

E4M3 = torch.float8_e4m3fn
E4M3_MAX = float(torch.finfo(E4M3).max)  # 448
_OUT_DTYPES = (torch.bfloat16, torch.float16)
#: Why an FP8 call does not run on the FP8 kernel (the fallback's reason, warned once).
REASON = ("FP8 (float8_e4m3fn) inputs: the FP8 kernel does not take this call ({why}); running on the inputs "
          "dequantized to {dtype}")


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
    return d


def _bcast(d: Union[None, float, Tensor]) -> Union[None, float, Tensor]:
    """A checked descale against its tensor: a (B, H) one gets the (L, D) dims back."""
    return d.unsqueeze(-1).unsqueeze(-1) if isinstance(d, Tensor) and d.dim() > 0 else d


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
          out_dtype: Any) -> Tuple[torch.dtype, Any, Any, Any]:
    """Validate an FP8 call; return the output dtype and the descales (None, a float, a 0-d tensor or
    one of their tensor's leading dims)."""
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
    return dtype, qd, kd, vd


def dequantize(query: Tensor, key: Tensor, value: Tensor, dtype: torch.dtype, qd: Any, kd: Any,
               vd: Any) -> Tuple[Tensor, Tensor, Tensor, Union[None, float, Tensor]]:
    """Query, key and value in the output dtype and the factor the output is multiplied by (the
    fallback). e4m3 values are exact in bf16 and fp16, so key and value are cast as they are; query
    carries the query and key descales, the output the value descale (as the FP8 kernel's scale and
    epilogue do)."""
    qd, kd, vd = _bcast(qd), _bcast(kd), _bcast(vd)
    heads_q = query.shape[-3] if query.dim() >= 3 else 1
    heads_kv = key.shape[-3] if key.dim() >= 3 else 1
    qk = _times(qd, _to_query_heads(kd, heads_kv, heads_q))
    q = query.to(dtype) if qk is None else (query.to(torch.float32) * qk).to(dtype)
    return q, key.to(dtype), value.to(dtype), _to_query_heads(vd, heads_kv, heads_q)


def _aligned(t: Tensor) -> bool:
    """Rows of a contiguous last dim, 16-byte strides and base (what the kernel's TMA loads take)."""
    return (t.stride(-1) == 1 and all(t.stride(d) % 16 == 0 or t.shape[d] <= 1 for d in range(3))
            and t.data_ptr() % 16 == 0)


def _descale_2d(d: Any) -> Tuple[float, Optional[Tensor]]:
    """A checked descale as the op takes it: (a float factor, a 2-D tensor or None)."""
    if d is None:
        return 1.0, None
    if not isinstance(d, Tensor):
        return float(d), None
    return 1.0, d.reshape(1, 1) if d.dim() == 0 else d


def sdpa_rejects(query: Tensor, key: Tensor, attn_mask: Any, is_causal: bool) -> bool:
    """A mask SDPA raises for (with is_causal, on another device, not broadcasting to the scores): the
    call goes to the dequantized path, whose validation raises SDPA's error (no fallback notice)."""
    if attn_mask is None:
        return False
    if not isinstance(attn_mask, Tensor) or is_causal or attn_mask.device != query.device or attn_mask.dim() > 4:
        return True
    if query.dim() == 4 and key.dim() >= 2:
        full = (query.shape[0], query.shape[1], query.shape[2], key.shape[-2])
        try:
            return tuple(torch.broadcast_shapes(tuple(attn_mask.shape), full)) != full
        except RuntimeError:
            return True
    return False


def kernel_why_not(query: Tensor, key: Tensor, value: Tensor, attn_mask: Any, dropout_p: float, enable_gqa: bool,
                   is_causal: bool = False) -> str:
    """Why the FP8 kernel cannot take this call ("" when it can). Calls SDPA rejects (a mask with
    is_causal, a mask that does not broadcast) are not taken either: the fallback raises SDPA's error."""
    from . import _fp8_ops, _routing
    if not _fp8_ops.available():
        return "no FP8 kernel in this build"
    if not _fp8_ops.runs_on(query.device):
        return "the FP8 kernel needs a compute capability 9.0 GPU (Hopper)"
    if attn_mask is not None:
        if sdpa_rejects(query, key, attn_mask, is_causal):
            return "this attn_mask"
        why = _routing._mask_reason(attn_mask, tuple(query.shape))
        if why is not None:
            return why
    if dropout_p != 0.0:
        return "dropout"
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        return "inputs other than 4-D (B, H, L, D)"
    b, hq, length, d = query.shape
    bk, hkv, s, dk = key.shape
    if bk != b or dk != d or tuple(value.shape) != (b, hkv, s, d):
        return "shapes the FP8 kernel does not take (key and value must share (B, Hkv, S) and the head dim of query)"
    if (d, d) not in _fp8_ops.pairs():
        return f"head dim {d} (the FP8 kernel has {sorted(p[0] for p in _fp8_ops.pairs())})"
    if hq != hkv and not (enable_gqa and hkv > 0 and hq % hkv == 0):
        return "query and key/value head counts differ without enable_gqa"
    if length == 0 or s == 0 or b == 0:
        return "empty inputs"
    if key.device != query.device or value.device != query.device:
        return "inputs on different devices"
    if not torch.compiler.is_compiling() and not all(_aligned(t) for t in (query, key, value)):
        return "strides or a base the kernel's TMA loads cannot take (16-byte aligned rows)"
    return ""


def kernel_call(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor], is_causal: bool,
                scale: Optional[float], causal_align: str, dtype: torch.dtype, qd: Any, kd: Any,
                vd: Any) -> Tuple[Tensor, Tensor]:
    """The FP8 kernel on a call kernel_why_not() accepted: (out, lse)."""
    from . import _fp8_ops
    from ._masks import mask_as_4d
    qs, qt = _descale_2d(qd)
    ks, kt = _descale_2d(kd)
    vs, vt = _descale_2d(vd)
    sc = (1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)) * qs * ks
    m4 = None if attn_mask is None else mask_as_4d(attn_mask, query.shape)
    return _fp8_ops.ffpa_fp8_fwd(query, key, value, qt, kt, vt, m4, sc, vs, bool(is_causal),
                                 causal_align == "bottom_right", dtype == torch.float16)


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
