# Session 53: the FP8 parts of the check on the landed pre-pass: build (fp8 + the bf16 kernels the bench puts beside
# it), the FP8 tests, the fp8 bench. OUT=$OUT bash scripts/dev/s53_fp8_check.sh
export MAX_JOBS=16 PYTHONUNBUFFERED=1
t0=$(date +%s)
FFPA_FAMILIES=fp8,fa2,ffpa_l1,ffpa_l2,ffpa_l3 FFPA_DTYPES=bf16,e4m3 FFPA_HEAD_DIMS=64,128,256,512 FFPA_ARCHS=90a \
  python3 -m pip install --no-build-isolation --no-deps . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"; nvidia-smi --query-gpu=name --format=csv,noheader
(cd tests && timeout 120 python3 -m pytest -q -p no:cacheprovider test_fp8_vt_gpu.py test_fp8_gpu.py 2>&1 | tail -2)
timeout 200 python3 bench/bench.py --preset fp8 --causal-both --gen-bench --out-dir $OUT/bench > $OUT/bench.log 2>&1
echo "bench exit $? at $(( $(date +%s) - t0 )) s"; cat $OUT/bench/*.md
