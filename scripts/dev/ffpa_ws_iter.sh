#!/usr/bin/env bash
# Development loop of FFPA L1 on Hopper (#16) on the device: an ffpa_l1-only sm_90a build at a few head
# dims, the L1 GPU tests (FFPA_K: a -k expression), then the bench: the TMA kernel (ffpa_l1), the
# mma.sync L1 it replaces (ffpa_l1_s3: an explicit depth runs the fallback) and SDPA EA. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=${FFPA_FAMILIES:-ffpa_l1} FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-384,512,576}
export FFPA_DTYPES=${FFPA_DTYPES:-bf16,fp16} FFPA_ACCS=${FFPA_ACCS:-fp32} FFPA_EXPECT_EXTENSION=1 PYTHONUNBUFFERED=1
t0=$(date +%s)
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  FFPA_PTXAS_VERBOSE=1 python3 -m pip install --no-build-isolation --no-deps -v . > "$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
  echo "build ok in $(( $(date +%s) - t0 )) s"
  grep -A2 "ffpa_fwd_ws_kernel" "$OUT/build.log" | grep -E "spill|Used" | sort | uniq -c | head
fi
cd tests
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout ${TEST_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider -x test_ffpa_gpu.py -k "${FFPA_K:-L1}" > "$OUT/pytest.log" 2>&1
  echo "tests rc $?: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)|Error|assert" "$OUT/pytest.log" | head -20
fi
cd ..
timeout ${BENCH_TIMEOUT:-200} python3 bench/bench.py --shapes ${SHAPES:-1x32x8192} --D ${DIMS:-384 512} --dtype bf16 ${CAUSAL_ARG:---causal-both} --check \
  --kernels ${KERNELS:-ffpa_l1 sdpa_efficient} ${STAGES_ARG---stages 3} --iters ${ITERS:-30} --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
echo "bench rc $?"; grep -v "^\s*$" "$OUT/bench.log" | tail -30
