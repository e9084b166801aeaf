"""Which calls reach the decode op, and with what, on the CPU: the forward kernel op is the mock of
test_kernel_path_cpu.py and the decode op a mock here that checks its contract (the serving layout
(B, L, H, D) as views of forward's tensors, no copy) and computes a float64 reference. Forward sends
calls with at most 32 query rows there (no mask, a bool or additive mask, bottom-right causal or
L == S) unless a level, accumulation or ring depth is forced; ffpa_attn.decode passes its arguments
through unchanged."""
from __future__ import annotations

import math

import pytest
import torch

import ffpa_attn
from _cpu_helpers import TOL, ref_attention, rn
from ffpa_attn import _decode_ops, _ops
from _mock_kernel import impl_on_cpu, mock_kernel  # noqa: F401  (mock_kernel: the forward op's mock, a fixture)

DECODE_PAIRS = frozenset({(16, 16), (32, 32)})


@pytest.fixture
def mock_decode(mock_kernel, monkeypatch):  # noqa: F811
    calls = []

    def fake_call(q, k_cache, v_cache, cache_seqlens, block_table, scale, causal, num_splits, attn_mask=None):
        assert q.dim() == k_cache.dim() == v_cache.dim() == 4
        assert k_cache.shape[2] == v_cache.shape[2] and q.shape[2] % k_cache.shape[2] == 0
        calls.append(dict(q_shape=tuple(q.shape), k_shape=tuple(k_cache.shape), k_ptr=k_cache.data_ptr(),
                          causal=causal, scale=scale, num_splits=num_splits, seqlens=cache_seqlens,
                          table=block_table, mask=None if attn_mask is None else tuple(attn_mask.shape)))
        assert cache_seqlens is None and block_table is None, "the mock computes contiguous, full-length calls"
        out, lse = ref_attention(q.transpose(1, 2), k_cache.transpose(1, 2), v_cache.transpose(1, 2),
                                 attn_mask=attn_mask, is_causal=causal, scale=scale, enable_gqa=True,
                                 causal_bottom_right=True)
        return out.to(q.dtype).transpose(1, 2), lse.float()

    def on_cpu(q, k_cache, v_cache, cache_seqlens, block_table, attn_mask, scale, causal, num_splits):
        return fake_call(q, k_cache, v_cache, cache_seqlens, block_table, scale, causal, num_splits, attn_mask)

    monkeypatch.setattr(_decode_ops, "call", fake_call)
    monkeypatch.setattr(_decode_ops, "_OP", object())  # "the extension registers the decode op"
    monkeypatch.setattr(_ops, "_PAIRS", dict(_ops._PAIRS, decode=DECODE_PAIRS))
    lib = impl_on_cpu("ffpa_decode", on_cpu)  # forward's C++ fast path calls the op itself
    yield calls
    if lib is not None:
        lib._destroy()


def _qkv(gen, B, H, Hkv, L, S, D, dtype=torch.bfloat16):
    return rn(gen, B, H, L, D, dtype=dtype), rn(gen, B, Hkv, S, D, dtype=dtype), rn(gen, B, Hkv, S, D, dtype=dtype)


