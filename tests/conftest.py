"""Shared pytest setup for ffpa_attn.

* ``reset_ffpa_fallback_warnings`` (autouse): every test starts with no fallback reason
  warned yet, so "warned once per reason" is observable per test.
* ``record``: all warnings of the test, unfiltered; ``gen``: a seeded CPU generator.
* GPU tests: decorate with ``@requires_cuda`` (``from conftest import requires_cuda``)
  or mark them ``@pytest.mark.requires_cuda``; both skip unless CUDA is available *and*
  the ``ffpa_attn._C`` extension is built.
"""

import warnings

import pytest
import torch

import ffpa_attn

cuda_available: bool = torch.cuda.is_available() and ffpa_attn.extension_available()


def _skip_reason() -> str:
    if not torch.cuda.is_available():
        return "requires a CUDA device (torch.cuda.is_available() is False)"
    if not ffpa_attn.extension_available():
        err = ffpa_attn.build_info().get("import_error")
        return f"requires the compiled ffpa_attn._C extension ({err})"
    return ""


CUDA_SKIP_REASON: str = _skip_reason()

requires_cuda = pytest.mark.skipif(not cuda_available, reason=CUDA_SKIP_REASON or "n/a")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "requires_cuda: needs a CUDA device and the built ffpa_attn._C extension "
        "(skipped otherwise)",
    )
    # Every CPU call falls back (by design); tests that care record warnings explicitly
    # (pytest.warns / catch_warnings + simplefilter("always")), which overrides this.
    config.addinivalue_line("filterwarnings", "ignore::ffpa_attn.FFPAFallbackWarning")


def pytest_collection_modifyitems(config, items):
    if cuda_available:
        return
    skip = pytest.mark.skip(reason=CUDA_SKIP_REASON)
    for item in items:
        if "requires_cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def reset_ffpa_fallback_warnings():
    ffpa_attn.reset_fallback_warnings()
    yield
    ffpa_attn.reset_fallback_warnings()


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
