"""ffpa_attn.decode (a few query rows against a KV cache, contiguous or paged) against an independent
float64 reference built per sequence: GQA, Lq 1..32 with and without the bottom-right causal mask,
per-sequence lengths (0, 1, full), shuffled page tables, page sizes; return_lse; torch.compile; errors
naming the argument (eagerly and under compile) and the FFPA_DEBUG_CHECKS value checks. CPU: the
call runs through forward's SDPA fallback; the GPU test runs our kernels."""
from __future__ import annotations

import math

import pytest
import torch

import ffpa_attn
from _cpu_helpers import rn
from _decode_ref import paged, reference
from ffpa_attn import FFPATypeError, FFPAValueError


@pytest.mark.parametrize("Lq", [1, 2, 7, 32])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads", [(4, 4), (8, 2), (16, 1)])
@pytest.mark.parametrize("layout", ["contiguous", "paged16", "paged64"])
def test_decode_matches_reference(gen, Lq, causal, heads, layout):
    Hq, Hkv = heads
    B, S, D, Dv = 3, 128, 16, 8
    q = rn(gen, B, Lq, Hq, D)
    k, v = rn(gen, B, S, Hkv, D), rn(gen, B, S, Hkv, Dv)
    lens = torch.tensor([S, 1, 77], dtype=torch.int32)
    if causal and Lq > 1:
        lens[1] = Lq + 1  # every query row sees at least two keys
    for b in range(B):  # past each length the cache holds garbage (an empty-allocated cache)
        k[b, int(lens[b]):] = math.nan
        v[b, int(lens[b]):] = math.nan
    want, want_lse = reference(q, k, v, lens, causal)
    kw = dict(cache_seqlens=lens, causal=causal, return_lse=True)
    if layout == "contiguous":
        out, lse = ffpa_attn.decode(q, k, v, **kw)
    else:
        pk, pv, table = paged(gen, k, v, int(layout[5:]))
        out, lse = ffpa_attn.decode(q, pk, pv, block_table=table, **kw)
    assert out.shape == (B, Lq, Hq, Dv) and lse.shape == (B, Hq, Lq) and lse.dtype == torch.float32
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(lse.double(), want_lse, atol=1e-5, rtol=1e-5)


def test_zero_length_sequence_and_defaults(gen):
    q, k, v = rn(gen, 2, 1, 4, 8), rn(gen, 2, 33, 4, 8), rn(gen, 2, 33, 4, 8)
    out, lse = ffpa_attn.decode(q, k, v, cache_seqlens=torch.tensor([0, 33], dtype=torch.int32), return_lse=True)
    assert (out[0] == 0).all() and torch.isneginf(lse[0]).all()
    full = ffpa_attn.decode(q, k, v, scale=0.3)  # no lengths: the whole cache; a plain tensor back
    want, _ = reference(q, k, v, torch.tensor([33, 33]), False, scale=0.3)
    torch.testing.assert_close(full.double(), want, atol=1e-5, rtol=1e-4)


def test_decode_under_compile_fullgraph(gen):
    q, k, v = rn(gen, 2, 3, 4, 8), rn(gen, 2, 40, 2, 8), rn(gen, 2, 40, 2, 8)
    lens = torch.tensor([40, 9], dtype=torch.int32)
    torch._dynamo.reset()
    fn = torch.compile(lambda q, k, v, n: ffpa_attn.decode(q, k, v, cache_seqlens=n, causal=True), fullgraph=True,
                       backend="eager")
    torch.testing.assert_close(fn(q, k, v, lens), ffpa_attn.decode(q, k, v, cache_seqlens=lens, causal=True))


