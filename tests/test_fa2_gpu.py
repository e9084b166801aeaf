"""The FA-2 kernel family (head dims <= 256, 320 and 384) on the GPU against a float64 reference: dtype x head dim
x causal (none, top-left, bottom-right) x GQA, odd lengths, masks (bool, additive, block-sparse,
padding), Ev != E, layouts, LSE, torch.compile, CUDA graphs, opcheck and the op's mask checks. The Hopper
kernel's own paths (work walk, split tail, look-ahead, P pair, TMA stores, short-keys tile): test_fa2_hopper_gpu.py.

Tolerance (tests/_reference.py): 2x SDPA's own low-precision error + ATOL on rows that keep a key;
fully masked rows exactly 0 with lse -inf. Skipped (not passed) without a CUDA GPU of compute
capability >= 8.0 or FA-2 kernels in the build; a failure where the extension is expected but missing
(tests/conftest.py). Budget: ~90 s on an H100
(the 4097-long cases run for few combinations)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import ffpa_attn
from _fa2_case import (  # noqa: F401 (mma: a fixture)
    FA2_MARKS,
    CAUSAL,
    DT_NAME,
    DTYPES,
    FA2_DIMS,
    FA2_PAIRS,
    HEADS,
    INFO,
    MMA_PATHS,
    ODD_PAIRS,
    _first_dtype,
    check,
    expected_mma,
    mma,
    need,
    run_fa2,
)
from _reference import (
    MASK_KINDS,
    assert_close_to_reference,
    capture_graph,
    make_mask,
    rand_qkv,
    reference,
    rising_then_jumping_keys,
)
pytestmark = FA2_MARKS


# ---- correctness grids -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("D", FA2_DIMS)
@pytest.mark.parametrize("causal", list(CAUSAL))
@pytest.mark.parametrize("heads", HEADS, ids=["mha", "gqa", "mqa"])
def test_fa2_every_head_dim(dtype, D, causal, heads, mma):
    need(dtype, D)
    import ffpa_attn._C as C

    assert C.kernel_info(DT_NAME[dtype], "fa2", D, D)["mma"] == expected_mma(mma, D, D)
    q, k, v = rand_qkv(2, *heads, 133, 190, D, dtype, seed=D + len(causal))
    out, lse = run_fa2(q, k, v, causal)
    check(out, lse, q, k, v, causal, what=f"D={D} {causal} heads={heads} mma={mma}")
    if causal == "none" and heads == HEADS[0]:  # a negative scale: the kernels flip Q's sign bits
        out, lse = run_fa2(q, k, v, causal, scale=-0.09)
        check(out, lse, q, k, v, causal, scale=-0.09, what=f"D={D} negative scale mma={mma}")


LENGTHS = [(1, 1), (17, 17), (255, 255), (1000, 1000), (4097, 4097), (1, 4097), (17, 1000), (1000, 17),
           (4097, 255), (255, 4097)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("D", [64, 128, 256, 320])
@pytest.mark.parametrize("L,S", LENGTHS, ids=[f"L{a}-S{b}" for a, b in LENGTHS])
@pytest.mark.parametrize("causal", list(CAUSAL))
def test_fa2_odd_lengths(dtype, D, L, S, causal, mma):
    need(dtype, D)
    if max(L, S) > 1000 and (D != 128 or dtype != torch.bfloat16):
        pytest.skip("4097-long cases run for bf16 D=128 only, to bound the test time")
    heads = HEADS[(L + S) % 3]
    q, k, v = rand_qkv(1, *heads, L, S, D, dtype, seed=L * 7 + S)
    out, lse = run_fa2(q, k, v, causal)
    check(out, lse, q, k, v, causal, what=f"D={D} L={L} S={S} {causal} heads={heads}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("causal", ["none", "bottom_right"])
def test_fa2_scores_rising_then_jumping(dtype, D, causal, mma):
    """Row maxima that creep up tile after tile (the Hopper kernel keeps its old max: P above 1) and then
    jump (the max moves, O rescales): output and LSE as the reference's."""
    need(dtype, D)
    q, k, v = rand_qkv(2, 4, 2, 300, 1500, D, dtype, seed=41)
    k = rising_then_jumping_keys(k)
    out, lse = run_fa2(q, k, v, causal)
    check(out, lse, q, k, v, causal, what=f"D={D} {causal} rising scores")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("D", [64, 96, 128, 256])
