#!/usr/bin/env bash
# Development probe (not part of the check): a decode-only sm_90a build (head dims PROBE_DIMS), the
# decode GPU tests if TESTS=1 (forward's routing tests deselected: a decode-only build has no
# prefill kernel), decode_vs_cudnn.py on SHAPES (each call's kernels beside SDPA cuDNN / flash), and
# with NCU=1 ncu of our split kernel and cuDNN's on two D = 128 shapes. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=decode FFPA_ACCS=fp32 FFPA_EXPECT_EXTENSION=1 PYTHONUNBUFFERED=1
t0=$(date +%s)
FFPA_HEAD_DIMS=${PROBE_DIMS:-128,256} python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { grep -B2 -A8 "error" "$OUT/build.log" | head -40; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
if [ "${TESTS:-0}" = 1 ]; then
  (cd tests && timeout 240 python3 -m pytest -q -p no:cacheprovider -k "not forward_routes and not forward_with_a_mask" \
     test_decode_gpu.py test_decode_splits.py test_decode_hopper_gpu.py > "$OUT/pytest.log" 2>&1
   echo "tests rc $?: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20)
fi
python3 scripts/dev/decode_vs_cudnn.py ${SHAPES:-8x32768x32x8x128 64x8192x32x8x128 1x131072x32x8x128 32x8192x32x8x256 4x1088x32x8x128} 2>&1 | grep -v "Warn\|warn_once"
if [ "${NCU:-0}" = 1 ]; then
  for s in "64 8192 32 8 128" "8 32768 32 8 128"; do
    t=${s// /_}
    ncu --kernel-name regex:decode_split --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats python3 scripts/dev/decode_one.py $s 128 0 > "$OUT/ncu_ours_$t.txt" 2>&1
    ncu --launch-skip 5 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats python3 scripts/dev/sdpa_one.py $s cudnn > "$OUT/ncu_cudnn_$t.txt" 2>&1
    for w in ours cudnn; do echo "--- $w $t"; grep -E "^  [a-zA-Z_]+.*\(|Duration|DRAM Throughput|L2 Hit|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Grid Size|Dynamic Shared|Waves Per SM" "$OUT/ncu_${w}_$t.txt" | head -12; done
  done
fi
