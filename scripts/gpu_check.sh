#!/usr/bin/env bash
# The one command for the GPU machine: build the full extension (timed), run every test, run the
# benchmark, run compute-sanitizer on one small shape. Logs, JSON, tables and plots go to $OUT
# (default ./out) as five files: summary.txt, ptxas.md, resources.md, logs.tar.gz (build.log, pytest.log,
# sanitizer.log) and bench.tar.gz (json + md + png); the device returns at most 8 files, so a command that
# adds its own after the check has three left (session 55's lost its summary.txt to a ninth).
#
#   bash scripts/gpu_check.sh                # everything
#   FFPA_CHECK_STEPS="build tests" bash scripts/gpu_check.sh
#   FFPA_BENCH_RUNS="--quick" bash scripts/gpu_check.sh           # sweeps separated by ';'
#   FFPA_ARCHS="80;89;90a" bash scripts/gpu_check.sh             # build for these archs (default: the GPU's)
#   FFPA_CHECK_BUDGET=570 bash scripts/gpu_check.sh    # skip bench sweeps that would start past 570 s
#                                                      # (the device runs one command for at most 600 s)
#   FFPA_TESTS=test_ffpa_gpu.py / FFPA_PYTEST_ARGS=--ignore=test_ffpa_gpu.py   # a part of tests/ (pytest targets),
#       to split the suite over two device calls (session 47: the build and every test took 589 of the 600 s)
#   FFPA_CHECK_OVERLAP=1 bash scripts/gpu_check.sh    # sanitizers beside the tests (session 52: build ~145 s, tests
#       ~230 s, sanitizers ~165 s in turn), so "build tests sanitizer" fits one call; session 53 on an H200: build 143 s,
#       the sanitizers done at 378 s, the tests (slowed beside them: 428 s) at 589 s of the 600: too close; prefer two
#       calls (FFPA_PYTEST_ARGS=--ignore=test_ffpa_gpu.py, then FFPA_TESTS="test_ffpa_gpu.py test_fp8_gpu.py" with the sanitizers)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
# FFPA_EXPECT_EXTENSION: a missing or unloadable ffpa_attn._C fails the tests instead of skipping them.
export MAX_JOBS=${MAX_JOBS:-16} PYTHONUNBUFFERED=1 FFPA_EXPECT_EXTENSION=1
STEPS=${FFPA_CHECK_STEPS:-"build tests sanitizer bench"}
PY=${PYTHON:-python3}
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
# The logs into one archive when the check ends, however it ends (FFPA_CHECK_LOGS_TAR=0: left as they are).
bundle_logs() {
  [ "${FFPA_CHECK_LOGS_TAR:-1}" = 1 ] || return 0
  local logs=() f
  for f in build.log pytest.log sanitizer.log; do [ -f "$OUT/$f" ] && logs+=("$f"); done
  [ ${#logs[@]} -gt 0 ] && tar -czf "$OUT/logs.tar.gz" -C "$OUT" "${logs[@]}" && (cd "$OUT" && rm -f "${logs[@]}")
  return 0
}
trap bundle_logs EXIT
say() { echo "$*" | tee -a "$SUMMARY"; }
status=0
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
BUDGET=${FFPA_CHECK_BUDGET:-0}

say "== ffpa-attn gpu check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
say "$($PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)')"

if [[ " $STEPS " == *" build "* ]]; then
  t0=$(date +%s)
  if FFPA_PTXAS_VERBOSE=1 $PY -m pip install --no-build-isolation --no-deps -v . > "$OUT/build.log" 2>&1; then
    say "build: ok in $(( $(date +%s) - t0 )) s (MAX_JOBS=$MAX_JOBS)"
    grep "ffpa-attn build:" "$OUT/build.log" | sed 's/^ *//' | tee -a "$SUMMARY"
  else
    say "build: FAILED after $(( $(date +%s) - t0 )) s"; tail -40 "$OUT/build.log"; exit 1
  fi
  $PY tools/ptxas_report.py "$OUT/build.log" > "$OUT/ptxas.md" && say "ptxas: $(grep -c '^| ' "$OUT/ptxas.md") table rows, spills: $(grep -c 'SPILL' "$OUT/ptxas.md")"
  (cd tests && $PY ../tools/resource_table.py) > "$OUT/resources.md" 2>&1 && say "resources: $(grep -c '^| ffpa\|^| fa2\|^| decode' "$OUT/resources.md") kernels (launch shared memory, registers, local bytes)"
fi

# Import the installed package, not the source tree.
cd tests
sanitizers() {  # exit 1 if any tool reported errors
  local rc=0 run tool parts no_cluster
  : > "$OUT/sanitizer.log"
  # synccheck (barrier misuse: the warp-specialised kernels' named barriers) on the FA-2, FFPA and decode parts.
  # racecheck without L1's cluster pair (Dv > 640): it does not model cluster-scope mbarriers (sanitize_one.py).
  for run in "memcheck" "racecheck" "synccheck fa2,ffpa,decode,fp8"; do
    read -r tool parts <<< "$run"
    no_cluster=0; [ "$tool" = racecheck ] && no_cluster=1
    if FFPA_SANITIZE_NO_CLUSTER=$no_cluster compute-sanitizer --tool $tool --error-exitcode 9 $PY ../scripts/sanitize_one.py $parts >> "$OUT/sanitizer.log" 2>&1; then
      say "sanitizer $run: clean at $(elapsed) s ($(grep -c 'ERROR SUMMARY: 0 errors\|RACECHECK SUMMARY: 0 hazards' "$OUT/sanitizer.log") clean summaries so far)"
    else
      say "sanitizer $run: ERRORS (see sanitizer.log)"; rc=1
    fi
  done
  return $rc
}
# FFPA_CHECK_OVERLAP=1: the sanitizers run beside the tests (their own processes on the same GPU; no test is
# timed), so build, tests and sanitizers fit one device call; the bench always runs alone.
san_pid=""
if [[ " $STEPS " == *" sanitizer "* && " $STEPS " == *" tests "* && "${FFPA_CHECK_OVERLAP:-0}" == 1 ]]; then
  say "sanitizers beside the tests (FFPA_CHECK_OVERLAP=1)"
  sanitizers & san_pid=$!
fi
if [[ " $STEPS " == *" tests "* ]]; then
  $PY -m pytest -q -p no:cacheprovider -rs --durations=30 ${FFPA_TESTS:-.} ${FFPA_PYTEST_ARGS:-} > "$OUT/pytest.log" 2>&1
  rc=$?
  say "tests: exit $rc: $(tail -1 "$OUT/pytest.log") (at $(elapsed) s)"
  [ $rc -ne 0 ] && { status=1; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -30; }
fi
if [ -n "$san_pid" ]; then
  wait "$san_pid" || status=1
elif [[ " $STEPS " == *" sanitizer "* ]]; then
  sanitizers || status=1
fi
cd ..

if [[ " $STEPS " == *" bench "* ]]; then
  # One or more sweeps separated by ';' (each an argument list for bench/bench.py); each writes
  # its JSON/markdown/plots to bench/run<i>.
  DEFAULT_RUNS="--B 1 --H 32 --N 8192 --dtype bf16 fp16 --causal-both --kernels sdpa_efficient ffpa_l1 ffpa_l2 ffpa_l3 ffpa_auto --warmup 5 --iters 25"
  DEFAULT_RUNS+=";--B 1 --H 32 --N 8192 --D 576 --Dv 512 --dtype bf16 --causal-both --kernels sdpa_efficient ffpa_l1 ffpa_l3 ffpa_auto --warmup 5 --iters 25"
  DEFAULT_RUNS+=";--shapes 1x32x4096 --D 2048 --dtype bf16 fp16 --causal-both --kernels sdpa_efficient ffpa_l1 ffpa_l3 ffpa_auto --warmup 5 --iters 25"
  DEFAULT_RUNS+=";--B 1 --H 32 --N 8192 --D 320 512 1024 --dtype fp16 --kernels sdpa_efficient ffpa_l1 ffpa_l2 ffpa_l3 --acc fp16 mixed --warmup 5 --iters 25"
  DEFAULT_RUNS+=";--preset fa2 --dtype bf16 fp16 --causal-both --kernels sdpa_efficient sdpa_flash sdpa_cudnn fa2 fa2_sync --warmup 10 --iters 40"
  DEFAULT_RUNS+=";--mask blocksparse --shapes 1x32x8192 --D 64 128 256 --dtype bf16 --causal-both --kernels sdpa_efficient sdpa_cudnn fa2 --warmup 10 --iters 40"
  DEFAULT_RUNS+=";--preset decode --dtype bf16 fp16 --warmup 10 --iters 40"
  DEFAULT_RUNS+=";--preset fp8 --warmup 10 --iters 40"
  DEFAULT_RUNS+=";--preset short --dtype bf16 --causal-both --kernels sdpa_flash sdpa_cudnn fa2 --warmup 10 --iters 40"
  rm -rf "$OUT/bench" && mkdir -p "$OUT/bench"
  IFS=';' read -ra RUNS <<< "${FFPA_BENCH_RUNS:-$DEFAULT_RUNS}"
  i=0
  for args in "${RUNS[@]}"; do
    if [ "$BUDGET" -gt 0 ] && [ "$(elapsed)" -gt "$BUDGET" ]; then
      say "bench run$i ($args): SKIPPED, past the ${BUDGET} s budget at $(elapsed) s"; status=1; i=$((i + 1)); continue
    fi
    # shellcheck disable=SC2086
    $PY bench/bench.py $args --check --gen-bench --plot --out-dir "$OUT/bench/run$i" >> "$OUT/bench/bench.log" 2>&1
    rc=$?
    say "bench run$i ($args): exit $rc (at $(elapsed) s)"
    [ $rc -ne 0 ] && status=1
    cat "$OUT/bench/run$i"/*.md 2>/dev/null | tee -a "$SUMMARY"
    i=$((i + 1))
  done
  tail -5 "$OUT/bench/bench.log"
  tar -czf "$OUT/bench.tar.gz" -C "$OUT" bench && rm -rf "$OUT/bench"
fi
say "== overall: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
