#!/usr/bin/env bash
# Development probe (#16): ncu of the FFPA L1 Hopper kernel (speed of light, tensor pipe, shared-memory
# traffic, stalls) at a few head dims, after an ffpa_l1-only build (SKIP_BUILD=1 to reuse one).
# Env: PROBE_DIMS (default 512,1024), NCU_SHAPE "B H N" (default 1 32 4096). Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
export MAX_JOBS=16
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  FFPA_ARCHS=90a FFPA_FAMILIES=ffpa_l1 FFPA_DTYPES=bf16 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${PROBE_DIMS:-512,1024} \
    python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
cat > /tmp/ncu_ffpa.py <<'PY'
import sys, torch, ffpa_attn
B, H, N, D = (int(x) for x in sys.argv[1:5])
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(3):
    ffpa_attn.forward(q, k, v, strict=True, level=1)
torch.cuda.synchronize()
PY
read -r B H N <<< "${NCU_SHAPE:-1 32 4096}"
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SchedulerStats --section SourceCounters --section Occupancy --section LaunchStats"
METRICS="--metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__sass_inst_executed_op_shared_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"
for D in $(echo "${PROBE_DIMS:-512,1024}" | tr ',' ' '); do
  ncu --kernel-name regex:'ffpa_fwd_ws' --launch-skip 2 --launch-count 1 $SECTIONS $METRICS python3 /tmp/ncu_ffpa.py $B $H $N $D > "$OUT/ncu_ffpa_d$D.txt" 2>&1
  echo "== D=$D"
  grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|DRAM Throughput|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|gmma_cycles|wavefronts_mem_shared|shared_st|bank_conflicts|Shared Memory|Stall" "$OUT/ncu_ffpa_d$D.txt" | head -60
done
