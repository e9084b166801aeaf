"""Misuse of ffpa_attn.forward raises, before any routing, what SDPA raises.

Each case asserts
  (a) ffpa_attn.forward raises our class (which also derives from what SDPA raises)
      with a message naming the offending argument, and
  (b) torch's own SDPA raises for the same input too -- with its default CPU dispatch,
      and/or with the reference MATH backend where the default CPU (flash) kernel is
      lenient (see the ``sdpa`` column).
Without our check (a) fails: the fallback would either raise SDPA's plain
RuntimeError/TypeError (not our class, no argument name) or silently run.
"""

import zlib
from typing import Callable, NamedTuple, Optional

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import ffpa_attn
from ffpa_attn import (
    FFPAError,
    FFPAIndexError,
    FFPATypeError,
    FFPAValueError,
)

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None

# The builtin, never a patched wrapper.
SDPA = torch._C._nn.scaled_dot_product_attention


class Case(NamedTuple):
    id: str
    build: Callable[[torch.Generator], tuple]  # -> (args, kwargs)
    exc: type
    words: tuple  # must all occur in the message
    sdpa: Optional[str]  # "default" | "math" | "both" | None (not an SDPA argument)


def rn(g, *shape, dtype=torch.float32):
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)


def qkv(g, q=(2, 3, 4, 8), k=(2, 3, 5, 8), v=None, dtype=torch.float32):
    v = k if v is None else v
    return rn(g, *q, dtype=dtype), rn(g, *k, dtype=dtype), rn(g, *v, dtype=dtype)


def call(*args, **kwargs):
    return lambda g: (args, kwargs)


def with_qkv(q=(2, 3, 4, 8), k=(2, 3, 5, 8), v=None, dtype=torch.float32, **kwargs):
    return lambda g: (qkv(g, q, k, v, dtype), kwargs)


def replace(pos, make, q=(2, 3, 4, 8), k=(2, 3, 5, 8), **kwargs):
    """qkv with argument ``pos`` replaced by ``make(g)``."""

    def build(g):
        args = list(qkv(g, q, k))
        args[pos] = make(g)
        return tuple(args), kwargs

    return build


def with_mask(make_mask, q=(2, 3, 4, 8), k=(2, 3, 5, 8), dtype=torch.float32, **kwargs):
    def build(g):
        return qkv(g, q, k, dtype=dtype), dict(attn_mask=make_mask(g), **kwargs)

    return build


