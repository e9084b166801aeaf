#!/usr/bin/env bash
# Development probe (not part of the check): host time per call of forward routed to decode against
# SDPA (overhead_probe.py), decode()'s eager / CUDA-graph latency, the Hugging Face Llama-style model's
# time per token (bench_decode.hf_probe: interleaved rounds, medians) and, with TESTS=1, the decode /
# fast-path / HF GPU tests, on a reduced sm_90a build (FA-2 and decode at D = 128). Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=${FAMILIES:-fa2,decode} FFPA_ACCS=fp32 FFPA_DTYPES=${DTYPES:-bf16,fp16} \
  FFPA_HEAD_DIMS=${PROBE_DIMS:-128} FFPA_EXPECT_EXTENSION=1 PYTHONUNBUFFERED=1
t0=$(date +%s)
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { grep -B2 -A8 "error" "$OUT/build.log" | head -40; exit 1; }
  echo "build $(( $(date +%s) - t0 )) s"
fi
if [ "${TESTS:-0}" = 1 ]; then
  (cd tests && timeout 300 python3 -m pytest -q -p no:cacheprovider ${TEST_K:+-k "$TEST_K"} ${TEST_FILES:-test_fastpath_cpu.py test_decode_api.py test_hf_llama_gpu.py} > "$OUT/pytest.log" 2>&1
   echo "tests rc $?: $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20)
fi
for _ in 1 2; do python3 scripts/dev/overhead_probe.py 2>&1 | grep "us/call"; done
if [ "${CPROFILE:-0}" = 1 ]; then python3 scripts/dev/overhead_probe.py 2>&1 | grep -v "us/call" | head -40; fi
ROOT=$PWD
(cd /tmp && ROOT=$ROOT python3 - <<'PY'  # not from the checkout: the installed package (with its _C)
import os, sys, torch, ffpa_attn
sys.path.insert(0, os.path.join(os.environ["ROOT"], "bench"))
import bench_decode
bench_decode.HF_ROUNDS = int(__import__("os").environ.get("HF_ROUNDS", "5"))
for dt in (torch.bfloat16, torch.float16):
    print(bench_decode.latency_probe(torch, ffpa_attn, dt))
print(ffpa_attn._ops._C is not None, bench_decode.hf_probe(torch, ffpa_attn))
PY
)
echo "total $(( $(date +%s) - t0 )) s"
