"""The FA-2 family's Hopper paths on the GPU against a float64 reference: the warp-specialised kernel's work walk
(more slots than SMs, the causal walk's single-item tail), the split tail, the look-ahead kernels, the P buffer pair,
O out by TMA and through the K stage, the short-keys tile, and which kernel runs (the TMA kernel and its cp.async /
mma.sync fallbacks), each on both tensor-core paths where the GPU has two (the `mma` fixture, tests/_fa2_case.py).
Skipped (not passed) without a CUDA GPU of compute capability >= 8.0 or FA-2 kernels in the build."""
from __future__ import annotations

import pytest
import torch

from _fa2_case import (  # noqa: F401 (mma: a fixture)
    FA2_MARKS,
    DT_NAME,
    DTYPES,
    WGMMA_HERE,
    _first_dtype,
    check,
    mma,
    need,
    run_fa2,
)
from _reference import kernels_launched, make_mask, rand_qkv, reference

pytestmark = FA2_MARKS


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
