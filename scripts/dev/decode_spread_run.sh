# Dev: a decode-only build of MLA's 576/512 (bf16, sm_90a, in place), the merge / Hopper decode tests, the
# merge modes' A/B (scripts/dev/decode_merge_ab.py) and the per-sequence-lengths probe
# (scripts/dev/decode_varlen_probe.py). SKIP_BUILD=1 / SKIP_TESTS=1 skip those steps; logs to $OUT.
set -uo pipefail
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=decode FFPA_ACCS=fp32 FFPA_EXPECT_EXTENSION=1 FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-576} FFPA_DTYPES=bf16
t0=$(date +%s)
[ "${SKIP_BUILD:-0}" = 1 ] || python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
[ "${SKIP_TESTS:-0}" = 1 ] || (cd tests && PYTHONPATH=$PWD/.. timeout ${TEST_S:-240} python3 -m pytest -q -p no:cacheprovider ${TESTS:-test_decode_merge_gpu.py test_decode_hopper_gpu.py test_decode_splits.py} > $OUT/pytest.log 2>&1; echo "tests rc $?: $(tail -1 $OUT/pytest.log)"; grep -E "^(FAILED|ERROR)|Error" $OUT/pytest.log | head -20)
echo "tests done $(( $(date +%s) - t0 )) s"
for v in 0 1; do VARLEN=$v MODES=${MODES:-kernel,spread,fused,auto} SHAPES="${SHAPES:-16,16384,16,1,576,512 4,65536,16,1,576,512 1,65536,16,1,576,512 8,8192,4,1,576,512}" PYTHONPATH=$PWD timeout 150 python3 scripts/dev/decode_merge_ab.py 2>&1 | tail -5; done
PYTHONPATH=$PWD MODES=auto,kernel timeout 120 python3 scripts/dev/decode_varlen_probe.py 2>&1 | tail -16
echo "all done $(( $(date +%s) - t0 )) s"
