"""The decode op of the extension (``torch.ops.ffpa_attn.ffpa_decode``): its schema check, fake
kernel, the realigning op used under ``torch.compile`` and which head dims the build has for it.
No argument checks (``_decode`` does them) and no fallback.

Schema: ``ffpa_decode(q (B, Lq, Hq, D), k_cache, v_cache, cache_seqlens?, block_table?, attn_mask?,
scale, causal, num_splits) -> (out (B, Lq, Hq, Dv), lse (B, Hq, Lq) fp32)``; ``num_splits`` 0 = auto;
``attn_mask`` (forward's short-query route) in SDPA layout (B|1, Hq|1, Lq|1, S), bool or additive.
``out`` follows q's layout: a ``(B, Hq, Lq, D)``-backed ``q`` view (Lq > 1) gives a
``(B, Hq, Lq, Dv)``-backed ``out``.
"""
from __future__ import annotations

from typing import Any, FrozenSet, Optional, Tuple

import torch
from torch import Tensor

from . import _ops, _spec

__all__ = ["available", "decode_pairs", "ffpa_decode", "ffpa_decode_realigned", "FAMILY", "MAX_QUERIES"]

FAMILY = "decode"
MAX_QUERIES = _spec.DECODE_MAX_QUERIES  # query rows the op takes (the C++ op reads the same constant)
_QUALNAME = "ffpa_attn::ffpa_decode"


_OP = _ops.lookup_secondary_op("ffpa_decode", "decode runs on the prefill kernels")


def available() -> bool:
    """True when the extension registers the decode op this layer calls."""
    return _OP is not None


def decode_pairs() -> FrozenSet[Tuple[int, int]]:
    """(D, Dv) pairs the decode family is compiled for (empty without the extension)."""
    return _ops.head_dim_pairs(FAMILY) if _OP is not None else frozenset()


def _out_strides(q: Tensor, dv: Any) -> Tuple[Any, Any, Any, Any]:
    b, lq, h, _ = q.shape
    if lq > 1 and q.stride(2) > q.stride(1):  # (B, Hq, Lq, D) memory in, (B, Hq, Lq, Dv) out
        return (h * lq * dv, dv, lq * dv, 1)
    return (lq * h * dv, h * dv, dv, 1)


def _fake(q: Tensor, k_cache: Tensor, v_cache: Tensor, cache_seqlens: Optional[Tensor],
          block_table: Optional[Tensor], attn_mask: Optional[Tensor], scale: float, causal: bool,
          num_splits: int) -> Tuple[Tensor, Tensor]:
    torch._check(q.dim() == 4, lambda: f"ffpa_decode: q must be 4-D, got {q.dim()}-D")
    torch._check(v_cache.dim() == 4, lambda: f"ffpa_decode: v_cache must be 4-D, got {v_cache.dim()}-D")
    b, lq, h, _ = q.shape
    dv = v_cache.shape[-1]
    out = torch.empty_strided((b, lq, h, dv), _out_strides(q, dv), dtype=q.dtype, device=q.device)
    return out, q.new_empty((b, h, lq), dtype=torch.float32)


if _OP is not None:
    _ops.register_fake_once(_QUALNAME, _fake)


def ffpa_decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, cache_seqlens: Optional[Tensor],
                block_table: Optional[Tensor], attn_mask: Optional[Tensor], scale: float, causal: bool,
                num_splits: int) -> Tuple[Tensor, Tensor]:
    """Thin wrapper of ``torch.ops.ffpa_attn.ffpa_decode`` (no checks, no fallback)."""
    if _OP is None:
        raise RuntimeError(f"torch.ops.ffpa_attn.ffpa_decode is not available: {_ops.import_error()}")
    # The overload itself: the packet would resolve it on every call (host time per decode step).
    return _OP.default(q, k_cache, v_cache, cache_seqlens, block_table, attn_mask, scale, causal, num_splits)


def _realigned_impl(q: Tensor, k_cache: Tensor, v_cache: Tensor, cache_seqlens: Optional[Tensor],
                    block_table: Optional[Tensor], attn_mask: Optional[Tensor], scale: float, causal: bool,
                    num_splits: int) -> Tuple[Tensor, Tensor]:
    expected = _out_strides(q, v_cache.shape[-1])
    out, lse = ffpa_decode(_ops.realign(q), _ops.realign(k_cache), _ops.realign(v_cache), cache_seqlens,
                           block_table, attn_mask, scale, causal, num_splits)
    return _ops.with_strides(out, expected), lse  # a copy changed q's layout: keep the fake's


# Under torch.compile the data pointers are known only at run time: an opaque op (same fake) that
# realigns its inputs before the call.
ffpa_decode_realigned = torch.library.custom_op(
    "ffpa_attn::ffpa_decode_realigned",
    _realigned_impl,
    mutates_args=(),
    schema=_spec.op_signature("ffpa_decode"),
)
ffpa_decode_realigned.register_fake(_fake)


def call(q: Tensor, k_cache: Tensor, v_cache: Tensor, cache_seqlens: Optional[Tensor],
         block_table: Optional[Tensor], scale: float, causal: bool, num_splits: int,
         attn_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """The op on kernel-friendly inputs: eagerly realigned here, under compile by the opaque op."""
    if torch.compiler.is_compiling():
        q, k_cache, v_cache = (t if _ops.strides_ok(t) else t.clone(memory_format=torch.contiguous_format)
                               for t in (q, k_cache, v_cache))
        return ffpa_decode_realigned(q, k_cache, v_cache, cache_seqlens, block_table, attn_mask, scale, causal,
                                     num_splits)
    return ffpa_decode(_ops.realign(q), _ops.realign(k_cache), _ops.realign(v_cache), cache_seqlens, block_table,
                       attn_mask, scale, causal, num_splits)
