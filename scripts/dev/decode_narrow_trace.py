"""Dev probe (with scripts/dev/decode_narrow_trace.patch applied): the narrow MLA decode kernel's blocks on
the GPU's globaltimer, one flushed call: per block its start, first tile ready, last tile ready, partials
stored, merge done (us from the first block's start), its tiles and sequence; the blocks that finish
first and last. Under scripts/dev/decode_stream_shares.patch (whose stamps are: start, first piece done,
tiles done, grid barrier passed, merge done; pieces and tiles in 6 and 7) the same columns read so.
Usage: SHAPE="16,16384,16,1,576,512" VARLEN=0,1 ORDERS=auto,launch python3 scripts/dev/decode_narrow_trace.py"""
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_timing import l2_flusher  # noqa: E402

import ffpa_attn  # noqa: E402
import ffpa_attn._C as C  # noqa: E402

B, S, Hq, Hkv, D, Dv = (int(x) for x in os.environ.get("SHAPE", "16,16384,16,1,576,512").split(","))
dt = torch.bfloat16
g = torch.Generator(device="cuda").manual_seed(B * S + D)
q = torch.randn(B, 1, Hq, D, device="cuda", dtype=dt, generator=g)
k = torch.randn(B, S, Hkv, D, device="cuda", dtype=dt, generator=g)
v = k[..., :Dv]
draw = torch.randint(S // 2, S + 1, (B,), device="cuda", dtype=torch.int32, generator=g)
flush = l2_flusher()
buf = torch.zeros(8 * 4096, dtype=torch.int64, device="cuda")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


for varlen in os.environ.get("VARLEN", "0,1").split(","):
    lens = draw if varlen == "1" else None
    for mode in os.environ.get("ORDERS", "auto,launch").split(","):
        C.set_decode_order(mode)
        ffpa_attn.decode(q, k, v, cache_seqlens=lens)
        runs = []
        for rep in range(5):
            buf.zero_()
            flush()
            torch.cuda.synchronize()
            C._set_decode_trace(buf.data_ptr())
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            ffpa_attn.decode(q, k, v, cache_seqlens=lens)
            e.record()
            torch.cuda.synchronize()
            C._set_decode_trace(0)
            t = buf.view(-1, 8).cpu()
            t = t[t[:, 0] > 0]
            runs.append((s.elapsed_time(e) * 1e3, t))
        call_us, t = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
        t0 = int(t[:, 0].min())
        us = lambda col: [(int(x) - t0) / 1e3 for x in t[:, col]]  # noqa: E731
        st, first, last, stored, done = (us(c) for c in range(5))
        span = max(done)
        print(f"varlen={varlen} order={mode}: call {call_us:.1f} us (events), kernel span {span:.1f} us, {len(st)} blocks "
              f"on {len(set(t[:, 5].tolist()))} SMs; tiles min {int(t[:, 6].min())} max {int(t[:, 6].max())}")
        for name, xs in (("start", st), ("first tile", first), ("last tile", last), ("stored", stored),
                         ("done", done)):
            print(f"  {name:10s} min {min(xs):6.1f} p10 {pct(xs, .1):6.1f} med {statistics.median(xs):6.1f} "
                  f"p90 {pct(xs, .9):6.1f} max {max(xs):6.1f}")
        order = sorted(range(len(last)), key=lambda i: last[i])
        row = lambda i: f"b{i}/sm{int(t[i, 5])}/t{int(t[i, 6])}/seq{int(t[i, 7])}:{first[i]:.0f},{last[i]:.0f}"  # noqa: E731
        print("  first done:", " ".join(row(i) for i in order[:6]))
        print("  last done:", " ".join(row(i) for i in order[-10:]))
C.set_decode_order("auto")
