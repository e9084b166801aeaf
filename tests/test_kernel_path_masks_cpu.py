"""CPU tests of masks on the kernel path of ffpa_attn.forward (against the mock in _mock_kernel.py):
bool and float masks (fp16/bf16/fp32, -inf), their 4-D views (stride-0 broadcast dims kept, no
copies), the bottom-right causal flag, masks under torch.compile; and the op's fake kernel.
No GPU and no compiled extension needed."""

import math

import pytest
import torch

import ffpa_attn
from _cpu_helpers import SDPA, TOL, fallback_warnings, ref_attention, rn
from _mock_kernel import MOCK_CALLS, mock_kernel  # noqa: F401  (a fixture)
from ffpa_attn import FFPAUnsupportedError, _masks, _ops

# ====================================================== masks to the kernel
def _bool_mask(g, *shape, p=0.3):
    m = torch.rand(shape, generator=g) > p
    m[..., 0] = True  # no fully masked row unless a test wants one
    return m


MASK_CASES = {
    # id: (q shape, kv shape, mask builder(g, L, S), 4-D shape the kernel must see)
    "2d_LS": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: _bool_mask(g, L, S), (1, 1, 9, 11)),
    "padding_B11S": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 2, 1, 1, S), (2, 1, 1, 11)),
    "key_row_1S": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 1, S), (1, 1, 1, 11)),
    "per_head": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 3, L, S), (1, 3, 9, 11)),
    "full_4d": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 2, 3, L, S), (2, 3, 9, 11)),
    "column_L1": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: _bool_mask(g, L, 1, p=-1), (1, 1, 9, 1)),
    "float_fp32": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: rn(g, 2, 1, L, S), (2, 1, 9, 11)),
    "q2d": ((9, 16), (11, 16), lambda g, L, S: _bool_mask(g, L, S), (1, 1, 9, 11)),
    "q3d": ((3, 9, 16), (3, 11, 16), lambda g, L, S: _bool_mask(g, 3, L, S), (1, 3, 9, 11)),
    "q5d_2d_mask": ((2, 2, 3, 9, 16), (2, 2, 3, 11, 16), lambda g, L, S: _bool_mask(g, L, S), (1, 1, 9, 11)),
    "q5d_full": ((2, 2, 3, 9, 16), (2, 2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 2, 2, 3, L, S), (4, 3, 9, 11)),
    "q5d_heads_only": ((2, 2, 3, 9, 16), (2, 2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 3, L, S), (1, 3, 9, 11)),
    "q5d_part_batch": ((2, 2, 3, 9, 16), (2, 2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 2, 1, 1, 1, S), (4, 1, 1, 11)),
    "gqa": ((2, 4, 9, 16), (2, 2, 11, 16), lambda g, L, S: _bool_mask(g, 2, 4, L, S), (2, 4, 9, 11)),
}
# Where the kernel must get a view of the user's mask (no copy).
MASK_VIEWS = {"2d_LS", "padding_B11S", "key_row_1S", "per_head", "full_4d", "column_L1",
              "float_fp32", "q2d", "q3d", "q5d_2d_mask", "q5d_full", "q5d_heads_only", "gqa"}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("case", list(MASK_CASES))
def test_masks_go_to_the_kernel(mock_kernel, gen, case, dtype, record):
    qs, kvs, make, kernel_shape = MASK_CASES[case]
    q, k, v = rn(gen, *qs, dtype=dtype), rn(gen, *kvs, dtype=dtype), rn(gen, *kvs, dtype=dtype)
    mask = make(gen, qs[-2], kvs[-2])
    gqa = len(qs) >= 3 and qs[-3] != kvs[-3]
    out, lse = ffpa_attn.forward(q, k, v, attn_mask=mask, enable_gqa=gqa, return_lse=True,
                                 strict=True)
    call = mock_kernel[0]
    assert call["mask"]["shape"] == kernel_shape and call["mask"]["dtype"] == mask.dtype
    if case in MASK_VIEWS:
        assert call["mask"]["storage"] == mask.untyped_storage().data_ptr(), "mask was copied"
    ref_out, ref_lse = ref_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
    torch.testing.assert_close(out.double(), ref_out, **TOL[dtype])
    torch.testing.assert_close(out, SDPA(q, k, v, attn_mask=mask, enable_gqa=gqa), **TOL[dtype])
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-4, rtol=1e-4)
    assert fallback_warnings(record) == []


