"""The split-KV merge in its three forms, fused into the split kernel (the last split block of each row
block merges it: kernels/decode_merge.cuh decode_split_arrive / decode_merge_rows, with the op's arrival
counters), spread over the split blocks (the narrow MLA kernel: decode_spread_arrive) and the second
kernel, forced process-wide by ffpa_attn._C.set_decode_merge, against the float64 reference: the
mma.sync kernel and (on Hopper) the narrow MLA kernel, forced split counts up to past one per tile,
lengths 0 and 1, causal, paged; calls one after another with other shapes and counts (the counters
must come back to zero), two streams at once, torch.compile and CUDA-graph replay; which kernels ran
(no merge kernel when fused or spread); the auto choice as the heuristic says."""
from __future__ import annotations

import pytest
import torch

import ffpa_attn
from _decode_case import compile_and_graph_replay, run_case
from _reference import process_mode

pytestmark = pytest.mark.requires_cuda

_INFO = ffpa_attn.build_info() if ffpa_attn.extension_available() else {}
PAIRS = sorted(tuple(p) for p in (_INFO.get("head_dim_pairs") or {}).get("decode", []))
DTYPES = [d for d in (torch.float16, torch.bfloat16) if str(d).split(".")[-1] in (_INFO.get("dtypes") or [])]
_WS_PAIRS = {(int(e["E"]), int(e["Ev"])) for e in _INFO.get("registry", [])
             if e["family"] == "decode" and e.get("arch") == "90a"}
HOPPER_MLA = bool(torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
                  and (576, 512) in _WS_PAIRS)
MERGE, NARROW, SYNC = "decode_merge_kernel", "decode_split_narrow_kernel", "decode_split_kernel"


def _pick(d):
    if not PAIRS:
        pytest.skip("no decode kernel in this build")
    return (d, d) if (d, d) in PAIRS else min(PAIRS, key=lambda p: abs(p[0] - d) + abs(p[1] - d))


@pytest.fixture(params=["fused", "kernel"])
def merge(request):
    with process_mode("decode_merge", request.param):
        yield request.param


