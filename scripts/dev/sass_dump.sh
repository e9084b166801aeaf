#!/usr/bin/env bash
# SASS of the built FA-2 kernels (device): builds an FA-2-only sm_90a bf16 extension at FFPA_HEAD_DIMS (default
# 128) in place and writes every kernel's SASS (cuobjdump -sass of the extension's .so) to $OUT/sass.txt, for
# instruction counts between the waits offline (e.g. MUFU.EX2 / F2FP / FMNMX / SHFL per tile).
# On the device: OUT=$OUT [FFPA_HEAD_DIMS=128] bash scripts/dev/sass_dump.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-128} FFPA_DTYPES=bf16 FFPA_EXPECT_EXTENSION=1
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
so=$(ls ffpa_attn/*.so | head -1)
CUOBJDUMP=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
"$CUOBJDUMP" -sass "$so" > "$OUT/sass.txt" 2>&1
echo "sass: $(wc -l < "$OUT/sass.txt") lines, functions: $(grep -c 'Function :' "$OUT/sass.txt")"
gzip -f "$OUT/sass.txt"
