"""Build of ffpa_attn._C (torch CUDAExtension).

Environment knobs:
  FFPA_ARCHS       semicolon/comma list of SM targets, default "80;89;90a" (PTX of the lowest is
                   embedded too, so newer GPUs can JIT it)
  FFPA_HEAD_DIMS   comma list of head dims to instantiate, default: every supported one
  FFPA_DTYPES      comma list out of fp16,bf16, default both
  FFPA_ACCS        comma list out of fp32,fp16,mixed (MMA accumulation; fp16/mixed are built for
                   fp16 inputs of the FFPA families only), default all
  FFPA_FAMILIES    comma list out of fa2,ffpa_l1,ffpa_l2,ffpa_l3, default all
  FFPA_PTXAS_VERBOSE=1   pass -Xptxas -v (register / shared-memory / spill report per kernel)
  MAX_JOBS         parallel compile jobs (ninja)
"""
import os
import re
import sys
from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools"))
import gen_instantiations  # noqa: E402

VERSION = re.search(r'__version__\s*=\s*"([^"]+)"', (ROOT / "ffpa_attn" / "__init__.py").read_text()).group(1)


def env_list(name, default):
    raw = os.environ.get(name, "").strip()
    return [x.strip() for x in re.split(r"[;, ]+", raw) if x.strip()] if raw else default


def ptx_arch(archs):
    """The one arch whose PTX is embedded next to every target's SASS: the lowest."""
    return min(archs, key=lambda a: int(a.rstrip("a")))


def arch_flags(archs):
    flags = []
    for a in archs:
        if not re.fullmatch(r"\d+a?", a):
            raise SystemExit(f"FFPA_ARCHS: expected entries like 80, 89, 90a; got {a!r}")
        flags.append(f"-gencode=arch=compute_{a},code=sm_{a}")
    lowest = ptx_arch(archs)
    flags.append(f"-gencode=arch=compute_{lowest},code=compute_{lowest}")
    return flags


def extensions():
    from torch.utils.cpp_extension import CUDAExtension

    archs = env_list("FFPA_ARCHS", ["80", "89", "90a"])
    dims = [int(x) for x in env_list("FFPA_HEAD_DIMS", [])] or None
    dtypes = env_list("FFPA_DTYPES", ["fp16", "bf16"])
    accs = env_list("FFPA_ACCS", []) or None
    families = env_list("FFPA_FAMILIES", []) or None
    generated = gen_instantiations.generate(ROOT / "csrc" / "generated", dims, dtypes, archs, VERSION,
                                            [ptx_arch(archs)], accs, families)
    sources = ["csrc/ops/module.cpp", "csrc/ops/ffpa_ops.cpp", "csrc/launch/ffpa_fwd_dispatch.cpp",
               "csrc/launch/ffpa_heuristic.cpp",
               "csrc/launch/mask_block_map.cu"]
    sources += [os.path.relpath(p, ROOT) for p in generated]
    # FFPA_HAS_SM90A: the build has sm_90a code, so the FA-2 launcher may pick its wgmma kernel on
    # compute capability 9.0 devices (the kernel itself only exists in the sm_90a pass).
    has_sm90a = "1" if "90a" in archs else "0"
    nvcc = ["-O3", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr", f"-DFFPA_HAS_SM90A={has_sm90a}",
            *arch_flags(archs)]
    if os.environ.get("FFPA_PTXAS_VERBOSE") == "1":
        nvcc.append("-Xptxas=-v")
    return [
        CUDAExtension(
            name="ffpa_attn._C",
            sources=sources,
            include_dirs=[str(ROOT / "csrc"), str(ROOT / "csrc" / "include")],
            extra_compile_args={"cxx": ["-O3", "-std=c++17", f"-DFFPA_HAS_SM90A={has_sm90a}"], "nvcc": nvcc},
        )
    ]


def cmdclass():
    from torch.utils.cpp_extension import BuildExtension

    return {"build_ext": BuildExtension.with_options(use_ninja=True)}


setup(
    name="ffpa-attn",
    version=VERSION,
    description="Hand-written CUDA attention kernels for large head dims (FFPA), a drop-in for SDPA",
    license="Apache-2.0",
    packages=find_packages(include=["ffpa_attn", "ffpa_attn.*"]),
    python_requires=">=3.9",
    install_requires=["torch>=2.4"],
    ext_modules=extensions(),
    cmdclass=cmdclass(),
)
