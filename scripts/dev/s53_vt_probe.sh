# Session 53: the FP8 V^T pre-pass's time per call (torch profiler) and ncu's reading of it; then the FP8 tests.
# OUT=$OUT bash scripts/dev/s53_vt_probe.sh   (FFPA_PROBE_TESTS=0: no tests)
export MAX_JOBS=16
t0=$(date +%s)
FFPA_FAMILIES=fp8 FFPA_DTYPES=e4m3 FFPA_ARCHS=90a python3 -m pip install --no-build-isolation --no-deps . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo build $(( $(date +%s) - t0 )) s
SRC=$PWD
cd /tmp
for s in "4 8 8448 256 0" "1 32 8192 256 0" "4 8 8448 128 0" "4 8 8448 256 1" "4 8 8448 512 0" "4 8 8448 64 0"; do
  python3 $SRC/scripts/dev/fp8_call_kernels.py $s 2>&1 | grep -v Warn
done 2>&1 | grep -v "warn_once\|acc_events" | tee $OUT/calls.txt
for d in 256 512; do
  ncu --kernel-name regex:fp8_v_transpose --launch-count 1 --section SpeedOfLight python3 $SRC/scripts/dev/fp8_call_kernels.py 4 8 8448 $d 0 > $OUT/ncu_vt_$d.txt 2>&1
  grep -E "DRAM Throughput|Duration|L1/TEX Cache|Compute \(SM\)" $OUT/ncu_vt_$d.txt
done
if [ "${FFPA_PROBE_TESTS:-1}" = 1 ]; then
  cd $SRC/tests && PYTHONPATH= timeout 300 python3 -m pytest -q -x -p no:cacheprovider test_fp8_vt_gpu.py test_fp8_gpu.py 2>&1 | tail -5
fi
