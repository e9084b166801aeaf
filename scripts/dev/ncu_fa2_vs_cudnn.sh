#!/usr/bin/env bash
# Development probe (#15): ncu of our FA-2 wgmma kernel and SDPA's cuDNN kernel on the same shape,
# side by side (speed of light, tensor pipe, stalls, occupancy, launch), after an FA-2-only build.
# Env: PROBE_DIMS (head dims, default 128,256), NCU_SHAPE "B H N" (default 1 32 8192), CAUSAL=1 (causal
# calls; also SM active cycles min / avg / max against elapsed: the tail). Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
export MAX_JOBS=16
FFPA_FAMILIES=fa2 FFPA_DTYPES=bf16 FFPA_HEAD_DIMS=${PROBE_DIMS:-128,256} python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
cat > /tmp/ncu_fa2.py <<'PY'
import sys, torch, ffpa_attn
from torch.nn.attention import SDPBackend, sdpa_kernel
which, B, H, N, D, causal = sys.argv[1], *[int(x) for x in sys.argv[2:7]]
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(3):
    if which == "ours":
        ffpa_attn.forward(q, k, v, is_causal=bool(causal), strict=True)
    else:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
torch.cuda.synchronize()
PY
read -r B H N <<< "${NCU_SHAPE:-1 32 8192}"
C=${CAUSAL:-0}
# (the stall reasons: warps stalled per issued instruction, by reason; the top ones are printed below)
METRICS="--metrics sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.max,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
SECTIONS="$METRICS --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats --section InstructionStats"
for D in $(echo "${PROBE_DIMS:-128,256}" | tr ',' ' '); do
  ncu --kernel-name regex:'fa2_fwd' --launch-skip 2 --launch-count 1 $SECTIONS python3 /tmp/ncu_fa2.py ours $B $H $N $D $C > "$OUT/ours_d$D.txt" 2>&1
  ncu --kernel-name regex:'cudnn|sm90|flash|fmha' --launch-skip 2 --launch-count 1 $SECTIONS python3 /tmp/ncu_fa2.py cudnn $B $H $N $D $C > "$OUT/cudnn_d$D.txt" 2>&1
  for who in ours cudnn; do
    echo "== $who D=$D: $(grep -m1 -E '^  [a-zA-Z_].*\(' "$OUT/${who}_d$D.txt" | cut -c1-110)"
    grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Executed Ipc Active|Registers Per Thread|Threads  |Block Size|Grid Size|Dynamic Shared Memory Per Block|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Eligible Warps|No Eligible|Active Warps Per|sm__cycles" "$OUT/${who}_d$D.txt" | head -28
    echo "   stalls per issued instruction, top 8:"
    grep -E "smsp__average_warps_issue_stalled_.*_per_issue_active.ratio" "$OUT/${who}_d$D.txt" |
      awk '{print $NF, $1}' | sort -rn | head -8 | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//; s/^/     /'
  done
done
