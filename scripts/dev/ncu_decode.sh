#!/usr/bin/env bash
# Development probe: ncu of one decode_split kernel (already installed build), full set plus the
# per-instruction source page (SASS with stall samples) as CSV. Args: B S Hq Hkv D Dv paged.
# Env: NCU_TAG names the outputs. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
TAG=${NCU_TAG:-ncu}
ncu --kernel-name regex:decode_split --launch-skip 2 --launch-count 1 --set full --import-source yes \
  -o "$OUT/$TAG" -f python3 scripts/dev/decode_one.py "$@" > "$OUT/$TAG.log" 2>&1
ncu --import "$OUT/$TAG.ncu-rep" --page details > "$OUT/$TAG.txt" 2>&1
ncu --import "$OUT/$TAG.ncu-rep" --page source --csv --print-source sass > "$OUT/${TAG}_sass.csv" 2>&1
grep -E "Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Block Limit" "$OUT/$TAG.txt" | head -20
ls -la "$OUT" | tail -5
