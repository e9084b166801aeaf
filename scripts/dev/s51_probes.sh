#!/usr/bin/env bash
# Session 50's prepared experiments, one device call each:
#   fma:    fa2_ex2_fma_standing.patch: every 8th / 4th exponential of the standing max's tiles on the FMA pipe
#           (FFPA_DEV_WS = 1 / 2; 0 = all on the MUFU), bf16 FA-2 (look-ahead / P pair kernels) at D = 64 / 128 and
#           the FP8 kernel at D = 128 / 256, one build of both families; the standing-max tests of both with
#           variant 2; fa2_ws_variants.py and fp8_probe.py 0,1,2,0,1,2 (~5 min).
#   retune: fa2_narrow_retune.sh (table tile / narrow tile at D = 64 / 96) now that the standing max runs on the
#           long-key kernels of both tiles: D = 64 causal at B=8 N=2048 reads 0.76 of non-causal (~4 min).
# On the device: OUT=$OUT bash scripts/dev/s51_probes.sh [steps: fma retune]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
STEPS=${*:-fma}
if [[ " $STEPS " == *" fma "* ]]; then
  mkdir -p "$OUT/fma"
  (
    . scripts/dev/with_patch.sh scripts/dev/fa2_ex2_fma_standing.patch
    export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2,fp8 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=64,128,256 FFPA_DTYPES=bf16,e4m3 FFPA_EXPECT_EXTENSION=1
    t0=$(date +%s)
    python3 setup.py build_ext --inplace > "$OUT/fma/build.log" 2>&1 || { tail -30 "$OUT/fma/build.log"; exit 1; }
    echo "build $(( $(date +%s) - t0 )) s; ptxas spills: $(grep -c '[1-9][0-9]* bytes spill' "$OUT/fma/build.log")"
    (cd tests && FFPA_DEV_WS=2 PYTHONPATH=$PWD/.. timeout 120 python3 -m pytest -q -p no:cacheprovider test_fa2_gpu.py test_fa2_hopper_gpu.py test_fp8_gpu.py \
      -k "standing or float_limit or nan_key or rising" > "$OUT/fma/pytest.log" 2>&1
     echo "tests (variant 2): $(tail -1 "$OUT/fma/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/fma/pytest.log" | head)
    PYTHONPATH=$PWD DIMS="64 128" SHAPES="8x16x2048 1x32x8192 16x16x1024" \
      python3 scripts/dev/fa2_ws_variants.py 0,1,2,0,1,2 2>&1 | grep -v Warn | tee "$OUT/fma/fa2_ab.txt"
    PYTHONPATH=$PWD DIMS="128 256" VARIANTS=0,1,2,0,1,2 python3 scripts/dev/fp8_probe.py 2>&1 | grep -v Warn | tee "$OUT/fma/fp8_ab.txt"
  )
fi
if [[ " $STEPS " == *" retune "* ]]; then
  OUT=$OUT/retune bash scripts/dev/fa2_narrow_retune.sh
fi
