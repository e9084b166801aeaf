"""End to end on the GPU: a Hugging Face Llama-style model (random weights, bf16, GQA 8/2, head dims
128 and 256) decoding with its dynamic KV cache under ffpa_attn.sdpa_patched(). The decode steps
run on the split-KV decode family (seen in the profiler, no fallback warning), and the logits of
every step of a 64-token greedy continuation agree with plain SDPA's on the same tokens within
bf16 noise; greedy generation itself runs to the end."""
from __future__ import annotations

import warnings

import pytest
import torch

import ffpa_attn
from ffpa_attn import FFPAFallbackWarning

pytestmark = pytest.mark.requires_cuda

PROMPT, NEW = 16, 64


def _model(head_dim):
    transformers = pytest.importorskip("transformers")
    pairs = {tuple(p) for p in ffpa_attn.build_info()["head_dim_pairs"].get("decode", [])}
    if (head_dim, head_dim) not in pairs:
        pytest.skip(f"no decode kernel for head dim {head_dim} in this build")
    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
                                   num_attention_heads=8, num_key_value_heads=2, head_dim=head_dim,
                                   max_position_embeddings=256, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    return transformers, model


def _step_logits(transformers, model, tokens):
    """Logits of each position from PROMPT - 1 on, fed one token at a time through a DynamicCache."""
    cache = transformers.DynamicCache()
    out = model(tokens[:, :PROMPT], past_key_values=cache, use_cache=True)
    logits = [out.logits[:, -1].float()]
    for t in range(PROMPT, tokens.shape[1] - 1):
        out = model(tokens[:, t:t + 1], past_key_values=cache, use_cache=True)
        logits.append(out.logits[:, -1].float())
    return torch.stack(logits, 1)


@pytest.mark.parametrize("head_dim", [128, 256])
@torch.inference_mode()
def test_llama_decodes_on_the_decode_family_and_matches_sdpa(head_dim):
    transformers, model = _model(head_dim)
    g = torch.Generator(device="cuda").manual_seed(1)
    prompt = torch.randint(0, 512, (2, PROMPT), device="cuda", generator=g)
    ref = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=NEW, do_sample=False,
                         min_new_tokens=NEW)
    assert ref.shape == (2, PROMPT + NEW)
    want = _step_logits(transformers, model, ref)
    with ffpa_attn.sdpa_patched(), warnings.catch_warnings():
        warnings.simplefilter("error", FFPAFallbackWarning)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            got = _step_logits(transformers, model, ref)
            torch.cuda.synchronize()
        ours = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=NEW, do_sample=False,
                              min_new_tokens=NEW)
    names = [e.name for e in prof.events()]
    decode_calls = sum("decode_split_kernel" in n for n in names)
    assert decode_calls >= 2 * (NEW - 1), f"{decode_calls} decode kernel launches for {NEW - 1} steps x 2 layers"
    # bf16 noise: the logits of both runs differ by rounding inside attention only.
    scale = want.abs().amax()
    assert (got - want).abs().amax() <= 0.03 * scale + 0.03, ((got - want).abs().amax(), scale)
    agree = (got.argmax(-1) == want.argmax(-1)).float().mean()
    assert agree >= 0.9, agree
    assert ours.shape == ref.shape and (ours[:, :PROMPT] == prompt).all()


def _static_step_logits(transformers, model, tokens):
    """As _step_logits, through a StaticCache the length of `tokens`: every step's mask covers the
    whole cache (key padding past the filled length), which is what makes transformers' SDPA backend
    repeat the K/V heads."""
    try:
        cache = transformers.StaticCache(config=model.config, max_cache_len=tokens.shape[1])
    except TypeError as e:  # another transformers' signature
        pytest.skip(f"StaticCache(config=, max_cache_len=) not available: {e}")
    dev = tokens.device
    out = model(tokens[:, :PROMPT], past_key_values=cache, use_cache=True,
                cache_position=torch.arange(PROMPT, device=dev))
    logits = [out.logits[:, -1].float()]
    for t in range(PROMPT, tokens.shape[1] - 1):
        out = model(tokens[:, t:t + 1], past_key_values=cache, use_cache=True,
                    cache_position=torch.tensor([t], device=dev))
        logits.append(out.logits[:, -1].float())
    return torch.stack(logits, 1)


