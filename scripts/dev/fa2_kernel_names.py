import torch, ffpa_attn
from torch.profiler import profile, ProfilerActivity
for D in (32, 96, 160, 192, 224):
    for layout in ("bhld", "blhd"):
        q = torch.randn(1, 4, 300, D, device="cuda", dtype=torch.bfloat16)
        if layout == "blhd":
            q = torch.randn(1, 300, 4, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            ffpa_attn.forward(q, q, q, strict=True); torch.cuda.synchronize()
        print(D, layout, sorted({e.name[:40] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}))
