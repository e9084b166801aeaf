"""The warp-specialised FA-2 kernel's causal walk (csrc/launch/heuristics.h fa2_causal_tail_bh), on
explicit sizes through ffpa_attn._C: no GPU needed."""
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


# ---- the causal tile at D <= 96 (csrc/launch/heuristics.h fa2_causal_short_tile) --------------------------

TABLE = {64: (192, 128), 96: (128, 176)}  # the Hopper table's tiles (traits/fa2_traits.h); the masked one 128 x 128


def narrow(d, B, H, lq, lk=None, align="top_left", sms=132):
    import ffpa_attn._C as C

    lk = lq if lk is None else lk
    return C.fa2_causal_short_tile(d, B * H, lq, lk, 0 if align == "top_left" else lk - lq, sms, *TABLE[96 if d > 64 else 64],
                                   128, 128)


def brute_work(lq, lk, off, bm, bn):
    work = 0
    for m0 in range(0, lq, bm):
        keys = min(max(min(m0 + bm, lq) + off, 0), lk)  # the block's last row sees keys 0 .. last + off
        work += bm * -(-keys // bn) * bn
    return work


@pytest.mark.parametrize("lq,lk,off", [(1, 1, 0), (7, 7, 0), (1000, 1000, 0), (5, 300, 295), (300, 5, -295),
                                       (300, 5, 0), (64, 1000, 0), (64, 1000, 936), (10, 20, -15), (10, 20, 40),
                                       (333, 129, -17)])
@pytest.mark.parametrize("bm,bn", [(192, 128), (128, 176), (128, 128), (64, 64)])
def test_the_causal_work_counts_each_blocks_key_tiles(lq, lk, off, bm, bn):
    import ffpa_attn._C as C

    assert C.causal_tile_work(lq, lk, off, bm, bn) == brute_work(lq, lk, off, bm, bn)


# The 23 cells measured in session 41 (H100, bf16): (D, B, H, N) -> the faster tile
MEASURED = {(64, 32, 16, 512): "narrow", (64, 16, 16, 768): "table", (64, 16, 16, 1024): "narrow",
            (64, 8, 16, 1536): "table", (64, 8, 16, 2048): "table", (64, 4, 16, 3072): "table",
            (64, 4, 32, 4096): "table", (64, 2, 32, 6144): "table", (64, 1, 32, 8192): "table",
            (64, 2, 16, 2048): "narrow", (64, 1, 16, 1024): "narrow", (64, 1, 8, 512): "narrow",
            (96, 32, 16, 512): "narrow", (96, 16, 16, 768): "narrow", (96, 16, 16, 1024): "narrow",
            (96, 8, 16, 1536): "narrow", (96, 8, 16, 2048): "narrow", (96, 4, 16, 3072): "narrow",
            (96, 4, 32, 4096): "narrow", (96, 2, 32, 6144): "table", (96, 1, 32, 8192): "table",
            (96, 2, 16, 2048): "narrow", (96, 1, 16, 1024): "narrow"}


@pytest.mark.parametrize("cell", list(MEASURED))
@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
def test_the_model_picks_the_measured_faster_tile(cell, align):
    d, B, H, N = cell
    assert narrow(d, B, H, N, align=align) == (MEASURED[cell] == "narrow")


def test_head_dims_past_96_and_long_caches_keep_the_table():
    assert not narrow(128, 1, 8, 512) and not narrow(256, 1, 8, 256)  # D = 128's table tile is the narrow one
    # chunked prefill: 1024 rows against 8 K keys see ~8 K keys each bottom-right, where the diagonal weighs
    # little; top-left they see 1..1024, as a square call of 1024
    assert not narrow(64, 16, 16, 1024, 8192, "bottom_right")
    assert narrow(64, 16, 16, 1024, 8192, "top_left")
