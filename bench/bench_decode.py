#!/usr/bin/env python3
"""Decode benchmark: ffpa_attn.decode (the split-KV decode family) against SDPA flash and cuDNN
where they run, beside the copy ceiling and the bf16 GEMM ceiling of the same run.

    python bench/bench_decode.py --dtype bf16 fp16 --gen-bench      # or: bench/bench.py --preset decode
    python bench/bench_decode.py --shapes 8x32768x32x8x128 --num-splits 4

Shapes are ``BxSxHqxHkvxD[xDv][:Lq][:causal]``. Each runs with a contiguous cache, a paged cache
(page 64, pages shuffled) and a contiguous cache with per-sequence lengths drawn in [S/2, S]
(``varlen``). Bandwidth = bytes of K/V the lengths cover / time (MLA shapes, whose V is the first
Dv columns of K, count K's bytes once); the copy ceiling is (read + write bytes) / time of a
1 GiB device-to-device copy. SDPA gets the cache as (B, Hkv, S, D) views with enable_gqa, and the
bottom-right causal mask as torch's causal_lower_right bias. Timing: bench.py's interleaved CUDA
events with the L2 evicted before each call, medians; a shape's layouts are timed together, so their
ratios compare calls made at the same clocks. Rows go to ``<out>/decode.json``; the table to
``<out>/decode.md``. Per-call latency (eager and CUDA graph) at B=1, S=4096, 32/8, D=128.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import math
import os
import statistics
import sys
import traceback
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# (B, S, Hq, Hkv, D, Dv, Lq, causal): the shapes of the decode issue.
SHAPES = [
    (8, 32768, 32, 8, 128, 128, 1, False),
    (64, 8192, 32, 8, 128, 128, 1, False),
    (1, 131072, 32, 8, 128, 128, 1, False),
    (64, 8192, 32, 8, 64, 64, 1, False),  # beyond the list: D = 64, many blocks and one wave
    (1, 131072, 32, 8, 64, 64, 1, False),
    (32, 8192, 32, 8, 256, 256, 1, False),
    (16, 8192, 64, 8, 512, 512, 1, False),
    (16, 16384, 16, 1, 576, 512, 1, False),
    (128, 4096, 128, 1, 576, 512, 1, False),
    (8, 32768, 32, 8, 128, 128, 4, True),
]
LAYOUTS = ("contiguous", "paged64", "varlen")


def parse_shape(spec: str):
    head, *flags = spec.split(":")
    parts = [int(x) for x in head.lower().split("x")]
    if len(parts) == 5:
        parts.append(parts[4])
    if len(parts) != 6:
        raise argparse.ArgumentTypeError(f"shape must be BxSxHqxHkvxD[xDv][:Lq][:causal], got {spec!r}")
    lq = int(flags[0]) if flags and flags[0].isdigit() else 1
    return (*parts, lq, "causal" in flags)


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", type=parse_shape, nargs="+", default=None, help="default: the issue's eight and two at D = 64")
    p.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS))
    p.add_argument("--dtype", nargs="+", choices=["bf16", "fp16"], default=["bf16"])
    p.add_argument("--num-splits", type=int, default=None, help="force the split count (default: auto)")
    p.add_argument("--warmup", type=int, default=10, help="ms of untimed calls per kernel and cell")
    p.add_argument("--iters", type=int, default=60, help="about this many ms of timed rounds per kernel")
    p.add_argument("--out-dir", default="bench/out")
    p.add_argument("--gen-bench", action="store_true", help="write the markdown table")
    p.add_argument("--no-latency", action="store_true", help="skip the eager / CUDA-graph latency probe")
    p.add_argument("--no-hf", action="store_true", help="skip the Hugging Face Llama time-per-token probe")
    return p


def kv_bytes(lens, Hkv, D, Dv, elem, shared_kv):
    per_key = Hkv * (D if shared_kv else D + Dv) * elem
    return int(sum(lens)) * per_key


def _caches(torch, B, S, Hkv, D, Dv, dtype, layout, gen, shared_kv):
    k = torch.randn(B, S, Hkv, D, device="cuda", dtype=dtype, generator=gen)
    v = k[..., :Dv] if shared_kv else torch.randn(B, S, Hkv, Dv, device="cuda", dtype=dtype, generator=gen)
    lens = [S] * B
    table = None
    if layout == "varlen":
        lens = torch.randint(S // 2, S + 1, (B,), generator=torch.Generator().manual_seed(B * S)).tolist()
    if layout == "paged64":
        page = 64
        pages = S // page
        perm = torch.randperm(B * pages, device="cuda", generator=gen)
        pool_k = torch.empty(B * pages, page, Hkv, D, device="cuda", dtype=dtype)
        pool_k[perm] = k.reshape(B * pages, page, Hkv, D)
        del k
        if shared_kv:
            pool_v = pool_k[..., :Dv]
        else:
            pool_v = torch.empty(B * pages, page, Hkv, Dv, device="cuda", dtype=dtype)
            pool_v[perm] = v.reshape(B * pages, page, Hkv, Dv)
        del v
        table = perm.view(B, pages).to(torch.int32)
        return pool_k, pool_v, table, lens
    return k, v, table, lens


def copy_ceiling(torch, timer, flush):
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = timer([lambda: dst.copy_(src)], 5, 50, flush=flush)[0]
    return ms, 2 * n / (ms * 1e-3) / 1e9


GEMM_FLOPS = 2 * 8192 ** 3
# Query rows per KV head (Hq / Hkv x Lq) from which a cell is compute-bound (the bar there is a
# fraction of the bf16 GEMM ceiling): such cells time the GEMM again beside their calls.
COMPUTE_BOUND_ROWS = 64


def gemm_call(torch):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    return lambda: a @ b


def gemm_ceiling(call, timer, flush, warmup=5, iters=50):
    """(ms, TFLOPS) of `call` (gemm_call's 8192^3 bf16 GEMM)."""
    ms = timer([call], warmup, iters, flush=flush)[0]
    return ms, GEMM_FLOPS / (ms * 1e-3) / 1e12


def host_us_per_call(torch, fn, n=2000, warmup=0):
    """Wall time per call of n back-to-back calls (no sync inside the loop), in microseconds."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def latency_probe(torch, ffpa_attn, dtype):
    """Per-call time at B=1, S=4096, 32/8, D=128: eager (host loop) and one-call CUDA-graph replays."""
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(1, 1, 32, 128, device="cuda", dtype=dtype, generator=g)
    k = torch.randn(1, 4096, 8, 128, device="cuda", dtype=dtype, generator=g)
    v = torch.randn(1, 4096, 8, 128, device="cuda", dtype=dtype, generator=g)
    lens = torch.tensor([4096], dtype=torch.int32, device="cuda")
    step = lambda: ffpa_attn.decode(q, k, v, cache_seqlens=lens)  # noqa: E731
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    eager = min(host_us_per_call(torch, step) for _ in range(3))
    graphed = min(host_us_per_call(torch, graph.replay) for _ in range(3))
    return {"kernel": "latency", "dtype": str(dtype).split(".")[-1], "B": 1, "Hq": 32, "Hkv": 8, "Lq": 1,
            "S": 4096, "D": 128, "Dv": 128, "eager_us": eager, "graph_us": graphed, "overhead_us": eager - graphed}


HF_ROUNDS = 5


def hf_llama(torch, transformers):
    """The probes' Llama-style model (random weights, bf16, 4 layers, 32/8 heads, D=128, built on the GPU:
    a billion parameters), a batch-4 prompt of 1024 tokens and greedy generate()'s keyword arguments."""
    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=4,
                                   num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                                   max_position_embeddings=4096, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(cfg).to(dtype=torch.bfloat16).eval()
    prompt = torch.randint(0, 32000, (4, 1024), device="cuda")
    return model, prompt, dict(attention_mask=torch.ones_like(prompt), do_sample=False, pad_token_id=0)