def _merged_as(names, mode, splits, S, block_n=64):
    """The split kernel ran, and the merge kernel exactly where the split count (as forced, at most one
    per key tile of the kernel: plan()'s cap) is above 1 and the merge is the kernel's."""
    splits = min(splits, -(-S // block_n))
    assert any(SYNC in n or NARROW in n for n in names), sorted(names)
    assert any(MERGE in n for n in names) == (mode == "kernel" and splits > 1), (mode, splits, sorted(names))


@pytest.mark.parametrize("splits", [2, 3, 5, 16, 40])
@pytest.mark.parametrize("page", [0, 64], ids=["contiguous", "paged64"])
def test_mma_sync_kernel(merge, splits, page):
    """GQA 32/8 at D = 128 (4 rows a KV head), Lq 3 causal (12 rows), lengths 0 and 1 beside long ones;
    40 splits is past one per 64-key tile (capped, empty ranges merge as zeros)."""
    D, Dv = _pick(128)
    for Lq, causal in ((1, False), (3, True)):
        names = []
        run_case(3, Lq, 32, 8, 1024, D, Dv, DTYPES[-1], causal=causal, lens=[1024, 1, 0] if Lq == 1 else [1000, 3, 0],
                 page=page, splits=splits, seed=splits + Lq, kernels=names)
        _merged_as(names, merge, splits, 1024)


def test_mma_sync_kernel_rows_past_a_block_and_wide_heads(merge):
    """A group of 24 x Lq 2 (48 rows: three 16-row blocks of one KV head) and the widest pair built."""
    D, Dv = _pick(128)
    run_case(2, 2, 24, 1, 777, D, Dv, DTYPES[0], causal=True, lens=[777, 40], splits=4, seed=3)
    D, Dv = PAIRS[-1] if PAIRS else _pick(128)
    run_case(2, 1, 8, 2, 600, D, Dv, DTYPES[-1], lens=[600, 250], splits=3, seed=4)


@pytest.mark.skipif(not HOPPER_MLA, reason="the narrow MLA kernel: compute capability 9.0 and 576/512 built")
@pytest.mark.parametrize("Lq,Hq,causal,splits", [(1, 16, False, 2), (1, 16, False, 8), (2, 8, True, 5),
                                                  (7, 2, True, 3), (2, 4, True, 6)])
def test_narrow_mla_kernel(merge, Lq, Hq, causal, splits):
    names = []
    run_case(2, Lq, Hq, 1, 1024, 576, 512, DTYPES[-1], causal=causal, lens=[1024, 1], page=64, splits=splits,
             v_view_of_k=True, seed=Hq + Lq, kernels=names)
    assert any(NARROW in n for n in names), sorted(names)
    _merged_as(names, merge, splits, 1024)


def test_calls_in_a_row_leave_the_counters_at_zero(merge):
    """Other shapes and counts one after another on one stream (one counter buffer): a counter left
    above zero would make a later call's last block merge early or never."""
    D, Dv = _pick(128)
    for i, (B, Hq, Hkv, splits) in enumerate([(3, 32, 8, 7), (1, 8, 8, 3), (3, 32, 8, 2), (4, 16, 2, 9),
                                              (3, 32, 8, 7)]):
        run_case(B, 1, Hq, Hkv, 900, D, Dv, DTYPES[-1], lens=[900, 13, 450, 1][:B], splits=splits, seed=40 + i)


def test_two_streams_at_once(merge):
    """Calls on two streams overlap: each stream has its own counters. Compares each call with the same
    call made alone (bit for bit: the merge order is fixed), so this checks races between streams; the
    other tests check the values against the reference."""
    D, Dv = _pick(128)
    g = torch.Generator().manual_seed(5)
    cases = []
    for _ in range(2):
        q = torch.randn(4, 1, 32, D, generator=g).to(torch.bfloat16).cuda()
        k = torch.randn(4, 2048, 8, D, generator=g).to(torch.bfloat16).cuda()
        v = torch.randn(4, 2048, 8, Dv, generator=g).to(torch.bfloat16).cuda()
        cases.append((q, k, v, ffpa_attn.decode(q, k, v, num_splits=6)))
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs = [[], []]
    for _ in range(20):
        for s, (q, k, v, _) in zip(streams, cases):
            with torch.cuda.stream(s):
                outs[streams.index(s)].append(ffpa_attn.decode(q, k, v, num_splits=6))
    torch.cuda.synchronize()
    for (q, k, v, want), got in zip(cases, outs):
        for o in got:
            torch.testing.assert_close(o, want, atol=0, rtol=0)


def test_counter_buffer_grows(merge):
    """More row blocks than the stream's first counter buffer holds (4096), then fewer, then more again:
    the buffer is replaced by a larger zeroed one, and calls before and after stay right."""
    D, Dv = _pick(128)
    for i, (B, Hq, Hkv) in enumerate([(2, 32, 8), (48, 128, 8), (2, 8, 2), (64, 128, 8)]):  # 16 rows a KV head
        run_case(B, 1, Hq, Hkv, 320, D, Dv, DTYPES[-1], splits=3, seed=60 + i)


@pytest.mark.parametrize("splits", [None, 4])
def test_compile_and_graph_replay(merge, splits):
    """Auto splits (several at these sizes) and a forced count: the captured graph holds the split kernel
    and, per the mode, the merge kernel or the counters' zero fill."""
    if HOPPER_MLA:
        compile_and_graph_replay(3, 16, 1, 576, 512, seed=22, v_view_of_k=True, splits=splits)
    D, Dv = _pick(128)
    compile_and_graph_replay(3, 8, 2, D, Dv, seed=23, splits=splits)


def test_compile_reduce_overhead_on_a_new_counter_buffer(merge):
    """torch.compile(mode="reduce-overhead"): CUDA-graph trees run the warm-up call with the stream's
    allocations routed into the graph's pool and fail on a block there that outlives the call. The
    first call here needs more counters than any earlier test made (a new buffer, made inside that
    warm-up): it must come from outside the pool. Warm-up, recording and replays equal eager, to the bit."""
    import torch._dynamo

    D, Dv = _pick(128)
    g = torch.Generator().manual_seed(71)
    B, Hq, Hkv, S = 320, 64, 4, 128  # 320 x 4 KV heads x 16 rows = 20480 row-block counters, past test_counter_buffer_grows'
    q = torch.randn(B, 1, Hq, D, generator=g).to(torch.bfloat16).cuda()
    k = torch.randn(B, S, Hkv, D, generator=g).to(torch.bfloat16).cuda()
    v = torch.randn(B, S, Hkv, Dv, generator=g).to(torch.bfloat16).cuda()

    def step(qq):
        return ffpa_attn.decode(qq, k, v, num_splits=2) * 1.0  # a graph output of the compiled region

    torch._dynamo.reset()
    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    for i in range(4):  # warm-up, record, replays
        qi = (q * (1.0 + 0.25 * i)).contiguous()
        got = compiled(qi).clone()
        torch.testing.assert_close(got, step(qi), atol=0, rtol=0)
    torch._dynamo.reset()


def test_auto_follows_the_heuristic():
    """With the merge left to the launcher, D = 128 GQA (4 rows a block, a few splits) fuses it;
    many rows and splits (a 16-row block of Dv = 128 at 24 splits: 2 units x 3 rounds on D = 128's 256
    threads, 6 rounds) do not."""
    import ffpa_attn._C as C

    C.set_decode_merge("auto")
    D, Dv = _pick(128)
    if Dv != 128:
        pytest.skip("the shapes below are sized for Dv = 128")
    assert C.decode_fused_merge(4, Dv, 6, 128) and not C.decode_fused_merge(16, Dv, 24, 128)
    for Hq, splits, fused in ((32, 6, True), (128, 24, False)):
        names = []
        run_case(2, 1, Hq, 8, 2048, D, Dv, DTYPES[-1], lens=[2048, 999], splits=splits, seed=Hq, kernels=names)
        assert any(MERGE in n for n in names) != fused, (Hq, splits, sorted(names))


@pytest.mark.skipif(not HOPPER_MLA, reason="the narrow MLA kernel: compute capability 9.0 and 576/512 built")
@pytest.mark.parametrize("mode", ["spread", "auto"])
@pytest.mark.parametrize("Lq,Hq,causal,splits,page", [(1, 16, False, 2, 0), (1, 16, False, 8, 64), (2, 8, True, 5, 0),
                                                       (7, 2, True, 3, 64), (1, 16, False, 16, 0)])
def test_narrow_mla_spread_merge(mode, Lq, Hq, causal, splits, page):
    """The spread merge (every split block of a row block merges a slice of the columns after all stored
    theirs, a cooperative launch; auto's choice for the narrow kernel within one wave): against the
    reference, lengths 0 and 1 beside a long one, twice in a row (the counters come back to zero), no
    merge kernel."""
    with process_mode("decode_merge", mode):
        for rep in range(2):
            names = []
            run_case(3, Lq, Hq, 1, 1024, 576, 512, DTYPES[-1], causal=causal, lens=[1024, 1, 0], page=page,
                     splits=splits, v_view_of_k=True, seed=Hq + Lq + rep, kernels=names)
            assert any(NARROW in n for n in names) and not any(MERGE in n for n in names), sorted(names)
        if splits == 8 and mode == "spread":  # once: each count compiles the step again (dynamo's limit: 8)
            compile_and_graph_replay(3, 16, 1, 576, 512, seed=24, v_view_of_k=True, splits=splits)


@pytest.mark.skipif(not HOPPER_MLA, reason="the narrow MLA kernel: compute capability 9.0 and 576/512 built")
def test_narrow_mla_spread_merge_past_one_wave():
    """More split blocks than SMs (3 sequences x 48 splits = 144): the blocks of a row block could wait on
    one not yet resident, so 'spread' leaves it to the merge kernel; results as the reference."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    splits = sms // 3 + 4
    with process_mode("decode_merge", "spread"):
        names = []
        run_case(3, 1, 16, 1, 64 * splits, 576, 512, DTYPES[-1], lens=[64 * splits, 1, 0], splits=splits,
                 v_view_of_k=True, seed=5, kernels=names)
        assert any(NARROW in n for n in names) and any(MERGE in n for n in names), sorted(names)


@pytest.mark.skipif(not HOPPER_MLA, reason="the narrow MLA kernel: compute capability 9.0 and 576/512 built")
@pytest.mark.parametrize("order", ["balanced", "auto"])
@pytest.mark.parametrize("Lq,Hq,causal,splits,page", [(1, 16, False, 2, 0), (1, 16, False, 8, 64), (2, 8, True, 5, 0),
                                                       (7, 2, True, 4, 32), (1, 16, False, 16, 0)])
def test_narrow_mla_balanced_splits(order, Lq, Hq, causal, splits, page):
    """Balanced splits under the spread merge (kernels/decode_grid.cuh decode_balanced_starts: the split
    blocks dealt to the sequences by length, each sequence's partials in consecutive slots): against the
    reference, lengths with ties, 0, 1 and the capacity (a sequence of no keys still gets a block), twice
    in a row (the counters come back to zero), no merge kernel."""
    lens = [320, 0, 1, 319, 320, 64, 65, 200, 320]
    with process_mode("decode_order", order):
        for rep in range(2):
            names = []
            run_case(len(lens), Lq, Hq, 1, 320, 576, 512, DTYPES[-1], causal=causal, lens=lens, page=page,
                     splits=splits, v_view_of_k=True, seed=Hq + Lq + rep + 40, kernels=names)
            assert any(NARROW in n for n in names) and not any(MERGE in n for n in names), sorted(names)