CASES = [
    # ---------------------------------------------------------------- rank
    Case("query_1d", replace(0, lambda g: rn(g, 8)), FFPAValueError, ("'query'", "1-D"), "both"),
    Case("key_1d", replace(1, lambda g: rn(g, 8)), FFPAValueError, ("'key'", "1-D"), "both"),
    Case("value_1d", replace(2, lambda g: rn(g, 8)), FFPAValueError, ("'value'", "1-D"), "both"),
    Case("query_0d", replace(0, lambda g: rn(g)), FFPAValueError, ("'query'", "0-D"), "both"),
    # ---------------------------------------------------------------- batch / heads
    Case("batch_mismatch_key", with_qkv(k=(3, 3, 5, 8)), FFPAValueError, ("'key'", "(3, 3)"), "both"),
    Case("batch_mismatch_value", with_qkv(v=(3, 3, 5, 8)), FFPAValueError, ("'value'",), "both"),
    Case("batch_mismatch_5d", with_qkv(q=(2, 2, 3, 4, 8), k=(3, 2, 3, 5, 8)), FFPAValueError, ("'key'",), "both"),
    Case("heads_mismatch_no_gqa", with_qkv(q=(2, 4, 4, 8), k=(2, 2, 5, 8)), FFPAValueError, ("'key'", "enable_gqa=True"), "both"),
    Case("heads_mismatch_not_multiple", with_qkv(q=(2, 3, 4, 8), k=(2, 2, 5, 8)), FFPAValueError, ("'key'",), "both"),
    Case("gqa_not_divisible", with_qkv(q=(2, 6, 4, 8), k=(2, 4, 5, 8), enable_gqa=True), FFPAValueError, ("enable_gqa", "6 query heads", "4 key heads"), "both"),
    Case("gqa_fewer_query_heads", with_qkv(q=(2, 2, 4, 8), k=(2, 4, 5, 8), enable_gqa=True), FFPAValueError, ("enable_gqa", "key heads"), "both"),
    Case("gqa_value_heads", with_qkv(q=(2, 4, 4, 8), k=(2, 2, 5, 8), v=(2, 3, 5, 8), enable_gqa=True), FFPAValueError, ("enable_gqa", "value heads"), "both"),
    Case("gqa_2d", with_qkv(q=(4, 8), k=(5, 8), enable_gqa=True), FFPAIndexError, ("enable_gqa", "'query'", "3-D"), "both"),
    # ---------------------------------------------------------------- sizes
    Case("head_dim_mismatch", with_qkv(k=(2, 3, 5, 16), v=(2, 3, 5, 8)), FFPAValueError, ("'key'", "head_dim", "16"), "both"),
    # The default CPU kernel silently accepts S mismatches (and reads out of bounds when
    # value is shorter); the reference math backend raises.
    Case("seq_len_mismatch_longer_v", with_qkv(k=(2, 3, 5, 8), v=(2, 3, 6, 8)), FFPAValueError, ("'value'", "sequence length", "6"), "math"),
    Case("seq_len_mismatch_shorter_v", with_qkv(k=(2, 3, 5, 8), v=(2, 3, 1, 8)), FFPAValueError, ("'value'", "sequence length"), "math"),
    # ---------------------------------------------------------------- dtypes
    Case("dtype_mismatch_key", lambda g: ((rn(g, 2, 3, 4, 8), rn(g, 2, 3, 5, 8, dtype=torch.float64), rn(g, 2, 3, 5, 8)), {}), FFPATypeError, ("'key'", "float64", "float32"), "both"),
    Case("dtype_mismatch_value", lambda g: ((rn(g, 2, 3, 4, 8), rn(g, 2, 3, 5, 8), rn(g, 2, 3, 5, 8, dtype=torch.bfloat16)), {}), FFPATypeError, ("'value'", "bfloat16"), "both"),
    Case("dtype_int", lambda g: (tuple(torch.randint(0, 5, s, generator=g, dtype=torch.int32) for s in ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8))), {}), FFPATypeError, ("'query'", "floating-point", "int32"), "both"),
    # FP8 other than e4m3 (e4m3 runs: tests/test_fp8_cpu.py): SDPA accepts it and fails inside its kernels
    # with an unrelated message, so no SDPA column
    Case("dtype_fp8_e5m2", lambda g: (tuple(torch.randn(*s, generator=g).to(torch.float8_e5m2) for s in ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8))), {}), FFPATypeError, ("'query'", "float8_e5m2", "float8_e4m3fn"), None),
    Case("dtype_bool", lambda g: (tuple(torch.rand(*s, generator=g) > 0.5 for s in ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8))), {}), FFPATypeError, ("'query'", "floating-point"), "both"),
    Case("dtype_complex", lambda g: (tuple(torch.randn(*s, generator=g, dtype=torch.complex64) for s in ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8))), {}), FFPATypeError, ("'query'", "floating-point"), "both"),
    # ---------------------------------------------------------------- devices
    Case("device_mismatch_key", replace(1, lambda g: rn(g, 2, 3, 5, 8).to("meta")), FFPAValueError, ("'key'", "device", "meta"), "both"),
    Case("device_mismatch_value", replace(2, lambda g: rn(g, 2, 3, 5, 8).to("meta")), FFPAValueError, ("'value'", "device", "meta"), "both"),
    # ---------------------------------------------------------------- non-tensors
    Case("query_list", replace(0, lambda g: [[1.0]]), FFPATypeError, ("'query'", "Tensor", "list"), "both"),
    Case("key_none", replace(1, lambda g: None), FFPATypeError, ("'key'", "NoneType"), "both"),
    Case("value_float", replace(2, lambda g: 1.0), FFPATypeError, ("'value'", "float"), "both"),
    Case("mask_float", with_mask(lambda g: 1.0), FFPATypeError, ("'attn_mask'", "float"), "both"),
    Case("mask_list", with_mask(lambda g: [[True]]), FFPATypeError, ("'attn_mask'", "list"), "both"),
    # ---------------------------------------------------------------- masks
    Case("mask_int64", with_mask(lambda g: torch.ones(4, 5, dtype=torch.int64)), FFPATypeError, ("'attn_mask'", "int64"), "both"),
    Case("mask_uint8", with_mask(lambda g: torch.ones(4, 5, dtype=torch.uint8)), FFPATypeError, ("'attn_mask'", "uint8"), "both"),
    Case("mask_f64_for_f32", with_mask(lambda g: rn(g, 4, 5, dtype=torch.float64)), FFPATypeError, ("'attn_mask'", "float64"), "both"),
    Case("mask_f16_for_bf16", with_mask(lambda g: rn(g, 4, 5, dtype=torch.float16), dtype=torch.bfloat16), FFPATypeError, ("'attn_mask'", "float16"), "both"),
    Case("mask_f16_for_f64", with_mask(lambda g: rn(g, 4, 5, dtype=torch.float16), dtype=torch.float64), FFPATypeError, ("'attn_mask'", "float16"), "both"),
    Case("mask_bad_last_dim", with_mask(lambda g: rn(g, 4, 6)), FFPAValueError, ("'attn_mask'", "(4, 6)", "(2, 3, 4, 5)"), "both"),
    Case("mask_bad_l_dim", with_mask(lambda g: torch.ones(3, 5, dtype=torch.bool)), FFPAValueError, ("'attn_mask'", "(3, 5)"), "both"),
    Case("mask_bad_batch", with_mask(lambda g: rn(g, 3, 1, 4, 5)), FFPAValueError, ("'attn_mask'",), "both"),
    Case("mask_too_many_dims", with_mask(lambda g: rn(g, 1, 1, 1, 4, 5)), FFPAValueError, ("'attn_mask'", "(1, 1, 1, 4, 5)"), "both"),
    Case("mask_4d_for_3d", with_mask(lambda g: rn(g, 2, 3, 4, 5), q=(3, 4, 8), k=(3, 5, 8)), FFPAValueError, ("'attn_mask'",), "both"),
    Case("mask_kv_heads_under_gqa", with_mask(lambda g: rn(g, 2, 2, 4, 5), q=(2, 4, 4, 8), k=(2, 2, 5, 8), enable_gqa=True), FFPAValueError, ("'attn_mask'", "(2, 4, 4, 5)"), "both"),
    # A meta mask with CPU inputs is silently ignored by the default CPU kernel.
    Case("mask_device_mismatch", with_mask(lambda g: rn(g, 4, 5).to("meta")), FFPAValueError, ("'attn_mask'", "device"), "math"),
    # Documented ("An error is thrown if both attn_mask and is_causal are set") and raised
    # by the math backend; the default CPU kernel silently applies both.
    Case("mask_and_causal", with_mask(lambda g: rn(g, 4, 5), is_causal=True), FFPAValueError, ("'attn_mask'", "'is_causal'"), "math"),
    Case("bool_mask_and_causal", with_mask(lambda g: torch.rand(4, 5, generator=g) > 0.3, is_causal=True), FFPAValueError, ("'attn_mask'", "'is_causal'"), "math"),
    # ---------------------------------------------------------------- dropout_p
    Case("dropout_above_1", with_qkv(dropout_p=1.5), FFPAValueError, ("'dropout_p'", "[0, 1]", "1.5"), "both"),
    Case("dropout_inf", with_qkv(dropout_p=float("inf")), FFPAValueError, ("'dropout_p'", "inf"), "both"),
    # negative / NaN: the default CPU path raises, the math backend lets them through
    Case("dropout_negative", with_qkv(dropout_p=-0.1), FFPAValueError, ("'dropout_p'", "-0.1"), "default"),
    Case("dropout_nan", with_qkv(dropout_p=float("nan")), FFPAValueError, ("'dropout_p'", "nan"), "default"),
    Case("dropout_str", with_qkv(dropout_p="0.1"), FFPATypeError, ("'dropout_p'", "str"), "both"),
    Case("dropout_none", with_qkv(dropout_p=None), FFPATypeError, ("'dropout_p'", "NoneType"), "both"),
    Case("dropout_1d_tensor", with_qkv(dropout_p=torch.tensor([0.0])), FFPATypeError, ("'dropout_p'", "Tensor"), "both"),
    # ---------------------------------------------------------------- bool flags
    Case("is_causal_int", with_qkv(is_causal=1), FFPATypeError, ("'is_causal'", "int"), "both"),
    Case("is_causal_none", with_qkv(is_causal=None), FFPATypeError, ("'is_causal'", "NoneType"), "both"),
    Case("is_causal_str", with_qkv(is_causal="yes"), FFPATypeError, ("'is_causal'", "str"), "both"),
    Case("is_causal_tensor", with_qkv(is_causal=torch.tensor(True)), FFPATypeError, ("'is_causal'", "Tensor"), "both"),
    Case("enable_gqa_int", with_qkv(enable_gqa=1), FFPATypeError, ("'enable_gqa'", "int"), "both"),
    Case("enable_gqa_none", with_qkv(enable_gqa=None), FFPATypeError, ("'enable_gqa'",), "both"),
    # ---------------------------------------------------------------- scale
    Case("scale_str", with_qkv(scale="0.5"), FFPATypeError, ("'scale'", "str"), "both"),
    Case("scale_list", with_qkv(scale=[0.5]), FFPATypeError, ("'scale'", "list"), "both"),
    Case("scale_complex", with_qkv(scale=0.5 + 1j), FFPATypeError, ("'scale'", "complex"), "both"),
    Case("scale_1d_tensor", with_qkv(scale=torch.tensor([0.5, 0.5])), FFPATypeError, ("'scale'", "Tensor"), "both"),
    Case("scale_tensor_requires_grad", with_qkv(scale=torch.tensor(0.5, requires_grad=True)), FFPATypeError, ("'scale'", "requires_grad"), "both"),
    # ---------------------------------------------------------------- our knobs (no SDPA equivalent)
    Case("level_0", with_qkv(level=0), FFPAValueError, ("'level'", "0"), None),
    Case("level_4", with_qkv(level=4), FFPAValueError, ("'level'", "4"), None),
    Case("level_negative", with_qkv(level=-1), FFPAValueError, ("'level'",), None),
    Case("level_str", with_qkv(level="1"), FFPATypeError, ("'level'", "str"), None),
    Case("level_float", with_qkv(level=1.0), FFPATypeError, ("'level'", "float"), None),
    Case("level_bool", with_qkv(level=True), FFPATypeError, ("'level'", "bool"), None),
    Case("acc_unknown", with_qkv(acc="bf16"), FFPAValueError, ("'acc'", "'bf16'", "'fp32'"), None),
    Case("acc_empty", with_qkv(acc=""), FFPAValueError, ("'acc'",), None),
    Case("acc_case", with_qkv(acc="FP32"), FFPAValueError, ("'acc'", "'FP32'"), None),
    Case("acc_none", with_qkv(acc=None), FFPATypeError, ("'acc'", "NoneType"), None),
    Case("acc_int", with_qkv(acc=32), FFPATypeError, ("'acc'", "int"), None),
    Case("num_stages_0", with_qkv(num_stages=0), FFPAValueError, ("'num_stages'", "0"), None),
    Case("num_stages_5", with_qkv(num_stages=5), FFPAValueError, ("'num_stages'", "5"), None),
    Case("num_stages_str", with_qkv(num_stages="2"), FFPATypeError, ("'num_stages'", "str"), None),
    Case("num_stages_float", with_qkv(num_stages=2.0), FFPATypeError, ("'num_stages'", "float"), None),
    Case("num_stages_bool", with_qkv(num_stages=True), FFPATypeError, ("'num_stages'", "bool"), None),
    Case("causal_align_unknown", with_qkv(is_causal=True, causal_align="bottom-right"), FFPAValueError, ("'causal_align'", "'top_left'", "'bottom_right'", "'bottom-right'"), None),
    Case("causal_align_case", with_qkv(causal_align="TOP_LEFT"), FFPAValueError, ("'causal_align'", "'TOP_LEFT'"), None),
    Case("causal_align_empty", with_qkv(causal_align=""), FFPAValueError, ("'causal_align'",), None),
    Case("causal_align_none", with_qkv(is_causal=True, causal_align=None), FFPATypeError, ("'causal_align'", "NoneType"), None),
    Case("causal_align_bool", with_qkv(is_causal=True, causal_align=True), FFPATypeError, ("'causal_align'", "bool"), None),
    Case("causal_align_int", with_qkv(causal_align=1), FFPATypeError, ("'causal_align'", "int"), None),
    Case("return_lse_int", with_qkv(return_lse=1), FFPATypeError, ("'return_lse'", "int"), None),
    Case("strict_str", with_qkv(strict="yes"), FFPATypeError, ("'strict'", "str"), None),
]
if np is not None:
    CASES += [
        Case("is_causal_numpy_bool", with_qkv(is_causal=np.bool_(True)), FFPATypeError, ("'is_causal'",), "both"),
        Case("level_numpy_int", with_qkv(level=np.int64(1)), FFPATypeError, ("'level'",), None),
    ]

