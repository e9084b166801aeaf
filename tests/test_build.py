"""What the built extension reports, checked without a GPU: build manifest (families, head dims,
(E, Ev) pairs), launch configurations (FFPA L1: shared memory O(1) in the head dim; FA-2: whole
head dim per tile) and the fake kernel's shapes/strides on meta tensors.

Need the extension (marker requires_extension, tests/conftest.py): skipped when it is not built or is
stale (an older op schema: ffpa_attn then reports it unavailable, with the reason in
build_info()["import_error"]), a failure instead where the extension is expected (FFPA_EXPECT_EXTENSION=1
or a visible CUDA device)."""
from __future__ import annotations

import os

import pytest
import torch

import ffpa_attn
from ffpa_attn import _spec

pytestmark = pytest.mark.requires_extension
FAMILIES = ("fa2", "ffpa_l1", "ffpa_l2", "ffpa_l3", "decode", "fp8")
B16 = {"float16", "bfloat16"}
FFPA = ("ffpa_l1", "ffpa_l2", "ffpa_l3")


def _pairs(family):
    return [tuple(p) for p in ffpa_attn.build_info()["head_dim_pairs"].get(family, [])]


def test_build_info_lists_what_was_compiled():
    info = ffpa_attn.build_info()
    assert info["version"] == ffpa_attn.__version__
    assert info["families"] and set(info["families"]) <= set(FAMILIES), info["families"]
    for family in info["families"]:
        dims = info["head_dims"][family]
        assert dims, f"no {family} head dim compiled"
        # every compiled pair's E is a listed head dim, and each head dim has its (d, d) pair
        assert {e for e, _ in _pairs(family)} == set(dims), (family, _pairs(family), dims)
    assert all(d <= 256 or d in (320, 384) for d in info["head_dims"].get("fa2", []))
    assert all(d > 256 for f in FFPA for d in info["head_dims"].get(f, []))
    # accumulation modes: fp32 for every family and dtype built; fp16/mixed only for fp16 FFPA
    for family in info["families"]:
        for dt, accs in info["accs"][family].items():
            assert "fp32" in accs and set(accs) <= {"fp32", "fp16", "mixed"}
            if dt != "float16" or family == "fa2":
                assert accs == ["fp32"], (family, dt, accs)
    assert set(info["dtypes"]) <= B16 | {"float8_e4m3fn"} and set(info["dtypes"]) & B16
    # the FP8 family takes e4m3 only, and only it does
    for family in info["families"]:
        assert (set(info["accs"][family]) == {"float8_e4m3fn"}) == (family == "fp8"), (family, info["accs"][family])
    assert info["archs"] and info["cuda_version"]
    # The manifest names the PTX it embeds (the lowest arch), which routing trusts for newer GPUs.
    assert info["ptx"] == [min(info["archs"], key=lambda a: int(a.rstrip("a")))]
    want = os.environ.get("FFPA_HEAD_DIMS")
    if want:  # CI builds a reduced set and says which: every listed dim, in whichever family owns it
        built = {d for dims in info["head_dims"].values() for d in dims}
        assert built == {int(x) for x in want.replace(";", ",").split(",") if x.strip()}


@pytest.mark.parametrize("family", FFPA)
def test_shared_memory_does_not_grow_with_head_dim(family):
    """Every FFPA level keeps shared memory O(1) in D: a block's bytes are a function of its tile
    and pipeline depth only. Every tile of the tables has a D-free footprint, so each level is
    bounded by one constant however wide the head; L2 and L3 use a single tile, so their bytes
    are the same at every head dim (D = 320 and 1024 included)."""
    import ffpa_attn._C as C

    info = ffpa_attn.build_info()
    dt = info["dtypes"][0]
    dims = info["head_dims"].get(family, [])
    if not dims:
        pytest.skip(f"no {family} kernel in this build")
    for stages in (1, 2, 3, 4):
        cfgs = {d: C.kernel_info(dt, family, d, d, stages) for d in dims}
        if family != "ffpa_l1":
            assert len({c["smem_bytes"] for c in cfgs.values()}) == 1, cfgs
        # Same tile shape -> exactly the same bytes whatever D is.
        by_tile = {}
        for d, c in cfgs.items():
            by_tile.setdefault((c["block_m"], c["block_n"], c["chunk_d"], c["threads"]), set()).add(c["smem_bytes"])
        assert all(len(v) == 1 for v in by_tile.values()), by_tile
        assert all(c["num_stages"] == stages for c in cfgs.values())
        # The bound: the largest stage of the tables (L1 at 320: 64 + 128 rows of 160 columns,
        # padded by 8) at this depth and the largest P tile (L3: 64 x 256), independent of D.
        bound = stages * (64 + 128) * (160 + 8) * 2 + 64 * 256 * 2 + 4 * 64 * 4
        assert all(c["smem_bytes"] <= bound for c in cfgs.values()), (bound, cfgs)


