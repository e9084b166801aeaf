#!/usr/bin/env bash
# Development probe (prepared in session 45, not yet run): the consumer warpgroup index through __shfl_sync
# from lane 0 (uniform_wg.patch) in the MLA decode kernel, FFPA's warp-specialised pipeline (its one-copy
# consumers) and the FP8 kernel, as fa2_fwd_sm90_ws.cuh's run() has it since session 45: taken from
# threadIdx.x the index is not provably warp-uniform to ptxas, and values derived from it (the MLA decode
# loop's (k & 1) == c turns, FFPA's column offsets) leave the uniform datapath. Local cubins shrank with it:
# MLA 576/512 71808 -> 68864 bytes of code, FFPA L1 D = 512 -3%, FP8 D = 128 -1%. Two builds (as is /
# patched, the same families and head dims, sm_90a), each benched (alternating processes, not interleaved:
# the SDPA peers beside each row normalise the host); the patched build also runs its families' GPU tests
# and racecheck / synccheck of sanitize_one.py. Reverts the patch. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=decode,ffpa_l1,fp8,fa2 FFPA_DTYPES=bf16 FFPA_ACCS=fp32
export FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-128,512,576,1024} FFPA_EXPECT_EXTENSION=1
bench_side() {  # $1: side name
  python3 bench/bench.py --B 1 --H 32 --N 8192 --D 512 1024 --dtype bf16 --causal-both \
    --kernels sdpa_efficient ffpa_l1 --warmup 5 --iters 25 --gen-bench --out-dir "/tmp/uwg/ffpa_$1" > "$OUT/ffpa_$1.log" 2>&1
  cat "/tmp/uwg/ffpa_$1"/*.md 2>/dev/null | grep -E "^(\| (FFPA|SDPA)|Device)" | grep -v err
  python3 bench/bench_decode.py --shapes 16x16384x16x1x576x512 128x4096x128x1x576x512 --layouts contiguous varlen \
    --warmup 5 --iters 30 --no-latency --no-hf --out-dir "/tmp/uwg/decode_$1" 2>&1 | grep -v "Warning\|return F\." | tail -6
  DIMS="128" SHAPES="4x8x8448 1x32x8192" python3 scripts/dev/fp8_probe.py 2>&1 | grep -v Warn | tail -4
}
for side in as_is patched; do
  t0=$(date +%s)
  if [ $side = patched ]; then . scripts/dev/with_patch.sh scripts/dev/uniform_wg.patch; fi
  rm -rf build
  python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build_$side.log" 2>&1 || { tail -30 "$OUT/build_$side.log"; exit 1; }
  echo "== $side: build $(( $(date +%s) - t0 )) s"
  bench_side $side
  if [ $side = patched ]; then
    (cd tests && timeout ${TEST_S:-200} python3 -m pytest -q -p no:cacheprovider -x test_decode_gpu.py test_decode_hopper_gpu.py test_ffpa_gpu.py test_fp8_gpu.py \
      -k "${TEST_K:-mla or 576 or 512 or 128}" > "$OUT/pytest.log" 2>&1; echo "tests: $(tail -1 "$OUT/pytest.log")")
    for tool in racecheck synccheck; do
      timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 python3 scripts/sanitize_one.py decode,ffpa,fp8 > "$OUT/$tool.log" 2>&1
      echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1)"
    done
  fi
done