SDPA_KWARGS = ("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


def _sdpa_exception(args, kwargs, backend) -> Optional[BaseException]:
    kw = {k: v for k, v in kwargs.items() if k in SDPA_KWARGS}
    try:
        if backend is None:
            SDPA(*args, **kw)
        else:
            with sdpa_kernel(backend):
                SDPA(*args, **kw)
    except Exception as e:  # noqa: BLE001 - we want whatever SDPA raises
        return e
    return None


def _builtin_base(exc: BaseException) -> type:
    for base in (IndexError, TypeError, RuntimeError):
        if isinstance(exc, base):
            return base
    raise AssertionError(f"SDPA raised an unexpected class {type(exc).__mro__}")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_forward_raises_named_error(case: Case):
    g = torch.Generator().manual_seed(zlib.crc32(case.id.encode()))
    args, kwargs = case.build(g)
    with pytest.raises(case.exc) as info:
        ffpa_attn.forward(*args, **kwargs)
    assert type(info.value) is case.exc, f"expected exactly {case.exc}, got {type(info.value)}"
    msg = str(info.value)
    for word in case.words:
        assert word in msg, f"{word!r} not in message: {msg}"
    # idiomatic class + SDPA-compatible class + our base
    assert isinstance(info.value, FFPAError)
    if issubclass(case.exc, FFPAValueError):
        assert isinstance(info.value, (ValueError,)) and isinstance(info.value, RuntimeError)
    if issubclass(case.exc, FFPATypeError):
        assert isinstance(info.value, TypeError) and isinstance(info.value, RuntimeError)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_forward_raises_named_error_under_compile_fullgraph(case: Case):
    """Under torch.compile(fullgraph=True) the same misuse raises the same class (not dynamo's
    Unsupported) with the same words: the error is traced into the graph and raised when the
    compiled code runs."""
    g = torch.Generator().manual_seed(zlib.crc32(case.id.encode()))
    args, kwargs = case.build(g)
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: ffpa_attn.forward(*a, **kwargs), fullgraph=True, backend="eager")
    with pytest.raises(case.exc) as info:
        compiled(*args)
    assert type(info.value) is case.exc, f"expected exactly {case.exc}, got {type(info.value)}: {info.value}"
    for word in case.words:
        assert word in str(info.value), f"{word!r} not in message: {info.value}"


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.sdpa is not None], ids=[c.id for c in CASES if c.sdpa is not None]
)
def test_sdpa_raises_too(case: Case):
    g = torch.Generator().manual_seed(zlib.crc32(case.id.encode()))
    args, kwargs = case.build(g)
    backends = {
        "default": [None],
        "math": [SDPBackend.MATH],
        "both": [None, SDPBackend.MATH],
    }[case.sdpa]
    for backend in backends:
        exc = _sdpa_exception(args, kwargs, backend)
        assert exc is not None, f"SDPA ({backend or 'default dispatch'}) accepted {case.id}"
        # `except <what SDPA raised>` keeps working with ffpa_attn
        assert issubclass(case.exc, _builtin_base(exc)), (case.exc, type(exc))


