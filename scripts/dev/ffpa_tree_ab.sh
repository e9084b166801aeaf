#!/usr/bin/env bash
# Development A/B (#16): this tree against an older one (ab_old.tar in the repository root, untracked:
# git archive -o ab_old.tar <rev> csrc ffpa_attn tools setup.py pyproject.toml). Both built in place
# (sm_90a, FFPA_FAMILIES / FFPA_HEAD_DIMS / FFPA_DTYPES as given, defaults ffpa_l1 / 512 / bf16), this
# tree's GPU tests (TESTS, default test_ffpa_gpu.py; SKIP_TESTS=1), then each bench cell of CELLS (";"-
# separated bench.py arguments; "fp8:<args>" runs bench_fp8.py, "decode:<args>" bench_decode.py, e.g.
# FFPA_FAMILIES=decode FFPA_HEAD_DIMS=64,128 CELLS="decode:--shapes 64x8192x32x8x128 --layouts contiguous
# varlen") on both builds in turn, twice; prints kernel, shape, causal, TFLOPS (decode: its own lines).
# SKIP_BUILD=1 reuses the builds of an earlier call, BUILD_ONLY=1 stops after them. VARIANTS: more trees timed
# beside, each a copy of this one with one text replaced, one per line: "name|file|old text|new text" (e.g.
# "ahead4|csrc/include/ffpa/traits/decode_traits.h|t.l2_ahead = 2;|t.l2_ahead = 4;"). Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=${FFPA_FAMILIES:-ffpa_l1} FFPA_ACCS=fp32 FFPA_EXPECT_EXTENSION=1
export FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-512} FFPA_DTYPES=${FFPA_DTYPES:-bf16}
if [ "${SKIP_BUILD:-0}" != 1 ]; then  # SKIP_BUILD=1: both builds are there from an earlier call
  rm -rf /tmp/ab_old && mkdir -p /tmp/ab_old && tar -xf ab_old.tar -C /tmp/ab_old || exit 1
  (cd /tmp/ab_old && python3 setup.py build_ext --inplace > "$OUT/build_old.log" 2>&1 || echo "old build failed") &
  mapfile -t vspecs <<< "${VARIANTS:-}"
  for spec in "${vspecs[@]}"; do
    [ -z "$spec" ] && continue
    name=${spec%%|*}
    rm -rf /tmp/ab_v_$name && mkdir -p /tmp/ab_v_$name && cp -r csrc ffpa_attn tools setup.py pyproject.toml /tmp/ab_v_$name/
    rm -f /tmp/ab_v_$name/ffpa_attn/_C*.so
    python3 - "$spec" <<'PY' || exit 1
import sys
name, path, old, new = sys.argv[1].split("|")
p = f"/tmp/ab_v_{name}/{path}"
s = open(p).read()
assert old in s, f"variant {name}: {old!r} not in {path}"
open(p, "w").write(s.replace(old, new))
PY
    (cd /tmp/ab_v_$name && python3 setup.py build_ext --inplace > "$OUT/build_$name.log" 2>&1 || echo "variant $name build failed") &
  done
  python3 setup.py build_ext --inplace > "$OUT/build_new.log" 2>&1 || { tail -30 "$OUT/build_new.log"; exit 1; }
  wait
fi
VNAMES=""
mapfile -t vspecs <<< "${VARIANTS:-}"
for spec in "${vspecs[@]}"; do [ -n "$spec" ] && VNAMES="$VNAMES ${spec%%|*}"; done
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  (cd tests && PYTHONPATH=$PWD/.. timeout ${TEST_TIMEOUT:-300} python3 -m pytest -q -p no:cacheprovider ${TESTS:-test_ffpa_gpu.py} \
     > "$OUT/pytest.log" 2>&1; echo "tests rc $?: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20)
fi
IFS=';' read -ra cells <<< "${CELLS:---B 1 --H 32 --N 8192 --D 512 --causal-both --kernels ffpa_auto}"
for r in 1 2; do for t in new old $VNAMES; do
  dir=$PWD; [ $t = old ] && dir=/tmp/ab_old; [ $t != old ] && [ $t != new ] && dir=/tmp/ab_v_$t
  echo "== $t round $r"
  for c in "${cells[@]}"; do
    if [[ "$c" == fp8:* ]]; then  # bench_fp8.py's arguments after "fp8:"
      rm -rf /tmp/ab_f_$t
      PYTHONPATH=$dir python3 bench/bench_fp8.py ${c#fp8:} --warmup 10 --iters 40 --out-dir /tmp/ab_f_$t > /tmp/ab_$t.log 2>&1 || tail -5 /tmp/ab_$t.log
      python3 -c "
import json
d = json.load(open('/tmp/ab_f_$t/fp8.json'))
for r in d.get('results', d.get('rows', [])):
    if r.get('kernel') in ('fp8', 'ffpa_auto', 'fa2'):
        print(r['kernel'], r.get('B'), r.get('H', r.get('Hq')), r.get('N', r.get('L')), r.get('D'), 'causal' if r.get('causal') else 'nc', round(r['tflops'], 1),
              ('rmse %.3e' % r['rel_rmse']) if r.get('rel_rmse') is not None else '')
"
      continue
    fi
    if [[ "$c" == decode:* ]]; then  # bench_decode.py's arguments after "decode:"
      (cd bench && PYTHONPATH=$dir python3 bench_decode.py ${c#decode:} --no-hf --no-latency --iters 40 --out-dir /tmp/ab_d_$t \
         2>&1 | grep -E "ffpa_decode" | sed 's/; sdpa_flash.*sdpa_cudnn/; cudnn/' | cut -c1-170)
      continue
    fi
    PYTHONPATH=$dir python3 bench/bench.py $c --warmup 5 --iters 25 --json /tmp/ab_$t.json > /tmp/ab_$t.log 2>&1 || tail -5 /tmp/ab_$t.log
    python3 -c "
import json
for r in json.load(open('/tmp/ab_$t.json'))['results']:
    print(r['kernel'], r['dtype'], r['B'], r['Hq'], r['L'], r['D'], r['Dv'], 'causal' if r['causal'] else 'nc', round(r['tflops'], 1))
"
  done
done; done
