"""FP8 (e4m3) inputs of ffpa_attn.forward on the GPU (ffpa_attn/_fp8.py): per-(batch, head) descales from
quantize_fp8, GQA, causal, against a float64 reference on the dequantized inputs, and which kernels run
the dequantized call (ours: FA-2 at 128, FFPA at 512; no FP8 kernel exists yet, issue #17), warned once.
Skipped without a CUDA GPU of compute capability >= 8.0."""
from __future__ import annotations

import pytest
import torch

import ffpa_attn
from conftest import cuda_available
from _reference import kernels_launched, reference

pytestmark = [pytest.mark.gpu, pytest.mark.requires_cuda]
_INFO = ffpa_attn.build_info() if cuda_available else {}


def _deq(x8, d):
    return x8.double() * d.double()[..., None, None]


@pytest.mark.parametrize("D", [128, 512])
@pytest.mark.parametrize("causal", [False, True])
def test_fp8_runs_on_our_kernels_dequantized(D, causal, record):
    family = "fa2" if D <= 256 else "ffpa_l1"
    if [D, D] not in [list(p) for p in _INFO.get("head_dim_pairs", {}).get(family, [])]:
        pytest.skip(f"{family} D={D} not compiled")
    g = torch.Generator(device="cuda").manual_seed(D)
    q, k, v = (torch.randn(2, h, n, D, device="cuda", generator=g) for h, n in ((8, 333), (2, 517), (2, 517)))
    (q8, qd), (k8, kd), (v8, vd) = (ffpa_attn.quantize_fp8(t) for t in (q, k, v))
    got = {}
    names = kernels_launched(lambda: got.update(out=ffpa_attn.forward(
        q8, k8, v8, is_causal=causal, enable_gqa=True, q_descale=qd, k_descale=kd, v_descale=vd)))
    out = got["out"]
    assert out.dtype == torch.bfloat16 and out.shape == (2, 8, 333, D)
    assert any("fa2_fwd" in n or "ffpa_fwd" in n for n in names), names  # our bf16 kernels, not SDPA's
    want, _ = reference(_deq(q8, qd), _deq(k8, kd), _deq(v8, vd), is_causal=causal)
    err = (out.double() - want).abs().max().item()
    assert err < 3e-2, err  # bf16 output of O(1) values
    assert any("FP8 (float8_e4m3fn)" in str(w.message) for w in record)
    with pytest.raises(ffpa_attn.FFPAUnsupportedError):
        ffpa_attn.forward(q8, k8, v8, enable_gqa=True, strict=True)
