#!/usr/bin/env bash
# Development probe (#16): why FFPA L1's Hopper kernel runs causal at ~0.88x of non-causal on an H100
# (D = 448 / 512, MLA, 2048). An ffpa_l1-only sm_90a bf16 build at PROBE_DIMS, then (1) the bench at
# key lengths S = N, N/2, N/4 non-causal beside causal (a fixed cost per item shows as throughput
# falling with S; a causal-only cost as causal below the S = N/2 cell), (2) ncu of one causal and one
# non-causal launch (SM active cycles min / avg / max: imbalance; tensor pipe; L2 / DRAM; stalls).
# Env: PROBE_DIMS (default 512), N (default 8192), SKIP_NCU=1, NCU_ONLY=1 (only (2)), L2=1 (ncu: the L2's
# throughput broken down, bytes the SMs received, sector lookups by source: docs/hopper_ffpa.md, session 36).
# Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
N=${N:-8192}
# Head dims above 1024 build L1's Hopper kernel only beside L3 (its fallback there).
FAMILIES=ffpa_l1; for d in $(echo "${PROBE_DIMS:-512}" | tr ',' ' '); do [ "$d" -gt 1024 ] && FAMILIES=ffpa_l1,ffpa_l3; done
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=$FAMILIES FFPA_DTYPES=bf16 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${PROBE_DIMS:-512}
export FFPA_EXPECT_EXTENSION=1 PYTHONUNBUFFERED=1
t0=$(date +%s)
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
  echo "build ok in $(( $(date +%s) - t0 )) s"
fi
DIMS=$(echo "${PROBE_DIMS:-512}" | tr ',' ' ')
if [ "${NCU_ONLY:-0}" != 1 ]; then
timeout 300 python3 bench/bench.py --shapes 1x32x${N}x${N} 1x32x${N}x$((N / 2)) 1x32x${N}x$((N / 4)) 2x32x$((N / 2))x$((N / 2)) \
  --D $DIMS --dtype bf16 --causal-both --kernels ffpa_l1 --warmup 5 --iters 25 --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
echo "bench rc $?"; grep -E "ffpa_l1|causal|shape" "$OUT/bench.log" | head -40
# (3) SM clock, power and throttle reasons (nvidia-smi every 100 ms) while one cell runs back to back
cat > /tmp/clock_causal.py <<'PY'
import sys, time, torch, ffpa_attn
N, D, causal, secs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
q, k, v = (torch.randn(1, 32, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
step = lambda: ffpa_attn.forward(q, k, v, is_causal=bool(causal), strict=True, level=1)
for _ in range(3): step()
torch.cuda.synchronize()
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < secs:
    for _ in range(5): step()
    torch.cuda.synchronize(); n += 5
dt = (time.perf_counter() - t0) / n
print(f"D={D} causal={causal}: {dt * 1e3:.3f} ms/call, {4 * 32 * N * N * D / (2 if causal else 1) / dt / 1e12:.0f} TFLOPS")
PY
for D in $DIMS; do
  for c in 0 1 0 1; do
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader,nounits -lms 100 > "$OUT/smi.csv" &
    smi=$!
    sleep 0.3
    python3 /tmp/clock_causal.py $N $D $c ${CLOCK_SECS:-3}
    kill $smi 2>/dev/null; wait $smi 2>/dev/null
    python3 - "$OUT/smi.csv" <<'PY'
import sys, statistics, collections
rows = [l.split(",") for l in open(sys.argv[1]) if l.strip() and "[" not in l]
rows = rows[len(rows) // 3:]  # past the ramp
if rows:
    clk = [float(r[0]) for r in rows]; pw = [float(r[1]) for r in rows]
    why = collections.Counter(r[3].strip() for r in rows).most_common(3)
    print(f"   SM clock median {statistics.median(clk):.0f} MHz (min {min(clk):.0f}), power median {statistics.median(pw):.0f} W (max {max(pw):.0f}), reasons {why}")
PY
  done
done
fi
[ "${SKIP_NCU:-0}" = 1 ] && exit 0
cat > /tmp/ncu_causal.py <<'PY'
import sys, torch, ffpa_attn
N, D, causal = (int(x) for x in sys.argv[1:4])
q, k, v = (torch.randn(1, 32, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(3):
    ffpa_attn.forward(q, k, v, is_causal=bool(causal), strict=True, level=1)
torch.cuda.synchronize()
PY
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy"
METRICS="--metrics sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.max,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex.sum,dram__bytes_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct"
if [ "${L2:-0}" = 1 ]; then
  SECTIONS=""
  METRICS="--clock-control base --metrics breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors.sum,lts__t_requests.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_srcunit_tex.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,sm__cycles_active.avg,smsp__inst_executed.sum,l1tex__m_xbar2l1tex_read_bytes.sum"
fi
for D in $DIMS; do
  for c in 0 1; do
    ncu --kernel-name regex:'ffpa_fwd_ws' --launch-skip 2 --launch-count 1 $SECTIONS $METRICS python3 /tmp/ncu_causal.py $N $D $c > "$OUT/ncu_d${D}_c$c.txt" 2>&1
    echo "== D=$D causal=$c"
    [ "${L2:-0}" = 1 ] && { grep -E "lts__|dram__|gpu__|sm__|smsp__|l1tex__" "$OUT/ncu_d${D}_c$c.txt" | sed 's/ \+/ /g'; continue; }
    grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L2 Hit|DRAM Throughput|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|sm__cycles|gmma|lts__|dram__bytes|stalled|Waves" "$OUT/ncu_d${D}_c$c.txt" | head -30
  done
done
