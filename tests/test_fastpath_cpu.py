"""CPU tests of forward()'s eager fast path (ffpa_attn/_fastpath.py), on the mocked op of
test_kernel_path_cpu: a call whose metadata matches one already routed to the kernels skips
validation and routing and gives the same result; anything else takes the full path (other
shapes or strides, flags of another type, grad, fallbacks, masks the validation rewrites)."""
import threading

import pytest
import torch

import ffpa_attn
from _cpu_helpers import fallback_warnings, ref_attention, rn, TOL
from ffpa_attn import _fastpath, interface
from test_decode_route_cpu import mock_decode  # noqa: F401  (the decode op's mock, a fixture)
from _mock_kernel import mock_kernel  # noqa: F401  (the forward op's mock, a fixture)


def _count_validations(monkeypatch, module):
    """The shapes `module._validate` is called with, from now on (a list that grows)."""
    seen = []
    real = module._validate

    def counting(*args):
        seen.append(args[0].shape)
        return real(*args)

    monkeypatch.setattr(module, "_validate", counting)
    return seen


@pytest.fixture
def validations(monkeypatch):
    """Counts full-path validations of forward()."""
    return _count_validations(monkeypatch, interface)


def _qkv(gen, L=9, S=11, E=16, dtype=torch.bfloat16):
    return rn(gen, 2, 4, L, E, dtype=dtype), rn(gen, 2, 2, S, E, dtype=dtype), rn(gen, 2, 2, S, E, dtype=dtype)


def test_repeated_call_skips_validation_and_matches(mock_kernel, validations, gen):  # noqa: F811
    q, k, v = _qkv(gen)
    first = ffpa_attn.forward(q, k, v, enable_gqa=True, scale=0.3)
    q2, k2, v2 = (t.clone().normal_(generator=gen) for t in (q, k, v))  # same metadata, other values
    second = ffpa_attn.forward(q2, k2, v2, enable_gqa=True, scale=0.3)
    assert len(validations) == 1 and len(mock_kernel) == 2  # the kernel ran twice, validated once
    want, _ = ref_attention(q2, k2, v2, enable_gqa=True, scale=0.3)
    torch.testing.assert_close(second.double(), want, **TOL[torch.bfloat16])
    assert first.shape == second.shape == (2, 4, 9, 16)
    ffpa_attn.forward(q, k, v, enable_gqa=True, scale=0.5)  # another scale: validated again
    ffpa_attn.forward(q[:, :, :5], k, v, enable_gqa=True, scale=0.3)  # another shape
    ffpa_attn.forward(q.transpose(1, 2).contiguous().transpose(1, 2), k, v, enable_gqa=True, scale=0.3)  # strides
    assert len(validations) == 4


def test_flags_of_another_type_are_still_rejected(mock_kernel, validations, gen):  # noqa: F811
    q, k, v = _qkv(gen)
    ffpa_attn.forward(q, k, v, enable_gqa=True, is_causal=True)
    with pytest.raises(TypeError, match="is_causal"):
        ffpa_attn.forward(q, k, v, enable_gqa=True, is_causal=1)  # 1 == True, but not a bool
    with pytest.raises(TypeError, match="enable_gqa"):
        ffpa_attn.forward(q, k, v, enable_gqa=1, is_causal=True)


def test_grad_and_fallbacks_take_the_full_path(mock_kernel, validations, gen, record):  # noqa: F811
    q, k, v = _qkv(gen)
    ffpa_attn.forward(q, k, v, enable_gqa=True)
    q.requires_grad_(True)
    out = ffpa_attn.forward(q, k, v, enable_gqa=True)  # needs grad: SDPA, with its warning
    assert out.requires_grad and len(mock_kernel) == 1 and fallback_warnings(record)
    with torch.no_grad():
        ffpa_attn.forward(q, k, v, enable_gqa=True)  # no grad needed: the kernel (remembered route)
    assert len(mock_kernel) == 2
    q.requires_grad_(False)
    x = q.float()
    for _ in range(2):  # fallbacks are never remembered: validated each time
        ffpa_attn.forward(x, k.float(), v.float(), enable_gqa=True)
    assert len(validations) == 4 and len(mock_kernel) == 2


def test_masks_remembered_only_as_passed(mock_kernel, validations, gen):  # noqa: F811
    q, k, v = _qkv(gen)
    mask = torch.rand(9, 11, generator=gen) > 0.3
    for _ in range(2):
        out = ffpa_attn.forward(q, k, v, attn_mask=mask, enable_gqa=True)
    assert len(validations) == 1 and mock_kernel[-1]["mask"] is not None
    want, _ = ref_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(out.double(), want, **TOL[torch.bfloat16])
    row = torch.rand(11, generator=gen) > 0.3  # 1-D: the validation reshapes it, so never remembered
    for _ in range(2):
        ffpa_attn.forward(q, k, v, attn_mask=row, enable_gqa=True)
    assert len(validations) == 3


