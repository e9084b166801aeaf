#!/usr/bin/env bash
# Development loop of the warp-specialised FA-2 kernel (#15) on the device: an FA-2-only sm_90a build,
# the FA-2 GPU tests (or FA2_TESTS="-k expr"), then the FA-2 bench at a few head dims beside SDPA
# cuDNN / flash. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=${FFPA_FAMILIES:-fa2} FFPA_EXPECT_EXTENSION=1 PYTHONUNBUFFERED=1
t0=$(date +%s)
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  FFPA_PTXAS_VERBOSE=1 python3 -m pip install --no-build-isolation --no-deps -v . > "$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
  echo "build ok in $(( $(date +%s) - t0 )) s"
  grep -A2 "ws_kernel" "$OUT/build.log" | grep -E "spill|Used" | sort | uniq -c | head
fi
cd tests
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout ${TEST_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider -x test_fa2_gpu.py test_fa2_hopper_gpu.py ${FA2_TESTS:-} > "$OUT/pytest.log" 2>&1
  echo "tests rc $?: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)|Error|assert" "$OUT/pytest.log" | head -20
fi
cd ..
timeout ${BENCH_TIMEOUT:-200} python3 bench/bench.py --shapes ${SHAPES:-1x32x8192} --D ${DIMS:-64 128 256} --dtype bf16 ${CAUSAL_ARG:---causal-both} --check \
  --kernels fa2 fa2_sync sdpa_cudnn sdpa_flash --iters ${ITERS:-60} --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
echo "bench rc $?"; grep -v "^\s*$" "$OUT/bench.log" | tail -30