# Documented quirks of the CPU SDPA dispatch that justify the "math"/"default" columns:
# if torch changes them these tests tell us to revisit the table above. torch 2.15's default CPU
# kernel raises for a mask with is_causal=True too (2.11 applied both; 2.12-2.14 not checked).
TORCH_VERSION = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])


@pytest.mark.parametrize(
    "case_id",
    ["seq_len_mismatch_longer_v", "mask_device_mismatch"]
    + (["mask_and_causal"] if TORCH_VERSION < (2, 15) else []),
)
def test_default_cpu_sdpa_is_lenient_where_math_raises(case_id):
    case = next(c for c in CASES if c.id == case_id)
    args, kwargs = case.build(torch.Generator().manual_seed(5))
    assert _sdpa_exception(args, kwargs, None) is None
    assert _sdpa_exception(args, kwargs, SDPBackend.MATH) is not None


@pytest.mark.parametrize("case_id", ["dropout_negative", "dropout_nan"])
def test_math_sdpa_is_lenient_where_default_raises(case_id):
    case = next(c for c in CASES if c.id == case_id)
    args, kwargs = case.build(torch.Generator().manual_seed(6))
    assert _sdpa_exception(args, kwargs, None) is not None
    assert _sdpa_exception(args, kwargs, SDPBackend.MATH) is None


