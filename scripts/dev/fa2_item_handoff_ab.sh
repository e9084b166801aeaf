#!/usr/bin/env bash
# Session 31 (#15): an FA-2 kernel change against an older tree in one device call (used for the item hand-off
# through Q's full barrier, docs/hopper_profile.md): the racecheck probe of mbarrier hand-off forms, both builds
# (this tree and ab_old.tar: fa2 + decode, FFPA_HEAD_DIMS), racecheck of the FA-2 part on this tree, the FA-2 GPU
# tests, then the A/B cells of ffpa_tree_ab.sh (CELLS). Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
nvcc -arch=sm_90a -lineinfo -o /tmp/mbprobe scripts/dev/racecheck_mbarrier_probe.cu && for m in 1 2 3 4; do
  echo "== probe MODE=$m: $(MODE=$m compute-sanitizer --tool racecheck /tmp/mbprobe 2>&1 | grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|hazard' | head -3 | tr '\n' ' ')"
done
export FFPA_FAMILIES=${FFPA_FAMILIES:-fa2,decode} FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-64,128,320}
BUILD_ONLY=1 bash scripts/dev/ffpa_tree_ab.sh > "$OUT/ab_build.log" 2>&1 || true
tail -3 "$OUT/ab_build.log"
(cd tests && PYTHONPATH=$PWD/.. FFPA_SANITIZE_NO_CLUSTER=1 timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 \
  python3 ../scripts/sanitize_one.py fa2 > "$OUT/racecheck.log" 2>&1; echo "racecheck fa2 rc $?: $(grep -c 'ERROR SUMMARY: 0' "$OUT/racecheck.log") clean summaries, $(grep -ci hazard "$OUT/racecheck.log") hazard lines")
(cd tests && PYTHONPATH=$PWD/.. timeout ${TEST_TIMEOUT:-150} python3 -m pytest -q -p no:cacheprovider test_fa2_gpu.py test_fa2_hopper_gpu.py > "$OUT/pytest.log" 2>&1; echo "tests rc $?: $(tail -1 "$OUT/pytest.log")")
SKIP_BUILD=1 SKIP_TESTS=1 CELLS="${CELLS:---B 8 --H 16 --N 2048 --D 64 128 --causal-both --kernels fa2;--B 1 --H 32 --N 8192 --D 128 --causal-both --kernels fa2}" \
  timeout ${AB_TIMEOUT:-240} bash scripts/dev/ffpa_tree_ab.sh
