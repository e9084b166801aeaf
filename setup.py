"""Build of ffpa_attn._C (torch CUDAExtension), against the torch already installed:

    pip install --no-build-isolation -v .       # -v shows the build plan and ninja's progress

Environment knobs:
  FFPA_ARCHS       semicolon/comma list of SM targets. Default: the arch of the GPU(s) visible at
                   build time (9.0 -> 90a, 8.9 -> 89, other 8.x -> 80); without a usable GPU the full
                   list "80;89;90a". PTX of the lowest is embedded too, so newer GPUs can JIT it.
  FFPA_HEAD_DIMS   comma list of head dims to instantiate, default: every supported one
  FFPA_DTYPES      comma list out of fp16,bf16,e4m3 (the FP8 family's inputs), default all
  FFPA_ACCS        comma list out of fp32,fp16,mixed (MMA accumulation; fp16/mixed are built for
                   fp16 inputs of the FFPA families only), default all
  FFPA_FAMILIES    comma list out of fa2,ffpa_l1,ffpa_l2,ffpa_l3,decode,fp8, default all
  FFPA_PTXAS_VERBOSE=1   pass -Xptxas -v (register / shared-memory / spill report per kernel)
  MAX_JOBS         parallel compile jobs (ninja)

The C++ standard is the one the installed torch's extension builder uses (C++17 up to torch 2.x
releases whose headers accept it, C++20 where they require it): no -std flag is forced here.
"""
import os
import re
import sys
from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools"))
import gen_instantiations  # noqa: E402
from build_env import check_toolchain, choose_archs, env_list, torch_cxx_standard  # noqa: E402

VERSION = re.search(r'__version__\s*=\s*"([^"]+)"', (ROOT / "ffpa_attn" / "__init__.py").read_text()).group(1)
# Seconds one kernel file takes to compile for one arch on one core, for the rough estimate printed
# before the build: 188 files x 3 archs took 160 s with 16 jobs on the 16-core GPU host (4.5 s a
# file-arch) and 800 s with 2 jobs on a 2-core machine (2.7 s); the estimate sits between them.
SECONDS_PER_FILE_ARCH = 3.5


def say(msg):
    print(f"ffpa-attn build: {msg}", file=sys.stderr, flush=True)


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
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError as exc:
        raise SystemExit(f"ffpa-attn builds against the torch you run it with, and none is importable ({exc}): "
                         "pip install torch first, then pip install --no-build-isolation .")

    nvcc_ver = check_toolchain(torch, cpp_extension)
    archs, why = choose_archs(torch)
    dims = [int(x) for x in env_list("FFPA_HEAD_DIMS", [])] or None
    dtypes = env_list("FFPA_DTYPES", ["fp16", "bf16", "e4m3"])
    accs = env_list("FFPA_ACCS", []) or None
    families = env_list("FFPA_FAMILIES", []) or None
    generated = gen_instantiations.generate(ROOT / "csrc" / "generated", dims, dtypes, archs, VERSION,
                                            [ptx_arch(archs)], accs, families)
    sources = ["csrc/ops/module.cpp", "csrc/ops/registration.cpp", "csrc/ops/fwd.cpp", "csrc/ops/fp8_fwd.cpp", "csrc/ops/decode.cpp",
               "csrc/ops/fastpath.cpp", "csrc/ops/attn_params.cpp", "csrc/ops/tensor_checks.cpp",
               "csrc/launch/route.cpp",
               "csrc/launch/ffpa_heuristic.cpp",
               "csrc/launch/mask_block_map.cu"]
    sources += [os.path.relpath(p, ROOT) for p in generated]
    jobs = int(os.environ.get("MAX_JOBS") or 0) or (os.cpu_count() or 1)
    cu_files = sum(1 for s in sources if s.endswith(".cu"))
    minutes = cu_files * len(archs) * SECONDS_PER_FILE_ARCH / min(jobs, cu_files) / 60
    say(f"torch {torch.__version__} (CUDA {torch.version.cuda}), nvcc {nvcc_ver}, "
        f"{torch_cxx_standard(cpp_extension)} (the standard torch's extension builder uses)")
    say(f"archs {';'.join(archs)} ({why}; set FFPA_ARCHS to choose)")
    say(f"{cu_files} CUDA files x {len(archs)} arch(s) with {jobs} parallel jobs: roughly "
        f"{max(1, round(minutes))} min (measured: 188 files x 3 archs, 2.7 min on 16 cores, 13 min on 2)")
    # FFPA_HAS_SM90A: the build has sm_90a code, so the FA-2 launcher may pick its wgmma kernel on
    # compute capability 9.0 devices (the kernel itself only exists in the sm_90a pass).
    has_sm90a = "1" if "90a" in archs else "0"
    nvcc = ["-O3", "-lineinfo", "--expt-relaxed-constexpr", f"-DFFPA_HAS_SM90A={has_sm90a}",
            *arch_flags(archs)]
    if os.environ.get("FFPA_PTXAS_VERBOSE") == "1":
        nvcc.append("-Xptxas=-v")
    return [
        cpp_extension.CUDAExtension(
            name="ffpa_attn._C",
            sources=sources,
            include_dirs=[str(ROOT / "csrc"), str(ROOT / "csrc" / "include")],
            extra_compile_args={"cxx": ["-O3", f"-DFFPA_HAS_SM90A={has_sm90a}"], "nvcc": nvcc},
        )
    ]


def cmdclass():
    from torch.utils.cpp_extension import BuildExtension

    return {"build_ext": BuildExtension.with_options(use_ninja=True)}


# Metadata-only commands (egg_info, --version, ...) must work without torch or a CUDA toolkit.
_BUILDS = {"build", "build_ext", "bdist_wheel", "install", "develop", "editable_wheel", "bdist_egg"}
_building = any(a in _BUILDS for a in sys.argv[1:])

setup(
    name="ffpa-attn",
    version=VERSION,
    description="Hand-written CUDA attention kernels for large head dims (FFPA), a drop-in for SDPA",
    license="Apache-2.0",
    packages=find_packages(include=["ffpa_attn", "ffpa_attn.*"]),
    python_requires=">=3.9",
    install_requires=["torch>=2.11"],
    extras_require={"test": ["pytest"], "bench": ["numpy", "matplotlib"]},
    ext_modules=extensions() if _building else [],
    cmdclass=cmdclass() if _building else {},
)
