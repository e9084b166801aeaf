#!/usr/bin/env bash
# Development probe (session 46): how much of the FA-2 Hopper kernel's time at D = 128 / 256 its O store from
# registers takes, as an upper bound on what a TMA store of O (staged in a K buffer, docs/hopper_profile.md
# session 44) could win. fa2_store_share.patch adds FFPA_DEV_WS=1: the kernel without the epilogue's store
# (results wrong; timing only; not the look-ahead or split kernels). fa2_ws_variants.py 0,1,0,1 beside cuDNN.
# Writes to $OUT; reverts the patch.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_store_share.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-128,256} FFPA_DTYPES=bf16 FFPA_EXPECT_EXTENSION=1
t0=$(date +%s)
python3 setup.py build_ext --inplace > "$OUT/build_store.log" 2>&1 || { tail -30 "$OUT/build_store.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
PYTHONPATH=$PWD DIMS="${DIMS:-128 256}" SHAPES="${SHAPES:-8x16x2048 1x32x2048 32x16x512 64x16x256}" \
  python3 scripts/dev/fa2_ws_variants.py ${VARIANTS:-0,1,0,1} 2>&1 | grep -v Warn | tee "$OUT/store_share.txt"
