"""Shared helpers for the kernel tests: the fp32 reference, the tolerance rule and output poisoning."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# The original SDPA, captured before any test can patch F.scaled_dot_product_attention.
SDPA = F.scaled_dot_product_attention


def reference(q, k, v, is_causal=False, scale=None, attn_mask=None):
    """Attention in float64 math on the inputs' device (GQA by repeating K/V heads).

    Returns (out, lse) with lse the natural-log log-sum-exp of the scaled, masked scores."""
    qd, kd, vd = q.double(), k.double(), v.double()
    hq, hkv = q.shape[-3], k.shape[-3]
    if hq != hkv:
        kd = kd.repeat_interleave(hq // hkv, dim=-3)
        vd = vd.repeat_interleave(hq // hkv, dim=-3)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (qd @ kd.transpose(-1, -2)) * scale
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask.double()
    lse = torch.logsumexp(s, dim=-1)
    out = torch.softmax(s, dim=-1) @ vd
    return out, lse


def sdpa_low_precision(q, k, v, is_causal=False, scale=None):
    """PyTorch's own answer in the inputs' dtype (default backend choice): the error yardstick."""
    return SDPA(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=q.shape[-3] != k.shape[-3])


def max_err(a, ref):
    return (a.double() - ref).abs().max().item()


# Absolute slack on top of "2x SDPA's own error": one b16 rounding step of a unit-size output.
ATOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3}


def assert_close_to_reference(out, q, k, v, is_causal=False, scale=None, what=""):
    ref, _ = reference(q, k, v, is_causal=is_causal, scale=scale)
    assert not torch.isnan(out).any(), f"{what}: NaN in output (unwritten or poisoned elements)"
    ours = max_err(out, ref)
    theirs = max_err(sdpa_low_precision(q, k, v, is_causal=is_causal, scale=scale), ref)
    bound = 2.0 * theirs + ATOL[q.dtype]
    assert ours <= bound, f"{what}: max error {ours:.3e} > 2 x SDPA's {theirs:.3e} + atol ({bound:.3e})"
    return ours, theirs


def poison_allocator(*shapes_dtypes, device="cuda"):
    """Fill soon-to-be-reused caching-allocator blocks with NaN so an output element the kernel
    forgets to write shows up as NaN instead of a stale plausible value."""
    blocks = [torch.full(shape, float("nan"), dtype=dt, device=device) for shape, dt in shapes_dtypes]
    torch.cuda.synchronize()
    del blocks
