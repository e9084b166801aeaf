#!/usr/bin/env bash
# Development probe: is the FFPA-shaped Hopper pipeline (kernels/ffpa_ws_pipeline.cuh) bound by L2?
# ncu's L2 / DRAM / tensor-pipe throughput for the decode kernel on MLA 128/1 and the L1 prefill
# kernel at D = 576/512, after a small sm_90a build (SKIP_BUILD=1 reuses one). Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
export MAX_JOBS=16
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  FFPA_ARCHS=90a FFPA_FAMILIES=decode,ffpa_l1 FFPA_DTYPES=bf16 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=576 \
    python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
cat > /tmp/ncu_l2.py <<'PY'
import sys, torch, ffpa_attn
what = sys.argv[1]
if what == "decode":
    q = torch.randn(128, 1, 128, 576, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(128, 4096, 1, 576, device="cuda", dtype=torch.bfloat16)
    fn = lambda: ffpa_attn.decode(q, k, k[..., :512])
else:
    q, k = (torch.randn(1, 32, 4096, 576, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    fn = lambda: ffpa_attn.forward(q, k, k[..., :512], strict=True, level=1)
for _ in range(3):
    fn()
torch.cuda.synchronize()
PY
METRICS="lts__t_bytes.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,lts__t_sectors_srcunit_tex.sum"
for what in decode prefill; do
  for clk in base none; do
    ncu --clock-control $clk --kernel-name regex:'ws_kernel' --launch-skip 2 --launch-count 1 --section SpeedOfLight --metrics $METRICS \
      python3 /tmp/ncu_l2.py $what > "$OUT/ncu_l2_${what}_$clk.txt" 2>&1
    echo "== $what clock-control $clk"
    grep -E "lts__|dram__|gmma|gpu__time|cycles_elapsed|xbar2l1tex|Memory Throughput|Compute \(SM\)|L2 Cache Throughput|DRAM Throughput|Duration" "$OUT/ncu_l2_${what}_$clk.txt" | head -20
  done
done