@pytest.mark.parametrize("family", FFPA)
def test_shared_memory_formula_is_head_dim_free(family):
    """The footprint is stages x (Q slice + K slice) + P tile + row exchange: no D anywhere."""
    import ffpa_attn._C as C

    info = ffpa_attn.build_info()
    dt = info["dtypes"][0]
    level = int(family[-1])
    for d in info["head_dims"].get(family, []):
        c = C.kernel_info(dt, family, d, d, 2)
        if family == "ffpa_l1" and d > 1024:  # only the Hopper L1 line has these: an explicit depth runs its L3 fallback
            assert c["family"] == "ffpa_l3" or c["level"] == 3, c
            continue
        assert c["family"] == family and c["level"] == level
        assert c["group_d"] == (256 if level == 2 else d)
        # Padded rows carry one extra 16-byte unit (8 b16 elements); swizzled rows none.
        row = (c["chunk_d"] + (8 if c["smem_padded"] else 0)) * 2
        if not c["smem_padded"]:
            assert c["chunk_d"] // 8 in (2, 4) or c["chunk_d"] // 8 % 8 == 0, c
        per_stage = (c["block_m"] + c["block_n"]) * row
        if level == 3:  # a V item also stages the block's fp32 O slice
            per_stage = max(per_stage, c["block_n"] * row + c["block_m"] * c["chunk_d"] * 4)
        expected = 2 * per_stage + c["block_m"] * c["block_n"] * 2 + c["warps_n"] * c["block_m"] * 4
        assert c["smem_bytes"] == expected, (d, c)


def test_fa2_kernel_info():
    """FA-2 tiles hold the whole head dim (chunk_d == E); one configuration per compiled pair."""
    import ffpa_attn._C as C

    info = ffpa_attn.build_info()
    if not _pairs("fa2"):
        pytest.skip("no FA-2 kernel in this build")
    for dt in info["accs"]["fa2"]:
        for e, ev in _pairs("fa2"):
            c = C.kernel_info(dt, "fa2", e, ev)
            assert (c["family"], c["level"], c["head_dim"], c["head_dim_v"]) == ("fa2", 0, e, ev), c
            assert c["chunk_d"] == e and 1 <= c["num_stages"] <= 4
            # the warp-specialised Hopper kernel adds a producer warpgroup to the warps that split rows
            assert c["threads"] == 32 * (c["warps_m"] * c["warps_n"] + c["producer_warps"])
            assert c["producer_warps"] in ((0, 4) if c["mma"] == "wgmma" else (0,)), c
            assert 0 < c["smem_bytes"] <= 227 * 1024
            # O out by TMA: through a buffer of its own (launch/heuristics.h kFa2TmaStoreMaxDim) at D <= 64 on
            # both tiles, to 96 on the masked one (the 176-key table tile has no room for the buffer); through
            # the item's last K tile (Fa2FwdWs kOInK) on the deferred-wait kernel of E = 97..128 (two
            # consumers of 64 rows, at most 128 keys a tile, both consumers' O in one K tile)
            d = max(e, ev)
            in_k = lambda m, n: 96 < e <= 128 and ev <= 128 and m == 128 and n <= 128  # noqa: E731
            assert c["o_tma_store"] == (c["mma"] == "wgmma" and (d <= 64 or in_k(c["block_m"], c["block_n"]))), c
            assert c["mask_o_tma_store"] == (
                c["mma"] == "wgmma" and (d <= 96 or in_k(c["mask_block_m"], c["mask_block_n"]))), c
            # two Q slots (kFa2TwoQSlotsMaxDim) at D <= 64 on both tiles; one elsewhere; 0: no such kernel
            slots = (2 if d <= 64 else 1) if c["mma"] == "wgmma" else 0
            assert c["q_slots"] == slots and c["mask_q_slots"] == slots, c
            # each consumer's own end (Fa2FwdWs kOwnEnd) on the tiles of more rows than keys or under 128 keys
            own = lambda m, n: c["mma"] == "wgmma" and (m > n or n < 128)  # noqa: E731
            assert c["own_end"] == own(c["block_m"], c["block_n"]), c
            assert c["mask_own_end"] == own(c["mask_block_m"], c["mask_block_n"]), c


