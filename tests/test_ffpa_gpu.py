"""FFPA L1, L2 and L3 on the GPU against a float64 reference: level x dtype x head dim x causal x
GQA x odd lengths, E != Ev (576/512), MMA accumulation modes (fp16 / mixed), masks (block-sparse,
additive) and bottom-right causal, layouts, LSE, torch.compile, CUDA graphs, op-level checks and
launch resources (spills; shared memory and registers that do not grow with D).

Skipped (not passed) without a CUDA GPU of compute capability >= 8.0; a failure where the extension is
expected but missing (tests/conftest.py)."""
from __future__ import annotations

import pytest
import torch

import ffpa_attn
from conftest import cuda_available
from _reference import (
    assert_close_to_reference,
    capture_graph,
    kernels_launched,
    make_mask,
    max_err,
    poison_allocator,
    rand_qkv,
    reference,
    rising_then_jumping_keys,
    sdpa_low_precision,
    template_bools,
)

HAS_GPU = cuda_available  # a CUDA device of sm_80+ and the extension (tests/conftest.py)
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.requires_cuda,  # skipped without a device, failed where the extension is expected but missing
]

LEVELS = [1, 2, 3]
FAMILY = {1: "ffpa_l1", 2: "ffpa_l2", 3: "ffpa_l3"}
_INFO = ffpa_attn.build_info() if HAS_GPU else {}


def level_dims(level):
    pairs = _INFO.get("head_dim_pairs", {}).get(FAMILY[level], [])
    return sorted({e for e, ev in pairs if e == ev})


L1_DIMS = level_dims(1)
LEVEL_DIMS = [(lv, d) for lv in LEVELS for d in level_dims(lv)]
DTYPES = [torch.float16, torch.bfloat16]
DT_NAME = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


def compiled(dtype, d, level=1, acc="fp32", dv=None):
    """An instantiation of the level for exactly this dtype, accumulation and head dims (a family's lines
    differ: the Hopper L1 line has 2048 / 4096 in fp32 only, the mma.sync one fp16 / mixed to 1024)."""
    fam, ev = FAMILY[level], d if dv is None else dv
    entries = _INFO.get("registry")
    if entries:
        hopper = HAS_GPU and torch.cuda.get_device_capability() == (9, 0)
        return any(e["family"] == fam and e["dtype"] == DT_NAME[dtype] and e["acc"] == acc and int(e["E"]) == d
                   and int(e["Ev"]) == ev and (e.get("arch", "any") == "any" or hopper) for e in entries)
    pairs = _INFO.get("head_dim_pairs", {}).get(fam, [])
    accs = _INFO.get("accs", {}).get(fam, {}).get(DT_NAME[dtype], [])
    return [d, ev] in [list(p) for p in pairs] and acc in accs


def need(dtype, d, level=1, acc="fp32", dv=None):
    if not compiled(dtype, d, level, acc, dv):
        pytest.skip(f"{dtype} L{level} acc={acc} D={d}/{dv or d} not compiled in this build")


def stages_fit(dtype, d, level, stages):
    """Whether a stage count's shared memory fits this device's per-block opt-in limit (the
    widest slices, e.g. L1's 160-column ones at D=320, take at most 3 stages on an H100)."""
    import ffpa_attn._C as C

    smem = C.kernel_info(DT_NAME[dtype], FAMILY[level], d, d, stages)["smem_bytes"]
    return smem <= torch.cuda.get_device_properties(0).shared_memory_per_block_optin


def run_ffpa(q, k, v, is_causal, level=1, acc="auto", **kw):
    """forward() forced to one FFPA level (strict: no fallback), outputs poisoned before the run."""
    B, Hq, L, _ = q.shape
    poison_allocator(((B, Hq, L, v.shape[-1]), q.dtype), ((B, Hq, L), torch.float32))
    out, lse = ffpa_attn.forward(q, k, v, is_causal=is_causal, enable_gqa=q.shape[1] != k.shape[1],
                                 strict=True, level=level, acc=acc, return_lse=True, **kw)
    torch.cuda.synchronize()
    return out, lse


