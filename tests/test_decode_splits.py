"""The split heuristic of the decode family (csrc/launch/heuristics.h, choose_decode_splits), on
explicit sizes through ffpa_attn._C.decode_splits: no GPU needed."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.requires_extension

SMS, PER_SM = 132, 3
SLOTS = SMS * PER_SM


def splits(base, tiles, per_sm=PER_SM, sms=SMS):
    import ffpa_attn._C as C

    return C.decode_splits(base, tiles, per_sm, sms)


@pytest.mark.parametrize("base", [1, 2, 8, 16, 32, 64])
def test_small_batches_with_long_contexts_fill_one_wave(base):
    s = splits(base, 2048)
    # at most 256 splits; a count must beat fewer splits by 2%, so the wave may miss a few slots
    assert min(0.8 * SLOTS, 0.98 * base * 256) <= base * s <= SLOTS, (base, s)


@pytest.mark.parametrize("base", [2 * SLOTS, 5 * SLOTS])
def test_a_batch_that_fills_the_gpu_alone_is_not_split(base):
    assert splits(base, 128) == 1


def test_a_mostly_empty_last_wave_is_avoided():
    # 512 blocks on 396 slots: 1.29 waves; a few splits make the last wave (nearly) full instead.
    s = splits(512, 128)
    assert s > 1 and (512 * s) % SLOTS >= 0.8 * SLOTS or (512 * s) % SLOTS == 0, s


@pytest.mark.parametrize("base,tiles", [(1, 1), (1, 2), (8, 2), (1, 5), (3, 300), (1, 100000)])
def test_bounds(base, tiles):
    s = splits(base, tiles)
    assert 1 <= s <= max(1, min(tiles // 2, 256)), (base, tiles, s)
    assert splits(0, tiles) == 1


@pytest.mark.parametrize("base,tiles", [(128, 17), (256, 32), (192, 24), (SLOTS, 16)])
def test_short_ranges_with_a_block_for_every_sm_are_not_split(base, tiles):
    # Measured (docs/tuning_decode.md, session 22): one split is faster there; the merge costs, more
    # blocks move no more bytes.
    assert splits(base, tiles) == 1, (base, tiles)


@pytest.mark.parametrize("base,tiles", [(64, 17), (128, 64), (SLOTS + 1, 16)])
def test_the_short_range_rule_stays_in_its_window(base, tiles):
    # too few blocks for the SMs, a longer range, or more than one wave: the model decides (and splits)
    assert splits(base, tiles) > 1, (base, tiles)
    assert C_splits(128, 17, varlen=True) > 1  # per-sequence lengths keep their tail term
    assert C_splits(128, 17, masked=True) > 1  # and masked calls (latency-bound by their mask reads) split


def test_device_sizes_matter():
    # Half the SMs: half the splits for the same work (one wave either way).
    assert splits(8, 4096, 3, 66) < splits(8, 4096, 3, 132)


@pytest.mark.parametrize("base,tiles", [(64, 512), (256, 128), (128, 128)])
def test_per_sequence_lengths_take_more_shorter_blocks(base, tiles):
    # cache_seqlens (batch > 1): a short sequence's blocks end early, so the count leaves more than one
    # wave for the scheduler to fill the idle slots (B=8 S=32768 32/8 D=128: 18 splits, 2.9 waves,
    # against one wave of 6 without lengths); never fewer splits than the contiguous cache's.
    plain, varlen = splits(base, tiles), C_splits(base, tiles, varlen=True)
    assert varlen > plain and base * varlen > 1.5 * SLOTS, (plain, varlen)


def test_per_sequence_lengths_leave_a_full_batch_alone():
    # A batch that fills the GPU several times over: the tail is a small share already.
    assert C_splits(5 * SLOTS, 128, varlen=True) == 1


@pytest.mark.parametrize("base,tiles,per_sm", [(512, 128, 2), (SLOTS, 128, PER_SM), (SLOTS + 4, 512, PER_SM)])
def test_per_sequence_lengths_past_one_wave_split_as_the_contiguous_cache(base, tiles, per_sm):
    # One split already fills a wave: the blocks take their sequences longest first, which fills the
    # tail (B=64 S=8192 32/8 D = 64 / 128 / 256 on an H200: one split 2-6% faster than the term's two).
    assert C_splits(base, tiles, per_sm, varlen=True) == C_splits(base, tiles, per_sm), (base, tiles)


def C_splits(base, tiles, per_sm=PER_SM, sms=SMS, varlen=False, masked=False):
    import ffpa_attn._C as C

    return C.decode_splits(base, tiles, per_sm, sms, varlen, masked)


def fused(rows, dv, splits, threads=128, units=1):
    import ffpa_attn._C as C

    return C.decode_fused_merge(rows, dv, splits, threads, units)


def test_one_block_per_sm_where_the_kernel_streams_as_fast_with_one():
    """csrc/launch/heuristics.h decode_one_per_sm_splits: the D = 64 / 128 split kernel (two blocks an SM
    resident) takes one block per SM once that is at least its bound of splits (4 at D = 64, 16 at 128),
    90% of the SMs have one, and there are no per-sequence lengths, mask or pages of a size other than a power of
    two; else the model's count."""
    import ffpa_attn._C as C

    def auto(base, tiles, varlen=False, masked=False, bound=4, per_sm=2, sms=132):
        return C.decode_splits(base, tiles, per_sm, sms, varlen, masked, bound)

    assert splits(8, 1024, per_sm=2) == 33 and auto(8, 1024) == 16   # D = 64 B=1 S=131072 32/8: 128 blocks
    assert auto(16, 512) == 8 and auto(32, 256) == 4                  # B=2 / B=4: 128 blocks
    assert auto(8, 2048, bound=16) == 16 and splits(8, 2048, per_sm=2) == 33  # D = 128 B=1
    assert auto(16, 1024, bound=16) == splits(16, 1024, per_sm=2)    # D = 128 B=2: 8 is under the bound
    assert auto(64, 256) == splits(64, 256, per_sm=2)                 # 2 splits: under the bound
    assert auto(27, 1024) == splits(27, 1024, per_sm=2)               # 4 x 27 = 108 blocks: under 90% of 132
    assert auto(16, 512, varlen=True) == C.decode_splits(16, 512, 2, 132, True, False)  # lengths: the model
    assert auto(8, 1024, masked=True) == C.decode_splits(8, 1024, 2, 132, False, True)  # a mask: the model
    assert C.decode_splits(8, 1024, 2, 132, False, False, 4, True) == 33  # pages of 48 keys: the model
    assert auto(8, 1024, bound=0) == 33                                # off
    assert auto(8, 1024, per_sm=1) == splits(8, 1024, per_sm=1)       # one block an SM is the model's slots already
    assert auto(8, 20) == splits(8, 20, per_sm=2)                      # 16 splits would pass half the key tiles


