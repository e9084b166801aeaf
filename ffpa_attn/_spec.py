"""What the Python layer and the C++ core must agree on, defined once: the ops' schemas, the dtype and
accumulation codes, and the kernel families. Plain Python (no torch import), read three ways:

* tools/gen_instantiations.py (at build time, by path) emits from it the explicit instantiations, the
  registry (csrc/generated/registry.cu: one entry per compiled kernel, {op, family, arch, dtype, acc,
  E, Ev, priority}, with static_asserts that the C++ enums carry these codes), the op schemas
  registration.cpp registers (csrc/generated/op_schemas.h) and the build manifest build_info()
  returns;
* the package (ffpa_attn._ops, _decode_ops) for the codes it passes and the argument names it binds;
* the CPU tests, whose mock of the op reads the same families.

Which kernel an auto call runs is decided in one place, the C++ chooser (csrc/launch/route.cpp),
from the registry's data below (arch, priority, auto); Python only asks whether a kernel exists.

Adding a kernel family: a kernel file (csrc/include/ffpa/kernels/), a traits entry
(csrc/include/ffpa/traits/), a line here, a launcher (csrc/launch/) and tests.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# ------------------------------------------------------------------------------------ ops
# The torch ops' schemas (TORCH_LIBRARY in csrc/ops/registration.cpp, through op_schemas.h).
OPS = {
    "ffpa_fwd": "ffpa_fwd(Tensor q, Tensor k, Tensor v, Tensor? attn_mask, float scale, bool is_causal, "
                "bool causal_bottom_right, int level, int acc, int num_stages) -> (Tensor out, Tensor lse)",
    "ffpa_decode": "ffpa_decode(Tensor q, Tensor k_cache, Tensor v_cache, Tensor? cache_seqlens, "
                   "Tensor? block_table, Tensor? attn_mask, float scale, bool causal, int num_splits) "
                   "-> (Tensor out, Tensor lse)",
    # FP8 (e4m3) q/k/v; descales float32 of their tensor's (B, H) (any strides, 0 where broadcast);
    # attn_mask as ffpa_fwd's; scale includes float q/k descales, v_scale a float v descale; out_fp16:
    # fp16 output, else bf16.
    "ffpa_fp8_fwd": "ffpa_fp8_fwd(Tensor q, Tensor k, Tensor v, Tensor? q_descale, Tensor? k_descale, "
                    "Tensor? v_descale, Tensor? attn_mask, float scale, float v_scale, bool is_causal, "
                    "bool causal_bottom_right, bool out_fp16) -> (Tensor out, Tensor lse)",
}

MAX_GRID_YZ = 65535  # CUDA's gridDim.y/z limit: query heads, mask (batch, head) slices (ffpa::kMaxGridYZ)
DECODE_MAX_QUERIES = 32  # query rows (Lq x nothing else) the decode op takes; forward routes L <= this to it


def op_args(op: str) -> tuple:
    """The argument names of op `op`, in order, from its schema."""
    inner = OPS[op][len(op) + 1:OPS[op].index(")")]
    return tuple(re.split(r"\s+", a.strip())[-1] for a in inner.split(","))


def op_signature(op: str) -> str:
    """The schema of op `op` without its name and with unnamed returns, e.g. "(Tensor q, ...) ->
    (Tensor, Tensor)" (what torch.library.custom_op takes for the ops' Python-side twins)."""
    head, _, ret = OPS[op].partition(" -> ")
    returns = ", ".join(r.strip().split()[0] for r in ret.strip("()").split(","))
    return head[len(op):] + f" -> ({returns})"


# ------------------------------------------------------------------------------------ codes
@dataclass(frozen=True)
class DType:
    cpp: str    # C++ element type
    enum: str   # launch::DType value
    torch: str  # torch's name, as build_info() spells it
    code: int   # the launch::DType value's integer


DTYPES = {
    "fp16": DType("__half", "kFloat16", "float16", 0),
    "bf16": DType("__nv_bfloat16", "kBFloat16", "bfloat16", 1),
    "e4m3": DType("__nv_fp8_e4m3", "kE4M3", "float8_e4m3fn", 2),  # the FP8 family's only
}
_B16 = ("fp16", "bf16")
B16_TORCH = tuple(DTYPES[k].torch for k in _B16)  # the dtypes of the ffpa_fwd / ffpa_decode ops

# MMA accumulation modes: the op's `acc` argument takes their codes (0: auto, fp32), which are the
# values of the C++ enum AccMode (static_asserts in the generated registry). fp32 everywhere; fp16 /
# mixed (P@V in fp16) for fp16 inputs of the families with half_accs (bf16 MMAs accumulate in fp32 only).
ACC_AUTO = 0
ACCS = {"fp32": ("AccMode::kF32", 1), "fp16": ("AccMode::kF16", 2), "mixed": ("AccMode::kMixed", 3)}
ACC_CODES = {"auto": ACC_AUTO, **{name: code for name, (_, code) in ACCS.items()}}

