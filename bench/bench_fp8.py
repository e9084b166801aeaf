#!/usr/bin/env python3
"""FP8 benchmark: ffpa_attn.forward on float8_e4m3fn inputs (the FP8 kernels on Hopper) beside our bf16
kernels (``fa2`` up to D = 256, ``ffpa_auto`` above) and SDPA's best there (cuDNN up to 256, the
memory-efficient kernel above) on the bf16 originals of the same run, with the FP8 GEMM ceiling
(torch._scaled_mm, 8192^3) of that run.

    python bench/bench_fp8.py --gen-bench          # or: bench/bench.py --preset fp8 --gen-bench
    python bench/bench_fp8.py --shapes 4x8x8448 --D 256

Shapes are ``BxHxN`` (L = S = N, Hq = Hkv); inputs are randn in bf16 quantized per (batch, head) by
``ffpa_attn.quantize_fp8`` (the FP8 rows pass those descales). TFLOPS are counted as bench.py counts
them (4 B H N^2 D, half with causal). Each FP8 row also reports its relative RMSE against an fp32
SDPA on the dequantized inputs, and the accuracy probe the outlier case: a few key channels scaled
20x, quantized per tensor against per (batch, head). Timing: bench.py's interleaved CUDA events, the
L2 evicted before each call, medians; a D's causal and non-causal calls are one interleaved set. Rows go to ``<out>/fp8.json`` (bench.py's schema: kernel
"fp8" with dtype "float8_e4m3fn", "fa2" / "ffpa_auto" and "sdpa_cudnn" / "sdpa_efficient" with dtype
"bf16", "fp8_gemm_ceiling"); the
table to ``<out>/fp8.md``.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Colfax's FP8 FA-2 shape (B=4 H=8 N=8448) and the bench's default one.
SHAPES = [(4, 8, 8448), (1, 32, 8192)]
DIMS = [128, 256, 512]
# The bf16 rows beside FP8: ours (FA-2 up to D = 256, FFPA above: "ffpa_auto") and SDPA's best there (cuDNN up
# to 256, the memory-efficient kernel above, where cuDNN and flash do not run).
OURS, PEERS = ("fa2", "ffpa_auto"), ("sdpa_cudnn", "sdpa_efficient")


def parse_shape(spec: str):
    parts = [int(x) for x in spec.lower().split("x")]
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"shape must be BxHxN, got {spec!r}")
    return tuple(parts)


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", type=parse_shape, nargs="+", default=None, help="default: 4x8x8448 1x32x8192")
    p.add_argument("--D", type=int, nargs="+", default=DIMS)
    p.add_argument("--causal", choices=["no", "yes", "both"], default="both")
    p.add_argument("--warmup", type=float, default=10.0, help="ms of untimed calls per kernel")
    p.add_argument("--iters", type=float, default=60.0, help="ms of timed calls per kernel")
    p.add_argument("--out-dir", default="bench/out")
    p.add_argument("--gen-bench", action="store_true", help="write the markdown table")
    return p


def fp8_gemm_ceiling(torch, timer, flush, n=8192):
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    ms = timer([lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)], 5, 50,
               flush=flush)[0]
    return ms, 2 * n ** 3 / (ms * 1e-3) / 1e12


def rel_rmse(out, ref):
    return ((out.float() - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()).item()


def outlier_probe(torch, F, ffpa_attn, D):
    """Relative RMSE with a few key channels scaled 20x: per-tensor descales against quantize_fp8's
    per-(batch, head) ones (B=2 H=8 N=2048)."""
    g = torch.Generator(device="cuda").manual_seed(D)
    q, k, v = (torch.randn(2, 8, 2048, D, device="cuda", generator=g) for _ in range(3))
    k[..., :4] *= 20
    k[1, 3] *= 4  # and one head much larger than the rest
    ref = F.scaled_dot_product_attention(q, k, v)
    res = {}
    for kind in ("per_tensor", "per_head"):
        qkv = []
        for t in (q, k, v):
            if kind == "per_head":
                qkv.append(ffpa_attn.quantize_fp8(t))
            else:
                d = t.abs().amax() / torch.finfo(torch.float8_e4m3fn).max
                qkv.append(((t / d).to(torch.float8_e4m3fn), d.reshape(())))
        (q8, qd), (k8, kd), (v8, vd) = qkv
        out = ffpa_attn.forward(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd)
        res[kind] = rel_rmse(out, ref)
    return res


def run(args) -> int:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import ffpa_attn
    from bench_timing import l2_flusher, time_interleaved

    flush = l2_flusher()
    dev = torch.cuda.get_device_name()
    rows = []
    gemm_ms, gemm_tflops = fp8_gemm_ceiling(torch, time_interleaved, flush)
    rows.append({"kernel": "fp8_gemm_ceiling", "dtype": "float8_e4m3fn", "ms": gemm_ms, "tflops": gemm_tflops,
                 "M": 8192, "N": 8192, "K": 8192})
    print(f"{dev}: FP8 GEMM ceiling {gemm_tflops:.0f} TFLOPS", flush=True)
    fp8_dims = {p[0] for p in ffpa_attn.build_info()["head_dim_pairs"].get("fp8", [])}
    causals = {"no": [False], "yes": [True], "both": [False, True]}[args.causal]
    for (B, H, N) in args.shapes or SHAPES:
        for D in args.D:
            g = torch.Generator(device="cuda").manual_seed(B * N + D)
            q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
            (q8, qd), (k8, kd), (v8, vd) = (ffpa_attn.quantize_fp8(t) for t in (q, k, v))
            # A D's causal and non-causal calls in one interleaved set (their ratio at the same clocks).
            cells = []
            for causal in causals:
                fns, names, dtypes = [], [], []
                if D in fp8_dims:
                    fns.append(lambda causal=causal, x=(q8, k8, v8), d=(qd, kd, vd): ffpa_attn.forward(
                        *x, is_causal=causal, q_descale=d[0], k_descale=d[1], v_descale=d[2], strict=True))
                    names.append("fp8")
                    dtypes.append("float8_e4m3fn")
                fns.append(lambda causal=causal, x=(q, k, v): ffpa_attn.forward(*x, is_causal=causal, strict=True))
                names.append(OURS[D > 256])
                dtypes.append("bf16")
                backend = SDPBackend.CUDNN_ATTENTION if D <= 256 else SDPBackend.EFFICIENT_ATTENTION

                def sdpa(backend=backend, causal=causal, x=(q, k, v)):
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(*x, is_causal=causal)
                fns.append(sdpa)
                names.append(PEERS[D > 256])
                dtypes.append("bf16")
                rmse = {}
                if "fp8" in names:
                    deq = [x.float() * d[..., None, None] for x, d in ((q8, qd), (k8, kd), (v8, vd))]
                    rmse["fp8"] = rel_rmse(fns[0](), F.scaled_dot_product_attention(*deq, is_causal=causal))
                    del deq
                cells.append((causal, fns, names, dtypes, rmse))
            times = time_interleaved([fn for c in cells for fn in c[1]], args.warmup, args.iters, flush=flush)
            for causal, fns, names, dtypes, rmse in cells:
                cell_times, times = times[:len(fns)], times[len(fns):]
                base = {"B": B, "Hq": H, "Hkv": H, "L": N, "S": N, "D": D, "Dv": D, "causal": causal, "mask": "none"}
                flops = 4.0 * B * H * N * N * D * (0.5 if causal else 1.0)
                line = []
                for name, dt, ms in zip(names, dtypes, cell_times):
                    tf = flops / (ms * 1e-3) / 1e12
                    row = dict(base, kernel=name, dtype=dt, ms=ms, tflops=tf, gemm_fraction=tf / gemm_tflops)
                    if name in rmse:
                        row["rel_rmse"] = rmse[name]
                    rows.append(row)
                    line.append(f"{name} {tf:.0f}")
                print(f"B={B} H={H} N={N} D={D}{' causal' if causal else ''}: " + ", ".join(line) + " TFLOPS"
                      + (f"; fp8 rel RMSE {rmse['fp8']:.2e}" if rmse else ""), flush=True)
            del cells, q, k, v, q8, k8, v8
            torch.cuda.empty_cache()
    for D in sorted(fp8_dims & set(args.D)):
        res = outlier_probe(torch, F, ffpa_attn, D)
        rows.append({"kernel": "fp8_outliers", "D": D, **res})
        print(f"outliers D={D}: rel RMSE per-tensor {res['per_tensor']:.2e}, per-head {res['per_head']:.2e}", flush=True)
    os.makedirs(args.out_dir, exist_ok=True)
    data = {"device": dev, "date": _dt.date.today().isoformat(), "torch": torch.__version__,
            "ffpa_attn": ffpa_attn.__version__, "rows": rows}
    with open(os.path.join(args.out_dir, "fp8.json"), "w") as f:
        json.dump(data, f, indent=1)
    if args.gen_bench:
        with open(os.path.join(args.out_dir, "fp8.md"), "w") as f:
            f.write(make_table(data))
    return 0


def make_table(data) -> str:
    """The markdown table of an fp8.json: TFLOPS per kernel, FP8 over our bf16 and over cuDNN."""
    rows = data["rows"]
    gemm = next((r["tflops"] for r in rows if r["kernel"] == "fp8_gemm_ceiling"), math.nan)
    out = [f"FP8 (e4m3) on {data['device']} ({data['date']}, torch {data['torch']}): FP8 GEMM ceiling {gemm:.0f} "
           "TFLOPS. TFLOPS as bench.py counts them (causal: half).", "",
           "| B | H | N | D | causal | fp8 | x GEMM ceiling | rel RMSE | ours bf16 (fa2 / ffpa_auto) | SDPA bf16 (cuDNN / "
           "EA) | fp8 / ours bf16 | fp8 / SDPA |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    cells = {}
    for r in rows:
        if r["kernel"] in ("fp8",) + OURS + PEERS:
            kind = "ours" if r["kernel"] in OURS else "peer" if r["kernel"] in PEERS else "fp8"
            cells.setdefault((r["B"], r["Hq"], r["L"], r["D"], r["causal"]), {})[kind] = r
    for (B, H, N, D, causal), c in cells.items():
        f8, bf, cd = c.get("fp8"), c.get("ours"), c.get("peer")
        tf = lambda r: f"{r['tflops']:.0f}" if r else "-"  # noqa: E731
        ratio = lambda a, b: f"{a['tflops'] / b['tflops']:.2f}x" if a and b else "-"  # noqa: E731
        out.append(f"| {B} | {H} | {N} | {D} | {'yes' if causal else 'no'} | {tf(f8)} | "
                   f"{f8['tflops'] / gemm:.2f} | {f8['rel_rmse']:.1e} | " if f8 else
                   f"| {B} | {H} | {N} | {D} | {'yes' if causal else 'no'} | - | - | - | ")
        out[-1] += f"{tf(bf)} | {tf(cd)} | {ratio(f8, bf)} | {ratio(f8, cd)} |"
    for r in rows:
        if r["kernel"] == "fp8_outliers":
            out.append("")
            out.append(f"Outliers (D={r['D']}, 4 key channels x20 and one head x4, B=2 H=8 N=2048): relative RMSE "
                       f"{r['per_tensor']:.2e} with per-tensor descales, {r['per_head']:.2e} per (batch, head) "
                       "(quantize_fp8).")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("bench_fp8.py: error: no CUDA GPU available", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