@pytest.mark.parametrize("compiled", [False, True])
def test_errors_name_the_argument(gen, compiled):
    q, k, v = rn(gen, 2, 1, 4, 8), rn(gen, 2, 32, 2, 8), rn(gen, 2, 32, 2, 8)
    lens = torch.tensor([3, 4], dtype=torch.int32)
    pool, table = rn(gen, 6, 16, 2, 8), torch.zeros(2, 2, dtype=torch.int32)
    k3, pool24 = rn(gen, 2, 32, 3, 8), rn(gen, 6, 24, 2, 8)
    cases = [
        (lambda: ffpa_attn.decode(q[:, :1].expand(2, 33, 4, 8), k, v), FFPAValueError, "Lq = 33 .* causal_align='bottom_right'"),
        (lambda: ffpa_attn.decode(q, k, v, cache_seqlens=lens.long()), FFPATypeError, "'cache_seqlens' must be int32"),
        (lambda: ffpa_attn.decode(q, k, v, cache_seqlens=lens[:1]), FFPAValueError, "'cache_seqlens' has 1 entries"),
        (lambda: ffpa_attn.decode(q, pool, pool, block_table=table.long()), FFPATypeError, "'block_table' must be int32"),
        (lambda: ffpa_attn.decode(q, pool, pool, block_table=table[:1]), FFPAValueError, "'block_table' has 1 rows"),
        (lambda: ffpa_attn.decode(q, pool24, pool24, block_table=table), FFPAValueError, "page size 24 .dim 1 of .k_cache.. is not supported"),
        (lambda: ffpa_attn.decode(q, k3, k3), FFPAValueError, r"q's heads \(4\) must be a multiple of the cache's heads \(3\)"),
        (lambda: ffpa_attn.decode(q, k.double(), v.double()), FFPATypeError, "'k_cache' must have q's dtype"),
        (lambda: ffpa_attn.decode(q, k, v[:, :31]), FFPAValueError, "must agree in every dim"),
        (lambda: ffpa_attn.decode(q, k[:1], v[:1]), FFPAValueError, "'k_cache' has batch 1"),
        (lambda: ffpa_attn.decode(q, k, v, cache_seqlens=lens.to("meta")), FFPAValueError, "'cache_seqlens' must be on"),
        (lambda: ffpa_attn.decode(q, k, v, num_splits=0), FFPAValueError, "'num_splits'"),
        (lambda: ffpa_attn.decode(q, k, v, causal=1), FFPATypeError, "'causal' must be a bool"),
        (lambda: ffpa_attn.decode(q[0], k, v), FFPAValueError, "'q' must be 4-D"),
        (lambda: ffpa_attn.decode(q, None, v), FFPATypeError, "'k_cache' must be a torch.Tensor"),
    ]
    for call, exc, words in cases:
        if compiled:
            torch._dynamo.reset()
            call = torch.compile(call, fullgraph=True, backend="eager")
        with pytest.raises(exc, match=words) as info:
            call()
        assert type(info.value) is exc, (words, type(info.value))


def test_debug_checks_values(gen, monkeypatch):
    q, pool = rn(gen, 2, 1, 4, 8), rn(gen, 4, 16, 2, 8)
    bad_table = torch.tensor([[0, 1], [2, 9]], dtype=torch.int32)
    monkeypatch.setenv("FFPA_DEBUG_CHECKS", "1")
    with pytest.raises(FFPAValueError, match="page indices 0..9; the pool has 4 pages"):
        ffpa_attn.decode(q, pool, pool, block_table=bad_table)
    k = rn(gen, 2, 32, 2, 8)
    with pytest.raises(FFPAValueError, match="'cache_seqlens' holds 3..40; the cache holds 32"):
        ffpa_attn.decode(q, k, k, cache_seqlens=torch.tensor([3, 40], dtype=torch.int32))


@pytest.mark.requires_cuda
def test_decode_on_the_gpu_matches_reference():
    """On the GPU (the decode kernel; tests/test_decode_gpu.py covers it in depth): bf16, GQA 8/2, paged."""
    g = torch.Generator().manual_seed(3)
    q = torch.randn(3, 4, 8, 128, generator=g).to(torch.bfloat16)
    k = torch.randn(3, 512, 2, 128, generator=g).to(torch.bfloat16)
    v = torch.randn(3, 512, 2, 128, generator=g).to(torch.bfloat16)
    lens = torch.tensor([512, 5, 300], dtype=torch.int32)
    want, want_lse = reference(q.float(), k.float(), v.float(), lens, True)
    pk, pv, table = paged(g, k, v, 64)
    out, lse = ffpa_attn.decode(q.cuda(), pk.cuda(), pv.cuda(), block_table=table.cuda(), cache_seqlens=lens.cuda(),
                                causal=True, return_lse=True, strict=True)
    torch.testing.assert_close(out.cpu().double(), want, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse.cpu().double(), want_lse, atol=1e-2, rtol=1e-3)
