"""Report of scripts/dev/ffpa_spans.sh: per-item time against key tiles (FFPA L1 Hopper, 64-row items
numbered last query block first, 128-key tiles; lone blocks). Usage: report.py log N causal"""
import collections
import statistics as st
import sys

log, N, causal = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
text = open(log).read().split("=== RUN")[1].split("=== END")[0]
blk = {}
for line in text.splitlines():
    if line.startswith("E "):
        _, b, who, t0, t1, sm = line.split()
        b, t0, t1 = int(b), int(t0), int(t1)
        s0, s1, _ = blk.get(b, (t0, t1, 0))
        blk[b] = (min(s0, t0), max(s1, t1), int(sm))
M = (N + 63) // 64
tiles = lambda b: (((M - 1 - b % M) * 64 + 64 + 127) // 128) if causal else (N + 127) // 128
t_begin = min(v[0] for v in blk.values())
t_end = max(v[1] for v in blk.values())
span = (t_end - t_begin) / 1e3
xs = [tiles(b) for b in blk]
ys = [(v[1] - v[0]) / 1e3 for v in blk.values()]
mx, my = st.mean(xs), st.mean(ys)
sxx = sum((x - mx) ** 2 for x in xs)
slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
icpt = my - slope * mx
print(f"  blocks {len(blk)}, kernel span {span:.1f} us, mean item {my:.1f} us over {mx:.1f} tiles")
if sxx:
    print(f"  fit: item = {icpt:.2f} us + {slope:.3f} us x tiles")
    by = collections.defaultdict(list)
    for x, y in zip(xs, ys):
        by[x].append(y)
    print("  tiles: median us (n) " + ", ".join(f"{x}: {st.median(by[x]):.1f}" for x in sorted(by)[:: max(1, len(by) // 12)]))
else:
    print(f"  us per tile {my / mx:.3f} (median item {st.median(ys):.1f}, p10 {sorted(ys)[len(ys) // 10]:.1f}, p90 {sorted(ys)[9 * len(ys) // 10]:.1f})")
per_sm = collections.defaultdict(list)
for v in blk.values():
    per_sm[v[2]].append(v)
gaps, busy, last = [], 0.0, []
for sm, vs in per_sm.items():
    vs.sort()
    busy += sum(v[1] - v[0] for v in vs) / 1e3
    gaps += [(b[0] - a[1]) / 1e3 for a, b in zip(vs, vs[1:])]
    last.append((vs[-1][1] - t_begin) / 1e3)
print(f"  SMs {len(per_sm)}, busy {busy / (len(per_sm) * span):.3f} of span, gap between blocks median {st.median(gaps):.2f} us "
      f"(p90 {sorted(gaps)[9 * len(gaps) // 10]:.2f}), SM finish min {min(last):.0f} / median {st.median(last):.0f} / max {max(last):.0f} us")