def test_threads_keep_their_own_decisions(mock_kernel, gen):  # noqa: F811
    """Concurrent first calls of two shapes on two threads: each remembers its own route."""
    shapes = [(9, 11), (5, 7)]
    inputs = [_qkv(gen, L, S) for L, S in shapes]
    errors = []

    def work(q, k, v):
        try:
            for _ in range(20):
                out = ffpa_attn.forward(q, k, v, enable_gqa=True)
                assert out.shape == (2, 4, q.shape[2], 16)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=t) for t in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert _fastpath.size() == 2


def test_remembered_decode_route(mock_decode, validations, gen):  # noqa: F811
    """A short-query call remembered as a decode call runs on the decode op again."""
    q, k, v = (rn(gen, 2, h, n, 16, dtype=torch.bfloat16) for h, n in ((8, 1), (2, 40), (2, 40)))
    outs = [ffpa_attn.forward(q, k, v, enable_gqa=True) for _ in range(3)]
    assert len(validations) == 1 and len(mock_decode) == 3
    want, _ = ref_attention(q, k, v, enable_gqa=True)
    torch.testing.assert_close(outs[-1].double(), want, **TOL[torch.bfloat16])


def test_a_growing_kv_cache_keeps_the_fast_path(mock_kernel, mock_decode, validations, gen):  # noqa: F811
    """A decode step appends a row to the cache (torch.cat: a new length and new strides each step):
    without a mask or causal alignment the length is not part of the call key, so only the first
    step validates; each result is still right. Causal calls, masks, non-contiguous caches and a
    length of 0 or one key and value disagree on keep the exact key (the full path)."""
    bf16 = torch.bfloat16
    q = rn(gen, 2, 4, 1, 16, dtype=bf16)
    k, v = rn(gen, 2, 2, 5, 16, dtype=bf16), rn(gen, 2, 2, 5, 16, dtype=bf16)
    for _ in range(4):
        k = torch.cat([k, rn(gen, 2, 2, 1, 16, dtype=bf16)], dim=2)
        v = torch.cat([v, rn(gen, 2, 2, 1, 16, dtype=bf16)], dim=2)
        out = ffpa_attn.forward(q, k, v, enable_gqa=True)
        want, _ = ref_attention(q, k, v, enable_gqa=True)
        torch.testing.assert_close(out.double(), want, **TOL[torch.bfloat16])
    assert len(validations) == 1
    ffpa_attn.forward(q, k, v, enable_gqa=True, is_causal=True, causal_align="bottom_right")
    ffpa_attn.forward(q, k[:, :, :7], v[:, :, :7], enable_gqa=True, is_causal=True, causal_align="bottom_right")
    assert len(validations) == 3  # causal: the length is part of the key
    ffpa_attn.forward(q, k.transpose(2, 3).contiguous().transpose(2, 3), v, enable_gqa=True)
    assert len(validations) == 4  # a non-contiguous cache: exact shapes and strides
    with pytest.raises(RuntimeError):
        ffpa_attn.forward(q, k, v[:, :, :3].contiguous(), enable_gqa=True)  # lengths disagree: validated, rejected
    assert len(validations) == 5


def _twice(fn):
    """fn() on the full path, then on the fast path (the C++ table remembered it): both results."""
    return fn(), fn()


def test_fast_path_views_casts_and_lse_like_the_full_path(mock_kernel, validations, gen):  # noqa: F811
    """What the C++ fast path redoes (csrc/ops/fastpath.cpp): 3-D and 2-D inputs viewed as 4-D and the
    result reshaped back, autocast's casts, an expanded mask narrowed to its broadcast dims, lse on
    request. Each pair of calls validates once and gives the same result as the full path."""
    bf16 = torch.bfloat16
    q, k, v = (rn(gen, *s, dtype=bf16) for s in ((4, 9, 16), (4, 11, 16), (4, 11, 16)))
    (o1, l1), (o2, l2) = _twice(lambda: ffpa_attn.forward(q, k, v, return_lse=True))
    assert o2.shape == (4, 9, 16) and l2.shape == (4, 9)
    torch.testing.assert_close(o2, o1, rtol=0, atol=0)
    torch.testing.assert_close(l2, l1, rtol=0, atol=0)
    a, b = _twice(lambda: ffpa_attn.forward(q[0], k[0], v[0], scale=0.25))
    assert b.shape == (9, 16)
    torch.testing.assert_close(b, a, rtol=0, atol=0)
    assert len(validations) == 2 and len(mock_kernel) == 4

    x, y, z = (t.float().unsqueeze(0) for t in (q, k, v))
    with torch.autocast("cpu", dtype=bf16):
        a, b = _twice(lambda: ffpa_attn.forward(x, y, z))
    assert b.dtype == bf16 and mock_kernel[-1]["dtype"] == bf16
    torch.testing.assert_close(b, a, rtol=0, atol=0)
    assert len(validations) == 3

    mask = (torch.rand(1, 1, 9, 11, generator=gen) > 0.3).expand(1, 4, 9, 11)  # heads expanded: stride 0
    a, b = _twice(lambda: ffpa_attn.forward(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), attn_mask=mask))
    assert len(validations) == 4
    assert mock_kernel[-1]["mask"]["shape"] == mock_kernel[-2]["mask"]["shape"] == (1, 1, 9, 11)
    torch.testing.assert_close(b, a, rtol=0, atol=0)
    want, _ = ref_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), attn_mask=mask)
    torch.testing.assert_close(b.double(), want, **TOL[bf16])


