#!/usr/bin/env bash
# Development probe (prepared in session 44 on branch split-tail): the landed split tail against no split
# (fa2_split_tail_ab.patch: FFPA_DEV_WS=1 turns launch/heuristics.h fa2_split_tail's plan off), variants
# 0,1,0,1 beside cuDNN, non-causal and causal (causal never splits: an A/A), at the rule's edges and the
# bench's shapes; before that the FA-2 GPU tests of the split (test_fa2_split_tail, the schedule's CPU
# tests) and memcheck / racecheck / synccheck of sanitize_one.py's FA-2 part. Builds FA-2 bf16 + fp16 at
# D = 64 / 128 / 256 (sm_90a). Reverts the patch. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_split_tail_ab.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-64,128,256} FFPA_DTYPES=${FFPA_DTYPES:-fp16,bf16} FFPA_EXPECT_EXTENSION=1
t0=$(date +%s)
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s; ptxas spills: $(grep -c '[1-9][0-9]* bytes spill' "$OUT/build.log")"
(cd tests && PYTHONPATH=$PWD/.. timeout ${TEST_S:-150} python3 -m pytest -q -p no:cacheprovider -x test_fa2_schedule.py test_fa2_gpu.py test_fa2_hopper_gpu.py \
  -k "split or more_items or look_ahead or tma_store" > "$OUT/pytest.log" 2>&1
 echo "tests: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head)
for tool in memcheck racecheck synccheck; do
  PYTHONPATH=$PWD timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 python3 scripts/sanitize_one.py fa2 > "$OUT/$tool.log" 2>&1
  echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1)"
done
PYTHONPATH=$PWD DIMS="${DIMS:-64 128 256}" SHAPES="${SHAPES:-1x32x8192 4x32x4096 8x16x2048 1x16x16384}" \
  python3 scripts/dev/fa2_ws_variants.py 0,1,0,1 2>&1 | grep -v Warn | tee "$OUT/ab.txt"
