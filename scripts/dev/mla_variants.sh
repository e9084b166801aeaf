#!/usr/bin/env bash
# Development probe: the shared-K/V (MLA) tile variants of decode_tile() side by side. Builds the
# decode family (bf16, head dims PROBE_DIMS) with -DFFPA_DEV_DECODE_VARIANTS and benches the MLA
# shapes once per FFPA_DEV_MLA_VARIANT in MLA_VARIANTS. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
export MAX_JOBS=16 NVCC_APPEND_FLAGS="-DFFPA_DEV_DECODE_VARIANTS"
t0=$(date +%s)
FFPA_FAMILIES=decode,fa2 FFPA_DTYPES=bf16 FFPA_HEAD_DIMS=${PROBE_DIMS:-128,576} python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
for v in ${MLA_VARIANTS:-1 2 3 4}; do
  echo "== variant $v"
  FFPA_DEV_MLA_VARIANT=$v python3 bench/bench_decode.py --shapes ${MLA_SHAPES:-16x16384x16x1x576x512 128x4096x128x1x576x512} \
    --layouts contiguous --warmup 5 --iters 40 --no-latency --no-hf --out-dir "$OUT/v$v" 2>&1 | grep -v "Warning\|return F\."
done
