"""Development probe: where a decode call's time goes, ours against SDPA cuDNN / flash on the same
shape (bf16, L2 evicted before every call). Per shape: the call time by CUDA events (median) and
each kernel's device time by the torch profiler (mean over the calls), so the split kernel, the
merge and the gap between them can be told apart. Args: shapes as BxSxHqxHkvxD[xDv]; env SPLITS
forces ffpa's split count; NO_PEER=1 times ffpa alone; VARLEN=1 gives ffpa per-sequence lengths drawn
as bench_decode.py draws them ([S/2, S], seeded by B x S; no peer then), ORDERS="launch balanced" times
ffpa under each of those set_decode_order modes; TIMELINE=1 adds one call's kernels on the host's clock
(the GPU idle after the flush: host time shows as the first kernel's start)."""
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import ffpa_attn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from bench_timing import l2_flusher  # noqa: E402

flush = l2_flusher()  # FFPA_BENCH_FLUSH=write: the memset flush
splits = int(os.environ["SPLITS"]) if os.environ.get("SPLITS") else None


def events_ms(fn, n=30):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(n):
        flush()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    return statistics.median(ts)


def kernels_us(fn, n=10):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            flush()
            fn()
        torch.cuda.synchronize()
    acc = {}
    for ev in prof.events():
        if ev.device_time <= 0 or any(w in ev.name.lower() for w in ("zero", "fill", "reduce_kernel")):
            continue
        name = ev.name[:60]
        acc[name] = acc.get(name, 0.0) + ev.device_time / n
    return acc


def timeline(fn):
    """One call after a flush, as the profiler saw it: each GPU activity's start and end (us) from the
    end of the flush's last kernel, and the host's ffpa / op ranges on the same clock."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            flush()
            torch.cuda.synchronize()
            with torch.profiler.record_function("call"):
                fn()
            torch.cuda.synchronize()
    evs = sorted((e for e in prof.events() if e.time_range.end > e.time_range.start), key=lambda e: e.time_range.start)
    calls = [e for e in evs if e.name == "call"]
    last = calls[-1]
    gpu = [e for e in evs if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.start >= last.time_range.start]
    t0 = last.time_range.start
    rows = [f"host call {0:.1f}..{last.time_range.end - t0:.1f}"]
    rows += [f"{e.name[:50]} {e.time_range.start - t0:.1f}..{e.time_range.end - t0:.1f}" for e in gpu]
    return "; ".join(rows)


for shape in sys.argv[1:]:
    dims = [int(x) for x in shape.split("x")]
    B, S, Hq, Hkv, D = dims[:5]
    Dv = dims[5] if len(dims) > 5 else D
    k = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
    v = k[..., :Dv] if D != Dv else torch.randn(B, S, Hkv, Dv, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(B, 1, Hq, D, device="cuda", dtype=torch.bfloat16)
    nbytes = B * S * Hkv * (D if D != Dv else D + Dv) * 2
    varlen = os.environ.get("VARLEN") == "1"
    seqlens = None
    if varlen:
        lens = torch.randint(S // 2, S + 1, (B,), generator=torch.Generator().manual_seed(B * S)).tolist()
        seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
        nbytes = nbytes * sum(lens) // (B * S)
    fns = {}
    for order in os.environ.get("ORDERS", "auto").split():
        def ffpa_fn(order=order):
            ffpa_attn._C.set_decode_order(order)
            return ffpa_attn.decode(q, k, v, cache_seqlens=seqlens, num_splits=splits)
        fns[f"ffpa:{order}"] = ffpa_fn
    if D == Dv and not os.environ.get("NO_PEER") and not varlen:
        qs, ks, vs = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            def fn(be=be):
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(qs, ks, vs, enable_gqa=True)
            try:
                fn()
                fns[name] = fn
            except RuntimeError:
                pass
    print(f"== {shape}: {nbytes / 2**20:.0f} MiB of K/V, splits {splits or 'auto'}", flush=True)
    for name, fn in fns.items():
        us = events_ms(fn)
        ks_ = kernels_us(fn)
        tot = sum(ks_.values())
        parts = "; ".join(f"{n_} {t:.1f}" for n_, t in sorted(ks_.items(), key=lambda x: -x[1]))
        print(f"  {name:14s} call {us:7.1f} us ({nbytes / us / 1e3:.0f} GB/s); kernels {tot:7.1f} us "
              f"({nbytes / tot / 1e3:.0f} GB/s): {parts}", flush=True)
        if os.environ.get("TIMELINE") == "1":
            print(f"    timeline (us from the call's start on the host): {timeline(fn)}", flush=True)
