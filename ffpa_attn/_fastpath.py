"""Eager fast paths of ``ffpa_attn.forward`` and ``ffpa_attn.decode``: a call whose metadata matches
one already validated and routed to our kernels (same shapes, strides, dtypes, devices, flags, grad
mode and autocast state; for forward without a mask or causal alignment, any key length of
contiguous keys and values, so a growing KV cache keeps it) skips validation and routing, which
cost more host time than the kernel launch on a decode step.

The tables and the calls live in C++ (``csrc/ops/fastpath.cpp``: ``_C.fast_call`` keys the call on the
tensors' metadata and runs the op through the dispatcher, ``_C.fast_remember`` stores a route; the
``decode_`` twins for ``decode``); this module holds the per-thread bookkeeping of what forward's full
path decided. Only calls with the arguments' canonical types are keyed (tensors of type
``torch.Tensor``, bool flags as ``bool``, ...): a flag passed as ``1`` still goes through validation,
which rejects it. Only kernel-routed calls whose mask validation left the mask as passed are
remembered; fallbacks (and their one-time warnings) always take the full path. The tables are bounded
and cleared by :func:`clear`. Without the extension there is no fast path (and no kernel to route to).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, NamedTuple, Optional, Tuple

import torch

from . import _ops


class Route(NamedTuple):
    """What the full path decided for a call: the kernels' dtype, SDPA's output shape, whether it
    runs on the decode op, and the causal alignment flag it passed."""
    dtype: torch.dtype
    out_shape: Tuple
    decode: bool
    bottom_right: bool


#: ``_C.fast_call(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, causal_align,
#: return_lse, strict, level, acc, num_stages)``: forward's result for a remembered call, else None.
CALL: Optional[Callable[..., Any]] = getattr(_ops._C, "fast_call", None)
_REMEMBER: Optional[Callable[..., Any]] = getattr(_ops._C, "fast_remember", None)
#: ``decode()``'s twins (ffpa_attn/_decode.py): ``_C.decode_fast_call(q, k_cache, v_cache, cache_seqlens,
#: block_table, causal, scale, return_lse, num_splits, strict)``: the result for a call whose metadata ran
#: on the decode op before (not with FFPA_DEBUG_CHECKS set), else None; ``DECODE_REMEMBER`` (same
#: arguments) after the Python path ran one there.
DECODE_CALL: Optional[Callable[..., Any]] = getattr(_ops._C, "decode_fast_call", None)
DECODE_REMEMBER: Optional[Callable[..., Any]] = getattr(_ops._C, "decode_fast_remember", None)
_local = threading.local()  # .route: what the last full-path call on this thread decided


def clear() -> None:
    """Forget every remembered call (tests that swap the build or the device facts call this)."""
    if _ops._C is not None and hasattr(_ops._C, "fast_clear"):
        _ops._C.fast_clear()


def size() -> int:
    """How many calls are remembered."""
    return _ops._C.fast_size() if _ops._C is not None and hasattr(_ops._C, "fast_size") else 0


def begin() -> None:
    """Before a full-path call: nothing decided yet on this thread."""
    _local.route = None


def decided(route: Route) -> None:
    """The full path routed the call to our kernels (with the mask as passed)."""
    _local.route = route


def remember(args: tuple) -> None:
    """After a full-path call with forward's arguments ``args``: remember what it decided, if it ran
    our kernels (the C++ side keys the call, or ignores it when it takes no key)."""
    route = getattr(_local, "route", None)
    _local.route = None
    if route is None or _REMEMBER is None:
        return
    _REMEMBER(*args, route.dtype == torch.float16, tuple(route.out_shape), route.decode, route.bottom_right)
