#!/usr/bin/env bash
# Session 49's prepared experiments for branch s49-no-max, one device call each (~5 min):
#   fa2: the standing max (attn/standing_max.cuh) in the long-key FA-2 kernels against the tile max everywhere
#        (fa2_standing_max_ab.patch, FFPA_DEV_WS=1 = off): build (fa2 at D = 64 / 96 / 128 / 256, bf16 and fp16), the
#        FA-2 GPU tests at those dims (with the standing max's own: test_fa2_scores_far_above_the_standing_max,
#        test_fa2_one_key_near_the_float_limit, test_fa2_nan_key_propagates), the three sanitizers,
#        fa2_ws_variants.py 0,1,0,1 beside cuDNN;
#   fp8: the FP8 kernel with e4m3's policy (fp8_standing_max.patch, FFPA_DEV_WS=1 = on; P offset 4, bound 448):
#        build (fa2 + fp8 at D = 64 / 128 / 256), the FP8 GPU tests with it on, racecheck, fp8_probe.py 0,1,0,1
#        (TFLOPS and relative RMSE per variant: the offset's accuracy cost is part of the question).
# On the device: OUT=$OUT bash scripts/dev/s50_probes.sh [steps: fa2 fp8]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
STEPS=${*:-fa2}
if [[ " $STEPS " == *" fa2 "* ]]; then
  OUT=$OUT/fa2 FFPA_HEAD_DIMS=64,96,128,256 DIMS="128 64 96 256" TEST_K="64 or 96 or 128 or 256" TEST_S=200 \
    SHAPES="8x16x2048 1x32x8192 16x16x1024 32x16x512 64x16x256" bash scripts/dev/fa2_patch_ab.sh fa2_standing_max_ab.patch
fi
if [[ " $STEPS " == *" fp8 "* ]]; then
  mkdir -p "$OUT/fp8"
  (
    . scripts/dev/with_patch.sh scripts/dev/fp8_standing_max.patch
    export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2,fp8 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=64,128,256 FFPA_DTYPES=bf16,e4m3 FFPA_EXPECT_EXTENSION=1
    python3 setup.py build_ext --inplace > "$OUT/fp8/build.log" 2>&1 || { tail -30 "$OUT/fp8/build.log"; exit 1; }
    (cd tests && FFPA_DEV_WS=1 PYTHONPATH=$PWD/.. timeout 200 python3 -m pytest -q -p no:cacheprovider test_fp8_gpu.py \
      > "$OUT/fp8/pytest.log" 2>&1; echo "fp8 tests (standing max): $(tail -1 "$OUT/fp8/pytest.log")"; grep -E "^FAILED" "$OUT/fp8/pytest.log" | head)
    FFPA_DEV_WS=1 PYTHONPATH=$PWD timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 python3 scripts/sanitize_one.py fp8 \
      > "$OUT/fp8/racecheck.log" 2>&1; echo "racecheck: exit $?"
    PYTHONPATH=$PWD DIMS="64 128 256" VARIANTS=0,1,0,1 python3 scripts/dev/fp8_probe.py 2>&1 | grep -v Warn | tee "$OUT/fp8/ab.txt"
  )
fi
