"""Dev probe: why a one-wave decode call with per-sequence lengths streams slower per byte than the full
cache (docs/tuning_decode.md, sessions 28 / 31 / 37). One shape, the bench's timer (L2 flushed by a
read, interleaved, medians), GB/s of the keys the lengths cover, these cells:
  full      no cache_seqlens (the contiguous cell)
  lens=S    cache_seqlens all S (the per-sequence path, nothing uneven)
  lens=3/4  all 3S/4 (as many bytes as the bench's varlen draw on average, even)
  small3/4  a cache of 3S/4 rows, no cache_seqlens (the same bytes, a shorter stride)
  random    drawn in [S/2, S] (the bench's varlen cell)
  sorted    the same draw sorted (which sequence sits where)
  halves    half the sequences S, half S/2 (the draw's extremes)
MODES: the merge forms timed (set_decode_merge), ORDERS: the block orders (set_decode_order; "balanced":
the narrow MLA kernel under the spread merge), each cell under every pair.
PROFILE=1 adds, per cell, each decode kernel's mean device time (torch profiler, flushed calls) and the
call replayed from a CUDA graph (the bench's timer; no host time between flush and call).
Usage: SHAPE="16,16384,16,1,576,512" MODES="auto,kernel" ORDERS="auto" python3 scripts/dev/decode_varlen_probe.py"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_decode import copy_ceiling  # noqa: E402
from bench_timing import l2_flusher, time_interleaved  # noqa: E402

import ffpa_attn  # noqa: E402
import ffpa_attn._C as C  # noqa: E402

B, S, Hq, Hkv, D, Dv = (int(x) for x in os.environ.get("SHAPE", "16,16384,16,1,576,512").split(","))
MODES = os.environ.get("MODES", "auto").split(",")
ORDERS = os.environ.get("ORDERS", "auto").split(",")
mla = Dv < D
dt = torch.bfloat16
g = torch.Generator(device="cuda").manual_seed(B * S + D)
q = torch.randn(B, 1, Hq, D, device="cuda", dtype=dt, generator=g)
k = torch.randn(B, S, Hkv, D, device="cuda", dtype=dt, generator=g)
v = k[..., :Dv] if mla else torch.randn(B, S, Hkv, Dv, device="cuda", dtype=dt, generator=g)
S3 = 3 * S // 4
k3 = k[:, :S3].contiguous()
v3 = k3[..., :Dv] if mla else v[:, :S3].contiguous()
draw = torch.randint(S // 2, S + 1, (B,), device="cuda", dtype=torch.int32, generator=g)
cells = {
    "full": (k, v, None),
    "lens=S": (k, v, torch.full((B,), S, device="cuda", dtype=torch.int32)),
    "lens=3/4": (k, v, torch.full((B,), S3, device="cuda", dtype=torch.int32)),
    "small3/4": (k3, v3, None),
    "random": (k, v, draw),
    "sorted": (k, v, torch.sort(draw, descending=True).values.contiguous()),
    "halves": (k, v, torch.tensor([S if b % 2 == 0 else S // 2 for b in range(B)], device="cuda", dtype=torch.int32)),
}
row_bytes = Hkv * (D + (0 if mla else Dv)) * q.element_size()
flush = l2_flusher()
names, fns, gbs = [], [], []
for mode in MODES:
    for order in ORDERS:
        for name, (kk, vv, lens) in cells.items():
            keys = B * kk.shape[1] if lens is None else int(lens.sum())

            def fn(kk=kk, vv=vv, lens=lens, mode=mode, order=order):
                C.set_decode_merge(mode)
                C.set_decode_order(order)
                return ffpa_attn.decode(q, kk, vv, cache_seqlens=lens)

            names.append(f"{mode}/{order}:{name}")
            fns.append(fn)
            gbs.append(keys * row_bytes / 1e9)
t = time_interleaved(fns, 10, 80, flush=flush)
C.set_decode_merge("auto")
C.set_decode_order("auto")
_, copy = copy_ceiling(torch, time_interleaved, flush)
print(torch.cuda.get_device_name(), f"B{B} S{S} {Hq}/{Hkv} D{D}/{Dv}, copy ceiling {copy:.0f} GB/s, random draw:",
      draw.tolist())
for name, x, gb in zip(names, t, gbs):
    print(f"{name:24s} {x * 1e3:8.1f} us {gb / (x * 1e-3):7.0f} GB/s {gb / (x * 1e-3) / copy:.3f}x "
          f"({gb * 1e3 / 1.073741824:.0f} MiB)")


def kernel_us(fn, n=20):
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            flush()
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and "decode" in e.name:
            out.setdefault(e.name.split("<")[0].split("(")[0][-28:], []).append(e.time_range.end - e.time_range.start)
    return " ".join(f"{k} {sum(v) / len(v):.1f}" for k, v in out.items())


def graphed(fn):
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


if os.environ.get("PROFILE") == "1":
    gfns = [graphed(fn) for fn in fns]
    tg = time_interleaved(gfns, 10, 80, flush=flush)
    for name, fn, x, xg, gb in zip(names, fns, t, tg, gbs):
        print(f"{name:24s} eager {x * 1e3:6.1f} graph {xg * 1e3:6.1f} us ({gb / (xg * 1e-3) / copy:.3f}x); "
              f"kernels (us): {kernel_us(fn)}")