def test_fa2_mma_setting_round_trips_and_rejects_unknown_modes():
    """The process-wide FA-2 tensor-core path: auto / sync / wgmma, anything else a ValueError
    naming the argument. Without a compute capability 9.0 GPU (or without sm_90a in the build)
    every setting runs mma.sync, which kernel_info reports."""
    import ffpa_attn._C as C

    assert C.get_fa2_mma() == "auto"
    try:
        for mode in ("sync", "wgmma", "auto"):
            C.set_fa2_mma(mode)
            assert C.get_fa2_mma() == mode
        with pytest.raises(ValueError, match="`mode`.*'fast'"):
            C.set_fa2_mma("fast")
        assert C.get_fa2_mma() == "auto"  # a rejected mode changes nothing
    finally:
        C.set_fa2_mma("auto")
    if _pairs("fa2") and not (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)):
        e, ev = _pairs("fa2")[0]
        C.set_fa2_mma("wgmma")
        try:
            assert C.kernel_info(ffpa_attn.build_info()["dtypes"][0], "fa2", e, ev)["mma"] == "mma.sync"
        finally:
            C.set_fa2_mma("auto")


def test_fp8_v_transpose_setting_round_trips_and_rejects_unknown_modes():
    """The process-wide V^T form of the FA-2-style FP8 kernel: auto / kernel / prepass, anything else a
    ValueError naming the accepted modes; on a Hopper GPU with the FP8 kernel in the build, kernel_info
    says whether the launcher's pre-pass writes V^T (auto: yes; kernel: no at D = 64 and 128)."""
    import ffpa_attn._C as C

    assert C.get_fp8_v_transpose() == "auto"
    try:
        for mode in ("kernel", "prepass", "auto"):
            C.set_fp8_v_transpose(mode)
            assert C.get_fp8_v_transpose() == mode
        with pytest.raises(ValueError, match="set_fp8_v_transpose: `mode` must be 'auto', 'kernel' or 'prepass'"):
            C.set_fp8_v_transpose("shared")
        assert C.get_fp8_v_transpose() == "auto"  # a rejected mode changes nothing
        hopper = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
        for d in sorted(p[0] for p in ffpa_attn.build_info()["head_dim_pairs"].get("fp8", [])) if hopper else ():
            for mode in ("auto", "kernel", "prepass"):
                C.set_fp8_v_transpose(mode)
                want = not (mode == "kernel" and d <= 128)
                assert C.kernel_info("float8_e4m3fn", "fp8", d, d)["fp8_vt_prepass"] is want, (d, mode)
    finally:
        C.set_fp8_v_transpose("auto")