def test_mask_as_4d_views_and_expanded_dims(gen):
    base = _bool_mask(gen, 1, 1, 9, 11)
    expanded = base.expand(2, 3, 9, 11)  # what users get from .expand: stride 0, no copy
    m4 = _masks.mask_as_4d(expanded, (2, 3, 9, 16))
    assert m4.shape == (1, 1, 9, 11)  # expanded dims back to 1: one block-map slice, same values
    assert m4.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert _masks.mask_slices(expanded, (2, 3, 9, 16)) == 1
    pad = _bool_mask(gen, 2, 11)[:, None, None, :].expand(2, 3, 9, 11)  # padding mask, expanded
    m4 = _masks.mask_as_4d(pad, (2, 3, 9, 16))
    assert m4.shape == (2, 1, 1, 11) and m4.untyped_storage().data_ptr() == pad.untyped_storage().data_ptr()
    assert torch.equal(m4.expand(2, 3, 9, 11), pad)
    assert _masks.mask_slices(pad, (2, 3, 9, 16)) == 2
    assert _masks.mask_slices(_bool_mask(gen, 2, 3, 9, 11), (2, 3, 9, 16)) == 6
    assert _masks.mask_slices(_bool_mask(gen, 3, 9, 11), (2, 3, 9, 16)) == 3
    # 5-D query: batch dims merged in a view when they are all broadcast or all full ...
    m5 = _bool_mask(gen, 1, 1, 3, 9, 11).expand(2, 2, 3, 9, 11)
    assert _masks.mask_as_4d(m5[:1, :1], (2, 2, 3, 9, 16)).shape == (1, 3, 9, 11)
    # ... and copies only the batch broadcast when some batch dims broadcast and some not
    part = _bool_mask(gen, 2, 1, 1, 1, 11)
    m4 = _masks.mask_as_4d(part, (2, 2, 3, 9, 16))
    assert m4.shape == (4, 1, 1, 11)
    assert torch.equal(m4.reshape(2, 2, 1, 1, 11), part.expand(2, 2, 1, 1, 11))
    assert _masks.mask_slices(part, (2, 2, 3, 9, 16)) == 4


def test_expanded_mask_reaches_kernel_unexpanded(mock_kernel, gen):
    q, k, v = (rn(gen, 2, 3, 9, 16, dtype=torch.float16) for _ in range(3))
    base = _bool_mask(gen, 1, 1, 9, 9)
    mask = base.expand(2, 3, 9, 9)
    out = ffpa_attn.forward(q, k, v, attn_mask=mask)
    call = mock_kernel[0]
    assert call["mask"]["shape"] == (1, 1, 9, 9)
    assert call["mask"]["storage"] == base.untyped_storage().data_ptr()
    torch.testing.assert_close(out, SDPA(q, k, v, attn_mask=mask), **TOL[torch.float16])


def test_mask_with_too_many_slices_falls_back(mock_kernel, gen, record):
    q, k, v = (rn(gen, 2, 40000, 1, 8, dtype=torch.bfloat16) for _ in range(3))
    per_head = torch.ones(2, 40000, 1, 1, dtype=torch.bool)  # 80000 (batch, head) slices
    with pytest.raises(FFPAUnsupportedError, match="65535 .batch, head. slices"):
        ffpa_attn.forward(q, k, v, attn_mask=per_head, strict=True)
    ffpa_attn.forward(q, k, v, attn_mask=per_head[:1].expand(2, 40000, 1, 1), strict=True)  # 40000
    ffpa_attn.forward(q, k, v, attn_mask=per_head[:, :1].expand(2, 40000, 1, 1), strict=True)  # 2
    assert [c["mask"]["shape"] for c in mock_kernel] == [(1, 40000, 1, 1), (2, 1, 1, 1)]


