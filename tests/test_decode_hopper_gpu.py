"""The Hopper decode kernels (kernels/decode_sm90_ws.cuh: FFPA L1's wgmma + TMA pipeline on 64 packed
query rows per block; decode_sm90_mla.cuh and decode_sm90_narrow.cuh: MLA's single cache) against the float64 reference of _decode_ref.py: which calls take it and which
stay on the mma.sync kernel (torch.profiler), every compiled FFPA head-dim pair and dtype, the row
packings (a group of 64+ heads at one position, smaller groups over several positions, an odd Lq),
causal, contiguous and shuffled paged caches (pages 16..256), lengths 0, 1 and odd with NaN past
them, forced split counts, MLA with V a view of K, a negative scale, torch.compile and CUDA-graph
replay with new lengths."""
from __future__ import annotations

import pytest
import torch

import ffpa_attn
from _decode_case import LONGEST_FIRST_LENS, compile_and_graph_replay, run_case
from _reference import process_mode

_INFO = ffpa_attn.build_info() if ffpa_attn.extension_available() else {}
_WS_PAIRS = sorted({(int(e["E"]), int(e["Ev"])) for e in _INFO.get("registry", [])
                    if e["family"] == "decode" and e.get("arch") == "90a"})
HOPPER = bool(torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0) and _WS_PAIRS)
DTYPES = [d for d in (torch.float16, torch.bfloat16) if str(d).split(".")[-1] in (_INFO.get("dtypes") or [])]
WS, NARROW, SYNC = "decode_split_ws_kernel", "decode_split_narrow_kernel", "decode_split_kernel"
MLA = "decode_split_mla_kernel"
KERNELS = (WS, NARROW, SYNC, MLA)

pytestmark = [pytest.mark.requires_cuda,
              pytest.mark.skipif(not HOPPER, reason="the wgmma decode kernel runs on compute capability 9.0 (sm_90a)")]


def _pair(d, dv=None):
    want = (d, d if dv is None else dv)
    if want not in _WS_PAIRS:
        pytest.skip(f"{want} has no Hopper decode kernel in this build")
    return want


def _ran(kernels, name):
    """Whether the split kernel `name` (one of KERNELS: no name holds another) ran."""
    return any(name in k for k in kernels)


# (B, Lq, Hq, Hkv, S, pair, page, which kernel): rows per KV head = Hq / Hkv x Lq (paged: S whole pages).
ROUTES = [
    (2, 1, 128, 1, 700, (576, 512), 0, MLA),    # MLA: 128 heads at one position, two blocks
    (2, 2, 64, 1, 640, (576, 512), 64, MLA),    # a group of 64 at two positions
    (2, 8, 64, 8, 513, (512, 512), 0, WS),      # 8 heads x 8 positions in one block
    (3, 7, 32, 2, 288, (320, 320), 16, WS),     # 16 heads x 4 positions a block, Lq 7: the last half padding
    (2, 32, 4, 2, 192, (1024, 1024), 32, WS),   # 2 heads x 32 positions; Dv in two column groups
    (2, 1, 32, 1, 300, (576, 512), 0, MLA),     # 32 rows of MLA's single cache: half an MLA block
    (2, 1, 32, 1, 300, (512, 512), 0, WS),      # 32 rows (kDecodeWgmmaMinRows), separate V: half a block is padding
    (2, 4, 16, 1, 256, (576, 512), 0, MLA),     # MLA at 64 rows: the MLA kernel
    (2, 1, 64, 1, 256, (576, 512), 0, MLA),     # 64 rows: one block
    (2, 1, 16, 1, 700, (576, 512), 0, NARROW),  # 16 rows of MLA's single cache: the transposed kernel
    (2, 1, 16, 2, 700, (512, 512), 0, SYNC),    # 8 rows, separate K and V: the mma.sync kernel
    (2, 1, 96, 1, 300, (576, 512), 0, SYNC),    # a group of 96 (not a power of two)
    (2, 1, 128, 1, 288, (576, 512), 48, SYNC),  # pages of 48 keys (not a power of two)
]