# ---- correctness grids -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("level,D", LEVEL_DIMS, ids=[f"L{lv}-D{d}" for lv, d in LEVEL_DIMS])
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_every_level_and_head_dim(dtype, level, D, is_causal):
    need(dtype, D, level)
    q, k, v = rand_qkv(1, 4, 2, 255, 255, D, dtype, seed=D + level)
    out, lse = run_ffpa(q, k, v, is_causal, level=level)
    assert out.shape == (1, 4, 255, D) and out.dtype == dtype
    assert_close_to_reference(out, q, k, v, is_causal=is_causal, lse=lse, what=f"L{level} D={D}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("L,S", [(255, 255), (77, 1000)], ids=["L255-S255", "L77-S1000"])
def test_ev_ne_e_576_512(dtype, level, is_causal, L, S):
    need(dtype, 576, level, dv=512)
    q, k, v = rand_qkv(1, 4, 1, L, S, 576, dtype, seed=level + L, Dv=512)
    out, lse = run_ffpa(q, k, v, is_causal, level=level)
    assert out.shape == (1, 4, L, 512)
    assert_close_to_reference(out, q, k, v, is_causal=is_causal, lse=lse, what=f"L{level} 576/512")


LENGTHS = [(1, 1), (17, 17), (255, 255), (1000, 1000), (4097, 4097), (1, 4097), (17, 1000), (1000, 17), (4097, 255)]
HEADS = [(4, 4), (4, 2), (4, 1)]  # MHA, GQA, MQA


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("D", [320, 576, 1024])
@pytest.mark.parametrize("L,S", LENGTHS, ids=[f"L{a}-S{b}" for a, b in LENGTHS])
@pytest.mark.parametrize("heads", HEADS, ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_lengths_and_heads(level, dtype, D, L, S, heads, is_causal):
    need(dtype, D, level)
    if L * S > 1000 * 1000 and heads != (4, 2):
        pytest.skip("largest lengths run once per head layout (GQA) to bound the test time")
    if level > 1 and (D == 576 or (heads == (4, 1) and L * S > 300 * 300)):
        pytest.skip("L2/L3 run D 320 and 1024, MQA on the short lengths, to bound the test time")
    Hq, Hkv = heads
    q, k, v = rand_qkv(1, Hq, Hkv, L, S, D, dtype, seed=L * 7 + S)
    out, lse = run_ffpa(q, k, v, is_causal, level=level)
    assert lse.shape == (1, Hq, L) and lse.dtype == torch.float32
    assert_close_to_reference(out, q, k, v, is_causal=is_causal, lse=lse,
                              what=f"L{level} D={D} L={L} S={S} heads={heads}")


ACC_CASES = [(320, 320), (1024, 1024), (576, 512)]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("acc", ["fp16", "mixed"])
@pytest.mark.parametrize("D,Dv", ACC_CASES, ids=[f"{a}-{b}" for a, b in ACC_CASES])
@pytest.mark.parametrize("case", ["full", "causal-gqa", "odd", "mask", "bottom-right"])
def test_accumulation_modes(level, acc, D, Dv, case):
    """fp16 inputs with fp16 (both products) or mixed (P@V only) MMA accumulation, bound by the
    fp16-accumulation tolerance of _reference's module doc."""
    dtype = torch.float16
    need(dtype, D, level, acc, dv=Dv)
    L, S, Hkv, causal, kw = 255, 255, 4, False, {}
    if case == "causal-gqa":
        Hkv, causal = 1, True
    elif case == "odd":
        L, S = 1000, 1717
    elif case == "bottom-right":
        L, S, causal, kw = 300, 100, True, {"causal_align": "bottom_right"}
    q, k, v = rand_qkv(2, 4, Hkv, L, S, D, dtype, seed=D + level, Dv=Dv)
    mask = None
    if case == "mask":
        mask = make_mask("blocksparse", 2, 4, L, S, dtype, torch.Generator(device="cuda").manual_seed(3))
        kw["attn_mask"] = mask
    out, lse = run_ffpa(q, k, v, causal, level=level, acc=acc, **kw)
    assert_close_to_reference(out, q, k, v, is_causal=causal, attn_mask=mask, lse=lse, acc=acc,
                              causal_bottom_right=case == "bottom-right", what=f"L{level} acc={acc} {case}")


@pytest.mark.parametrize("level", LEVELS)
def test_fp16_accumulation_is_actually_used(level):
    """The fp16-accumulating kernel must differ from the fp32 one on the same inputs (else the
    acc argument would be ignored silently), while both stay within their tolerances."""
    need(torch.float16, 1024, level, "fp16")
    q, k, v = rand_qkv(1, 2, 2, 300, 2000, 1024, torch.float16, seed=5)
    a, _ = run_ffpa(q, k, v, False, level=level, acc="fp32")
    b, _ = run_ffpa(q, k, v, False, level=level, acc="fp16")
    assert not torch.equal(a, b)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_pipeline_depths(level, dtype, stages):
    D = level_dims(level)[0] if level_dims(level) else 320
    need(dtype, D, level)
    q, k, v = rand_qkv(2, 4, 4, 300, 333, D, dtype, seed=stages)
    if not stages_fit(dtype, D, level, stages):  # a clear error naming the argument, no launch
        with pytest.raises(RuntimeError, match="num_stages"):
            run_ffpa(q, k, v, True, level=level, num_stages=stages)
        D = next((d for d in level_dims(level) if compiled(dtype, d, level) and stages_fit(dtype, d, level, stages)), None)
        if D is None:
            pytest.skip(f"no L{level} head dim fits {stages} stages on this device")
        q, k, v = rand_qkv(2, 4, 4, 300, 333, D, dtype, seed=stages)
    out, _ = run_ffpa(q, k, v, True, level=level, num_stages=stages)
    assert_close_to_reference(out, q, k, v, is_causal=True, what=f"L{level} stages={stages}")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_batch_scale_and_3d(level, dtype):
    D = level_dims(level)[-1] if level_dims(level) else 1024
    D = min(D, 1024)
    need(dtype, D, level)
    q, k, v = rand_qkv(3, 2, 2, 129, 77, D, dtype, seed=11)
    out, _ = run_ffpa(q, k, v, False, level=level, scale=0.37)
    assert_close_to_reference(out, q, k, v, scale=0.37, what="custom scale")
    out_neg, _ = run_ffpa(q, k, v, False, level=level, scale=-0.05)
    assert_close_to_reference(out_neg, q, k, v, scale=-0.05, what="negative scale")
    # 3-D inputs (H, L, E) go through the same kernel.
    out3 = ffpa_attn.forward(q[1], k[1], v[1], strict=True, level=level)
    assert out3.shape == q[1].shape
    assert_close_to_reference(out3.unsqueeze(0), q[1:2], k[1:2], v[1:2], what="3-D")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_blhd_views_without_copy(level, dtype, is_causal):
    D = 320
    need(dtype, D, level)
    q, k, v = rand_qkv(2, 4, 2, 200, 300, D, dtype, seed=5, layout="blhd")
    assert not q.is_contiguous()
    out, _ = run_ffpa(q, k, v, is_causal, level=level)
    assert_close_to_reference(out, q, k, v, is_causal=is_causal, what="BLHD view")
    # Output follows the query layout: (B, L, H, D) storage.
    assert out.transpose(1, 2).is_contiguous()


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("kind", ["blocksparse", "additive_same", "additive_fp32", "padding"])
def test_masks(level, dtype, kind):
    D = 320
    need(dtype, D, level)
    B, Hq, Hkv, L, S = 2, 4, 2, 300, 520
    q, k, v = rand_qkv(B, Hq, Hkv, L, S, D, dtype, seed=7)
    mask = make_mask(kind, B, Hq, L, S, dtype, torch.Generator(device="cuda").manual_seed(7))
    out, lse = run_ffpa(q, k, v, False, level=level, attn_mask=mask)
    assert_close_to_reference(out, q, k, v, attn_mask=mask, lse=lse, what=f"L{level} D={D} mask={kind}")


BR_LENGTHS = [(255, 255), (100, 300), (300, 100), (1, 257), (257, 1)]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("L,S", BR_LENGTHS, ids=[f"L{a}-S{b}" for a, b in BR_LENGTHS])
def test_causal_bottom_right(level, dtype, L, S):
    D = 320
    need(dtype, D, level)
    q, k, v = rand_qkv(1, 4, 2, L, S, D, dtype, seed=L + S)
    out, lse = run_ffpa(q, k, v, True, level=level, causal_align="bottom_right")
    assert_close_to_reference(out, q, k, v, is_causal=True, causal_bottom_right=True, lse=lse,
                              what=f"L{level} bottom-right L={L} S={S}")


@pytest.mark.parametrize("level", [1, 2])
def test_large_batch_slices_grid(level):
    """More than 65535 (batch) blocks along grid z: the launcher slices the batch."""
    D = 320
    dtype = torch.bfloat16 if compiled(torch.bfloat16, D, level) else torch.float16
    need(dtype, D, level)
    q, k, v = rand_qkv(70000, 1, 1, 1, 3, D, dtype, seed=3)
    out, lse = run_ffpa(q, k, v, False, level=level)
    ref, ref_lse = reference(q, k, v)
    assert max_err(out, ref) < 2 * max_err(sdpa_low_precision(q, k, v), ref) + 1e-2
    assert (lse.double() - ref_lse).abs().max().item() < 2e-3


@pytest.mark.parametrize("D", [320, 2048])
def test_l3_persistent_grid_walks_every_item(D):
    """Far more (query block, head, batch) items than resident blocks: each persistent L3 block
    takes items from the per-call work counter and walks them through its one workspace slot.
    A second call must see a fresh counter (else it would skip items and leave the output unset):
    which block takes an item does not change its arithmetic, so the two outputs are equal bit
    for bit."""
    dtype = torch.bfloat16 if compiled(torch.bfloat16, D, 3) else torch.float16
    need(dtype, D, 3)
    B, H = (6, 16) if D == 320 else (2, 8)
    q, k, v = rand_qkv(B, H, H // 2, 700, 900, D, dtype, seed=D)
    for causal in (False, True):
        out, lse = run_ffpa(q, k, v, causal, level=3)
        assert_close_to_reference(out, q, k, v, is_causal=causal, lse=lse, what=f"L3 persistent D={D}")
        again, lse_again = run_ffpa(q, k, v, causal, level=3)
        assert torch.equal(out, again) and torch.equal(lse, lse_again), f"L3 D={D}: second call differs"


def test_auto_level_runs_the_heuristic_choice():
    """level=None on a large head dim runs our kernels (D=320: the FA-2 family where it is
    compiled, else the heuristic's FFPA level) and is correct; D=2048 runs on L3 (on Hopper: the
    L1 TMA kernel)."""
    checked = []
    for D in (320, 2048):
        dtype = torch.bfloat16
        fams = [lv for lv in LEVELS if compiled(dtype, D, lv)]
        if not fams:
            continue
        q, k, v = rand_qkv(1, 4, 4, 200, 200, D, dtype, seed=D)
        out = ffpa_attn.forward(q, k, v, strict=True)
        assert_close_to_reference(out, q, k, v, what=f"auto D={D}")
        checked.append(D)
    if not checked:
        pytest.skip("neither D=320 nor D=2048 is compiled for bf16 in this build")


# ---- L1 on Hopper: the warp-specialised TMA kernel and its fallback ------------------------------

def local_bytes_allowed(info, dv):
    """Local memory a kernel may use: none, except the Hopper L1 kernel's 320-column consumer shares
    (Dv = 576 / 640: 160 accumulator registers of 240), where ptxas keeps two loop values (8 bytes) in
    local memory, in a form that ran 3-4% faster than the spill-free one with a deeper V ring
    (docs/hopper_ffpa.md, session 15)."""
    return 8 if info.get("mma") == "wgmma" and info["family"] == "ffpa_l1" and dv in (576, 640) else 0


def ws_traits_flags(name):
    """FfpaWsTraits' two bools in a demangled kernel name: (cluster pair of column groups, cluster pair of
    query blocks sharing K loads)."""
    return template_bools(name, "FfpaWsTraits", 2)


HOPPER_L1 = bool(HAS_GPU and torch.cuda.get_device_capability() == (9, 0) and "90a" in _INFO.get("archs", [])
                 and any(e["family"] == "ffpa_l1" and e["arch"] == "90a" for e in _INFO.get("registry", [])))
HOPPER_PAIRS = [(320, 320), (448, 448), (576, 512), (576, 576), (640, 640), (768, 768), (1024, 1024), (2048, 2048)]


@pytest.mark.skipif(not HOPPER_L1, reason="the TMA kernel runs on compute capability 9.0 with sm_90a code")
@pytest.mark.parametrize("D,Dv", HOPPER_PAIRS, ids=[f"{d}-{dv}" for d, dv in HOPPER_PAIRS])
def test_l1_hopper_tma_kernel_and_its_fallback(D, Dv):
    """On Hopper, L1 runs the warp-specialised TMA kernel (two Dv column groups above 512, as a cluster pair
    sharing S above 640) for BHLD and BLHD tensors, GQA, odd lengths, a negative scale and a block-sparse
    mask (whose block map is at the mma.sync tile, 32 x 64 .. 64 x 256, merged into 64 x 128 or 64 x 256
    tiles); an explicit num_stages, or K/V broadcast over the batch (stride 0: no TMA map), runs the
    mma.sync L1 kernel instead (L3, with its workspace, above Dv = 1024). Each path is checked against the
    reference, and which kernel ran (the pair or not: the traits' last argument in its name) is read from
    the profiler."""
    dtype = next((dt for dt in (torch.bfloat16, torch.float16) if compiled(dt, D, 1, dv=Dv)), None)
    if dtype is None:
        pytest.skip(f"L1 {D}/{Dv} not compiled")
    B, Hq, Hkv, L, S = 2, 4, 2, 333, 517
    ws, sync = "ffpa_fwd_ws_kernel", "ffpa_fwd_kernel"  # the mma.sync kernel, L1 or L3
    bhld = rand_qkv(B, Hq, Hkv, L, S, D, dtype, seed=31, Dv=Dv)
    cases = {
        "bhld": (bhld, {}, ws),
        "blhd": (rand_qkv(B, Hq, Hkv, L, S, D, dtype, seed=32, layout="blhd", Dv=Dv), {}, ws),
        "negative scale": (bhld, {"scale": -0.04}, ws),
        "num_stages=2": (bhld, {"num_stages": 2}, sync),
    }
    q, k, v = rand_qkv(1, Hq, Hkv, L, S, D, dtype, seed=33, Dv=Dv)
    cases["kv broadcast over batch"] = ((torch.cat([q, q.flip(2)]), k.expand(B, -1, -1, -1), v.expand(B, -1, -1, -1)),
                                        {}, sync)
    mask = make_mask("blocksparse", B, Hq, L, S, dtype, torch.Generator(device="cuda").manual_seed(34))
    cases["blocksparse mask"] = (bhld, {"attn_mask": mask}, ws)
    cases["blocksparse mask, num_stages=2"] = (bhld, {"attn_mask": mask, "num_stages": 2}, sync)
    for name, ((q, k, v), kw, kernel) in cases.items():
        for causal in ("none",) if "attn_mask" in kw else ("none", "top_left", "bottom_right"):
            got = {}
            kw2 = dict(kw, causal_align=causal) if causal != "none" else kw
            names = kernels_launched(lambda: got.update(zip(("out", "lse"), run_ffpa(q, k, v, causal != "none", **kw2))))
            assert any(kernel in n for n in names), (name, causal, names)
            if kernel == ws:  # FfpaWsTraits<elem, D, Dv, pair, share K>, demangled as true / (bool)1
                flags = [ws_traits_flags(n) for n in names if ws in n]  # L = 333: too few blocks to share K
                assert flags == [(Dv > 640, False)], (name, causal, names)
            assert_close_to_reference(got["out"], q, k, v, is_causal=causal != "none", scale=kw.get("scale"),
                                      attn_mask=kw.get("attn_mask"), causal_bottom_right=causal == "bottom_right",
                                      lse=got["lse"], what=f"L1 {D}/{Dv} {name} {causal}")


SHARE_PAIRS = [(320, 320), (448, 448), (512, 512), (576, 512), (640, 640)]


@pytest.mark.skipif(not HOPPER_L1, reason="the TMA kernel runs on compute capability 9.0 with sm_90a code")
@pytest.mark.parametrize("D,Dv", SHARE_PAIRS, ids=[f"{d}-{dv}" for d, dv in SHARE_PAIRS])
def test_l1_hopper_causal_pairs_share_k(D, Dv):
    """Causal calls up to Dv = 640 with 64 or more 64-row query blocks run query blocks 2 q + 1, 2 q as a
    cluster pair loading K once for both (launch/heuristics.h ffpa_ws_share_k; an odd count's last pair
    has a block past L, which walks its partner's tiles and stores nothing); fewer blocks and
    non-causal calls run lone blocks. Both alignments, L above and below S (rows that see no key), GQA,
    a batch. Output and LSE against the reference; which kernel ran from the profiler. (A mask and
    is_causal are exclusive, so a pair never walks a mask's block map; it would merge both blocks' codes.)"""
    dtype = next((dt for dt in (torch.bfloat16, torch.float16) if compiled(dt, D, 1, dv=Dv)), None)
    if dtype is None:
        pytest.skip(f"L1 {D}/{Dv} not compiled")
    ws = "ffpa_fwd_ws_kernel"
    cases = [  # (B, Hq, Hkv, L, S, causal_align, shares)
        (1, 2, 2, 4096, 4096, "top_left", True),       # 64 query blocks
        (1, 4, 1, 4100, 4200, "bottom_right", True),   # 65: the last pair's block past L
        (1, 2, 1, 4096, 3001, "bottom_right", True),   # L > S: rows that see no key
        (1, 2, 2, 4000, 4000, "top_left", False),      # 63 query blocks: lone
        (1, 2, 1, 4096, 4096, "none", False),          # non-causal: lone
        (2, 8, 1, 4096, 4160, "top_left", True),       # a batch of two, GQA 8 / 1
    ]
    for i, (B, Hq, Hkv, L, S, align, shares) in enumerate(cases):
        q, k, v = rand_qkv(B, Hq, Hkv, L, S, D, dtype, seed=60 + i, Dv=Dv)
        kw = {"causal_align": align} if align != "none" else {}
        got = {}
        names = kernels_launched(lambda: got.update(zip(("out", "lse"), run_ffpa(q, k, v, align != "none", **kw))))
        flags = [ws_traits_flags(n) for n in names if ws in n]
        assert flags == [(False, shares)], (i, names)
        assert_close_to_reference(got["out"], q, k, v, is_causal=align != "none",
                                  causal_bottom_right=align == "bottom_right", lse=got["lse"],
                                  what=f"L1 {D}/{Dv} case {i} ({L}x{S} {align}, shares K: {shares})")


@pytest.mark.skipif(not HOPPER_L1, reason="the TMA kernel runs on compute capability 9.0 with sm_90a code")
@pytest.mark.parametrize("D,Dv", [(320, 320), (576, 512), (1024, 1024)], ids=["320", "576-512", "1024"])
@pytest.mark.parametrize("causal", ["none", "bottom_right"])
def test_l1_hopper_scores_rising_then_jumping(D, Dv, causal):
    """Row maxima that creep up tile after tile (the kernel keeps its old max: P above 1, in both
    consumers' halves of P alike) and then jump (the max moves, O rescales): output and LSE as the
    reference's, a lone block and a cluster pair."""
    dtype = next((dt for dt in (torch.float16, torch.bfloat16) if compiled(dt, D, 1, dv=Dv)), None)
    if dtype is None:
        pytest.skip(f"L1 {D}/{Dv} not compiled")
    q, k, v = rand_qkv(1, 4, 2, 200, 1300, D, dtype, seed=42, Dv=Dv)
    k = rising_then_jumping_keys(k)
    kw = {"causal_align": causal} if causal != "none" else {}
    out, lse = run_ffpa(q, k, v, causal != "none", **kw)
    assert_close_to_reference(out, q, k, v, is_causal=causal != "none", causal_bottom_right=causal == "bottom_right",
                              lse=lse, what=f"L1 {D}/{Dv} {causal} rising scores")


@pytest.mark.skipif(not HOPPER_L1, reason="the TMA kernel runs on compute capability 9.0 with sm_90a code")
def test_l1_hopper_kernel_shared_memory_is_the_same_at_every_head_dim():
    """The Hopper L1 kernel's launch (auto depth) at every compiled pair: the wgmma kernel with a producer
    warpgroup, 64 x 128 tiles (64 x 256 for a cluster pair above Dv = 640), 64-wide E slices and one
    shared-memory size from D = 320 to 4096 (E streams in slices; the rings are a fixed budget); one
    group of Dv columns up to 640, two up to 1024, 512-column groups beyond."""
    import ffpa_attn._C as C

    dt = "bfloat16" if "bfloat16" in _INFO.get("dtypes", []) else "float16"
    pairs = [tuple(p) for p in _INFO["head_dim_pairs"]["ffpa_l1"]]
    infos = {p: C.kernel_info(dt, "ffpa_l1", *p, 0, True) for p in pairs}
    for p, i in infos.items():
        assert i["mma"] == "wgmma" and i["producer_warps"] == 4 and i["threads"] == 384, (p, i)
        assert (i["block_m"], i["block_n"], i["chunk_d"]) == (64, 256 if p[1] > 640 else 128, 64), (p, i)
        # one group up to 640, two up to 1024, groups of 512 beyond (cluster pairs of them)
        assert i["group_d"] == (p[1] if p[1] <= 640 else 64 * -(-p[1] // 128) if p[1] <= 1024 else 512), (p, i)
        assert i["local_bytes"] <= local_bytes_allowed(i, p[1]), (p, i)
    assert len({i["smem_bytes"] for i in infos.values()}) == 1, {p: i["smem_bytes"] for p, i in infos.items()}


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
    torch.library.opcheck(op, (q, k, v, None, D ** -0.5, True, False, 1, 0, 0))
    qt, kt, vt = rand_qkv(1, 4, 2, 65, 90, D, dtype, seed=32, layout="blhd")
    torch.library.opcheck(op, (qt, kt, vt, None, D ** -0.5, False, False, 1, 0, 2))
    for level in (2, 3):
        if compiled(dtype, D, level):
            torch.library.opcheck(op, (q, k, v, None, D ** -0.5, True, False, level, 0, 0))
    mask = make_mask("blocksparse", 1, 4, 65, 90, dtype, None)
    torch.library.opcheck(op, (q, k, v, mask, D ** -0.5, True, True, 1, 0, 0))


def test_runs_on_current_stream_and_device_guard():
    dtype, D = _first_dtype_dim()
    q, k, v = rand_qkv(1, 2, 2, 128, 128, D, dtype, seed=41)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())  # q, k, v are written on the default stream
    with torch.cuda.stream(s):
        out = ffpa_attn.forward(q, k, v, strict=True)
    s.synchronize()
    assert_close_to_reference(out, q, k, v, what="side stream")


# ---- launch resources ----------------------------------------------------------------------------

LEVEL_ACC_DIMS = [(lv, acc, d) for lv in LEVELS for acc in ("fp32", "fp16", "mixed") for d in level_dims(lv)]


@pytest.mark.parametrize("level,acc,d", LEVEL_ACC_DIMS, ids=[f"L{lv}-{a}-D{d}" for lv, a, d in LEVEL_ACC_DIMS])
def test_no_register_spills(level, acc, d):
    """No compiled FFPA kernel keeps more in local memory than local_bytes_allowed; on Hopper, L1's
    kernel_info reports the worse of its lone kernel and its K-sharing variant, so both are checked."""
    import ffpa_attn._C as C

    spilled = []
    checked = 0
    for dt in ("float16", "bfloat16"):
        if not compiled(torch.float16 if dt == "float16" else torch.bfloat16, d, level, acc):
            continue
        info = C.kernel_info(dt, FAMILY[level], d, d, 0, True, acc)
        assert info["family"] == FAMILY[level] and info["level"] == level and info["acc"] == acc
        assert info["registers"] <= 255
        checked += 1
        if info["local_bytes"] > local_bytes_allowed(info, d):
            spilled.append(f"{dt} L{level} acc={acc} D={d}: {info['local_bytes']} bytes of local memory (spills)")
    if not checked:
        pytest.skip("not compiled")
    assert not spilled, "; ".join(spilled)


@pytest.mark.parametrize("level", [2, 3])
def test_shared_memory_and_registers_do_not_grow_with_head_dim(level):
    """L2 and L3 use one tile at every head dim: shared memory per block is the same at D=320 and
    D=1024 (and 2048/4096 for L3), and for L3 so are registers (O lives in the workspace)."""
    import ffpa_attn._C as C

    dims = [d for d in (320, 1024, 2048, 4096) if d in level_dims(level)]
    dt = "bfloat16" if "bfloat16" in _INFO.get("dtypes", []) else "float16"
    if len(dims) < 2:
        pytest.skip("needs two compiled head dims")
    infos = [C.kernel_info(dt, FAMILY[level], d, d, 2, True) for d in dims]
    assert len({i["smem_bytes"] for i in infos}) == 1, [(d, i["smem_bytes"]) for d, i in zip(dims, infos)]
    if level == 3:
        assert len({i["registers"] for i in infos}) == 1, [(d, i["registers"]) for d, i in zip(dims, infos)]
    if level == 2:
        assert all(i["group_d"] == infos[0]["group_d"] < 1024 for i in infos)


def test_l1_shared_memory_is_o1_in_head_dim_for_one_tile():
    """L1's tile table varies with D (registers, not shared memory, bound it), so its shared
    memory is compared per tile: with the same (Br, Bc, chunk) tile two head dims need the same
    bytes. 896 and 1024 share a table row."""
    import ffpa_attn._C as C

    if not (896 in L1_DIMS and 1024 in L1_DIMS):
        pytest.skip("needs L1 896 and 1024")
    dt = "bfloat16" if "bfloat16" in _INFO.get("dtypes", []) else "float16"
    a, b = (C.kernel_info(dt, "ffpa_l1", d, d, 2) for d in (896, 1024))
    assert (a["block_m"], a["block_n"], a["chunk_d"]) == (b["block_m"], b["block_n"], b["chunk_d"])
    assert a["smem_bytes"] == b["smem_bytes"]


# ---- op-level argument checks (C++ TORCH_CHECK), each would pass silently without its check -----
# Kept last in the file: a crash here (seen once, from the toolchain) must not hide the tests above.

def _op(q, k, v, scale=0.05, causal=False, level=1, stages=0, mask=None, bottom_right=False, acc=0):
    return torch.ops.ffpa_attn.ffpa_fwd(q, k, v, mask, scale, causal, bottom_right, level, acc, stages)


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
        ((q, k, v), {"level": 4}, "level"),
        ((q, k, v), {"level": -1}, "level"),
        ((q, k, v), {"acc": 4}, "acc"),
        ((q.to(torch.bfloat16), k.to(torch.bfloat16), v.to(torch.bfloat16)), {"acc": 2}, "acc"),
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