def test_fast_path_realigns_like_the_full_path(mock_kernel, validations, gen):  # noqa: F811
    """A remembered call whose tensors come back misaligned (same metadata, a storage offset that breaks
    the 16-byte pointer alignment) is copied before the op, as on the full path; the mock asserts
    alignment."""
    bf16 = torch.bfloat16
    base = rn(gen, 2 * 4 * 9 * 16 + 8, dtype=bf16)
    q_ok = base[:2 * 4 * 9 * 16].view(2, 4, 9, 16)
    q_off = base[4:4 + 2 * 4 * 9 * 16].view(2, 4, 9, 16)  # 8 bytes off
    k, v = rn(gen, 2, 2, 11, 16, dtype=bf16), rn(gen, 2, 2, 11, 16, dtype=bf16)
    ffpa_attn.forward(q_ok, k, v, enable_gqa=True)
    out = ffpa_attn.forward(q_off, k, v, enable_gqa=True)
    assert len(validations) == 1 and len(mock_kernel) == 2
    assert mock_kernel[-1]["q_ptr"] != q_off.data_ptr()  # a copy
    want, _ = ref_attention(q_off, k, v, enable_gqa=True)
    torch.testing.assert_close(out.double(), want, **TOL[bf16])


def test_dispatch_modes_see_the_op(mock_kernel, gen):  # noqa: F811
    """The fast path calls the op through the dispatcher: a dispatch mode sees ffpa_attn.ffpa_fwd."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    q, k, v = _qkv(gen)
    ffpa_attn.forward(q, k, v, enable_gqa=True)
    with Seen() as seen:
        ffpa_attn.forward(q, k, v, enable_gqa=True)
    assert any("ffpa_attn.ffpa_fwd" in op for op in seen.ops), seen.ops


def test_decode_repeated_call_skips_validation(mock_decode, monkeypatch, gen):  # noqa: F811
    """ffpa_attn.decode's fast path (csrc/ops/fastpath.cpp): a call whose metadata ran on the decode op
    before goes straight to it (one validation for three calls, each result right); other flags, a
    flag of another type, an int scale and FFPA_DEBUG_CHECKS take the Python path."""
    from ffpa_attn import _decode

    seen = _count_validations(monkeypatch, _decode)
    bf16 = torch.bfloat16
    q = rn(gen, 2, 1, 8, 16, dtype=bf16)
    k, v = rn(gen, 2, 40, 2, 16, dtype=bf16), rn(gen, 2, 40, 2, 16, dtype=bf16)
    outs = [ffpa_attn.decode(q, k, v, scale=0.3, return_lse=True) for _ in range(3)]
    assert len(seen) == 1 and len(mock_decode) == 3
    want, want_lse = ref_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale=0.3, enable_gqa=True)
    torch.testing.assert_close(outs[-1][0].transpose(1, 2).double(), want, **TOL[bf16])
    torch.testing.assert_close(outs[-1][1].double(), want_lse, atol=1e-4, rtol=1e-4)
    assert mock_decode[-1]["scale"] == pytest.approx(0.3) and mock_decode[-1]["num_splits"] == 0
    ffpa_attn.decode(q, k, v, scale=0.3)  # another return_lse
    ffpa_attn.decode(q, k, v, scale=0.3, num_splits=2)
    assert len(seen) == 3 and mock_decode[-1]["num_splits"] == 2
    ffpa_attn.decode(q, k, v, scale=0.3, num_splits=2)
    assert len(seen) == 3  # remembered
    with pytest.raises(TypeError, match="causal"):
        ffpa_attn.decode(q, k, v, scale=0.3, causal=1)  # 1 == True, but not a bool
    ffpa_attn.decode(q, k, v, scale=1)  # an int scale: the Python path converts it
    ffpa_attn.decode(q, k, v, scale=1)
    assert len(seen) == 6
    monkeypatch.setenv("FFPA_DEBUG_CHECKS", "1")
    ffpa_attn.decode(q, k, v, scale=0.3, return_lse=True)
    assert len(seen) == 7  # debug checks: validated (and the index tensors checked) every call


def test_fast_path_passes_the_forced_knobs(mock_kernel, validations, gen):  # noqa: F811
    """A remembered call with level / acc / num_stages forced passes the same op codes as the full path
    did (the C++ route keeps them)."""
    q, k, v = (rn(gen, 2, 2, n, 64, dtype=torch.float16) for n in (9, 11, 11))
    for _ in range(2):
        ffpa_attn.forward(q, k, v, level=1, acc="fp16", num_stages=2)
    assert len(validations) == 1 and len(mock_kernel) == 2
    first, second = mock_kernel[-2], mock_kernel[-1]
    assert (second["level"], second["acc"], second["num_stages"]) == (first["level"], first["acc"], first["num_stages"])
    assert (second["level"], second["num_stages"]) == (1, 2) and second["acc"] == ffpa_attn._spec.ACC_CODES["fp16"]
