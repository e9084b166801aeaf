"""Development probe: forward() routed to the decode family with and without a key-padding mask (what a
Hugging Face static cache passes: (B, 1, 1, S)), bool and additive bf16, against plain SDPA. Prints the
decode kernels' GPU time per call (torch profiler) and CUDA-event medians of whole calls. Env SHAPES:
'B,S;B,S', HKV (32/HKV heads; SPLITS: decode() with forced split counts too, D = 128, bf16, Lq = 1)."""
import os
import statistics

import torch
import torch.nn.functional as F

import ffpa_attn

torch.manual_seed(0)
dev, dt = "cuda", torch.bfloat16
shapes = [tuple(int(x) for x in s.split(",")) for s in os.environ.get("SHAPES", "4,1088;4,1041;8,8192").split(";")]
Hq, D = 32, 128
Hkv = int(os.environ.get("HKV", "8"))  # 32: K/V heads repeated as Hugging Face does when it passes a mask


def kernel_us(fn, n=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.count >= n:
            out[e.key[:60]] = e.device_time_total / e.count if hasattr(e, "device_time_total") else e.cuda_time_total / e.count
    return out


def event_ms(fns, reps=30):
    times = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); fn(); b.record()
            torch.cuda.synchronize()
            times[k].append(a.elapsed_time(b) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


for B, S in shapes:
    q = torch.randn(B, Hq, 1, D, device=dev, dtype=dt)
    k = torch.randn(B, Hkv, S, D, device=dev, dtype=dt)
    v = torch.randn(B, Hkv, S, D, device=dev, dtype=dt)
    valid = S - 40
    mb = torch.zeros(B, 1, 1, S, device=dev, dtype=torch.bool)
    mb[..., :valid] = True
    mf = torch.zeros(B, 1, 1, S, device=dev, dtype=dt)
    mf[..., valid:] = torch.finfo(dt).min
    ref = F.scaled_dot_product_attention(q.double(), k.double().repeat_interleave(Hq // Hkv, 1),
                                         v.double().repeat_interleave(Hq // Hkv, 1), attn_mask=mb)
    fns = {
        "ffpa none": lambda: ffpa_attn.forward(q, k, v, enable_gqa=True),
        "ffpa bool": lambda: ffpa_attn.forward(q, k, v, attn_mask=mb, enable_gqa=True),
        "ffpa bf16": lambda: ffpa_attn.forward(q, k, v, attn_mask=mf, enable_gqa=True),
        "sdpa none": lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        "sdpa bool": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mb, enable_gqa=True),
    }
    lens = torch.full((B,), valid, device=dev, dtype=torch.int32)
    qd, kd, vd = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    for ns in (int(x) for x in os.environ.get("SPLITS", "").split(",") if x):
        fns[f"decode lens splits={ns}"] = (lambda ns=ns: ffpa_attn.decode(qd, kd, vd, cache_seqlens=lens, num_splits=ns))
    for name in ("ffpa bool", "ffpa bf16"):
        err = (fns[name]().double() - ref).abs().max().item()
        print(f"B={B} S={S} {name}: max err {err:.2e}")
    for name, fn in fns.items():
        ks = kernel_us(fn)
        print(f"B={B} S={S} {name}: " + "; ".join(f"{k} {v:.1f}us" for k, v in ks.items()))
    print(f"B={B} S={S} events (us):", {k: round(v, 1) for k, v in event_ms(fns).items()})
