#!/usr/bin/env python3
"""Turn the `-Xptxas -v` lines of a build log into a markdown table: kernel, dtype, head dims, arch,
ring depth, registers, spills, stack. Used by scripts/gpu_check.sh (ptxas.md); the launch shape of
each kernel (tile, threads, shared memory) is in resources.md (tools/resource_table.py).

Kernel names are read from the mangled entry names: FFPA (FfpaTraits<elem, D, Dv, Level, tile,
AccMode>, ring depth), FA-2 (Fa2Traits<elem, D, Dv, tile<D, wgmma>>, ring depth) and the decode
family (decode_split_kernel<elem, D, Dv, shared K/V>, decode_split_ws_kernel<FfpaWsTraits<elem, D, Dv>>,
decode_split_narrow_kernel<DecodeNarrowTraits<elem, D, Dv>>, decode_split_mla_kernel<DecodeMlaTraits<elem, D, Dv>>,
decode_merge_kernel<elem>), the FP8 kernels (Fa2Fp8Traits<D, in-kernel V^T>,
FfpaWsFp8Traits<out, D>, the V^T pre-pass) and the mask block map. A kernel the patterns do not know is listed under its
mangled name rather than dropped."""
import importlib.util
import re
import sys
from pathlib import Path

ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(sm_\w+)'")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
REGS = re.compile(r"Used (\d+) registers")
DT = {"6__half": "fp16", "13__nv_bfloat16": "bf16"}

