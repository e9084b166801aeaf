"""The split-KV decode kernel family on the GPU against an independent float64 reference (per
sequence, on the logical cache): every compiled head-dim pair and dtype, GQA ratios up to 128,
Lq 1..32 with and without the bottom-right causal mask, contiguous and shuffled paged caches,
lengths 0, 1, odd and long, NaN in every position no length covers, every split count, MLA with V
a view of K, forward's routing of short queries (also with key-padding and additive masks),
torch.compile and CUDA-graph replay. Outputs come
from an allocator poisoned with NaN, so a row the kernel forgets to write fails."""
from __future__ import annotations

import math

import pytest
import torch

import ffpa_attn
from _cpu_helpers import ref_attention
from _decode_case import LONGEST_FIRST_LENS, LSE_TOL, TOL, compile_and_graph_replay, kernel_names, run_case
from _reference import process_mode

pytestmark = pytest.mark.requires_cuda

_INFO = ffpa_attn.build_info() if ffpa_attn.extension_available() else {}
PAIRS = sorted(tuple(p) for p in (_INFO.get("head_dim_pairs") or {}).get("decode", []))
DTYPES = [d for d in (torch.float16, torch.bfloat16) if str(d).split(".")[-1] in (_INFO.get("dtypes") or [])]


def _pick(d, dv=None):
    """(d, dv) if compiled, else the compiled pair nearest to it (CI builds a reduced set)."""
    want = (d, d if dv is None else dv)
    if not PAIRS:
        pytest.skip("no decode kernel in this build")
    return want if want in PAIRS else min(PAIRS, key=lambda p: abs(p[0] - want[0]) + abs(p[1] - want[1]))


def _pick_routed(d):
    """A pair with both a decode and a prefill kernel (forward's routing tests run both), nearest to (d, d)."""
    prefill = {tuple(p) for fam, ps in (_INFO.get("head_dim_pairs") or {}).items() if fam != "decode" for p in ps}
    both = [p for p in PAIRS if p in prefill]
    if not both:
        pytest.skip("no head-dim pair with both a decode and a prefill kernel in this build")
    return (d, d) if (d, d) in both else min(both, key=lambda p: abs(p[0] - d) + abs(p[1] - d))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}x{p[1]}")
@pytest.mark.parametrize("page", [0, 64], ids=["contiguous", "paged64"])
def test_every_head_dim_pair_and_dtype(pair, dtype, page):
    D, Dv = pair
    run_case(2, 2, 8, 2, 320, D, Dv, dtype, causal=True, lens=[320, 129], page=page, seed=D)


@pytest.mark.parametrize("ratio", [1, 4, 8, 16, 128])
def test_gqa_ratios(ratio):
    D, Dv = _pick(128)
    Hkv = 1 if ratio == 128 else 2
    run_case(2, 1, Hkv * ratio, Hkv, 1024, D, Dv, DTYPES[-1], lens=[1024, 555], page=16, seed=ratio)


@pytest.mark.parametrize("Lq", [1, 2, 7, 32])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("page", [0, 16, 64], ids=["contiguous", "paged16", "paged64"])
def test_query_rows_causal_and_layouts(Lq, causal, page):
    D, Dv = _pick(128)
    run_case(4, Lq, 8, 2, 512, D, Dv, DTYPES[-1], causal=causal, lens=[512, 1, 0, 77], page=page, seed=Lq)


@pytest.mark.parametrize("page", [16, 32, 48, 128, 256])
@pytest.mark.parametrize("d", [64, 128])
def test_page_sizes_and_tile_boundaries(d, page):
    """Pages below, at and past the spacing of a thread's load passes and past the KV tile (the passes of one
    page share its table entry and base address: kernels/decode_kv_loads.cuh), one size not a power of two;
    lengths ending mid-page and mid-tile, split ranges starting inside pages."""
    D, Dv = _pick(d)
    run_case(3, 2, 8, 2, 1536, D, Dv, DTYPES[-1], causal=True, lens=[1536, 700, 33], page=page, splits=5,
             seed=page + d)


@pytest.mark.parametrize("S", [1, 17, 4097, 32768])
def test_cache_lengths(S):
    D, Dv = _pick(64)
    B = 1 if S > 4097 else 2
    run_case(B, 1, 8, 1, S, D, Dv, DTYPES[0], lens=[S] * B, seed=S)


def test_every_split_count():
    """Forced split counts from 1 to one per 64-key tile (and past it: capped), equal results."""
    D, Dv = _pick(128)
    S = 1000
    for splits in list(range(1, 17)) + [128]:
        run_case(3, 3, 8, 2, S, D, Dv, DTYPES[-1], causal=True, lens=[1000, 3, 0], splits=splits, seed=7)