@pytest.mark.parametrize("B,Lq,Hq,Hkv,S,pair,page,kernel", ROUTES,
                         ids=[f"{r[2]}of{r[3]}-lq{r[1]}-{r[5][0]}-p{r[6]}-{r[7].split('_')[2]}" for r in ROUTES])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_which_calls_take_the_wgmma_kernel(B, Lq, Hq, Hkv, S, pair, page, kernel, causal):
    D, Dv = _pair(*pair)
    lens = [S, S // 2 + 1, 1][:B]
    names = []
    run_case(B, Lq, Hq, Hkv, S, D, Dv, DTYPES[-1], causal=causal, lens=lens, page=page, seed=Hq + Lq, kernels=names,
             v_view_of_k=Dv < D)
    assert _ran(names, kernel) and sum(_ran(names, k) for k in KERNELS) == 1, sorted(names)


def test_mla_pair_with_a_separate_v_stays_on_the_64_row_kernel():
    """The MLA kernel reads V from K's stages: a V that is not a view of K takes the 64-row kernel."""
    D, Dv = _pair(576, 512)
    names = []
    run_case(2, 1, 128, 1, 300, D, Dv, DTYPES[-1], lens=[300, 77], seed=5, kernels=names)
    assert _ran(names, WS) and not _ran(names, MLA), sorted(names)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("pair", _WS_PAIRS, ids=lambda p: f"{p[0]}x{p[1]}")
@pytest.mark.parametrize("page", [0, 64], ids=["contiguous", "paged64"])
def test_every_head_dim_pair_and_dtype(pair, dtype, page):
    D, Dv = pair
    names = []
    run_case(2, 2, 64, 2, 384, D, Dv, dtype, causal=True, lens=[384, 129], page=page, seed=D, kernels=names)
    assert _ran(names, WS), sorted(names)


@pytest.mark.parametrize("page", [16, 32, 128, 256])
def test_page_sizes(page):
    D, Dv = _pair(576, 512)
    names = []
    run_case(4, 1, 128, 1, 1024, D, Dv, DTYPES[-1], lens=[1024, 333, 0, 1], page=page, seed=page,
             v_view_of_k=True, kernels=names)
    assert _ran(names, MLA), sorted(names)


@pytest.mark.parametrize("splits", [1, 2, 3, 5, 8, 64])
def test_forced_split_counts(splits):
    """Every count gives the same result (splits past the key tiles are capped; empty ones weigh 0)."""
    D, Dv = _pair(*(_WS_PAIRS[0]))
    names = []
    run_case(3, 4, 32, 2, 1000, D, Dv, DTYPES[-1], causal=True, lens=[1000, 3, 0], splits=splits, seed=splits,
             kernels=names)
    assert _ran(names, WS), sorted(names)


def test_long_cache_auto_splits_and_odd_lengths():
    D, Dv = _pair(576, 512)
    run_case(2, 1, 64, 1, 19968, D, Dv, DTYPES[-1], lens=[19968, 12345], page=64, v_view_of_k=True, seed=3)


@pytest.mark.parametrize("scale", [-0.05, 0.3])
def test_scale(scale):
    D, Dv = _pair(*(_WS_PAIRS[0]))
    run_case(2, 1, 64, 1, 300, D, Dv, DTYPES[-1], lens=[300, 170], scale=scale, seed=9)


@pytest.mark.parametrize("Hq", [128, 16], ids=["64-row", "narrow"])
def test_compile_fullgraph_and_cuda_graph_replay(Hq):
    D, Dv = _pair(576, 512)
    compile_and_graph_replay(3, Hq, 1, D, Dv, seed=21, v_view_of_k=True)


# MLA's single cache: (B, Lq, Hq, S, page, causal, lens, splits). Up to 16 rows per KV head
# (kDecodeNarrowMaxRows) the narrow kernel, past them the MLA kernel (its consumers alternate tiles, so
# odd and even tile counts, one tile, none).
SINGLE_CACHE_CASES = [
    (3, 1, 16, 1024, 0, False, [1024, 333, 0], None),
    (3, 1, 16, 1024, 16, False, [1024, 1, 700], None),
    (2, 1, 16, 1024, 256, False, [1000, 64], None),
    (2, 2, 8, 640, 64, True, [640, 100], None),     # 8 heads x 2 positions, causal
    (2, 3, 4, 640, 0, True, [640, 2], None),        # 4 heads x 3 positions (a fourth of the rows padding)
    (2, 7, 2, 512, 32, True, [500, 9], 3),          # 2 heads x 7 positions, forced splits
    (1, 1, 1, 4096, 0, False, [4000], 7),           # one row
    (2, 1, 16, 2048, 64, False, [2048, 1500], 1),
    (3, 1, 128, 1024, 0, False, [1024, 333, 0], None),
    (3, 1, 128, 1024, 16, False, [1024, 1, 700], None),
    (2, 1, 64, 1024, 256, False, [1000, 64], None),
    (2, 1, 128, 2048, 64, False, [2048, 1500], 1),    # one split: 32 and 24 tiles
    (2, 1, 128, 1024, 32, False, [1000, 65], 3),      # 16 tiles over 3 splits: 6, 6, 4; the short row 2, 0, 0
    (2, 2, 32, 640, 64, True, [640, 100], None),      # 32 heads x 2 positions, causal
    (2, 4, 16, 640, 0, True, [640, 3], None),         # 16 heads x 4 positions, causal: rows see 0..3 keys
    (2, 7, 8, 512, 32, True, [500, 9], 5),            # 8 heads x 7 positions (an eighth of the rows padding)
    (1, 1, 128, 4096, 0, False, [4000], 7),
    (2, 3, 16, 4096, 128, True, [4096, 4033], 2),
]


@pytest.mark.parametrize("B,Lq,Hq,S,page,causal,lens,splits", SINGLE_CACHE_CASES,
                         ids=[f"h{c[2]}-lq{c[1]}-p{c[4]}{'-causal' if c[5] else ''}-s{c[7]}" for c in SINGLE_CACHE_CASES])
def test_mla_single_cache_kernels(B, Lq, Hq, S, page, causal, lens, splits):
    D, Dv = _pair(576, 512)
    kernel = NARROW if Hq * Lq <= 16 else MLA
    for dtype in DTYPES:
        names = []
        run_case(B, Lq, Hq, 1, S, D, Dv, dtype, causal=causal, lens=lens, page=page, splits=splits, v_view_of_k=True,
                 seed=Hq * 10 + Lq, kernels=names)
        assert _ran(names, kernel), sorted(names)


# The single-cache kernels taking their sequences longest first (decode_longest_first_batch): forced on
# lengths with ties, 0, 1 and the capacity (each sequence computed exactly once, or NaN rows fail), and
# auto on an MLA grid of more than one wave (70 sequences x 2 row blocks of 128 heads: 140 blocks, one
# a SM).
@pytest.mark.parametrize("Hq,page,splits", [(128, 0, None), (128, 64, 2), (16, 0, None), (16, 32, 3)],
                         ids=["mla", "mla-paged64-s2", "narrow", "narrow-paged32-s3"])
def test_single_cache_longest_first_forced(Hq, page, splits):
    D, Dv = _pair(576, 512)
    names = []
    with process_mode("decode_order", "longest"):
        run_case(9, 1, Hq, 1, 320, D, Dv, DTYPES[-1], lens=LONGEST_FIRST_LENS, page=page,
                 splits=splits, seed=33, v_view_of_k=True, kernels=names)
    assert _ran(names, MLA if Hq > 16 else NARROW), sorted(names)


def test_mla_longest_first_auto_past_one_wave():
    D, Dv = _pair(576, 512)
    g = torch.Generator().manual_seed(4)
    lens = torch.randint(0, 129, (70,), generator=g).tolist()
    names = []
    run_case(70, 1, 128, 1, 128, D, Dv, DTYPES[-1], lens=lens, seed=34, v_view_of_k=True, kernels=names)
    assert _ran(names, MLA), sorted(names)


# The 64-row kernel (separate V) taking its sequences longest first: forced, and auto past one wave
# (140 sequences x one 64-row block: 140 blocks, one a SM).
@pytest.mark.parametrize("page,splits", [(0, None), (32, 3)], ids=["contiguous", "paged32-s3"])
def test_ws_longest_first_forced(page, splits):
    D, Dv = _WS_PAIRS[-1] if _WS_PAIRS else pytest.skip("no Hopper decode kernel in this build")
    names = []
    with process_mode("decode_order", "longest"):
        run_case(9, 2, 32, 1, 320, D, Dv, DTYPES[-1], causal=True, lens=LONGEST_FIRST_LENS,
                 page=page, splits=splits, seed=35, kernels=names)
    assert _ran(names, WS), sorted(names)


def test_ws_longest_first_auto_past_one_wave():
    D, Dv = _WS_PAIRS[-1] if _WS_PAIRS else pytest.skip("no Hopper decode kernel in this build")
    g = torch.Generator().manual_seed(5)
    lens = torch.randint(0, 129, (140,), generator=g).tolist()
    names = []
    run_case(140, 1, 64, 1, 128, D, Dv, DTYPES[-1], lens=lens, splits=1, seed=36, kernels=names)
    assert _ran(names, WS), sorted(names)


@pytest.mark.parametrize("scale", [-0.05, 0.3])
def test_mla_kernel_scale(scale):
    D, Dv = _pair(576, 512)
    names = []
    run_case(2, 1, 128, 1, 300, D, Dv, DTYPES[-1], lens=[300, 170], scale=scale, seed=11, v_view_of_k=True,
             kernels=names)
    assert _ran(names, MLA), sorted(names)
