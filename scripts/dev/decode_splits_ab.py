"""Development probe: one decode shape at several forced split counts (and auto), timed interleaved in
one process (CUDA events, L2 flushed by a read before every call, medians of ROUNDS rounds of ITERS
calls each). Args: shapes as BxSxHqxHkvxD[xDv]; env SPLITS="0 1 2" (0 = auto), VARLEN=1 draws
per-sequence lengths as bench_decode.py does ([S/2, S], seeded by B x S), DTYPE=bf16|fp16."""
import os
import statistics
import sys

import torch

import ffpa_attn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from bench_timing import l2_flusher  # noqa: E402

flush = l2_flusher()
counts = [int(x) for x in os.environ.get("SPLITS", "0 1 2").split()]
rounds, iters = int(os.environ.get("ROUNDS", "5")), int(os.environ.get("ITERS", "10"))
dtype = torch.float16 if os.environ.get("DTYPE") == "fp16" else torch.bfloat16
varlen = os.environ.get("VARLEN") == "1"


def time_us(fn):
    ts = []
    for _ in range(iters):
        flush()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    return statistics.median(ts)


for shape in sys.argv[1:]:
    dims = [int(x) for x in shape.split("x")]
    B, S, Hq, Hkv, D = dims[:5]
    Dv = dims[5] if len(dims) > 5 else D
    k = torch.randn(B, S, Hkv, D, device="cuda", dtype=dtype)
    v = k[..., :Dv] if D != Dv else torch.randn(B, S, Hkv, Dv, device="cuda", dtype=dtype)
    q = torch.randn(B, 1, Hq, D, device="cuda", dtype=dtype)
    nbytes = B * S * Hkv * (D if D != Dv else D + Dv) * 2
    seqlens = None
    if varlen:
        lens = torch.randint(S // 2, S + 1, (B,), generator=torch.Generator().manual_seed(B * S)).tolist()
        seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
        nbytes = nbytes * sum(lens) // (B * S)
    fns = {c: (lambda c=c: ffpa_attn.decode(q, k, v, cache_seqlens=seqlens, num_splits=c or None)) for c in counts}
    for fn in fns.values():
        fn()
    got = {c: [] for c in counts}
    for _ in range(rounds):
        for c, fn in fns.items():
            got[c].append(time_us(fn))
    cells = ", ".join(f"{'auto' if c == 0 else c}: {statistics.median(t):.1f} us "
                      f"({nbytes / statistics.median(t) / 1e3:.0f} GB/s)" for c, t in got.items())
    print(f"{shape}{' varlen' if varlen else ''} ({nbytes / 2**20:.0f} MiB): {cells}", flush=True)
