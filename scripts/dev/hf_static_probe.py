"""Development probe: the Hugging Face Llama-style model of the bench with the static cache (transformers
compiles the step; a key-padding mask every step), plain SDPA vs sdpa_patched(): what the profiler sees
per generated token (host ops by self CPU time, whether the step replays a CUDA graph, the attention
kernels' GPU time)."""
import os
import sys

import torch
import transformers

import ffpa_attn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_decode import hf_llama  # noqa: E402  (the bench's model, prompt and generate() arguments)

model, prompt, kw = hf_llama(torch, transformers)
kw["cache_implementation"] = "static"
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
