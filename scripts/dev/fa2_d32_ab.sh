#!/usr/bin/env bash
# Development probe (session 44): at D = 32, today's warp-specialised FA-2 kernel (two Q slots, look-ahead
# from 1024 keys) against one Q slot (FFPA_DEV_WS=1) and against no look-ahead (FFPA_DEV_WS=2), variants
# 0,1,2,0,1,2 beside cuDNN (scripts/dev/fa2_ws_variants.py); the two Q slots were measured at D = 64 / 96
# only (fa2_q_slots.sh), and session 42's D = 32 look-ahead A/B (fa2_look_ahead_d32.patch) predates the TMA
# store. Builds FA-2 bf16 D = 32, sm_90a; reverts the patch. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_d32_ab.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=32 FFPA_DTYPES=bf16 FFPA_EXPECT_EXTENSION=1
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
PYTHONPATH=$PWD DIMS=32 SHAPES="${SHAPES:-128x12x197 64x16x256 32x16x512 16x16x1024 16x16x1536 8x16x2048 1x32x8192}" \
  python3 scripts/dev/fa2_ws_variants.py 0,1,2,0,1,2 2>&1 | grep -v Warn | tee "$OUT/d32.txt"
