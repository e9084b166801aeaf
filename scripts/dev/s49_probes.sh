#!/usr/bin/env bash
# Session 48's prepared experiments in one device call (about 6-8 minutes), on this branch (the P pair merged):
#   pair: fa2_pair_wide_ab.patch, the P pair (from 1024 keys) at D = 128 and, with the deferred P V wait, at
#         D = 160 / 192, against no pair anywhere (FFPA_DEV_WS=1): FA-2 tests at those head dims, the sanitizers,
#         fa2_ws_variants.py 0,1,0,1 beside cuDNN;
#   fp8:  fp8_defer_pair.patch, FP8 D = 64 with the deferred wait and two P buffers (FFPA_DEV_WS=1 = as now):
#         FP8 tests at D = 64, fp8_probe.py VARIANTS=0,1.
# On the device: OUT=$OUT bash scripts/dev/s49_probes.sh [steps: pair fp8]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
STEPS=${*:-pair fp8}
if [[ " $STEPS " == *" pair "* ]]; then
  echo "== fa2_pair_wide_ab (v0 = the pair, v1 = none)"
  OUT=$OUT/pair FFPA_HEAD_DIMS=128,160,192 DIMS="128 160 192" TEST_K="128 or 160 or 192" \
    SHAPES="8x16x2048 1x32x8192 16x16x1024 64x16x256" bash scripts/dev/fa2_patch_ab.sh fa2_pair_wide_ab.patch
fi
if [[ " $STEPS " == *" fp8 "* ]]; then
  echo "== fp8_defer_pair (v0 = deferred wait and two P buffers at D = 64, v1 = as now)"
  mkdir -p "$OUT/fp8"
  (
    . scripts/dev/with_patch.sh scripts/dev/fp8_defer_pair.patch
    export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2,fp8 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=64 FFPA_DTYPES=bf16,e4m3 FFPA_EXPECT_EXTENSION=1
    python3 setup.py build_ext --inplace > "$OUT/fp8/build.log" 2>&1 || { tail -30 "$OUT/fp8/build.log"; exit 1; }
    (cd tests && PYTHONPATH=$PWD/.. timeout 150 python3 -m pytest -q -p no:cacheprovider -x test_fp8_gpu.py -k 64 \
      > "$OUT/fp8/pytest.log" 2>&1; echo "fp8 tests: $(tail -1 "$OUT/fp8/pytest.log")")
    PYTHONPATH=$PWD timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 python3 scripts/sanitize_one.py fp8 \
      > "$OUT/fp8/racecheck.log" 2>&1; echo "racecheck: exit $?"
    PYTHONPATH=$PWD DIMS=64 VARIANTS=0,1,0,1 python3 scripts/dev/fp8_probe.py 2>&1 | grep -v Warn | tee "$OUT/fp8/ab.txt"
  )
fi
