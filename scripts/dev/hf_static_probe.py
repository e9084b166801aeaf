"""Development probe: the Hugging Face Llama-style model of the bench with the static cache (transformers
compiles the step; a key-padding mask every step), plain SDPA vs sdpa_patched(): what the profiler sees
per generated token (host ops by self CPU time, whether the step replays a CUDA graph, the attention
kernels' GPU time)."""
import torch
import transformers

import ffpa_attn

cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=4,
                               num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                               max_position_embeddings=4096, attn_implementation="sdpa")
torch.manual_seed(0)
with torch.device("cuda"):
    model = transformers.LlamaForCausalLM(cfg).to(dtype=torch.bfloat16).eval()
prompt = torch.randint(0, 32000, (4, 1024), device="cuda")
kw = dict(attention_mask=torch.ones_like(prompt), do_sample=False, pad_token_id=0, cache_implementation="static")
print("transformers", transformers.__version__, "compile config:", getattr(model.generation_config, "compile_config", None))
for name, ctx in (("sdpa", None), ("ffpa", ffpa_attn.sdpa_patched)):
    with torch.inference_mode(), (ctx() if ctx else torch.autograd.profiler.record_function("x")):
        model.generate(prompt, max_new_tokens=8, min_new_tokens=8, **kw)
        model.generate(prompt, max_new_tokens=8, min_new_tokens=8, **kw)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            model.generate(prompt, max_new_tokens=17, min_new_tokens=17, **kw)
    ev = prof.key_averages()
    graphs = sum(e.count for e in ev if "cudaGraphLaunch" in e.key)
    print(f"== {name}: cudaGraphLaunch x{graphs}")
    print(ev.table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=60))
    print(ev.table(sort_by="cuda_time_total", row_limit=10, max_name_column_width=60))
