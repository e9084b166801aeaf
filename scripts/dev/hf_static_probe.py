"""Development probe: the Hugging Face Llama-style model of the bench with the static cache (transformers
compiles the step; a key-padding mask every step), plain SDPA vs sdpa_patched(): time per token (interleaved
rounds, as the bench; and attn_implementation="ffpa", the bench's third mode), whether the step replays a CUDA graph, and the GPU time per generated token by kernel
(the profiler over a 17-token generate, its prefill subtracted by a 1-token one); CPU=1: the host's self
time per generated token by op as well; OLD_LOOKUP=1: a fourth mode, session 30's registry lookup
(ffpa_registry_scan)."""
import collections
import contextlib
import os
import statistics
import sys
import time

import torch
import transformers

import ffpa_attn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_decode import hf_llama  # noqa: E402  (the bench's model, prompt and generate() arguments)

model, prompt, kw = hf_llama(torch, transformers)
kw["cache_implementation"] = os.environ.get("CACHE", "static") or None
print("transformers", transformers.__version__, "compile config:", getattr(model.generation_config, "compile_config", None))
BACKEND = ffpa_attn.register_transformers("ffpa")


@contextlib.contextmanager
def ffpa_backend():  # attn_implementation="ffpa": the K/V heads are not repeated for it
    model.set_attn_implementation(BACKEND)
    try:
        yield
    finally:
        model.set_attn_implementation("sdpa")


CTX = {"sdpa": None, "ffpa": ffpa_attn.sdpa_patched, "ffpa_backend": ffpa_backend}


@contextlib.contextmanager
def ffpa_registry_scan():
    """sdpa_patched() with session 30's registry lookup (under dynamo it compared the registry tuple with
    the index's and scanned it, so every field of every entry became a guard): OLD_LOOKUP=1, an A/B of
    session 31's fix in one process."""
    from ffpa_attn import _ops, _spec
    new_lookup = _ops.kernel_families

    def old_lookup(op, E, Ev, dtype=None, acc="auto", level=None, cc=None):
        want_acc = "fp32" if acc == "auto" else acc
        index = _ops._INDEX if not torch.compiler.is_compiling() or _ops._INDEX_OF is _ops._REGISTRY else None
        found = set()
        for dt in ((dtype,) if dtype is not None else _spec.B16_TORCH):
            if index is not None:
                lines = index.get((op, E, Ev, dt, want_acc), ())
            else:
                lines = tuple((fam, arch, lv) for (o, fam, arch, d, a, e, ev, lv) in _ops._REGISTRY
                              if (o, e, ev, d, a) == (op, E, Ev, dt, want_acc))
            for fam, arch, lv in lines:
                if (level is None or lv == level) and (cc is None or _spec.arch_runs(arch, cc)):
                    found.add(fam)
        return tuple(f for f in _ops.ALL_FAMILIES if f in found)

    _ops._INDEX_OF = _ops._REGISTRY  # as session 30 set it (_index() at import)
    _ops.kernel_families = old_lookup
    try:
        with ffpa_attn.sdpa_patched():
            yield
    finally:
        _ops.kernel_families = new_lookup


if os.environ.get("OLD_LOOKUP", "0") == "1":
    CTX["ffpa_registry_scan"] = ffpa_registry_scan


def gen(n):
    model.generate(prompt, max_new_tokens=n, min_new_tokens=n, **kw)


def per_token():
    gen(4)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    gen(33)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    gen(1)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return ((t1 - t0) - (t2 - t1)) / 32 * 1e3


def kernels(n, cpu=False):
    """GPU time by kernel (cpu=False) or host self time by op (cpu=True) over a generate() of n tokens."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        gen(n)
        torch.cuda.synchronize()
    per = collections.Counter()
    cnt = collections.Counter()
    graphs = 0
    for e in prof.key_averages():
        if "cudaGraphLaunch" in e.key:
            graphs += e.count
        if cpu and e.device_type == torch.autograd.DeviceType.CPU:
            per[e.key[:90]] += e.self_cpu_time_total
            cnt[e.key[:90]] += e.count
        elif not cpu and e.device_type == torch.autograd.DeviceType.CUDA:
            t = getattr(e, "device_time_total", None) or e.cuda_time_total
            per[e.key[:90]] += t
            cnt[e.key[:90]] += e.count
    return per, cnt, graphs


times = {k: [] for k in CTX}
with torch.inference_mode():
    for name, ctx in CTX.items():  # compile both once
        with (ctx() if ctx else torch.autograd.profiler.record_function("x")):
            gen(8)
    for _ in range(int(os.environ.get("ROUNDS", "3"))):
        for name, ctx in CTX.items():
            with (ctx() if ctx else torch.autograd.profiler.record_function("x")):
                times[name].append(per_token())
    print({k: [round(x, 3) for x in v] for k, v in times.items()})
    print("ms per token (median):", {k: round(statistics.median(v), 3) for k, v in times.items()})
    views = (False, True) if os.environ.get("CPU", "0") == "1" else (False,)  # CPU=1: host time by op too
    for (name, ctx), cpu in [(kv, c) for c in views for kv in CTX.items()]:
        with (ctx() if ctx else torch.autograd.profiler.record_function("x")):
            gen(4)
            p17, c17, g17 = kernels(17, cpu)
            p1, c1, _ = kernels(1, cpu)
        what = "host self us" if cpu else "GPU us"
        print(f"== {name}: cudaGraphLaunch x{g17}; {what} per generated token by {'op' if cpu else 'kernel'} (top 25)")
        tot = 0.0
        rows = []
        for k in p17:
            d = (p17[k] - p1.get(k, 0.0)) / 16
            n = (c17[k] - c1.get(k, 0)) / 16
            tot += d
            rows.append((d, n, k))
        for d, n, k in sorted(rows, reverse=True)[:25]:
            print(f"  {d:9.1f} us  x{n:5.1f}  {k}")
        print(f"  total {tot:.1f} us per token")
print("dynamo counters:", {k: dict(v) for k, v in torch._dynamo.utils.counters.items() if v})
