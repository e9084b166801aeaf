#!/usr/bin/env bash
# Development probe for the decode family (not part of the check): build only the decode family for
# the visible GPU, bench a few shapes and profile two with ncu. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
export MAX_JOBS=16
t0=$(date +%s)
FFPA_FAMILIES=decode,fa2 FFPA_HEAD_DIMS=${PROBE_DIMS:-128,576} python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
if [ -n "${PROBE_TESTS:-}" ]; then
  (cd tests && FFPA_EXPECT_EXTENSION=1 python3 -m pytest -q -p no:cacheprovider -x $PROBE_TESTS > "$OUT/pytest.log" 2>&1; echo "tests: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)|Error" "$OUT/pytest.log" | head -20)
fi
python3 bench/bench_decode.py --shapes ${PROBE_SHAPES:-8x32768x32x8x128 1x131072x32x8x128 16x16384x16x1x576x512} --warmup 5 --iters 30 --no-latency --out-dir "$OUT/dec" 2>&1 | grep -v "Warning\|return F\."
if [ -n "${PROBE_NCU:-}" ]; then
  for shape in $PROBE_NCU; do
    ncu --kernel-name regex:decode_split --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats python3 scripts/dev/decode_one.py ${shape//,/ } > "$OUT/ncu_${shape//,/_}.txt" 2>&1
    grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Block Limit|Waves Per SM|Grid Size" "$OUT/ncu_${shape//,/_}.txt" | head -30
  done
fi
