"""``ffpa_attn.merge_states``: attention over a key set from partial results over disjoint parts of it.

For chunks i with outputs ``O_i`` (softmax over chunk i's keys, times V) and log-sum-exps
``lse_i`` (natural log) of the same query rows::

    lse = log(sum_i exp(lse_i))          O = sum_i exp(lse_i - lse) * O_i

which is attention over the union of the chunks' keys. A chunk whose ``lse_i`` is ``-inf`` (no key
of it visible to the row) contributes nothing, whatever its output holds; a row that sees no key in
any chunk gets ``O = 0`` and ``lse = -inf``, as ``forward`` returns for it. The split-KV decode
path merges its partials this way; callers use it for context parallelism or a KV cache kept in
pieces. Plain torch operations (computed in float32): runs on any device, traces under
``torch.compile(fullgraph=True)``, captures in CUDA graphs.
"""

from __future__ import annotations

from typing import Sequence, Tuple, Union

import torch
from torch import Tensor

from ._compile import keep_error_classes
from .errors import FFPATypeError, FFPAValueError

__all__ = ["merge_states"]

_OUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _first_tensor(items: object) -> object:
    if isinstance(items, (list, tuple)):
        return next((t for t in items if isinstance(t, Tensor)), None)
    return items


def _as_stack(name: str, items: Union[Tensor, Sequence[Tensor]]) -> Tensor:
    if isinstance(items, Tensor):
        return items  # already stacked: (chunks, ...)
    if not isinstance(items, (list, tuple)) or not items:
        raise FFPATypeError(
            f"merge_states(): argument '{name}' must be a non-empty list/tuple of tensors or one "
            f"tensor with the chunks stacked in dim 0, got {type(items).__name__}"
            + (" (empty)" if isinstance(items, (list, tuple)) else "")
        )
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise FFPATypeError(f"merge_states(): {name}[{i}] must be a torch.Tensor, got {type(t).__name__}")
    first = items[0]
    for i, t in enumerate(items[1:], 1):
        if t.shape != first.shape or t.dtype != first.dtype or t.device != first.device:
            raise FFPAValueError(
                f"merge_states(): every chunk of '{name}' must have the shape, dtype and device of {name}[0] "
                f"({tuple(first.shape)}, {first.dtype}, {first.device}); {name}[{i}] has "
                f"({tuple(t.shape)}, {t.dtype}, {t.device})"
            )
    return torch.stack(list(items))


def merge_states(
    outs: Union[Tensor, Sequence[Tensor]], lses: Union[Tensor, Sequence[Tensor]]
) -> Tuple[Tensor, Tensor]:
    """Merge attention partials computed over disjoint key sets.

    Args:
        outs: the chunks' outputs, each ``(..., L, Dv)`` (SDPA layout ``(B, H, L, Dv)``), as a
            list/tuple or stacked in a leading dim ``(chunks, ..., L, Dv)``; float16, bfloat16,
            float32 or float64.
        lses: the chunks' natural-log LSEs, each ``(..., L)`` (``(B, H, L)``), likewise; any
            floating dtype (``forward(..., return_lse=True)`` gives float32).

    Returns:
        ``(out, lse)``: ``out`` of the chunks' shape and dtype, ``lse`` float32 ``(..., L)``.

    Bad arguments raise ``FFPATypeError`` / ``FFPAValueError`` naming them, also under
    ``torch.compile(fullgraph=True)`` (when the compiled code runs, as ``forward``'s errors).
    """
    return keep_error_classes(_merge, (outs, lses), _first_tensor(outs), True)


def _merge(outs, lses) -> Tuple[Tensor, Tensor]:
    o = _as_stack("outs", outs)
    s = _as_stack("lses", lses)
    if o.dim() < 2 or o.dtype not in _OUT_DTYPES:
        raise FFPATypeError(
            "merge_states(): 'outs' must be floating (float16, bfloat16, float32 or float64) with "
            f"chunks of at least 1 dim, got dtype {o.dtype} and shape {tuple(o.shape)}"
        )
    if not s.is_floating_point():
        raise FFPATypeError(f"merge_states(): 'lses' must be floating point, got {s.dtype}")
    if o.device != s.device:
        raise FFPAValueError(
            f"merge_states(): 'outs' and 'lses' must be on one device, got {o.device} and {s.device}"
        )
    if o.shape[:-1] != s.shape:
        raise FFPAValueError(
            "merge_states(): 'lses' must have the shape of 'outs' without its last dim (chunks, ..., L): "
            f"outs {tuple(o.shape)} needs lses {tuple(o.shape[:-1])}, got {tuple(s.shape)}"
        )
    acc = torch.float64 if o.dtype == torch.float64 else torch.float32
    s = s.to(acc)
    lse = torch.logsumexp(s, dim=0)  # -inf where every chunk is -inf
    empty = torch.isneginf(lse)
    # exp(-inf - -inf) would be NaN: rows that see no key take weight 0 from every chunk.
    w = torch.where(empty.unsqueeze(0), torch.zeros_like(s), torch.exp(s - lse.unsqueeze(0)))
    # A chunk with weight 0 adds nothing, even if its output holds NaN or Inf (never written).
    contrib = torch.where((w > 0).unsqueeze(-1), w.unsqueeze(-1) * o.to(acc), torch.zeros((), dtype=acc, device=o.device))
    out = contrib.sum(dim=0).to(o.dtype)
    return out, lse.to(torch.float32)