def test_errors_raised_before_routing_even_with_strict():
    # strict=True must not turn a misuse into a NotImplementedError: validation first.
    g = torch.Generator().manual_seed(7)
    q, k, v = qkv(g, k=(2, 3, 5, 16), v=(2, 3, 5, 8))
    with pytest.raises(FFPAValueError, match="'key'"):
        ffpa_attn.forward(q, k, v, strict=True)


def test_errors_issue_no_fallback_warning(recwarn):
    g = torch.Generator().manual_seed(8)
    q, k, v = qkv(g, k=(2, 3, 5, 16), v=(2, 3, 5, 8))
    with pytest.raises(FFPAValueError):
        ffpa_attn.forward(q, k, v)
    assert not [w for w in recwarn if issubclass(w.category, ffpa_attn.FFPAFallbackWarning)]


def test_error_classes_catchable_both_ways():
    assert issubclass(FFPAValueError, ValueError) and issubclass(FFPAValueError, RuntimeError)
    assert issubclass(FFPATypeError, TypeError) and issubclass(FFPATypeError, RuntimeError)
    assert issubclass(FFPAIndexError, IndexError) and issubclass(FFPAIndexError, ValueError)
    assert issubclass(ffpa_attn.FFPAUnsupportedError, NotImplementedError)
    assert issubclass(ffpa_attn.FFPAFallbackWarning, UserWarning)
    g = torch.Generator().manual_seed(9)
    q, k, v = qkv(g, k=(2, 3, 5, 16), v=(2, 3, 5, 8))
    for cls in (RuntimeError, ValueError, FFPAError):
        with pytest.raises(cls):
            ffpa_attn.forward(q, k, v)


def test_4d_mask_for_3d_inputs_follows_this_torch():
    """A (1, H, L, S) mask with 3-D (H, L, E) inputs: torch 2.15's SDPA takes it (dropping the
    leading 1), 2.11's raises; forward does what the installed torch's SDPA does."""
    g = torch.Generator().manual_seed(9)
    q, k, m = rn(g, 3, 4, 8), rn(g, 3, 5, 8), rn(g, 1, 3, 4, 5)
    try:
        expected = SDPA(q, k, k, attn_mask=m)
    except RuntimeError:
        with pytest.raises(FFPAValueError, match="'attn_mask' must be broadcastable"):
            ffpa_attn.forward(q, k, k, attn_mask=m)
        return
    torch.testing.assert_close(ffpa_attn.forward(q, k, k, attn_mask=m), expected)
    out, lse = ffpa_attn.forward(q, k, k, attn_mask=m, return_lse=True)
    torch.testing.assert_close(out, expected)
    assert lse.shape == (3, 4)