def _assert_decoded_and_close(prof, got, want):
    """The decode family ran every step of both layers (profiler), and the logits agree with plain
    SDPA's within bf16 noise."""
    names = [e.name for e in prof.events()]
    decode_calls = sum("decode" in n and "merge" not in n for n in names)
    assert decode_calls >= 2 * (NEW - 1), f"{decode_calls} decode kernel launches for {NEW - 1} steps x 2 layers"
    scale = want.abs().amax()
    assert (got - want).abs().amax() <= 0.03 * scale + 0.03, ((got - want).abs().amax(), scale)
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() >= 0.9


@pytest.mark.parametrize("head_dim", [128, 256])
@torch.inference_mode()
def test_llama_with_the_ffpa_backend_keeps_kv_heads_and_matches_sdpa(head_dim):
    """attn_implementation="ffpa" (register_transformers): with a static cache every step passes a
    key-padding mask; the backend hands ffpa_attn the cache's 2 K/V heads (transformers' SDPA backend
    repeats them to 8), the decode steps run on the decode family without a fallback, and the logits
    agree with plain SDPA's within bf16 noise."""
    transformers, model = _model(head_dim)
    from ffpa_attn._hf import attention_forward
    from transformers import AttentionInterface

    kv_heads = []

    def spy(module, query, key, value, attention_mask, **kw):
        kv_heads.append(key.shape[1])
        return attention_forward(module, query, key, value, attention_mask, **kw)

    ffpa_attn.register_transformers("ffpa_spy")
    AttentionInterface.register("ffpa_spy", spy)
    g = torch.Generator(device="cuda").manual_seed(2)
    tokens = torch.randint(0, 512, (2, PROMPT + NEW), device="cuda", generator=g)
    want = _static_step_logits(transformers, model, tokens)
    model.set_attn_implementation("ffpa_spy")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FFPAFallbackWarning)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                got = _static_step_logits(transformers, model, tokens)
                torch.cuda.synchronize()
    finally:
        model.set_attn_implementation("sdpa")
    assert kv_heads and set(kv_heads) == {2}, sorted(set(kv_heads))
    _assert_decoded_and_close(prof, got, want)


@pytest.mark.parametrize("head_dim", [128])
@torch.inference_mode()
def test_llama_static_cache_under_sdpa_patched_keeps_kv_heads(head_dim):
    """sdpa_patched() with a static cache: every step passes a key-padding mask, and transformers' SDPA
    backend, whose K/V-head decision the patch widens to calls our kernels take, hands SDPA (ours) the
    cache's 2 K/V heads with enable_gqa instead of a copy repeated to 8. The decode steps run on the
    decode family without a fallback; the logits agree with plain SDPA's within bf16 noise; the
    decision is transformers' own again after the context."""
    transformers, model = _model(head_dim)
    import torch.nn.functional as F
    from transformers.integrations import sdpa_attention

    original = sdpa_attention.use_gqa_in_sdpa
    g = torch.Generator(device="cuda").manual_seed(3)
    tokens = torch.randint(0, 512, (2, PROMPT + NEW), device="cuda", generator=g)
    want = _static_step_logits(transformers, model, tokens)
    kv_heads = []
    with ffpa_attn.sdpa_patched(), warnings.catch_warnings():
        warnings.simplefilter("error", FFPAFallbackWarning)
        patched = F.scaled_dot_product_attention

        def spy(q, k, v, *a, **kw):
            kv_heads.append((k.shape[1], kw.get("enable_gqa", False)))
            return patched(q, k, v, *a, **kw)

        F.scaled_dot_product_attention = spy
        try:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                got = _static_step_logits(transformers, model, tokens)
                torch.cuda.synchronize()
        finally:
            F.scaled_dot_product_attention = patched
    assert sdpa_attention.use_gqa_in_sdpa is original
    assert kv_heads and set(kv_heads) == {(2, True)}, sorted(set(kv_heads))
    _assert_decoded_and_close(prof, got, want)
