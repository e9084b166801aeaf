#!/usr/bin/env bash
# Development probe: ncu of one decode_split kernel (already installed build), full set plus the
# per-instruction source page (SASS with stall samples) as CSV. Args: B S Hq Hkv D Dv paged.
# Env: NCU_TAG names the outputs; FFPA_DEV_MLA_VARIANT passes through. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
TAG=${NCU_TAG:-ncu}
cat > /tmp/ncu_one.py <<'PY'
import sys, torch, ffpa_attn
B, S, Hq, Hkv, D, Dv, paged = [int(x) for x in sys.argv[1:8]]
k = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
v = k[..., :Dv] if D != Dv else torch.randn(B, S, Hkv, Dv, device="cuda", dtype=torch.bfloat16)
q = torch.randn(B, 1, Hq, D, device="cuda", dtype=torch.bfloat16)
table = None
if paged:
    k = k.view(B * S // 64, 64, Hkv, D); v = k[..., :Dv] if D != Dv else v.reshape(B * S // 64, 64, Hkv, Dv)
    table = torch.randperm(B * S // 64, device="cuda").view(B, -1).int()
for _ in range(3):
    ffpa_attn.decode(q, k, v, block_table=table)
torch.cuda.synchronize()
PY
ncu --kernel-name regex:decode_split --launch-skip 2 --launch-count 1 --set full --import-source yes \
  -o "$OUT/$TAG" -f python3 /tmp/ncu_one.py "$@" > "$OUT/$TAG.log" 2>&1
ncu --import "$OUT/$TAG.ncu-rep" --page details > "$OUT/$TAG.txt" 2>&1
ncu --import "$OUT/$TAG.ncu-rep" --page source --csv --print-source sass > "$OUT/${TAG}_sass.csv" 2>&1
grep -E "Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Block Limit" "$OUT/$TAG.txt" | head -20
ls -la "$OUT" | tail -5
