"""The README's quick start runs as written: every ```python block of its "Quick start" section,
in order, in one namespace. On the CPU through the fallback, with the one line that sets the
device and length changed to small CPU sizes; on a CUDA device exactly as written, and then no call
may fall back (the README promises that these calls run on our kernels)."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch

import ffpa_attn

README = Path(__file__).resolve().parents[1] / "README.md"
DEVICE_LINE = 'device, L = "cuda", 4096'


def quick_start_blocks() -> list[str]:
    text = README.read_text()
    m = re.search(r"^## Quick start\n(.*?)(?=^## )", text, flags=re.M | re.S)
    assert m, "README.md has no '## Quick start' section"
    blocks = re.findall(r"^```python\n(.*?)^```", m.group(1), flags=re.M | re.S)
    assert blocks, "the quick start has no python block"
    return blocks


def run_blocks(blocks: list[str]) -> tuple[dict, list]:
    ns: dict = {"__name__": "readme_quick_start"}
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for i, block in enumerate(blocks):
            exec(compile(block, f"README.md quick start block {i + 1}", "exec"), ns)
    return ns, rec


def check_results(ns: dict, L: int) -> None:
    assert ns["out"].shape == (2, 16, L, 512) and ns["lse"].shape == (2, 16, L)
    assert ns["y"].shape == (2, L, 1024) and ns["o1"].shape == (2, 1, 16, 512)
    for name in ("out", "lse", "y", "o1"):
        assert torch.isfinite(ns[name]).all(), name
    assert not ffpa_attn.is_sdpa_patched()


def test_quick_start_on_cpu(capsys):
    blocks = quick_start_blocks()
    assert sum(b.count(DEVICE_LINE) for b in blocks) == 1, f"the quick start must set `{DEVICE_LINE}` once"
    ns, _ = run_blocks([b.replace(DEVICE_LINE, 'device, L = "cpu", 64') for b in blocks])
    check_results(ns, 64)
    printed = capsys.readouterr().out
    assert "not on our kernels: inputs are on 'cpu'" in printed  # strict=True raised, as the comment says
    assert "'version'" in printed


@pytest.mark.requires_cuda
def test_quick_start_on_gpu_as_written(capsys):
    ns, rec = run_blocks(quick_start_blocks())
    check_results(ns, 4096)
    printed = capsys.readouterr().out
    assert "not on our kernels" not in printed, printed
    fallbacks = [str(w.message) for w in rec if issubclass(w.category, ffpa_attn.FFPAFallbackWarning)]
    assert not fallbacks, fallbacks
    # spot-check the first result against SDPA on the same inputs
    q, k, v = ns["q"], ns["k"], ns["v"]
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert (ns["out"].float() - ref.float()).abs().max().item() < 2e-2
