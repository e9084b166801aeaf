"""Development probe: host time per call of ffpa_attn.forward / decode against SDPA on a decode
shape (no sync inside the loop), and a cProfile of forward's Python path."""
import cProfile
import pstats
import time

import torch
import torch.nn.functional as F

import ffpa_attn

q = torch.randn(4, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(4, 8, 1088, 128, device="cuda", dtype=torch.bfloat16)
v = torch.randn(4, 8, 1088, 128, device="cuda", dtype=torch.bfloat16)


def per_call(fn, n=2000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


print(f"sdpa {per_call(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)):.1f} us/call")
print(f"ffpa forward {per_call(lambda: ffpa_attn.forward(q, k, v, enable_gqa=True)):.1f} us/call")
qd, kd, vd = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
print(f"ffpa decode {per_call(lambda: ffpa_attn.decode(qd, kd, vd)):.1f} us/call")
from ffpa_attn import _decode_ops
print(f"op only {per_call(lambda: _decode_ops.ffpa_decode(qd, kd, vd, None, None, None, 0.088, False, 0)):.1f} us/call")
pr = cProfile.Profile()
pr.enable()
for _ in range(2000):
    ffpa_attn.forward(q, k, v, enable_gqa=True)
pr.disable()
torch.cuda.synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(18)
