"""ffpa_attn.merge_states against the math it stands for: attention over a key set equals the merge
of attention over disjoint parts of it (float64 reference), with empty chunks (LSE -inf, output
poisoned with NaN) contributing nothing and rows that see no key at all giving 0 / -inf; list and
stacked inputs; dtypes; errors naming the argument, eagerly and under torch.compile(fullgraph=True)."""
from __future__ import annotations

import math

import pytest
import torch

import ffpa_attn
from _cpu_helpers import ref_attention, rn
from ffpa_attn import FFPATypeError, FFPAValueError


def _chunked(gen, B, H, L, S, D, bounds, keep=None, dtype=torch.float64):
    """Full attention over S keys, and per-chunk (out, lse) over keys [bounds[i], bounds[i+1])."""
    q, k, v = rn(gen, B, H, L, D, dtype=dtype), rn(gen, B, H, S, D, dtype=dtype), rn(gen, B, H, S, D, dtype=dtype)
    keep = torch.ones(L, S, dtype=torch.bool) if keep is None else keep
    full = ref_attention(q, k, v, attn_mask=keep)
    parts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        out, lse = ref_attention(q, k[..., a:b, :], v[..., a:b, :], attn_mask=keep[:, a:b])
        out = out.masked_fill(torch.isneginf(lse).unsqueeze(-1), math.nan)  # an empty chunk's output is garbage
        parts.append((out.to(dtype), lse.float()))
    return full, parts


def test_merge_equals_attention_over_the_union(gen):
    full, parts = _chunked(gen, 2, 3, 7, 40, 16, [0, 5, 17, 40])
    out, lse = ffpa_attn.merge_states([p[0] for p in parts], [p[1] for p in parts])
    torch.testing.assert_close(out, full[0], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(lse, full[1].float(), atol=1e-5, rtol=1e-6)
    assert lse.dtype == torch.float32 and out.dtype == torch.float64


def test_empty_chunks_contribute_nothing_and_empty_rows_are_zero(gen):
    L, S = 6, 30
    keep = torch.ones(L, S, dtype=torch.bool)
    keep[:, 10:20] = False  # chunk 1 sees no key at all: lse -inf, output NaN
    keep[2] = False  # row 2 sees no key anywhere
    keep[4, :10] = False  # row 4: chunk 0 empty for it only
    full, parts = _chunked(gen, 1, 2, L, S, 8, [0, 10, 20, 30], keep)
    assert torch.isneginf(parts[1][1]).all() and torch.isnan(parts[1][0]).all()
    out, lse = ffpa_attn.merge_states([p[0] for p in parts], [p[1] for p in parts])
    assert not torch.isnan(out).any()
    torch.testing.assert_close(out, full[0], atol=1e-6, rtol=1e-6)
    assert (out[:, :, 2] == 0).all() and torch.isneginf(lse[:, :, 2]).all()
    torch.testing.assert_close(lse[:, :, [0, 1, 3, 4, 5]], full[1][:, :, [0, 1, 3, 4, 5]].float())


def test_stacked_inputs_single_chunk_and_low_precision(gen):
    full, parts = _chunked(gen, 1, 4, 5, 24, 32, [0, 12, 24])
    o = torch.stack([p[0] for p in parts]).to(torch.bfloat16)
    s = torch.stack([p[1] for p in parts])
    out, lse = ffpa_attn.merge_states(o, s)
    assert out.dtype == torch.bfloat16 and out.shape == (1, 4, 5, 32)
    torch.testing.assert_close(out.double(), full[0], atol=2e-2, rtol=2e-2)
    one, one_lse = ffpa_attn.merge_states([parts[0][0]], [parts[0][1]])  # one chunk: itself
    torch.testing.assert_close(one, parts[0][0])
    torch.testing.assert_close(one_lse, parts[0][1])


def test_merge_under_compile_fullgraph(gen):
    _, parts = _chunked(gen, 1, 2, 4, 12, 8, [0, 4, 12], dtype=torch.float32)
    outs, lses = [p[0] for p in parts], [p[1] for p in parts]
    torch._dynamo.reset()
    fn = torch.compile(lambda a, b, c, d: ffpa_attn.merge_states([a, b], [c, d]), fullgraph=True, backend="eager")
    got = fn(outs[0], outs[1], lses[0], lses[1])
    want = ffpa_attn.merge_states(outs, lses)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])


@pytest.mark.parametrize("compiled", [False, True])
def test_errors_name_the_argument(gen, compiled):
    o, s = rn(gen, 2, 3, 4, 8), rn(gen, 2, 3, 4)
    cases = [
        (lambda: ffpa_attn.merge_states([o, o[..., :4]], [s, s]), FFPAValueError, "outs[1]"),
        (lambda: ffpa_attn.merge_states([o, o], [s, s[..., :2]]), FFPAValueError, "lses[1]"),
        (lambda: ffpa_attn.merge_states([o, o], [s[..., :3], s[..., :3]]), FFPAValueError, "'lses' must have the shape"),
        (lambda: ffpa_attn.merge_states([o.long(), o.long()], [s, s]), FFPATypeError, "'outs' must be floating"),
        (lambda: ffpa_attn.merge_states([o, o], [s.long(), s.long()]), FFPATypeError, "'lses' must be floating"),
        (lambda: ffpa_attn.merge_states([o, o], [s.to("meta"), s.to("meta")]), FFPAValueError, "one device"),
    ]
    for call, exc, words in cases:
        if compiled:
            torch._dynamo.reset()
            call = torch.compile(call, fullgraph=True, backend="eager")
        with pytest.raises(exc, match=words.replace("[", r"\[").replace("]", r"\]")) as info:
            call()
        assert type(info.value) is exc
    with pytest.raises(FFPATypeError, match="'outs' must be a non-empty"):
        ffpa_attn.merge_states([], [])
    with pytest.raises(FFPATypeError, match=r"lses\[0\] must be a torch.Tensor"):
        ffpa_attn.merge_states([o], [None])


@pytest.mark.requires_cuda
def test_merge_of_kernel_chunks_equals_the_kernel_over_all_keys():
    """On the GPU: forward(return_lse=True) over two halves of the keys, merged, equals forward over
    all keys (the FA-2 kernel, bf16, GQA), within bf16 rounding of the two outputs."""
    g = torch.Generator(device="cuda").manual_seed(7)
    q = torch.randn(2, 8, 300, 128, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(2, 2, 1000, 128, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(2, 2, 1000, 128, device="cuda", dtype=torch.bfloat16, generator=g)
    full, full_lse = ffpa_attn.forward(q, k, v, enable_gqa=True, return_lse=True, strict=True)
    parts = [ffpa_attn.forward(q, k[:, :, a:b], v[:, :, a:b], enable_gqa=True, return_lse=True, strict=True)
             for a, b in ((0, 417), (417, 1000))]
    out, lse = ffpa_attn.merge_states([p[0] for p in parts], [p[1] for p in parts])
    torch.testing.assert_close(lse, full_lse, atol=1e-3, rtol=1e-4)
    torch.testing.assert_close(out.float(), full.float(), atol=2e-2, rtol=2e-2)
