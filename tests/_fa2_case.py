"""Shared by the FA-2 GPU tests (test_fa2_gpu.py, test_fa2_hopper_gpu.py): what the build compiled, the
tensor-core paths checked on this GPU (the `mma` fixture), and running / checking one FA-2 call against the
float64 reference (tests/_reference.py)."""
from __future__ import annotations

import pytest
import torch

import ffpa_attn
from conftest import cuda_available
from _reference import assert_close_to_reference, poison_allocator
from ffpa_attn import _ops

HAS_GPU = cuda_available  # a CUDA device of sm_80+ and the extension (tests/conftest.py)
INFO = ffpa_attn.build_info() if HAS_GPU else {}
FA2_PAIRS = sorted(tuple(p) for p in INFO.get("head_dim_pairs", {}).get("fa2", []))
FA2_DIMS = sorted(e for e, ev in FA2_PAIRS if e == ev)
ODD_PAIRS = [p for p in FA2_PAIRS if p[0] != p[1]]

# The module marks of both test files: GPU tests, skipped without FA-2 kernels in the build.
FA2_MARKS = [
    pytest.mark.gpu,
    pytest.mark.requires_cuda,  # skipped without a device, failed where the extension is expected but missing
    pytest.mark.skipif(HAS_GPU and not FA2_PAIRS, reason="no FA-2 kernel in this build (build_info()['head_dim_pairs'])"),
]

DTYPES = [torch.float16, torch.bfloat16]
DT_NAME = {torch.float16: "float16", torch.bfloat16: "bfloat16"}
CAUSAL = {"none": (False, "top_left"), "top_left": (True, "top_left"), "bottom_right": (True, "bottom_right")}
HEADS = [(4, 4), (4, 2), (4, 1)]  # MHA, GQA, MQA


# The FA-2 tensor-core paths checked on this GPU: "auto" (the wgmma kernel on compute capability
# 9.0 where the build has sm_90a code, else mma.sync) and, where auto means wgmma, "sync" too, so
# both kernels of the family are checked on a Hopper GPU.
WGMMA_HERE = HAS_GPU and torch.cuda.get_device_capability() == (9, 0) and "90a" in INFO.get("archs", [])
MMA_PATHS = ["auto", "sync"] if WGMMA_HERE else ["auto"]


@pytest.fixture(params=MMA_PATHS)
def mma(request):
    """Runs the test on one FA-2 tensor-core path (ffpa_attn.set_fa2_mma), then restores auto."""
    ffpa_attn.set_fa2_mma(request.param)
    yield request.param
    ffpa_attn.set_fa2_mma("auto")


def expected_mma(mma, e, ev):
    """The instruction kernel_info should report for (E, Ev) on path `mma`."""
    return "wgmma" if WGMMA_HERE and mma == "auto" else "mma.sync"


def need(dtype, d, dv=None):
    pair = (d, d if dv is None else dv)
    if DT_NAME[dtype] not in INFO.get("dtypes", []) or pair not in FA2_PAIRS:
        pytest.skip(f"{dtype} head dims {pair} not compiled for fa2 in this build")


def run_fa2(q, k, v, causal="none", attn_mask=None, **kw):
    """forward() on the FA-2 kernel (strict: no fallback), outputs poisoned before the run."""
    chosen = _ops.chosen_kernel(DT_NAME[q.dtype], q.shape[-1], v.shape[-1])["family"]
    assert chosen == "fa2"
    B, Hq, L, _ = q.shape
    poison_allocator(((B, Hq, L, v.shape[-1]), q.dtype), ((B, Hq, L), torch.float32))
    is_causal, align = CAUSAL[causal]
    out, lse = ffpa_attn.forward(q, k, v, attn_mask=attn_mask, is_causal=is_causal, causal_align=align,
                                 enable_gqa=q.shape[1] != k.shape[1], strict=True, return_lse=True, **kw)
    torch.cuda.synchronize()
    return out, lse


def check(out, lse, q, k, v, causal="none", attn_mask=None, what="", **kw):
    is_causal, align = CAUSAL[causal]
    assert out.shape == q.shape[:-1] + (v.shape[-1],) and out.dtype == q.dtype
    return assert_close_to_reference(out, q, k, v, is_causal=is_causal, causal_bottom_right=align == "bottom_right",
                                     attn_mask=attn_mask, lse=lse, what=what, **kw)


def _first_dtype(d=128):
    for dt in DTYPES:
        if DT_NAME[dt] in INFO.get("dtypes", []) and (d, d) in FA2_PAIRS:
            return dt
    pytest.skip(f"D={d} not compiled for fa2")