@pytest.mark.parametrize("L", [1, 5, 32])
def test_short_queries_run_on_the_decode_op(mock_decode, mock_kernel, gen, L):  # noqa: F811
    q, k, v = _qkv(gen, 2, 8, 2, L, 40, 16)
    out, lse = ffpa_attn.forward(q, k, v, enable_gqa=True, return_lse=True)
    assert len(mock_decode) == 1 and not mock_kernel
    call = mock_decode[0]
    assert call["q_shape"] == (2, L, 8, 16) and call["k_shape"] == (2, 40, 2, 16)
    assert call["k_ptr"] == k.data_ptr()  # a transposed view, not a copy
    assert call["causal"] is False and call["mask"] is None and call["num_splits"] == 0
    assert call["scale"] == pytest.approx(1 / math.sqrt(16))
    want, want_lse = ref_attention(q, k, v, enable_gqa=True)
    assert out.shape == (2, 8, L, 16) and out.is_contiguous()
    torch.testing.assert_close(out.double(), want, **TOL[torch.bfloat16])
    torch.testing.assert_close(lse.double(), want_lse, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("case,expect_decode", [
    ("L33", False), ("causal_top_left_L_lt_S", False), ("causal_L_eq_S", True), ("causal_bottom_right", True),
    ("bool_padding_mask", True), ("float_mask", True), ("level", False), ("num_stages", False),
    ("acc", False), ("pair_not_built", False),
])
def test_which_calls_route_to_decode(mock_decode, mock_kernel, gen, case, expect_decode):  # noqa: F811
    L, S, D, kw = 3, 40, 16, {}
    if case == "L33":
        L = 33
    elif case == "causal_top_left_L_lt_S":
        kw = dict(is_causal=True)
    elif case == "causal_L_eq_S":
        L, S, kw = 24, 24, dict(is_causal=True)
    elif case == "causal_bottom_right":
        kw = dict(is_causal=True, causal_align="bottom_right")
    elif case == "bool_padding_mask":
        kw = dict(attn_mask=(torch.arange(S) < torch.tensor([[40], [7]])).view(2, 1, 1, S))
    elif case == "float_mask":
        kw = dict(attn_mask=rn(gen, 2, 8, L, S))
    elif case == "level":
        D, kw = 64, dict(level=1)
    elif case == "num_stages":
        kw = dict(num_stages=2)
    elif case == "acc":
        kw = dict(acc="fp32")
    elif case == "pair_not_built":
        D = 8  # compiled for FA-2 in the mock build, not for decode
    q, k, v = _qkv(gen, 2, 8, 2, L, S, D)
    out = ffpa_attn.forward(q, k, v, enable_gqa=True, strict=True, **kw)
    assert (len(mock_decode) == 1) == expect_decode and (len(mock_kernel) == 1) != expect_decode
    if expect_decode and "attn_mask" in kw:
        assert mock_decode[0]["mask"] == tuple(kw["attn_mask"].shape)
    if expect_decode and kw.get("is_causal"):
        assert mock_decode[0]["causal"] is True
    mask = kw.get("attn_mask")
    bottom_right = kw.get("causal_align") == "bottom_right"
    want, _ = ref_attention(q, k, v, attn_mask=mask, is_causal=kw.get("is_causal", False), enable_gqa=True,
                            causal_bottom_right=bottom_right)
    torch.testing.assert_close(out.double(), want, **TOL[torch.bfloat16])


def test_decode_api_passes_its_arguments_through(mock_decode, monkeypatch, gen):
    seen = []

    def recorder(q, k_cache, v_cache, cache_seqlens, block_table, scale, causal, num_splits, attn_mask=None):
        seen.append((q, k_cache, v_cache, cache_seqlens, block_table, scale, causal, num_splits, attn_mask))
        B, Lq, Hq, _ = q.shape
        return q.new_zeros(B, Lq, Hq, v_cache.shape[-1]), q.new_zeros(B, Hq, Lq, dtype=torch.float32)

    monkeypatch.setattr(_decode_ops, "call", recorder)
    q = rn(gen, 2, 3, 8, 16, dtype=torch.bfloat16)
    pool = rn(gen, 6, 16, 2, 16, dtype=torch.bfloat16)
    table = torch.tensor([[0, 1, 2], [3, 4, 5]], dtype=torch.int32)
    lens = torch.tensor([48, 5], dtype=torch.int32)
    out, lse = ffpa_attn.decode(q, pool, pool, cache_seqlens=lens, block_table=table, causal=True, num_splits=3,
                                return_lse=True)
    (args,) = seen
    assert args[0] is q and args[1] is pool and args[2] is pool and args[3] is lens and args[4] is table
    assert args[5] == pytest.approx(0.25) and args[6] is True and args[7] == 3 and args[8] is None
    assert out.shape == (2, 3, 8, 16) and lse.shape == (2, 8, 3)
    ffpa_attn.decode(q, pool, pool, block_table=table, scale=0.5)
    assert seen[1][5] == 0.5 and seen[1][7] == 0  # num_splits None -> 0 (auto)
