"""FP8 (e4m3) inputs of ffpa_attn.forward and ffpa_attn.quantize_fp8 (ffpa_attn/_fp8.py), on the CPU:
the descale kinds (float, 0-d tensor, per (batch, head) with each tensor's own head count, missing)
against a float64 reference on the dequantized inputs, out_dtype, the one-time fallback warning where
the FP8 kernel does not run (here: no GPU) and strict mode, the errors that name the argument, and which
calls the FP8 kernel would take (its availability stubbed). The kernel itself: test_fp8_gpu.py."""
import pytest
import torch

import ffpa_attn
from _cpu_helpers import TOL, fallback_warnings, ref_attention, rn
from ffpa_attn import FFPATypeError, FFPAUnsupportedError, FFPAValueError

E4M3 = torch.float8_e4m3fn


def _fp8_qkv(gen, B=2, Hq=4, Hkv=2, L=9, S=13, E=16, Ev=16):
    return (ffpa_attn.quantize_fp8(rn(gen, B, Hq, L, E)), ffpa_attn.quantize_fp8(rn(gen, B, Hkv, S, E)),
            ffpa_attn.quantize_fp8(rn(gen, B, Hkv, S, Ev)))


def _deq(x8, d):
    d = torch.as_tensor(d, dtype=torch.float64)
    return x8.double() * (d if d.dim() == 0 else d.double()[..., None, None])


def test_quantize_fp8_per_batch_and_head(gen):
    x = rn(gen, 2, 3, 17, 24) * torch.tensor([1.0, 30.0, 1e-3]).view(1, 3, 1, 1)  # heads of very different range
    x[1, 2] = 0  # an all-zero slice: descale 1
    x8, d = ffpa_attn.quantize_fp8(x)
    assert x8.dtype == E4M3 and d.dtype == torch.float32 and d.shape == (2, 3) and d[1, 2] == 1
    assert x8.float().abs().amax(dim=(-2, -1))[0].sub(448).abs().max() < 1e-3  # each slice's amax maps to e4m3's max
    back = _deq(x8, d)
    rel = (back - x.double()).abs().amax(dim=(-2, -1)) / x.double().abs().amax(dim=(-2, -1)).clamp_min(1e-30)
    assert rel[0].max() < 0.07 and rel[1, :2].max() < 0.07  # e4m3: 3 mantissa bits, <= 1/16 relative per element
    with pytest.raises(FFPATypeError, match="'x'"):
        ffpa_attn.quantize_fp8(x8)
    with pytest.raises(FFPAValueError, match="at least 2 dimensions"):
        ffpa_attn.quantize_fp8(torch.ones(3))


@pytest.mark.parametrize("kind", ["per_head", "scalar_float", "scalar_tensor", "missing"])
@pytest.mark.parametrize("out_dtype", [None, torch.float16])
def test_fp8_forward_matches_the_dequantized_reference(gen, record, kind, out_dtype):
    (q8, qd), (k8, kd), (v8, vd) = _fp8_qkv(gen)
    if kind == "scalar_float":
        qd, kd, vd = 0.008, 0.01, 0.006  # per-tensor descales of about the size quantize_fp8 picks
    elif kind == "scalar_tensor":
        qd, kd, vd = (torch.tensor(x) for x in (0.008, 0.01, 0.006))
    elif kind == "missing":
        qd = kd = vd = None
    out, lse = ffpa_attn.forward(q8, k8, v8, is_causal=True, enable_gqa=True, return_lse=True, q_descale=qd,
                                 k_descale=kd, v_descale=vd, out_dtype=out_dtype)
    one = 1.0
    want, want_lse = ref_attention(_deq(q8, one if qd is None else qd), _deq(k8, one if kd is None else kd),
                                   _deq(v8, one if vd is None else vd), is_causal=True, enable_gqa=True)
    dtype = torch.bfloat16 if out_dtype is None else out_dtype
    assert out.dtype == dtype and out.shape == (2, 4, 9, 16) and lse.dtype == torch.float32
    torch.testing.assert_close(out.double(), want, **TOL[dtype])
    torch.testing.assert_close(lse.double(), want_lse, atol=3e-2, rtol=3e-2)
    reasons = [str(w.message) for w in fallback_warnings(record)]
    assert any("FP8 (float8_e4m3fn)" in r and "dequantized" in r for r in reasons), reasons


