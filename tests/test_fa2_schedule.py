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
