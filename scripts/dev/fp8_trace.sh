#!/usr/bin/env bash
# Per-tile timeline of the FA-2-style FP8 kernel (#17, session 34): applies scripts/dev/fp8_trace.patch
# (SM-clock stamps by lane 0 of each consumer warpgroup of blocks 0..3 into a global array, printed by a
# one-thread kernel the launcher runs after the attention kernel), builds an FP8-only sm_90a extension
# (D = 128, or FFPA_HEAD_DIMS), runs the shapes given and reports per-phase cycle medians and how the two
# consumers' phases line up (scripts/dev/fp8_trace_report.py). Reverts the patch after. Note: the
# stamps change ptxas's schedule (the softmax stays between the two wgmma waits, as with
# fp8_defer_pv_wait.patch), which session 20 measured at the same speed. On the device:
# OUT=$OUT bash scripts/dev/fp8_trace.sh ["B H N D causal" ...]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fp8_trace.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fp8 FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-128} FFPA_DTYPES=e4m3 FFPA_EXPECT_EXTENSION=1 PYTHONUNBUFFERED=1
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
cat > "$OUT/trace_run.py" <<'P'
import sys, torch, ffpa_attn
B, H, N, D, causal = (int(x) for x in sys.argv[1:6])
q, k, v = (torch.randn(B, H, N, D, device="cuda").to(torch.float8_e4m3fn) for _ in range(3))
for _ in range(3):
    ffpa_attn.forward(q, k, v, is_causal=bool(causal), strict=True); torch.cuda.synchronize()
print("=== RUN", flush=True)
ffpa_attn.forward(q, k, v, is_causal=bool(causal), strict=True); torch.cuda.synchronize()
print("=== END", flush=True)
P
[ $# -gt 0 ] || set -- "1 32 8192 128 0" "4 8 8448 128 0"
n=0
for c in "$@"; do
  n=$((n + 1)); f="$OUT/fp8trace_${n}_$(echo $c | tr ' ' _).log"
  PYTHONPATH=$PWD python3 "$OUT/trace_run.py" $c > "$f" 2>&1 || { tail -5 "$f"; continue; }
  echo "== B H N D causal = $c"; python3 scripts/dev/fp8_trace_report.py "$f"
done
