#!/usr/bin/env python3
"""Turn the `-Xptxas -v` lines of a build log into a markdown table: kernel, arch, registers,
spills, stack. Used by scripts/gpu_check.sh to write the README's resource table."""
import re
import sys

ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(sm_\w+)'")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
REGS = re.compile(r"Used (\d+) registers")
TRAITS = re.compile(r"FfpaTraitsI(\w+?)Li(\d+)ELi(\d+)ELNS_5LevelE(\d)ENS_4TileILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E")
ACC = re.compile(r"AccModeE(\d)")
ACC_NAMES = {"0": "", "1": " fp16acc", "2": " mixedacc"}
FA2 = re.compile(r"Fa2TraitsI(\w+?)Li(\d+)ELi(\d+)ENS_7Fa2TileILi(\d+)ELi(\d+)ELi(\d+)E")
FA2W = re.compile(r"Fa2TraitsI(\w+?)Li(\d+)ELi(\d+)ENS_12Fa2WgmmaTileILi(\d+)ELi(\d+)ELi(\d+)E")
FA2_STAGES = re.compile(r"ELi(\d)EEEvNS_9FwdParamsE$")  # ring depth of a kernel compiled for one
DT = {"6__half": "fp16", "13__nv_bfloat16": "bf16"}


def main(path):
    rows, cur, frame = [], None, None
    for line in open(path, errors="replace"):
        if m := ENTRY.search(line):
            cur, frame = m.groups(), None
        elif cur and (m := FRAME.search(line)):
            frame = tuple(int(x) for x in m.groups())
        elif cur and frame and (m := REGS.search(line)):
            t = TRAITS.search(cur[0])
            f = FA2.search(cur[0])
            fw = FA2W.search(cur[0])
            if t:
                dt, d, dv, lvl, wm, wn, bn, cd = t.groups()
                a = ACC.search(cur[0][t.end():])
                name = int(d) if d == dv else f"{d}/{dv}"
                st = FA2_STAGES.search(cur[0])  # L1's fixed-depth kernels (0: depth read at launch)
                depth = f" {st.group(1)}-stage" if st and st.group(1) != "0" else ""
                rows.append((f"L{lvl}{ACC_NAMES.get(a.group(1), '') if a else ''}{depth}", DT.get(dt, dt), name, cur[1], 16 * int(wm), int(bn), int(cd),
                             32 * int(wm) * int(wn), int(m.group(1)), frame))
            elif fw:
                dt, d, dv, wg, bn, _ = fw.groups()
                name = int(d) if d == dv else f"{d}/{dv}"
                st = FA2_STAGES.search(cur[0])
                rows.append((f"FA2 wgmma {st.group(1)}-stage" if st else "FA2 wgmma", DT.get(dt, dt), name, cur[1],
                             64 * int(wg), int(bn), int(d), 128 * int(wg), int(m.group(1)), frame))
            elif f:
                dt, d, dv, w, mt, bn = f.groups()
                name = int(d) if d == dv else f"{d}/{dv}"
                st = FA2_STAGES.search(cur[0])
                rows.append((f"FA2 {st.group(1)}-stage" if st else "FA2", DT.get(dt, dt), name, cur[1], 16 * int(mt) * int(w), int(bn), int(d),
                             32 * int(w), int(m.group(1)), frame))
            cur = None
    print("| kernel | dtype | D | arch | Br | Bc | chunk | threads | registers | spill st/ld (B) | stack (B) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for lvl, dt, d, arch, br, bc, cd, th, regs, (stack, st, ld) in sorted(set(rows), key=lambda r: (r[0], r[1], int(str(r[2]).split("/")[0]), str(r[2]), r[3])):
        flag = " SPILL" if st or ld else ""
        print(f"| {lvl} | {dt} | {d} | {arch} | {br} | {bc} | {cd} | {th} | {regs} | {st}/{ld}{flag} | {stack} |")


if __name__ == "__main__":
    main(sys.argv[1])
