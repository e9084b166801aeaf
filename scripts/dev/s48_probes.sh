#!/usr/bin/env bash
# The experiments session 47 prepared, in one device call (each its own FA-2-only build; about 3 minutes). Run in
# session 48 (docs/hopper_profile.md): the finish under the last P V landed; the look-ahead at D = 128 lost again.
#   1. xu_probe.cu: does cvt.rn.bf16x2.f32 share the MUFU pipe with ex2 on one SMSP?
#   2. fa2_ahead_d128.patch: the look-ahead twin at D = 97..128 (FFPA_DEV_WS=1) against main's kernel;
#   3. fa2_finish_early_ab.patch: 1/l and LSE under the last P V, landed in session 48 (FFPA_DEV_WS=1 = after it);
# each A/B with the D = 128 FA-2 GPU tests (-k 128) and the three sanitizers, then fa2_ws_variants.py 0,1,0,1.
# fastdiv_loop.patch (D = 64's code growth) has no FFPA_DEV_WS switch: measure it by two builds if wanted.
# On the device: OUT=$OUT bash scripts/dev/s48_probes.sh [steps: xu ahead finish]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
STEPS=${*:-xu ahead finish}
if [[ " $STEPS " == *" xu "* ]]; then
  nvcc -O3 -arch=sm_90a -o "$OUT/xu" scripts/dev/xu_probe.cu && "$OUT/xu" | tee "$OUT/xu.txt"; rm -f "$OUT/xu"
fi
export FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-128} DIMS=${DIMS:-128} TEST_K=${TEST_K:-128}
if [[ " $STEPS " == *" ahead "* ]]; then
  echo "== fa2_ahead_d128 (v1 = look-ahead at D = 128)"
  OUT=$OUT/ahead bash scripts/dev/fa2_patch_ab.sh fa2_ahead_d128.patch
fi
if [[ " $STEPS " == *" finish "* ]]; then
  echo "== fa2_finish_early (v0 = under the last P V, v1 = after it)"
  OUT=$OUT/finish bash scripts/dev/fa2_patch_ab.sh fa2_finish_early_ab.patch
fi
