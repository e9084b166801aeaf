#!/usr/bin/env bash
# Prepared in session 51 (compiled here: D = 64 / 128 / 256 pre-pass form without spills, the opt-in in-kernel V^T
# form's transposers 108 bytes), not yet run. Causal FP8 calls on the persistent grid: fp8_causal_walk.patch gives the
# FA-2-style FP8 kernel the bf16 kernel's walk (Fa2WsItems::Walk without a work counter: pairs of query blocks M - 1 - q
# and q on one block an SM; masked calls and FFPA_DEV_WS=1 one block an item, every head in the tail: single items
# longest first, which needs fa2_tail_order.patch's order, applied first). One call: build (fa2 + fp8, D = 64 / 128 /
# 256), the FP8 GPU tests (the persistent-walk test gains causal rows), the fp8 sanitizers, fp8_probe.py 0,1,0,1
# causal. Land with the tail order if it wins (then fold the dev switch into fp8_persistent_grid and drop the early
# return in the test), else drop both FP8 parts.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_tail_order.patch scripts/dev/fp8_causal_walk.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2,fp8 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${DIMS_BUILD:-64,128,256} FFPA_DTYPES=bf16,e4m3 FFPA_EXPECT_EXTENSION=1
t0=$(date +%s)
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s; spill lines: $(grep -c '[1-9][0-9]* bytes spill' "$OUT/build.log")"
(cd tests && PYTHONPATH=$PWD/.. timeout 150 python3 -m pytest -q -p no:cacheprovider -x test_fp8_gpu.py test_fp8_vt_gpu.py > "$OUT/pytest.log" 2>&1
 echo "tests rc $?: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20)
PYTHONPATH=$PWD DIMS="${DIMS:-64 128 256}" CAUSAL=1 VARIANTS=0,1,0,1 SHAPES="${SHAPES:-4x8x8448 1x32x8192 8x16x2048}" \
  timeout 150 python3 scripts/dev/fp8_probe.py 2>&1 | grep -v Warn | tee "$OUT/fp8_causal_ab.txt"
for tool in racecheck synccheck memcheck; do
  (cd tests && PYTHONPATH=$PWD/.. timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 python3 ../scripts/sanitize_one.py fp8 \
     > "$OUT/san_$tool.log" 2>&1; echo "$tool rc $?: $(tail -1 "$OUT/san_$tool.log")")
done
echo "done at $(( $(date +%s) - t0 )) s"
