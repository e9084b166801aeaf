#!/usr/bin/env bash
# Session 51: the causal walk's tail order (kernels/fa2_ws_schedule.cuh Walk::t). Since session 38 the tail's rank r
# gave item()'s t % m_blocks = m_blocks - 1 - r, i.e. query block r: shortest first, where its comment (and session 38's
# commit) meant longest first. fa2_tail_order.patch (applied here for the run, reverted after) moves the walk's order
# into kernels/fa2_walk_order.h (host-visible: _C.fa2_walk_items, tests/test_fa2_schedule.py checks it) with
# t % m_blocks = r (query block m_blocks - 1 - r, longest first); /tmp/ab_old gets the old order back by sed. Prepared in session 51 (no device
# time left), not yet run; if the new order wins, land the patch and run the full check. FA-2 only, D = 64 (the tail
# is active at its 192-row items: B=8 H=16 N=2048 24 of 128 heads, B=1 H=32 N=8192 7 of 32), both trees built side by
# side, then fa2_ws_variants.py on each in turn twice (causal rows are the A/B; non-causal rows do not walk a tail).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_tail_order.patch
export FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${DIMS_BUILD:-64} FFPA_DTYPES=bf16 FFPA_EXPECT_EXTENSION=1 MAX_JOBS=8
rm -rf /tmp/ab_old && mkdir -p /tmp/ab_old && cp -r csrc ffpa_attn tools setup.py pyproject.toml /tmp/ab_old/ && rm -f /tmp/ab_old/ffpa_attn/_C*.so
sed -i 's|      return (bh - tail + (u - r \* tail)) \* m_blocks + r;|      return (bh - tail + (u - r * tail)) * m_blocks + m_blocks - 1 - r;|' \
  /tmp/ab_old/csrc/include/ffpa/kernels/fa2_walk_order.h
echo "old order lines in /tmp/ab_old: $(grep -c 'm_blocks + m_blocks - 1 - r;' /tmp/ab_old/csrc/include/ffpa/kernels/fa2_walk_order.h) (want 1)"
t0=$(date +%s)
(cd /tmp/ab_old && python3 setup.py build_ext --inplace > "$OUT/build_old.log" 2>&1 || echo "old build failed") &
python3 setup.py build_ext --inplace > "$OUT/build_new.log" 2>&1 || echo "new build failed"
wait
echo "builds $(( $(date +%s) - t0 )) s"
for round in 1 2; do
  for tree in new old; do
    dir=$PWD; [ $tree = old ] && dir=/tmp/ab_old
    echo "== round $round $tree" | tee -a "$OUT/tail_order.txt"
    PYTHONPATH=$dir DIMS="${DIMS:-64}" SHAPES="${SHAPES:-8x16x2048 1x32x8192}" python3 scripts/dev/fa2_ws_variants.py 0 2>&1 \
      | grep "causal=1" | tee -a "$OUT/tail_order.txt"
  done
done
echo "done at $(( $(date +%s) - t0 )) s"
