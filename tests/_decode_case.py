"""One decode case on the GPU against the float64 reference of _decode_ref.py: NaN in every cache
position no length covers, outputs from an allocator poisoned with NaN (a row the kernel forgets to
write fails), optionally the kernels it launched (torch.profiler). Shared by the decode GPU tests."""
from __future__ import annotations

import math
import warnings

import torch

import ffpa_attn
from _decode_ref import paged, reference
from ffpa_attn import FFPAFallbackWarning

# Per-sequence lengths with ties, 0, 1 and a full 320-key cache (the longest-first order's tests: each
# sequence must still be computed exactly once).
LONGEST_FIRST_LENS = [320, 0, 1, 150, 320, 17, 100, 1, 319]

TOL = {torch.float16: dict(atol=5e-3, rtol=5e-3), torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}
LSE_TOL = dict(atol=2e-3, rtol=1e-4)


def kernel_names(fn):
    """Names of the CUDA kernels fn() launches."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return {e.name for e in prof.events()}


def poison():
    """Fill the caching allocator's free blocks with NaN bytes (0xFF), large and small pools."""
    big = torch.empty(96 << 20, dtype=torch.uint8, device="cuda").fill_(0xFF)
    small = [torch.empty(1 << 16, dtype=torch.uint8, device="cuda").fill_(0xFF) for _ in range(64)]
    del big, small


def run_case(B, Lq, Hq, Hkv, S, D, Dv, dtype, *, causal=False, lens=None, page=0, splits=None, seed=0,
             v_view_of_k=False, scale=None, kernels=None):
    """kernels: a list the names of the launched kernels are appended to (profiled)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Lq, Hq, D, generator=g).to(dtype)
    k = torch.randn(B, S, Hkv, D, generator=g).to(dtype)
    v = k[..., :Dv] if v_view_of_k else torch.randn(B, S, Hkv, Dv, generator=g).to(dtype)
    lens = torch.full((B,), S, dtype=torch.int32) if lens is None else torch.tensor(lens, dtype=torch.int32)
    want, want_lse = reference(q.double(), k.double(), v.double(), lens, causal, scale=scale)
    for b in range(B):  # nothing past a length may reach the output (with V a view of K, NaN there too)
        k[b, int(lens[b]):] = math.nan
        if not v_view_of_k:
            v[b, int(lens[b]):] = math.nan
    table = None
    if page:
        if v_view_of_k:
            pk, _, table = paged(g, k, k, page)
            kc = pk.cuda()
            vc = kc[..., :Dv]
        else:
            pk, pv, table = paged(g, k, v, page)
            kc, vc = pk.cuda(), pv.cuda()
        table = table.cuda()
    else:
        kc = k.cuda()
        vc = kc[..., :Dv] if v_view_of_k else v.cuda()
    poison()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FFPAFallbackWarning)  # the decode kernel runs, no fallback
        qc, lc, res = q.cuda(), lens.cuda(), {}

        def call():
            res["out"] = ffpa_attn.decode(qc, kc, vc, cache_seqlens=lc, block_table=table, causal=causal, scale=scale,
                                          return_lse=True, num_splits=splits, strict=True)
        if kernels is None:
            call()
        else:
            kernels.extend(kernel_names(call))
        out, lse = res["out"]
    torch.cuda.synchronize()
    assert out.shape == (B, Lq, Hq, Dv) and out.dtype == dtype and lse.shape == (B, Hq, Lq)
    torch.testing.assert_close(out.cpu().double(), want, **TOL[dtype])
    torch.testing.assert_close(lse.cpu().double(), want_lse, **LSE_TOL)
    return out, lse


def compile_and_graph_replay(B, Hq, Hkv, D, Dv, seed, v_view_of_k=False, splits=None):
    """decode on a shuffled page pool (pages of 64, S = 1024) under torch.compile(fullgraph=True) (equal
    to eager, to the bit) and captured in a CUDA graph, replayed with new queries and lengths (twice: the
    second replay must not see state the first left). splits: forced split count (None: auto)."""
    g = torch.Generator().manual_seed(seed)
    S, page = 1024, 64
    q = torch.randn(B, 1, Hq, D, generator=g).to(torch.bfloat16)
    k = torch.randn(B, S, Hkv, D, generator=g).to(torch.bfloat16)
    v = k[..., :Dv] if v_view_of_k else torch.randn(B, S, Hkv, Dv, generator=g).to(torch.bfloat16)
    pk, pv, table = paged(g, k, k if v_view_of_k else v, page)
    qc, pkc, tc = q.cuda(), pk.cuda(), table.cuda()
    pvc = pkc[..., :Dv] if v_view_of_k else pv.cuda()
    lens = torch.tensor([1024, 300, 1][:B], dtype=torch.int32, device="cuda")

    def step(qq, ll):
        return ffpa_attn.decode(qq, pkc, pvc, cache_seqlens=ll, block_table=tc, return_lse=True, num_splits=splits)

    eager = step(qc, lens)
    compiled = torch.compile(step, fullgraph=True)(qc, lens)
    torch.testing.assert_close(compiled[0], eager[0], atol=0, rtol=0)
    torch.testing.assert_close(compiled[1], eager[1], atol=0, rtol=0)

    static_q, static_lens = qc.clone(), lens.clone()
    step(static_q, static_lens)  # warm-up outside the capture (workspace, opt-in)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out_g, lse_g = step(static_q, static_lens)
    new_q = torch.randn(B, 1, Hq, D, generator=g).to(torch.bfloat16)
    new_lens = torch.tensor([5, 1024, 640][:B], dtype=torch.int32)
    static_q.copy_(new_q.cuda())
    static_lens.copy_(new_lens.cuda())
    want, want_lse = reference(new_q.double(), k.double(), v.double(), new_lens, False)
    for _ in range(2):
        out_g.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out_g.cpu().double(), want, **TOL[torch.bfloat16])
        torch.testing.assert_close(lse_g.cpu().double(), want_lse, **LSE_TOL)