def test_fp8_without_descales_and_strict(gen, record):
    (q8, _), (k8, _), (v8, _) = _fp8_qkv(gen, Hkv=4)
    out = ffpa_attn.forward(q8, k8, v8)  # plain e4m3 inputs: descales 1, bf16 out
    want, _ = ref_attention(q8.double(), k8.double(), v8.double())
    torch.testing.assert_close(out.double(), want, **TOL[torch.bfloat16])
    with pytest.raises(FFPAUnsupportedError, match="FP8"):
        ffpa_attn.forward(q8, k8, v8, strict=True)
    n = len(fallback_warnings(record))
    ffpa_attn.forward(q8, k8, v8)
    assert len(fallback_warnings(record)) == n  # warned once per reason


def test_fp8_errors_name_the_argument(gen):
    (q8, qd), (k8, kd), (v8, vd) = _fp8_qkv(gen)
    q = rn(gen, 2, 4, 9, 16, dtype=torch.bfloat16)
    with pytest.raises(FFPATypeError, match="float8_e4m3fn inputs; got query of dtype torch.bfloat16"):
        ffpa_attn.forward(q, q, q, q_descale=0.5)
    with pytest.raises(FFPATypeError, match="'query'.*float8_e5m2.*float8_e4m3fn"):
        ffpa_attn.forward(q8.float().to(torch.float8_e5m2), k8, v8)
    with pytest.raises(FFPATypeError, match="'key'"):
        ffpa_attn.forward(q8, k8.float(), v8, q_descale=qd)
    with pytest.raises(FFPAValueError, match="'k_descale'.*shape \\(2, 2\\)"):
        ffpa_attn.forward(q8, k8, v8, enable_gqa=True, k_descale=qd)  # query's (2, 4) for key's (2, 2)
    with pytest.raises(FFPATypeError, match="'v_descale'.*float32"):
        ffpa_attn.forward(q8, k8, v8, enable_gqa=True, v_descale=vd.double())
    with pytest.raises(FFPAValueError, match="'q_descale'.*positive"):
        ffpa_attn.forward(q8, k8, v8, enable_gqa=True, q_descale=0.0)
    with pytest.raises(FFPATypeError, match="'q_descale'"):
        ffpa_attn.forward(q8, k8, v8, enable_gqa=True, q_descale="1")
    with pytest.raises(FFPATypeError, match="'out_dtype'"):
        ffpa_attn.forward(q8, k8, v8, enable_gqa=True, out_dtype=torch.float32)
    with pytest.raises(FFPAValueError, match="'value'"):  # the rest is forward's own validation
        ffpa_attn.forward(q8, k8, v8[:, :, :5], enable_gqa=True)


def test_fp8_under_torch_compile(gen):
    (q8, qd), (k8, kd), (v8, vd) = _fp8_qkv(gen)
    fn = torch.compile(lambda *a: ffpa_attn.forward(*a[:3], enable_gqa=True, q_descale=a[3], k_descale=a[4],
                                                    v_descale=a[5]), fullgraph=True, backend="eager")
    out = fn(q8, k8, v8, qd, kd, vd)
    want, _ = ref_attention(_deq(q8, qd), _deq(k8, kd), _deq(v8, vd), enable_gqa=True)
    torch.testing.assert_close(out.double(), want, **TOL[torch.bfloat16])


