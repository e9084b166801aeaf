"""Masks for ``ffpa_attn.forward``: the causal keep-patterns (top-left as SDPA, bottom-right as
flash-attn's KV-cache convention) and the 4-D view of a validated ``attn_mask`` that the
kernel op takes. Plain tensor views, so it traces under ``torch.compile(fullgraph=True)``.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

# Values of forward()'s ``causal_align``.
CAUSAL_ALIGNS = ("top_left", "bottom_right")


def causal_keep(L: int, S: int, bottom_right: bool, device: torch.device) -> Tensor:
    """(L, S) bool, True where query i may see key j.

    top-left (SDPA's ``is_causal``): j <= i.  bottom-right: j <= i + S - L, i.e. the last
    query sees every key; with L > S the first L - S queries see none (their output is 0 and
    their lse -inf, as for any fully masked row).
    """
    return torch.ones((L, S), dtype=torch.bool, device=device).tril(
        diagonal=S - L if bottom_right else 0
    )


def _padded(mask: Tensor, n: int) -> Tensor:
    """``mask`` with leading broadcast dims up to ``n`` dims (a view)."""
    if mask.dim() >= n:
        return mask
    return mask.reshape((1,) * (n - mask.dim()) + tuple(mask.shape))


def _broadcast_dim(mask: Tensor, d: int) -> bool:
    # size 1, or expanded (stride 0): every index holds the same values
    return mask.shape[d] == 1 or mask.stride(d) == 0


def mask_slices(mask: Tensor, q_shape: Sequence[int]) -> int:
    """How many (batch, head) slices ``mask_as_4d(mask, q_shape)`` has (its dims 0 x 1; the
    kernel's mask block map holds one per slice).  Shape and strides only, no tensor work."""
    nd = len(q_shape)
    m = _padded(mask, max(nd, 4))
    heads = 1 if _broadcast_dim(m, m.dim() - 3) else m.shape[-3]
    if all(_broadcast_dim(m, d) for d in range(m.dim() - 3)):
        return heads
    batch = 1
    for d in q_shape[:-3]:
        batch *= d
    return batch * heads


def mask_as_4d(mask: Tensor, q_shape: Sequence[int]) -> Tensor:
    """The kernel's view of a mask broadcastable to the scores ``q_shape[:-1] + (S,)``.

    ``q_shape`` is the user's query shape (>= 2-D); the query goes to the kernel flattened
    to (Bflat, Hq, L, E) (``interface._as_4d``) and the mask follows it: the result is 4-D,
    each dim either 1 (broadcast) or the full size (Bflat, Hq, L, S).  Dims expanded with
    stride 0 come back as size 1 (same values; the kernel's block map then covers one slice
    instead of every copy).  A view of ``mask`` except when more than one batch dim must be
    flattened and only some of them broadcast: then the batch broadcast alone is materialized.
    """
    nd = len(q_shape)
    mask = _padded(mask, max(nd, 4))
    for d in range(mask.dim()):
        if mask.shape[d] != 1 and mask.stride(d) == 0:
            mask = mask.narrow(d, 0, 1)
    if nd <= 4:
        return mask
    lead, tail = tuple(mask.shape[:-3]), tuple(mask.shape[-3:])
    if all(d == 1 for d in lead):
        return mask.reshape((1,) + tail)
    # (b1, ..., bn) -> Bflat: a view when the batch dims merge (e.g. a contiguous mask),
    # else reshape copies the (expanded) batch dims only; heads/L/S keep their broadcast.
    return mask.expand(tuple(q_shape[:-3]) + tail).reshape((-1,) + tail)