def test_one_block_per_sm_only_where_the_sm_share_of_dram_bandwidth_is_small():
    """csrc/launch/heuristics.h decode_one_per_sm_device: the rule above holds on devices whose peak DRAM bandwidth
    per SM is at most 30 GB/s (an H100 SXM, 3352 GB/s over 132 SMs); an H200 (4814 GB/s, 132 SMs) runs the model's
    count, two blocks an SM; a bandwidth that cannot be read (0) keeps the rule."""
    import ffpa_attn._C as C

    assert C.decode_one_per_sm_device(3352.0, 132)       # H100 SXM: 25.4 GB/s an SM
    assert not C.decode_one_per_sm_device(4814.0, 132)   # H200: 36.5
    assert C.decode_one_per_sm_device(3960.0, 132)       # 30.0 exactly: the bound is inclusive
    assert not C.decode_one_per_sm_device(3961.0, 132)
    assert C.decode_one_per_sm_device(2039.0, 108)       # A100 80GB: 18.9
    assert C.decode_one_per_sm_device(0.0, 132) and C.decode_one_per_sm_device(4800.0, 0)  # unknown: the rule
    assert C.dram_peak_gbps() >= 0.0


def test_the_merge_is_fused_where_a_block_merges_in_a_few_rounds():
    """csrc/launch/heuristics.h decode_fused_merge: rows x Dv / 4 units over the block's threads (each
    `units` at once: 1 in the mma.sync kernel, 2 in the narrow one), the splits 8 (kFusedMergeBatch) a
    round, at most kFusedMergeMaxRounds (5) rounds a thread."""
    assert not fused(4, 128, 1)                     # one split: nothing to merge
    assert fused(4, 128, 6) and fused(1, 128, 3)    # D = 128 GQA, the static cache's one-row step
    assert fused(4, 128, 40) and not fused(4, 128, 41)  # one unit a thread, 5 vs 6 rounds of splits
    assert fused(4, 128, 33, threads=256)           # B=1 long context on D = 128's 8-warp blocks: 5 rounds
    assert not fused(4, 128, 254, threads=256)      # one KV head's 254 splits: 32 rounds
    assert fused(16, 64, 8) and not fused(16, 128, 9)   # 2 units a thread x 1 round, 4 x 2
    assert not fused(16, 512, 8)                    # MLA 16/1: 16 units a thread
    assert fused(16, 512, 8, threads=1024)          # ... over more threads: 2
    assert fused(4, 512, 8, units=2) and fused(4, 512, 8) and not fused(4, 512, 16)  # 2, 4 and 8 rounds
    assert not fused(16, 512, 8, units=2)           # MLA 16/1 on the narrow kernel: 8 passes