def test_which_calls_the_fp8_kernel_takes(gen, monkeypatch):
    """kernel_why_not's decisions with the kernel stubbed in (compiled at D = 128 / 256, a Hopper GPU):
    "" where the kernel takes the call, else the reason the fallback warning names."""
    from ffpa_attn import _fp8, _fp8_ops

    monkeypatch.setattr(_fp8_ops, "available", lambda: True)
    monkeypatch.setattr(_fp8_ops, "runs_on", lambda device: True)
    monkeypatch.setattr(_fp8_ops, "pairs", lambda: frozenset({(128, 128), (256, 256)}))
    (q, _), (k, _), (v, _) = _fp8_qkv(gen, Hq=4, Hkv=2, L=33, S=40, E=128, Ev=128)
    why = _fp8.kernel_why_not
    assert why(q, k, v, None, 0.0, True) == ""
    assert "enable_gqa" in why(q, k, v, None, 0.0, False)
    assert why(q, k, v, None, 0.1, True) == "dropout"
    keep = torch.ones(33, 40, dtype=torch.bool)
    assert why(q, k, v, keep, 0.0, True) == ""  # a 2-D bool mask broadcasts
    assert why(q, k, v, keep.view(1, 1, 33, 40).to(torch.float32), 0.0, True) == ""
    assert why(q, k, v, keep, 0.0, True, is_causal=True) == "this attn_mask"  # SDPA's error, from the fallback
    assert why(q, k, v, torch.ones(33, 41, dtype=torch.bool), 0.0, True) == "this attn_mask"
    # ... and under strict the call raises SDPA's error for it, not the fallback's
    with pytest.raises(ValueError):
        ffpa_attn.forward(q, k, v, attn_mask=keep, is_causal=True, enable_gqa=True, strict=True)
    assert "dtype" in why(q, k, v, keep.to(torch.int32), 0.0, True)
    (q64, _), (k64, _), (v64, _) = _fp8_qkv(gen, E=64, Ev=64)
    assert "head dim 64" in why(q64, k64, v64, None, 0.0, True)
    assert "4-D" in why(q[0], k[0], v[0], None, 0.0, True)
    (qv, _), (kv, _), (vv, _) = _fp8_qkv(gen, Hq=2, Hkv=2, L=33, S=40, E=128, Ev=96)
    assert "shapes" in why(qv, kv, vv, None, 0.0, True)
    base = torch.zeros(q.numel() + 1, dtype=E4M3)
    assert "16-byte" in why(base[1:].view(q.shape), k, v, None, 0.0, True)
    monkeypatch.setattr(_fp8_ops, "runs_on", lambda device: False)
    assert "compute capability 9.0" in why(q, k, v, None, 0.0, True)


def test_descales_as_the_op_takes_them():
    from ffpa_attn._fp8 import _descale_2d

    assert _descale_2d(None) == (1.0, None)
    assert _descale_2d(0.25) == (0.25, None)
    s, t = _descale_2d(torch.tensor(0.5))
    assert s == 1.0 and t.shape == (1, 1) and t.item() == 0.5
    per_head = torch.rand(2, 3)
    s, t = _descale_2d(per_head)
    assert s == 1.0 and t is per_head


@pytest.mark.requires_extension
def test_the_fp8_kernels_persistent_grid_rule():
    """The FA-2-style FP8 kernel walks items on a grid of one block an SM where every item sees the same keys (no
    causal mask, no attn_mask: csrc/launch/heuristics.h fp8_persistent_grid; session 51: +1-3% at B=4 H=8 N=8448
    and B=1 H=32 N=8192, D = 64 / 128 / 256); causal or masked calls keep one block an item."""
    import ffpa_attn._C as C

    assert C.fp8_persistent_grid(False, False, 1408, 132) == 132
    assert C.fp8_persistent_grid(False, False, 100, 132) == 100  # under a wave: one item a block anyway
    assert C.fp8_persistent_grid(True, False, 1408, 132) == 1408
    assert C.fp8_persistent_grid(False, True, 1408, 132) == 1408
    assert C.fp8_persistent_grid(False, False, 1408, 0) == 1408  # no SM count: one block an item


@pytest.mark.requires_extension
def test_the_fp8_kernels_causal_walk_rule():
    """Causal FP8 calls without a mask walk pairs of query blocks on one block an SM at D = 256 and at short keys, and
    run single items longest first otherwise (csrc/launch/heuristics.h fp8_causal_walk; session 52's A/B)."""
    import ffpa_attn._C as C

    assert C.fp8_causal_walk(False, 256, 8448) and C.fp8_causal_walk(False, 256, 100000)
    assert C.fp8_causal_walk(False, 128, 2048) and C.fp8_causal_walk(False, 64, 2048)
    assert not C.fp8_causal_walk(False, 128, 2049) and not C.fp8_causal_walk(False, 64, 8192)
    assert not C.fp8_causal_walk(True, 256, 2048)  # a mask: one block an item
