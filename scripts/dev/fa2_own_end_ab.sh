#!/usr/bin/env bash
# Development probe (session 45): each consumer warpgroup's own end (Fa2FwdWs own_end / drain: causal rows
# stop at their own last key tile, rows past len_q compute nothing) against the item's end for all
# (fa2_own_end_ab.patch: FFPA_DEV_WS=1 picks the kernel without it; =2 turns the split tail off, for that
# A/B on the check's host). fa2_patch_ab.sh with this probe's defaults (FA-2 bf16 at D = 64 / 96 / 128 / 256,
# the tests of the kernels with the change, racecheck / synccheck), then the split tail's A/B on the same build.
# (The patch applies to 1378879, the code of its A/B; the split twin (Fa2FwdWs kSplit) came after.)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
OUT=$OUT FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-64,96,128,256} FFPA_DTYPES=${FFPA_DTYPES:-bf16} TEST_S=${TEST_S:-170} \
  TEST_K="${TEST_K:-every_head_dim or odd_lengths or more_items or split or causal_walk or look_ahead or tma_store or masks_odd or rising}" \
  TOOLS="${TOOLS:-racecheck synccheck}" DIMS="${DIMS:-64 96 128 256}" SHAPES="${SHAPES:-8x16x2048 16x16x1024 4x16x3000 1x32x8192}" \
  bash scripts/dev/fa2_patch_ab.sh fa2_own_end_ab.patch || exit 1
# (the patch is reverted by now; the extension built with it stays in place)
[ -n "${SPLIT_SHAPES:-1x32x8192 1x16x16384}" ] && PYTHONPATH=$PWD DIMS="${SPLIT_DIMS:-64 128 256}" SHAPES="${SPLIT_SHAPES:-1x32x8192 1x16x16384}" \
  python3 scripts/dev/fa2_ws_variants.py 0,2,0,2 2>&1 | grep -v Warn | tee "$OUT/ab_split.txt"
