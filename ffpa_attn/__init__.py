"""ffpa-attn: CUDA attention kernels (an FA-2 family for head dims <= 256, 320 and 384, FFPA -- Faster
Flash Prefill Attention -- for large head dims), usable as a drop-in for
``torch.nn.functional.scaled_dot_product_attention``.

    import ffpa_attn
    out = ffpa_attn.forward(q, k, v, is_causal=True)          # same semantics as SDPA
    out = ffpa_attn.forward(q, k, v, attn_mask=mask)           # bool or additive masks
    out = ffpa_attn.forward(q, k, v, is_causal=True, causal_align="bottom_right")  # prefill
    out, lse = ffpa_attn.forward(q, k, v, return_lse=True)     # plus natural-log LSE
    out, lse = ffpa_attn.merge_states([o1, o2], [lse1, lse2])  # attention over both key sets
    out = ffpa_attn.decode(q, k_cache, v_cache, cache_seqlens=lens)   # (B, Lq<=32, H, D) vs a KV cache
    (q8, qd), (k8, kd), (v8, vd) = map(ffpa_attn.quantize_fp8, (q, k, v))
    out = ffpa_attn.forward(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd)  # FP8 e4m3 inputs
    with ffpa_attn.sdpa_patched():                              # route F.sdpa through it
        model(x)
    ffpa_attn.register_transformers()                           # attn_implementation="ffpa" in transformers

Calls the kernels cannot run (CPU tensors, dropout, autograd, uncompiled head dims, ...)
fall back to torch SDPA with a one-time ``FFPAFallbackWarning`` per reason.
"""

__version__ = "0.1.0"  # keep first: _ops reads it while the package is importing

from ._decode import decode
from ._fp8 import quantize_fp8
from ._hf import register_transformers
from ._merge import merge_states
from ._ops import build_info, extension_available, get_fa2_mma, set_fa2_mma
from .errors import (
    FFPAError,
    FFPAFallbackWarning,
    FFPAIndexError,
    FFPATypeError,
    FFPAUnsupportedError,
    FFPAValueError,
)
from .interface import (
    forward,
    is_sdpa_patched,
    patch_sdpa,
    reset_fallback_warnings,
    scaled_dot_product_attention,
    sdpa_patched,
    unpatch_sdpa,
)

__all__ = [
    "__version__",
    "forward",
    "merge_states",
    "decode",
    "quantize_fp8",
    "register_transformers",
    "scaled_dot_product_attention",
    "patch_sdpa",
    "unpatch_sdpa",
    "is_sdpa_patched",
    "sdpa_patched",
    "build_info",
    "extension_available",
    "set_fa2_mma",
    "get_fa2_mma",
    "reset_fallback_warnings",
    "FFPAFallbackWarning",
    "FFPAError",
    "FFPAValueError",
    "FFPATypeError",
    "FFPAIndexError",
    "FFPAUnsupportedError",
]
