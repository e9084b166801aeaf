#!/usr/bin/env bash
# Development probe (not part of the check): the mma.sync decode kernel's tile at D = 128 in three builds
# (decode-only, sm_90a, bf16), each in its own copy of the tree, timed in turn twice (bench_decode.py,
# L2 flushed, medians): "main" (the tree's tile), "w8k128" (8 warps, 128-key tiles, a 96 KiB ring, two
# blocks a SM) and "w8k64" (8 warps, 64-key tiles, a 96 KiB ring, two blocks a SM). DIMS (default 128):
# the head dims built and timed; COND (default: D = 128 only) the traits condition the variants apply
# under; VARIANTS (default both) which to build; PATCH: a patch applied to every variant's copy first
# (session 31: w4k128, 4 warps x 32 keys, needs scripts/dev/decode_snt4.patch); TESTS=1 runs the decode
# GPU tests on each variant. The edit lands before the tile's return in both of decode_tile's 8-warp
# and 4-warp paths. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
DIMS=${DIMS:-128}
COND=${COND:-"head_dim == 128 && head_dim_v == 128"}
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=decode FFPA_ACCS=fp32 FFPA_DTYPES=bf16 FFPA_HEAD_DIMS=$DIMS
declare -A EDIT=(
  [w8k128]='t.warps = 8; t.block_n = 128; t.min_blocks = 2; t.stages = 96 * 1024 / (t.block_n * t.chunk * 2);'
  [w8k64]='t.warps = 8; t.block_n = 64; t.min_blocks = 2; t.stages = 96 * 1024 / (t.block_n * t.chunk * 2);'
  [w4k128]='t.warps = 4; t.block_n = 128; t.min_blocks = 2; t.stages = 96 * 1024 / (t.block_n * t.chunk * 2);'
)
VARIANTS=${VARIANTS:-"${!EDIT[*]}"}
for v in $VARIANTS; do
  rm -rf /tmp/ab_$v && mkdir -p /tmp/ab_$v && cp -r csrc ffpa_attn tools setup.py pyproject.toml /tmp/ab_$v/ 2>/dev/null
  rm -f /tmp/ab_$v/ffpa_attn/_C*.so
  [ -n "${PATCH:-}" ] && (cd /tmp/ab_$v && { patch -p1 -s < "$OLDPWD/$PATCH" || git apply "$OLDPWD/$PATCH"; }) || true
  python3 - "$v" "${EDIT[$v]}" "$COND" <<'PY'
import sys
v, edit, cond = sys.argv[1], sys.argv[2], sys.argv[3]
p = f"/tmp/ab_{v}/csrc/include/ffpa/traits/decode_traits.h"
s = open(p).read()
for anchor in ("    t.stages = 96 * 1024 / (t.block_n * t.chunk * 2);\n    return t;",
               "  t.stages = (t.min_blocks == 1 ? 128 : 64) * 1024 / (t.block_n * t.chunk * 2);\n  return t;"):
    assert anchor in s, anchor
    ret = anchor.split("\n")[1]
    s = s.replace(anchor, anchor.replace(ret, ret.replace("return t;", f"if ({cond}) {{ {edit} }}\n") + ret))
open(p, "w").write(s)
PY
  (cd /tmp/ab_$v && python3 setup.py build_ext --inplace > "$OUT/build_$v.log" 2>&1 || echo "build $v failed") &
done
python3 setup.py build_ext --inplace > "$OUT/build_main.log" 2>&1 || echo "build main failed"
wait
for v in main $VARIANTS; do
  f="$OUT/build_$v.log"; echo "$v: $(grep -c 'error' "$f") error lines"
done
if [ "${TESTS:-0}" = 1 ]; then
  for v in $VARIANTS; do
    (cd tests && PYTHONPATH=/tmp/ab_$v timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider test_decode_gpu.py test_decode_merge_gpu.py \
       > "$OUT/pytest_$v.log" 2>&1; echo "$v tests rc $?: $(tail -1 "$OUT/pytest_$v.log")")
  done
fi
SHAPES=${SHAPES:-"8x32768x32x8x128 64x8192x32x8x128 1x131072x32x8x128"}
for round in 1 2; do
  for v in main $VARIANTS; do
    dir=$PWD; [ "$v" != main ] && dir=/tmp/ab_$v
    echo "== round $round $v"
    (cd bench && PYTHONPATH=$dir python3 bench_decode.py --shapes $SHAPES --layouts contiguous varlen --no-hf --no-latency \
       --iters 40 --out-dir /tmp/o_$v 2>&1 | grep -E "ffpa_decode" | sed 's/; sdpa_flash.*sdpa_cudnn/; cudnn/' | cut -c1-170)
  done
done
