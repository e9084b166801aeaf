#!/usr/bin/env bash
# Next step of #15 (session 20): the warp-specialised FA-2 kernel with its work counter
# (scripts/dev/fa2_ws_work_counter.patch) and, on top, the exp2 offload A/B
# (scripts/dev/fa2_exp2_offload.patch, FFPA_DEV_WS=0..4). One device call: applies both, builds an
# FA-2-only sm_90a extension (D = 64, 128, 256; bf16 and fp16), runs the FA-2 GPU tests, racecheck
# and synccheck on the FA-2 part of scripts/sanitize_one.py, then fa2_ws_variants.py over the exp2
# variants. Reverts both patches after (land the work counter with `git apply` and a full check).
# On the device: OUT=$OUT bash scripts/dev/work_counter_ab.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
git apply scripts/dev/fa2_ws_work_counter.patch || exit 1
git apply scripts/dev/fa2_exp2_offload.patch || { git apply -R scripts/dev/fa2_ws_work_counter.patch; exit 1; }
trap 'git apply -R scripts/dev/fa2_exp2_offload.patch; git apply -R scripts/dev/fa2_ws_work_counter.patch' EXIT
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_HEAD_DIMS=64,128,256 FFPA_DTYPES=bf16,fp16 FFPA_EXPECT_EXTENSION=1 PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -v . > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head; exit 1; }
echo "build ok in $(( $(date +%s) - t0 )) s; spills: $(grep -cE '[1-9][0-9]* bytes spill' "$OUT/build.log")"
(cd tests && timeout 200 python3 -m pytest -q -p no:cacheprovider test_fa2_gpu.py > "$OUT/pytest.log" 2>&1; echo "tests rc $?: $(tail -1 "$OUT/pytest.log")")
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head
for tool in racecheck synccheck; do
  (cd tests && timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 python3 ../scripts/sanitize_one.py fa2 > "$OUT/$tool.log" 2>&1; echo "$tool rc $?")
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$OUT/$tool.log" | tail -2
done
echo "t=$(( $(date +%s) - t0 ))"
SHAPES="8x16x2048 1x32x8192 16x16x1024" DIMS="64 128 256" timeout 200 python3 scripts/dev/fa2_ws_variants.py 0,1,2,3,4 2>&1 | tee "$OUT/exp2_ab.log"
echo "t=$(( $(date +%s) - t0 ))"
