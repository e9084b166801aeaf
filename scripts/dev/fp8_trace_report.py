"""Report of scripts/dev/fp8_trace.sh: per-phase medians (SM cycles) of the FP8 kernel's consumer
warpgroups over the steady key tiles of blocks 0..3, and where each consumer's "S done" falls inside
the other's period (0 / 1: in step; 0.5: a half-period apart, the ping-pong the schedule hopes for)."""
import statistics
import sys
from collections import defaultdict

NAMES = {1: "loop top", 2: "K and V^T landed", 4: "S done", 5: "softmax done", 6: "P V done"}


def main(path):
    lines = open(path).read().split("=== RUN", 1)[-1].split("\n")
    ev = defaultdict(list)  # (block, c) -> [(t, code)]
    for ln in lines:
        f = ln.split()
        if len(f) == 5 and f[0] == "T":
            v = int(f[4])
            ev[(int(f[1]), int(f[2]))].append((v & ~15, v & 15))
    phases = defaultdict(list)
    s_done = {}
    for key, xs in ev.items():
        tiles, cur = [], []
        for t, code in xs:
            if code == 1 and cur:
                tiles.append(cur)
                cur = []
            if code in NAMES:
                cur.append((t, code))
        tiles = [tl for tl in tiles if [c for _, c in tl] == [1, 2, 4, 5, 6]]
        for a, b in zip(tiles, tiles[1:]):
            seq = a + [b[0]]
            for (t0, c0), (t1, _) in zip(seq, seq[1:]):
                phases[c0].append((t1 - t0) % (1 << 32))
            phases["period"].append((b[0][0] - a[0][0]) % (1 << 32))
        s_done[key] = [tl[2][0] for tl in tiles]
    label = {1: "wait K, V^T", 2: "issue + S wait", 4: "softmax", 5: "P V wait", 6: "rescale + pack + loop"}
    for k in (1, 2, 4, 5, 6, "period"):
        if phases[k]:
            print(f"  {label.get(k, k):24s} median {statistics.median(phases[k]):8.0f}  "
                  f"p10 {sorted(phases[k])[len(phases[k]) // 10]:8.0f}  p90 {sorted(phases[k])[9 * len(phases[k]) // 10]:8.0f}")
    # phase offset of consumer 1's S done inside consumer 0's periods
    offs = []
    for b in range(4):
        a, c = s_done.get((b, 0), []), s_done.get((b, 1), [])
        for i in range(1, min(len(a), len(c)) - 1):
            per = a[i + 1] - a[i]
            if per > 0:
                offs.append(((c[i] - a[i]) % per) / per)
    if offs:
        print(f"  consumer 1's S done in consumer 0's period: median {statistics.median(offs):.2f} "
              f"(p10 {sorted(offs)[len(offs) // 10]:.2f}, p90 {sorted(offs)[9 * len(offs) // 10]:.2f}; 0 or 1: in step)")


if __name__ == "__main__":
    main(sys.argv[1])
