"""Helpers shared by the CPU tests: seeded inputs, an independent float64 reference (masks, both
causal alignments, GQA by index_select), per-dtype tolerances and the fallback-warning filter."""
from __future__ import annotations

import math

import torch

from ffpa_attn import FFPAFallbackWarning

# The builtin, immune to patching.
SDPA = torch._C._nn.scaled_dot_product_attention

TOL = {
    torch.float64: dict(atol=1e-10, rtol=1e-10),
    torch.float32: dict(atol=2e-5, rtol=2e-4),
    torch.bfloat16: dict(atol=3e-2, rtol=3e-2),
    torch.float16: dict(atol=3e-3, rtol=3e-3),
}


def rn(g, *shape, dtype=torch.float32):
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)


def ref_attention(q, k, v, attn_mask=None, is_causal=False, scale=None, enable_gqa=False,
                  causal_bottom_right=False):
    """Independent float64 reference: returns (out, lse); GQA via index_select.

    Causal: top-left keeps j <= i, bottom-right j <= i + S - L.  A row with no key left
    has out 0 and lse -inf (what SDPA returns in torch 2.11)."""
    q, k, v = q.double(), k.double(), v.double()
    if enable_gqa:
        hq = q.shape[-3]
        k = k.index_select(-3, torch.arange(hq, device=k.device) // (hq // k.shape[-3]))
        v = v.index_select(-3, torch.arange(hq, device=v.device) // (hq // v.shape[-3]))
    E = q.shape[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        i = torch.arange(L, device=q.device).unsqueeze(-1)
        j = torch.arange(S, device=q.device)
        keep = j <= i + (S - L if causal_bottom_right else 0)
        s = s.masked_fill(keep.logical_not(), -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            s = s.masked_fill(attn_mask.logical_not(), -math.inf)
        else:
            s = s + attn_mask.double()
    lse = torch.logsumexp(s, -1)
    out = torch.softmax(s, -1) @ v
    return out.masked_fill(torch.isneginf(lse).unsqueeze(-1), 0.0), lse


def fallback_warnings(records):
    return [w for w in records if issubclass(w.category, FFPAFallbackWarning)]


# Zero-size inputs (q, k, v shapes) of the API tests: an empty query, key, batch, head or head dim.
ZERO_SIZE = {
    "L0": ((2, 3, 0, 8), (2, 3, 5, 8), (2, 3, 5, 8)),
    "S0": ((2, 3, 4, 8), (2, 3, 0, 8), (2, 3, 0, 8)),
    "B0": ((0, 3, 4, 8), (0, 3, 5, 8), (0, 3, 5, 8)),
    "H0": ((2, 0, 4, 8), (2, 0, 5, 8), (2, 0, 5, 8)),  # the default CPU SDPA dies (SIGFPE)
    "E0": ((2, 3, 4, 0), (2, 3, 5, 0), (2, 3, 5, 8)),
    "Ev0": ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 0)),
}
