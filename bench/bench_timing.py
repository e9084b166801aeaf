"""The benchmarks' timer (bench.py, bench_decode.py, bench_fp8.py and the scripts/dev probes).

CUDA events around single calls, interleaved across the kernels of one cell: after each kernel's
warm-up (``warmup_ms`` of untimed calls), the kernels are called in rounds (every kernel once per
round, in a freshly shuffled order, the L2 cache evicted untimed before every call) for about
``iters_ms`` per kernel, at least MIN_ROUNDS rounds; each kernel's figure is the median of its
rounds. Interleaving keeps clock and thermal drift out of the ratios; shuffling keeps any one
predecessor kernel from biasing a timing. torch is imported on use (the module loads without it).
"""
from __future__ import annotations

import statistics

MIN_ROUNDS, MAX_ROUNDS = 7, 200


def time_one(fn):
    import torch
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def l2_flusher(mode=None):
    """A closure that evicts the L2 cache untimed before a call, or None without CUDA.

    "read" (the default): a reduction over a 256 MB buffer, which leaves the L2 holding clean lines of
    that buffer. "write" (the timer's flush before session 28): a memset of the buffer, which leaves
    the L2 full of dirty lines; the timed call that follows then pays their write-back (up to the L2's
    size: 50-60 MB), which cost a 302 MiB read 10% of its bandwidth on an H100 (docs/measurements.md,
    "The L2 flush"). FFPA_BENCH_FLUSH overrides the mode (A/B of the two)."""
    import os

    mode = mode or os.environ.get("FFPA_BENCH_FLUSH", "read")
    if mode not in ("read", "write"):
        raise ValueError(f"FFPA_BENCH_FLUSH / mode: expected 'read' or 'write', got {mode!r}")
    import torch
    if not torch.cuda.is_available():
        return None
    buf = torch.zeros(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
    if mode == "write":
        return buf.zero_
    out = torch.empty((), dtype=torch.float32, device="cuda")
    return lambda: torch.sum(buf, dim=0, out=out)


def time_interleaved(fns, warmup_ms, iters_ms, flush=None, seed=0):
    """Median ms of each closure in ``fns`` (see the module docstring): per-kernel warm-up,
    then rounds that call every kernel once, in a freshly shuffled order each round (a fixed
    cyclic order gives every kernel the same predecessor, which biased one of two timings of
    the same kernel by 8%), with ``flush`` (the L2 eviction) run untimed before every call."""
    import random

    import torch
    if not fns:
        return []
    est = [max(time_one(fn), 1e-3) for fn in fns]
    for fn, t in zip(fns, est):
        for _ in range(max(1, round(warmup_ms / t))):
            fn()
    torch.cuda.synchronize()
    rounds = min(MAX_ROUNDS, max(MIN_ROUNDS, round(iters_ms / statistics.mean(est))))
    n = len(fns)
    events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
               for _ in range(rounds)] for _ in range(n)]
    rng = random.Random(seed)
    order = list(range(n))
    for r in range(rounds):
        rng.shuffle(order)
        for k in order:
            if flush is not None:
                flush()
            s, e = events[k][r]
            s.record()
            fns[k]()
            e.record()
    torch.cuda.synchronize()
    return [float(statistics.median(s.elapsed_time(e) for s, e in events[k])) for k in range(n)]


def timer_desc(warmup, iters):
    return (f"CUDA events, kernels interleaved in shuffled rounds, L2 evicted before each call "
            f"(warmup {warmup} ms each, about {iters} ms of rounds per kernel, "
            f"{MIN_ROUNDS}..{MAX_ROUNDS} rounds), median")
