#!/usr/bin/env bash
# Session 55's device call 1 (about 8 minutes):
#   cut:   fa2_mask_cut.patch A/B (v0 = mask_cut, v1 = mask_tile) at D = 64 / 128 / 256: builds, the causal and
#          short-keys FA-2 tests, racecheck / synccheck, fa2_ws_variants.py beside cuDNN;
#   paged: the decode split count of a paged batch of one on this GPU (the one-block-per-SM rule against the
#          model's count and others), contiguous beside it, D = 64 and 128 (decode_splits_ab.py).
# On the device: OUT=$OUT bash scripts/dev/s55_probes.sh [steps: cut paged]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
STEPS=${*:-cut paged}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
if [[ " $STEPS " == *" cut "* ]]; then
  echo "== fa2_mask_cut (v0 = mask_cut, v1 = mask_tile)"
  OUT=$OUT/cut FFPA_HEAD_DIMS=32,64,96,128,256 DIMS="64 128 256" TOOLS="racecheck synccheck" \
    TEST_K="bottom_right or top_left or short_keys or causal" TEST_S=200 \
    SHAPES="128x12x197 64x16x256 8x16x2048 16x16x1024 1x32x8192" bash scripts/dev/fa2_patch_ab.sh fa2_mask_cut.patch
fi
if [[ " $STEPS " == *" paged "* ]]; then
  echo "== decode splits, paged 64 / contiguous, B=1 S=131072 32/8"
  mkdir -p "$OUT/paged"
  export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=decode FFPA_ACCS=fp32 FFPA_HEAD_DIMS=64,128 FFPA_DTYPES=bf16 FFPA_EXPECT_EXTENSION=1
  t0=$(date +%s)
  python3 setup.py build_ext --inplace > "$OUT/paged/build.log" 2>&1 || { tail -30 "$OUT/paged/build.log"; exit 1; }
  echo "decode build $(( $(date +%s) - t0 )) s"
  for d in 128 64; do
    for pg in 64 0; do
      PYTHONPATH=$PWD PAGED=$pg SPLITS="0 8 16 24 33 48" python3 scripts/dev/decode_splits_ab.py 1x131072x32x8x$d \
        2>&1 | grep -v Warn | tee -a "$OUT/paged/splits.txt"
    done
    PYTHONPATH=$PWD PAGED=64 VARLEN=1 SPLITS="0 16 33" python3 scripts/dev/decode_splits_ab.py 1x131072x32x8x$d \
      2>&1 | grep -v Warn | tee -a "$OUT/paged/splits.txt"
  done
  PYTHONPATH=$PWD PAGED=64 SPLITS="0 2 4 8" python3 scripts/dev/decode_splits_ab.py 8x32768x32x8x128 4x32768x32x8x64 \
    2>&1 | grep -v Warn | tee -a "$OUT/paged/splits.txt"
fi
