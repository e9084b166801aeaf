#!/usr/bin/env bash
# Development probe (#17): ncu of the FP8 kernel (kernels/fa2_fwd_sm90_fp8.cuh) at head dims 128 and 256
# (speed of light, pipe utilisation, stalls, instruction mix), after an fp8 + fa2 sm_90a build.
# Env: NCU_SHAPE "B H N" (default 4 8 8448), SKIP_BUILD=1. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fp8 FFPA_DTYPES=e4m3 FFPA_HEAD_DIMS=128,256
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
cat > /tmp/ncu_fp8.py <<'PY'
import sys, torch, ffpa_attn
B, H, N, D = (int(x) for x in sys.argv[1:5])
q, k, v = (ffpa_attn.quantize_fp8(torch.randn(B, H, N, D, device="cuda"))[0] for _ in range(3))
for _ in range(3):
    ffpa_attn.forward(q, k, v, strict=True)
torch.cuda.synchronize()
PY
read -r B H N <<< "${NCU_SHAPE:-4 8 8448}"
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats --section SchedulerStats"
for D in 128 256; do
  (cd /tmp && ncu --kernel-name regex:'fa2_fwd_fp8' --launch-skip 2 --launch-count 1 $SECTIONS --metrics \
    sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warp_latency_issue_stalled_wait.ratio \
    python3 /tmp/ncu_fp8.py $B $H $N $D) > "$OUT/fp8_d$D.txt" 2>&1
  echo "== D=$D"
  grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc Active|Warp Cycles Per Issued|No Eligible|gmma_cycles|pipe_xu|pipe_fma|pipe_alu|stalled_barrier|stalled_wait|Stall" "$OUT/fp8_d$D.txt" | head -30
done
