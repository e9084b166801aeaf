"""Hugging Face ``transformers`` attention backend: ``register_transformers()`` adds ``"ffpa"`` to
transformers' AttentionInterface (with SDPA's mask function), so a model built or switched with
``attn_implementation="ffpa"`` runs its attention through ``ffpa_attn.forward``.

Against ``sdpa_patched()`` (which replaces ``F.scaled_dot_product_attention`` under transformers' own
SDPA backend) this keeps grouped K/V heads as they are when a mask comes along: transformers' SDPA
backend repeats them (``repeat_kv``: a copy of the cache with Hq / Hkv times its bytes, every step)
whenever it passes a mask -- a static cache's key padding, a padded batch -- because SDPA's GQA has
no fused kernel with a mask; ours has (the FA-2 family and split-KV decode both take masks with GQA).
"""
from __future__ import annotations

import sys
from typing import Callable, Optional

import torch

from .errors import FFPATypeError, FFPAUnsupportedError

# transformers' SDPA backend: where it decides whether to repeat the K/V heads (use_gqa_in_sdpa).
_SDPA_INTEGRATION = "transformers.integrations.sdpa_attention"


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: Optional[torch.Tensor], dropout: float = 0.0, scaling: Optional[float] = None,
                      is_causal: Optional[bool] = None, **kwargs):
    """transformers' attention-function contract: query (B, Hq, L, D), key / value (B, Hkv, S, D),
    the mask SDPA's mask function made (bool (B, 1, L, S), or None where causality alone says it);
    returns ((B, L, Hq, Dv), None). Causal as transformers' SDPA backend decides it: the module's flag
    (or the call's), more than one query row and no mask."""
    from .interface import forward

    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = query.shape[2] > 1 and attention_mask is None and causal
    if attention_mask is not None and attention_mask.dim() == 4 and attention_mask.shape[-1] != key.shape[-2]:
        attention_mask = attention_mask[..., : key.shape[-2]]
    out = forward(query, key, value, attn_mask=attention_mask, dropout_p=dropout, is_causal=causal, scale=scaling,
                  enable_gqa=key.shape[1] != query.shape[1])
    # A query that is a (B, L, H, D) buffer seen as (B, H, L, D) gives an output laid out the same way:
    # the transpose back is then contiguous already and .contiguous() copies nothing.
    return out.transpose(1, 2).contiguous(), None


def register_transformers(name: str = "ffpa") -> str:
    """Register ``name`` as a transformers attention implementation running ffpa_attn (and SDPA's mask
    function under the same name); returns the name. Then ``from_pretrained(...,
    attn_implementation=name)`` or ``model.set_attn_implementation(name)``. Needs transformers with
    ``AttentionInterface`` and ``AttentionMaskInterface`` (4.53 or newer)."""
    if not isinstance(name, str) or not name:
        raise FFPATypeError(f"register_transformers: `name` must be a non-empty str, got {name!r}")
    try:
        from transformers import AttentionInterface, AttentionMaskInterface
        from transformers.masking_utils import sdpa_mask
    except ImportError as e:
        raise FFPAUnsupportedError(
            "register_transformers: needs transformers with AttentionInterface and AttentionMaskInterface "
            f"(4.53 or newer); importing them failed: {e}") from e
    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, sdpa_mask)
    return name


def _kernels_take(key: torch.Tensor, attention_mask: torch.Tensor) -> bool:
    """Would ffpa_attn's kernels run an attention call on these K/V and this mask (a query like the
    key: same device, dtype, batch and head dim)? Tensor metadata only: traces under torch.compile."""
    from ._routing import _kernel_reason

    if isinstance(key, torch.fx.Proxy) or key.dim() != 4:
        return False
    return _kernel_reason(key, key, key, attention_mask, 0.0, None, key.dtype, None, "auto") is None


def keep_kv_heads_in_sdpa_backend() -> Optional[Callable[[], None]]:
    """While SDPA is patched: transformers' SDPA backend repeats grouped K/V heads (``repeat_kv``, a copy
    of the cache at Hq / Hkv times its bytes, every step) whenever it passes a mask, because SDPA's GQA
    kernels take none (its ``use_gqa_in_sdpa``); ours do. Where that module is loaded, its decision is
    widened to calls our kernels take, which then get the K/V heads as they are with ``enable_gqa``
    (the ``attn_implementation="ffpa"`` backend's behaviour). Returns the function that restores it,
    or None where there is nothing to change (transformers not imported, or another layout)."""
    module = sys.modules.get(_SDPA_INTEGRATION)
    original = getattr(module, "use_gqa_in_sdpa", None) if module is not None else None
    if not callable(original):
        return None

    def use_gqa_in_sdpa(attention_mask: Optional[torch.Tensor], key: torch.Tensor, *args, **kwargs) -> bool:
        # (attention_mask, key) up to transformers 4.x, (attention_mask, key, value) in 5.x
        if original(attention_mask, key, *args, **kwargs):
            return True
        return attention_mask is not None and _kernels_take(key, attention_mask)

    use_gqa_in_sdpa.__wrapped__ = original  # type: ignore[attr-defined]
    module.use_gqa_in_sdpa = use_gqa_in_sdpa

    def restore() -> None:
        if getattr(module, "use_gqa_in_sdpa", None) is use_gqa_in_sdpa:
            module.use_gqa_in_sdpa = original

    return restore
