"""attn_mask on the split-KV decode op (the mma.sync kernel, which loads a tile's mask bits one tile
ahead of their use: kernels/decode_sm80.cuh load_mask_bits / begin_tile) against the float64 reference:
every mask dtype the op takes (bool, fp16, bf16, fp32; the 16-bit kinds are read as raw bits and
converted a tile later), many 64-key tiles so the prefetch crosses tiles, forced split counts with the
merge kernel and fused, Lq 3 causal, separate K and V and MLA's single cache (V a view of K: the shared
variant's tile loop). Calls the op directly (ffpa_attn.decode takes no mask; forward routes masked short
queries here, tested in test_decode_gpu.py)."""
from __future__ import annotations

import math

import pytest
import torch

import ffpa_attn
from _cpu_helpers import ref_attention
from _decode_case import LSE_TOL, TOL, poison
from _reference import process_mode

pytestmark = pytest.mark.requires_cuda

_INFO = ffpa_attn.build_info() if ffpa_attn.extension_available() else {}
PAIRS = sorted(tuple(p) for p in (_INFO.get("head_dim_pairs") or {}).get("decode", []))
MASK_DTYPES = [torch.bool, torch.float16, torch.bfloat16, torch.float32]


def _pick(d, dv=None):
    want = (d, d if dv is None else dv)
    if want in PAIRS:
        return want
    if dv is not None or not PAIRS:
        pytest.skip(f"{want} is not in this build")
    return min(PAIRS, key=lambda p: abs(p[0] - d) + abs(p[1] - d))


def _case(B, Lq, Hq, Hkv, S, D, Dv, mask_dtype, splits, causal=False, v_view_of_k=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    dt = torch.bfloat16
    q = torch.randn(B, Lq, Hq, D, generator=g).to(dt)
    k = torch.randn(B, S, Hkv, D, generator=g).to(dt)
    v = k[..., :Dv] if v_view_of_k else torch.randn(B, S, Hkv, Dv, generator=g).to(dt)
    if mask_dtype == torch.bool:
        mask = torch.rand(B, Hq, Lq, S, generator=g) > 0.3
        mask[1, :, :, 5:] = False  # batch 1: a padding mask over most of the cache
        mask[..., 0] = True
    else:
        mask = (torch.randn(B, Hq, Lq, S, generator=g) * 3).to(mask_dtype)
        mask[1, :, :, 200:] = -math.inf
    scale = 1.0 / math.sqrt(D)
    keep = None
    if causal:  # bottom-right: query i sees keys j <= S - Lq + i
        keep = torch.arange(S).view(1, S) <= (S - Lq + torch.arange(Lq)).view(Lq, 1)
    ref_mask = mask if keep is None else (mask & keep if mask.dtype == torch.bool else mask.masked_fill(~keep, -math.inf))
    want, want_lse = ref_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=ref_mask,
                                   scale=scale, enable_gqa=True)
    kc = k.cuda()
    vc = kc[..., :Dv] if v_view_of_k else v.cuda()
    qc, mc = q.cuda(), mask.cuda()
    poison()
    out, lse = torch.ops.ffpa_attn.ffpa_decode(qc, kc, vc, None, None, mc, scale, causal, splits)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.cpu().double(), want.transpose(1, 2), **TOL[dt])
    torch.testing.assert_close(lse.cpu().double(), want_lse, **LSE_TOL)


@pytest.fixture(params=["kernel", "fused"])
def merge(request):
    with process_mode("decode_merge", request.param):
        yield request.param


@pytest.mark.parametrize("mask_dtype", MASK_DTYPES, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("splits", [1, 3, 0])
def test_mask_dtypes_across_tiles_and_splits(merge, mask_dtype, splits):
    """S = 700: eleven 64-key tiles, a mask value per key; splits 0 = auto."""
    D, Dv = _pick(128)
    _case(2, 1, 8, 2, 700, D, Dv, mask_dtype, splits, seed=1)


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.bfloat16], ids=["bool", "bf16"])
def test_mask_with_causal_query_rows(merge, mask_dtype):
    D, Dv = _pick(128)
    _case(2, 3, 8, 2, 650, D, Dv, mask_dtype, 2, causal=True, seed=2)


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float16], ids=["bool", "fp16"])
def test_mask_on_mlas_single_cache(merge, mask_dtype):
    """V a view of K (576/512): with a mask the Hopper kernels decline and the mma.sync kernel's shared
    variant (tiles_shared) runs."""
    D, Dv = _pick(576, 512)
    _case(2, 1, 16, 1, 500, D, Dv, mask_dtype, 3, v_view_of_k=True, seed=3)
