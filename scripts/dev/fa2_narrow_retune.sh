#!/usr/bin/env bash
# Development probe (prepared in session 43, not yet run): re-measure table tile against the narrow 128 x 128
# tile for calls without a mask at D = 64 and 96 (launch/heuristics.h fa2_narrow_tile, its pace constants
# kFa2NarrowPace64 / 96 fitted in session 41), now that O leaves by TMA on both D = 64 tiles and on D = 96's
# narrow tile only (session 43): the narrow tile likely wins more cells at D = 96. fa2_narrow_retune.patch adds
# FFPA_DEV_WS=1 (the table's tile) / 2 (the narrow one) in the launcher; fa2_ws_variants.py 1,2 over
# tests/test_fa2_schedule.py MEASURED's shapes (B x H x N, causal and not), beside cuDNN. Update MEASURED and
# the pace constants from its output. Writes to $OUT; reverts the patch.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_narrow_retune.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=64,96 FFPA_DTYPES=bf16 FFPA_EXPECT_EXTENSION=1
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
PYTHONPATH=$PWD DIMS="${DIMS:-64 96}" SHAPES="${SHAPES:-1x16x1024 1x32x8192 2x16x2048 4x16x3072 8x16x2048 16x16x768 16x16x1024 32x12x1370 32x16x512 64x16x256 64x16x577 128x12x197 2x32x6144 4x32x4096 8x16x1536}" \
  python3 scripts/dev/fa2_ws_variants.py 1,2 2>&1 | grep -v Warn | tee "$OUT/retune.txt"
