#!/usr/bin/env bash
# Development probe (#15: host-to-host variance): SM clock, power and temperature sampled by nvidia-smi
# while one kernel runs back to back for a few seconds: our FA-2 (D=128, 256) and FFPA L1 (D=512)
# against SDPA cuDNN / EA on the same shapes (bf16, B=1 H=32 N=8192; SHAPE="B H N" for another). Needs an installed
# build with fa2 and ffpa_l1 for those dims. RUNS="ours 128,cudnn 128" picks the runs (default all six). Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
cat > /tmp/clock_one.py <<'PY'
import sys, time, torch, ffpa_attn
from torch.nn.attention import SDPBackend, sdpa_kernel
which, D, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
B, H, N = (int(x) for x in sys.argv[4].split()) if len(sys.argv) > 4 else (1, 32, 8192)
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "ea": SDPBackend.EFFICIENT_ATTENTION}.get(which)
def step():
    if backend is None:
        ffpa_attn.forward(q, k, v, strict=True)
    else:
        with sdpa_kernel(backend):
            torch.nn.functional.scaled_dot_product_attention(q, k, v)
for _ in range(3): step()
torch.cuda.synchronize()
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < secs:
    for _ in range(5): step()
    torch.cuda.synchronize(); n += 5
dt = time.perf_counter() - t0
print(f"{which} D={D} B={B} H={H} N={N}: {dt / n * 1e3:.3f} ms/call, {4 * B * H * N * N * D / (dt / n) / 1e12:.0f} TFLOPS")
PY
[ -n "${WRITE_ONLY:-}" ] && exit 0  # (clock_reasons.sh: the runner only)
IFS=, read -ra RUN_LIST <<< "${RUNS:-ours 128,cudnn 128,ours 256,cudnn 256,ours 512,ea 512}"
for run in "${RUN_LIST[@]}"; do
  set -- $run
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 200 > "$OUT/smi_$1_$2.csv" &
  smi=$!
  sleep 0.5
  python3 /tmp/clock_one.py $1 $2 ${CLOCK_SECS:-4} "${SHAPE:-1 32 8192}"
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  python3 - "$OUT/smi_$1_$2.csv" <<'PY'
import sys, statistics
rows = [[float(x) for x in l.split(",")] for l in open(sys.argv[1]) if l.strip() and "[" not in l]
rows = rows[len(rows) // 4:]  # past the ramp
if rows:
    clk, pw, tmp = zip(*rows)
    print(f"   SM clock median {statistics.median(clk):.0f} MHz (min {min(clk):.0f}), power median {statistics.median(pw):.0f} W (max {max(pw):.0f}), {max(tmp):.0f} C")
PY
done
