"""The FP8 op of the extension (``torch.ops.ffpa_attn.ffpa_fp8_fwd``): its schema check, fake kernel,
which head dims the build has for it and where it runs. No argument checks (``_fp8`` does them) and no
fallback.

Schema: ``ffpa_fp8_fwd(q (B, Hq, L, D), k (B, Hkv, S, D), v (B, Hkv, S, D) float8_e4m3fn, q_descale?,
k_descale?, v_descale? (float32, 2-D broadcasting to their tensor's (B, H)), attn_mask? (4-D, each dim 1
or full, as ffpa_fwd's), scale, v_scale, is_causal, causal_bottom_right, out_fp16) -> (out (B, Hq, L, D)
bf16 or fp16, lse (B, Hq, L) fp32)``.
"""
from __future__ import annotations

from typing import FrozenSet, Optional, Tuple

import torch
from torch import Tensor

from . import _ops

__all__ = ["available", "pairs", "runs_on", "ffpa_fp8_fwd", "FAMILY"]

FAMILY = "fp8"
_QUALNAME = "ffpa_attn::ffpa_fp8_fwd"


_OP = _ops.lookup_secondary_op("ffpa_fp8_fwd", "FP8 calls run dequantized")


def available() -> bool:
    """True when the extension registers the FP8 op and compiled its kernel for some head dim."""
    return _OP is not None and bool(pairs())


def pairs() -> FrozenSet[Tuple[int, int]]:
    """(D, Dv) pairs the FP8 family is compiled for (empty without the extension)."""
    return _ops.head_dim_pairs(FAMILY) if _OP is not None else frozenset()


def runs_on(device: torch.device) -> bool:
    """The FP8 kernel is sm_90a code: it runs on compute capability 9.0 only."""
    if device.type != "cuda":
        return False
    return tuple(torch.cuda.get_device_capability(device)) == (9, 0)


def _fake(q: Tensor, k: Tensor, v: Tensor, q_descale: Optional[Tensor], k_descale: Optional[Tensor],
          v_descale: Optional[Tensor], attn_mask: Optional[Tensor], scale: float, v_scale: float, is_causal: bool,
          causal_bottom_right: bool, out_fp16: bool) -> Tuple[Tensor, Tensor]:
    torch._check(q.dim() == 4, lambda: f"ffpa_fp8_fwd: q must be 4-D, got {q.dim()}-D")
    torch._check(v.dim() == 4, lambda: f"ffpa_fp8_fwd: v must be 4-D, got {v.dim()}-D")
    b, h, length, _ = q.shape
    out = q.new_empty((b, h, length, v.shape[-1]), dtype=torch.float16 if out_fp16 else torch.bfloat16)
    return out, q.new_empty((b, h, length), dtype=torch.float32)


if _OP is not None:
    _ops.register_fake_once(_QUALNAME, _fake)


def ffpa_fp8_fwd(q: Tensor, k: Tensor, v: Tensor, q_descale: Optional[Tensor], k_descale: Optional[Tensor],
                 v_descale: Optional[Tensor], attn_mask: Optional[Tensor], scale: float, v_scale: float,
                 is_causal: bool, causal_bottom_right: bool, out_fp16: bool) -> Tuple[Tensor, Tensor]:
    """Thin wrapper of ``torch.ops.ffpa_attn.ffpa_fp8_fwd`` (no checks, no fallback)."""
    if _OP is None:
        raise RuntimeError(f"torch.ops.ffpa_attn.ffpa_fp8_fwd is not available: {_ops.import_error()}")
    return _OP.default(q, k, v, q_descale, k_descale, v_descale, attn_mask, scale, v_scale, is_causal,
                       causal_bottom_right, out_fp16)
