#!/usr/bin/env bash
# ncu L2 breakdown of FFPA L1 D=2048 causal vs non-causal (dev probe, session 36)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=ffpa_l1,ffpa_l3 FFPA_DTYPES=bf16 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=2048 FFPA_EXPECT_EXTENSION=1
t0=$(date +%s)
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
cat > /tmp/ncu_causal.py <<'PY'
import sys, torch, ffpa_attn
N, D, causal = (int(x) for x in sys.argv[1:4])
q, k, v = (torch.randn(1, 32, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(3):
    ffpa_attn.forward(q, k, v, is_causal=bool(causal), strict=True, level=1)
torch.cuda.synchronize()
PY
M="breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors.sum,lts__t_requests.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_srcunit_tex.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcnode_gpc.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,sm__cycles_active.avg,smsp__inst_executed.sum,l1tex__m_xbar2l1tex_read_bytes.sum,sm__sass_inst_executed_op_global_st.sum,smsp__inst_executed_op_generic_st.sum"
for c in 0 1; do
  PYTHONPATH=$PWD ncu --kernel-name regex:'ffpa_fwd_ws' --launch-skip 2 --launch-count 1 --clock-control base --metrics "$M" python3 /tmp/ncu_causal.py 4096 2048 $c > "$OUT/ncu_c$c.txt" 2>&1
  echo "== causal=$c"; grep -vE "^==PROF==|^  [a-z_]+ *$" "$OUT/ncu_c$c.txt" | grep -E "lts__|dram__|gpu__|sm__|smsp__|l1tex__" | sed 's/ \+/ /g'
done
