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


@pytest.fixture
def validations(monkeypatch):
    """Counts full-path validations of forward()."""
    seen = []
    real = interface._validate

    def counting(*args):
        seen.append(args[0].shape)
        return real(*args)

    monkeypatch.setattr(interface, "_validate", counting)
    return seen


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
    assert sorted(r.out_shape for r in _fastpath._cache.values()) == [(2, 4, 5, 16), (2, 4, 9, 16)]


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
