#!/usr/bin/env bash
# Development probe (#15, host variance / clocks): which clock event reasons nvidia-smi reports while one kernel runs
# back to back (clock_probe.sh's runner): SM clock, instant and averaged power, and the active reasons bitmask
# (0x1 idle, 0x4 SW power cap, 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake; see
# nvidia-smi --help-query-gpu). RUNS / SHAPE as clock_probe.sh. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
WRITE_ONLY=1 bash scripts/dev/clock_probe.sh   # writes /tmp/clock_one.py
IFS=, read -ra RUN_LIST <<< "${RUNS:-ours 128,cudnn 128}"
for run in "${RUN_LIST[@]}"; do
  set -- $run
  f="$OUT/reasons_$1_$2.csv"
  nvidia-smi --query-gpu=clocks.sm,power.draw.instant,power.draw.average,clocks_event_reasons.active,temperature.gpu \
    --format=csv,noheader,nounits -lms 100 > "$f" &
  smi=$!
  sleep 0.5
  python3 /tmp/clock_one.py $1 $2 ${CLOCK_SECS:-4} "${SHAPE:-1 32 8192}"
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  python3 - "$f" <<'PY'
import sys, statistics, collections
rows = [[x.strip() for x in l.split(",")] for l in open(sys.argv[1]) if l.strip() and "[" not in l]
rows = rows[len(rows) // 4:]
clk = [float(r[0]) for r in rows]; pin = [float(r[1]) for r in rows if r[1] not in ("N/A", "[N/A]")]
pav = [float(r[2]) for r in rows if r[2] not in ("N/A", "[N/A]")]
reasons = collections.Counter(r[3] for r in rows)
print(f"   clock median {statistics.median(clk):.0f} MHz; power instant median {statistics.median(pin) if pin else 0:.0f} W"
      f" (max {max(pin) if pin else 0:.0f}), average median {statistics.median(pav) if pav else 0:.0f} W; reasons {dict(reasons)}")
PY
done