@pytest.mark.parametrize("causal", ["none", "bottom_right"])
def test_fa2_scores_far_above_the_standing_max(dtype, D, causal, mma):
    """Scores in the last quarter of the keys hundreds of units (base 2) above every earlier one: the Hopper
    kernel's standing max (attn/standing_max.cuh) sees P overflow to inf there and recomputes that tile's S from
    global memory before the exact update; output and LSE as the reference's. 2100 keys: the calls that take the
    standing max (launch/heuristics.h fa2_ws_standing_max) at D <= 128, causal too."""
    import ffpa_attn._C as C

    need(dtype, D)
    S = 2100
    assert D > 128 or C.fa2_ws_standing_max(D, S, causal != "none")
    q, k, v = rand_qkv(2, 4, 2, 300, S, D, dtype, seed=43)
    k = rising_then_jumping_keys(k, top=2.5, jump=40.0)
    out, lse = run_fa2(q, k, v, causal)
    check(out, lse, q, k, v, causal, what=f"D={D} {causal} scores far above the standing max")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_fa2_one_key_near_the_float_limit(dtype, D, mma):
    """Every score 0 but one key's, 127.6 above them (base 2) in a late tile: P = 2^127.6 stays finite, so the
    standing max's after-the-fact update scales the row by 2^-126 (its largest step: 2^-127 is no normal float);
    the output is that key's value row (the other 1499 weigh 2^-127.6 each)."""
    need(dtype, D)
    B, H, L, S = 1, 2, 256, 1500
    q = torch.zeros(B, H, L, D, device="cuda", dtype=dtype)
    k = torch.zeros(B, H, S, D, device="cuda", dtype=dtype)
    q[..., 0] = 1.0
    k[:, :, 1100, 0] = 127.6 / (math.log2(math.e) / math.sqrt(D))
    v = torch.randn(B, H, S, D, device="cuda", dtype=dtype, generator=torch.Generator(device="cuda").manual_seed(53))
    out, lse = run_fa2(q, k, v)
    check(out, lse, q, k, v, what=f"D={D} one key near the float limit")


@pytest.mark.parametrize("D", [64, 128, 256])
def test_fa2_nan_key_propagates(D, mma):
    """A NaN in one key of a late tile (no mask): every row that sees it is NaN, as in SDPA's math, whichever way
    the tile's softmax runs (the standing max lets a NaN sum pass its test and propagate)."""
    dtype = _first_dtype()
    need(dtype, D)
    q, k, v = rand_qkv(1, 2, 2, 200, 1500, D, dtype, seed=47)  # 1500 keys: the long-key kernels (standing max)
    k[:, :, 1300, 5] = float("nan")
    out = ffpa_attn.forward(q, k, v, strict=True)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert torch.isnan(ref).any(-1).all()
    assert torch.equal(torch.isnan(out).any(-1), torch.isnan(ref).any(-1))




@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("D", [64, 96, 128, 256, 320, 384])
@pytest.mark.parametrize("kind", MASK_KINDS)
def test_fa2_masks(dtype, D, kind, mma):
    need(dtype, D)
    B, Hq, Hkv, L, S = 2, 4, 2, 300, 520
    q, k, v = rand_qkv(B, Hq, Hkv, L, S, D, dtype, seed=D + 3)
    mask = make_mask(kind, B, Hq, L, S, dtype, torch.Generator(device="cuda").manual_seed(D))
    out, lse = run_fa2(q, k, v, attn_mask=mask)
    check(out, lse, q, k, v, attn_mask=mask, what=f"D={D} mask={kind}")