# Kernel archs a family line is built for: "any" = every arch of the build (mma.sync, sm_80 and up);
# "90a" = only where the build has sm_90a code, run only on compute capability 9.0.
ARCHS = ("any", "90a")


def arch_runs(arch: str, cc: tuple) -> bool:
    """Whether a line of `arch` runs on a device of compute capability cc = (major, minor), given
    that the build runs there at all: "any" does; "90a" only on (9, 0)."""
    return arch == "any" or (int(arch[:-2]), int(arch[-2])) == tuple(cc)


# ------------------------------------------------------------------------------------ families
# (E, Ev) pairs of the FFPA levels: 320..1024 step 64 and MLA's 576/512.
_FFPA_PAIRS = tuple((d, d) for d in range(320, 1025, 64)) + ((576, 512),)


@dataclass(frozen=True)
class Family:
    name: str        # as build_info() and kernel_info() spell it (several lines may share a name: one per arch)
    op: str          # the op it serves (a key of OPS, without the "ffpa_" prefix: "fwd" or "decode")
    level: int       # FFPA level 1..3 (what `level=` forces); 0: not an FFPA level
    enum: str        # its launch::Family value in C++
    launcher: str    # the C++ launcher, formatted with elem, d, dv, level, acc
    header: str      # the launcher's header, included by each generated instantiation
    pairs: tuple     # (E, Ev) head-dim pairs it is built for (FFPA_HEAD_DIMS prunes them by E)
    half_accs: bool  # also fp16 / mixed MMA accumulation, for fp16 inputs
    auto: str        # how an auto call (level=None) takes it: "first" = wherever it has the pair;
                     # "heuristic" = csrc/launch/ffpa_heuristic.cpp picks among these families
    workspace: bool  # its launcher sizes a global workspace (registry entry's workspace_bytes)
    arch: str = "any"   # one of ARCHS
    priority: int = 0   # among the lines an auto call could take on a device, the lowest runs
    tag: str = ""       # file-name tag of a per-arch line ("wgmma")
    dtypes: tuple = _B16  # input dtypes it is built for (keys of DTYPES)
    wide_fallback: str = ""  # the family whose fp32 instantiation is its fallback above Dv = 1024 (its
                             # pairs there are built only in builds that have that family)

    @property
    def key(self) -> str:
        """Unique per line: the name, plus the tag of a per-arch line."""
        return self.name + (f"_{self.tag}" if self.tag else "")


# The pairs of the Hopper L1 kernel: all of the FFPA range (Dv above 640 in two column groups) and
# L3's 2048 / 4096 (column groups of 512 in cluster pairs; L3 is its fallback there).
_FFPA_WS_PAIRS = _FFPA_PAIRS + ((2048, 2048), (4096, 4096))
_FFPA_LAUNCHER = "FfpaLauncher<{elem}, {d}, {dv}, Level::kL{level}, {acc}>"
# FA-2: 32..256 step 32, 192/128, 320 and 384, where its whole-head-dim tile beats FFPA L1
# (docs/tuning_fa2.md runs 8 and 16).
_FA2_PAIRS = tuple((d, d) for d in range(32, 257, 32)) + ((192, 128), (320, 320), (384, 384))

