"""What the build needs to know about this machine before it compiles anything (used by setup.py,
tested by tests/test_build_env.py with stand-ins for torch): which archs to target, whether the
toolchain fits the installed torch, which C++ standard torch's extension builder adds.
Every problem is a SystemExit with a message naming both sides."""
from __future__ import annotations

import inspect
import os
import re
import subprocess

FULL_ARCHS = ["80", "89", "90a"]


def env_list(name, default):
    raw = os.environ.get(name, "").strip()
    return [x.strip() for x in re.split(r"[;, ]+", raw) if x.strip()] if raw else default


def arch_of_capability(major, minor):
    """The build target for a device of compute capability major.minor, None where this project
    has no dedicated target (the full list's embedded PTX is what such a GPU runs)."""
    if (major, minor) == (9, 0):
        return "90a"  # the wgmma kernels need the arch-specific target
    if (major, minor) == (8, 9):
        return "89"
    if major == 8:
        return "80"  # sm_80 SASS runs on every 8.x device
    return None


def choose_archs(torch):
    """FFPA_ARCHS when set; else the visible GPUs' archs; else the full list."""
    if os.environ.get("FFPA_ARCHS", "").strip():
        return env_list("FFPA_ARCHS", FULL_ARCHS), "FFPA_ARCHS"
    try:
        caps = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
    except Exception:  # no driver, no device, CUDA init failure: build for every arch
        caps = []
    if not caps:
        return FULL_ARCHS, "no GPU visible at build time"
    archs = [arch_of_capability(*c) for c in caps]
    names = ", ".join(f"{a}.{b}" for a, b in caps)
    if None in archs:
        return FULL_ARCHS, f"GPU compute capability {names} has no dedicated target here"
    return sorted(set(archs), key=lambda a: int(a.rstrip("a"))), f"the visible GPU (compute capability {names})"


def check_toolchain(torch, cpp_extension):
    """Clear errors for the mismatches that otherwise fail deep inside the build."""
    if re.search(r"[/\\](pip-)?build-env-", torch.__file__ or ""):  # pip's / `python -m build`'s isolation
        raise SystemExit(
            "ffpa-attn must be built against the torch you run it with, but pip is building it in an "
            "isolated environment with its own torch. Install torch first, then build with "
            "`pip install --no-build-isolation .`")
    if torch.version.cuda is None:
        raise SystemExit(f"ffpa-attn needs a CUDA build of torch; torch {torch.__version__} is CPU-only")
    if cpp_extension.CUDA_HOME is None:
        raise SystemExit("ffpa-attn: no CUDA toolkit found (set CUDA_HOME, or put nvcc on PATH)")
    nvcc = os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc")
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
        nvcc_ver = re.search(r"release (\d+)\.(\d+)", out).group(0).split()[1]
    except (OSError, subprocess.CalledProcessError, AttributeError) as exc:
        raise SystemExit(f"ffpa-attn: cannot run {nvcc} --version ({exc})")
    if nvcc_ver.split(".")[0] != torch.version.cuda.split(".")[0]:
        raise SystemExit(
            f"ffpa-attn: nvcc at {cpp_extension.CUDA_HOME} is CUDA {nvcc_ver}, but torch {torch.__version__} "
            f"was built with CUDA {torch.version.cuda}; the CUDA major versions must match. Install a "
            f"CUDA {torch.version.cuda.split('.')[0]}.x toolkit (and point CUDA_HOME at it), or a torch built "
            f"for CUDA {nvcc_ver.split('.')[0]}.")
    return nvcc_ver


def torch_cxx_standard(cpp_extension):
    """The -std torch's extension builder adds when none is given (for the build log only)."""
    try:
        found = re.findall(r"c\+\+(\d\d)", inspect.getsource(cpp_extension.BuildExtension))
    except (OSError, TypeError):
        found = []
    return f"C++{max(found)}" if found else "torch's default"
