#!/usr/bin/env bash
# Development probe (session 45): each consumer warpgroup's own end (Fa2FwdWs own_end / drain: causal rows
# stop at their own last key tile, rows past len_q compute nothing) against the item's end for all
# (fa2_own_end_ab.patch: FFPA_DEV_WS=1 picks the kernel without it; =2 turns the split tail off, for that
# A/B on the check's host). First the FA-2 GPU tests of the kernels with the change (causal, odd lengths,
# masks, look-ahead, split) and racecheck / synccheck of sanitize_one.py's FA-2 part. Builds FA-2 bf16 at
# D = 64 / 96 / 128 / 256 (sm_90a). Reverts the patch. Writes to $OUT. (The patch applies to 1378879, the code
# of its A/B; the split twin (Fa2FwdWs kSplit) came after.)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_own_end_ab.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-64,96,128,256} FFPA_DTYPES=${FFPA_DTYPES:-bf16} FFPA_EXPECT_EXTENSION=1
t0=$(date +%s)
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s; ptxas spills: $(grep -c '[1-9][0-9]* bytes spill' "$OUT/build.log")"
(cd tests && PYTHONPATH=$PWD/.. timeout ${TEST_S:-170} python3 -m pytest -q -p no:cacheprovider -x test_fa2_gpu.py \
  -k "${TEST_K:-every_head_dim or odd_lengths or more_items or split or causal_walk or look_ahead or tma_store or masks_odd or rising}" > "$OUT/pytest.log" 2>&1
 echo "tests: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head)
for tool in ${TOOLS:-racecheck synccheck}; do
  PYTHONPATH=$PWD timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 python3 scripts/sanitize_one.py fa2 > "$OUT/$tool.log" 2>&1
  echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1)"
done
PYTHONPATH=$PWD DIMS="${DIMS:-64 96 128 256}" SHAPES="${SHAPES:-8x16x2048 16x16x1024 4x16x3000 1x32x8192}" \
  python3 scripts/dev/fa2_ws_variants.py ${VARIANTS:-0,1,0,1} 2>&1 | grep -v Warn | tee "$OUT/ab.txt"
[ -n "${SPLIT_SHAPES:-1x32x8192 1x16x16384}" ] && PYTHONPATH=$PWD DIMS="${SPLIT_DIMS:-64 128 256}" SHAPES="${SPLIT_SHAPES:-1x32x8192 1x16x16384}" \
  python3 scripts/dev/fa2_ws_variants.py 0,2,0,2 2>&1 | grep -v Warn | tee "$OUT/ab_split.txt"
