"""Eager fast path of ``ffpa_attn.forward``: a call whose metadata matches one already validated and
routed to our kernels (same shapes, strides, dtypes, devices, flags, grad mode and autocast state;
without a mask or causal alignment, any key length of contiguous keys and values, so a growing KV
cache keeps it) skips validation and routing, which cost more host time than the kernel launch on a
decode step.

Only calls with the arguments' canonical types take it (tensors of type ``torch.Tensor``, bool
flags as ``bool``, ...): a flag passed as ``1`` still goes through validation, which rejects it.
Only kernel-routed calls whose mask validation left the mask as passed are remembered; fallbacks
(and their one-time warnings) always take the full path. Per-thread bookkeeping of what the full
path decided; the cache is bounded and cleared by :func:`clear`.
"""
from __future__ import annotations

import threading
from typing import Any, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from ._validate import _autocast_dtype

_MAX_ENTRIES = 512


class Route(NamedTuple):
    """What the full path decided for a call: the kernels' dtype, SDPA's output shape, whether it
    runs on the decode op, and the causal alignment flag it passed."""
    dtype: torch.dtype
    out_shape: Tuple
    decode: bool
    bottom_right: bool


_cache: dict = {}
_local = threading.local()  # .route: what the last full-path call on this thread decided


def clear() -> None:
    """Forget every remembered call (tests that swap the build or the device facts call this)."""
    _cache.clear()


def key_of(query: Any, key: Any, value: Any, attn_mask: Any, dropout_p: Any, is_causal: Any, scale: Any,
           enable_gqa: Any, causal_align: Any, return_lse: Any, strict: Any, level: Any, acc: Any,
           num_stages: Any) -> Optional[tuple]:
    """The call's metadata as a dict key, or None when the call must take the full path."""
    if type(query) is not Tensor or type(key) is not Tensor or type(value) is not Tensor:
        return None
    if attn_mask is not None and type(attn_mask) is not Tensor:
        return None
    if (type(is_causal) is not bool or type(enable_gqa) is not bool or type(return_lse) is not bool
            or type(strict) is not bool or type(dropout_p) is not float or type(causal_align) is not str
            or type(acc) is not str or (scale is not None and type(scale) is not float)
            or (level is not None and type(level) is not int) or (num_stages is not None and type(num_stages) is not int)):
        return None
    if query.is_nested or key.is_nested or value.is_nested:
        return None
    grad = torch.is_grad_enabled()
    needs_grad = grad and (query.requires_grad or key.requires_grad or value.requires_grad)
    device = query.device
    mask = None
    if attn_mask is not None:
        mask = (attn_mask.shape, attn_mask.stride(), attn_mask.dtype, attn_mask.device)
        needs_grad = needs_grad or (grad and attn_mask.requires_grad)
    kv = _kv_signature(key, value, attn_mask, is_causal)
    return (query.shape, query.stride(), query.dtype, device, kv, key.dtype, key.device, value.dtype, value.device,
            mask, dropout_p, is_causal, scale, enable_gqa, causal_align, return_lse, strict, level, acc, num_stages,
            needs_grad, _autocast_dtype(device.type))


def _kv_signature(key: Tensor, value: Tensor, attn_mask: Any, is_causal: bool) -> tuple:
    """key's and value's part of the call key. Without a mask and without causal alignment the key
    length S changes nothing the full path decides as long as S >= 1, key and value agree on it and
    their layout stays contiguous (validation and routing read S only there): the signature then
    leaves S out, so a KV cache that grows by a row per decode step (a new S, new strides) keeps the
    fast path. Otherwise the exact shapes and strides."""
    if (attn_mask is None and not is_causal and key.dim() >= 2 and key.dim() == value.dim()
            and key.shape[-2] >= 1 and key.shape[-2] == value.shape[-2]
            and key.is_contiguous() and value.is_contiguous()):
        return ("any S", key.shape[:-2], key.shape[-1], value.shape[:-2], value.shape[-1])
    return (key.shape, key.stride(), value.shape, value.stride())


def lookup(call_key: tuple) -> Optional[Route]:
    return _cache.get(call_key)


def begin() -> None:
    """Before a full-path call: nothing decided yet on this thread."""
    _local.route = None


def decided(route: Route) -> None:
    """The full path routed the call to our kernels (with the mask as passed)."""
    _local.route = route


def remember(call_key: tuple) -> None:
    """After a full-path call: remember what it decided, if it ran our kernels."""
    route = getattr(_local, "route", None)
    _local.route = None
    if route is None:
        return
    if len(_cache) >= _MAX_ENTRIES:
        _cache.clear()
    _cache[call_key] = route
