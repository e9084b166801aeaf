"""CPU tests of forward's causal_align (no GPU, no compiled extension needed): validation, the
bottom-right fallback (SDPA with the equivalent bool mask) against the float64 reference, its
zero-size inputs, autograd, strict mode and nested tensors, torch.compile(fullgraph=True). Split
from test_api_cpu.py."""

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import ffpa_attn
from _cpu_helpers import SDPA, TOL, ZERO_SIZE, ref_attention, rn

# ===================================================================== causal_align
ALIGN_SHAPES = {
    # q, k, v, enable_gqa
    "L_lt_S": ((2, 3, 5, 8), (2, 3, 9, 8), (2, 3, 9, 8), False),
    "L_gt_S": ((2, 3, 9, 8), (2, 3, 5, 8), (2, 3, 5, 8), False),
    "L_eq_S": ((2, 3, 7, 8), (2, 3, 7, 8), (2, 3, 7, 8), False),
    "L1_S9": ((1, 2, 1, 8), (1, 2, 9, 8), (1, 2, 9, 8), False),
    "L9_S1": ((1, 2, 9, 8), (1, 2, 1, 8), (1, 2, 1, 8), False),
    "gqa": ((2, 4, 11, 8), (2, 2, 6, 8), (2, 2, 6, 12), True),
    "3d": ((3, 4, 8), (3, 10, 8), (3, 10, 8), False),
    "2d": ((10, 8), (4, 8), (4, 8), False),
    "5d": ((2, 2, 3, 6, 8), (2, 2, 3, 4, 8), (2, 2, 3, 4, 8), False),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16],
                         ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("shape_id", list(ALIGN_SHAPES))
def test_bottom_right_fallback_matches_reference(gen, shape_id, dtype):
    qs, ks, vs, gqa = ALIGN_SHAPES[shape_id]
    q, k, v = rn(gen, *qs, dtype=dtype), rn(gen, *ks, dtype=dtype), rn(gen, *vs, dtype=dtype)
    out, lse = ffpa_attn.forward(q, k, v, is_causal=True, causal_align="bottom_right",
                                 enable_gqa=gqa, return_lse=True)
    ref_out, ref_lse = ref_attention(q, k, v, is_causal=True, enable_gqa=gqa,
                                     causal_bottom_right=True)
    assert out.shape == ref_out.shape and out.dtype == dtype
    assert lse.shape == out.shape[:-1] and lse.dtype == torch.float32 and lse.is_contiguous()
    torch.testing.assert_close(out.double(), ref_out, **TOL[dtype])
    dead = torch.isneginf(ref_lse)
    L, S = qs[-2], ks[-2]
    assert bool(dead.any()) == (L > S)  # the first L - S rows see no key
    assert (out[dead] == 0).all()  # exactly 0, not NaN
    assert torch.isneginf(lse[dead]).all()
    torch.testing.assert_close(lse[~dead].double(), ref_lse[~dead], atol=1e-5, rtol=1e-5)
    # the same call without return_lse gives the same output
    torch.testing.assert_close(
        ffpa_attn.forward(q, k, v, is_causal=True, causal_align="bottom_right", enable_gqa=gqa),
        out, atol=0, rtol=0,
    )


def test_bottom_right_is_sdpa_with_the_shifted_tril(gen):
    q, k, v = rn(gen, 2, 3, 6, 8), rn(gen, 2, 3, 10, 8), rn(gen, 2, 3, 10, 8)
    keep = torch.ones(6, 10, dtype=torch.bool).tril(diagonal=4)
    out = ffpa_attn.forward(q, k, v, is_causal=True, causal_align="bottom_right")
    torch.testing.assert_close(out, SDPA(q, k, v, attn_mask=keep), atol=0, rtol=0)
    top_left = ffpa_attn.forward(q, k, v, is_causal=True)
    assert not torch.allclose(out, top_left)  # really a different mask when L != S


def test_causal_align_same_when_L_equals_S(gen):
    q, k, v = rn(gen, 2, 3, 7, 8), rn(gen, 2, 3, 7, 8), rn(gen, 2, 3, 7, 8)
    a, la = ffpa_attn.forward(q, k, v, is_causal=True, causal_align="bottom_right", return_lse=True)
    b, lb = ffpa_attn.forward(q, k, v, is_causal=True, causal_align="top_left", return_lse=True)
    torch.testing.assert_close(a, b, atol=0, rtol=0)
    torch.testing.assert_close(la, lb, atol=0, rtol=0)


