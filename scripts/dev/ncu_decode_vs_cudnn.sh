#!/usr/bin/env bash
# Development probe (#14): ncu of our decode split kernel and SDPA cuDNN's kernel on one Lq = 1 GQA shape,
# side by side (DRAM bytes and throughput, L2, SM active cycles against elapsed, occupancy, issue, stalls),
# after a decode-only build (skip it with SKIP_BUILD=1). Env: SHAPE "B S Hq Hkv D" (default 64 8192 32 8
# 128), PROBE_DIMS (built head dims, default 128). Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=decode FFPA_DTYPES=bf16 FFPA_HEAD_DIMS=${PROBE_DIMS:-128} \
    python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
cat > /tmp/ncu_decode_peer.py <<'PY'
import sys, torch, ffpa_attn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
which, B, S, Hq, Hkv, D = sys.argv[1], *[int(x) for x in sys.argv[2:7]]
k, v = (torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
q = torch.randn(B, 1, Hq, D, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    if which == "ours":
        ffpa_attn.decode(q, k, v)
    else:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), enable_gqa=True)
torch.cuda.synchronize()
PY
read -r B S HQ HKV D <<< "${SHAPE:-64 8192 32 8 128}"
METRICS="--metrics dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.max,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__inst_executed.sum"
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats"
for who in ours cudnn; do
  [ $who = ours ] && re='decode_split' || re='cudnn|sdpa|flash'
  ncu --kernel-name regex:"$re" --launch-skip 2 --launch-count 1 $METRICS $SECTIONS python3 /tmp/ncu_decode_peer.py $who $B $S $HQ $HKV $D > "$OUT/ncu_$who.txt" 2>&1
  echo "== $who: $(grep -m1 -E '^  [a-zA-Z_].*\(' "$OUT/ncu_$who.txt" | cut -c1-110)"
  grep -E "Duration|SM Frequency|DRAM Throughput|dram__|lts__|sm__cycles|stalled|inst_executed|Registers Per|Block Size|Grid Size|Dynamic Shared|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued" "$OUT/ncu_$who.txt" | head -24
done
