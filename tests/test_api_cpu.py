"""CPU tests of the Python API of ffpa_attn (no GPU, no compiled extension needed).

* fallback path: parity with the original torch SDPA and with an independent float64
  reference over a grid of layouts / dtypes / masks; return_lse; warnings; strict;
* SDPA leniency we must keep (things SDPA accepts, we accept);
* patch_sdpa / unpatch_sdpa / sdpa_patched;
* causal_align: test_causal_align_cpu.py;
* torch.compile(fullgraph=True).

The kernel path (routing, masks to the kernel) against a CPU mock of the op is in
test_kernel_path_cpu.py.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import ffpa_attn
from _cpu_helpers import SDPA, TOL, ZERO_SIZE, fallback_warnings, ref_attention, rn
from ffpa_attn import FFPAFallbackWarning, FFPAUnsupportedError, _ops


# ============================================================== fallback: parity grid
# (q, k, v, enable_gqa)
SHAPES = {
    "4d": ((2, 3, 17, 16), (2, 3, 33, 16), (2, 3, 33, 16), False),
    "3d": ((3, 17, 8), (3, 33, 8), (3, 33, 8), False),
    "5d": ((2, 2, 3, 17, 8), (2, 2, 3, 33, 8), (2, 2, 3, 33, 8), False),
    "2d": ((17, 8), (33, 8), (33, 8), False),
    "L_gt_S": ((1, 2, 33, 8), (1, 2, 17, 8), (1, 2, 17, 8), False),
    "L1": ((2, 2, 1, 8), (2, 2, 17, 8), (2, 2, 17, 8), False),
    "S1": ((2, 2, 17, 8), (2, 2, 1, 8), (2, 2, 1, 8), False),
    "gqa4d": ((2, 4, 17, 8), (2, 2, 33, 8), (2, 2, 33, 8), True),
    "gqa5d": ((2, 2, 6, 17, 8), (2, 2, 3, 33, 8), (2, 2, 3, 33, 8), True),
    "gqa3d": ((4, 17, 8), (1, 33, 8), (1, 33, 8), True),
    "Ev_ne_E": ((2, 3, 17, 8), (2, 3, 33, 8), (2, 3, 33, 12), False),
    "bcast_batch": ((2, 3, 17, 8), (1, 3, 33, 8), (1, 3, 33, 8), False),
    "bcast_kv_heads": ((2, 4, 17, 8), (2, 1, 33, 8), (2, 1, 33, 8), False),
    "q3d_kv4d": ((3, 17, 8), (2, 3, 33, 8), (2, 3, 33, 8), False),
}
MASKS = ["none", "causal", "bool", "float"]
DTYPES = [torch.float32, torch.float64, torch.bfloat16]


def _make_mask(g, kind, q_shape, k_shape, dtype):
    L, S = q_shape[-2], k_shape[-2]
    if kind in ("none", "causal"):
        return None
    lead = q_shape[-3:-2] if len(q_shape) >= 3 else ()
    if kind == "bool":
        m = torch.rand((L, S), generator=g) > 0.4
        m[:, 0] = True  # no fully masked row (SDPA backends disagree on those)
        return m
    return rn(g, *lead, L, S, dtype=dtype)  # float mask, (Hq, L, S) broadcast


@pytest.mark.parametrize("scale", [None, 0.3], ids=["scale_default", "scale_0.3"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("shape_id", list(SHAPES))
def test_fallback_parity_grid(shape_id, mask_kind, dtype, scale, record):
    qs, ks, vs, gqa = SHAPES[shape_id]
    g = torch.Generator().manual_seed(101)
    q, k, v = rn(g, *qs, dtype=dtype), rn(g, *ks, dtype=dtype), rn(g, *vs, dtype=dtype)
    mask = _make_mask(g, mask_kind, qs, ks, dtype)
    causal = mask_kind == "causal"
    kw = dict(attn_mask=mask, is_causal=causal, scale=scale, enable_gqa=gqa)

    out = ffpa_attn.forward(q, k, v, **kw)
    expected = SDPA(q, k, v, **kw)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    torch.testing.assert_close(out, expected, atol=0, rtol=0)

    ref_out, ref_lse = ref_attention(q, k, v, mask, causal, scale, gqa)
    torch.testing.assert_close(out.double(), ref_out.expand(out.shape), **TOL[dtype])

    out2, lse = ffpa_attn.forward(q, k, v, return_lse=True, **kw)
    torch.testing.assert_close(out2, expected, atol=0, rtol=0)
    assert lse.dtype == torch.float32 and lse.shape == out.shape[:-1]
    assert lse.is_contiguous()
    torch.testing.assert_close(lse.double(), ref_lse.expand(lse.shape), atol=1e-5, rtol=1e-5)

    # CPU inputs are an expected fallback, announced once.
    assert len(fallback_warnings(record)) == 1


def test_fallback_non_contiguous_views(gen):
    # BLHD views (transposed), sliced K/V, and a non-unit last stride
    B, L, S, H, E = 2, 19, 23, 3, 16
    q = rn(gen, B, L, H, E).transpose(1, 2)
    kv = rn(gen, B, S, 2, H, E)
    k, v = kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)
    v = rn(gen, B, H, E, S).transpose(-1, -2)
    for causal in (False, True):
        out, lse = ffpa_attn.forward(q, k, v, is_causal=causal, return_lse=True)
        torch.testing.assert_close(out, SDPA(q, k, v, is_causal=causal), atol=0, rtol=0)
        ref_out, ref_lse = ref_attention(q, k, v, is_causal=causal)
        torch.testing.assert_close(lse.double(), ref_lse, atol=1e-5, rtol=1e-5)


def test_fallback_dropout_passes_through(gen):
    q, k, v = rn(gen, 2, 2, 9, 8), rn(gen, 2, 2, 11, 8), rn(gen, 2, 2, 11, 8)
    torch.manual_seed(0)
    a = ffpa_attn.forward(q, k, v, dropout_p=0.5)
    torch.manual_seed(0)
    b = SDPA(q, k, v, dropout_p=0.5)
    torch.testing.assert_close(a, b, atol=0, rtol=0)
    assert not torch.allclose(a, SDPA(q, k, v))  # dropout really applied
    assert torch.count_nonzero(ffpa_attn.forward(q, k, v, dropout_p=1.0)) == 0


def test_fallback_autograd_matches_sdpa(gen):
    q = rn(gen, 2, 4, 9, 8).requires_grad_()
    k = rn(gen, 2, 2, 11, 8).requires_grad_()
    v = rn(gen, 2, 2, 11, 8).requires_grad_()
    gout = rn(gen, 2, 4, 9, 8)
    out = ffpa_attn.forward(q, k, v, is_causal=True, enable_gqa=True)
    grads = torch.autograd.grad(out, (q, k, v), gout)
    out_ref = SDPA(q, k, v, is_causal=True, enable_gqa=True)
    grads_ref = torch.autograd.grad(out_ref, (q, k, v), gout)
    for a, b in zip(grads, grads_ref):
        torch.testing.assert_close(a, b)
    # lse of the fallback is differentiable too: d lse / d scores = softmax
    _, lse = ffpa_attn.forward(q, k, v, is_causal=True, enable_gqa=True, return_lse=True)
    assert lse.requires_grad


def test_return_lse_fully_masked_row_is_minus_inf(gen):
    q, k, v = rn(gen, 1, 2, 3, 8), rn(gen, 1, 2, 4, 8), rn(gen, 1, 2, 4, 8)
    mask = torch.tensor([[True, False, True, False], [False] * 4, [True] * 4])
    out, lse = ffpa_attn.forward(q, k, v, attn_mask=mask, return_lse=True)
    torch.testing.assert_close(out, SDPA(q, k, v, attn_mask=mask), atol=0, rtol=0, equal_nan=True)
    assert torch.isneginf(lse[..., 1]).all()
    assert torch.isfinite(lse[..., 0]).all() and torch.isfinite(lse[..., 2]).all()
    _, ref_lse = ref_attention(q, k, v, mask)
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-5, rtol=1e-5)


def test_return_lse_float_mask_minus_inf_and_scale(gen):
    q, k, v = rn(gen, 2, 3, 5, 8), rn(gen, 2, 3, 7, 8), rn(gen, 2, 3, 7, 8)
    mask = rn(gen, 2, 1, 5, 7)
    mask[..., 3] = -math.inf
    out, lse = ffpa_attn.forward(q, k, v, attn_mask=mask, scale=1.7, return_lse=True)
    ref_out, ref_lse = ref_attention(q, k, v, mask, scale=1.7)
    torch.testing.assert_close(out.double(), ref_out, **TOL[torch.float32])
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-5, rtol=1e-5)


# ============================================================ SDPA leniency we keep
@pytest.mark.parametrize(
    "scale",
    [0.0, -1.0, 2, True, torch.tensor(0.25), pytest.param("np", id="numpy_float32")],
    ids=["zero", "negative", "int", "bool", "tensor0d", "numpy_float32"],
)
def test_scale_values_accepted_like_sdpa(gen, scale):
    if scale == "np":
        np = pytest.importorskip("numpy")
        scale = np.float32(0.25)
    q, k, v = rn(gen, 2, 2, 5, 8), rn(gen, 2, 2, 6, 8), rn(gen, 2, 2, 6, 8)
    out, lse = ffpa_attn.forward(q, k, v, scale=scale, return_lse=True)
    torch.testing.assert_close(out, SDPA(q, k, v, scale=scale), atol=0, rtol=0)
    _, ref_lse = ref_attention(q, k, v, scale=float(scale))
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("p", [0, False, torch.tensor(0.0), 0.0, -0.0])
def test_dropout_values_accepted_like_sdpa(gen, p):
    q, k, v = rn(gen, 2, 2, 5, 8), rn(gen, 2, 2, 6, 8), rn(gen, 2, 2, 6, 8)
    torch.testing.assert_close(
        ffpa_attn.forward(q, k, v, dropout_p=p), SDPA(q, k, v, dropout_p=p), atol=0, rtol=0
    )


@pytest.mark.parametrize(
    "mask_shape",
    [(5, 1), (1, 7), (1, 5, 1), (2, 1, 5, 7), (1, 1, 1, 7), (3, 5, 7), (2, 3, 5, 7)],
)
@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32])
def test_mask_broadcast_shapes(gen, mask_shape, mask_dtype):
    q, k, v = rn(gen, 2, 3, 5, 8), rn(gen, 2, 3, 7, 8), rn(gen, 2, 3, 7, 8)
    if mask_dtype == torch.bool:
        mask = torch.rand(mask_shape, generator=gen) > 0.3
        mask[..., 0] = True
    else:
        mask = rn(gen, *mask_shape)
    out, lse = ffpa_attn.forward(q, k, v, attn_mask=mask, return_lse=True)
    torch.testing.assert_close(out, SDPA(q, k, v, attn_mask=mask), atol=0, rtol=0)
    _, ref_lse = ref_attention(q, k, v, mask)
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mask_shape", [(7,), ()], ids=["1d", "0d"])
@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32])
def test_low_rank_masks_like_math_sdpa(gen, mask_shape, mask_dtype):
    # Broadcastable per the docs; the math backend accepts them, the default CPU kernel
    # raises IndexError.  We accept them (normalizing to 2-D).
    q, k, v = rn(gen, 2, 3, 5, 8), rn(gen, 2, 3, 7, 8), rn(gen, 2, 3, 7, 8)
    if mask_dtype == torch.bool:
        mask = torch.ones(mask_shape, dtype=torch.bool)
        if mask_shape:
            mask[3] = False
    else:
        mask = rn(gen, *mask_shape)
    with pytest.raises(IndexError):
        SDPA(q, k, v, attn_mask=mask)
    with sdpa_kernel(SDPBackend.MATH):
        expected = SDPA(q, k, v, attn_mask=mask)
    out, lse = ffpa_attn.forward(q, k, v, attn_mask=mask, return_lse=True)
    torch.testing.assert_close(out, expected, **TOL[torch.float32])
    _, ref_lse = ref_attention(q, k, v, mask)
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", list(ZERO_SIZE))
def test_zero_size_inputs_like_math_sdpa(gen, case, causal):
    qs, ks, vs = ZERO_SIZE[case]
    q, k, v = rn(gen, *qs), rn(gen, *ks), rn(gen, *vs)
    with sdpa_kernel(SDPBackend.MATH):  # never the default CPU kernel: H0 kills the process
        expected = SDPA(q, k, v, is_causal=causal)
    out, lse = ffpa_attn.forward(q, k, v, is_causal=causal, return_lse=True)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    torch.testing.assert_close(out, expected, equal_nan=True)
    assert lse.shape == out.shape[:-1] and lse.dtype == torch.float32
    if case == "S0":
        assert torch.isneginf(lse).all()
    with pytest.raises(NotImplementedError, match="zero-size|cpu"):
        ffpa_attn.forward(q, k, v, strict=True)


def test_cpu_autocast_casts_like_sdpa(gen):
    # Under autocast SDPA sees cast inputs, so mismatched fp32/bf16 inputs are fine.
    q, k, v = rn(gen, 2, 3, 5, 8), rn(gen, 2, 3, 7, 8, dtype=torch.bfloat16), rn(gen, 2, 3, 7, 8)
    mask = rn(gen, 5, 7)  # float32 mask, cast along
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = SDPA(q, k, v, attn_mask=mask)
        out, lse = ffpa_attn.forward(q, k, v, attn_mask=mask, return_lse=True)
    assert out.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(out, expected, atol=0, rtol=0)
    _, ref_lse = ref_attention(q.bfloat16(), k, v.bfloat16(), mask.bfloat16())
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-4, rtol=1e-4)
    # outside autocast the same call is a dtype error, as for SDPA
    with pytest.raises(TypeError, match="'key'"):
        ffpa_attn.forward(q, k, v)


def test_parameter_inputs_accepted(gen):
    q = torch.nn.Parameter(rn(gen, 2, 2, 5, 8))
    k, v = rn(gen, 2, 2, 6, 8), rn(gen, 2, 2, 6, 8)
    with torch.no_grad():
        torch.testing.assert_close(ffpa_attn.forward(q, k, v), SDPA(q, k, v), atol=0, rtol=0)


def test_nested_tensors_delegate_to_sdpa(gen):
    q = torch.nested.nested_tensor([rn(gen, 2, 5, 8), rn(gen, 2, 3, 8)], layout=torch.jagged)
    k = torch.nested.nested_tensor([rn(gen, 2, 6, 8), rn(gen, 2, 4, 8)], layout=torch.jagged)
    v = torch.nested.nested_tensor([rn(gen, 2, 6, 8), rn(gen, 2, 4, 8)], layout=torch.jagged)
    try:
        expected = SDPA(q, k, v)
    except Exception as e:  # depends on the torch build (here: it wants CUDA)
        with pytest.raises(type(e)):  # delegated as is
            ffpa_attn.forward(q, k, v)
        return
    out = ffpa_attn.forward(q, k, v)
    for a, b in zip(out.unbind(), expected.unbind()):
        torch.testing.assert_close(a, b)
    with pytest.raises(NotImplementedError, match="nested"):
        ffpa_attn.forward(q, k, v, return_lse=True)


# ======================================================================== warnings
def test_fallback_warning_once_per_reason(gen, record):
    q, k, v = rn(gen, 2, 2, 5, 8), rn(gen, 2, 2, 6, 8), rn(gen, 2, 2, 6, 8)
    for _ in range(3):
        ffpa_attn.forward(q, k, v)
    ws = fallback_warnings(record)
    assert len(ws) == 1 and "'cpu'" in str(ws[0].message)
    assert ws[0].filename == __file__  # stacklevel points at the caller

    # A forced level that is not compiled is reported before the device (with a build that has
    # it, the reason is the 'cpu' one again, deduplicated); the accumulation mode is checked after
    # the device (same 'cpu' reason).
    missing = [lv for lv in (2, 3) if not _ops.head_dim_pairs(f"ffpa_l{lv}")]
    for _ in range(2):
        ffpa_attn.forward(q, k, v, level=2)
    ffpa_attn.forward(q, k, v, acc="fp16")
    ffpa_attn.forward(q, k, v, level=3, acc="fp16")
    msgs = [str(w.message) for w in fallback_warnings(record)]
    assert len(msgs) == 1 + len(missing), msgs
    for msg, lv in zip(msgs[1:], missing):
        assert f"level={lv}" in msg

    n = len(msgs)
    ffpa_attn.forward(q, k, v)  # still deduplicated
    assert len(fallback_warnings(record)) == n
    ffpa_attn.reset_fallback_warnings()
    ffpa_attn.forward(q, k, v)
    assert len(fallback_warnings(record)) == n + 1


def test_pytest_warns_fallback(gen):
    q, k, v = rn(gen, 1, 2, 5, 8), rn(gen, 1, 2, 6, 8), rn(gen, 1, 2, 6, 8)
    with pytest.warns(FFPAFallbackWarning, match="CUDA-only"):
        ffpa_attn.forward(q, k, v)


def test_strict_raises_naming_reason(gen, record):
    q, k, v = rn(gen, 1, 2, 5, 8), rn(gen, 1, 2, 6, 8), rn(gen, 1, 2, 6, 8)
    with pytest.raises(NotImplementedError, match="'cpu'") as info:
        ffpa_attn.forward(q, k, v, strict=True)
    assert isinstance(info.value, FFPAUnsupportedError)
    assert "cpu" in info.value.reason
    with pytest.raises(NotImplementedError, match="level=2" if not _ops.head_dim_pairs("ffpa_l2") else "'cpu'"):
        ffpa_attn.forward(q, k, v, strict=True, level=2)
    assert fallback_warnings(record) == []  # strict raises instead of warning


# ======================================================================== patching
def test_exports_and_build_info():
    assert ffpa_attn.scaled_dot_product_attention is ffpa_attn.forward
    assert ffpa_attn.__version__ == "0.1.0"
    info = ffpa_attn.build_info()
    for key in ("version", "cuda_version", "archs", "families", "head_dims", "dtypes"):
        assert key in info
    assert info["version"] == ffpa_attn.__version__
    assert info["extension_available"] is ffpa_attn.extension_available()
    info["head_dims"]["ffpa_l1"] = [1]  # a copy: mutating it changes nothing
    assert ffpa_attn.build_info()["head_dims"].get("ffpa_l1") != [1]
    if not ffpa_attn.extension_available():
        assert isinstance(info["import_error"], str) and info["import_error"]
    for name in ffpa_attn.__all__:
        assert hasattr(ffpa_attn, name)


def test_patch_unpatch_idempotent(gen, record):
    original = F.scaled_dot_product_attention
    assert original is SDPA and not ffpa_attn.is_sdpa_patched()
    ffpa_attn.patch_sdpa()
    ffpa_attn.patch_sdpa()
    assert F.scaled_dot_product_attention is ffpa_attn.forward
    assert ffpa_attn.is_sdpa_patched()

    q, k, v = rn(gen, 2, 2, 5, 8), rn(gen, 2, 2, 6, 8), rn(gen, 2, 2, 6, 8)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # no recursion
    assert len(fallback_warnings(record)) == 1  # it went through ffpa_attn
    torch.testing.assert_close(out, SDPA(q, k, v, is_causal=True), atol=0, rtol=0)

    ffpa_attn.unpatch_sdpa()
    assert F.scaled_dot_product_attention is original
    ffpa_attn.unpatch_sdpa()
    assert F.scaled_dot_product_attention is original


def test_unpatch_restores_a_previous_wrapper():
    def user_wrapper(*a, **kw):
        return SDPA(*a, **kw)

    F.scaled_dot_product_attention = user_wrapper
    ffpa_attn.patch_sdpa()
    assert F.scaled_dot_product_attention is ffpa_attn.forward
    ffpa_attn.unpatch_sdpa()
    assert F.scaled_dot_product_attention is user_wrapper


def test_sdpa_patched_context_manager(gen):
    original = F.scaled_dot_product_attention
    with ffpa_attn.sdpa_patched() as fn:
        assert fn is ffpa_attn.forward
        assert F.scaled_dot_product_attention is ffpa_attn.forward
    assert F.scaled_dot_product_attention is original

    with pytest.raises(KeyError):
        with ffpa_attn.sdpa_patched():
            raise KeyError("boom")
    assert F.scaled_dot_product_attention is original

    ffpa_attn.patch_sdpa()
    with ffpa_attn.sdpa_patched():
        pass
    assert F.scaled_dot_product_attention is ffpa_attn.forward  # previous state kept
    ffpa_attn.unpatch_sdpa()
    assert F.scaled_dot_product_attention is original


def test_patched_multihead_attention_routes_through_ffpa(gen, record):
    # training mode (dropout 0): MHA's eval fast path bypasses F.scaled_dot_product_attention
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True, dropout=0.0).train()
    x = rn(gen, 2, 7, 16)
    expected, _ = mha(x, x, x, need_weights=False)
    with ffpa_attn.sdpa_patched():
        out, _ = mha(x, x, x, need_weights=False)
    torch.testing.assert_close(out, expected)
    assert len(fallback_warnings(record)) == 1


# ===================================================================== torch.compile
def _attn_fn(q, k, v, mask):
    a = ffpa_attn.forward(q, k, v, is_causal=True, enable_gqa=True)
    b, lse = ffpa_attn.forward(q, k, v, attn_mask=mask, enable_gqa=True, return_lse=True)
    return a + b, lse


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_fullgraph_fallback(gen, backend):
    torch._dynamo.reset()
    q, k, v = rn(gen, 2, 4, 9, 8), rn(gen, 2, 2, 11, 8), rn(gen, 2, 2, 11, 8)
    mask = torch.rand(9, 11, generator=gen) > 0.3
    mask[:, 0] = True
    eager = _attn_fn(q, k, v, mask)
    compiled = torch.compile(_attn_fn, fullgraph=True, backend=backend)(q, k, v, mask)
    for a, b in zip(compiled, eager):
        torch.testing.assert_close(a, b)


def test_compile_fullgraph_patched_sdpa(gen):
    torch._dynamo.reset()

    def model(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2

    q, k, v = rn(gen, 2, 2, 9, 8), rn(gen, 2, 2, 9, 8), rn(gen, 2, 2, 9, 8)
    with ffpa_attn.sdpa_patched():
        compiled = torch.compile(model, fullgraph=True, backend="eager")(q, k, v)
    torch.testing.assert_close(compiled, model(q, k, v))


@pytest.mark.parametrize("fullgraph", [False, True])
def test_compile_strict_raises(gen, fullgraph):
    """strict=True raises FFPAUnsupportedError itself under compile (with fullgraph=True too,
    where dynamo would otherwise report its own Unsupported), also with return_lse."""
    q, k, v = rn(gen, 1, 2, 5, 8), rn(gen, 1, 2, 6, 8), rn(gen, 1, 2, 6, 8)
    for lse in (False, True):
        torch._dynamo.reset()
        fn = torch.compile(lambda q, k, v: ffpa_attn.forward(q, k, v, strict=True, return_lse=lse),
                           fullgraph=fullgraph, backend="eager")
        with pytest.raises(FFPAUnsupportedError, match="'cpu'") as info:
            fn(q, k, v)
        assert type(info.value) is FFPAUnsupportedError
        assert "CUDA-only" in info.value.reason


def test_compile_fullgraph_error_in_a_model_keeps_its_class(gen):
    """A validation error inside a compiled model (patched SDPA, fullgraph=True) is the eager
    class: what `except ValueError` around a model call expects."""
    def model(q, k, v):
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2) * 2

    q, k, v = rn(gen, 2, 4, 9, 8), rn(gen, 2, 2, 9, 8), rn(gen, 2, 2, 9, 8)  # GQA without enable_gqa
    torch._dynamo.reset()
    with ffpa_attn.sdpa_patched():
        with pytest.raises(ValueError, match="enable_gqa=True") as info:
            torch.compile(model, fullgraph=True, backend="eager")(q, k, v)
    assert type(info.value) is ffpa_attn.FFPAValueError


def test_set_fa2_mma_round_trips_and_names_the_argument():
    """ffpa_attn.set_fa2_mma: auto / sync / wgmma round-trip (with or without the extension);
    anything else is an error naming `mode` and what came."""
    assert ffpa_attn.get_fa2_mma() == "auto"
    try:
        for mode in ("sync", "wgmma", "auto"):
            ffpa_attn.set_fa2_mma(mode)
            assert ffpa_attn.get_fa2_mma() == mode
        with pytest.raises(ValueError, match=r"`mode`.*'fastest'"):
            ffpa_attn.set_fa2_mma("fastest")
        with pytest.raises(TypeError, match=r"`mode`.*int"):
            ffpa_attn.set_fa2_mma(1)
        assert ffpa_attn.get_fa2_mma() == "auto"
    finally:
        ffpa_attn.set_fa2_mma("auto")
