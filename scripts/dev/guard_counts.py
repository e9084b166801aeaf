"""Development tool: count the guards of each compiled frame in a TORCH_LOGS=guards log (stderr of a run),
all of them and those whose source line is in ffpa_attn, with the ffpa_attn lines that add the most.
    TORCH_LOGS=guards python3 probe.py 2> guards.log; python3 scripts/dev/guard_counts.py guards.log"""
import collections
import re
import sys

total, ours, lines = collections.Counter(), collections.Counter(), collections.defaultdict(collections.Counter)
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"\[(\d+/\d+)\] \[__guards\].*\+- (\w+)", line)
    if not m or m.group(2) == "GuardManager":
        continue
    frame = m.group(1)
    total[frame] += 1
    src = re.search(r"(ffpa_attn/[\w/]+\.py:\d+)", line)
    if src:
        ours[frame] += 1
        lines[frame][src.group(1)] += 1
for frame in sorted(total, key=lambda f: tuple(map(int, f.split("/")))):
    top = ", ".join(f"{k} {n}" for k, n in lines[frame].most_common(3))
    print(f"frame {frame}: {total[frame]} guards, {ours[frame]} from ffpa_attn ({top})")
