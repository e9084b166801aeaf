#!/usr/bin/env bash
# Development probe (#17): ncu of the FP8 FFPA-style kernel (kernels/ffpa_fwd_sm90_fp8.cuh) at D = 512,
# causal against not (tensor-pipe activity, issue stalls, duration), after an fp8 sm_90a build in place.
# Env: NCU_SHAPE "B H N" (default 4 8 8448), SKIP_BUILD=1. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  FFPA_ARCHS=90a FFPA_FAMILIES=fp8,ffpa_l1 FFPA_DTYPES=e4m3,bf16 FFPA_HEAD_DIMS=512 MAX_JOBS=16 \
    python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
export PYTHONPATH=$PWD
cat > /tmp/ncu_fp8c.py <<'PY'
import sys, torch, ffpa_attn
B, H, N, D, causal = (int(x) for x in sys.argv[1:6])
q, k, v = (ffpa_attn.quantize_fp8(torch.randn(B, H, N, D, device="cuda"))[0] for _ in range(3))
for _ in range(3):
    ffpa_attn.forward(q, k, v, is_causal=bool(causal), strict=True)
torch.cuda.synchronize()
PY
read -r B H N <<< "${NCU_SHAPE:-4 8 8448}"
for causal in 0 1; do
  ncu --kernel-name regex:'ffpa_fwd_fp8' --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section LaunchStats --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_active.avg,smsp__cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg \
    python3 /tmp/ncu_fp8c.py $B $H $N 512 $causal > "$OUT/fp8c_$causal.txt" 2>&1
  echo "== causal=$causal"
  grep -E "Duration|gmma_cycles|sm__cycles_active.avg |smsp__cycles_active|Compute \(SM\) Throughput|Warp Cycles Per Issued|Grid Size|Stall" "$OUT/fp8c_$causal.txt" | head -14
done
