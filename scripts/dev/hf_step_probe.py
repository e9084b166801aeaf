"""Development probe: a Hugging Face Llama-style model (4 layers, 32/8, D=128, bf16, B=4, prompt 1024)
generating greedily: time per token with plain SDPA, with sdpa_patched(), and patched without
forward's fast path; what the attention calls were (shapes, masks, which path); and the GPU time of
the attention kernels of one decode step (torch profiler)."""
import collections
import os
import sys
import time

import torch
import torch.nn.functional as F
import transformers

import ffpa_attn
from ffpa_attn import _fastpath

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_decode import hf_llama  # noqa: E402  (the bench's model, prompt and generate() arguments)

model, prompt, kw = hf_llama(torch, transformers)


def per_token():
    with torch.inference_mode():
        model.generate(prompt, max_new_tokens=4, min_new_tokens=4, **kw)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.generate(prompt, max_new_tokens=65, min_new_tokens=65, **kw)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        model.generate(prompt, max_new_tokens=1, min_new_tokens=1, **kw)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
    return ((t1 - t0) - (t2 - t1)) / 64 * 1e3, (t2 - t1) * 1e3


print("plain SDPA ms/token, prefill ms:", [per_token() for _ in range(2)])
with ffpa_attn.sdpa_patched():
    print("patched:", [per_token() for _ in range(2)])
real_call = _fastpath.CALL
_fastpath.CALL = None
with ffpa_attn.sdpa_patched():
    print("patched, no fast path:", [per_token() for _ in range(2)])
_fastpath.CALL = real_call

seen = collections.Counter()


def spy(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False, **extra):
    m = None if attn_mask is None else (tuple(attn_mask.shape), str(attn_mask.dtype), attn_mask.stride())
    seen[(tuple(q.shape), tuple(k.shape)[:2], q.stride(), k.stride(), m, is_causal, enable_gqa, type(scale).__name__,
          type(dropout_p).__name__, tuple(sorted(extra)))] += 1
    return ffpa_attn.forward(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                             enable_gqa=enable_gqa)


F.scaled_dot_product_attention = spy
with torch.inference_mode():
    model.generate(prompt, max_new_tokens=3, min_new_tokens=3, **kw)
F.scaled_dot_product_attention = ffpa_attn.interface._SDPA
for k, n in seen.most_common(8):
    print(n, k)
for name, ctx in (("sdpa", None), ("ffpa", ffpa_attn.sdpa_patched)):
    with torch.inference_mode(), (ctx() if ctx else torch.autograd.profiler.record_function("x")):
        model.generate(prompt, max_new_tokens=3, min_new_tokens=3, **kw)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            model.generate(prompt, max_new_tokens=9, min_new_tokens=9, **kw)
    print(name)
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12))
