"""Development probe (#16): FFPA L1's Hopper kernel causal against non-causal in one interleaved
timing (bench/bench_timing.py: shuffled rounds, L2 read flush), so both see the same clocks; then the
same with an idle gap of GAP_MS before every call (power headroom: how much of the ratio is the power
cap). bf16, B=1 H=32 N (default 8192), level=1. Usage: python3 ffpa_causal_ab.py [D ...]"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import ffpa_attn  # noqa: E402
from bench_timing import l2_flusher, time_interleaved  # noqa: E402

N = int(os.environ.get("N", 8192))
GAP_MS = float(os.environ.get("GAP_MS", 20))
flush = l2_flusher()


def gap_flush():
    flush()
    torch.cuda.synchronize()
    time.sleep(GAP_MS / 1e3)


for D in [int(x) for x in sys.argv[1:]] or [512]:
    q, k, v = (torch.randn(1, 32, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    fns = [lambda c=c: ffpa_attn.forward(q, k, v, is_causal=c, strict=True, level=1) for c in (False, True)]
    flops = 4 * 32 * N * N * D
    for name, fl in (("back to back", flush), (f"gap {GAP_MS:g} ms", gap_flush)):
        nc, ca = time_interleaved(fns, 200, 1500 if fl is flush else 600, flush=fl)
        tn, tc = flops / nc / 1e9, flops / 2 / ca / 1e9
        print(f"D={D} {name}: non-causal {nc:.3f} ms {tn:.0f} TFLOPS, causal {ca:.3f} ms {tc:.0f} TFLOPS, ratio {tc / tn:.3f}",
              flush=True)
