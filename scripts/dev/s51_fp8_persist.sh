#!/usr/bin/env bash
# Session 51: the FP8 FA-2-style kernel on a persistent grid (launch/heuristics.h fp8_persistent_grid). As run, the
# launcher read FFPA_DEV_WS=1 as one block an item (the A/B's v1); that switch was removed when the grid landed, so the
# variants now time the same kernel (bring the switch back into fp8_persistent_grid to repeat the A/B).
# One call: build (fa2 + fp8, D = 64 / 128 / 256), the FP8 GPU tests, fp8_probe.py 0,1,0,1 (non-causal; causal calls keep
# one block an item), then the three sanitizers on sanitize_one.py's fp8 part. Env: PATCHES (dev patches applied first,
# in order, reverted after), CAUSAL (the probe's rows, default 0), SHAPES, DIMS, DIMS_BUILD.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
# shellcheck disable=SC2086
[ -n "${PATCHES:-}" ] && . scripts/dev/with_patch.sh $PATCHES
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2,fp8 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${DIMS_BUILD:-64,128,256} FFPA_DTYPES=bf16,e4m3 FFPA_EXPECT_EXTENSION=1
t0=$(date +%s)
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s; spill lines: $(grep -c '[1-9][0-9]* bytes spill' "$OUT/build.log")"
(cd tests && PYTHONPATH=$PWD/.. timeout 150 python3 -m pytest -q -p no:cacheprovider -x test_fp8_gpu.py test_fp8_vt_gpu.py > "$OUT/pytest.log" 2>&1
 echo "tests rc $?: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20)
echo "at $(( $(date +%s) - t0 )) s"
PYTHONPATH=$PWD DIMS="${DIMS:-64 128 256}" CAUSAL=${CAUSAL:-0} VARIANTS=${VARIANTS:-0,1,0,1} SHAPES="${SHAPES:-4x8x8448 1x32x8192}" \
  timeout 120 python3 scripts/dev/fp8_probe.py 2>&1 | grep -v Warn | tee "$OUT/fp8_ab.txt"
echo "at $(( $(date +%s) - t0 )) s"
for tool in racecheck synccheck memcheck; do
  (cd tests && PYTHONPATH=$PWD/.. timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 python3 ../scripts/sanitize_one.py fp8 \
     > "$OUT/san_$tool.log" 2>&1; echo "$tool rc $?: $(grep -c 'ERROR SUMMARY: 0' "$OUT/san_$tool.log") clean summaries, $(tail -1 "$OUT/san_$tool.log")")
done
echo "done at $(( $(date +%s) - t0 )) s"
