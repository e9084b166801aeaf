#!/usr/bin/env bash
# Development check (#16, session 29): this tree against HEAD's (ab_old.tar: git archive -o ab_old.tar HEAD csrc
# ffpa_attn tools setup.py pyproject.toml, untracked) -- the ffpa_l1 GPU tests on this tree, then bench cells
# (ffpa_auto, causal both) of both builds in turn twice. Writes to $OUT.
set -uo pipefail
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=ffpa_l1 FFPA_ACCS=fp32 FFPA_EXPECT_EXTENSION=1
mkdir -p /tmp/ab_old && tar -xf ab_old.tar -C /tmp/ab_old
(cd /tmp/ab_old && FFPA_DTYPES=bf16 FFPA_HEAD_DIMS=448,512,576,640 python3 setup.py build_ext --inplace > $OUT/build_old.log 2>&1 || echo old build failed) &
FFPA_DTYPES=bf16,fp16 FFPA_HEAD_DIMS=320,448,512,576,640 python3 setup.py build_ext --inplace > $OUT/build_new.log 2>&1 || { tail -30 $OUT/build_new.log; exit 1; }
wait
echo built
(cd tests && PYTHONPATH=$PWD/.. timeout 240 python3 -m pytest -q -x -p no:cacheprovider test_ffpa_gpu.py 2>&1 | grep -v SKIPPED | tail -8)
for r in 1 2; do for t in new old; do
  dir=$PWD; [ $t = old ] && dir=/tmp/ab_old
  echo "== $t round $r"
  PYTHONPATH=$dir python3 bench/bench.py --shapes 1x32x8192 4x16x2048 --D 448 512 640 --dtype bf16 --causal-both --kernels ffpa_auto --warmup 5 --iters 25 --json /tmp/o_$t.json > /tmp/o_$t.log 2>&1 || tail -5 /tmp/o_$t.log
  PYTHONPATH=$dir python3 bench/bench.py --B 1 --H 32 --N 8192 --D 576 --Dv 512 --dtype bf16 --causal-both --kernels ffpa_auto --warmup 5 --iters 25 --json /tmp/o_${t}_mla.json > /tmp/o_$t.log 2>&1 || tail -5 /tmp/o_$t.log
  python3 -c "
import json
for f in ('/tmp/o_$t.json', '/tmp/o_${t}_mla.json'):
    for r in json.load(open(f))['results']:
        print(r['kernel'], r['B'], r['Hq'], r['L'], r['D'], r['Dv'], 'causal' if r['causal'] else 'nc', round(r['tflops'], 1))
"
done; done
