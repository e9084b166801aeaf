#!/usr/bin/env bash
# Development probe (session 44): two Q slots at D = 128 (fa2_q_slots_d128.patch: FFPA_DEV_WS=1 runs
# Fa2FwdWs kQSlots = 2 on the 128 x 128 table tile, its K/V ring 3 -> 2 stages) against today's one slot,
# variants 0,1,0,1 beside cuDNN (scripts/dev/fa2_ws_variants.py). Why: at B=8 H=16 N=2048 (16 key tiles an
# item) ours / cuDNN is 0.99 where B=1 N=8192 (64 tiles, as many items) reads 1.02: a per-item cost; two Q
# slots took 3-5% off short items at D = 64 (session 44). Builds FA-2 bf16 D = 128, sm_90a; reverts the
# patch. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_q_slots_d128.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=128 FFPA_DTYPES=bf16 FFPA_EXPECT_EXTENSION=1
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
PYTHONPATH=$PWD DIMS=128 SHAPES="${SHAPES:-128x12x197 64x16x256 32x16x512 16x16x1024 8x16x2048 1x32x8192}" \
  python3 scripts/dev/fa2_ws_variants.py 0,1,0,1 2>&1 | grep -v Warn | tee "$OUT/d128.txt"
