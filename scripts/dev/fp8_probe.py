"""Development probe of the FP8 kernel (#17): TFLOPS of ffpa_attn.forward on e4m3 inputs beside our bf16
kernel and SDPA cuDNN (EA past D = 256) on the same shapes, and the FP8 GEMM ceiling (torch._scaled_mm) of the same run.
Bench's interleaved timer (L2 flushed, medians). Env SHAPES 'BxHxN ...', DIMS, CAUSAL=0/1, VARIANTS:
'kernel,prepass' (the V^T forms, ffpa_attn._C.set_fp8_v_transpose) or values of FFPA_DEV_WS, a temporary A/B
switch a launcher may read ('0,1')."""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench import _l2_flusher, _time_interleaved  # noqa: E402

import ffpa_attn  # noqa: E402
import ffpa_attn._C as C  # noqa: E402

FORMS = ("auto", "kernel", "prepass")

flush = _l2_flusher()
n = 8192
a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
one = torch.ones((), device="cuda")
ms = _time_interleaved([lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)], 5, 20,
                       flush=flush)
print(f"{torch.cuda.get_device_name()}: fp8 GEMM ceiling {2 * n ** 3 / (ms[0] * 1e-3) / 1e12:.0f} TFLOPS")
for shape in os.environ.get("SHAPES", "4x8x8448 1x32x8192").split():
    B, H, N = (int(x) for x in shape.split("x"))
    for D in (int(d) for d in os.environ.get("DIMS", "128 256").split()):
        for causal in [bool(int(c)) for c in os.environ.get("CAUSAL", "0 1").split()]:
            q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            (q8, qd), (k8, kd), (v8, vd) = (ffpa_attn.quantize_fp8(t) for t in (q, k, v))

            def fp8(var="0"):
                if var in FORMS:
                    C.set_fp8_v_transpose(var)
                else:
                    os.environ["FFPA_DEV_WS"] = var
                return ffpa_attn.forward(q8, k8, v8, is_causal=causal, q_descale=qd, k_descale=kd, v_descale=vd,
                                         strict=True)
            variants = os.environ.get("VARIANTS", "0").split(",")

            def bf16():
                return ffpa_attn.forward(q, k, v, is_causal=causal, strict=True)

            def cudnn():  # past D = 256 SDPA's memory-efficient kernel (cuDNN does not run there)
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION if D <= 256 else SDPBackend.EFFICIENT_ATTENTION):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            ref = F.scaled_dot_product_attention(*(x.float() * d[..., None, None] for x, d in ((q8, qd), (k8, kd), (v8, vd))),
                                                 is_causal=causal)
            rmse = [((fp8(var).float() - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()).item() for var in variants]
            fns = [lambda var=var: fp8(var) for var in variants] + [bf16, cudnn]
            t = _time_interleaved(fns, 10, 40, flush=flush)
            flops = 4 * B * H * N * N * D * (0.5 if causal else 1.0)
            tf = [flops / (x * 1e-3) / 1e12 for x in t]
            nv = len(variants)
            f8 = " ".join(f"v{v}={x:.0f} (rmse {r:.2e})" for v, x, r in zip(variants, tf, rmse))
            print(f"B{B} H{H} N{N} D{D} causal={int(causal)}: fp8 {f8} | bf16 fa2 {tf[nv]:.0f} | cudnn bf16 "
                  f"{tf[nv + 1]:.0f} TFLOPS | best fp8/bf16 {max(tf[:nv]) / tf[nv]:.2f}", flush=True)
