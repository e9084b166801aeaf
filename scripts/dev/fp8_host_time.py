"""Development probe (#17): host time per FP8 forward call (back-to-back calls on a small shape, no sync
inside the loop, so the host is the bottleneck) beside the bf16 forward of the same shape, and where it
goes (cProfile of 200 calls, top functions by cumulative time)."""
import cProfile
import pstats
import time

import torch

import ffpa_attn

import os
D = int(os.environ.get("D", "128"))
q, k, v = (torch.randn(1, 8, 256, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
(q8, qd), (k8, kd), (v8, vd) = (ffpa_attn.quantize_fp8(t) for t in (q, k, v))
calls = {"bf16": lambda: ffpa_attn.forward(q, k, v, strict=True),
         "fp8": lambda: ffpa_attn.forward(q8, k8, v8, strict=True),
         "fp8 descales": lambda: ffpa_attn.forward(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, strict=True)}
for name, fn in calls.items():
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(500):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    print(f"{name}: host {(t1 - t0) / 500 * 1e6:.1f} us per call, with the GPU {(t2 - t0) / 500 * 1e6:.1f}", flush=True)
pr = cProfile.Profile()
pr.enable()
for _ in range(200):
    calls["fp8 descales"]()
pr.disable()
torch.cuda.synchronize()
pstats.Stats(pr).sort_stats("cumulative").print_stats(25)
