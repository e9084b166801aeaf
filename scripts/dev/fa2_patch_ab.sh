#!/usr/bin/env bash
# Development A/B of a warp-specialised FA-2 change against what it replaced: the last PATCH is a scripts/dev patch
# that adds FFPA_DEV_WS=1 (the other variant) to the launcher, e.g. fa2_o_in_k_ab.patch (session 46: 1 = O from
# registers), fa2_held_release_ab.patch (session 47: 1 = the held K stage released before the next item's first S),
# fa2_fastdiv_ab.patch (session 47: 1 = item() by the compiler's division), fa2_ahead_d128.patch (prepared in session
# 47: 1 = the look-ahead twin at D = 97..128; measured in session 48), fa2_finish_early_ab.patch (session 48: 1 = 1 / l
# and the LSE after the last P V), fa2_sum_mma.patch (session 48: the change and its switch in one, 1 = the FADD sums);
# on branch s48-pf-pair: fa2_pair_wide_ab.patch (1 = no P pair anywhere; 0 = the pair from 1024 keys at D = 97..128
# and, with the deferred P V wait, at D = 129..192); fa2_standing_max_ab.patch (sessions 49-50: 1 = the tile max
# everywhere; removed once the standing max landed, git history 9904ec2);
# fa2_short_tile_ab.patch (session 54: 1 = no short-keys tile, 2 = it for causal calls too, +4 = mask_tile for ragged keys);
# patches before the last are applied first (a change not yet on main).
# Build (fa2, FFPA_HEAD_DIMS), the FA-2 GPU tests selected by TEST_K, racecheck / synccheck / memcheck of
# sanitize_one.py fa2, then fa2_ws_variants.py VARIANTS (default 0,1,0,1) beside cuDNN. Writes to $OUT.
# On the device: OUT=$OUT [FFPA_HEAD_DIMS=128] [DIMS="128"] [TEST_K=128] bash scripts/dev/fa2_patch_ab.sh [PATCH ...] PATCH
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
[ $# -gt 0 ] || { echo "usage: fa2_patch_ab.sh [PATCH ...] PATCH (the last adds FFPA_DEV_WS=1)"; exit 2; }
PATCHES=()
for p in "$@"; do [ -f "$p" ] && PATCHES+=("$p") || PATCHES+=("scripts/dev/$p"); done
. scripts/dev/with_patch.sh "${PATCHES[@]}"
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-64,128,256} FFPA_DTYPES=${FFPA_DTYPES:-bf16,fp16} FFPA_EXPECT_EXTENSION=1
t0=$(date +%s)
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s; ptxas spills: $(grep -c '[1-9][0-9]* bytes spill' "$OUT/build.log")"
(cd tests && PYTHONPATH=$PWD/.. timeout ${TEST_S:-150} python3 -m pytest -q -p no:cacheprovider -x test_fa2_gpu.py test_fa2_hopper_gpu.py \
  -k "${TEST_K:-128}" > "$OUT/pytest.log" 2>&1
 echo "tests: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head)
for tool in ${TOOLS:-racecheck synccheck memcheck}; do
  PYTHONPATH=$PWD timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 python3 scripts/sanitize_one.py fa2 > "$OUT/$tool.log" 2>&1
  echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1)"
done
PYTHONPATH=$PWD DIMS="${DIMS:-128}" SHAPES="${SHAPES:-8x16x2048 1x32x8192 16x16x1024 32x16x512 64x16x256 128x12x197}" \
  python3 scripts/dev/fa2_ws_variants.py ${VARIANTS:-0,1,0,1} 2>&1 | grep -v Warn | tee "$OUT/ab.txt"