def _spec():
    """ffpa_attn/_spec.py by path (the package imports torch; this tool must not need it)."""
    spec = importlib.util.spec_from_file_location("ffpa_spec", Path(__file__).resolve().parents[1] / "ffpa_attn" / "_spec.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["ffpa_spec"] = module
    spec.loader.exec_module(module)
    return module


# AccMode values in mangled names -> row label suffix (the codes of ffpa_attn/_spec.py ACCS).
ACC_NAMES = {str(code): "" if name == "fp32" else f" {name}acc" for name, (_, code) in _spec().ACCS.items()}
FFPA = re.compile(r"FfpaTraitsI(\w+?)Li(\d+)ELi(\d+)ELNS_5LevelE(\d)E.*?AccModeE(\d)EEELi(\d+)EEEvNS_9FwdParamsE$")
FA2 = re.compile(r"(fa2_fwd(?:_wgmma)?)_kernelINS_9Fa2TraitsI(\w+?)Li(\d+)ELi(\d+)E.*?ELi(\d+)EEEvNS_9FwdParamsE$")
FA2_WS = re.compile(r"fa2_fwd_ws_kernelINS_9Fa2TraitsI(\w+?)Li(\d+)ELi(\d+)ENS_(\d+)(\w+?)I.*?EvNS_9FwdParamsENS0_10Fa2TmaMapsE$")
FFPA_WS = re.compile(r"ffpa_fwd_ws_kernelINS_12FfpaWsTraitsI(\w+?)Li(\d+)ELi(\d+)E(?:Lb[01]E)?EEEEvNS_9FwdParamsENS0_11FfpaTmaMapsE$")
DECODE_WS = re.compile(r"decode_split_ws_kernelINS_12FfpaWsTraitsI(\w+?)Li(\d+)ELi(\d+)E(?:Lb[01]E)?EEEEvNS_12DecodeParamsENS0_13DecodeTmaMapsE$")
DECODE_NARROW = re.compile(r"decode_split_narrow_kernelINS_18DecodeNarrowTraitsI(\w+?)Li(\d+)ELi(\d+)EEEEEvNS_12DecodeParamsENS0_13DecodeTmaMapsE$")
DECODE_MLA = re.compile(r"decode_split_mla_kernelINS_15DecodeMlaTraitsI(\w+?)Li(\d+)ELi(\d+)EEEEEvNS_12DecodeParamsENS0_13DecodeTmaMapsE$")
DECODE = re.compile(r"decode_split_kernelI(\w+?)Li(\d+)ELi(\d+)ELb([01])EEEvNS_12DecodeParamsE$")
MERGE = re.compile(r"decode_merge_kernelI(\w+?)Li(\d)EEEvNS_12DecodeParamsE$")
FP8 = re.compile(r"fa2_fwd_fp8_kernelINS_12Fa2Fp8TraitsILi(\d+)ELb([01])EEE(\w+?)EEvNS_9FwdParamsENS0_10Fp8TmaMapsE$")
FP8_FFPA = re.compile(r"ffpa_fwd_fp8_kernelINS_15FfpaWsFp8TraitsI(\w+?)Li(\d+)EEEEEvNS_9FwdParamsENS0_11FfpaTmaMapsE$")
FP8_VT = re.compile(r"fp8_v_transpose_kernelILi(\d+)ELb([01])EEEvNS_9FwdParamsE$")


def dims(d, dv):
    return d if d == dv else f"{d}/{dv}"


def describe(name):
    """(kernel, dtype, head dims, ring depth) of one mangled entry name."""
    if m := FFPA.search(name):
        dt, d, dv, lvl, acc, depth = m.groups()
        return f"L{lvl}{ACC_NAMES.get(acc, '')}", DT.get(dt, dt), dims(d, dv), depth if depth != "0" else "launch"
    if m := FA2.search(name):
        kind, dt, d, dv, depth = m.groups()
        return ("FA2 wgmma" if kind.endswith("wgmma") else "FA2"), DT.get(dt, dt), dims(d, dv), depth
    if m := FA2_WS.search(name):  # the warp-specialised TMA kernel: its stage rings are fixed per tile
        dt, d, dv, _, tile = m.groups()
        return ("FA2 TMA masked-tile" if "Masked" in tile else "FA2 TMA"), DT.get(dt, dt), dims(d, dv), "fixed"
    if m := FFPA_WS.search(name):
        dt, d, dv = m.groups()
        return "L1 TMA", DT.get(dt, dt), dims(d, dv), "fixed"
    if m := DECODE_WS.search(name):  # Hopper's decode kernel: FFPA L1's pipeline, its rings fixed
        dt, d, dv = m.groups()
        return "decode TMA", DT.get(dt, dt), dims(d, dv), "fixed"
    if m := DECODE_NARROW.search(name):  # Hopper's transposed decode kernel (MLA's single cache, few rows)
        dt, d, dv = m.groups()
        return "decode narrow", DT.get(dt, dt), dims(d, dv), "fixed"
    if m := DECODE_MLA.search(name):  # Hopper's MLA decode kernel (MLA's single cache, more rows)
        dt, d, dv = m.groups()
        return "decode MLA", DT.get(dt, dt), dims(d, dv), "fixed"
    if m := DECODE.search(name):
        dt, d, dv, shared = m.groups()
        return ("decode shared-kv" if shared == "1" else "decode"), DT.get(dt, dt), dims(d, dv), "-"
    if m := FP8.search(name):  # FP8 (e4m3 in, bf16 / fp16 out): FA-2 style up to D = 256
        d, in_kernel, out = m.groups()
        return ("FP8 TMA, V^T in kernel" if in_kernel == "1" else "FP8 TMA"), f"e4m3->{DT.get(out, out)}", d, "fixed"
    if m := FP8_FFPA.search(name):  # FP8 past D = 256: FFPA L1's pipeline
        out, d = m.groups()
        return "FP8 FFPA TMA", f"e4m3->{DT.get(out, out)}", d, "fixed"
    if m := FP8_VT.search(name):
        d, permuted = m.groups()
        return f"FP8 V^T pre-pass ({'fragment order' if permuted == '1' else 'key order'})", "e4m3", d, "-"
    if "mask_block_map_kernel" in name:
        return "mask block map", "-", "-", "-"
    if m := MERGE.search(name):
        return f"decode merge ({'warp' if m.group(2) == '1' else 'block'} a row)", DT.get(m.group(1), m.group(1)), "-", "-"
    return name, "-", "-", "-"


def _order(row):
    d = str(row[2]).split("/")[0]
    return (row[0], row[1], int(d) if d.isdigit() else 0, str(row[2]), row[3], str(row[4]))


def main(path):
    rows, cur, frame = set(), None, None
    for line in open(path, errors="replace"):
        if m := ENTRY.search(line):
            cur, frame = m.groups(), None
        elif cur and (m := FRAME.search(line)):
            frame = tuple(int(x) for x in m.groups())
        elif cur and frame and (m := REGS.search(line)):
            kernel, dt, d, depth = describe(cur[0])
            rows.add((kernel, dt, d, cur[1], depth, int(m.group(1)), frame))
            cur = None
    print("| kernel | dtype | D | arch | ring depth | registers | spill st/ld (B) | stack (B) |")
    print("|---|---|---|---|---|---|---|---|")
    for kernel, dt, d, arch, depth, regs, (stack, st, ld) in sorted(rows, key=_order):
        flag = " SPILL" if st or ld else ""
        print(f"| {kernel} | {dt} | {d} | {arch} | {depth} | {regs} | {st}/{ld}{flag} | {stack} |")


if __name__ == "__main__":
    main(sys.argv[1])
