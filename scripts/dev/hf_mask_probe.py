"""Development probe: what a Hugging Face Llama passes to SDPA during greedy generation (query
length, mask shape and dtype, is_causal, GQA), and per-call host time of our forward there."""
import collections

import torch
import torch.nn.functional as F
import transformers

import ffpa_attn

print("transformers", transformers.__version__)
cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
                               num_attention_heads=8, num_key_value_heads=2, head_dim=128,
                               max_position_embeddings=256, attn_implementation="sdpa")
model = transformers.LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
seen = collections.Counter()
real = F.scaled_dot_product_attention


def spy(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False, **kw):
    m = None if attn_mask is None else (tuple(attn_mask.shape), str(attn_mask.dtype))
    seen[(tuple(q.shape), tuple(k.shape), m, is_causal, enable_gqa)] += 1
    return ffpa_attn.forward(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                             enable_gqa=enable_gqa)


prompt = torch.randint(0, 512, (2, 16), device="cuda")
F.scaled_dot_product_attention = spy
try:
    with torch.inference_mode():
        model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=4, min_new_tokens=4,
                       do_sample=False, pad_token_id=0)
        print("static cache:")
        model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=4, min_new_tokens=4,
                       do_sample=False, pad_token_id=0, cache_implementation="static")
finally:
    F.scaled_dot_product_attention = real
for key, n in seen.items():
    print(n, key)
