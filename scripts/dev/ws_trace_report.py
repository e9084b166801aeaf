"""Per-phase cycle medians of a warp-specialised FA-2 trace (scripts/dev/ws_trace.sh). Stamps per
consumer item: 1 item start, 2 Q landed, then per key tile 10 K/V landed, 3 ping-pong turn taken,
4 S done, 5 softmax done, 6 P V done (the first tile: 10, 3, 4 only), then 7 last V landed, 8 last
P V done, 9 O stored; "between items" is 9 to the next item's 1 (the item hand-off). Phases are differences of consecutive stamps; "period" is turn to turn.
Items cut short by the trace buffer are left out. "E" lines (every block's start and end, globaltimer
ns) give the kernel's span and the share of block time idle at the tail. Usage: ws_trace_report.py trace.log"""
import collections
import statistics as st
import sys

lines = open(sys.argv[1]).read().split("=== RUN")[1].split("=== END")[0].splitlines()
ev = collections.defaultdict(list)
spans = {}  # block -> (start, end) in ns (globaltimer)
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


def find(it, code, start):
    for j in range(start, len(it)):
        if it[j][0] == code:
            return j
    return None


agg = collections.defaultdict(list)
for (b, who), stamps in sorted(ev.items()):
    if who == 9:  # the producer's stamps: not reported
        continue
    stamps.sort()
    items = []
    for _, code, t in stamps:
        if code == 1:
            items.append([])
        if items:
            items[-1].append((code, t))
    items = [it for it in items if any(c == 9 for c, _ in it)]
    for k, it in enumerate(items):
        if k + 1 < len(items):
            agg["item total"].append(d(it[0][1], items[k + 1][0][1]))
            # O stored -> the next item read (the meeting with the producer and the other consumers)
            agg["between items"].append(d(it[find(it, 9, 0)][1], items[k + 1][0][1]))
        j2 = find(it, 2, 0)
        j10 = find(it, 10, j2)
        j3 = find(it, 3, j10)
        j4 = find(it, 4, j3)
        agg["Q wait"].append(d(it[0][1], it[j2][1]))
        agg["first S (turn to done)"].append(d(it[j3][1], it[j4][1]))
        prev3, prev_end, pos, tiles = it[j3][1], it[j4][1], j4 + 1, 1
        while True:
            j10, j7 = find(it, 10, pos), find(it, 7, pos)
            if j10 is None or (j7 is not None and j7 < j10):
                break
            j3 = find(it, 3, j10)
            j4 = find(it, 4, j3)
            j5 = find(it, 5, j4)
            j6 = find(it, 6, j5)
            agg["tile: rescale+pack+K/V wait"].append(d(prev_end, it[j10][1]))
            agg["tile: turn wait"].append(d(it[j10][1], it[j3][1]))
            agg["tile: S (turn to done)"].append(d(it[j3][1], it[j4][1]))
            agg["tile: softmax"].append(d(it[j4][1], it[j5][1]))
            agg["tile: P V wait"].append(d(it[j5][1], it[j6][1]))
            agg["tile: period"].append(d(prev3, it[j3][1]))
            prev3, prev_end, pos, tiles = it[j3][1], it[j6][1], j6 + 1, tiles + 1
        agg["key tiles"].append(tiles)
        j7 = find(it, 7, pos)
        j8 = find(it, 8, j7)
        j9 = find(it, 9, j8)
        agg["last P V"].append(d(it[j7][1], it[j8][1]))
        agg["epilogue store"].append(d(it[j8][1], it[j9][1]))
for name, v in agg.items():
    print(f"{name:30s} n={len(v):5d} median={st.median(v):8.0f} min={min(v):7d} max={max(v):7d}")
spans = {b: v for b, v in spans.items() if b >= 4 or not ev}  # blocks 0..3 print their stamps before ending
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
