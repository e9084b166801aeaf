"""Shared pieces of the bench tests: the bench module loaded from bench/bench.py, synthetic results and
table helpers, the matplotlib skip marker."""
import importlib.util
import os

import pytest

# Plotting tests need the bench extra (pip install --no-build-isolation ".[bench]"); the README's
# install and CI bring it, so these run there.
needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                      reason='needs matplotlib: pip install --no-build-isolation ".[bench]"')

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_PY = os.path.join(REPO, "bench", "bench.py")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _load_bench():
    spec = importlib.util.spec_from_file_location("ffpa_bench_under_test", BENCH_PY)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bench = _load_bench()

DEVICE = "NVIDIA H100 80GB HBM3 (synthetic)"
B, HQ, HKV, L, S = 1, 32, 8, 4096, 4096
DIMS = [320, 512, 1024]
KERNEL_SPEED = {"sdpa_efficient": 1.0, "ffpa_l1": 1.5, "ffpa_auto": 1.37}
BASE_MS = {320: 10.0, 512: 16.0, 1024: 33.0}
MISSING = ("ffpa_l1", "fp16", True, 1024)  # (kernel, dtype, causal, D) left out


def _synthetic():
    results = []
    for dtype, dscale in (("bf16", 1.0), ("fp16", 0.9)):
        for causal in (False, True):
            for D in DIMS:
                for kernel, speed in KERNEL_SPEED.items():
                    if (kernel, dtype, causal, D) == MISSING:
                        continue
                    ms = BASE_MS[D] * dscale / speed * (0.55 if causal else 1.0)
                    results.append({
                        "kernel": kernel, "dtype": dtype, "B": B, "Hq": HQ, "Hkv": HKV,
                        "L": L, "S": S, "D": D, "Dv": D, "causal": causal, "ms": ms,
                        "tflops": bench.compute_tflops(B, HQ, L, S, D, D, causal, ms),
                    })
    return {"device": DEVICE, "torch": "2.11.0", "cuda": "12.8",
            "date": "2025-01-02T03:04:05", "args": {"B": B}, "results": results}


def _find(data, kernel, dtype, causal, D):
    for r in data["results"]:
        if (r["kernel"], r["dtype"], r["causal"], r["D"]) == (kernel, dtype, causal, D):
            return r
    return None


def _row(md, label):
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == label:
            return cells[1:]
    raise AssertionError(f"row {label!r} not found in:\n{md}")


FA2_DIMS = [64, 128, 256]
FA2_SPEED = {"sdpa_flash": 1.0, "sdpa_efficient": 0.8, "sdpa_cudnn": 1.1, "fa2": 1.2}


def _fa2_synthetic(mask=None, extra_l1=False):
    results = []
    for D in FA2_DIMS + ([512] if extra_l1 else []):
        for kernel, speed in FA2_SPEED.items():
            if D > 256 and kernel in ("sdpa_flash", "fa2"):
                continue
            ms = D / 64 / speed
            r = {"kernel": kernel, "dtype": "bf16", "B": 8, "Hq": 16, "Hkv": 16, "L": 2048,
                 "S": 2048, "D": D, "Dv": D, "causal": False, "ms": ms,
                 "tflops": bench.compute_tflops(8, 16, 2048, 2048, D, D, False, ms)}
            if mask is not None:
                r["mask"] = mask
            results.append(r)
        if extra_l1 and D > 256:
            ms = D / 64 / 1.3
            results.append({"kernel": "ffpa_l1", "dtype": "bf16", "B": 8, "Hq": 16, "Hkv": 16,
                            "L": 2048, "S": 2048, "D": D, "Dv": D, "causal": False, "ms": ms,
                            "tflops": bench.compute_tflops(8, 16, 2048, 2048, D, D, False, ms),
                            **({"mask": mask} if mask else {})})
    return {"device": DEVICE, "torch": "2.11.0", "cuda": "13.0", "date": "2026-01-02T03:04:05",
            "results": results}
