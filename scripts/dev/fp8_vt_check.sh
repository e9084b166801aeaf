#!/usr/bin/env bash
# Device check of the FA-2-style FP8 kernel's in-kernel V transpose (session 24): an FP8 + FA-2 build
# (sm_90a; bf16 for the probe's and the fallback tests' FA-2 calls), the FP8 GPU tests (both V^T forms),
# memcheck / racecheck / synccheck on sanitize_one.py's FP8 part, then scripts/dev/fp8_probe.py with the two
# forms side by side (bench's interleaved timer, L2 flushed). Logs to $OUT. About 5 minutes (session 24's
# first run hung in every in-kernel call, before the producer's register count was fixed, and ran out its time).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export MAX_JOBS=16 FFPA_FAMILIES=fp8,fa2 FFPA_DTYPES=e4m3,bf16 FFPA_ARCHS=90a FFPA_HEAD_DIMS=64,128,256,512 PYTHONUNBUFFERED=1
T0=$(date +%s)
FFPA_PTXAS_VERBOSE=1 python3 -m pip install --no-build-isolation --no-deps -v . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - T0 )) s"
python3 tools/ptxas_report.py "$OUT/build.log" | grep "FP8" | tee "$OUT/ptxas_fp8.md"
(cd tests && FFPA_EXPECT_EXTENSION=1 timeout 240 python3 -m pytest -q -p no:cacheprovider -x test_fp8_vt_gpu.py test_fp8_gpu.py \
   > "$OUT/pytest.log" 2>&1; echo "tests: $(tail -1 "$OUT/pytest.log") (at $(( $(date +%s) - T0 )) s)"
 grep -E "^(FAILED|ERROR)|Error|assert" "$OUT/pytest.log" | head -20)
SHAPES="4x8x8448 1x32x8192" DIMS="${DIMS:-64 128}" VARIANTS=kernel,prepass timeout 150 python3 scripts/dev/fp8_probe.py 2>&1 \
  | grep -v "Warning\|warn" | tee "$OUT/ab.txt"
echo "probe done at $(( $(date +%s) - T0 )) s"
cd tests
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 python3 ../scripts/sanitize_one.py fp8 >> "$OUT/sanitizer.log" 2>&1 \
    && echo "sanitizer $tool: clean (at $(( $(date +%s) - T0 )) s)" || echo "sanitizer $tool: ERRORS or timeout (rc $?)"
done
