"""What the built extension reports, checked without a GPU: build manifest, launch configurations
(shared memory O(1) in the head dim) and the fake kernel's shapes/strides on meta tensors.

Skipped when the extension is not built (a pure-Python checkout)."""
from __future__ import annotations

import os

import pytest
import torch

import ffpa_attn

pytestmark = pytest.mark.skipif(not ffpa_attn.extension_available(), reason="ffpa_attn._C is not built")


def test_build_info_lists_what_was_compiled():
    info = ffpa_attn.build_info()
    assert info["version"] == ffpa_attn.__version__
    assert "ffpa_l1" in info["families"]
    assert info["head_dims"]["ffpa_l1"], "no L1 head dim compiled"
    assert set(info["dtypes"]) <= {"float16", "bfloat16"} and info["dtypes"]
    assert info["archs"] and info["cuda_version"]
    # The manifest names the PTX it embeds (the lowest arch), which routing trusts for newer GPUs.
    assert info["ptx"] == [min(info["archs"], key=lambda a: int(a.rstrip("a")))]
    want = os.environ.get("FFPA_HEAD_DIMS")
    if want:  # CI builds a reduced set and says which
        assert info["head_dims"]["ffpa_l1"] == sorted(int(x) for x in want.replace(";", ",").split(","))


def test_shared_memory_does_not_grow_with_head_dim():
    """L1 keeps shared memory O(1) in D: a block's bytes are a function of its tile and pipeline
    depth only. Every tile of the table has a D-free footprint, so the whole table is bounded by
    one constant however wide the head (the widest head dims use no more than the narrowest
    tile family's maximum)."""
    import ffpa_attn._C as C

    info = ffpa_attn.build_info()
    dt = info["dtypes"][0]
    dims = info["head_dims"]["ffpa_l1"]
    for stages in (1, 2, 3, 4):
        cfgs = {d: C.kernel_info(dt, 1, d, d, stages) for d in dims}
        # Same tile shape -> exactly the same bytes whatever D is.
        by_tile = {}
        for d, c in cfgs.items():
            by_tile.setdefault((c["block_m"], c["block_n"], c["chunk_d"], c["threads"]), set()).add(c["smem_bytes"])
        assert all(len(v) == 1 for v in by_tile.values()), by_tile
        assert all(c["num_stages"] == stages for c in cfgs.values())
        # The bound: the largest tile of the table at this depth, independent of D.
        bound = stages * (32 + 128) * 192 * 2 + 64 * 128 * 2 + 4 * 64 * 4
        assert all(c["smem_bytes"] <= bound for c in cfgs.values()), (bound, cfgs)


def test_shared_memory_formula_is_head_dim_free():
    """The footprint is stages x (Q slice + K slice) + P tile + row exchange: no D anywhere."""
    import ffpa_attn._C as C

    info = ffpa_attn.build_info()
    dt = info["dtypes"][0]
    for d in info["head_dims"]["ffpa_l1"]:
        c = C.kernel_info(dt, 1, d, d, 2)
        per_stage = (c["block_m"] + c["block_n"]) * c["chunk_d"] * 2
        expected = 2 * per_stage + c["block_m"] * c["block_n"] * 2 + c["warps_n"] * c["block_m"] * 4
        assert c["smem_bytes"] == expected, (d, c)


def test_kernel_info_rejects_unknown_configs():
    import ffpa_attn._C as C

    with pytest.raises(ValueError, match="dtype"):
        C.kernel_info("float32", 1, 320, 320, 2)
    with pytest.raises(ValueError, match="not compiled"):
        C.kernel_info("bfloat16", 1, 328, 328, 2)
    d = ffpa_attn.build_info()["head_dims"]["ffpa_l1"][0]
    dt = ffpa_attn.build_info()["dtypes"][0]
    with pytest.raises(ValueError):
        C.kernel_info(dt, 1, d, d, 7)


@pytest.mark.parametrize("layout", ["bhld", "blhd"])
def test_fake_kernel_shapes_and_strides_on_meta(layout):
    B, Hq, Hkv, L, S, D = 2, 8, 2, 33, 65, 320
    if layout == "blhd":
        q = torch.empty(B, L, Hq, D, device="meta", dtype=torch.bfloat16).transpose(1, 2)
    else:
        q = torch.empty(B, Hq, L, D, device="meta", dtype=torch.bfloat16)
    k = torch.empty(B, Hkv, S, D, device="meta", dtype=torch.bfloat16)
    v = torch.empty(B, Hkv, S, D, device="meta", dtype=torch.bfloat16)
    out, lse = torch.ops.ffpa_attn.ffpa_fwd(q, k, v, 0.1, True, 1, 0)
    assert out.shape == (B, Hq, L, D) and out.dtype == torch.bfloat16
    assert lse.shape == (B, Hq, L) and lse.dtype == torch.float32 and lse.is_contiguous()
    if layout == "blhd":
        assert out.transpose(1, 2).is_contiguous()
    else:
        assert out.is_contiguous()