@pytest.mark.parametrize("mask_dtype", [torch.float32, "same"], ids=["fp32", "same"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_additive_masks_with_minus_inf(mock_kernel, gen, dtype, mask_dtype):
    mdt = dtype if mask_dtype == "same" else mask_dtype
    q, k, v = (rn(gen, 2, 2, 7, 32, dtype=dtype) for _ in range(3))
    mask = rn(gen, 2, 1, 7, 7, dtype=mdt)
    mask[..., 2] = -math.inf  # a masked key column
    mask[0, :, 4] = -math.inf  # a fully masked row: out 0, lse -inf
    out, lse = ffpa_attn.forward(q, k, v, attn_mask=mask, return_lse=True)
    assert mock_kernel[0]["mask"]["dtype"] == mdt
    ref_out, ref_lse = ref_attention(q, k, v, attn_mask=mask)
    assert (out[0, :, 4] == 0).all() and torch.isneginf(lse[0, :, 4]).all()
    torch.testing.assert_close(out.double(), ref_out, **TOL[dtype])
    live = ~torch.isneginf(ref_lse)
    torch.testing.assert_close(lse[live].double(), ref_lse[live], atol=1e-4, rtol=1e-4)


def test_mask_keeps_its_dtype_under_autocast(mock_kernel, gen):
    q, k, v = rn(gen, 2, 2, 9, 16), rn(gen, 2, 2, 11, 16), rn(gen, 2, 2, 11, 16)
    mask = rn(gen, 9, 11)  # float32: the kernel reads it as is (more precise than SDPA's cast)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ffpa_attn.forward(q, k, v, attn_mask=mask)
        expected = SDPA(q, k, v, attn_mask=mask)
    call = mock_kernel[0]
    assert call["dtype"] == torch.bfloat16 and call["mask"]["dtype"] == torch.float32
    torch.testing.assert_close(out, expected, **TOL[torch.bfloat16])


def test_mask_requiring_grad_runs_the_kernel_under_no_grad(mock_kernel, gen):
    q, k, v = (rn(gen, 1, 2, 9, 16, dtype=torch.float16) for _ in range(3))
    mask = torch.zeros(9, 9, requires_grad=True)
    with torch.no_grad():
        ffpa_attn.forward(q, k, v, attn_mask=mask, strict=True)
    assert len(mock_kernel) == 1
    with pytest.raises(FFPAUnsupportedError, match="attn_mask requires grad"):
        ffpa_attn.forward(q, k, v, attn_mask=mask, strict=True)


@pytest.mark.parametrize("L,S", [(5, 9), (9, 5), (7, 7), (1, 9), (9, 1)])
@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
def test_causal_align_flag_reaches_the_kernel(mock_kernel, gen, L, S, align, record):
    q = rn(gen, 2, 4, L, 16, dtype=torch.bfloat16)
    k, v = rn(gen, 2, 2, S, 16, dtype=torch.bfloat16), rn(gen, 2, 2, S, 16, dtype=torch.bfloat16)
    br = align == "bottom_right"
    out, lse = ffpa_attn.forward(q, k, v, is_causal=True, causal_align=align, enable_gqa=True,
                                 return_lse=True, strict=True)
    call = mock_kernel[0]
    assert call["is_causal"] is True and call["bottom_right"] is br and call["mask"] is None
    ref_out, ref_lse = ref_attention(q, k, v, is_causal=True, enable_gqa=True,
                                     causal_bottom_right=br)
    torch.testing.assert_close(out.double(), ref_out, **TOL[torch.bfloat16])
    dead = torch.isneginf(ref_lse)
    assert (out[dead] == 0).all() and torch.isneginf(lse[dead]).all()
    torch.testing.assert_close(lse[~dead].double(), ref_lse[~dead], atol=1e-4, rtol=1e-4)
    # the fallback gives the same answer (SDPA with the equivalent bool mask)
    fb_out, fb_lse = ffpa_attn.forward(q.float(), k.float(), v.float(), is_causal=True,
                                       causal_align=align, enable_gqa=True, return_lse=True)
    torch.testing.assert_close(out.float(), fb_out, **TOL[torch.bfloat16])
    torch.testing.assert_close(lse, fb_lse, atol=1e-4, rtol=1e-4)
    # without is_causal the alignment is ignored
    ffpa_attn.forward(q, k, v, causal_align=align, enable_gqa=True)
    assert mock_kernel[-1]["is_causal"] is False and mock_kernel[-1]["bottom_right"] is False


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_kernel_path_compile_fullgraph_with_mask(mock_kernel, gen, backend):
    def fn(q, k, v, mask):
        a = ffpa_attn.forward(q, k, v, attn_mask=mask, enable_gqa=True)
        b, lse = ffpa_attn.forward(q, k, v, is_causal=True, causal_align="bottom_right",
                                   enable_gqa=True, return_lse=True)
        return a + b, lse

    q = rn(gen, 2, 4, 9, 16, dtype=torch.float16)
    k, v = rn(gen, 2, 2, 13, 16, dtype=torch.float16), rn(gen, 2, 2, 13, 16, dtype=torch.float16)
    mask = _bool_mask(gen, 2, 1, 1, 13).expand(2, 4, 9, 13)
    eager = fn(q, k, v, mask)
    MOCK_CALLS.clear()
    got = torch.compile(fn, fullgraph=True, backend=backend)(q, k, v, mask)
    assert len(MOCK_CALLS) == 2 and MOCK_CALLS[1]["bottom_right"] is True
    assert MOCK_CALLS[0]["mask"]["shape"] == (2, 1, 1, 13)  # the expand undone: a view
    for a, b in zip(got, eager):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_kernel_path_compile_dynamic_pairs_and_masks(mock_kernel, gen):
    fn = torch.compile(
        lambda q, k, v, m: ffpa_attn.forward(q, k, v, attn_mask=m, enable_gqa=True),
        fullgraph=True, backend="aot_eager", dynamic=True,
    )
    for L, S, E, Ev in ((9, 17, 16, 16), (13, 5, 48, 32), (33, 33, 32, 32)):
        q = rn(gen, 2, 4, L, E, dtype=torch.bfloat16)
        k = rn(gen, 2, 2, S, E, dtype=torch.bfloat16)
        v = rn(gen, 2, 2, S, Ev, dtype=torch.bfloat16)
        m = _bool_mask(gen, L, S)
        torch.testing.assert_close(fn(q, k, v, m), ffpa_attn.forward(q, k, v, attn_mask=m, enable_gqa=True),
                                   atol=0, rtol=0)
    assert {c["family"] for c in MOCK_CALLS} == {"fa2"}


def test_fake_kernel_accepts_a_mask():
    q = torch.empty(2, 4, 9, 32, device="meta", dtype=torch.bfloat16)
    k = torch.empty(2, 2, 13, 32, device="meta", dtype=torch.bfloat16)
    v = torch.empty(2, 2, 13, 16, device="meta", dtype=torch.bfloat16)
    mask = torch.empty(1, 1, 9, 13, device="meta", dtype=torch.bool).expand(2, 4, 9, 13)
    out, lse = _ops._ffpa_fwd_fake(q, k, v, mask, 0.1, True, True, 0, 0, 0)
    assert out.shape == (2, 4, 9, 16) and lse.shape == (2, 4, 9)
    with pytest.raises(RuntimeError, match="attn_mask"):
        _ops._ffpa_fwd_fake(q, k, v, mask[0], 0.1, False, False, 0, 0, 0)


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
    out, lse = _ops._ffpa_fwd_fake(q, k, v, None, 0.1, True, False, 0, 0, 0)
    assert out.shape == (B, H, L, D) and out.dtype == torch.float16 and out.device == q.device
    assert lse.shape == (B, H, L) and lse.dtype == torch.float32 and lse.is_contiguous()
    if blhd:
        assert out.stride() == torch.empty(B, L, H, D).transpose(1, 2).stride()
    else:
        assert out.is_contiguous()


def test_realigned_op_keeps_promised_layout(monkeypatch, gen):
    # If realigning copies a BLHD q, the op still returns the BLHD layout its fake promised.
    calls = []

    def fake_kernel(q, k, v, attn_mask, scale, is_causal, causal_bottom_right=False, level=0,
                    acc=0, num_stages=0):
        calls.append(q.stride())
        out = torch.zeros(q.shape[0], q.shape[1], q.shape[2], v.shape[-1], dtype=q.dtype)
        return out, torch.zeros(q.shape[:3])

    monkeypatch.setattr(_ops, "ffpa_fwd", fake_kernel)
    base = rn(gen, 2 * 5 * 3 * 16 + 1, dtype=torch.float16)
    q = base[1:].view(2, 5, 3, 16).transpose(1, 2)  # BLHD view, misaligned pointer
    k = v = rn(gen, 2, 3, 7, 16, dtype=torch.float16)
    out, _ = _ops.ffpa_fwd_realigned(q, k, v, None, 0.25, False, False, 0, 0, 0)
    assert calls[0] == (240, 80, 16, 1)  # the kernel got a contiguous, aligned copy
    assert out.stride() == _ops._expected_out_strides(q, 16)
