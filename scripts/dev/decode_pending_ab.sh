#!/usr/bin/env bash
# Session 23's two decode patches (written without a GPU: that session had no device time), tested and
# measured on the device. Run from a checkout WITHOUT them applied; the script applies them there in
# order and reverses them at exit:
#   merge: scripts/dev/decode_fused_merge.patch    the split-KV merge fused into the split kernels
#   both:  + scripts/dev/decode_mask_prefetch.patch the mma.sync kernel's mask bits a tile ahead
# For each side of SIDES (default "merge"; then "both" in a second call on the same warm machine, whose
# masked figures against the first call's are the mask prefetch's A/B; "base" adds the unpatched tree):
# a decode-only build at DIMS (default 128,576; bf16, sm_90a), on the patched sides the decode GPU tests
# (the patches' own files first, -x) and memcheck / racecheck / synccheck on scripts/sanitize_one.py's
# decode part, then scripts/dev/decode_merge_ab.py (masked calls too; "kernel" mode is the tree's merge
# kernel, so the merge's A/B needs no base side) into $OUT/ab_<side>.txt. About 5 minutes a patched side.
#   bash scripts/dev/decode_pending_ab.sh                # the fused merge
#   SIDES="both" bash scripts/dev/decode_pending_ab.sh   # the mask prefetch on top
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export MAX_JOBS=16 FFPA_FAMILIES=decode FFPA_DTYPES=bf16 FFPA_ARCHS=90a FFPA_HEAD_DIMS=${DIMS:-128,576} PYTHONUNBUFFERED=1
T0=$(date +%s)
applied=()
undo() { for ((i = ${#applied[@]} - 1; i >= 0; i--)); do git apply -R "${applied[$i]}"; done; }
trap undo EXIT
apply() { git apply "$1" || { echo "cannot apply $1"; exit 1; }; applied+=("$1"); }
for side in ${SIDES:-merge}; do
  case $side in
    base) ;;
    merge) [ ${#applied[@]} -ge 1 ] || apply scripts/dev/decode_fused_merge.patch ;;
    both) [ ${#applied[@]} -ge 1 ] || apply scripts/dev/decode_fused_merge.patch
          [ ${#applied[@]} -ge 2 ] || apply scripts/dev/decode_mask_prefetch.patch ;;
    *) echo "unknown side $side"; exit 1 ;;
  esac
  rm -rf build
  t0=$(date +%s)
  FFPA_PTXAS_VERBOSE=1 python3 -m pip install --no-build-isolation --no-deps -v . > "$OUT/build_$side.log" 2>&1 \
    || { tail -30 "$OUT/build_$side.log"; exit 1; }
  echo "== $side: build $(( $(date +%s) - t0 )) s"
  python3 tools/ptxas_report.py "$OUT/build_$side.log" | grep -i decode > "$OUT/ptxas_$side.md"
  if [ "$side" != base ] && [ "${TESTS:-1}" = 1 ]; then
    (cd tests && FFPA_EXPECT_EXTENSION=1 timeout 300 python3 -m pytest -q -p no:cacheprovider -x \
       $(ls test_decode_merge_gpu.py test_decode_mask_gpu.py 2>/dev/null) test_decode_splits.py test_decode_gpu.py test_decode_hopper_gpu.py \
       test_merge_states.py > "$OUT/pytest_$side.log" 2>&1
     echo "tests: $(tail -1 "$OUT/pytest_$side.log") (at $(( $(date +%s) - T0 )) s)"
     grep -E "^(FAILED|ERROR)" "$OUT/pytest_$side.log" | head -10
     for tool in memcheck racecheck synccheck; do
       compute-sanitizer --tool $tool --error-exitcode 9 python3 ../scripts/sanitize_one.py decode >> "$OUT/sanitizer_$side.log" 2>&1 \
         && echo "sanitizer $tool: clean" || echo "sanitizer $tool: ERRORS"
     done)
  fi
  MASKED=1 SPLITS=${AB_SPLITS:-} timeout 150 python3 scripts/dev/decode_merge_ab.py 2>&1 | grep -v "Warning\|return F\." \
    | tee "$OUT/ab_$side.txt"
  echo "== $side done at $(( $(date +%s) - T0 )) s"
done
