"""Shared pytest setup for ffpa_attn.

* Which ``ffpa_attn`` is tested: the installed package. ``python -m pytest`` from the repo root
  puts the source tree first on ``sys.path``; unless the extension was built in place there, the
  source tree is dropped from the path so the installed package (with its ``_C``) is imported.
* Whether the compiled extension is *expected*: ``FFPA_EXPECT_EXTENSION=1`` (set by ``.ci/run``
  and ``scripts/gpu_check.sh``) or a visible CUDA device. Then a missing or unloadable
  ``ffpa_attn._C`` fails every test that needs it, with the import error in the message; otherwise
  those tests are skipped with that error as the reason.
* Markers: ``requires_extension`` (needs ``ffpa_attn._C``, no GPU) and ``requires_cuda`` (needs a
  CUDA device of compute capability >= 8.0 and ``ffpa_attn._C``); without a CUDA device the
  latter skip, saying so.
* ``reset_ffpa_fallback_warnings`` (autouse): every test starts with no fallback reason warned
  yet, so "warned once per reason" is observable per test, and with forward's fast path empty.
* ``record``: all warnings of the test, unfiltered; ``gen``: a seeded CPU generator.
"""

import importlib.util
import os
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _prefer_installed_package() -> None:
    if any((ROOT / "ffpa_attn").glob("_C*.so")):
        return  # built in place (pip install -e . / build_ext --inplace): the source tree is complete
    kept = [p for p in sys.path if Path(p or os.getcwd()).resolve() != ROOT]
    if len(kept) == len(sys.path):
        return
    saved, sys.path[:] = sys.path[:], kept
    if importlib.util.find_spec("ffpa_attn") is None:
        sys.path[:] = saved  # nothing installed: test the source tree (no extension there)


_prefer_installed_package()

import torch  # noqa: E402

import ffpa_attn  # noqa: E402

HAS_CUDA: bool = torch.cuda.is_available()
HAS_EXTENSION: bool = ffpa_attn.extension_available()
EXTENSION_EXPECTED: bool = os.environ.get("FFPA_EXPECT_EXTENSION", "0") not in ("", "0") or HAS_CUDA
#: A CUDA device our kernels run on (sm_80+) and the extension: what GPU tests need.
cuda_available: bool = HAS_CUDA and HAS_EXTENSION and torch.cuda.get_device_capability() >= (8, 0)


def extension_problem() -> str:
    """Why ``ffpa_attn._C`` cannot be used (empty when it can)."""
    if HAS_EXTENSION:
        return ""
    return (f"ffpa_attn._C is not usable: {ffpa_attn.build_info().get('import_error')} "
            f"(ffpa_attn imported from {Path(ffpa_attn.__file__).parent})")


def _no_cuda_reason() -> str:
    reason = "no CUDA device visible (torch.cuda.is_available() is False)"
    return reason + (f"; also, {extension_problem()}" if not HAS_EXTENSION else "")



def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "requires_cuda: needs a CUDA device (sm_80+) and the built ffpa_attn._C extension "
        "(skipped without a device; a failure when the extension is expected but missing)",
    )
    config.addinivalue_line(
        "markers",
        "requires_extension: needs the built ffpa_attn._C extension, no GPU (a failure when the "
        "extension is expected but missing, else skipped)",
    )
    # Every CPU call falls back (by design); tests that care record warnings explicitly
    # (pytest.warns / catch_warnings + simplefilter("always")), which overrides this.
    config.addinivalue_line("filterwarnings", "ignore::ffpa_attn.FFPAFallbackWarning")


_MUST_FAIL = pytest.StashKey[str]()


def pytest_collection_modifyitems(config, items):
    for item in items:
        needs_cuda = "requires_cuda" in item.keywords
        if not (needs_cuda or "requires_extension" in item.keywords):
            continue
        if needs_cuda and not HAS_CUDA:
            item.add_marker(pytest.mark.skip(reason=_no_cuda_reason()))
        elif not HAS_EXTENSION:
            if EXTENSION_EXPECTED:
                item.stash[_MUST_FAIL] = extension_problem()
            else:
                item.add_marker(pytest.mark.skip(
                    reason=f"{extension_problem()} (FFPA_EXPECT_EXTENSION=1 makes this a failure)"))
        elif needs_cuda and not cuda_available:
            item.add_marker(pytest.mark.skip(reason="the CUDA device is older than sm_80"))


def pytest_runtest_setup(item):
    problem = item.stash.get(_MUST_FAIL, None)
    if problem:
        why = "FFPA_EXPECT_EXTENSION is set" if not HAS_CUDA else "a CUDA device is visible"
        pytest.fail(f"the extension is expected ({why}) but {problem}", pytrace=False)


def pytest_report_header(config):
    where = Path(ffpa_attn.__file__).parent
    state = "loaded" if HAS_EXTENSION else extension_problem()
    return [f"ffpa_attn {ffpa_attn.__version__} from {where}; _C {state}; CUDA device: {HAS_CUDA}; "
            f"extension expected: {EXTENSION_EXPECTED}"]


@pytest.fixture(autouse=True)
def reset_ffpa_fallback_warnings():
    from ffpa_attn import _fastpath

    ffpa_attn.reset_fallback_warnings()
    _fastpath.clear()  # tests swap the build and the device facts (mocks): no call remembered across them
    yield
    ffpa_attn.reset_fallback_warnings()
    _fastpath.clear()


@pytest.fixture(autouse=True)
def restore_sdpa():
    """A failing patch test must not leave torch.nn.functional patched for the others."""
    original = torch.nn.functional.scaled_dot_product_attention
    yield
    torch.nn.functional.scaled_dot_product_attention = original


@pytest.fixture
def gen():
    """A seeded CPU generator; tests draw fresh random inputs from it."""
    return torch.Generator().manual_seed(1234)


@pytest.fixture
def record():
    """All warnings, unfiltered (so only ffpa_attn's own dedup limits them)."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        yield rec
