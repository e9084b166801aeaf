"""Development probe: one decode shape at several forced split counts (and auto), timed by the bench's
interleaved timer in one process (bench_timing.time_interleaved: L2 flushed by a read before every call,
medians). Args: shapes as BxSxHqxHkvxD[xDv]; env SPLITS="0 1 2" (0 = auto), VARLEN=1 draws per-sequence
lengths as bench_decode.py does ([S/2, S], seeded by B x S), PAGED=<page size> the same cache as a page pool in a
shuffled block table (PAGE_ORDER=ascending: pages in pool order), DTYPE=bf16|fp16, ITERS_MS (default 300).
(Session 31's figures in docs/tuning_decode.md came from its first form: rounds of 10 calls in a fixed
order, medians; the same CUDA events and flush.)"""
import os
import sys

import torch

import ffpa_attn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from bench_timing import l2_flusher, time_interleaved  # noqa: E402

flush = l2_flusher()
counts = [int(x) for x in os.environ.get("SPLITS", "0 1 2").split()]
iters_ms = float(os.environ.get("ITERS_MS", "300"))
dtype = torch.float16 if os.environ.get("DTYPE") == "fp16" else torch.bfloat16
varlen = os.environ.get("VARLEN") == "1"

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
    table = None
    page = int(os.environ.get("PAGED", "0"))
    if page:
        pages = B * S // page  # PAGE_ORDER=ascending: the pool in table order (else shuffled, as the bench)
        order = torch.arange(pages, device="cuda", dtype=torch.int32) if os.environ.get("PAGE_ORDER") == "ascending" \
            else torch.randperm(pages, device="cuda", dtype=torch.int32)
        table = order.view(B, S // page)
        k = k.reshape(B * S // page, page, Hkv, D)
        v = k[..., :Dv] if D != Dv else v.reshape(B * S // page, page, Hkv, Dv)
        if seqlens is None:
            seqlens = torch.full((B,), S, dtype=torch.int32, device="cuda")
    fns = {c: (lambda c=c: ffpa_attn.decode(q, k, v, cache_seqlens=seqlens, block_table=table, num_splits=c or None))
           for c in counts}
    got = dict(zip(counts, (1e3 * t for t in time_interleaved(list(fns.values()), 30, iters_ms, flush))))
    cells = ", ".join(f"{'auto' if c == 0 else c}: {t:.1f} us ({nbytes / t / 1e3:.0f} GB/s)" for c, t in got.items())
    print(f"{shape}{' varlen' if varlen else ''}{f' paged{page}' if page else ''} ({nbytes / 2**20:.0f} MiB): {cells}", flush=True)
