#!/usr/bin/env bash
# Development probe (prepared in session 40, not yet run): causal FA-2 calls at D = 64 / 96 without a mask on
# the masked tile's warp-specialised kernel (Fa2Launcher's WsM: two consumers x 64 rows, 128 keys) instead of
# the table's (D = 64: three consumers x 64 rows; D = 96: two on 176 keys), for short sequences, where the
# tile geometry and the per-item costs weigh most (docs/hopper_profile.md session 40). Applies
# fa2_causal_short_tile.patch (FFPA_DEV_WS=1 routes such calls), builds the FA-2 family at D = 64 / 96 (bf16),
# runs the FA-2 GPU tests' causal cells with the switch on, then fa2_ws_variants.py 0,1 beside cuDNN, and
# reverts the patch. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
git apply scripts/dev/fa2_causal_short_tile.patch || exit 1
trap 'git apply -R scripts/dev/fa2_causal_short_tile.patch' EXIT
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=64,96 FFPA_DTYPES=bf16 FFPA_EXPECT_EXTENSION=1
t0=$(date +%s)
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
(cd tests && PYTHONPATH=$PWD/.. FFPA_DEV_WS=1 timeout 240 python3 -m pytest -q -p no:cacheprovider -x test_fa2_gpu.py -k causal \
  > "$OUT/pytest.log" 2>&1; echo "tests (switch on): $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head)
PYTHONPATH=$PWD DIMS="64 96" SHAPES="${SHAPES:-16x16x1024 8x16x2048 32x16x512 4x32x4096 1x32x8192}" \
  python3 scripts/dev/fa2_ws_variants.py 0,1 2>&1 | grep -v Warn
