"""Dev check for fa2_short_causal_ab.patch: causal calls of 129..208 keys at D = 64 under FFPA_DEV_WS=2 (the short-keys
tile for causal calls too) against an fp64 reference, with the kernel that ran read from the profiler.
Usage (device, after fa2_patch_ab.sh built the patched tree): FFPA_DEV_WS=2 python3 scripts/dev/short_causal_check.py"""
import math

import torch
from torch.profiler import ProfilerActivity, profile

import ffpa_attn

torch.manual_seed(0)
bad = 0
for (L, S, align, hq, hkv) in [(197, 197, "top_left", 12, 12), (150, 150, "top_left", 8, 2), (129, 129, "top_left", 4, 4),
                               (208, 208, "top_left", 4, 1), (100, 197, "bottom_right", 6, 3), (197, 180, "top_left", 4, 4),
                               (60, 209, "bottom_right", 4, 4), (197, 197, "bottom_right", 4, 2)]:
    B = 140 // hq + 2
    q = torch.randn(B, hq, L, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(B, hkv, S, 64, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(B, hkv, S, 64, device="cuda", dtype=torch.bfloat16)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out, lse = ffpa_attn.forward(q, k, v, is_causal=True, causal_align=align, return_lse=True, strict=True,
                                     enable_gqa=hq != hkv)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
    short = any("ShortTile" in n for n in names)
    kr = k.double().repeat_interleave(hq // hkv, 1)
    vr = v.double().repeat_interleave(hq // hkv, 1)
    s = q.double() @ kr.transpose(-1, -2) / math.sqrt(64)
    off = S - L if align == "bottom_right" else 0
    keep = torch.arange(S, device="cuda")[None, :] <= torch.arange(L, device="cuda")[:, None] + off
    s = s.masked_fill(~keep, float("-inf"))
    ref_lse = torch.logsumexp(s, -1)
    ref = torch.softmax(s, -1).nan_to_num(0.0) @ vr
    err = (out.double() - ref).abs().max().item()
    valid = keep.any(-1)
    lerr = (lse.double() - ref_lse)[..., valid].abs().max().item()
    ok = err < 2e-2 and lerr < 1e-3
    bad += not ok
    print(f"L={L} S={S} {align} {hq}/{hkv}: short tile {short}, max err {err:.2e}, lse {lerr:.2e} {'ok' if ok else 'BAD'}")
print("short causal check:", "FAIL" if bad else "pass")
