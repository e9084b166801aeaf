"""``ffpa_attn.decode``: a few query rows against a KV cache, contiguous or paged, in the layout
serving frameworks use (flash-attn's ``flash_attn_with_kvcache``).

On a CUDA build with the decode family compiled for the dtype and head dims, the call runs the
split-KV decode kernel (csrc/include/ffpa/kernels/decode_sm80.cuh) straight on the cache: pages
read through the table, each sequence to its own length, GQA heads packed so each K/V byte is read
once, no host-device sync (CUDA-graph capturable). Elsewhere it runs ``forward`` on the cache with a
key-padding (and bottom-right causal) mask: a paged cache is gathered into a contiguous copy first,
and with ``cache_seqlens`` the keys and values past each length are zeroed in a copy (whatever
they hold, NaN included, cannot reach the output); on the GPU that path warns once. Shapes and
semantics:

* ``q`` ``(B, Lq, Hq, D)`` with ``1 <= Lq <= 32``; the cache ``(B, S, Hkv, D)`` / ``(B, S, Hkv, Dv)``,
  or with ``block_table`` ``(B, max_pages)`` int32 a page pool ``(num_pages, page_size, Hkv, D)``
  whose page ``block_table[b, p]`` holds keys ``p * page_size ..`` of sequence ``b``
  (``page_size`` a multiple of 16 in 16..256).
* ``cache_seqlens`` ``(B,)`` int32: sequence ``b`` has that many keys (default: the whole cache);
  ``0`` gives output 0 and LSE ``-inf``.
* ``causal``: bottom-right per sequence: query ``i`` sees keys ``j <= seqlen - Lq + i``; a query
  that sees no key gets output 0 and LSE ``-inf``.
* Returns ``out`` ``(B, Lq, Hq, Dv)`` in q's dtype (and ``lse`` ``(B, Hq, Lq)`` float32, natural log).

Values inside ``cache_seqlens`` / ``block_table`` are not checked (that would need a host-device
sync; the kernel clamps lengths to the cache): ``FFPA_DEBUG_CHECKS=1`` checks them (page indices
in range, lengths within the cache).
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from . import _decode_ops, _fastpath, _ops, _routing
from ._compile import keep_error_classes
from ._validate import _show
from .errors import FFPAFallbackWarning, FFPATypeError, FFPAValueError
from .interface import forward

__all__ = ["decode", "MAX_DECODE_QUERIES", "PAGE_SIZES"]

MAX_DECODE_QUERIES = _decode_ops.MAX_QUERIES
MAX_SPLITS = 256  # csrc/launch/heuristics.h kMaxDecodeSplits
PAGE_SIZES = tuple(range(16, 257, 16))


def _err(msg: str) -> str:
    return f"ffpa_attn.decode(): {msg}"


def _tensor(name: str, t: object, dims: int, shape_doc: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise FFPATypeError(_err(f"argument '{name}' must be a torch.Tensor {shape_doc}, got {type(t).__name__}"))
    if t.dim() != dims:
        raise FFPAValueError(_err(f"argument '{name}' must be {dims}-D {shape_doc}, got shape {tuple(t.shape)}"))
    return t


def _index_tensor(name: str, t: object, dims: int, shape_doc: str, device: torch.device) -> Tensor:
    t = _tensor(name, t, dims, shape_doc)
    if t.dtype != torch.int32:
        raise FFPATypeError(_err(f"argument '{name}' must be int32 {shape_doc}, got {t.dtype}"))
    if t.device != device:
        raise FFPAValueError(_err(f"argument '{name}' must be on q's device ({device}), got {t.device}"))
    return t


def _validate(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, return_lse, num_splits, strict):
    q = _tensor("q", q, 4, "(batch, Lq, heads_q, head_dim)")
    paged = block_table is not None
    cache_doc = "(num_pages, page_size, heads_kv, head_dim)" if paged else "(batch, S, heads_kv, head_dim)"
    k = _tensor("k_cache", k_cache, 4, cache_doc)
    v = _tensor("v_cache", v_cache, 4, cache_doc.replace("head_dim)", "head_dim_v)"))
    for name, b in (("causal", causal), ("return_lse", return_lse)):
        if type(b) is not bool:
            raise FFPATypeError(_err(f"argument '{name}' must be a bool, got {_show(b)}"))
    if scale is not None and type(scale) not in (float, int):
        raise FFPATypeError(_err(f"argument 'scale' must be a float or None, got {type(scale).__name__}"))
    if type(strict) is not bool:
        raise FFPATypeError(_err(f"argument 'strict' must be a bool, got {_show(strict)}"))
    if num_splits is not None and (type(num_splits) is not int or not 1 <= num_splits <= MAX_SPLITS):
        raise FFPAValueError(_err(f"argument 'num_splits' must be None (auto) or an int in 1..{MAX_SPLITS}, got "
                                  f"{_show(num_splits)}"))
    if not q.is_floating_point():
        raise FFPATypeError(_err(f"argument 'q' must be floating point, got {q.dtype}"))
    for name, t in (("k_cache", k), ("v_cache", v)):
        if t.dtype != q.dtype:
            raise FFPATypeError(_err(f"argument '{name}' must have q's dtype ({q.dtype}), got {t.dtype}"))
        if t.device != q.device:
            raise FFPAValueError(_err(f"argument '{name}' must be on q's device ({q.device}), got {t.device}"))
    B, Lq, Hq, D = q.shape
    if not 1 <= Lq <= MAX_DECODE_QUERIES:
        raise FFPAValueError(_err(
            f"q has Lq = {Lq} query rows; decode takes 1..{MAX_DECODE_QUERIES}. For longer chunks against "
            "a cache use ffpa_attn.forward(q, k, v, is_causal=True, causal_align='bottom_right') "
            "(SDPA layout: (batch, heads, L, head_dim))"))
    if k.shape[:3] != v.shape[:3]:
        raise FFPAValueError(_err(f"'k_cache' {tuple(k.shape)} and 'v_cache' {tuple(v.shape)} must agree in "
                                  f"every dim but the last"))
    Hkv = k.shape[2]
    if k.shape[3] != D:
        raise FFPAValueError(_err(f"'k_cache' head dim {k.shape[3]} must equal q's ({D})"))
    if Hkv < 1 or Hq % Hkv != 0:
        raise FFPAValueError(_err(f"q's heads ({Hq}) must be a multiple of the cache's heads ({Hkv})"))
    if paged:
        bt = _index_tensor("block_table", block_table, 2, "(batch, max_pages)", q.device)
        if bt.shape[0] != B:
            raise FFPAValueError(_err(f"'block_table' has {bt.shape[0]} rows, q has batch {B}"))
        page = k.shape[1]
        if page not in PAGE_SIZES:
            raise FFPAValueError(_err(f"page size {page} (dim 1 of 'k_cache') is not supported: a multiple of 16 "
                                      "in 16..256"))
        capacity = bt.shape[1] * page
    else:
        if k.shape[0] != B:
            raise FFPAValueError(_err(f"'k_cache' has batch {k.shape[0]}, q has {B} (pass block_table for a "
                                      "page pool)"))
        capacity = k.shape[1]
    if cache_seqlens is not None:
        sl = _index_tensor("cache_seqlens", cache_seqlens, 1, "(batch,)", q.device)
        if sl.shape[0] != B:
            raise FFPAValueError(_err(f"'cache_seqlens' has {sl.shape[0]} entries, q has batch {B}"))
    return capacity


def _debug_checks(k, cache_seqlens, block_table, capacity) -> None:
    """Values inside the index tensors (a host-device sync): only with FFPA_DEBUG_CHECKS=1."""
    if block_table is not None:
        lo, hi = int(block_table.min()), int(block_table.max())
        if lo < 0 or hi >= k.shape[0]:
            raise FFPAValueError(_err(f"'block_table' holds page indices {lo}..{hi}; the pool has "
                                      f"{k.shape[0]} pages (FFPA_DEBUG_CHECKS)"))
    if cache_seqlens is not None:
        lo, hi = int(cache_seqlens.min()), int(cache_seqlens.max())
        if lo < 0 or hi > capacity:
            raise FFPAValueError(_err(f"'cache_seqlens' holds {lo}..{hi}; the cache holds {capacity} keys "
                                      "per sequence (FFPA_DEBUG_CHECKS)"))


_DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16"}
_warned: set = set()


def kernel_reason(q: Tensor, k_cache: Tensor, v_cache: Tensor) -> Optional[str]:
    """Why the decode kernel cannot run this (validated) call, ``None`` when it can."""
    if not _decode_ops.available():
        return "the decode op is not in this build"
    env = _routing._environment_reason(q.device)
    if env is not None:
        return env
    if q.dtype not in _DTYPE_NAMES or _DTYPE_NAMES[q.dtype] not in _ops.built_dtypes():
        return f"dtype {q.dtype} is not compiled for the decode kernel"
    pair = (q.shape[-1], v_cache.shape[-1])
    if pair not in _decode_ops.decode_pairs():
        have = ", ".join(f"{e}/{ev}" if e != ev else str(e) for e, ev in sorted(_decode_ops.decode_pairs()))
        return f"head dims {pair[0]}/{pair[1]} are not compiled for the decode kernel (compiled: {have or 'none'})"
    if torch.is_grad_enabled() and (q.requires_grad or k_cache.requires_grad or v_cache.requires_grad):
        return "inputs require grad; the decode kernel is forward-only"
    return None


def _notice(reason: str) -> None:
    if torch.compiler.is_compiling() or reason in _warned:
        return
    _warned.add(reason)
    warnings.warn(f"ffpa_attn.decode(): {reason}; running the prefill path on the cache instead (slower; warned "
                  "once per reason)", FFPAFallbackWarning, stacklevel=4)


def _decode(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, return_lse, num_splits, strict):
    capacity = _validate(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, return_lse, num_splits, strict)
    if os.environ.get("FFPA_DEBUG_CHECKS", "0") not in ("", "0") and not torch.compiler.is_compiling():
        _debug_checks(k_cache, cache_seqlens, block_table, capacity)
    reason = kernel_reason(q, k_cache, v_cache) if q.numel() and k_cache.numel() else "empty input"
    if reason is None:
        sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        out, lse = _decode_ops.call(q, k_cache, v_cache, cache_seqlens, block_table, sc, causal,
                                    0 if num_splits is None else num_splits)
        if _fastpath.DECODE_REMEMBER is not None and not torch.compiler.is_compiling():
            _fastpath.DECODE_REMEMBER(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, return_lse,
                                      num_splits, strict)
        return (out, lse) if return_lse else out
    if q.is_cuda and _ops.extension_available() and reason != "empty input":
        _notice(reason)
    B, Lq = q.shape[0], q.shape[1]
    k, v = k_cache, v_cache
    if block_table is not None:  # gather the pages into a contiguous (B, capacity, Hkv, D) copy
        k = k[block_table.long()].flatten(1, 2)
        v = v[block_table.long()].flatten(1, 2)
    mask = None
    if cache_seqlens is not None or causal:
        j = torch.arange(capacity, device=q.device)
        lens = (torch.full((B,), capacity, device=q.device, dtype=torch.int64) if cache_seqlens is None
                else cache_seqlens.long())
        valid = j.view(1, -1) < lens.view(-1, 1)  # (B, S)
        # Keys past a sequence's length are never read by a decode kernel, so they may hold anything
        # (an empty-allocated cache: NaN); the masked prefill path multiplies them by 0, so zero them.
        zero = torch.zeros((), dtype=k.dtype, device=k.device)
        k = torch.where(valid.view(B, capacity, 1, 1), k, zero)
        v = torch.where(valid.view(B, capacity, 1, 1), v, zero)
        keep = valid.unsqueeze(1)  # (B, 1, S)
        if causal:  # bottom-right per sequence: query i sees keys j <= len - Lq + i
            i = torch.arange(Lq, device=q.device)
            keep = keep & (j.view(1, 1, -1) <= lens.view(-1, 1, 1) - Lq + i.view(1, -1, 1))
        mask = keep.unsqueeze(1)  # (B, 1, Lq or 1, S): broadcast over heads
    out, lse = forward(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask,
                       scale=None if scale is None else float(scale), enable_gqa=True, return_lse=True,
                       strict=strict)
    out = out.transpose(1, 2)
    return (out, lse) if return_lse else out


def decode(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    *,
    cache_seqlens: Optional[Tensor] = None,
    block_table: Optional[Tensor] = None,
    causal: bool = False,
    scale: Optional[float] = None,
    return_lse: bool = False,
    num_splits: Optional[int] = None,
    strict: bool = False,
) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Attention of ``Lq`` (1..32) new query rows against a KV cache; see the module doc.

    ``num_splits`` (None = auto, else 1..256) forces the split-KV factor of the decode kernel (how
    many key ranges of each sequence run in parallel blocks, merged by LSE); capped at one per 64 keys. ``strict=True`` raises instead of falling back to torch SDPA
    where our kernels cannot run the call. Bad arguments raise ``FFPATypeError`` / ``FFPAValueError``
    naming them, also under ``torch.compile(fullgraph=True)``.
    """
    if _fastpath.DECODE_CALL is not None and not torch.compiler.is_compiling():
        # A call whose metadata ran on the decode op before: validated, straight to the op (C++).
        out = _fastpath.DECODE_CALL(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, return_lse,
                                    num_splits, strict)
        if out is not None:
            return out
    args = (q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, return_lse, num_splits, strict)
    return keep_error_classes(_decode, args, q, return_lse)