FAMILIES = (
    # FA-2 on Hopper: the warpgroup MMA (fa2_fwd_sm90.cuh), preferred on compute capability 9.0
    # unless set_fa2_mma("sync") asks for mma.sync. Where a per-arch line serves a call, an auto call
    # picks among the per-arch lines only (csrc/launch/route.cpp). Every pair: past 256 on the warp-specialised
    # kernel only (P V in two wgmmas; docs/hopper_profile.md session 25): 320 on 48-key tiles, 675 TFLOPS
    # against FFPA L1's Hopper kernel's 461 (H200, bf16, B=1 H=32 N=8192, one run); 384 on 32-key tiles with
    # each tile's P V waited for before its S is written (O's 192 registers), 586 against 484 (H100).
    Family("fa2", "fwd", 0, "Family::kFa2", "Fa2Launcher<{elem}, {d}, {dv}, Fa2Mma::kWgmma>",
           "launch/fa2_fwd_launch.cuh", _FA2_PAIRS, half_accs=False, auto="first", workspace=True,
           arch="90a", priority=0, tag="wgmma"),
    # FA-2 on mma.sync (fa2_fwd_sm80.cuh): every arch.
    Family("fa2", "fwd", 0, "Family::kFa2", "Fa2Launcher<{elem}, {d}, {dv}, Fa2Mma::kSync>",
           "launch/fa2_fwd_launch.cuh", _FA2_PAIRS, half_accs=False, auto="first", workspace=False,
           arch="any", priority=1),
    # FFPA L1 on Hopper (ffpa_fwd_sm90_ws.cuh: wgmma, TMA, warp-specialised), preferred to the mma.sync L1
    # on compute capability 9.0 (which it falls back to where TMA cannot take the tensors). O splits over
    # its two consumer warpgroups, in registers: Dv above 512 runs as two column groups.
    Family("ffpa_l1", "fwd", 1, "Family::kFfpa", "FfpaWsLauncher<{elem}, {d}, {dv}>", "launch/ffpa_fwd_ws_launch.cuh",
           _FFPA_WS_PAIRS, half_accs=False, auto="heuristic", workspace=True, arch="90a", priority=1, tag="wgmma",
           wide_fallback="ffpa_l3"),
    Family("ffpa_l1", "fwd", 1, "Family::kFfpa", _FFPA_LAUNCHER, "launch/ffpa_fwd_launch.cuh", _FFPA_PAIRS,
           half_accs=True, auto="heuristic", workspace=False, priority=2),
    Family("ffpa_l2", "fwd", 2, "Family::kFfpa", _FFPA_LAUNCHER, "launch/ffpa_fwd_launch.cuh", _FFPA_PAIRS,
           half_accs=True, auto="heuristic", workspace=False, priority=2),
    # L3: D bounded only by memory.
    Family("ffpa_l3", "fwd", 3, "Family::kFfpa", _FFPA_LAUNCHER, "launch/ffpa_fwd_launch.cuh",
           _FFPA_PAIRS + ((2048, 2048), (4096, 4096)), half_accs=True, auto="heuristic", workspace=True,
           priority=2),
    # Split-KV decode on Hopper at the FFPA head dims (decode_sm90_ws.cuh: FFPA L1's wgmma + TMA pipeline on
    # 64 packed query rows per block; MLA's single cache: decode_sm90_narrow.cuh up to 16 rows per KV head,
    # decode_sm90_mla.cuh past them), preferred on compute capability 9.0; per call it runs the mma.sync
    # decode kernel below where a KV head has fewer rows than a wgmma tile (launch/decode_ws_launch.cuh).
    Family("decode", "decode", 0, "Family::kDecode", "DecodeWsLauncher<{elem}, {d}, {dv}>", "launch/decode_ws_launch.cuh",
           _FFPA_PAIRS, half_accs=False, auto="first", workspace=False, arch="90a", priority=0, tag="wgmma"),
    # Split-KV decode (the decode op; forward routes short queries to it): head dims 64..256, the
    # FFPA range 320..1024 (its ring slots are head-dim chunks, so shared memory stays bounded) and MLA.
    Family("decode", "decode", 0, "Family::kDecode", "DecodeLauncher<{elem}, {d}, {dv}>", "launch/decode_launch.cuh",
           tuple((d, d) for d in (64, 96, 128, 192, 256)) + tuple((d, d) for d in range(320, 1025, 64)) + ((576, 512),),
           half_accs=False, auto="first", workspace=False, priority=1),
    # FP8 (e4m3) on Hopper (fa2_fwd_sm90_fp8.cuh: wgmma e4m3, FA-2 style, D = 64..256; D = 512 on FFPA L1's Hopper
    # pipeline, ffpa_fwd_sm90_fp8.cuh): the ffpa_fp8_fwd op that forward's FP8 path calls
    # (ffpa_attn/_fp8.py); its op code is the forward one (its launcher runs FwdParams).
    Family("fp8", "fwd", 0, "Family::kFp8", "Fp8Launcher<{elem}, {d}, {dv}>", "launch/fa2_fp8_launch.cuh",
           ((64, 64), (128, 128), (256, 256), (512, 512)), half_accs=False, auto="first", workspace=False, arch="90a", priority=0,
           tag="wgmma", dtypes=("e4m3",)),
)
BY_KEY = {f.key: f for f in FAMILIES}
NAMES = tuple(dict.fromkeys(f.name for f in FAMILIES))  # family names, in spec order
# Families of the forward op on fp16/bf16 inputs (the FP8 line serves e4m3 through its own op).
FWD_NAMES = tuple(n for n in NAMES if any(f.op == "fwd" and f.name == n and "bf16" in f.dtypes for f in FAMILIES))
LEVEL_NAMES = {f.level: f.name for f in FAMILIES if f.level}  # FFPA level -> the family `level=` forces

assert len(BY_KEY) == len(FAMILIES), "two family lines share a name and tag"
assert all(f.arch in ARCHS for f in FAMILIES)
assert all("ffpa_" + f.op in OPS for f in FAMILIES)
assert all(set(f.dtypes) <= set(DTYPES) for f in FAMILIES)


def family_accs(family: str, dt: str) -> list:
    """Accumulation modes the family (a name or a line's key) is built with for dtype `dt` (a key of DTYPES)."""
    line = BY_KEY.get(family) or next(f for f in FAMILIES if f.name == family)
    return ["fp32", "fp16", "mixed"] if line.half_accs and dt == "fp16" else ["fp32"]
