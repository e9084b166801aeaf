"""The FA-2-style FP8 kernel's two ways to V^T (8-bit wgmma reads P V's B operand K-major only): its
own transpose (kernels/fa2_fwd_sm90_fp8.cuh `transpose`: V as it lies by TMA into a staging ring, the
producer warpgroup's warps 1..3 write the V^T stages; D = 64 and 128) and the launcher's pre-pass
(kernels/fp8_v_transpose.cuh, V^T in global memory), forced process-wide by
ffpa_attn._C.set_fp8_v_transpose. Each form against the float64 reference (test_fp8_gpu's checks:
relative RMSE, max error, LSE, poisoned outputs) over odd lengths, causal both alignments, GQA, masks and
strided views, and the two forms' outputs equal to the bit (the same V^T bytes reach the same wgmma);
which kernels ran (no pre-pass kernel where the kernel transposes); what kernel_info reports. The setter
itself: test_build.py."""
from __future__ import annotations

import pytest
import torch

import ffpa_attn
from _reference import kernels_launched, process_mode
from test_fp8_gpu import _FP8_DIMS, _case, _check_fp8_kernel, needs_fp8_kernel

pytestmark = [pytest.mark.gpu, pytest.mark.requires_cuda]
PREPASS = "fp8_v_transpose_kernel"
IN_KERNEL_DIMS = [d for d in (64, 128) if d in _FP8_DIMS]


@pytest.fixture(params=["kernel", "prepass"])
def form(request):
    with process_mode("fp8_v_transpose", request.param):
        yield request.param


def _in_kernel_dim(D):
    if D not in IN_KERNEL_DIMS:
        pytest.skip(f"FP8 kernel D={D} not compiled")
    return D


def _call(q8, k8, v8, qd, kd, vd, **kw):
    got = {}
    names = kernels_launched(lambda: got.update(res=ffpa_attn.forward(
        q8, k8, v8, enable_gqa=True, q_descale=qd, k_descale=kd, v_descale=vd, return_lse=True, strict=True, **kw)))
    return got["res"], names


@needs_fp8_kernel
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("L,S", [(1, 1), (17, 17), (255, 1000), (333, 517), (1000, 255), (130, 4097)])
@pytest.mark.parametrize("causal,align", [(False, "top_left"), (True, "top_left"), (True, "bottom_right")],
                         ids=["full", "causal", "causal_br"])
def test_each_form_against_the_reference(form, D, L, S, causal, align):
    """Key tiles of 192: S = 1 and 17 (one partial tile, the rest TMA's zero fill), 517 and 4097 (a partial
    last tile), 255 (a partial second tile)."""
    _check_fp8_kernel(1, 4, 2, L, S, _in_kernel_dim(D), causal, align, "per_head", torch.bfloat16, L + S + D)


@needs_fp8_kernel
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("mask_kind", ["bool_full", "additive_fp32", "blocksparse", "padding"])
def test_each_form_with_masks(form, D, mask_kind):
    """Masked tiles the block map skips are neither loaded nor transposed (producer, transposers and
    consumers walk the same tiles)."""
    _check_fp8_kernel(2, 4, 2, 300, 777, _in_kernel_dim(D), False, "top_left", "per_head", torch.float16,
                      D + len(mask_kind), mask_kind=mask_kind)


@needs_fp8_kernel
@pytest.mark.parametrize("D", [64, 128])
def test_forms_agree_to_the_bit_and_run_the_kernels_they_say(D):
    """Same inputs (GQA 8/2, causal, a strided V view), each form's output and LSE equal to the bit; the
    in-kernel form launches no pre-pass, the pre-pass form does; kernel_info says which."""
    import ffpa_attn._C as C

    D = _in_kernel_dim(D)
    (q8, qd), (k8, kd), (v8, vd) = _case(2, 8, 2, 700, 1500, D, seed=D)
    v_wide = torch.zeros(2, 2, 1500, 2 * D, device="cuda", dtype=torch.float8_e4m3fn)
    v_wide[..., D:] = v8
    v_view = v_wide[..., D:]  # row stride 2 D bytes: V as it lies is read through its strides
    res, ran = {}, {}
    for mode in ("kernel", "prepass"):
        with process_mode("fp8_v_transpose", mode):
            info = C.kernel_info("float8_e4m3fn", "fp8", D, D)
            assert info["fp8_vt_prepass"] == (mode == "prepass"), info
            res[mode], ran[mode] = _call(q8, k8, v_view, qd, kd, vd, is_causal=True)
    assert not any(PREPASS in n for n in ran["kernel"]), ran["kernel"]
    assert any(PREPASS in n for n in ran["prepass"]), ran["prepass"]
    for name in ran.values():
        assert any("fa2_fwd_fp8_kernel" in n for n in name), name
    torch.testing.assert_close(res["kernel"][0], res["prepass"][0], atol=0, rtol=0)
    torch.testing.assert_close(res["kernel"][1], res["prepass"][1], atol=0, rtol=0)
    assert C.kernel_info("float8_e4m3fn", "fp8", D, D)["fp8_vt_prepass"] is True  # auto: the pre-pass (faster today)


@needs_fp8_kernel
def test_d256_keeps_the_prepass():
    """D = 256 has no room for the staged V tiles beside three K stages: both modes run the pre-pass."""
    import ffpa_attn._C as C

    if 256 not in _FP8_DIMS:
        pytest.skip("FP8 kernel D=256 not compiled")
    (q8, qd), (k8, kd), (v8, vd) = _case(1, 2, 2, 200, 300, 256, seed=3)
    for mode in ("kernel", "auto"):
        with process_mode("fp8_v_transpose", mode):
            assert C.kernel_info("float8_e4m3fn", "fp8", 256, 256)["fp8_vt_prepass"] is True
            _, names = _call(q8, k8, v8, qd, kd, vd)
            assert any(PREPASS in n for n in names), names