def test_causal_align_ignored_without_is_causal(gen):
    q, k, v = rn(gen, 2, 3, 9, 8), rn(gen, 2, 3, 5, 8), rn(gen, 2, 3, 5, 8)
    mask = torch.rand(9, 5, generator=gen) > 0.3
    mask[:, 0] = True
    for kw in ({}, dict(attn_mask=mask)):
        expected = SDPA(q, k, v, **kw)
        for align in ("top_left", "bottom_right"):
            out = ffpa_attn.forward(q, k, v, causal_align=align, **kw)
            torch.testing.assert_close(out, expected, atol=0, rtol=0)


def test_causal_align_keeps_sdpa_mask_and_causal_rule(gen):
    q, k, v = rn(gen, 2, 3, 4, 8), rn(gen, 2, 3, 5, 8), rn(gen, 2, 3, 5, 8)
    with pytest.raises(ValueError, match="'attn_mask' and 'is_causal'"):
        ffpa_attn.forward(q, k, v, attn_mask=torch.ones(4, 5, dtype=torch.bool), is_causal=True,
                          causal_align="bottom_right")


@pytest.mark.parametrize("case", list(ZERO_SIZE))
def test_bottom_right_zero_size_inputs(gen, case):
    qs, ks, vs = ZERO_SIZE[case]
    q, k, v = rn(gen, *qs), rn(gen, *ks), rn(gen, *vs)
    L, S = qs[-2], ks[-2]
    keep = torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L)
    with sdpa_kernel(SDPBackend.MATH):  # never the default CPU kernel: H0 kills the process
        expected = SDPA(q, k, v, attn_mask=keep)
    out, lse = ffpa_attn.forward(q, k, v, is_causal=True, causal_align="bottom_right",
                                 return_lse=True)
    assert out.shape == expected.shape and lse.shape == out.shape[:-1]
    torch.testing.assert_close(out, expected, equal_nan=True)
    if case == "S0":
        assert torch.isneginf(lse).all()


def test_bottom_right_fallback_autograd_matches_sdpa_with_mask(gen):
    q = rn(gen, 2, 4, 9, 8).requires_grad_()
    k = rn(gen, 2, 2, 5, 8).requires_grad_()
    v = rn(gen, 2, 2, 5, 8).requires_grad_()
    gout = rn(gen, 2, 4, 9, 8)
    out = ffpa_attn.forward(q, k, v, is_causal=True, causal_align="bottom_right", enable_gqa=True)
    grads = torch.autograd.grad(out, (q, k, v), gout)
    keep = torch.ones(9, 5, dtype=torch.bool).tril(diagonal=-4)
    out_ref = SDPA(q, k, v, attn_mask=keep, enable_gqa=True)
    for a, b in zip(grads, torch.autograd.grad(out_ref, (q, k, v), gout)):
        torch.testing.assert_close(a, b)


def test_bottom_right_strict_and_nested(gen):
    q, k, v = rn(gen, 1, 2, 5, 8), rn(gen, 1, 2, 6, 8), rn(gen, 1, 2, 6, 8)
    with pytest.raises(NotImplementedError, match="'cpu'"):
        ffpa_attn.forward(q, k, v, is_causal=True, causal_align="bottom_right", strict=True)
    qn = torch.nested.nested_tensor([rn(gen, 2, 5, 8), rn(gen, 2, 3, 8)], layout=torch.jagged)
    kn = torch.nested.nested_tensor([rn(gen, 2, 6, 8), rn(gen, 2, 4, 8)], layout=torch.jagged)
    with pytest.raises(NotImplementedError, match="bottom_right"):
        ffpa_attn.forward(qn, kn, kn, is_causal=True, causal_align="bottom_right")


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_bottom_right_fallback_compile_fullgraph(gen, backend):
    torch._dynamo.reset()

    def fn(q, k, v):
        return ffpa_attn.forward(q, k, v, is_causal=True, causal_align="bottom_right",
                                 enable_gqa=True, return_lse=True)

    q, k, v = rn(gen, 2, 4, 9, 8), rn(gen, 2, 2, 5, 8), rn(gen, 2, 2, 5, 8)
    eager = fn(q, k, v)
    compiled = torch.compile(fn, fullgraph=True, backend=backend)(q, k, v)
    for a, b in zip(compiled, eager):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
