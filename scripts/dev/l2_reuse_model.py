"""Development model (#16, session 30; CPU only): how many bytes of FFPA L1's Hopper prefill would come from
memory if the L2 were one LRU cache of a given size. Units (a block, or a cluster pair above Dv = 640) take
free slots in launch order (heads, query blocks last first, a query block's pairs together), each reads per
key tile its K tile, its V columns and its Q rows, one tile per step. Compares non-causal and causal walks
(forward, reversed, rotated by the step a unit starts at). It knows nothing of the L2's two partitions, of
requests merged in flight or of timing beyond whole steps: a first look, not a measurement.
  python3 scripts/dev/l2_reuse_model.py 2048 4096 8      # D, N, heads (B = 1)"""
import sys
from collections import OrderedDict


def run(D, N, H, causal, cap_mib, walk="fwd", slots=66, blk_m=64, blk_n=256, pairs=2):
    mib = 1 << 20
    m_blocks = N // blk_m

    def n_tiles(m):
        return (min(N, blk_m * m + blk_m) + blk_n - 1) // blk_n if causal else N // blk_n

    kb = blk_n * D * 2                 # K bytes a unit reads a tile (a pair's blocks half each)
    vb = blk_n * min(D, 1024) * 2      # V bytes a unit reads a tile (its column groups)
    qb = blk_m * D * 2                 # Q bytes (re-read every tile: E is sliced)
    queue = [(h, m, pr) for h in range(H) for m in reversed(range(m_blocks)) for pr in range(pairs)]
    lru, size, cap = OrderedDict(), 0, cap_mib * mib
    miss = total = 0
    active, qi, step = {}, 0, 0
    while qi < len(queue) or active:
        for s in range(slots):
            if s not in active and qi < len(queue):
                h, m, pr = queue[qi]
                qi += 1
                order = list(range(n_tiles(m)))
                if walk == "rev":
                    order.reverse()
                elif walk == "rotate":
                    j0 = step % len(order)
                    order = order[j0:] + order[:j0]
                active[s] = [h, m, pr, order, 0]
        for s in list(active):
            h, m, pr, order, i = active[s]
            j = order[i]
            for key, b in ((("k", h, j), kb), (("v", h, j, pr), vb), (("q", h, m), qb)):
                total += b
                if key in lru:
                    lru.move_to_end(key)
                else:
                    miss += b
                    lru[key] = b
                    size += b
                    while size > cap:
                        size -= lru.popitem(last=False)[1]
            active[s][4] += 1
            if active[s][4] == len(order):
                del active[s]
        step += 1
    return step, miss / mib, total / mib


def main():
    D, N = int(sys.argv[1]), int(sys.argv[2])
    H = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    big = D > 640
    for cap in (25, 50):
        for causal, walk in ((False, "fwd"), (True, "fwd"), (True, "rev"), (True, "rotate")):
            steps, miss, total = run(D, N, H, causal, cap, walk, slots=66 if big else 132, blk_n=256 if big else 128,
                                     pairs=2 if D > 1024 else 1)
            print(f"D={D} N={N} L2 {cap} MiB {'causal' if causal else 'nc':6s} {walk:6s}: {steps} steps, "
                  f"{miss:.0f} of {total:.0f} MiB from memory ({miss / total:.1%}), {miss / steps:.1f} MiB a step")


if __name__ == "__main__":
    main()
