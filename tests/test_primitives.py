"""Unit tests of the kernels' primitives, each a small nvcc-compiled program:
* tests/primitives/layout_host.cu, on the CPU (no GPU needed): tile layouts (every element at its
  own slot, conflict-free ldmatrix rows, advance() consistent), the 128-byte swizzle of the Hopper
  tiles, and the wgmma descriptors the Hopper kernel builds against the PTX ISA's canonical layouts;
* tests/primitives/state_device.cu, on a GPU: the attention state (attn/state.cuh: online update,
  normalisation, LSE, split-merge weight) against a double reference, with masked rows, empty parts
  and every part empty;
* tests/primitives/hopper_device.cu, on a compute capability 9.0 GPU: TMA tile loads (tensor maps
  from launch/tma_desc.h, strided and rank-4 tensors, zero fill past the ends, the 128-byte swizzle
  against GmmaSw128Tile), mbarrier phases, stmatrix, named barriers, setmaxnreg, the stage ring,
  clusters (stores into a peer block's shared memory, cluster-scope mbarrier arrivals and waits);
* tests/primitives/hopper_attention.cu, on the same GPU: those pieces as attention (a TMA producer
  warpgroup, two wgmma consumer warpgroups, the online softmax) against a double reference;
* tests/primitives/fp8_device.cu, on the same GPU: the FP8 kernel's register re-layout of P alone
  (its pack() and issue_pv() on exact values, O bit for bit), pack4_e4m3's rounding, and the V^T
  pre-pass alone (every byte, strided V, a length ending inside a key group, both key orders).
Skipped without nvcc, a failure instead where the extension is expected (whoever builds it has nvcc)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EXTENSION_EXPECTED

ROOT = Path(__file__).resolve().parents[1]


def _nvcc():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    found = shutil.which("nvcc") or (str(Path(home) / "bin" / "nvcc") if (Path(home) / "bin" / "nvcc").exists() else None)
    if found is None:
        if EXTENSION_EXPECTED:
            pytest.fail("nvcc not found (PATH, CUDA_HOME), but the extension is expected, so it was built with one")
        pytest.skip("needs nvcc (PATH or CUDA_HOME) to compile tests/primitives/layout_host.cu")
    return found


def test_tile_layouts_and_wgmma_descriptors(tmp_path):
    exe = tmp_path / "layout_host"
    build = subprocess.run([_nvcc(), "-std=c++17", "-O1", "-I", str(ROOT / "csrc" / "include"),
                            str(ROOT / "tests" / "primitives" / "layout_host.cu"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0 and last.endswith(" 0 failed"), run.stdout[-3000:] + run.stderr[-2000:]
    assert int(last.split()[0]) > 1_000_000  # the checks ran


def _build_and_run(tmp_path, name: str, arch: str, min_checks: int) -> None:
    """Compile tests/primitives/<name>.cu for `arch`, run it, and require "N checks, 0 failed"."""
    exe = tmp_path / name
    build = subprocess.run([_nvcc(), "-std=c++17", "-O2", f"-arch={arch}", "-I", str(ROOT / "csrc" / "include"),
                            "-I", str(ROOT / "csrc"), str(ROOT / "tests" / "primitives" / f"{name}.cu"),
                            "-o", str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0 and last.endswith(" 0 failed"), run.stdout[-3000:] + run.stderr[-2000:]
    assert int(last.split()[0]) > min_checks  # the checks ran


def test_attention_state_on_device(tmp_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (tests/primitives/state_device.cu runs the state on it)")
    major, minor = torch.cuda.get_device_capability()
    _build_and_run(tmp_path, "state_device", f"sm_{major}{minor}", 2000)


def test_hopper_primitives_on_device(tmp_path):
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a compute capability 9.0 GPU (tests/primitives/hopper_device.cu: TMA, mbarrier, stmatrix)")
    _build_and_run(tmp_path, "hopper_device", "sm_90a", 10_000)


def test_hopper_pipeline_attention_on_device(tmp_path):
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a compute capability 9.0 GPU (tests/primitives/hopper_attention.cu)")
    _build_and_run(tmp_path, "hopper_attention", "sm_90a", 16_000)


def test_fp8_p_relayout_on_device(tmp_path):
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a compute capability 9.0 GPU (tests/primitives/fp8_device.cu: wgmma e4m3)")
    _build_and_run(tmp_path, "fp8_device", "sm_90a", 3_000_000)  # the V^T pre-pass checks every byte (3084300 in all)


@pytest.mark.parametrize("name", ["hopper_device", "hopper_attention", "fp8_device"])
def test_hopper_programs_compile_for_sm90a(tmp_path, name):
    """The Hopper primitive programs build for sm_90a without a GPU (CI: a build break in ptx/tma.cuh,
    mbarrier.cuh, warpgroup.cuh, tile/stage_ring.cuh or launch/tma_desc.h shows here first)."""
    build = subprocess.run([_nvcc(), "-std=c++17", "-O1", "-arch=sm_90a", "-I", str(ROOT / "csrc" / "include"),
                            "-I", str(ROOT / "csrc"), "-c", str(ROOT / "tests" / "primitives" / f"{name}.cu"),
                            "-o", str(tmp_path / f"{name}.o")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
