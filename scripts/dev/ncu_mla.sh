#!/usr/bin/env bash
# Development probe: ncu on the MLA decode kernel (kernels/decode_sm90_mla.cuh) at B=128 S=4096 128/1
# (576/512, bf16): tensor-pipe (gmma) activity, L2 / DRAM throughput, warp stall reasons. Builds the
# decode family at 576 for sm_90a in place (SKIP_BUILD=1 reuses it). Writes $OUT/ncu_mla.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  FFPA_ARCHS=90a FFPA_FAMILIES=decode FFPA_DTYPES=bf16 FFPA_HEAD_DIMS=576 MAX_JOBS=16 \
    python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
export PYTHONPATH=$PWD
cat > /tmp/ncu_mla.py <<'PY'
import torch, ffpa_attn
q = torch.randn(128, 1, 128, 576, device="cuda", dtype=torch.bfloat16)
k = torch.randn(128, 4096, 1, 576, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    ffpa_attn.decode(q, k, k[..., :512])
torch.cuda.synchronize()
PY
METRICS="sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum"
ncu --clock-control none --kernel-name regex:'mla_kernel' --launch-skip 2 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section Occupancy --metrics $METRICS python3 /tmp/ncu_mla.py > "$OUT/ncu_mla.txt" 2>&1
grep -E "gmma|lts__|dram__|gpu__time|cycles_elapsed|Duration|Stall|stall|Warp Cycles|Throughput|Issued" "$OUT/ncu_mla.txt" | head -40
