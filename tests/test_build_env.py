"""The build's view of the machine (tools/build_env.py, used by setup.py), with stand-ins for torch
and nvcc so every branch runs on any machine: the archs built by default (the visible GPU's, else
all), and a clear SystemExit, naming both sides, for each toolchain mismatch."""
from __future__ import annotations

import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import build_env  # noqa: E402


def fake_torch(caps=(), cuda="13.0", version="2.11.0", file="/venv/lib/torch/__init__.py", broken=False):
    def capability(i):
        return caps[i]

    def count():
        if broken:
            raise RuntimeError("no driver")
        return len(caps)

    return SimpleNamespace(cuda=SimpleNamespace(device_count=count, get_device_capability=capability),
                           version=SimpleNamespace(cuda=cuda), __version__=version, __file__=file)


@pytest.mark.parametrize("caps,want", [
    ([(9, 0)], ["90a"]),
    ([(8, 0)], ["80"]),
    ([(8, 6)], ["80"]),  # sm_80 SASS runs on every 8.x device
    ([(8, 9)], ["89"]),
    ([(8, 9), (9, 0), (9, 0)], ["89", "90a"]),
    ([], build_env.FULL_ARCHS),
    ([(12, 0)], build_env.FULL_ARCHS),  # no dedicated target: the full list (its PTX JITs there)
    ([(7, 5)], build_env.FULL_ARCHS),
])
def test_default_archs_follow_the_visible_gpus(monkeypatch, caps, want):
    monkeypatch.delenv("FFPA_ARCHS", raising=False)
    archs, why = build_env.choose_archs(fake_torch(caps))
    assert archs == want
    assert ("visible GPU" in why) == (want != build_env.FULL_ARCHS), why


def test_ffpa_archs_wins_and_a_broken_driver_builds_everything(monkeypatch):
    monkeypatch.setenv("FFPA_ARCHS", "80;90a")
    assert build_env.choose_archs(fake_torch([(9, 0)])) == (["80", "90a"], "FFPA_ARCHS")
    monkeypatch.delenv("FFPA_ARCHS")
    assert build_env.choose_archs(fake_torch(broken=True))[0] == build_env.FULL_ARCHS


def _fake_cuda_home(tmp_path, release):
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return SimpleNamespace(CUDA_HOME=str(tmp_path))


def test_toolchain_checks_name_both_sides(tmp_path):
    ok = _fake_cuda_home(tmp_path, "13.0")
    assert build_env.check_toolchain(fake_torch(cuda="13.2"), ok) == "13.0"  # same major: fine
    with pytest.raises(SystemExit, match=r"nvcc at .* is CUDA 12\.4, but torch 2\.11\.0 was built with CUDA 13\.0"):
        build_env.check_toolchain(fake_torch(), _fake_cuda_home(tmp_path / "old", "12.4"))
    with pytest.raises(SystemExit, match="CPU-only"):
        build_env.check_toolchain(fake_torch(cuda=None), ok)
    with pytest.raises(SystemExit, match="no CUDA toolkit found"):
        build_env.check_toolchain(fake_torch(), SimpleNamespace(CUDA_HOME=None))
    for isolated in ("/tmp/pip-build-env-x1y2/overlay/lib/python3.11/site-packages/torch/__init__.py",
                     "/tmp/build-env-abc/lib/python3.12/site-packages/torch/__init__.py"):
        with pytest.raises(SystemExit, match="--no-build-isolation"):
            build_env.check_toolchain(fake_torch(file=isolated), ok)
    with pytest.raises(SystemExit, match="cannot run"):
        build_env.check_toolchain(fake_torch(), SimpleNamespace(CUDA_HOME=str(tmp_path / "missing")))


def test_cxx_standard_is_what_the_installed_torch_adds():
    from torch.utils import cpp_extension

    std = build_env.torch_cxx_standard(cpp_extension)
    assert std in ("C++17", "C++20"), std
    major, minor = (int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if (major, minor) <= (2, 11):
        assert std == "C++17"
    elif (major, minor) >= (2, 15):
        assert std == "C++20"  # its headers need it
