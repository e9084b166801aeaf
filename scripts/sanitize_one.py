"""One small launch per kernel level for compute-sanitizer (memcheck / racecheck): tails in both
L and S, GQA, causal and not, every pipeline depth."""
import torch

import ffpa_attn

info = ffpa_attn.build_info()
dt = torch.bfloat16 if "bfloat16" in info["dtypes"] else torch.float16
for d in sorted({info["head_dims"]["ffpa_l1"][0], info["head_dims"]["ffpa_l1"][-1]}):
    g = torch.Generator(device="cuda").manual_seed(d)
    q = torch.randn(1, 4, 77, d, device="cuda", dtype=dt, generator=g)
    k = torch.randn(1, 2, 131, d, device="cuda", dtype=dt, generator=g)
    v = torch.randn(1, 2, 131, d, device="cuda", dtype=dt, generator=g)
    for causal in (False, True):
        for stages in (1, 2, 3, 4):
            out = ffpa_attn.forward(q, k, v, is_causal=causal, enable_gqa=True, strict=True, level=1,
                                    num_stages=stages)
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()
print("sanitize_one: done")
