"""Development probe: host time per call of ffpa_attn.forward / decode against SDPA on a decode
shape (no sync inside the loop), and a cProfile of forward's Python path."""
import cProfile
import os
import pstats
import sys

import torch
import torch.nn.functional as F

import ffpa_attn

q = torch.randn(4, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(4, 8, 1088, 128, device="cuda", dtype=torch.bfloat16)
v = torch.randn(4, 8, 1088, 128, device="cuda", dtype=torch.bfloat16)


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_decode import host_us_per_call  # noqa: E402


def per_call(fn):
    return host_us_per_call(torch, fn, warmup=50)


print(f"sdpa {per_call(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)):.1f} us/call")
print(f"ffpa forward {per_call(lambda: ffpa_attn.forward(q, k, v, enable_gqa=True)):.1f} us/call")
from ffpa_attn import _fastpath  # noqa: E402
fast, _fastpath.CALL = _fastpath.CALL, None
print(f"ffpa forward without the C++ fast path {per_call(lambda: ffpa_attn.forward(q, k, v, enable_gqa=True)):.1f} us/call")
_fastpath.CALL = fast
print(f"sdpa again {per_call(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)):.1f} us/call")
print(f"ffpa forward again {per_call(lambda: ffpa_attn.forward(q, k, v, enable_gqa=True)):.1f} us/call")
from ffpa_attn import _ops  # noqa: E402
print(f"_C.route {per_call(lambda: _ops._C.route('decode', 'bf16', 128, 128, 0, 0, 1, 1088, 128)):.2f} us/call")
qd, kd, vd = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
print(f"ffpa decode {per_call(lambda: ffpa_attn.decode(qd, kd, vd)):.1f} us/call")
lens = torch.full((4,), 1088, dtype=torch.int32, device="cuda")
print(f"ffpa decode with cache_seqlens {per_call(lambda: ffpa_attn.decode(qd, kd, vd, cache_seqlens=lens)):.1f} us/call")
print(f"packet op {per_call(lambda: torch.ops.ffpa_attn.ffpa_decode(qd, kd, vd, None, None, None, 0.088, False, 0)):.1f} us/call")
from ffpa_attn import _decode_ops
print(f"op only {per_call(lambda: _decode_ops.ffpa_decode(qd, kd, vd, None, None, None, 0.088, False, 0)):.1f} us/call")
pr = cProfile.Profile()
pr.enable()
for _ in range(2000):
    ffpa_attn.forward(q, k, v, enable_gqa=True)
pr.disable()
torch.cuda.synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(18)
