"""Development probe: the kernels of one decode step of the bench's Hugging Face Llama-style model (static
cache by default; CACHE= for the dynamic one) as the GPU ran them, from the profiler's trace: each
kernel's duration, grid and block in order, for plain SDPA, sdpa_patched() and attn_implementation="ffpa",
and then the attention call alone at the same shape, eager (K/V repeated just before it, as the model
does). Shows what the attention kernel sees in the model (grid: splits x row blocks, KV heads, batch)
and what ran right before it. Env TRACE_DIR: where the chrome traces go (default /tmp)."""
import json
import os
import sys

import torch
import torch.nn.functional as F
import transformers

import ffpa_attn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_decode import hf_llama  # noqa: E402

model, prompt, kw = hf_llama(torch, transformers)
kw["cache_implementation"] = os.environ.get("CACHE", "static") or None
BACKEND = ffpa_attn.register_transformers("ffpa")
out_dir = os.environ.get("TRACE_DIR", "/tmp")


def kernels_of(prof, name):
    path = os.path.join(out_dir, f"trace_{name}.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    ks = [e for e in ev if e.get("cat") == "kernel"]
    ks.sort(key=lambda e: e["ts"])
    return ks


def show(ks, first, count):
    t0 = ks[first]["ts"]
    for e in ks[first:first + count]:
        a = e.get("args", {})
        print(f"  +{e['ts'] - t0:8.1f} us  {e['dur']:7.1f} us  grid {a.get('grid')} block {a.get('block')}  {e['name'][:80]}")


def attention_index(ks):
    for i, e in enumerate(ks):
        n = e["name"]
        if "decode_split" in n or "cudnn" in n or "flash" in n.lower() and "fwd" in n.lower():
            return i
    return None


with torch.inference_mode():
    for name in ("sdpa", "ffpa", "ffpa_backend"):
        if name == "ffpa_backend":
            model.set_attn_implementation(BACKEND)
        ctx = ffpa_attn.sdpa_patched() if name == "ffpa" else torch.autograd.profiler.record_function("x")
        with ctx:
            model.generate(prompt, max_new_tokens=6, min_new_tokens=6, **kw)
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                model.generate(prompt, max_new_tokens=6, min_new_tokens=6, **kw)
                torch.cuda.synchronize()
        if name == "ffpa_backend":
            model.set_attn_implementation("sdpa")
        ks = kernels_of(prof, name)
        idx = [i for i, e in enumerate(ks) if "decode_split" in e["name"] or "cudnn_generated" in e["name"]
               or "decode_merge" in e["name"]]
        print(f"== {name}: {len(ks)} kernels; attention kernels {len(idx)}")
        if len(idx) >= 8:
            last = idx[-1]
            show(ks, max(last - 6, 0), 9)
            print("  attention kernel durations (last 8):", [round(ks[i]["dur"], 1) for i in idx[-8:]])

# The same call eager, K/V repeated just before it (the model's repeat_kv), mask as the static cache's.
B, Hq, Hkv, D = 4, 32, 8, 128
S = int(os.environ.get("S", "1030"))
dev, dt = "cuda", torch.bfloat16
kb = torch.randn(B, Hkv, S, D, device=dev, dtype=dt)
vb = torch.randn(B, Hkv, S, D, device=dev, dtype=dt)
q = torch.randn(B, Hq, 1, D, device=dev, dtype=dt)
m = torch.zeros(B, 1, 1, S, device=dev, dtype=torch.bool)
m[..., : S - 20] = True


def rep(t):
    return t[:, :, None].expand(B, Hkv, Hq // Hkv, S, D).reshape(B, Hq, S, D)


for name, fn in (("ffpa eager", ffpa_attn.forward), ("sdpa eager", F.scaled_dot_product_attention)):
    for _ in range(3):
        fn(q, rep(kb), rep(vb), attn_mask=m)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn(q, rep(kb), rep(vb), attn_mask=m)
        torch.cuda.synchronize()
    ks = kernels_of(prof, name.replace(" ", "_"))
    print(f"== {name} (S={S}): {len(ks)} kernels")
    show(ks, max(len(ks) - 6, 0), 6)
