#!/usr/bin/env python3
"""Where a warp-specialised kernel's instructions sit between its waits, from nvdisasm output (sass_local.sh):
for each kernel whose name contains FILTER, the SASS cut at every WARPGROUP.DEPBAR (wgmma wait), run of HGMMA and
named barrier (BAR.SYNC / BAR.ARV: the ping-pong turns), with counts of the instructions that matter for the
softmax in each piece (MUFU.EX2, F2FP: P's conversions, FMNMX, SHFL, FMUL, VOTE, STSM, SYNCS: mbarrier ops).
Session 48 read it to see that D = 128's one-buffer kernel converted P after taking its turn (30 F2FP between
BAR.SYNC and the HGMMAs) and that the kernels with the P V wait in place run their softmax after that wait.
Usage: sass_segments.py FILE.sass [FILTER]"""
import re
import sys

OPS = ["MUFU.EX2", "F2FP", "FMNMX", "SHFL", "FMUL", "VOTE", "STSM", "SYNCS", "BRA"]


def segments(lines):
    segs, cur, mark = [], {}, "entry"

    def cut(new):
        nonlocal cur, mark
        if cur:
            segs.append((mark, cur))
        cur, mark = {}, new

    for line in lines:
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
        if not m:
            continue
        addr, op = m.groups()
        if op.startswith("WARPGROUP.DEPBAR"):
            cut(f"wait {line.split('DEPBAR.LE')[1].split(';')[0].strip()} @{addr}")
        elif op.startswith(("HGMMA", "QGMMA")):
            if not mark.startswith(op[:5]):
                cut(f"{op[:5]} @{addr}")
            cur["hgmma"] = cur.get("hgmma", 0) + 1
        elif op.startswith(("BAR.SYNC", "BAR.ARV")):
            cut(f"{op} @{addr}")
        else:
            for k in OPS:
                if op.startswith(k):
                    cur[k] = cur.get(k, 0) + 1
            cur["all"] = cur.get("all", 0) + 1
    cut("end")
    return segs


def main():
    path = sys.argv[1]
    filt = sys.argv[2] if len(sys.argv) > 2 else ""
    text = open(path).read().splitlines()
    heads = [i for i, l in enumerate(text) if l.startswith("//----") and ".text." in l]
    for n, i in enumerate(heads):
        name = text[i].split(".text.")[1].split()[0]
        if filt not in name:
            continue
        print(f"== {name}")
        end = heads[n + 1] if n + 1 < len(heads) else len(text)
        for mark, counts in segments(text[i:end]):
            print(f"  {mark:34s} {' '.join(f'{k}={v}' for k, v in counts.items())}")


if __name__ == "__main__":
    main()
