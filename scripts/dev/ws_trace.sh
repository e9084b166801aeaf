#!/usr/bin/env bash
# Per-tile timeline of the warp-specialised FA-2 kernel (#15; rebased onto the kernel of session 50):
# applies scripts/dev/fa2_ws_trace.patch (SM-clock stamps by lane 0 of each consumer warpgroup of blocks 0..3
# straight into a device array, a counter in the consumer's Reader: no shared memory taken, so D = 128 keeps its
# three K/V stages; every block's start, end and SM; printed by a one-thread kernel the launcher runs after the
# call: no printf in the kernel, whose call made ptxas serialise the wgmmas, C7510), builds an FA-2-only sm_90a
# bf16 extension (D = 128, or FFPA_HEAD_DIMS), runs a few shapes and reports per-transition cycle medians and
# the tail (scripts/dev/ws_trace_report.py). Compiled in session 46 (D = 64 / 96 / 128 / 256: no spills, no
# C75xx), not yet run. Reverts the patch after. On the device:
# OUT=$OUT [FFPA_HEAD_DIMS=64,128] [SPANS_ONLY=1] bash scripts/dev/ws_trace.sh ["B H N D causal" ...]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_ws_trace.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-128} FFPA_DTYPES=bf16 FFPA_EXPECT_EXTENSION=1 PYTHONUNBUFFERED=1
# SPANS_ONLY=1: no per-tile stamps, only every block's start, end and SM (the tail, uninstrumented)
[ "${SPANS_ONLY:-0}" = 1 ] && export NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:-} -DFFPA_DEV_SPANS_ONLY"
python3 -m pip install --no-build-isolation --no-deps -v . > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
cat > "$OUT/trace_run.py" <<'P'
import sys, torch, ffpa_attn
B, H, N, D, causal = (int(x) for x in sys.argv[1:6])
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(2):
    ffpa_attn.forward(q, k, v, is_causal=bool(causal), strict=True); torch.cuda.synchronize()
print("=== RUN", flush=True)
ffpa_attn.forward(q, k, v, is_causal=bool(causal), strict=True); torch.cuda.synchronize()
print("=== END", flush=True)
P
[ $# -gt 0 ] || set -- "8 16 2048 128 0" "2 16 4096 128 0" "8 16 2048 128 1"
n=0
for c in "$@"; do
  n=$((n + 1)); f="$OUT/trace_${n}_$(echo $c | tr ' ' _).log"
  python3 "$OUT/trace_run.py" $c > "$f" 2>&1 || { tail -5 "$f"; continue; }
  echo "== B H N D causal = $c"; python3 scripts/dev/ws_trace_report.py "$f"
done
