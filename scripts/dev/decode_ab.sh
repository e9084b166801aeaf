#!/usr/bin/env bash
# Development probe: the decode family built once per flag set (AB_SIDES: ';'-separated nvcc flag
# sets, the first usually empty = as is; each build from a clean build/ since nvcc's flags from the
# environment are not part of ninja's command lines), decode GPU tests ($AB_TESTS) on the first, then
# the same decode shapes benched on each. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
export MAX_JOBS=16 FFPA_FAMILIES=decode,fa2 FFPA_DTYPES=bf16 FFPA_HEAD_DIMS=${PROBE_DIMS:-128,256,512,576}
SHAPES=${AB_SHAPES:-8x32768x32x8x128 64x8192x32x8x128 1x131072x32x8x128 32x8192x32x8x256 16x8192x64x8x512 16x16384x16x1x576x512 128x4096x128x1x576x512}
IFS=';' read -ra SIDES <<< "${AB_SIDES:-;}"
n=0
for flags in "${SIDES[@]}"; do
  n=$((n + 1)); t0=$(date +%s)
  rm -rf build
  NVCC_APPEND_FLAGS="$flags" python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build_$n.log" 2>&1 || { tail -30 "$OUT/build_$n.log"; exit 1; }
  echo "== side $n ($flags): build $(( $(date +%s) - t0 )) s"
  if [ $n = 1 ] && [ -n "${AB_TESTS:-}" ]; then
    (cd tests && FFPA_EXPECT_EXTENSION=1 timeout 300 python3 -m pytest -q -p no:cacheprovider -x $AB_TESTS > "$OUT/pytest.log" 2>&1; echo "tests: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -10)
  fi
  python3 bench/bench_decode.py --shapes $SHAPES --layouts ${AB_LAYOUTS:-contiguous} --warmup 5 --iters 30 --no-latency --no-hf \
    --out-dir "$OUT/side$n" 2>&1 | grep -v "Warning\|return F\." | sed 's/ Lq=1//; s/ GB\/s//g; s/ contiguous//'
done