def hf_probe(torch, ffpa_attn):
    """Time per generated token of a Llama-style model (random weights, bf16, 4 layers, 32/8 heads,
    D=128; batch 4, prompt 1024, 64 new tokens), dynamic and static cache, plain SDPA vs sdpa_patched()
    (and, static, attn_implementation="ffpa": ffpa_attn.register_transformers, K/V heads not repeated):
    medians of HF_ROUNDS interleaved rounds."""
    try:
        import transformers
    except ImportError:
        return None
    model, prompt, kw = hf_llama(torch, transformers)

    def generate(cache, n):
        extra = {} if cache is None else {"cache_implementation": cache}
        with torch.inference_mode():
            model.generate(prompt, max_new_tokens=n, min_new_tokens=n, **kw, **extra)

    def per_token(cache):
        generate(cache, 4)  # warm-up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        generate(cache, 65)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        generate(cache, 1)  # the prefill alone
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        return ((t1 - t0) - (t2 - t1)) / 64 * 1e3

    backend = ffpa_attn.register_transformers("ffpa")

    @contextlib.contextmanager
    def ffpa_backend():
        model.set_attn_implementation(backend)
        try:
            yield
        finally:
            model.set_attn_implementation("sdpa")

    modes = {"sdpa": contextlib.nullcontext, "ffpa": ffpa_attn.sdpa_patched, "ffpa_backend": ffpa_backend}
    row = {"kernel": "hf_llama", "B": 4, "prompt": 1024, "new_tokens": 64, "layers": 4, "Hq": 32, "Hkv": 8, "D": 128,
           "rounds": HF_ROUNDS}
    # The dynamic cache (a growing K/V, no mask: the backend would run as the patch does) and the static
    # one (a fixed-size cache and a key-padding mask).
    for cache, prefix, names in ((None, "", ("sdpa", "ffpa")), ("static", "static_", tuple(modes))):
        # Every generate() length the rounds use, in every mode, before any is timed: the static cache's
        # size follows the length, and transformers compiles the step, so a first length (or the first
        # call after the mode changes) recompiles and captures a new CUDA graph inside a timed call.
        for n in (4, 65, 1):
            for name in names:
                with modes[name]():
                    generate(cache, n)
        times = {name: [] for name in names}
        for _ in range(HF_ROUNDS):  # interleaved: a drift of the host's speed hits every mode alike
            for name in names:
                with modes[name]():
                    times[name].append(per_token(cache))
        for name in names:
            row[f"{prefix}{name}_ms_per_token"] = statistics.median(times[name])
    return row


