set -uo pipefail
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=ffpa_l1,ffpa_l3 FFPA_ACCS=fp32 FFPA_DTYPES=bf16 FFPA_HEAD_DIMS=${HD:-1024,2048,4096} FFPA_EXPECT_EXTENSION=1 PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps . > $OUT/build.log 2>&1 || { grep -B5 -A20 -m3 "error" $OUT/build.log | head -60; exit 1; }
echo build $(( $(date +%s)-t0 ))
(cd tests && timeout 240 python3 -m pytest -q -x -p no:cacheprovider test_ffpa_gpu.py -k "${TK:-2048 or 4096 or hopper or auto or persistent or shared_memory}" > $OUT/pytest.log 2>&1; echo "tests rc $?: $(tail -1 $OUT/pytest.log)"; grep -E "^(FAILED|ERROR)|Error|assert" $OUT/pytest.log | head -20)
echo t $(( $(date +%s)-t0 ))
timeout 200 python3 bench/bench.py --shapes ${SH:-1x32x4096} --D ${BD:-2048} --dtype bf16 --causal-both --kernels sdpa_efficient ffpa_l3 ffpa_l1 --warmup 5 --iters 25 > $OUT/bench.log 2>&1; echo bench rc $?; grep -E "causal:|SDPA EA \||FFPA L1 \||FFPA L3 \||speedup" $OUT/bench.log | tail -25
echo total $(( $(date +%s)-t0 ))
