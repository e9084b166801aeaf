"""The FA-2 kernel family (head dims <= 256, 320 and 384) on the GPU against a float64 reference: dtype x head dim
x causal (none, top-left, bottom-right) x GQA, odd lengths, masks (bool, additive, block-sparse,
padding), Ev != E, layouts, LSE, torch.compile, CUDA graphs, opcheck and the op's mask checks.

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
from conftest import cuda_available
from _reference import (
    MASK_KINDS,
    assert_close_to_reference,
    capture_graph,
    kernels_launched,
    make_mask,
    poison_allocator,
    rand_qkv,
    reference,
    rising_then_jumping_keys,
)
from ffpa_attn import _ops

HAS_GPU = cuda_available  # a CUDA device of sm_80+ and the extension (tests/conftest.py)
INFO = ffpa_attn.build_info() if HAS_GPU else {}
FA2_PAIRS = sorted(tuple(p) for p in INFO.get("head_dim_pairs", {}).get("fa2", []))
FA2_DIMS = sorted(e for e, ev in FA2_PAIRS if e == ev)
ODD_PAIRS = [p for p in FA2_PAIRS if p[0] != p[1]]
pytestmark = [
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


@pytest.mark.parametrize("D", [64, 128, 256, 320, 384])
@pytest.mark.parametrize("causal", ["none", "top_left", "bottom_right"])
def test_fa2_more_items_than_sms(D, causal, mma):
    """More work slots than SMs: the Hopper kernel's persistent blocks take items from a work counter
    (list scheduling), every item exactly once; GQA, odd lengths, causal pairs of unequal length."""
    dtype = _first_dtype()
    need(dtype, D)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    Hq = 2 * sms // 3 + 1  # with 3 query blocks each: about 2 (non-causal) or 4/3 (causal pairs) slots per SM
    q, k, v = rand_qkv(2, Hq, 1 if Hq % 2 else 2, 3 * 192 - 37, 700, D, dtype, seed=D + 11)
    out, lse = run_fa2(q, k, v, causal)
    check(out, lse, q, k, v, causal, what=f"D={D} {causal} Hq={Hq}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("D", [32, 64, 96, 128, 256, 384])
@pytest.mark.parametrize("case", ["mha", "gqa_blhd_neg_scale"])
def test_fa2_split_tail(dtype, D, case, mma):
    """The Hopper kernel's split tail (kernels/fa2_ws_split.cuh; launch/heuristics.h fa2_split_tail): one
    query block a head, SMs + 9 heads, 4133 keys, so the walk is one round and 9 items and every slot is a
    share of key tiles: nearly every item is cut in two pieces on two blocks, whose warps merge their
    partials (the second to finish stores O and the LSE); a last key tile of 37 keys (masked inside a
    piece), GQA with a BLHD query, a negative scale."""
    import ffpa_attn._C as C

    need(dtype, D)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    Hq, L, S = sms + 9, 128, 4133
    info = C.kernel_info(DT_NAME[dtype], "fa2", D, D)
    if info["mma"] == "wgmma":  # (either tile may run it: fa2_narrow_tile)
        for block_n in (info["block_n"], info["mask_block_n"]):
            assert C.fa2_split_tail(Hq, sms, S, block_n, False, False) == (0, sms), block_n
    gqa = case != "mha"
    q, k, v = rand_qkv(1, Hq, 1 if gqa else Hq, L, S, D, dtype, seed=D + 71)
    scale = -0.09 if gqa else None
    if gqa:
        q = q.transpose(1, 2).contiguous().transpose(1, 2)
    out, lse = run_fa2(q, k, v, scale=scale)
    check(out, lse, q, k, v, scale=scale, what=f"D={D} {case} Hq={Hq} S={S}")


@pytest.mark.parametrize("D", [64, 128, 256, 320, 384])
@pytest.mark.parametrize("causal", ["top_left", "bottom_right"])
def test_fa2_causal_walk_ends_on_single_items(D, causal, mma):
    """Causal calls whose pairs leave the walk's last round part idle walk their last (batch, head)s as
    single items, longest first (launch/heuristics.h fa2_causal_tail_bh; 192- and 128-row items: 6 and 8
    query blocks, 178 (batch, head)s, tails of 44 and 33): pairs, the lone middle blocks and the tail's
    items each exactly once."""
    import ffpa_attn._C as C

    dtype = _first_dtype()
    need(dtype, D)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    Hq = 2 * sms // 3 + 1
    L = 1000
    assert C.fa2_causal_tail_bh(2 * Hq, -(-L // 192), sms) > 0 or sms != 132
    q, k, v = rand_qkv(2, Hq, 1 if Hq % 2 else 2, L, L + 61, D, dtype, seed=D + 17)
    out, lse = run_fa2(q, k, v, causal)
    check(out, lse, q, k, v, causal, what=f"D={D} {causal} Hq={Hq} L={L}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("D", [64, 96])
@pytest.mark.parametrize("causal", ["none", "top_left", "bottom_right"])
@pytest.mark.parametrize("scale", [None, -0.09], ids=["scale", "negative_scale"])
def test_fa2_look_ahead_kernel(dtype, D, causal, scale, mma):
    """The Hopper kernel that issues each consumer's next item's first S before its epilogue (launch/
    heuristics.h fa2_ws_look_ahead: D <= 64 from 1024 keys, D <= 96 from 512): more items than SMs, so
    each consumer chains several; GQA, odd lengths, L > S (bottom-right: items with no key tile mid-walk),
    a negative scale (Q flipped before the look-ahead S)."""
    import ffpa_attn._C as C

    need(dtype, D)
    L, S = 1000 + D + 37, 1100 - D + 13
    assert C.fa2_ws_look_ahead(D, S)  # the shape is one that runs the look-ahead kernel on Hopper
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    Hq = sms // 3 + 1
    q, k, v = rand_qkv(2, Hq, 1 if Hq % 2 else 2, L, S, D, dtype, seed=D + 23)
    out, lse = run_fa2(q, k, v, causal, scale=scale)
    check(out, lse, q, k, v, causal, scale=scale, what=f"D={D} {causal} scale={scale} Hq={Hq} L={L} S={S}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", ["none", "top_left", "bottom_right"])
@pytest.mark.parametrize("S", [1023, 1100, 1200])
def test_fa2_p_buffer_pair(dtype, causal, S, mma):
    """D = 128's deferred-wait Hopper kernel with P in two register buffers (launch/heuristics.h fa2_ws_pf_pair:
    from 1024 keys; 1023 runs the one-buffer kernel): items of 9 and 10 key tiles, so an item's last P ends in
    either buffer (the second copied to the first before the last P V), causal items of every count; more items
    than SMs, GQA, a negative scale."""
    import ffpa_attn._C as C

    need(dtype, 128)
    assert C.fa2_ws_pf_pair(S) == (S >= 1024)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    Hq = sms // 4 + 1
    L = 700 + S % 97
    q, k, v = rand_qkv(2, Hq, 1 if Hq % 2 else 2, L, S, 128, dtype, seed=S + 5)
    scale = -0.08 if S == 1100 else None
    out, lse = run_fa2(q, k, v, causal, scale=scale)
    check(out, lse, q, k, v, causal, scale=scale, what=f"D=128 {causal} Hq={Hq} L={L} S={S}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("D", [32, 64, 96, 128])
@pytest.mark.parametrize("causal", ["none", "bottom_right"])
@pytest.mark.parametrize("layout", ["bhld", "blhd"])
def test_fa2_tma_store(dtype, D, causal, layout, mma):
    """O stored through shared memory by TMA on Hopper (Fa2FwdWs kTmaStore; launch/heuristics.h
    kFa2TmaStoreMaxDim: D <= 64 on both tiles, 65..96 on the 128 x 128 tile of masked and short calls,
    which this short shape takes; D = 128 through each item's last K tile, kOInK, that stage held until
    the store has read it), with two Q slots at D <= 64 (kFa2TwoQSlotsMaxDim): more items than
    SMs (each consumer's buffer rewritten item after item, after the last item's store has read it; each
    Q slot and its item word refilled while the other's item runs), rows past L clipped (L = 197), columns past Dv clipped (D =
    32 and 96: a 64-column box past the head), a BLHD query's BLHD output (the map's row stride H * Dv),
    GQA, a negative scale."""
    import ffpa_attn._C as C

    need(dtype, D)
    info = C.kernel_info(DT_NAME[dtype], "fa2", D, D)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    Hq = sms // 2 + 3
    L, S = 197, 203
    if info["mma"] == "wgmma":
        assert info["o_tma_store"] == (D <= 64 or D == 128) and info["mask_o_tma_store"], info
        assert info["q_slots"] == info["mask_q_slots"] == (2 if D <= 64 else 1), info  # kFa2TwoQSlotsMaxDim
        if D == 96:  # the short call runs the masked tile (fa2_narrow_tile), whose O goes by TMA
            off = S - L if causal == "bottom_right" else 0
            assert C.fa2_narrow_tile(D, 2 * Hq, L, S, causal != "none", off, sms, info["block_m"], info["block_n"],
                                     info["mask_block_m"], info["mask_block_n"])
    q, k, v = rand_qkv(2, Hq, 1 if Hq % 2 else 2, L, S, D, dtype, seed=D + 61)
    scale = -0.11 if layout == "blhd" else None
    if layout == "blhd":
        q = q.transpose(1, 2).contiguous().transpose(1, 2)
    out, lse = run_fa2(q, k, v, causal, scale=scale)
    if layout == "blhd":
        assert out.stride() == (L * Hq * D, D, Hq * D, 1), out.stride()
    check(out, lse, q, k, v, causal, scale=scale, what=f"D={D} {causal} {layout} Hq={Hq}")


SHORT_CASES = [  # (L, S, causal, heads, layout): S in 129..208 non-causal on the 128-row tile runs the short-keys one
    (197, 197, "none", (4, 4), "bhld"), (40, 129, "none", (4, 1), "bhld"), (300, 208, "none", (4, 2), "blhd"),
    (50, 150, "none", (6, 2), "bhld"), (197, 209, "none", (4, 4), "bhld"), (197, 128, "none", (4, 4), "bhld"),
    (197, 197, "bottom_right", (4, 2), "bhld")]


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("D", [32, 64, 96])
@pytest.mark.parametrize("case", SHORT_CASES, ids=[f"L{c[0]}-S{c[1]}-{c[2]}-{c[4]}" for c in SHORT_CASES])
def test_fa2_short_keys_tile(dtype, D, case, mma):
    """On Hopper, calls of 129..208 keys without causal masking or a mask at D <= 64 that would run the 128 x 128
    tile (fa2_narrow_tile) run the warp-specialised kernel on one 208-key tile an item (traits/fa2_traits.h
    fa2_tile_sm90_short; launch/heuristics.h fa2_short_tile): keys past S masked inside the one tile (zero-filled
    by TMA; the kernel's mask_cut), more items than SMs, GQA / MQA, L of 40 and 50 (from 33: forward's short
    queries run the decode kernels), a negative scale, a zero scale (per element there); 128 or 209
    keys, causal calls, D = 96 and L = 300 (the table's 192-row tile, fa2_narrow_tile) run the other tiles,
    mask_cut cutting their last key tile where two consumers run it. Which kernel ran is read from the profiler."""
    import ffpa_attn._C as C

    need(dtype, D)
    L, S, causal, heads, layout = case
    info = C.kernel_info(DT_NAME[dtype], "fa2", D, D)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    B = sms // heads[0] + 2  # past one item an SM
    off = S - L if causal == "bottom_right" else 0
    short = (info["mma"] == "wgmma" and D <= 64 and causal == "none" and 128 < S <= 208 and
             C.fa2_narrow_tile(D, B * heads[0], L, S, False, off, sms, info["block_m"], info["block_n"],
                               info["mask_block_m"], info["mask_block_n"]))
    if info["mma"] == "wgmma":
        assert info["short_block_n"] == (208 if D <= 64 else 0), info
        assert C.fa2_short_tile(D, S, causal != "none", 208) == (D <= 64 and causal == "none" and 128 < S <= 208)
    if (L, S, causal) in ((197, 197, "none"), (40, 129, "none"), (50, 150, "none")) and info["mma"] == "wgmma":
        assert short == (D <= 64), (case, D)  # the cases meant to run it do
    q, k, v = rand_qkv(B, *heads, L, S, D, dtype, seed=D + L + S, layout=layout)
    scale = -0.1 if layout == "blhd" else None
    got = {}
    names = kernels_launched(lambda: got.update(zip(("out", "lse"), run_fa2(q, k, v, causal, scale=scale))))
    assert any("Fa2WgmmaShortTile" in n for n in names) == short, (case, names)
    check(got["out"], got["lse"], q, k, v, causal, scale=scale, what=f"D={D} L={L} S={S} {causal} {heads} {layout}")
    if (L, S, causal) == (197, 197, "none"):  # a zero scale: the ragged tile masks per element (-inf times 0 is NaN)
        out, lse = run_fa2(q, k, v, causal, scale=0.0)  # every row the mean of V, lse log(S); SDPA's own is NaN here
        ref, ref_lse = reference(q, k, v, scale=0.0)
        torch.testing.assert_close(out.double(), ref, atol=2e-3, rtol=1e-2, msg=f"D={D} zero scale")
        torch.testing.assert_close(lse.double(), ref_lse, atol=1e-4, rtol=0, msg=f"D={D} zero scale lse")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("lower", [False, True], ids=["random", "random_lower"])
def test_fa2_o_through_k_stage_beside_items_without_tiles(dtype, lower, mma):
    """D = 128 on Hopper stages O in each item's last K tile for its TMA store (Fa2FwdWs kOInK). Items whose
    key tiles the mask removes entirely (query rows 128..255 all masked: no K stage to stage O in) store
    from registers in the same kernel, between items that stage theirs; with the mask also lower-triangular
    (a causal shape through attn_mask, which SDPA does not take beside is_causal) the first query block's
    only tile is its last; more items than SMs, rows past L clipped, GQA. Fully masked rows: O 0, LSE -inf."""
    need(dtype, 128)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    B, Hq, Hkv, L, S = 2, 2 * (sms // 8 + 1), 2, 455, 611
    q, k, v = rand_qkv(B, Hq, Hkv, L, S, 128, dtype, seed=77)
    g = torch.Generator(device="cuda").manual_seed(5)
    mask = torch.rand((1, 1, L, S), device="cuda", generator=g) > 0.2
    mask[..., 128:256, :] = False
    if lower:
        mask &= torch.ones(L, S, dtype=torch.bool, device="cuda").tril()
    out, lse = run_fa2(q, k, v, attn_mask=mask)
    check(out, lse, q, k, v, attn_mask=mask, what=f"D=128 lower={lower} empty items")


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


@pytest.mark.skipif(not WGMMA_HERE, reason="the TMA kernel runs on compute capability 9.0 with sm_90a code")
@pytest.mark.parametrize("D", [64, 128, 256, 320, 384])
def test_fa2_hopper_tma_kernel_and_its_fallback(D):
    """On Hopper, every head dim runs the warp-specialised TMA kernel for BHLD and BLHD tensors; an explicit
    num_stages, or K/V broadcast over the batch (stride 0: no TMA map), runs the cp.async wgmma
    kernel instead (up to D = 256; past it the mma.sync kernel, on the same blocks as a masked call's
    TMA kernel). Each path is checked against the reference, and which kernel ran is read from the
    profiler, so a path that silently took the other kernel fails."""
    dtype = _first_dtype(D)
    B, Hq, Hkv, L, S = 2, 4, 2, 333, 517
    fallback = "fa2_fwd_wgmma_kernel" if D <= 256 else "fa2_fwd_kernel"
    cases = {
        "bhld": (rand_qkv(B, Hq, Hkv, L, S, D, dtype, seed=21), {}, "fa2_fwd_ws_kernel"),
        "blhd": (rand_qkv(B, Hq, Hkv, L, S, D, dtype, seed=22, layout="blhd"), {}, "fa2_fwd_ws_kernel"),
        "num_stages=2": (rand_qkv(B, Hq, Hkv, L, S, D, dtype, seed=23), {"num_stages": 2}, fallback),
    }
    q, k, v = rand_qkv(1, Hq, Hkv, L, S, D, dtype, seed=24)
    cases["kv broadcast over batch"] = ((torch.cat([q, q.flip(2)]), k.expand(B, -1, -1, -1), v.expand(B, -1, -1, -1)),
                                        {}, fallback)
    # attn_mask runs the tile aligned to mask blocks (kernel_info's mask_block_m x mask_block_n), on
    # either kernel
    mask = make_mask("blocksparse", B, Hq, L, S, dtype, torch.Generator(device="cuda").manual_seed(25))
    cases["blocksparse mask"] = (cases["bhld"][0], {"attn_mask": mask}, "fa2_fwd_ws_kernel")
    cases["blocksparse mask, num_stages=2"] = (cases["bhld"][0], {"attn_mask": mask, "num_stages": 2}, fallback)
    cases["blocksparse mask, kv broadcast"] = (cases["kv broadcast over batch"][0], {"attn_mask": mask}, fallback)
    for name, ((q, k, v), kw, kernel) in cases.items():
        for causal in ("none",) if "attn_mask" in kw else ("none", "bottom_right"):  # SDPA: one or the other
            got = {}
            names = kernels_launched(lambda: got.update(zip(("out", "lse"), run_fa2(q, k, v, causal, **kw))))
            assert any(kernel in n for n in names), (name, causal, names)
            check(got["out"], got["lse"], q, k, v, causal, attn_mask=kw.get("attn_mask"), what=f"D={D} {name} {causal}")


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

def _first_dtype(d=128):
    for dt in DTYPES:
        if DT_NAME[dt] in INFO.get("dtypes", []) and (d, d) in FA2_PAIRS:
            return dt
    pytest.skip(f"D={d} not compiled for fa2")


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
