import torch, ffpa_attn, os
from torch.profiler import profile, ProfilerActivity
for (B, S, H, splits) in [(16, 16384, 16, None), (16, 16384, 16, 4), (16, 16384, 16, 16), (64, 4096, 8, None)]:
    q = torch.randn(B, 1, H, 576, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(B, S, 1, 576, device="cuda", dtype=torch.bfloat16)
    v = k[..., :512]
    fn = lambda: ffpa_attn.decode(q, k, v, num_splits=splits)
    for _ in range(5): fn()
    torch.cuda.synchronize()
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            flush.zero_(); fn()
        torch.cuda.synchronize()
    tot = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and "zero" not in e.name and "fill" not in e.name.lower():
            tot.setdefault(e.name[:60], []).append(e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total)
    gb = B * S * 576 * 2 / 1e9
    print(f"B{B} S{S} H{H} splits={splits}: " + "; ".join(f"{n}: {sum(v)/len(v):.1f} us" for n, v in tot.items()),
          f"| split-kernel GB/s = {gb / (min(sum(v)/len(v) for n, v in tot.items() if 'split' in n) * 1e-6):.0f}")
