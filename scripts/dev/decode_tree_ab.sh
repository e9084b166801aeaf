#!/usr/bin/env bash
# Development A/B (#14): this tree's decode kernels against an older tree's (ab_old.tar in the repository
# root, untracked: git archive -o ab_old.tar <rev> csrc ffpa_attn tools setup.py pyproject.toml). Both built
# in place (decode family, sm_90a, bf16, DIMS default 64,128,256), this tree's decode GPU tests (TESTS=0
# skips them), then bench_decode.py over SHAPES on both builds in turn, twice (contiguous and per-sequence
# lengths; SDPA's kernels beside). SKIP_BUILD=1 reuses the builds of an earlier call. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=decode FFPA_ACCS=fp32 FFPA_DTYPES=bf16 FFPA_HEAD_DIMS=${DIMS:-64,128,256}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  rm -rf /tmp/ab_old && mkdir -p /tmp/ab_old && tar -xf ab_old.tar -C /tmp/ab_old || exit 1
  (cd /tmp/ab_old && python3 setup.py build_ext --inplace > "$OUT/build_old.log" 2>&1 || echo "old build failed") &
  python3 setup.py build_ext --inplace > "$OUT/build_new.log" 2>&1 || { tail -30 "$OUT/build_new.log"; exit 1; }
  wait
fi
if [ "${TESTS:-1}" = 1 ]; then
  (cd tests && PYTHONPATH=$PWD/.. timeout ${TEST_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider -x \
     test_decode_gpu.py test_decode_merge_gpu.py test_decode_mask_gpu.py > "$OUT/pytest.log" 2>&1
   echo "tests rc $?: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20)
fi
SHAPES=${SHAPES:-"8x32768x32x8x128 64x8192x32x8x128 1x131072x32x8x128 64x8192x32x8x64 32x8192x32x8x256"}
for round in 1 2; do
  for t in new old; do
    dir=$PWD; [ $t = old ] && dir=/tmp/ab_old
    echo "== round $round $t"
    (cd bench && PYTHONPATH=$dir python3 bench_decode.py --shapes $SHAPES --layouts contiguous varlen --no-hf --no-latency \
       --iters 40 --out-dir /tmp/o_$t 2>&1 | grep -E "ffpa_decode" | sed 's/; sdpa_flash.*sdpa_cudnn/; cudnn/' | cut -c1-170)
  done
done