def test_the_narrow_merge_is_spread_where_its_grid_is_one_wave():
    """csrc/launch/heuristics.h decode_spread_merge: the narrow MLA kernel's split blocks merge slices of
    their row block (a cooperative launch: every block resident, one per SM) with more than one split and
    at most one block per SM, in auto at most 16 splits (each block reads every split's LSEs of its rows);
    'fused' and 'kernel' turn it off, 'spread' drops the split bound."""
    import ffpa_attn._C as C
    from _reference import process_mode

    sp = C.decode_spread_merge
    assert sp(8, 128, 132) and sp(2, 132, 132) and sp(16, 128, 132)  # MLA 16/1 B=16: 8 splits, 128 blocks
    assert not sp(17, 68, 132) and not sp(132, 132, 132)  # B=1 S=65536 16/1: 132 splits
    assert not sp(1, 16, 132)  # one split: nothing to merge
    assert not sp(8, 133, 132)  # past one wave: the blocks of a row block could wait on one not resident
    for mode, want in (("fused", False), ("kernel", False), ("spread", True), ("auto", True)):
        with process_mode("decode_merge", mode):
            assert sp(8, 128, 132) == want and sp(33, 132, 132) == (mode == "spread"), mode


def test_longest_first_where_lengths_vary_past_one_wave():
    """Blocks take their sequences longest first (csrc/launch/heuristics.h decode_longest_first) only with
    per-sequence lengths, 2..256 sequences and more blocks than slots; 'longest' drops the wave
    condition, 'launch' turns it off (ffpa_attn._C.set_decode_order)."""
    import ffpa_attn._C as C
    from _reference import process_mode

    lf = C.decode_longest_first
    assert lf(True, 128, 256, 132)
    assert not lf(True, 128, 132, 132)  # one wave: every block starts at once
    assert not lf(False, 128, 256, 132)  # no per-sequence lengths
    assert not lf(True, 1, 256, 132)
    assert lf(True, 256, 1000, 132) and not lf(True, 257, 1000, 132)  # each block ranks the lengths itself
    with process_mode("decode_order", "longest"):
        assert lf(True, 9, 18, 132) and not lf(True, 257, 1000, 132) and not lf(False, 9, 18, 132)
    with process_mode("decode_order", "launch"):
        assert not lf(True, 128, 256, 132)
    assert C.get_decode_order() == "auto"
    with pytest.raises(ValueError, match="set_decode_order: `mode` must be 'auto', 'launch', 'longest' or 'balanced'"):
        C.set_decode_order("shortest")
    assert C.get_decode_order() == "auto"


def test_balanced_splits_where_lengths_vary_within_one_wave():
    """csrc/launch/heuristics.h decode_balanced_splits (the narrow MLA kernel under the spread merge): per-
    sequence lengths, 2..256 sequences, at least 4 splits a sequence in auto; 'balanced' drops the split
    bound, 'launch' and 'longest' turn it off."""
    import ffpa_attn._C as C
    from _reference import process_mode

    bal = C.decode_balanced_splits
    assert bal(True, 16, 8) and bal(True, 256, 4)  # MLA 16/1 B=16: 8 splits
    assert not bal(True, 16, 3) and not bal(True, 16, 1)  # few splits: whole-block shares round badly
    assert not bal(False, 16, 8) and not bal(True, 1, 8) and not bal(True, 257, 8)
    with process_mode("decode_order", "balanced"):
        assert bal(True, 16, 2) and not bal(True, 16, 1) and not bal(False, 16, 8)
    for order in ("launch", "longest"):
        with process_mode("decode_order", order):
            assert not bal(True, 16, 8)


@pytest.mark.requires_cuda
def test_the_device_reports_its_peak_dram_bandwidth():
    """dram_peak_gbps reads the current device's memory clock and bus width (the decode rule above takes it):
    a GPU reports a figure in the range of real ones (an H200 4814 GB/s, an H100 SXM about 3350)."""
    import ffpa_attn._C as C

    assert 300.0 < C.dram_peak_gbps() < 20000.0
