#!/usr/bin/env bash
# Development loop of the Hopper decode kernel (#14, kernels/decode_sm90_ws.cuh) on the device: an
# sm_90a build of the decode and ffpa_l1 families at a few head dims, the Hopper decode tests (and
# the L1 Hopper tests: both kernels run on kernels/ffpa_ws_pipeline.cuh), then bench_decode on the
# wide-head shapes. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=${FFPA_FAMILIES:-decode,ffpa_l1} FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-320,512,576,1024}
export FFPA_DTYPES=${FFPA_DTYPES:-bf16,fp16} FFPA_ACCS=fp32 FFPA_EXPECT_EXTENSION=1 PYTHONUNBUFFERED=1
t0=$(date +%s)
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  FFPA_PTXAS_VERBOSE=1 python3 -m pip install --no-build-isolation --no-deps -v . > "$OUT/build.log" 2>&1 || { grep -B2 -A8 "error" "$OUT/build.log" | head -60; exit 1; }
  echo "build ok in $(( $(date +%s) - t0 )) s"
  grep -A2 "ws_kernel" "$OUT/build.log" | grep -E "spill|Used" | sort | uniq -c | head
fi
cd tests
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout ${TEST_TIMEOUT:-300} python3 -m pytest -q -p no:cacheprovider ${TESTS:-test_decode_hopper_gpu.py test_decode_gpu.py test_ffpa_gpu.py} \
    -k "${TEST_K:-hopper or Hopper or mla or every_head_dim or gqa}" > "$OUT/pytest.log" 2>&1
  echo "tests rc $?: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -30
fi
cd ..
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  timeout ${BENCH_TIMEOUT:-200} python3 bench/bench_decode.py --shapes ${SHAPES:-128x4096x128x1x576x512 16x16384x16x1x576x512 16x8192x64x8x512} \
    --layouts ${LAYOUTS:-contiguous paged64 varlen} --no-hf --no-latency --out-dir "$OUT" --gen-bench > "$OUT/bench.log" 2>&1
  echo "bench rc $?"; cat "$OUT/decode.md" 2>/dev/null | head -40 || tail -30 "$OUT/bench.log"
fi
if [ "${PREFILL_BENCH:-0}" = 1 ]; then  # the prefill kernel on the same pipeline: no regression
  timeout 200 python3 bench/bench.py --shapes 1x32x8192 --D ${PREFILL_DIMS:-512 1024} --dtype bf16 --kernels ffpa_l1 sdpa_efficient \
    --iters 30 --json "$OUT/prefill.json" > "$OUT/prefill.log" 2>&1
  echo "prefill bench rc $?"; grep -v "^\s*$" "$OUT/prefill.log" | tail -12
fi
