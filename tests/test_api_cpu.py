"""CPU tests of the Python API of ffpa_attn (no GPU, no compiled extension needed).

* fallback path: parity with the original torch SDPA and with an independent float64
  reference over a grid of layouts / dtypes / masks; return_lse; warnings; strict;
* SDPA leniency we must keep (things SDPA accepts, we accept);
* patch_sdpa / unpatch_sdpa / sdpa_patched;
* torch.compile(fullgraph=True);
* kernel path plumbing, against a CPU mock of torch.ops.ffpa_attn.ffpa_fwd that
  asserts the C++ contract (4-D, aligned, K/V not expanded, output layout).
"""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import ffpa_attn
from ffpa_attn import FFPAFallbackWarning, FFPAUnsupportedError, _ops, _routing

# The builtin, immune to patching.
SDPA = torch._C._nn.scaled_dot_product_attention


# =============================================================================== helpers
def rn(g, *shape, dtype=torch.float32):
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)


def ref_attention(q, k, v, attn_mask=None, is_causal=False, scale=None, enable_gqa=False):
    """Independent float64 reference: returns (out, lse); GQA via index_select."""
    q, k, v = q.double(), k.double(), v.double()
    if enable_gqa:
        hq = q.shape[-3]
        k = k.index_select(-3, torch.arange(hq) // (hq // k.shape[-3]))
        v = v.index_select(-3, torch.arange(hq) // (hq // v.shape[-3]))
    E = q.shape[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        s = s.masked_fill(torch.ones(L, S, dtype=torch.bool).tril().logical_not(), -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            s = s.masked_fill(attn_mask.logical_not(), -math.inf)
        else:
            s = s + attn_mask.double()
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


TOL = {
    torch.float64: dict(atol=1e-10, rtol=1e-10),
    torch.float32: dict(atol=2e-5, rtol=2e-4),
    torch.bfloat16: dict(atol=3e-2, rtol=3e-2),
    torch.float16: dict(atol=3e-3, rtol=3e-3),
}


def fallback_warnings(records):
    return [w for w in records if issubclass(w.category, FFPAFallbackWarning)]


@pytest.fixture
def record():
    """All warnings, unfiltered (so only ffpa_attn's own dedup limits them)."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        yield rec


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


ZERO_SIZE = {
    "L0": ((2, 3, 0, 8), (2, 3, 5, 8), (2, 3, 5, 8)),
    "S0": ((2, 3, 4, 8), (2, 3, 0, 8), (2, 3, 0, 8)),
    "B0": ((0, 3, 4, 8), (0, 3, 5, 8), (0, 3, 5, 8)),
    "H0": ((2, 0, 4, 8), (2, 0, 5, 8), (2, 0, 5, 8)),  # the default CPU SDPA dies (SIGFPE)
    "E0": ((2, 3, 4, 0), (2, 3, 5, 0), (2, 3, 5, 8)),
    "Ev0": ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 0)),
}


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

    for _ in range(2):
        ffpa_attn.forward(q, k, v, level=2)
    ffpa_attn.forward(q, k, v, acc="fp16")
    ffpa_attn.forward(q, k, v, acc="mixed")
    ffpa_attn.forward(q, k, v, level=3, acc="fp16")  # level is reported first
    msgs = [str(w.message) for w in fallback_warnings(record)]
    assert len(msgs) == 5, msgs
    assert "level=2" in msgs[1] and "acc='fp16'" in msgs[2] and "acc='mixed'" in msgs[3]
    assert "level=3" in msgs[4]

    ffpa_attn.forward(q, k, v)  # still deduplicated
    assert len(fallback_warnings(record)) == 5
    ffpa_attn.reset_fallback_warnings()
    ffpa_attn.forward(q, k, v)
    assert len(fallback_warnings(record)) == 6


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
    with pytest.raises(NotImplementedError, match="level=2"):
        ffpa_attn.forward(q, k, v, strict=True, level=2)
    with pytest.raises(NotImplementedError, match="acc='mixed'"):
        ffpa_attn.forward(q, k, v, strict=True, acc="mixed")
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


def test_compile_strict_raises(gen):
    torch._dynamo.reset()
    q, k, v = rn(gen, 1, 2, 5, 8), rn(gen, 1, 2, 6, 8), rn(gen, 1, 2, 6, 8)
    fn = torch.compile(lambda q, k, v: ffpa_attn.forward(q, k, v, strict=True), backend="eager")
    with pytest.raises(NotImplementedError, match="'cpu'"):
        fn(q, k, v)


# ====================================================== kernel path (mocked C++ op)
MOCK_CALLS: list = []


def _check_vec_aligned(t):
    assert t.stride(-1) == 1, f"last-dim stride {t.stride()}"
    es = t.element_size()
    for size, stride in zip(t.shape[:-1], t.stride()[:-1]):
        assert size == 1 or (stride * es) % 16 == 0, f"stride {t.stride()} not 16B aligned"
    assert t.data_ptr() % 16 == 0, "data_ptr not 16B aligned"


@torch.library.custom_op("ffpa_attn_test::ffpa_fwd", mutates_args=())
def _mock_ffpa_fwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    is_causal: bool,
    level: int,
    num_stages: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """CPU stand-in for torch.ops.ffpa_attn.ffpa_fwd that asserts its contract."""
    assert q.dim() == k.dim() == v.dim() == 4
    assert q.dtype in (torch.float16, torch.bfloat16) and k.dtype == v.dtype == q.dtype
    for t in (q, k, v):
        _check_vec_aligned(t)
    B, Hq, L, D = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    assert k.shape[0] == v.shape[0] == B and v.shape[1] == Hkv and v.shape[2] == S
    assert k.shape[3] == D and v.shape[3] == D and Hq % Hkv == 0
    assert level in (0, 1) and num_stages in (0, 1, 2, 3, 4)
    MOCK_CALLS.append(
        dict(
            q_shape=tuple(q.shape), k_shape=tuple(k.shape), v_shape=tuple(v.shape),
            q_ptr=q.data_ptr(), k_ptr=k.data_ptr(), v_ptr=v.data_ptr(), dtype=q.dtype,
            scale=scale, is_causal=is_causal, level=level, num_stages=num_stages,
        )
    )
    out, lse = ref_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=True)
    if q.stride(1) < q.stride(2):
        o = torch.empty(B, L, Hq, D, dtype=q.dtype).transpose(1, 2)
    else:
        o = torch.empty(B, Hq, L, D, dtype=q.dtype)
    o.copy_(out)
    return o, lse.float().contiguous()


_mock_ffpa_fwd.register_fake(_ops._ffpa_fwd_fake)

MOCK_HEAD_DIMS = frozenset({8, 16, 32})


@pytest.fixture
def mock_kernel(monkeypatch):
    """Pretend CPU is a supported device and the extension is built for fp16/bf16 and head
    dims 8/16/32 (whatever the real build in the checkout has), and route the op to the mock."""

    def mocked(q, k, v, scale, is_causal, level=0, num_stages=0):
        return torch.ops.ffpa_attn_test.ffpa_fwd(q, k, v, scale, is_causal, level, num_stages)

    monkeypatch.setattr(_ops, "ffpa_fwd", mocked)
    monkeypatch.setattr(_ops, "_L1_HEAD_DIMS", MOCK_HEAD_DIMS)
    monkeypatch.setattr(_ops, "_DTYPES", frozenset({"float16", "bfloat16"}))
    monkeypatch.setattr(_routing, "_environment_reason", lambda device: None)
    MOCK_CALLS.clear()
    torch._dynamo.reset()
    yield MOCK_CALLS
    MOCK_CALLS.clear()
    torch._dynamo.reset()


KERNEL_SHAPES = {
    # q, k, v, enable_gqa, shape the kernel must see for q
    "4d": ((2, 3, 17, 16), (2, 3, 33, 16), (2, 3, 33, 16), False, (2, 3, 17, 16)),
    "3d": ((3, 17, 8), (3, 33, 8), (3, 33, 8), False, (1, 3, 17, 8)),
    "2d": ((17, 8), (33, 8), (33, 8), False, (1, 1, 17, 8)),
    "5d": ((2, 2, 3, 17, 8), (2, 2, 3, 33, 8), (2, 2, 3, 33, 8), False, (4, 3, 17, 8)),
    "6d": ((2, 1, 2, 3, 5, 8), (2, 1, 2, 3, 7, 8), (2, 1, 2, 3, 7, 8), False, (4, 3, 5, 8)),
    "L_gt_S": ((1, 2, 33, 32), (1, 2, 17, 32), (1, 2, 17, 32), False, (1, 2, 33, 32)),
    "L1_S1": ((2, 2, 1, 8), (2, 2, 1, 8), (2, 2, 1, 8), False, (2, 2, 1, 8)),
    "gqa": ((2, 8, 17, 16), (2, 2, 33, 16), (2, 2, 33, 16), True, (2, 8, 17, 16)),
    "gqa3d": ((4, 17, 8), (1, 33, 8), (1, 33, 8), True, (1, 4, 17, 8)),
    "mqa_no_flag": ((2, 4, 17, 8), (2, 1, 33, 8), (2, 1, 33, 8), False, (2, 4, 17, 8)),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["noncausal", "causal"])
@pytest.mark.parametrize("shape_id", list(KERNEL_SHAPES))
def test_kernel_path_plumbing(mock_kernel, gen, shape_id, causal, dtype, record):
    qs, ks, vs, gqa, kernel_q = KERNEL_SHAPES[shape_id]
    q, k, v = rn(gen, *qs, dtype=dtype), rn(gen, *ks, dtype=dtype), rn(gen, *vs, dtype=dtype)
    out, lse = ffpa_attn.forward(q, k, v, is_causal=causal, enable_gqa=gqa, return_lse=True)
    assert len(mock_kernel) == 1
    call = mock_kernel[0]
    assert call["q_shape"] == kernel_q
    assert call["scale"] == pytest.approx(1.0 / math.sqrt(qs[-1]))
    assert call["is_causal"] is causal and call["level"] == 0 and call["num_stages"] == 0
    # K/V go in with their own head count (never expanded) and without a copy
    assert call["k_shape"][1] == (ks[-3] if len(ks) >= 3 else 1)
    assert call["k_ptr"] == k.data_ptr() and call["v_ptr"] == v.data_ptr()

    expected = SDPA(q, k, v, is_causal=causal, enable_gqa=gqa)
    assert out.shape == expected.shape and out.dtype == dtype
    ref_out, ref_lse = ref_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    if shape_id == "mqa_no_flag":  # broadcasting K/V heads == GQA with one group
        ref_out, ref_lse = ref_attention(q, k, v, is_causal=causal, enable_gqa=True)
    torch.testing.assert_close(out.double(), ref_out, **TOL[dtype])
    torch.testing.assert_close(out, expected, **TOL[dtype])
    assert lse.shape == out.shape[:-1] and lse.dtype == torch.float32
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-4, rtol=1e-4)
    assert fallback_warnings(record) == []

    out2 = ffpa_attn.forward(q, k, v, is_causal=causal, enable_gqa=gqa, strict=True)
    torch.testing.assert_close(out2, out, atol=0, rtol=0)


def test_kernel_knobs_passed(mock_kernel, gen):
    q, k, v = (rn(gen, 1, 2, 9, 16, dtype=torch.float16) for _ in range(3))
    ffpa_attn.forward(q, k, v, scale=0.125, level=1, num_stages=3, acc="fp32")
    ffpa_attn.forward(q, k, v, scale=2, acc="auto", num_stages=1)
    a, b = mock_kernel
    assert (a["scale"], a["level"], a["num_stages"]) == (0.125, 1, 3)
    assert (b["scale"], b["level"], b["num_stages"]) == (2.0, 0, 1)
    assert isinstance(b["scale"], float)


def test_kernel_blhd_view_no_copy_and_layout(mock_kernel, gen):
    B, L, S, H, D = 2, 17, 33, 4, 16
    q = rn(gen, B, L, H, D, dtype=torch.bfloat16).transpose(1, 2)
    kv = rn(gen, B, S, 2, H, D, dtype=torch.bfloat16)
    k, v = kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)
    out = ffpa_attn.forward(q, k, v)
    call = mock_kernel[0]
    assert (call["q_ptr"], call["k_ptr"], call["v_ptr"]) == (q.data_ptr(), k.data_ptr(), v.data_ptr())
    assert out.transpose(1, 2).is_contiguous()  # BLHD in, BLHD out
    torch.testing.assert_close(out, SDPA(q, k, v), **TOL[torch.bfloat16])


def test_kernel_misaligned_inputs_are_copied(mock_kernel, gen):
    shape = (2, 3, 17, 16)
    n = math.prod(shape)
    base = rn(gen, n + 1, dtype=torch.float16)
    q = base[1:].view(shape)  # data_ptr 2 bytes off
    assert q.data_ptr() % 16 != 0
    k = rn(gen, 2, 3, 16, 33, dtype=torch.float16).transpose(-1, -2)  # last stride != 1
    wide = rn(gen, 2, 3, 33, 20, dtype=torch.float16)
    v = wide[..., :16]  # row stride 20 elements = 40 bytes, not a multiple of 16
    out = ffpa_attn.forward(q, k, v)  # the mock asserts alignment
    call = mock_kernel[0]
    assert call["q_ptr"] != q.data_ptr() and call["k_ptr"] != k.data_ptr()
    assert call["v_ptr"] != v.data_ptr()
    torch.testing.assert_close(out, SDPA(q, k, v), **TOL[torch.float16])


def test_kernel_under_autocast(mock_kernel, gen):
    q, k, v = rn(gen, 2, 2, 9, 16), rn(gen, 2, 2, 11, 16), rn(gen, 2, 2, 11, 16, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ffpa_attn.forward(q, k, v)
        expected = SDPA(q, k, v)
    assert mock_kernel[0]["dtype"] == torch.bfloat16 and out.dtype == torch.bfloat16
    torch.testing.assert_close(out, expected, **TOL[torch.bfloat16])


def test_kernel_requires_grad_under_no_grad(mock_kernel, gen):
    q, k, v = (rn(gen, 1, 2, 9, 16, dtype=torch.float16).requires_grad_() for _ in range(3))
    with torch.no_grad():
        ffpa_attn.forward(q, k, v)
    assert len(mock_kernel) == 1
    with torch.inference_mode():
        ffpa_attn.forward(q.detach(), k.detach(), v.detach())
    assert len(mock_kernel) == 2


def _fb(shape_q=(2, 4, 9, 16), shape_k=(2, 4, 11, 16), shape_v=None, dtype=torch.float16, grad=False):
    def build(g):
        sv = shape_k if shape_v is None else shape_v
        ts = [rn(g, *s, dtype=dtype) for s in (shape_q, shape_k, sv)]
        if grad:
            ts[0].requires_grad_()
        return ts

    return build


FALLBACK_CASES = [
    # id, input builder, forward kwargs, words of the reason
    ("mask", _fb(), dict(attn_mask=torch.ones(9, 11, dtype=torch.bool)), "attn_mask"),
    ("dropout", _fb(), dict(dropout_p=0.1), "dropout_p"),
    ("requires_grad", _fb(grad=True), {}, "require grad"),
    ("float32", _fb(dtype=torch.float32), {}, "float32"),
    ("float64", _fb(dtype=torch.float64), {}, "float64"),
    ("head_dim_not_compiled", _fb((2, 4, 9, 24), (2, 4, 11, 24)), {}, "head dim 24"),
    ("ev_ne_e", _fb(shape_v=(2, 4, 11, 32)), {}, "Ev"),
    ("batch_broadcast", _fb(shape_k=(1, 4, 11, 16)), {}, "batch"),
    ("rank_broadcast", _fb(shape_q=(4, 9, 16)), {}, "numbers of dimensions"),
    ("kv_heads_differ", _fb(shape_q=(2, 4, 9, 16), shape_k=(2, 2, 11, 16), shape_v=(2, 1, 11, 16)), dict(enable_gqa=True), "key and value"),
    ("q_heads_broadcast", _fb(shape_q=(2, 1, 9, 16)), {}, "query heads"),
    ("level2", _fb(), dict(level=2), "level=2"),
    ("acc_fp16", _fb(), dict(acc="fp16"), "acc='fp16'"),
]


@pytest.mark.parametrize("case", FALLBACK_CASES, ids=[c[0] for c in FALLBACK_CASES])
def test_routing_fallback_reasons(mock_kernel, case, record):
    _, build, kwargs, words = case
    q, k, v = build(torch.Generator().manual_seed(3))
    with pytest.raises(FFPAUnsupportedError, match=words):
        ffpa_attn.forward(q, k, v, strict=True, **kwargs)
    out = ffpa_attn.forward(q, k, v, **kwargs)
    assert mock_kernel == []  # never reached the kernel
    ws = fallback_warnings(record)
    assert len(ws) == 1 and words in str(ws[0].message)
    if not kwargs.get("dropout_p"):
        kw = {k_: v_ for k_, v_ in kwargs.items() if k_ in ("attn_mask", "enable_gqa")}
        torch.testing.assert_close(out, SDPA(q, k, v, **kw), atol=0, rtol=0)


def test_environment_reasons(monkeypatch):
    cpu = torch.device("cpu")
    assert "CUDA-only" in _routing._environment_reason(cpu)
    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(_ops, "_OP", None)
    monkeypatch.setattr(_ops, "_IMPORT_ERROR", "ModuleNotFoundError: x")
    monkeypatch.setattr(_routing, "_env_reason_cache", {})
    assert "not available" in _routing._environment_reason(cuda)
    assert _routing._env_reason_cache == {0: _routing._environment_reason(cuda)}  # cached

    monkeypatch.setattr(_ops, "_OP", object())
    monkeypatch.setattr(_ops, "_ARCHS", ("80", "89", "90a"))
    monkeypatch.setattr(_ops, "_PTX_ARCHS", ("80",))

    def cap(c):
        monkeypatch.setattr(_routing, "_capability_cache", {0: c})
        monkeypatch.setattr(_routing, "_env_reason_cache", {})
        return _routing._environment_reason(cuda)

    assert "7.5" in cap((7, 5))
    assert cap((8, 0)) is None and cap((8, 6)) is None  # sm_80 SASS runs on sm_86
    assert cap((9, 0)) is None
    assert cap((12, 0)) is None  # compute_80 PTX, JIT-compiled
    monkeypatch.setattr(_ops, "_PTX_ARCHS", ())
    assert "sm_120" in cap((12, 0))
    monkeypatch.setattr(_ops, "_ARCHS", ("90a",))
    monkeypatch.setattr(_ops, "_PTX_ARCHS", ("90a",))  # arch-specific PTX: sm_90 only
    assert "sm_89" in cap((8, 9)) and "sm_100" in cap((10, 0))
    assert cap((9, 0)) is None


def test_default_ptx_arch_is_the_lowest_target():
    assert _ops._default_ptx_archs(("89", "80", "90a")) == ("80",)
    assert _ops._default_ptx_archs(("90a", "100")) == ("90a",)
    assert _ops._default_ptx_archs(()) == ()


@pytest.mark.parametrize("arch,cap,ptx,ok", [
    ("80", (8, 0), False, True), ("80", (8, 9), False, True), ("86", (8, 0), False, False),
    ("90a", (9, 0), False, True), ("90a", (9, 1), False, False), ("sm_90", (9, 0), False, True),
    ("100f", (10, 3), False, True), ("80", (9, 0), False, False), ("", (8, 0), False, False),
    ("compute_89", (8, 9), False, True), ("80", (9, 0), True, True), ("80", (12, 0), True, True),
    ("90", (8, 9), True, False), ("90a", (10, 0), True, False), ("90a", (9, 0), True, True),
])
def test_arch_compatibility(arch, cap, ptx, ok):
    assert _routing._arch_runs_on(arch, *cap, ptx=ptx) is ok


def test_routing_dtype_not_compiled(mock_kernel, monkeypatch, gen, record):
    monkeypatch.setattr(_ops, "_DTYPES", frozenset({"bfloat16"}))
    q, k, v = (rn(gen, 1, 2, 9, 16, dtype=torch.float16) for _ in range(3))
    with pytest.raises(FFPAUnsupportedError, match="float16 is not compiled"):
        ffpa_attn.forward(q, k, v, strict=True)
    ffpa_attn.forward(q.bfloat16(), k.bfloat16(), v.bfloat16(), strict=True)
    assert len(mock_kernel) == 1


@pytest.mark.parametrize("scale", [math.inf, -math.inf, math.nan])
def test_routing_non_finite_scale(mock_kernel, gen, scale):
    q, k, v = (rn(gen, 1, 2, 9, 16, dtype=torch.float16) for _ in range(3))
    with pytest.raises(FFPAUnsupportedError, match="non-finite scale"):
        ffpa_attn.forward(q, k, v, scale=scale, strict=True)
    out = ffpa_attn.forward(q, k, v, scale=scale)  # SDPA decides what that means
    torch.testing.assert_close(out, SDPA(q, k, v, scale=scale), atol=0, rtol=0, equal_nan=True)
    assert mock_kernel == []


def test_routing_too_many_heads(mock_kernel, gen):
    q, k, v = (rn(gen, 1, 65536, 1, 8, dtype=torch.bfloat16) for _ in range(3))
    with pytest.raises(FFPAUnsupportedError, match="65535"):
        ffpa_attn.forward(q, k, v, strict=True)
    assert mock_kernel == []


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_kernel_path_compile_fullgraph(mock_kernel, gen, backend):
    def fn(q, k, v):
        out, lse = ffpa_attn.forward(q, k, v, is_causal=True, enable_gqa=True, return_lse=True)
        return out * 2, lse

    q = rn(gen, 2, 17, 4, 16, dtype=torch.float16).transpose(1, 2)  # BLHD view
    k, v = rn(gen, 2, 2, 33, 16, dtype=torch.float16), rn(gen, 2, 2, 33, 16, dtype=torch.float16)
    eager_out, eager_lse = fn(q, k, v)
    MOCK_CALLS.clear()
    c_out, c_lse = torch.compile(fn, fullgraph=True, backend=backend)(q, k, v)
    assert len(MOCK_CALLS) == 1  # the compiled graph called the kernel
    torch.testing.assert_close(c_out, eager_out, atol=0, rtol=0)
    torch.testing.assert_close(c_lse, eager_lse, atol=0, rtol=0)
    assert c_out.stride() == eager_out.stride()

    # misaligned data pointer: only visible at run time, fixed inside the realigning op
    base = rn(gen, 2 * 4 * 17 * 16 + 1, dtype=torch.float16)
    qm = base[1:].view(2, 4, 17, 16)
    c_out, _ = torch.compile(fn, fullgraph=True, backend=backend)(qm, k, v)
    torch.testing.assert_close(c_out, fn(qm, k, v)[0], atol=0, rtol=0)


def test_kernel_path_compile_dynamic(mock_kernel, gen):
    fn = torch.compile(
        lambda q, k, v: ffpa_attn.forward(q, k, v, enable_gqa=True), fullgraph=True,
        backend="aot_eager", dynamic=True,
    )
    for L, S in ((9, 17), (13, 5), (33, 33)):
        q = rn(gen, 2, 4, L, 16, dtype=torch.bfloat16)
        k, v = rn(gen, 2, 2, S, 16, dtype=torch.bfloat16), rn(gen, 2, 2, S, 16, dtype=torch.bfloat16)
        torch.testing.assert_close(fn(q, k, v), ffpa_attn.forward(q, k, v, enable_gqa=True), atol=0, rtol=0)


def test_kernel_path_compile_scalar_arguments(mock_kernel, gen):
    # scale / dropout_p passed into the compiled function (dynamo may trace them symbolically)
    def fn(q, k, v, scale, p):
        return ffpa_attn.forward(q, k, v, scale=scale, dropout_p=p, return_lse=True)

    q, k, v = (rn(gen, 1, 2, 9, 16, dtype=torch.bfloat16) for _ in range(3))
    cf = torch.compile(fn, fullgraph=True, backend="aot_eager", dynamic=True)
    for scale in (0.3, 0.7):
        got, expected = cf(q, k, v, scale, 0.0), fn(q, k, v, scale, 0.0)
        torch.testing.assert_close(got, expected, atol=0, rtol=0)
    assert [c["scale"] for c in MOCK_CALLS] == pytest.approx([0.3, 0.3, 0.7, 0.7])


# ===================================================================== fake kernel
@pytest.mark.parametrize("blhd", [False, True])
def test_fake_kernel_shapes_and_layout(blhd):
    B, H, Hkv, L, S, D = 2, 8, 2, 17, 33, 64
    if blhd:
        q = torch.empty(B, L, H, D, device="meta", dtype=torch.float16).transpose(1, 2)
    else:
        q = torch.empty(B, H, L, D, device="meta", dtype=torch.float16)
    k = torch.empty(B, Hkv, S, D, device="meta", dtype=torch.float16)
    v = torch.empty(B, Hkv, S, D, device="meta", dtype=torch.float16)
    out, lse = _ops._ffpa_fwd_fake(q, k, v, 0.1, True, 0, 0)
    assert out.shape == (B, H, L, D) and out.dtype == torch.float16 and out.device == q.device
    assert lse.shape == (B, H, L) and lse.dtype == torch.float32 and lse.is_contiguous()
    if blhd:
        assert out.stride() == torch.empty(B, L, H, D).transpose(1, 2).stride()
    else:
        assert out.is_contiguous()


def test_realigned_op_keeps_promised_layout(monkeypatch, gen):
    # If realigning copies a BLHD q, the op still returns the BLHD layout its fake promised.
    calls = []

    def fake_kernel(q, k, v, scale, is_causal, level=0, num_stages=0):
        calls.append(q.stride())
        out = torch.zeros(q.shape[0], q.shape[1], q.shape[2], v.shape[-1], dtype=q.dtype)
        return out, torch.zeros(q.shape[:3])

    monkeypatch.setattr(_ops, "ffpa_fwd", fake_kernel)
    base = rn(gen, 2 * 5 * 3 * 16 + 1, dtype=torch.float16)
    q = base[1:].view(2, 5, 3, 16).transpose(1, 2)  # BLHD view, misaligned pointer
    k = v = rn(gen, 2, 3, 7, 16, dtype=torch.float16)
    out, _ = _ops.ffpa_fwd_realigned(q, k, v, 0.25, False, 0, 0)
    assert calls[0] == (240, 80, 16, 1)  # the kernel got a contiguous, aligned copy
    assert out.stride() == _ops._expected_out_strides(q, 16)
