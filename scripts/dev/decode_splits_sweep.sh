#!/usr/bin/env bash
# Development probe: decode GB/s per forced split count (SPLITS_<tag>="n n ..." per shape), beside the
# auto choice, after a decode-only build (bf16, PROBE_DIMS). Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
export MAX_JOBS=16
FFPA_FAMILIES=decode,fa2 FFPA_DTYPES=bf16 FFPA_HEAD_DIMS=${PROBE_DIMS:-128} python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
for spec in ${SWEEP:-"8x32768x32x8x128:0,6,9,12,18,24" "1x131072x32x8x128:0,64,96,128" "64x8192x32x8x128:0,1,2,4"}; do
  shape=${spec%%:*}
  for n in $(echo "${spec#*:}" | tr ',' ' '); do
    extra=""; [ "$n" != 0 ] && extra="--num-splits $n"
    python3 bench/bench_decode.py --shapes $shape --layouts contiguous varlen --warmup 5 --iters 30 --no-latency --no-hf $extra \
      --out-dir "$OUT/s_${shape}_$n" 2>&1 | grep "ffpa_decode" | sed "s/^/splits=$n /; s/ Lq=1//; s/ GB\/s//g; s/; sdpa.*//"
  done
done