def test_generated_wgmma_wrappers_are_current():
    """csrc/include/ffpa/ptx/wgmma_gen.cuh is what tools/gen_wgmma.py writes today."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, str(root / "tools" / "gen_wgmma.py"), "--check"], capture_output=True)
    assert r.returncode == 0, "wgmma_gen.cuh is stale: run python tools/gen_wgmma.py"


def test_kernel_info_rejects_unknown_configs():
    import ffpa_attn._C as C

    info = ffpa_attn.build_info()
    family = info["families"][0]
    e, ev = _pairs(family)[0]
    dt = info["dtypes"][0]
    with pytest.raises(ValueError, match="`dtype` must be"):
        C.kernel_info("float32", family, e, ev, 2)
    with pytest.raises(ValueError, match="`family` must be"):
        C.kernel_info(dt, "ffpa_l9", e, ev, 0)
    with pytest.raises((TypeError, ValueError)):  # pybind11: TypeError for an int
        C.kernel_info(dt, 1, e, ev, 0)  # the family is a string now, not a level
    with pytest.raises(ValueError, match="not compiled"):
        C.kernel_info(dt, family, 328, 328, 2)
    with pytest.raises(ValueError, match="^kernel_info: ") as err:  # no ring depth 7: the launch check says so
        C.kernel_info(dt, family, e, ev, 7)
    assert "not compiled" not in str(err.value)
    with pytest.raises(ValueError, match="`acc` must be"):
        C.kernel_info(dt, family, e, ev, 0, False, "fp8")
    if "bfloat16" in info["dtypes"] and family != "fa2":
        with pytest.raises(ValueError, match="not compiled"):
            C.kernel_info("bfloat16", family, e, ev, 0, False, "fp16")
    other = [f for f in info["families"] if f != family]  # families of this build only
    if other and (e, ev) not in _pairs(other[0]):  # a pair of one family is not a kernel of the other
        with pytest.raises(ValueError, match="not compiled"):
            C.kernel_info(dt, other[0], e, ev, 0)


@pytest.mark.parametrize("layout", ["bhld", "blhd"])
def test_fake_kernel_shapes_and_strides_on_meta(layout):
    B, Hq, Hkv, L, S, D = 2, 8, 2, 33, 65, 320
    if layout == "blhd":
        q = torch.empty(B, L, Hq, D, device="meta", dtype=torch.bfloat16).transpose(1, 2)
    else:
        q = torch.empty(B, Hq, L, D, device="meta", dtype=torch.bfloat16)
    k = torch.empty(B, Hkv, S, D, device="meta", dtype=torch.bfloat16)
    v = torch.empty(B, Hkv, S, D, device="meta", dtype=torch.bfloat16)
    out, lse = torch.ops.ffpa_attn.ffpa_fwd(q, k, v, None, 0.1, True, False, 1, 0, 0)
    assert out.shape == (B, Hq, L, D) and out.dtype == torch.bfloat16
    assert lse.shape == (B, Hq, L) and lse.dtype == torch.float32 and lse.is_contiguous()
    if layout == "blhd":
        assert out.transpose(1, 2).is_contiguous()
    else:
        assert out.is_contiguous()


def test_fake_kernel_with_mask_and_value_head_dim_on_meta():
    q = torch.empty(2, 8, 33, 192, device="meta", dtype=torch.float16)
    k = torch.empty(2, 2, 65, 192, device="meta", dtype=torch.float16)
    v = torch.empty(2, 2, 65, 128, device="meta", dtype=torch.float16)
    mask = torch.empty(1, 1, 33, 65, device="meta", dtype=torch.bool).expand(2, 8, 33, 65)
    out, lse = torch.ops.ffpa_attn.ffpa_fwd(q, k, v, mask, 0.1, True, True, 0, 0, 0)
    assert out.shape == (2, 8, 33, 128) and out.is_contiguous() and lse.shape == (2, 8, 33)


def test_op_schema_is_the_one_python_calls():
    args = tuple(a.name for a in torch.ops.ffpa_attn.ffpa_fwd.default._schema.arguments)
    assert args == ffpa_attn._ops._OP_ARGS


def test_level_heuristic_rule():
    """Auto calls above the FA-2 head dims: L1 up to Dv = 640 (at every Dv where L1 is the Hopper
    kernel), L3 beyond (and where L1 is missing), L1 where L3 is missing, L2 only when it is the one level compiled (it
    recomputes Q@K^T)."""
    import ffpa_attn._C as C

    pick = lambda d, levels, L=8192: C.pick_ffpa_level(d, d, L, L, 32, levels)  # noqa: E731
    for d in (320, 512, 576, 640):
        assert pick(d, [1, 2, 3]) == 1
        assert pick(d, [1, 2, 3], L=17) == 1
        assert pick(d, [2, 3]) == 3
        assert pick(d, [2]) == 2
    assert C.pick_ffpa_level(576, 512, 100, 100, 4, [1, 2, 3]) == 1
    for d in (704, 768, 1024):  # L1's 32-row blocks; L3 keeps 64 x 256 tiles
        assert pick(d, [1, 2, 3]) == 3
        assert pick(d, [1, 2]) == 1
    for d in (2048, 4096):
        assert pick(d, [1, 2, 3]) == 3
        assert pick(d, [1]) == 1  # only what exists (the registry has no L1 kernel that wide)
    assert pick(1024, []) == 0
    # the Hopper L1 kernel (wgmma + TMA, O in registers at any Dv) wins at every head dim it has
    for d in (320, 768, 1024):
        assert C.pick_ffpa_level(d, d, 8192, 8192, 32, [1, 2, 3], l1_hopper=True) == 1
    assert C.pick_ffpa_level(1024, 1024, 8192, 8192, 32, [2, 3], l1_hopper=True) == 3
    with pytest.raises(ValueError, match="levels are 1..3, got 4"):
        pick(1024, [4])


@pytest.mark.parametrize("d", [320, 384])
def test_auto_routes_d320_and_d384(d):
    """D = 320 and 384 auto calls run the FA-2 family when this build has its (d, d) kernel (its
    whole-head-dim tile beats every mma.sync FFPA tile there, README 'Measured'). On a compute
    capability 9.0 device per-arch kernels come first: FA-2's Hopper kernel, or FFPA L1's in a build
    whose FA-2 has no Hopper kernel for the pair (set_fa2_mma('sync') keeps FA-2's mma.sync); forced
    levels and fp16/mixed accumulation still reach FFPA. Asked of the C++ chooser, the one that decides."""
    from ffpa_attn import _ops

    if (d, d) not in _pairs("fa2"):
        pytest.skip(f"this build has no FA-2 kernel for D={d}")
    info = ffpa_attn.build_info()
    dt = info["dtypes"][0]
    cc = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    def hopper(family):
        return cc == (9, 0) and any(e["family"] == family and e["arch"] == "90a" and e["dtype"] == dt
                                    and (e["E"], e["Ev"]) == (d, d) for e in info["registry"])

    hopper_l1 = hopper("ffpa_l1") and not hopper("fa2")
    assert _ops.chosen_kernel(dt, d, d)["family"] == ("ffpa_l1" if hopper_l1 else "fa2")
    if hopper("fa2"):
        assert _ops.chosen_kernel(dt, d, d)["mma"] == "wgmma"
    if hopper_l1:
        assert _ops.chosen_kernel(dt, d, d)["mma"] == "wgmma"
        _ops._C.set_fa2_mma("sync")
        try:
            assert _ops.chosen_kernel(dt, d, d)["family"] == "fa2"
        finally:
            _ops._C.set_fa2_mma("auto")
    if (d, d) in _pairs("ffpa_l1"):
        assert _ops.chosen_kernel(dt, d, d, level=1)["family"] == "ffpa_l1"
    # fp16 accumulation exists on the FFPA levels only: never routed to FA-2
    if "float16" in ffpa_attn.build_info()["dtypes"]:
        got = _ops.chosen_kernel("float16", d, d, acc="fp16")
        assert got is None or got["family"] != "fa2"


def test_chooser_reads_the_registry():
    """The C++ chooser (csrc/launch/route.cpp), asked through _C.route for every compiled pair: it
    runs a kernel the registry has, of the family the spec's data make first (FA-2 where it has the
    pair, wgmma on a compute capability 9.0 device with sm_90a code unless set_fa2_mma('sync'),
    mma.sync otherwise; there FFPA L1's Hopper kernel where it has the pair and FA-2's wgmma line
    not), the forced level when one is given, the decode family for the decode op, and nothing for
    a pair not compiled. Python's existence check agrees with it."""
    from ffpa_attn import _ops

    info = ffpa_attn.build_info()
    cc = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    wgmma_here = cc == (9, 0) and "90a" in info["archs"]
    for e in info["registry"]:
        if e["acc"] != "fp32":
            continue
        pair, dt = (e["E"], e["Ev"]), e["dtype"]
        if e["op"] == "decode":
            assert _ops.chosen_kernel(dt, *pair, op="decode")["family"] == "decode"
            continue
        if e["family"] == "fp8":  # e4m3 inputs: the FP8 line serves them on its arch, nothing else does
            got = _ops.chosen_kernel(dt, *pair)
            assert (got is not None and got["family"] == "fp8") == (cc == (9, 0)), (e, got)
            continue
        got = _ops.chosen_kernel(dt, *pair)
        assert got is not None, e
        # on Hopper the per-arch kernels come first: FA-2's, else FFPA L1's beside FA-2's mma.sync
        def hopper(family):
            return wgmma_here and any(x["family"] == family and x["arch"] == "90a" and x["dtype"] == dt
                                      and (x["E"], x["Ev"]) == pair for x in info["registry"])

        hopper_l1 = hopper("ffpa_l1") and not hopper("fa2")
        assert (got["family"] == "fa2") == (pair in _pairs("fa2") and not hopper_l1), (e, got)
        if got["family"] == "fa2":
            assert got["mma"] == ("wgmma" if hopper("fa2") else "mma.sync"), got
        assert got["family"] in _ops.kernel_families("fwd", *pair, dt, cc=cc)
        if e["level"]:
            assert _ops.chosen_kernel(dt, *pair, level=e["level"])["family"] == e["family"]
    if _pairs("fa2") and wgmma_here:
        e, ev = _pairs("fa2")[0]
        C = _ops._C
        C.set_fa2_mma("sync")
        try:
            assert _ops.chosen_kernel(info["dtypes"][0], e, ev)["mma"] == "mma.sync"
        finally:
            C.set_fa2_mma("auto")
    dt = info["dtypes"][0]
    assert _ops.chosen_kernel(dt, 328, 328) is None
    with pytest.raises(ValueError, match="`op` must be"):
        _ops._C.route("bwd", dt, 128, 128, 0, 0, 1, 1, 1)
    with pytest.raises(ValueError, match="`acc` must be"):
        _ops._C.route("fwd", dt, 128, 128, 0, 7, 1, 1, 1)


