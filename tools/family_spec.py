"""The kernel families of ffpa-attn, in one place. tools/gen_instantiations.py emits from it the
explicit instantiations, the registry (csrc/generated/registry.cu) and the build manifest that
build_info() returns, whose "registry" lists one entry per compiled kernel:
{op, family, level, dtype, acc, E, Ev, auto}.

Adding a kernel family: a kernel file (csrc/include/ffpa/kernels/), a traits entry
(csrc/include/ffpa/traits/), a line here, a launcher (csrc/launch/) and tests.
"""
from __future__ import annotations

from dataclasses import dataclass

# (E, Ev) pairs of the FFPA levels: 320..1024 step 64 and MLA's 576/512.
_FFPA_PAIRS = tuple((d, d) for d in range(320, 1025, 64)) + ((576, 512),)


@dataclass(frozen=True)
class Family:
    name: str        # as build_info() and kernel_info() spell it
    op: str          # the op it serves ("fwd" or "decode")
    level: int       # FFPA level 1..3 (what `level=` forces); 0: not an FFPA level
    enum: str        # its launch::Family value in C++
    launcher: str    # the C++ launcher, formatted with elem, d, dv, level, acc
    header: str      # the launcher's header, included by each generated instantiation
    pairs: tuple     # (E, Ev) head-dim pairs it is built for (FFPA_HEAD_DIMS prunes them by E)
    half_accs: bool  # also fp16 / mixed MMA accumulation, for fp16 inputs
    auto: str        # how an auto call (level=None) takes it: "first" = wherever it has the pair;
                     # "heuristic" = csrc/launch/ffpa_heuristic.cpp picks among these families
    workspace: bool  # its launcher sizes a global workspace (registry entry's workspace_bytes)


_FFPA_LAUNCHER = "FfpaLauncher<{elem}, {d}, {dv}, Level::kL{level}, {acc}>"

FAMILIES = (
    # FA-2: 32..256 step 32, 192/128, 320 and 384, where its whole-head-dim tile beats FFPA L1
    # (docs/tuning_fa2.md runs 8 and 16).
    Family("fa2", "fwd", 0, "Family::kFa2", "Fa2Launcher<{elem}, {d}, {dv}>", "launch/fa2_fwd_launch.cuh",
           tuple((d, d) for d in range(32, 257, 32)) + ((192, 128), (320, 320), (384, 384)),
           half_accs=False, auto="first", workspace=False),
    Family("ffpa_l1", "fwd", 1, "Family::kFfpa", _FFPA_LAUNCHER, "launch/ffpa_fwd_launch.cuh", _FFPA_PAIRS,
           half_accs=True, auto="heuristic", workspace=False),
    Family("ffpa_l2", "fwd", 2, "Family::kFfpa", _FFPA_LAUNCHER, "launch/ffpa_fwd_launch.cuh", _FFPA_PAIRS,
           half_accs=True, auto="heuristic", workspace=False),
    # L3: D bounded only by memory.
    Family("ffpa_l3", "fwd", 3, "Family::kFfpa", _FFPA_LAUNCHER, "launch/ffpa_fwd_launch.cuh",
           _FFPA_PAIRS + ((2048, 2048), (4096, 4096)), half_accs=True, auto="heuristic", workspace=True),
    # Split-KV decode (the decode op; forward routes short queries to it): head dims 64..256, the
    # FFPA range 320..1024 (its ring slots are head-dim chunks, so shared memory stays bounded) and MLA.
    Family("decode", "decode", 0, "Family::kDecode", "DecodeLauncher<{elem}, {d}, {dv}>", "launch/decode_launch.cuh",
           tuple((d, d) for d in (64, 96, 128, 192, 256)) + tuple((d, d) for d in range(320, 1025, 64)) + ((576, 512),),
           half_accs=False, auto="first", workspace=False),
)
BY_NAME = {f.name: f for f in FAMILIES}

# Element types: C++ type, launch::DType value, torch name.
DTYPES = {
    "fp16": ("__half", "kFloat16", "float16"),
    "bf16": ("__nv_bfloat16", "kBFloat16", "bfloat16"),
}
# MMA accumulation modes and their AccMode values: fp32 everywhere; fp16 / mixed (P@V in fp16) for
# fp16 inputs of the families with half_accs (bf16 MMAs accumulate in fp32 only).
ACCS = {"fp32": "AccMode::kF32", "fp16": "AccMode::kF16", "mixed": "AccMode::kMixed"}


def family_accs(family: str, dt: str) -> list[str]:
    return ["fp32", "fp16", "mixed"] if BY_NAME[family].half_accs and dt == "fp16" else ["fp32"]
