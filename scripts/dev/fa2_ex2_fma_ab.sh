#!/usr/bin/env bash
# Session 49: a share of the softmax's exponentials on the FMA pipe (ptx::ex2_fma) instead of the MUFU.
# fa2_ex2_fma.patch (against a39b521): FFPA_DEV_WS = 0: all MUFU; 1 / 2 / 3: every 8th / 4th / 3rd element by
# ex2_fma (the non-split kernels; the split twin, which runs B=1 H=32 N=8192 non-causal, stays on the MUFU).
# Build (fa2, bf16), FA-2 tests with variant 2, racecheck of variant 2, then the A/B. Measured: docs/hopper_profile.md
# session 49 (slower everywhere; not adopted).
# On the device: OUT=$OUT [DIMS="64 128 256"] bash scripts/dev/fa2_ex2_fma_ab.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_ex2_fma.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-64,128,256} FFPA_DTYPES=bf16 FFPA_EXPECT_EXTENSION=1
t0=$(date +%s)
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s; ptxas spills: $(grep -c '[1-9][0-9]* bytes spill' "$OUT/build.log")"
(cd tests && FFPA_DEV_WS=${TEST_V:-2} PYTHONPATH=$PWD/.. timeout ${TEST_S:-120} python3 -m pytest -q -p no:cacheprovider -x test_fa2_gpu.py test_fa2_hopper_gpu.py \
  -k "${TEST_K:-128 or 64}" > "$OUT/pytest.log" 2>&1
 echo "tests (variant ${TEST_V:-2}): $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head)
FFPA_DEV_WS=2 PYTHONPATH=$PWD timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 python3 scripts/sanitize_one.py fa2 > "$OUT/racecheck.log" 2>&1
echo "racecheck (variant 2): exit $? $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck.log" | tail -1)"
PYTHONPATH=$PWD DIMS="${DIMS:-128 64 256}" SHAPES="${SHAPES:-8x16x2048 1x32x8192 16x16x1024 64x16x256}" \
  python3 scripts/dev/fa2_ws_variants.py ${VARIANTS:-0,1,2,3,0,2} 2>&1 | grep -v Warn | tee "$OUT/ab.txt"
