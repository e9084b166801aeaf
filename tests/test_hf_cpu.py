"""ffpa_attn's transformers attention backend (ffpa_attn/_hf.py) without a GPU: the attention-function
contract (layouts, GQA without repeated heads, causality decided as transformers' SDPA backend decides
it, the mask cut to the keys) against SDPA on repeated heads, and register_transformers' errors. On
CPU tensors forward falls back to SDPA, so these check the glue, not the kernels (test_hf_llama_gpu.py
runs them)."""
from __future__ import annotations

import sys
import types
import warnings

import pytest
import torch
import torch.nn.functional as F

import ffpa_attn
from ffpa_attn import FFPAFallbackWarning, FFPATypeError, FFPAUnsupportedError
from ffpa_attn._hf import attention_forward


def _reference(q, k, v, mask, causal, scale):
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    out = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                         attn_mask=None if mask is None else mask[..., : k.shape[-2]],
                                         is_causal=causal, scale=scale)
    return out.transpose(1, 2)


CASES = {
    # name: (L, S, mask?, module is_causal, call is_causal, causal expected)
    "prefill causal": (9, 9, False, True, None, True),
    "prefill, the call says not causal": (9, 9, False, True, False, False),
    "prefill, encoder module": (9, 9, False, False, None, False),
    "prefill with a padding mask": (9, 9, True, True, None, False),
    "decode": (1, 13, False, True, None, False),
    "decode, static cache mask wider than the keys": (1, 13, True, True, None, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_attention_forward_matches_sdpa_on_repeated_heads(case):
    L, S, with_mask, module_causal, call_causal, _ = CASES[case]
    g = torch.Generator().manual_seed(len(case))
    B, Hq, Hkv, D = 2, 8, 2, 16
    # transformers' layout: (B, L, H, D) projections seen as (B, H, L, D)
    q = torch.randn(B, L, Hq, D, generator=g).transpose(1, 2)
    k = torch.randn(B, S, Hkv, D, generator=g).transpose(1, 2)
    v = torch.randn(B, S, Hkv, D, generator=g).transpose(1, 2)
    mask = None
    if with_mask:
        wide = S + 5 if "wider" in case else S
        mask = torch.ones(B, 1, L, wide, dtype=torch.bool)
        mask[0, :, :, :3] = False  # left padding of the first sequence
        if L > 1:
            mask &= torch.ones(L, wide, dtype=torch.bool).tril()
    module = types.SimpleNamespace(is_causal=module_causal, num_key_value_groups=Hq // Hkv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FFPAFallbackWarning)  # CPU tensors: SDPA runs
        out, weights = attention_forward(module, q, k, v, mask, scaling=0.3, is_causal=call_causal)
    assert weights is None
    assert out.shape == (B, L, Hq, D) and out.is_contiguous()
    ref = _reference(q, k, v, mask, CASES[case][5], 0.3)
    assert (out.double() - ref).abs().max().item() < 1e-5, case


def test_register_transformers_errors():
    with pytest.raises(FFPATypeError, match="name"):
        ffpa_attn.register_transformers("")
    saved = sys.modules.get("transformers")
    sys.modules["transformers"] = None  # import transformers raises ImportError
    try:
        with pytest.raises(FFPAUnsupportedError, match="AttentionInterface"):
            ffpa_attn.register_transformers()
    finally:
        if saved is None:
            del sys.modules["transformers"]
        else:
            sys.modules["transformers"] = saved


def test_registered_backend_in_a_tiny_llama_matches_sdpa():
    transformers = pytest.importorskip("transformers")
    name = ffpa_attn.register_transformers("ffpa_test")
    assert name == "ffpa_test"
    from transformers import AttentionInterface, AttentionMaskInterface

    assert "ffpa_test" in AttentionInterface._global_mapping and "ffpa_test" in AttentionMaskInterface._global_mapping
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                   max_position_embeddings=64, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 64, (2, 11))
    am = torch.ones_like(ids)
    am[0, :4] = 0  # a padded batch: the mask reaches attention
    with torch.no_grad():
        want = model(ids, attention_mask=am).logits
        model.set_attn_implementation("ffpa_test")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FFPAFallbackWarning)
            got = model(ids, attention_mask=am).logits
    torch.testing.assert_close(got[1], want[1], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got[0, 4:], want[0, 4:], rtol=1e-4, atol=1e-4)


class _FakeSdpaIntegration:
    """Stands in for transformers.integrations.sdpa_attention (the decision sdpa_patched() widens)."""

    def __init__(self):
        import types as _types

        self.module = _types.ModuleType("transformers.integrations.sdpa_attention")
        # transformers 5's signature and rule on CUDA (4.x had no `value`)
        self.original = lambda attention_mask, key, value: attention_mask is None
        self.module.use_gqa_in_sdpa = self.original

    def __enter__(self):
        self.saved = sys.modules.get("transformers.integrations.sdpa_attention")
        sys.modules["transformers.integrations.sdpa_attention"] = self.module
        return self.module

    def __exit__(self, *exc):
        if self.saved is None:
            del sys.modules["transformers.integrations.sdpa_attention"]
        else:
            sys.modules["transformers.integrations.sdpa_attention"] = self.saved


@pytest.mark.parametrize("form", ["context", "pair"])
def test_sdpa_patch_keeps_kv_heads_where_the_kernels_take_the_call(form, monkeypatch):
    """sdpa_patched() / patch_sdpa() widen transformers' use_gqa_in_sdpa to masked calls our kernels take
    (so its SDPA backend passes the K/V heads as they are) and restore it after; CPU tensors are not
    ours to take, so there the decision stays transformers'."""
    from ffpa_attn import _hf

    key = torch.zeros(2, 2, 7, 16)
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    with _FakeSdpaIntegration() as mod:
        original = mod.use_gqa_in_sdpa
        cm = ffpa_attn.sdpa_patched() if form == "context" else None
        if cm is not None:
            cm.__enter__()
        else:
            ffpa_attn.patch_sdpa()
        try:
            patched = mod.use_gqa_in_sdpa
            assert patched is not original and patched.__wrapped__ is original
            assert patched(None, key, key) is True  # transformers' own answer stands
            assert patched(mask, key, key) is False  # CPU: the kernels do not take it, SDPA's GQA has no mask
            monkeypatch.setattr(_hf, "_kernels_take", lambda k, m: True)
            assert patched(mask, key, key) is True
        finally:
            if cm is not None:
                cm.__exit__(None, None, None)
            else:
                ffpa_attn.unpatch_sdpa()
        assert mod.use_gqa_in_sdpa is original
        assert F.scaled_dot_product_attention is ffpa_attn.interface._SDPA


def test_sdpa_patch_without_transformers_changes_nothing_else():
    saved = sys.modules.pop("transformers.integrations.sdpa_attention", None)
    try:
        with ffpa_attn.sdpa_patched():
            assert F.scaled_dot_product_attention is ffpa_attn.forward
        assert F.scaled_dot_product_attention is ffpa_attn.interface._SDPA
        assert "transformers.integrations.sdpa_attention" not in sys.modules
    finally:
        if saved is not None:
            sys.modules["transformers.integrations.sdpa_attention"] = saved
