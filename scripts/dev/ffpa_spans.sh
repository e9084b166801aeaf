#!/usr/bin/env bash
# Development probe (#16): every block's start, end and SM for one launch of FFPA L1's Hopper kernel
# (scripts/dev/ffpa_spans.patch: globaltimer stamps over the first words of the block's LSE rows), causal and
# not, bf16 B=1 H=32 N (NS, default 8192; several: a list) at PROBE_DIMS (default 512); the report
# (scripts/dev/ffpa_spans_report.py) fits each item's time against its key tiles (a per-item cost
# beside a per-tile one) and gives the gaps between blocks on an SM and the tail. Reverts the patch after.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
git apply scripts/dev/ffpa_spans.patch || exit 1
trap 'git apply -R scripts/dev/ffpa_spans.patch' EXIT
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=ffpa_l1 FFPA_DTYPES=bf16 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${PROBE_DIMS:-512}
export FFPA_EXPECT_EXTENSION=1 PYTHONUNBUFFERED=1
python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build_spans.log" 2>&1 || { tail -40 "$OUT/build_spans.log"; exit 1; }
cat > /tmp/spans_run.py <<'P'
import sys, torch, ffpa_attn
N, D, causal = (int(x) for x in sys.argv[1:4])
q, k, v = (torch.randn(1, 32, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
run = lambda: ffpa_attn.forward(q, k, v, is_causal=bool(causal), strict=True, level=1, return_lse=True)
for _ in range(3):
    run()
torch.cuda.synchronize()
lse = run()[1].view(torch.int32).reshape(32, N // 64, 64)[:, :, :5].to(torch.int64).cpu()
M = N // 64
print("=== RUN")
for h in range(32):
    for m in range(M):
        w = lse[h, m].tolist()
        w = [x & 0xffffffff for x in w]
        print("E", h * M + (M - 1 - m), 0, w[0] + (w[1] << 32), w[2] + (w[3] << 32), w[4])
print("=== END")
P
for N in ${NS:-8192}; do
for D in $(echo "${PROBE_DIMS:-512}" | tr ',' ' '); do
  for c in 0 1; do
    python3 /tmp/spans_run.py $N $D $c > "$OUT/spans_n${N}_d${D}_c$c.log" 2>&1
    echo "== D=$D N=$N causal=$c"
    python3 scripts/dev/ffpa_spans_report.py "$OUT/spans_n${N}_d${D}_c$c.log" $N $c
  done
done
done
