# Session 53: the FP8 V^T pre-pass, byte gathers (FFPA_DEV_WS=1) against the word transpose (0), whole calls in
# fp8_probe.py's interleaved timer; then the FP8 tests, the fp8 sanitizers and the fp8 bench on the new form.
# git apply scripts/dev/fp8_vt_bytes_ab.patch first (FFPA_DEV_WS=1 = the byte gathers); OUT=$OUT bash scripts/dev/s53_vt_ab.sh
export MAX_JOBS=16 PYTHONUNBUFFERED=1
t0=$(date +%s)
FFPA_FAMILIES=fp8,fa2,ffpa_l1,ffpa_l2,ffpa_l3 FFPA_DTYPES=bf16,e4m3 FFPA_HEAD_DIMS=64,128,256,512 FFPA_ARCHS=90a \
  python3 -m pip install --no-build-isolation --no-deps . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
SRC=$PWD
cd /tmp
VARIANTS=0,1,0,1 DIMS="128 256 512" CAUSAL="0 1" timeout 200 python3 $SRC/scripts/dev/fp8_probe.py 2>&1 | tee $OUT/ab.txt | tail -40
echo "probe done $(( $(date +%s) - t0 )) s"
cd $SRC/tests
timeout 120 python3 -m pytest -q -p no:cacheprovider test_fp8_vt_gpu.py test_fp8_gpu.py 2>&1 | tail -2
for tool in memcheck racecheck synccheck; do
  FFPA_SANITIZE_NO_CLUSTER=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 python3 ../scripts/sanitize_one.py fp8 > $OUT/san_$tool.log 2>&1
  echo "sanitizer $tool: exit $? $(grep 'ERROR SUMMARY' $OUT/san_$tool.log | tail -1) at $(( $(date +%s) - t0 )) s"
done
cd $SRC
timeout 150 python3 bench/bench.py --preset fp8 --causal-both --gen-bench --out-dir $OUT/bench > $OUT/bench.log 2>&1
echo "bench exit $? at $(( $(date +%s) - t0 )) s"; cat $OUT/bench/*.md