@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("S", [512, 768])
def test_fa2_masks_aligned_rows(kind, S, mma):
    """Rows of a 16-byte multiple pitch: the block-map pass reads them 16 bytes at a time."""
    dtype = _first_dtype()
    B, Hq, Hkv, L = 2, 4, 2, 260
    q, k, v = rand_qkv(B, Hq, Hkv, L, S, 128, dtype, seed=S + 1)
    mask = make_mask(kind, B, Hq, L, S, dtype, torch.Generator(device="cuda").manual_seed(S))
    out, lse = run_fa2(q, k, v, attn_mask=mask)
    check(out, lse, q, k, v, attn_mask=mask, what=f"S={S} mask={kind} mma={mma}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("kind", ["blocksparse", "additive_fp32"])
@pytest.mark.parametrize("L,S", [(1, 300), (255, 1000), (1000, 255)], ids=["L1", "L<S", "L>S"])
def test_fa2_masks_odd_lengths(dtype, kind, L, S, mma):
    need(dtype, 128)
    q, k, v = rand_qkv(1, 4, 1, L, S, 128, dtype, seed=L + S)
    mask = make_mask(kind, 1, 4, L, S, dtype, torch.Generator(device="cuda").manual_seed(L))
    out, lse = run_fa2(q, k, v, attn_mask=mask)
    check(out, lse, q, k, v, attn_mask=mask, what=f"L={L} S={S} mask={kind}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("pair", ODD_PAIRS or [pytest.param(None, marks=pytest.mark.skip(reason="no Ev != E pair compiled"))])
@pytest.mark.parametrize("case", ["none", "top_left", "bottom_right", "blocksparse"])
def test_fa2_value_head_dim_differs(dtype, pair, case, mma):
    E, Ev = pair
    need(dtype, E, Ev)
    q, k, v = rand_qkv(2, 4, 2, 211, 300, E, dtype, seed=E + Ev, Dv=Ev)
    mask = make_mask(case, 2, 4, 211, 300, dtype, torch.Generator(device="cuda").manual_seed(1)) if case in MASK_KINDS else None
    causal = case if case in CAUSAL else "none"
    out, lse = run_fa2(q, k, v, causal, attn_mask=mask)
    assert out.shape == (2, 4, 211, Ev)
    check(out, lse, q, k, v, causal, attn_mask=mask, what=f"E={E} Ev={Ev} {case}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("case", ["none", "bottom_right", "bool_full"])
def test_fa2_bnhd_views_without_copy(dtype, case):
    need(dtype, 128)
    B, Hq, Hkv, L, S = 2, 4, 2, 200, 300
    q, k, v = rand_qkv(B, Hq, Hkv, L, S, 128, dtype, seed=5, layout="blhd")
    assert not q.is_contiguous()
    mask = make_mask(case, B, Hq, L, S, dtype, torch.Generator(device="cuda").manual_seed(2)) if case in MASK_KINDS else None
    causal = case if case in CAUSAL else "none"
    out, lse = run_fa2(q, k, v, causal, attn_mask=mask)
    check(out, lse, q, k, v, causal, attn_mask=mask, what=f"BNHD view {case}")
    assert out.transpose(1, 2).is_contiguous()  # output follows the query layout




@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_fa2_is_the_default_and_scale_3d(dtype):
    """forward(q, k, v) at D=128 runs our FA-2 kernel with no argument telling it to."""
    need(dtype, 128)
    q, k, v = rand_qkv(3, 2, 2, 129, 77, 128, dtype, seed=11)
    out = ffpa_attn.forward(q, k, v, strict=True)  # strict: raises if it would fall back
    check(out, None, q, k, v, what="default")
    out, lse = run_fa2(q, k, v, "top_left", scale=0.37)
    check(out, lse, q, k, v, "top_left", scale=0.37, what="custom scale")
    out3 = ffpa_attn.forward(q[1], k[1], v[1], strict=True)  # 3-D (H, L, E)
    check(out3.unsqueeze(0), None, q[1:2], k[1:2], v[1:2], what="3-D")


# ---- torch integration -------------------------------------------------------------------------



def test_torch_compile_fullgraph_with_mask_matches_eager():
    dtype = _first_dtype()
    q, k, v = rand_qkv(1, 4, 2, 257, 300, 128, dtype, seed=21)
    mask = make_mask("padding", 1, 4, 257, 300, dtype, torch.Generator(device="cuda").manual_seed(3))

    def f(q, k, v, mask):
        a = ffpa_attn.forward(q, k, v, attn_mask=mask, enable_gqa=True, strict=True)
        b = ffpa_attn.forward(q, k, v, is_causal=True, causal_align="bottom_right", enable_gqa=True, strict=True)
        return a, b

    eager = f(q, k, v, mask)
    got = torch.compile(f, fullgraph=True)(q, k, v, mask)
    for a, b in zip(got, eager):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_cuda_graph_capture_and_replay_with_mask():
    dtype = _first_dtype()
    q, k, v = rand_qkv(2, 4, 4, 190, 190, 128, dtype, seed=22)
    mask = make_mask("blocksparse", 2, 4, 190, 190, dtype, None).expand(2, 4, 190, 190).clone()
    f = lambda: ffpa_attn.forward(q, k, v, attn_mask=mask, strict=True)  # noqa: E731
    eager = f()
    graph, static_out = capture_graph(f)
    # Fresh inputs and a different mask copied into the captured buffers: the replay follows them.
    q2, k2, v2 = rand_qkv(2, 4, 4, 190, 190, 128, dtype, seed=23)
    q.copy_(q2), k.copy_(k2), v.copy_(v2)
    mask.copy_(make_mask("bool_full", 2, 4, 190, 190, dtype, torch.Generator(device="cuda").manual_seed(4)))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(static_out, f(), rtol=0, atol=0)
    assert not torch.equal(static_out, eager)


def test_opcheck_ffpa_fwd_with_and_without_mask():
    dtype = _first_dtype()
    op = torch.ops.ffpa_attn.ffpa_fwd.default
    q, k, v = rand_qkv(1, 4, 2, 65, 90, 128, dtype, seed=31)
    g = torch.Generator(device="cuda").manual_seed(5)
    torch.library.opcheck(op, (q, k, v, None, 128 ** -0.5, True, False, 0, 0, 0))
    torch.library.opcheck(op, (q, k, v, None, 128 ** -0.5, True, True, 0, 0, 0))
    torch.library.opcheck(op, (q, k, v, make_mask("bool_bcast", 1, 4, 65, 90, dtype, g), 0.1, False, False, 0, 0, 0))
    qt, kt, vt = rand_qkv(1, 4, 2, 65, 90, 128, dtype, seed=32, layout="blhd")
    torch.library.opcheck(op, (qt, kt, vt, make_mask("additive_fp32", 1, 4, 65, 90, dtype, g), 0.1, False, False, 0, 0, 0))


def test_op_applies_mask_and_causal_together():
    """At the op level is_causal and attn_mask combine (forward() keeps SDPA's rule against it)."""
    dtype = _first_dtype()
    q, k, v = rand_qkv(1, 4, 2, 150, 100, 128, dtype, seed=33)
    mask = make_mask("bool_bcast", 1, 4, 150, 100, dtype, torch.Generator(device="cuda").manual_seed(6))
    for bottom_right in (False, True):
        out, lse = torch.ops.ffpa_attn.ffpa_fwd(q, k, v, mask, 128 ** -0.5, True, bottom_right, 0, 0, 0)
        torch.cuda.synchronize()
        assert_close_to_reference(out, q, k, v, is_causal=True, causal_bottom_right=bottom_right, attn_mask=mask,
                                  lse=lse, what=f"mask + causal (bottom_right={bottom_right})")


# ---- launch resources ----------------------------------------------------------------------------

# Local memory (spills) the FA-2 tile tables accept, by head dim, on sm_90a (docs/tuning_fa2.md):
# mma.sync: D = 128's two m-tiles with prefetch buffers once spilled a few loop invariants (16-32 B
# stack), D = 384's whole-head-dim tile spills 40 B and still beats FFPA L1 (run 8). Every other
# entry must stay spill-free.
FA2_LOCAL_BYTES_BUDGET = {128: 32, 384: 40}
# wgmma (the TMA kernel, and up to 256 its cp.async fallback): no local memory.
FA2_WGMMA_LOCAL_BYTES_BUDGET = {}


def test_fa2_kernel_info_and_no_register_spills():
    import ffpa_attn._C as C

    for path in MMA_PATHS:
        ffpa_attn.set_fa2_mma(path)
        try:
            for dt in INFO["accs"]["fa2"]:
                for e, ev in FA2_PAIRS:
                    info = C.kernel_info(dt, "fa2", e, ev, 0, True)
                    assert info["family"] == "fa2" and info["level"] == 0 and info["chunk_d"] == e
                    assert info["mma"] == expected_mma(path, e, ev), (path, e, ev, info)
                    budgets = FA2_WGMMA_LOCAL_BYTES_BUDGET if info["mma"] == "wgmma" else FA2_LOCAL_BYTES_BUDGET
                    budget = budgets.get(max(e, ev), 0)
                    assert info["local_bytes"] <= budget, (
                        f"{dt} E={e} Ev={ev} {info['mma']}: {info['local_bytes']} bytes of local memory (budget {budget})")
                    assert info["registers"] <= 255
                    # masked calls on Hopper run a tile of 128 rows x a power-of-two key tile, so mask
                    # blocks of 64 or 128 line up with whole tiles
                    if info["mma"] == "wgmma":
                        assert (info["mask_block_m"], info["mask_block_n"]) in ((128, 128), (128, 64), (128, 32)), info
        finally:
            ffpa_attn.set_fa2_mma("auto")


# ---- op-level mask checks (C++ TORCH_CHECK), each would pass silently without its check ----------
# Kept last in the file: a crash here must not hide the tests above.

def test_op_rejects_bad_masks():
    dtype = _first_dtype()
    q, k, v = rand_qkv(2, 4, 2, 64, 80, 128, dtype, seed=51)
    op = torch.ops.ffpa_attn.ffpa_fwd
    bad = {
        "3-D": torch.ones(4, 64, 80, dtype=torch.bool, device="cuda"),
        "S + 1": torch.ones(1, 1, 64, 81, dtype=torch.bool, device="cuda"),
        "L + 1": torch.ones(1, 1, 65, 80, dtype=torch.bool, device="cuda"),
        "heads not 1 or Hq": torch.ones(1, 2, 64, 80, dtype=torch.bool, device="cuda"),
        "batch not 1 or B": torch.ones(3, 1, 64, 80, dtype=torch.bool, device="cuda"),
        "int32": torch.ones(1, 1, 64, 80, dtype=torch.int32, device="cuda"),
        "float64": torch.zeros(1, 1, 64, 80, dtype=torch.float64, device="cuda"),
        "cpu": torch.ones(1, 1, 64, 80, dtype=torch.bool),
    }
    # Every call passes all 10 arguments of the schema (a call missing one fails on the missing
    # argument, whose message quotes the whole schema and so would match any pattern), and each
    # pattern is the op's own message, backticks included.
    assert [a.name for a in op.default._schema.arguments][-1] == "num_stages"
    good = op(q, k, v, torch.ones(1, 1, 64, 80, dtype=torch.bool, device="cuda"), 0.1, False, False, 0, 0, 0)
    assert good[0].shape == (2, 4, 64, 128)
    for what, mask in bad.items():
        with pytest.raises(RuntimeError, match=r"^ffpa_fwd: `attn_mask` ") as err:
            op(q, k, v, mask, 0.1, False, False, 0, 0, 0)
            pytest.fail(f"mask {what} accepted")
        assert "missing value" not in str(err.value), what
    with pytest.raises(RuntimeError, match=r"^ffpa_fwd: `level` must be 0"):
        op(q, k, v, None, 0.1, False, False, 4, 0, 0)
    with pytest.raises(RuntimeError, match=r"^ffpa_fwd: head dims \(128, 128\) .* at FFPA level 2 are not compiled"):
        op(q, k, v, None, 0.1, False, False, 2, 0, 0)


def test_reference_helpers_agree_with_sdpa():
    """The yardstick itself: the float64 reference with the bottom-right alignment is SDPA with the
    shifted tril (guards the helpers every test above relies on)."""
    q, k, v = rand_qkv(1, 2, 2, 9, 5, 64, torch.float32, seed=61)
    keep = torch.ones(9, 5, dtype=torch.bool, device="cuda").tril(diagonal=-4)
    ref, lse = reference(q, k, v, is_causal=True, causal_bottom_right=True)
    torch.testing.assert_close(ref.float(), torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep),
                               atol=1e-5, rtol=1e-5)
    assert torch.isneginf(lse[..., :4]).all() and (ref[..., :4, :] == 0).all()
