"""The warp-specialised FA-2 kernel's schedule on explicit sizes through ffpa_attn._C (csrc/launch/heuristics.h):
its causal walk (fa2_causal_tail_bh), the tile of calls without a mask (fa2_narrow_tile) and where the
look-ahead kernel runs (fa2_ws_look_ahead). No GPU needed."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.requires_extension


def tail(bh, m_blocks, sms=132, **kw):
    import ffpa_attn._C as C

    return C.fa2_causal_tail_bh(bh, m_blocks, sms, **kw)


def test_a_tail_where_the_last_round_of_pairs_is_part_idle():
    # D = 64 (192-row items): B=8 H=16 N=2048 has 11 query blocks, 5.33 rounds of pairs; B=1 H=32 N=8192 43, 5.21
    assert tail(128, 11) == 24  # ceil(2 x 132 / 11): one wave of pairs' work in single items
    assert tail(32, 43) == 7
    assert tail(128, 11, waves=2.0) == 48


def test_no_tail_where_pairs_fill_the_rounds_or_one_round_holds_all():
    assert tail(128, 16) == 0 and tail(32, 64) == 0  # 128-row items at those shapes: 7.76 rounds, 3% idle
    assert tail(4, 11) == 0  # under one round: every slot has its SM
    assert tail(128, 2) == 0  # two query blocks: one pair a (batch, head), nothing shorter to end on
    assert tail(128, 11, waves=0.0) == 0


def test_the_tail_is_at_most_every_head():
    assert tail(89, 3, waves=2.0) == 89  # 1.01 rounds; two waves' work would be ceil(528 / 3) = 176 heads
    assert tail(178, 3) == 88


# ---- the tile of calls without a mask at D <= 96 (csrc/launch/heuristics.h fa2_narrow_tile) ----------------

TABLE = {64: (192, 128), 96: (128, 176)}  # the Hopper table's tiles (traits/fa2_traits.h); the masked one 128 x 128


def narrow(d, B, H, lq, lk=None, causal=False, align="top_left", sms=132):
    import ffpa_attn._C as C

    lk = lq if lk is None else lk
    off = 0 if align == "top_left" else lk - lq
    return C.fa2_narrow_tile(d, B * H, lq, lk, causal, off, sms, *TABLE[96 if d > 64 else 64], 128, 128)


def brute_work(lq, lk, causal, off, bm, bn):
    work = 0
    for m0 in range(0, lq, bm):
        keys = min(max(min(m0 + bm, lq) + off, 0), lk) if causal else lk  # causal: the block's last row's keys
        work += bm * -(-keys // bn) * bn
    return work


@pytest.mark.parametrize("lq,lk,off", [(1, 1, 0), (7, 7, 0), (1000, 1000, 0), (5, 300, 295), (300, 5, -295),
                                       (300, 5, 0), (64, 1000, 0), (64, 1000, 936), (10, 20, -15), (10, 20, 40),
                                       (333, 129, -17), (197, 197, 0)])
@pytest.mark.parametrize("bm,bn", [(192, 128), (128, 176), (128, 128), (64, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_the_work_counts_each_blocks_key_tiles(lq, lk, off, bm, bn, causal):
    import ffpa_attn._C as C

    assert C.fa2_tile_work(lq, lk, causal, off, bm, bn) == brute_work(lq, lk, causal, off, bm, bn)


# Session 41, one H100, bf16, TFLOPS table / narrow tile (each run's pair): (D, causal, B, H, N) -> the faster
# tile; cells within 0.2% left out
MEASURED = {
    (64, 0, 1, 16, 1024): "narrow",  # 205.5 / 234.2
    (64, 0, 1, 32, 8192): "table",  # 518.5 / 434.1
    (64, 0, 2, 16, 2048): "table",  # 404.0 / 376.9
    (64, 0, 4, 16, 3072): "table",  # 494.9 / 407.2
    (64, 0, 8, 16, 2048): "table",  # 472.9 / 400.4
    (64, 0, 16, 16, 768): "table",  # 404.9 / 340.1
    (64, 0, 16, 16, 1024): "table",  # 409.0 / 376.3
    (64, 0, 32, 12, 1370): "table",  # 420.8 / 379.7
    (64, 0, 32, 16, 512): "table",  # 338.4 / 312.7
    (64, 0, 64, 16, 256): "narrow",  # 225.9 / 262.4
    (64, 0, 64, 16, 577): "table",  # 296.3 / 287.0
    (64, 0, 128, 12, 197): "narrow",  # 127.4 / 147.7
    (64, 0, 256, 16, 64): "narrow",  # 40.2 / 44.1
    (64, 1, 1, 8, 512): "narrow",  # 13.5 / 16.3
    (64, 1, 1, 16, 1024): "narrow",  # 77.0 / 102.1, 78.4 / 104.5
    (64, 1, 1, 32, 8192): "table",  # 471.0 / 423.2, 459.5 / 412.4
    (64, 1, 2, 16, 2048): "narrow",  # 257.6 / 298.9, 261.0 / 303.5
    (64, 1, 2, 32, 6144): "table",  # 484.6 / 405.6
    (64, 1, 4, 16, 3072): "table",  # 412.9 / 361.3, 413.7 / 363.2
    (64, 1, 4, 32, 4096): "table",  # 437.9 / 393.0
    (64, 1, 8, 16, 1536): "table",  # 338.9 / 313.1
    (64, 1, 8, 16, 2048): "table",  # 357.2 / 342.0
    (64, 1, 16, 16, 768): "table",  # 241.4 / 236.1, 243.8 / 239.4
    (64, 1, 16, 16, 1024): "narrow",  # 260.0 / 280.5, 251.9 / 274.3
    (64, 1, 32, 12, 1370): "narrow",  # 295.9 / 301.7
    (64, 1, 32, 16, 512): "narrow",  # 177.6 / 196.8, 179.8 / 202.8
    (64, 1, 64, 16, 256): "narrow",  # 98.1 / 128.7
    (64, 1, 64, 16, 577): "narrow",  # 174.1 / 204.5
    (64, 1, 128, 12, 197): "narrow",  # 60.6 / 83.1
    (64, 1, 256, 16, 64): "narrow",  # 19.9 / 21.2
    (96, 0, 1, 16, 1024): "narrow",  # 288.0 / 302.3
    (96, 0, 1, 32, 8192): "table",  # 532.8 / 517.6
    (96, 0, 2, 16, 2048): "narrow",  # 478.5 / 482.1
    (96, 0, 4, 16, 3072): "narrow",  # 473.5 / 514.7
    (96, 0, 16, 16, 768): "narrow",  # 386.8 / 423.9
    (96, 0, 16, 16, 1024): "narrow",  # 447.5 / 450.5
    (96, 0, 32, 12, 1370): "table",  # 493.5 / 478.5
    (96, 0, 32, 16, 512): "narrow",  # 384.5 / 387.3
    (96, 0, 64, 16, 256): "narrow",  # 248.0 / 300.4
    (96, 0, 64, 16, 577): "narrow",  # 356.2 / 370.6
    (96, 0, 128, 12, 197): "narrow",  # 162.0 / 197.5
    (96, 0, 256, 16, 64): "narrow",  # 49.2 / 59.8
    (96, 1, 1, 16, 1024): "narrow",  # 120.4 / 138.1, 120.7 / 139.2
    (96, 1, 1, 32, 8192): "table",  # 519.7 / 507.2, 552.8 / 545.4
    (96, 1, 2, 16, 2048): "narrow",  # 364.9 / 388.3, 364.2 / 382.9
    (96, 1, 2, 32, 6144): "table",  # 501.2 / 490.1
    (96, 1, 4, 16, 3072): "narrow",  # 458.2 / 461.6, 426.4 / 430.7
    (96, 1, 4, 32, 4096): "narrow",  # 483.9 / 516.3
    (96, 1, 8, 16, 1536): "narrow",  # 359.8 / 377.1
    (96, 1, 8, 16, 2048): "narrow",  # 423.4 / 436.1, 421.7 / 432.7
    (96, 1, 16, 16, 768): "narrow",  # 271.2 / 297.3, 270.3 / 297.8
    (96, 1, 16, 16, 1024): "narrow",  # 321.7 / 349.0, 320.3 / 342.3
    (96, 1, 32, 12, 1370): "narrow",  # 371.4 / 390.7
    (96, 1, 32, 16, 512): "narrow",  # 217.1 / 240.3, 216.8 / 244.0
    (96, 1, 64, 16, 256): "narrow",  # 126.4 / 151.2
    (96, 1, 64, 16, 577): "narrow",  # 212.7 / 240.2
    (96, 1, 128, 12, 197): "narrow",  # 84.0 / 102.5
    (96, 1, 256, 16, 64): "narrow",  # 24.5 / 29.7
}


@pytest.mark.parametrize("cell", list(MEASURED))
def test_the_model_picks_the_measured_faster_tile(cell):
    d, causal, B, H, N = cell
    for align in ("top_left", "bottom_right"):  # the same at equal lengths
        assert narrow(d, B, H, N, causal=bool(causal), align=align) == (MEASURED[cell] == "narrow"), align


def test_head_dims_past_96_and_long_caches_keep_the_table():
    assert not narrow(128, 128, 12, 197) and not narrow(256, 1, 8, 256, causal=True)  # D = 128's table tile is the narrow one
    # chunked prefill: 1024 rows against 8 K keys see ~8 K keys each bottom-right, where the diagonal weighs
    # little; top-left they see 1..1024, as a square call of 1024
    assert not narrow(64, 16, 16, 1024, 8192, causal=True, align="bottom_right")
    assert narrow(64, 16, 16, 1024, 8192, causal=True, align="top_left")
    # the few-rounds rule: ViT-B at batch 1 (12 heads x 2 blocks, under a round) takes the narrow tile
    assert narrow(64, 1, 12, 197) and narrow(64, 128, 12, 197)


# ---- the look-ahead kernel (csrc/launch/heuristics.h fa2_ws_look_ahead) --------------------------------------

# Session 42, one H100, bf16, TFLOPS today's kernel / look-ahead (two interleaved pairs each): (D, causal, B, H,
# N) -> the faster; cells within 0.5% left out, and D = 64 at 768 keys (+1% non-causal, -0.5% causal: the
# rule starts at 1024)
LOOK_AHEAD_MEASURED = {
    (32, 0, 64, 16, 256): "today",  # 146.0 / 134.2
    (32, 1, 64, 16, 256): "today",  # 73.3 / 69.5
    (32, 1, 8, 16, 2048): "ahead",  # 202.7 / 208.2
    (64, 0, 64, 16, 256): "today",  # 259.2 / 246.7, 261.5 / 245.7
    (64, 1, 64, 16, 256): "today",  # 131.0 / 124.3
    (64, 1, 32, 16, 512): "today",  # 204.5 / 198.8
    (64, 0, 16, 16, 1024): "ahead",  # 372.5 / 378.3
    (64, 1, 16, 16, 1024): "ahead",  # 270.7 / 272.3, 269.8 / 272.6
    (64, 0, 8, 16, 2048): "ahead",  # 440.9 / 452.7
    (64, 1, 8, 16, 2048): "ahead",  # 336.4 / 345.0
    (64, 0, 4, 16, 4096): "ahead",  # 460.0 / 472.9
    (64, 1, 1, 32, 8192): "ahead",  # 429.8 / 452.0
    (96, 0, 32, 16, 512): "ahead",  # 350.1 / 366.7
    (96, 1, 32, 16, 512): "ahead",  # 230.3 / 235.7
    (96, 1, 24, 16, 768): "ahead",  # 283.1 / 291.5
    (96, 0, 16, 16, 1024): "ahead",  # 416.9 / 434.4
    (96, 1, 4, 16, 4096): "ahead",  # 450.7 / 467.8
    (128, 0, 64, 16, 256): "today",  # 326.0 / 313.9
    (128, 0, 8, 16, 2048): "today",  # 563.6 / 556.2
    (128, 1, 8, 16, 2048): "today",  # 483.4 / 464.3
    (128, 1, 1, 32, 8192): "today",  # 599.9 / 585.9
}


@pytest.mark.parametrize("cell,faster", sorted(LOOK_AHEAD_MEASURED.items()), ids=lambda c: str(c))
def test_the_look_ahead_kernel_runs_where_it_measured_faster(cell, faster):
    import ffpa_attn._C as C

    d, causal, B, H, n = cell
    assert C.fa2_ws_look_ahead(d, n) == (faster == "ahead")


def test_the_look_ahead_rule_edges():
    import ffpa_attn._C as C

    assert not C.fa2_ws_look_ahead(64, 1023) and C.fa2_ws_look_ahead(64, 1024)
    assert not C.fa2_ws_look_ahead(96, 511) and C.fa2_ws_look_ahead(96, 512) and C.fa2_ws_look_ahead(80, 512)
    assert not C.fa2_ws_look_ahead(97, 1 << 20) and not C.fa2_ws_look_ahead(128, 1 << 20)
    assert not C.fa2_ws_look_ahead(0, 4096) and C.fa2_ws_look_ahead(32, 4096)


# ---- the split tail (csrc/launch/heuristics.h fa2_split_tail, csrc/include/ffpa/kernels/fa2_split_plan.h) --


def test_the_split_tail_where_long_equal_items_leave_a_last_round():
    import ffpa_attn._C as C

    # B=1 H=32 N=8192 at D = 128 (128 x 128 tiles): 2048 items on 132 SMs, 15 rounds and 68 items; the last
    # 132 + 68 items become 132 shares from slot 14 x 132
    assert C.fa2_split_tail(2048, 132, 8192, 128, False, False) == (14 * 132, 132)
    assert C.fa2_split_tail(141, 132, 4096, 128, False, False) == (0, 132)  # one round and 9: shares only
    assert C.fa2_split_tail(2048, 132, 4096, 128, False, False) == (14 * 132, 132)  # the rule's first length
    assert C.fa2_split_tail(2048, 132, 4095, 128, False, False) == (0, 0)  # shorter items: the merge outweighs
    assert C.fa2_split_tail(2048, 132, 8192, 128, True, False) == (0, 0)  # causal: the walk's own tail
    assert C.fa2_split_tail(2048, 132, 8192, 128, False, True) == (0, 0)  # a mask: tiles skip per item
    assert C.fa2_split_tail(15 * 132, 132, 8192, 128, False, False) == (0, 0)  # whole rounds
    assert C.fa2_split_tail(131, 132, 8192, 128, False, False) == (0, 0)  # under one round: nothing waits
    assert C.fa2_split_tail(2048, 132, 128 << 15, 128, False, False) == (0, 0)  # 32768 tiles: the range word
    assert C.fa2_split_tail(2048, 132, (128 << 15) - 128, 128, False, False) == (14 * 132, 132)  # 32767


@pytest.mark.parametrize("items,shares,tiles", [(2048, 132, 64), (2048, 132, 32), (141, 132, 33), (1376, 132, 64),
                                                (4096, 132, 32), (265, 132, 2), (5, 3, 7), (200, 114, 129)])
def test_the_split_pieces_cover_every_tile_once_and_pair_each_cut_item(items, shares, tiles):
    """The producer's walk over the shares (the kernel's own integer math): the split part's tiles each
    once, shares within a tile of each other, a cut item in two pieces [0, c) and [c, n) on shares k - 1 and
    k, both naming boundary k (where the two warps' partials meet), whole items naming none."""
    import ffpa_attn._C as C

    frm = (items // shares - 1) * shares
    pieces = C.fa2_split_pieces(items, frm, shares, tiles)
    seen, per_share, by_cut = set(), [0] * shares, {}
    for k, i, jb, je, cut in pieces:
        assert 0 <= jb < je <= tiles and 0 <= i < items - frm
        seen.update((i, j) for j in range(jb, je))
        per_share[k] += je - jb
        if jb == 0 and je == tiles:
            assert cut == -1
        else:
            assert 1 <= cut < shares and (jb == 0 or je == tiles)
            by_cut.setdefault(cut, []).append((i, jb, je, k))
    assert len(seen) == sum(per_share) == (items - frm) * tiles
    assert max(per_share) - min(per_share) <= 1
    for cut, two in by_cut.items():
        (li, lb, le, lk), (ri, rb, re, rk) = sorted(two, key=lambda x: x[1])
        assert li == ri and lb == 0 and le == rb and re == tiles and (lk, rk) == (cut - 1, cut), two
