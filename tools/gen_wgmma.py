#!/usr/bin/env python3
"""Generate csrc/include/ffpa/ptx/wgmma_gen.cuh: the typed wrappers of the Hopper warpgroup MMA
(wgmma.mma_async m64nNk16, fp32 accumulation, fp16/bf16 inputs) for every N the FA-2 Hopper
tiles and the FFPA Hopper kernel use, and m64nNk32 with e4m3 inputs for the FP8 kernel. Each N needs its own asm statement (N / 2 accumulator operands), which is why they
are generated rather than written. Checked in; tests/test_build.py checks it is current.

    python tools/gen_wgmma.py            # rewrite the header
    python tools/gen_wgmma.py --check    # exit 1 if the header is stale
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "csrc" / "include" / "ffpa" / "ptx" / "wgmma_gen.cuh"
NS = [16, 32, 48, 64, 80, 96, 128, 160, 176, 192, 208, 224, 256]
TYPES = {"__nv_bfloat16": "bf16", "__half": "f16"}
# e4m3 (k = 32; both operands K-major, no transposed reads for 8-bit types): the FP8 kernel's S
# (N = its key tile: 96, 128) and O (N = its head dim); N = 64: the FFPA-style FP8 kernel's S per
# consumer; 192 and 256 its O halves at D = 384 and 512.
FP8_NS = [64, 96, 128, 192, 256]


def acc_operands(n: int) -> tuple[str, str]:
    regs = ", ".join(f"%{i}" for i in range(n // 2))
    cons = ", ".join(f'"+f"(d[{i // 4}][{i % 4}])' for i in range(n // 2))
    return regs, cons


# The shared-memory-operand forms (transpose flags of A and B): both K-major (Q K^T), B MN-major read
# transposed (P V in FFPA), A MN-major read transposed (V^T P^T in the narrow decode kernel).
SS_FORMS = {
    "ss": ("0", "0", "  // D[64 x {n}] (+)= A[64 x 16] B[16 x {n}]; A and B K-major in shared memory (descriptors).\n"),
    "ss_tb": ("0", "1", "  // D[64 x {n}] (+)= A[64 x 16] B[16 x {n}]; A K-major, B MN-major (transposed read), both in shared\n"
                        "  // memory (descriptors): P from shared memory times V, as FFPA on Hopper runs P V.\n"),
    "ss_ta": ("1", "0", "  // D[64 x {n}] (+)= A[64 x 16] B[16 x {n}]; A MN-major (transposed read), B K-major, both in shared\n"
                        "  // memory (descriptors): V^T P^T, as the narrow decode kernel runs its output transposed.\n"),
}


def ss(n: int, elem: str, t: str, name: str = "ss") -> str:
    regs, cons = acc_operands(n)
    a, b, s = n // 2, n // 2 + 1, n // 2 + 2
    tnsp_a, tnsp_b, doc = SS_FORMS[name]
    return doc.format(n=n) + f"""  static __device__ __forceinline__ void {name}(float (&d)[{n // 8}][4], uint64_t desc_a, uint64_t desc_b, int accumulate) {{
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t} {{{regs}}}, %{a}, %{b}, p, 1, 1, {tnsp_a}, {tnsp_b};\\n}}\\n"
        : {cons}
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
#endif
  }}
"""


def rs(n: int, elem: str, t: str) -> str:
    regs, cons = acc_operands(n)
    a0, b, s = n // 2, n // 2 + 4, n // 2 + 5
    return f"""  // D[64 x {n}] (+)= A[64 x 16] B[16 x {n}]; A from registers (the m16n8k16 A-fragment layout per
  // warp, rows 16 w..16 w + 15), B MN-major in shared memory (transposed read).
  static __device__ __forceinline__ void rs(float (&d)[{n // 8}][4], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {{
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t} {{{regs}}}, {{%{a0}, %{a0 + 1}, %{a0 + 2}, %{a0 + 3}}}, %{b}, p, 1, 1, 1;\\n}}\\n"
        : {cons}
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
#endif
  }}
"""


def fp8(n: int) -> str:
    regs, cons = acc_operands(n)
    a, b, s = n // 2, n // 2 + 1, n // 2 + 2
    a0, rb, rs_ = n // 2, n // 2 + 4, n // 2 + 5
    return f"""  // D[64 x {n}] (+)= A[64 x 32] B[32 x {n}], e4m3; A and B K-major in shared memory (descriptors).
  static __device__ __forceinline__ void ss(float (&d)[{n // 8}][4], uint64_t desc_a, uint64_t desc_b, int accumulate) {{
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3 {{{regs}}}, %{a}, %{b}, p, 1, 1;\\n}}\\n"
        : {cons}
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
#endif
  }}
  // D[64 x {n}] (+)= A[64 x 32] B[32 x {n}], e4m3; A from registers (per warp the m16n8k32 8-bit
  // A-fragment layout: a[0] row g columns 4 t4..4 t4 + 3 (lowest byte first), a[1] row g + 8, a[2]
  // and a[3] the same 16 columns on), B K-major in shared memory.
  static __device__ __forceinline__ void rs(float (&d)[{n // 8}][4], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {{
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{rs_}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3 {{{regs}}}, {{%{a0}, %{a0 + 1}, %{a0 + 2}, %{a0 + 3}}}, %{rb}, p, 1, 1;\\n}}\\n"
        : {cons}
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
#endif
  }}
"""


def render() -> str:
    parts = ["""// Generated by tools/gen_wgmma.py; do not edit.
// ffpa::ptx wgmma.mma_async m64nNk16 (fp16/bf16) and m64nNk32 (e4m3) wrappers (sm_90a), fp32
// accumulators laid out as N / 8
// m16n8 tiles per warp: d[n][0..1] = row g, columns 8 n + 2 t4 + {0, 1}; d[n][2..3] = row g + 8
// (g = lane / 4, t4 = lane % 4; warp w of the warpgroup owns rows 16 w..16 w + 15), the same
// layout as the mma.sync m16n8 accumulator. accumulate = 0 overwrites D (the first k-step).
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace ffpa::ptx {

template <int N, typename Element>
struct WgmmaM64;
"""]
    for elem, t in TYPES.items():
        for n in NS:
            parts.append(f"\ntemplate <>\nstruct WgmmaM64<{n}, {elem}> {{\n" + ss(n, elem, t) + ss(n, elem, t, "ss_tb") + ss(n, elem, t, "ss_ta") + rs(n, elem, t) + "};\n")
    for n in FP8_NS:
        parts.append(f"\ntemplate <>\nstruct WgmmaM64<{n}, __nv_fp8_e4m3> {{\n" + fp8(n) + "};\n")
    parts.append("\n}  // namespace ffpa::ptx\n")
    return "".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    text = render()
    if a.check:
        sys.exit(0 if OUT.exists() and OUT.read_text() == text else 1)
    if not OUT.exists() or OUT.read_text() != text:
        OUT.write_text(text)
    print(OUT)


if __name__ == "__main__":
    main()