# Blocks taking their sequences longest first (kernels/decode_grid.cuh decode_longest_first_batch):
# forced on lengths with ties, 0, 1 and the capacity, where each sequence must still be computed exactly
# once (a sequence taken twice leaves another's rows NaN from the poisoned allocator), and auto on a grid
# of more than one wave of the mma.sync kernel (512 blocks of D = 128 GQA: 3 a SM on an H100 or H200).
@pytest.mark.parametrize("page,splits", [(0, None), (16, 3), (64, 1)], ids=["contiguous", "paged16-s3", "paged64-s1"])
def test_longest_first_order_forced(page, splits):
    D, Dv = _pick(128)
    with process_mode("decode_order", "longest"):
        run_case(9, 2, 8, 2, 320, D, Dv, DTYPES[-1], causal=True, lens=LONGEST_FIRST_LENS, page=page, splits=splits,
                 seed=31)


def test_longest_first_order_auto_past_one_wave():
    D, Dv = _pick(128)
    g = torch.Generator().manual_seed(3)
    lens = torch.randint(0, 97, (64,), generator=g).tolist()
    for mode in ("auto", "launch"):
        with process_mode("decode_order", mode):
            run_case(64, 1, 32, 8, 96, D, Dv, DTYPES[-1], lens=lens, splits=1, seed=32)


@pytest.mark.parametrize("page", [0, 64], ids=["contiguous", "paged64"])
def test_mla_with_v_a_view_of_k(page):
    if (576, 512) not in PAIRS:
        pytest.skip("MLA's 576/512 is not in this build")
    run_case(2, 2, 16, 1, 640, 576, 512, DTYPES[-1], causal=True, lens=[640, 100], page=page, v_view_of_k=True)


@pytest.mark.parametrize("L", [1, 5, 64])
def test_forward_routes_short_queries_to_decode(L):
    D, Dv = _pick_routed(128)
    g = torch.Generator().manual_seed(L)
    q = torch.randn(2, 8, L, D, generator=g).to(torch.bfloat16)
    k = torch.randn(2, 2, 700, D, generator=g).to(torch.bfloat16)
    v = torch.randn(2, 2, 700, Dv, generator=g).to(torch.bfloat16)
    qc, kc, vc = q.cuda(), k.cuda(), v.cuda()
    res = {}
    names = kernel_names(lambda: res.setdefault("out", ffpa_attn.forward(
        qc, kc, vc, is_causal=True, causal_align="bottom_right", enable_gqa=True, return_lse=True, strict=True)))
    out, lse = res["out"]
    on_decode = any("decode_split_kernel" in n for n in names)
    assert on_decode == (L <= 32), sorted(names)
    want, want_lse = ref_attention(q, k, v, is_causal=True, enable_gqa=True, causal_bottom_right=True)
    assert out.shape == (2, 8, L, Dv) and out.is_contiguous()
    torch.testing.assert_close(out.cpu().double(), want, **TOL[torch.bfloat16])
    torch.testing.assert_close(lse.cpu().double(), want_lse, **LSE_TOL)


def test_compile_fullgraph_and_cuda_graph_replay():
    D, Dv = _pick(128)
    compile_and_graph_replay(3, 8, 2, D, Dv, seed=5)


def test_bad_values_are_clamped_not_read_out_of_bounds():
    """A length above the capacity (unchecked without FFPA_DEBUG_CHECKS) reads the cache, no further."""
    D, Dv = _pick(128)
    q = torch.randn(1, 1, 4, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 100, 1, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, 100, 1, Dv, device="cuda", dtype=torch.bfloat16)
    big = ffpa_attn.decode(q, k, v, cache_seqlens=torch.tensor([10 ** 6], dtype=torch.int32, device="cuda"))
    full = ffpa_attn.decode(q, k, v)
    torch.cuda.synchronize()
    torch.testing.assert_close(big, full, atol=0, rtol=0)


@pytest.mark.parametrize("kind", ["bool_padding", "float_full"])
@pytest.mark.parametrize("L", [1, 3])
def test_forward_with_a_mask_routes_to_decode(kind, L):
    """A static KV cache arrives with a key-padding mask (and models may pass additive masks): short
    queries with a mask still run on the decode family, which applies the mask per key."""
    D, Dv = _pick_routed(128)
    g = torch.Generator().manual_seed(11 + L)
    B, Hq, Hkv, S = 3, 8, 2, 600
    q = torch.randn(B, Hq, L, D, generator=g).to(torch.bfloat16)
    k = torch.randn(B, Hkv, S, D, generator=g).to(torch.bfloat16)
    v = torch.randn(B, Hkv, S, Dv, generator=g).to(torch.bfloat16)
    if kind == "bool_padding":
        lens = torch.tensor([600, 37, 0])
        mask = (torch.arange(S).view(1, 1, 1, S) < lens.view(B, 1, 1, 1))
    else:
        mask = torch.randn(B, Hq, L, S, generator=g) * 2
        mask[:, :, :, 400:] = -math.inf
    res = {}
    names = kernel_names(lambda: res.setdefault("out", ffpa_attn.forward(
        q.cuda(), k.cuda(), v.cuda(), attn_mask=mask.cuda(), enable_gqa=True, return_lse=True, strict=True)))
    assert any("decode_split_kernel" in n for n in names), sorted(names)
    out, lse = res["out"]
    want, want_lse = ref_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(out.cpu().double(), want, **TOL[torch.bfloat16])
    torch.testing.assert_close(lse.cpu().double(), want_lse, **LSE_TOL)
