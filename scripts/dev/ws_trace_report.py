"""Per-phase cycle medians of a warp-specialised FA-2 trace (scripts/dev/ws_trace.sh, fa2_ws_trace.patch as
rebased in sessions 46-47). Stamps per consumer item: 1 item start, 2 Q landed, 14 the item decoded, then per key
tile 10 K landed,
3 ping-pong turn taken (the first tile: S issued), 4 S done, 5 softmax done, 6 the previous tile's P V done
(D = 97..128's deferred wait: at the top of the next tile, after its 10; elsewhere right after the tile),
then 7 last V landed, 8 last P V done, (kOInK: 11 O packed, 12 kread waited), 9 O stored; 13 the
held K stage released (kOInK, after the item's first S is issued). The order differs between the kernels, so
the report gives the median of every transition between consecutive stamps ("4->5": the softmax), each item's total
(1 to the next 1), its key tiles and the tile period (3 to 3 within an item). "E" lines (every block's start
and end, globaltimer ns) give the kernel's span and the share of block time idle at the tail.
Then item time against its key tiles (least squares, medians by count). Usage: ws_trace_report.py trace.log"""
import collections
import statistics as st
import sys

NAMES = {1: "item", 2: "Q", 10: "K", 6: "PV", 3: "turn", 4: "S", 5: "softmax", 7: "lastV", 8: "lastPV", 9: "stored",
         11: "packed", 12: "kread", 13: "held released", 14: "decoded"}
lines = open(sys.argv[1]).read().split("=== RUN")[1].split("=== END")[0].splitlines()
ev = collections.defaultdict(list)
spans = {}  # block -> (start, end, sm) in ns (globaltimer)
for line in lines:
    if line.startswith("T "):
        _, b, who, i, v = line.split()
        v = int(v)
        ev[(int(b), int(who))].append((int(i), v & 15, v & ~15))
    elif line.startswith("E "):
        _, b, t0, t1, sm = line.split()
        spans[int(b)] = (int(t0), int(t1), int(sm))


def d(a, b):
    return (b - a) % (1 << 32)


agg = collections.defaultdict(list)
fit = []  # (the item's S stamps, its cycles to the next item's start)
for (b, who), stamps in sorted(ev.items()):
    stamps.sort()
    items = []
    for _, code, t in stamps:
        if code == 1:
            items.append([])
        if items:
            items[-1].append((code, t))
    items = [it for it in items if any(c == 9 for c, _ in it)]  # whole items only
    for k, it in enumerate(items):
        if k + 1 < len(items):
            agg["item total"].append(d(it[0][1], items[k + 1][0][1]))
        agg["key tiles (S stamps)"].append(sum(1 for c, _ in it if c == 4))
        turns = [t for c, t in it if c == 3]
        agg["tile period (turn to turn)"] += [d(a, b) for a, b in zip(turns, turns[1:])]
        if k + 1 < len(items):
            fit.append((sum(1 for c, _ in it if c == 4), d(it[0][1], items[k + 1][0][1])))
        for (c0, t0), (c1, t1) in zip(it, it[1:]):
            agg[f"{NAMES.get(c0, c0)}->{NAMES.get(c1, c1)}"].append(d(t0, t1))
        if k + 1 < len(items):
            agg["stored->next item"].append(d(it[-1][1], items[k + 1][0][1]))
for name, v in sorted(agg.items(), key=lambda kv: -len(kv[1])):
    print(f"{name:30s} n={len(v):5d} median={st.median(v):8.0f} min={min(v):7d} max={max(v):7d}")
# Item time against its key tiles (S stamps; the look-ahead kernels issue an item's first S in the item before):
# least squares, and the median per tile count.
if len(fit) > 1:
    mx, my = st.mean(x for x, _ in fit), st.mean(y for _, y in fit)
    sxx = sum((x - mx) ** 2 for x, _ in fit)
    if sxx > 0:
        slope = sum((x - mx) * (y - my) for x, y in fit) / sxx
        print(f"item cycles = {slope:.0f} x key tiles + {my - slope * mx:.0f} (least squares over {len(fit)} items)")
    by = collections.defaultdict(list)
    for x, y in fit:
        by[x].append(y)
    print("median item cycles by key tiles: " + ", ".join(f"{x}: {st.median(v):.0f} ({len(v)})" for x, v in sorted(by.items())))
spans = {b: v for b, v in spans.items()}
if spans:
    t0 = min(v[0] for v in spans.values())
    ends = sorted(v[1] - t0 for v in spans.values())
    starts = sorted(v[0] - t0 for v in spans.values())
    print(f"blocks {len(spans)}: kernel {ends[-1] / 1e3:.1f} us, last start {starts[-1] / 1e3:.1f} us, block ends "
          f"min {ends[0] / 1e3:.1f} median {st.median(ends) / 1e3:.1f} max {ends[-1] / 1e3:.1f} us; idle share "
          f"{sum(ends[-1] - e for e in ends) / (len(ends) * ends[-1]):.3f}")
    med = st.median(ends)
    slow = sorted((v[2], b) for b, v in spans.items() if v[1] - t0 > 1.15 * med)
    print(f"blocks ending 15% past the median: {len(slow)} (sm, block): {slow}")