def test_grid_limit_is_the_one_the_routing_uses():
    """The Python routing's grid limit (query heads, mask slices) is ffpa::kMaxGridYZ, which the build
    reports: one constant, checked here so the two cannot drift."""
    from ffpa_attn import _routing

    limit = ffpa_attn.build_info()["limits"]["max_grid_yz"]
    assert limit == _routing._MAX_GRID_YZ == _routing._MAX_HEADS == _routing._MAX_MASK_SLICES == 65535


def test_manifest_registry_lists_every_compiled_kernel():
    """build_info()["registry"] (from ffpa_attn/_spec.py) has one entry per compiled kernel and
    agrees with the per-family summaries: the same (E, Ev) pairs and accumulation modes."""
    info = ffpa_attn.build_info()
    reg = info["registry"]
    assert reg and len({(e["family"], e["arch"], e["dtype"], e["acc"], e["E"], e["Ev"]) for e in reg}) == len(reg)
    # the arch-specific lines exactly where the build has that arch and a pair one of the spec's sm_90a lines
    # covers (FA-2, FFPA L1, decode at the FFPA head dims, FP8)
    assert {e["arch"] for e in reg} <= {"any"} | set(info["archs"])
    hopper_pairs = any(set(_pairs(f.name)) & set(f.pairs) for f in _spec.FAMILIES if f.arch == "90a")
    assert any(e["arch"] == "90a" for e in reg) == ("90a" in info["archs"] and hopper_pairs)
    for family in info["families"]:
        entries = [e for e in reg if e["family"] == family]
        assert {(e["E"], e["Ev"]) for e in entries} == set(_pairs(family)), family
        for dt, accs in info["accs"][family].items():
            assert sorted({e["acc"] for e in entries if e["dtype"] == dt}) == accs, (family, dt)
        assert {e["level"] for e in entries} == ({0} if family in ("fa2", "decode", "fp8") else {int(family[-1])})
        assert {e["auto"] for e in entries} == ({"first"} if family in ("fa2", "decode", "fp8") else {"heuristic"})
        assert {e["op"] for e in entries} == ({"decode"} if family == "decode" else {"fwd"})