def run(args) -> int:
    import torch
    import torch.nn.functional as F

    import ffpa_attn
    from bench_timing import l2_flusher, time_interleaved
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    flush = l2_flusher()
    dev = torch.cuda.get_device_name()
    rows = []
    copy_ms, copy_gbps = copy_ceiling(torch, time_interleaved, flush)
    gemm = gemm_call(torch)
    gemm_ms, gemm_tflops = gemm_ceiling(gemm, time_interleaved, flush)
    rows.append({"kernel": "copy_ceiling", "ms": copy_ms, "gbps": copy_gbps, "bytes": 2 << 30})
    rows.append({"kernel": "gemm_ceiling", "ms": gemm_ms, "tflops": gemm_tflops, "M": 8192, "N": 8192, "K": 8192})
    print(f"{dev}: copy ceiling {copy_gbps:.0f} GB/s, bf16 GEMM ceiling {gemm_tflops:.0f} TFLOPS", flush=True)
    pairs = {tuple(p) for p in ffpa_attn.build_info()["head_dim_pairs"].get("decode", [])}
    for dt_name in args.dtype:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dt_name]
        for (B, S, Hq, Hkv, D, Dv, Lq, causal) in args.shapes or SHAPES:
            shared_kv = D != Dv  # MLA: V is the first Dv columns of K
            # The shape's layouts in one interleaved timing (their ratios, e.g. paged against contiguous,
            # then compare calls made at the same clocks), each layout's cache and calls built first.
            cells = []
            for layout in args.layouts:
                gen = torch.Generator(device="cuda").manual_seed(B * S + D)
                k, v, table, lens = _caches(torch, B, S, Hkv, D, Dv, dtype, layout, gen, shared_kv)
                q = torch.randn(B, Lq, Hq, D, device="cuda", dtype=dtype, generator=gen)
                seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda") if layout == "varlen" else None
                cell = {"layout": layout, "tensors": (q, k, v, table, seqlens), "fns": [], "names": [],
                        "base": {"dtype": dt_name, "B": B, "Hq": Hq, "Hkv": Hkv, "Lq": Lq, "S": S, "D": D, "Dv": Dv,
                                 "causal": causal, "page_size": 64 if layout == "paged64" else 0,
                                 "varlen": layout == "varlen"},
                        "nbytes": kv_bytes(lens, Hkv, D, Dv, q.element_size(), shared_kv),
                        "flops": 2.0 * Hq * Lq * sum(lens) * (D + Dv)}
                if (D, Dv) in pairs:
                    cell["fns"].append(lambda q=q, k=k, v=v, table=table, seqlens=seqlens: ffpa_attn.decode(
                        q, k, v, cache_seqlens=seqlens, block_table=table, causal=causal, num_splits=args.num_splits))
                    cell["names"].append("ffpa_decode")
                if layout == "contiguous":
                    qs, ks, vs = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
                    mask = causal_lower_right(Lq, S) if causal else None
                    for name, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                                          ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
                        def fn(backend=backend, qs=qs, ks=ks, vs=vs, mask=mask):
                            with sdpa_kernel(backend):
                                return F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, enable_gqa=True)
                        try:
                            fn()
                            torch.cuda.synchronize()
                        except RuntimeError:
                            continue  # this backend does not run the shape
                        cell["fns"].append(fn)
                        cell["names"].append(name)
                cells.append(cell)
            times = time_interleaved([fn for c in cells for fn in c["fns"]], args.warmup, args.iters, flush=flush)
            cell_gemm = None
            if any(c["fns"] for c in cells) and Hq // Hkv * Lq >= COMPUTE_BOUND_ROWS:
                # Compute-bound: the GEMM ceiling again right after the shape's calls, so both ran at the clocks
                # of this point of the run (a GPU hot late in the run clocks lower than at its start). Not
                # interleaved: the GEMM's power draw would lower the calls' own clocks.
                cell_gemm = gemm_ceiling(gemm, time_interleaved, flush, args.warmup, args.iters)
            for cell in cells:
                base, nbytes, flops = cell["base"], cell["nbytes"], cell["flops"]
                cell_times, times = times[:len(cell["fns"])], times[len(cell["fns"]):]
                line = []
                for name, ms in zip(cell["names"], cell_times):
                    gbps = nbytes / (ms * 1e-3) / 1e9
                    rows.append(dict(base, kernel=name, ms=ms, gbps=gbps, tflops=flops / (ms * 1e-3) / 1e12,
                                     copy_fraction=gbps / copy_gbps))
                    line.append(f"{name} {ms:.3f} ms {gbps:.0f} GB/s ({gbps / copy_gbps:.2f}x copy)")
                if cell_gemm is not None:
                    rows.append(dict(base, kernel="gemm_ceiling", ms=cell_gemm[0], tflops=cell_gemm[1], M=8192,
                                     N=8192, K=8192))
                    line.append(f"GEMM ceiling {cell_gemm[1]:.0f} TFLOPS")
                print(f"{dt_name} B={B} S={S} {Hq}/{Hkv} D={D}/{Dv} Lq={Lq}{' causal' if causal else ''} "
                      f"{cell['layout']}: " + "; ".join(line), flush=True)
            del cells
            torch.cuda.empty_cache()
        if not args.no_latency:
            lat = latency_probe(torch, ffpa_attn, dtype)
            rows.append(lat)
            print(f"{dt_name} latency B=1 S=4096 32/8 D=128: eager {lat['eager_us']:.1f} us, graph "
                  f"{lat['graph_us']:.1f} us, overhead {lat['overhead_us']:.1f} us", flush=True)
    status = 0
    if not args.no_hf:
        try:
            hf = hf_probe(torch, ffpa_attn)
        except Exception as exc:  # noqa: BLE001 - the model probe failing must not lose the table above
            # Recorded as a row and in the table, and the sweep exits non-zero (session 24: a failure under
            # torch.compile's CUDA-graph trees lost the whole decode table).
            traceback.print_exc()
            hf = {"kernel": "hf_llama_failed", "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
            status = 1
        if hf is not None:
            rows.append(hf)
            if "error" not in hf:
                print(f"HF Llama (4 layers, 32/8, D=128, B=4, prompt 1024): {hf['sdpa_ms_per_token']:.2f} ms/token "
                      f"with SDPA, {hf['ffpa_ms_per_token']:.2f} with sdpa_patched()", flush=True)
    os.makedirs(args.out_dir, exist_ok=True)
    data = {"device": dev, "date": _dt.date.today().isoformat(), "torch": torch.__version__,
            "ffpa_attn": ffpa_attn.__version__, "rows": rows}
    with open(os.path.join(args.out_dir, "decode.json"), "w") as f:
        json.dump(data, f, indent=1)
    if args.gen_bench:
        with open(os.path.join(args.out_dir, "decode.md"), "w") as f:
            f.write(make_table(data))
    return status


def make_table(data) -> str:
    """The markdown table of a decode.json: GB/s per kernel and layout, ratios to copy and SDPA."""
    rows = data["rows"]
    copy = next((r["gbps"] for r in rows if r["kernel"] == "copy_ceiling"), math.nan)
    gemm = next((r["tflops"] for r in rows if r["kernel"] == "gemm_ceiling" and "B" not in r), math.nan)
    out = [f"Decode on {data['device']} ({data['date']}, torch {data['torch']}): copy ceiling {copy:.0f} GB/s, "
           f"bf16 GEMM ceiling {gemm:.0f} TFLOPS at the run's start. GB/s = bytes of K/V covered / time. "
           f"Compute-bound cells (Hq/Hkv x Lq >= {COMPUTE_BOUND_ROWS}) time the GEMM again right after their calls: "
           "TFLOPS (x that GEMM: its TFLOPS).", "",
           "| dtype | B | S | Hq/Hkv | D/Dv | Lq | layout | ffpa_decode GB/s (x copy) | TFLOPS | sdpa_flash | sdpa_cudnn "
           "| vs best SDPA |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    cells = {}
    for r in rows:
        if r["kernel"] in ("ffpa_decode", "sdpa_flash", "sdpa_cudnn") or (r["kernel"] == "gemm_ceiling" and "B" in r):
            layout = "paged64" if r["page_size"] else ("varlen" if r["varlen"] else "contiguous")
            key = (r["dtype"], r["B"], r["S"], r["Hq"], r["Hkv"], r["D"], r["Dv"], r["Lq"], r["causal"], layout)
            cells.setdefault(key, {})[r["kernel"]] = r
    for key, c in cells.items():
        dt, B, S, Hq, Hkv, D, Dv, Lq, causal, layout = key
        ours = c.get("ffpa_decode")
        sd = [c[k]["gbps"] for k in ("sdpa_flash", "sdpa_cudnn") if k in c]
        fmt = lambda k: f"{c[k]['gbps']:.0f}" if k in c else "-"  # noqa: E731
        mine = f"{ours['gbps']:.0f} ({ours['gbps'] / copy:.2f})" if ours else "-"
        tf = f"{ours['tflops']:.0f}" if ours else "-"
        if ours and "gemm_ceiling" in c:
            cell_gemm = c["gemm_ceiling"]["tflops"]
            tf += f" ({ours['tflops'] / cell_gemm:.2f}x: {cell_gemm:.0f})"
        ratio = f"{ours['gbps'] / max(sd):.2f}x" if ours and sd else "-"
        out.append(f"| {dt} | {B} | {S} | {Hq}/{Hkv} | {D}/{Dv} | {Lq}{' causal' if causal else ''} | {layout} | {mine} "
                   f"| {tf} | {fmt('sdpa_flash')} | {fmt('sdpa_cudnn')} | {ratio} |")
    for r in rows:
        if r["kernel"] == "hf_llama":
            out.append("")
            static = (f"; static cache (key-padding mask): {r['static_sdpa_ms_per_token']:.2f} ms with SDPA, "
                      f"{r['static_ffpa_ms_per_token']:.2f} patched" if "static_sdpa_ms_per_token" in r else "")
            if "static_ffpa_backend_ms_per_token" in r:
                static += f", {r['static_ffpa_backend_ms_per_token']:.2f} with attn_implementation=\"ffpa\""
            out.append(f"Hugging Face Llama-style model ({r['layers']} layers, {r['Hq']}/{r['Hkv']} heads, D={r['D']}, "
                       f"batch {r['B']}, prompt {r['prompt']}, greedy; medians of "
                       f"{r.get('rounds', 1)} interleaved rounds): dynamic cache {r['sdpa_ms_per_token']:.2f} ms "
                       f"per token with SDPA, {r['ffpa_ms_per_token']:.2f} ms under ffpa_attn.sdpa_patched(){static}.")
        if r["kernel"] == "hf_llama_failed":
            out.append("")
            out.append(f"Hugging Face Llama-style model: FAILED ({r['error']}).")
        if r["kernel"] == "latency":
            out.append("")
            out.append(f"Latency ({r['dtype']}, B=1, S=4096, 32/8, D=128): eager {r['eager_us']:.1f} us per call, "
                       f"CUDA graph {r['graph_us']:.1f} us, Python overhead {r['overhead_us']:.1f} us.")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("bench_decode.py: error: no CUDA GPU available", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
