"""Development probe: kernel times (torch profiler) of one decode shape at several forced split
counts, split kernel and merge separately. Usage: decode_splits_probe.py B S Hq Hkv D Dv s1 s2 ..."""
import sys

import torch

import ffpa_attn

B, S, Hq, Hkv, D, Dv = (int(x) for x in sys.argv[1:7])
k = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
v = k[..., :Dv] if D != Dv else torch.randn(B, S, Hkv, Dv, device="cuda", dtype=torch.bfloat16)
q = torch.randn(B, 1, Hq, D, device="cuda", dtype=torch.bfloat16)
nbytes = B * S * Hkv * (D if D != Dv else D + Dv) * 2
for splits in [None] + [int(x) for x in sys.argv[7:]]:
    for _ in range(3):
        ffpa_attn.decode(q, k, v, num_splits=splits)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            ffpa_attn.decode(q, k, v, num_splits=splits)
        torch.cuda.synchronize()
    split = [e.device_time for e in prof.events() if "decode_split" in e.name]
    merge = [e.device_time for e in prof.events() if "decode_merge" in e.name]
    ms = sum(split) / len(split) / 1e3
    mm = sum(merge) / len(merge) / 1e3 if merge else 0.0
    print(f"splits {splits}: split kernel {ms * 1e3:.1f} us ({nbytes / ms / 1e6:.0f} GB/s), merge {mm * 1e3:.1f} us")
