"""Dev A/B of warp-specialised kernel variants (FA-2; FFPA with LEVEL=1) beside an SDPA backend (PEER:
cudnn, default, efficient or flash): bench's interleaved timer, L2
flushed, medians, TFLOPS as the bench counts them (causal: half). Each variant sets FFPA_DEV_WS=<n>
before its call; the launcher reads nothing by default, so an A/B first adds a temporary switch on
that variable in Fa2WsLaunch (e.g. in kernel() or run(): `const char* e = std::getenv("FFPA_DEV_WS");`
picking a template variant or grid per value; never committed; FfpaWsLauncher's kernel() likewise) and
removes it after. SLEEP=<cycles>: a GPU spin after each flush (host launch overhead kept out
of short calls). Usage: DIMS="64 128" [SHAPES="1x32x8192"] [LEVEL=1 PEER=efficient] python3
scripts/dev/fa2_ws_variants.py 0,1"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from bench import _l2_flusher, _time_interleaved  # noqa: E402

import ffpa_attn  # noqa: E402

variants = [int(v) for v in sys.argv[1].split(",")] if len(sys.argv) > 1 else [0, 1]
PEERS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
         "flash": SDPBackend.FLASH_ATTENTION}
peer = os.environ.get("PEER", "cudnn")
level = int(os.environ["LEVEL"]) if os.environ.get("LEVEL") else None
shapes = [tuple(int(x) for x in s.split("x")) for s in os.environ.get("SHAPES", "1x32x8192 8x16x2048").split()]
flush = _l2_flusher()
if os.environ.get("SLEEP"):  # GPU cycles of torch.cuda._sleep after each flush: keeps the host ahead of the GPU
    _flush, _cycles = flush, int(os.environ["SLEEP"])
    flush = lambda: (_flush(), torch.cuda._sleep(_cycles))  # noqa: E731
print(torch.cuda.get_device_name(), "variants", variants)
for (B, H, N) in shapes:
    for D in [int(d) for d in os.environ.get("DIMS", "64 128 256").split()]:
        for causal in (False, True):
            q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)

            def ours(var):
                def f():
                    os.environ["FFPA_DEV_WS"] = str(var)
                    return ffpa_attn.forward(q, k, v, is_causal=causal, strict=True, level=level)
                return f

            def cudnn():
                with sdpa_kernel(PEERS[peer]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            errs = []
            for var in variants:
                out = ours(var)()
                errs.append(float((out.float() - ref).abs().max()))
            fns = [ours(var) for var in variants] + [cudnn]
            ms = _time_interleaved(fns, 25, 150, flush=flush)
            flops = 4 * B * H * N * N * D * (0.5 if causal else 1.0)
            tf = [flops / (t * 1e-3) / 1e12 for t in ms]
            row = " ".join(f"v{var}={t:6.1f}" for var, t in zip(variants, tf))
            print(f"B{B} H{H} N{N} D{D} causal={int(causal)}: {row} {peer}={tf[-1]:6.1f} | best/{peer}="
                  f"{max(tf[:-1]) / tf[-1]:.3f} | maxerr {max(errs):.2e}", flush=True)
