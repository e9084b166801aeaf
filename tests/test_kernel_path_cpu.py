"""CPU tests of the kernel path of ffpa_attn.forward, against the CPU mock of
torch.ops.ffpa_attn.ffpa_fwd in _mock_kernel.py (it asserts the C++ contract):

* plumbing: shapes, strides, knobs, autocast, no-grad, torch.compile (static, dynamic);
* routing: FA-2 family for the (E, Ev) pairs compiled for it (Ev != E included), FFPA above,
  levels 1..3 forced, accumulation modes (fp16 inputs, FFPA only), fallback reasons naming what
  is compiled per family.
Masks to the kernel and the fake kernel: test_kernel_path_masks_cpu.py.
No GPU and no compiled extension needed: the mock pretends CPU is a supported device.
"""

import math
import re

import pytest
import torch

import ffpa_attn
from _cpu_helpers import SDPA, TOL, fallback_warnings, ref_attention, rn
from _mock_kernel import MOCK_CALLS, MOCK_COMPILED, mock_kernel  # noqa: F401  (a fixture)
from ffpa_attn import FFPAUnsupportedError, _ops, _routing

# ====================================================== plumbing
KERNEL_SHAPES = {
    # q, k, v, enable_gqa, shape the kernel must see for q
    "4d": ((2, 3, 17, 16), (2, 3, 33, 16), (2, 3, 33, 16), False, (2, 3, 17, 16)),
    "3d": ((3, 17, 8), (3, 33, 8), (3, 33, 8), False, (1, 3, 17, 8)),
    "2d": ((17, 8), (33, 8), (33, 8), False, (1, 1, 17, 8)),
    "5d": ((2, 2, 3, 17, 8), (2, 2, 3, 33, 8), (2, 2, 3, 33, 8), False, (4, 3, 17, 8)),
    "6d": ((2, 1, 2, 3, 5, 8), (2, 1, 2, 3, 7, 8), (2, 1, 2, 3, 7, 8), False, (4, 3, 5, 8)),
    "L_gt_S": ((1, 2, 33, 32), (1, 2, 17, 32), (1, 2, 17, 32), False, (1, 2, 33, 32)),
    "L1_S1": ((2, 2, 1, 8), (2, 2, 1, 8), (2, 2, 1, 8), False, (2, 2, 1, 8)),
    "gqa": ((2, 8, 17, 16), (2, 2, 33, 16), (2, 2, 33, 16), True, (2, 8, 17, 16)),
    "gqa3d": ((4, 17, 8), (1, 33, 8), (1, 33, 8), True, (1, 4, 17, 8)),
    "mqa_no_flag": ((2, 4, 17, 8), (2, 1, 33, 8), (2, 1, 33, 8), False, (2, 4, 17, 8)),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["noncausal", "causal"])
@pytest.mark.parametrize("shape_id", list(KERNEL_SHAPES))
def test_kernel_path_plumbing(mock_kernel, gen, shape_id, causal, dtype, record):
    qs, ks, vs, gqa, kernel_q = KERNEL_SHAPES[shape_id]
    q, k, v = rn(gen, *qs, dtype=dtype), rn(gen, *ks, dtype=dtype), rn(gen, *vs, dtype=dtype)
    out, lse = ffpa_attn.forward(q, k, v, is_causal=causal, enable_gqa=gqa, return_lse=True)
    assert len(mock_kernel) == 1
    call = mock_kernel[0]
    assert call["q_shape"] == kernel_q
    assert call["scale"] == pytest.approx(1.0 / math.sqrt(qs[-1]))
    assert call["is_causal"] is causal and call["level"] == 0 and call["num_stages"] == 0
    assert call["bottom_right"] is False and call["mask"] is None
    assert call["family"] == "fa2"  # every head dim of this grid is an FA-2 one
    # K/V go in with their own head count (never expanded) and without a copy
    assert call["k_shape"][1] == (ks[-3] if len(ks) >= 3 else 1)
    assert call["k_ptr"] == k.data_ptr() and call["v_ptr"] == v.data_ptr()

    expected = SDPA(q, k, v, is_causal=causal, enable_gqa=gqa)
    assert out.shape == expected.shape and out.dtype == dtype
    ref_out, ref_lse = ref_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    if shape_id == "mqa_no_flag":  # broadcasting K/V heads == GQA with one group
        ref_out, ref_lse = ref_attention(q, k, v, is_causal=causal, enable_gqa=True)
    torch.testing.assert_close(out.double(), ref_out, **TOL[dtype])
    torch.testing.assert_close(out, expected, **TOL[dtype])
    assert lse.shape == out.shape[:-1] and lse.dtype == torch.float32
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-4, rtol=1e-4)
    assert fallback_warnings(record) == []

    out2 = ffpa_attn.forward(q, k, v, is_causal=causal, enable_gqa=gqa, strict=True)
    torch.testing.assert_close(out2, out, atol=0, rtol=0)


def test_kernel_knobs_passed(mock_kernel, gen):
    q, k, v = (rn(gen, 1, 2, 9, 64, dtype=torch.float16) for _ in range(3))
    ffpa_attn.forward(q, k, v, scale=0.125, level=1, num_stages=3, acc="fp32")
    ffpa_attn.forward(q, k, v, scale=2, acc="auto", num_stages=1)
    a, b = mock_kernel
    assert (a["scale"], a["level"], a["num_stages"]) == (0.125, 1, 3)
    assert (b["scale"], b["level"], b["num_stages"]) == (2.0, 0, 1)
    assert isinstance(b["scale"], float)
    assert a["family"] == b["family"] == "ffpa_l1"
    assert a["mask"] is None and a["bottom_right"] is False


def test_kernel_blhd_view_no_copy_and_layout(mock_kernel, gen):
    B, L, S, H, D = 2, 17, 33, 4, 16
    q = rn(gen, B, L, H, D, dtype=torch.bfloat16).transpose(1, 2)
    kv = rn(gen, B, S, 2, H, D, dtype=torch.bfloat16)
    k, v = kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)
    out = ffpa_attn.forward(q, k, v)
    call = mock_kernel[0]
    assert (call["q_ptr"], call["k_ptr"], call["v_ptr"]) == (q.data_ptr(), k.data_ptr(), v.data_ptr())
    assert out.transpose(1, 2).is_contiguous()  # BLHD in, BLHD out
    torch.testing.assert_close(out, SDPA(q, k, v), **TOL[torch.bfloat16])


def test_kernel_misaligned_inputs_are_copied(mock_kernel, gen):
    shape = (2, 3, 17, 16)
    n = math.prod(shape)
    base = rn(gen, n + 1, dtype=torch.float16)
    q = base[1:].view(shape)  # data_ptr 2 bytes off
    assert q.data_ptr() % 16 != 0
    k = rn(gen, 2, 3, 16, 33, dtype=torch.float16).transpose(-1, -2)  # last stride != 1
    wide = rn(gen, 2, 3, 33, 20, dtype=torch.float16)
    v = wide[..., :16]  # row stride 20 elements = 40 bytes, not a multiple of 16
    out = ffpa_attn.forward(q, k, v)  # the mock asserts alignment
    call = mock_kernel[0]
    assert call["q_ptr"] != q.data_ptr() and call["k_ptr"] != k.data_ptr()
    assert call["v_ptr"] != v.data_ptr()
    torch.testing.assert_close(out, SDPA(q, k, v), **TOL[torch.float16])


def test_kernel_under_autocast(mock_kernel, gen):
    q, k, v = rn(gen, 2, 2, 9, 16), rn(gen, 2, 2, 11, 16), rn(gen, 2, 2, 11, 16, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ffpa_attn.forward(q, k, v)
        expected = SDPA(q, k, v)
    assert mock_kernel[0]["dtype"] == torch.bfloat16 and out.dtype == torch.bfloat16
    torch.testing.assert_close(out, expected, **TOL[torch.bfloat16])


def test_kernel_requires_grad_under_no_grad(mock_kernel, gen):
    q, k, v = (rn(gen, 1, 2, 9, 16, dtype=torch.float16).requires_grad_() for _ in range(3))
    with torch.no_grad():
        ffpa_attn.forward(q, k, v)
    assert len(mock_kernel) == 1
    with torch.inference_mode():
        ffpa_attn.forward(q.detach(), k.detach(), v.detach())
    assert len(mock_kernel) == 2


# ====================================================== routing
def _fb(shape_q=(2, 4, 9, 16), shape_k=(2, 4, 11, 16), shape_v=None, dtype=torch.float16, grad=False):
    def build(g):
        sv = shape_k if shape_v is None else shape_v
        ts = [rn(g, *s, dtype=dtype) for s in (shape_q, shape_k, sv)]
        if grad:
            ts[0].requires_grad_()
        return ts

    return build


FALLBACK_CASES = [
    # id, input builder, forward kwargs, words of the reason
    ("mask_requires_grad", _fb(), dict(attn_mask=torch.zeros(9, 11, requires_grad=True)), "attn_mask requires grad"),
    ("dropout", _fb(), dict(dropout_p=0.1), "dropout_p"),
    ("requires_grad", _fb(grad=True), {}, "require grad"),
    ("float32", _fb(dtype=torch.float32), {}, "float32"),
    ("float64", _fb(dtype=torch.float64), {}, "float64"),
    ("head_dim_not_compiled", _fb((2, 4, 9, 24), (2, 4, 11, 24)), {}, f"head dim 24 is not compiled in this build (compiled: {MOCK_COMPILED})"),
    ("pair_not_compiled", _fb(shape_v=(2, 4, 11, 32)), {}, f"head dims E=16, Ev=32 are not compiled in this build (compiled: {MOCK_COMPILED})"),
    ("level1_fa2_dim", _fb(), dict(level=1), f"level=1 (ffpa_l1) has no kernel for head dim 16 in this build (compiled: {MOCK_COMPILED}); level=None runs it on the fa2 kernel"),
    ("level1_pair", _fb((2, 4, 9, 48), (2, 4, 11, 48), (2, 4, 11, 32)), dict(level=1), "level=1 (ffpa_l1) has no kernel for head dims E=48, Ev=32"),
    ("batch_broadcast", _fb(shape_k=(1, 4, 11, 16)), {}, "batch"),
    ("rank_broadcast", _fb(shape_q=(4, 9, 16)), {}, "numbers of dimensions"),
    ("kv_heads_differ", _fb(shape_q=(2, 4, 9, 16), shape_k=(2, 2, 11, 16), shape_v=(2, 1, 11, 16)), dict(enable_gqa=True), "key and value"),
    ("q_heads_broadcast", _fb(shape_q=(2, 1, 9, 16)), {}, "query heads"),
    ("level2", _fb(), dict(level=2), "level=2"),
    ("acc_fp16", _fb(), dict(acc="fp16"), "acc='fp16'"),
]


@pytest.mark.parametrize("case", FALLBACK_CASES, ids=[c[0] for c in FALLBACK_CASES])
def test_routing_fallback_reasons(mock_kernel, case, record):
    _, build, kwargs, words = case
    q, k, v = build(torch.Generator().manual_seed(3))
    with pytest.raises(FFPAUnsupportedError, match=re.escape(words)):
        ffpa_attn.forward(q, k, v, strict=True, **kwargs)
    out = ffpa_attn.forward(q, k, v, **kwargs)
    assert mock_kernel == []  # never reached the kernel
    ws = fallback_warnings(record)
    assert len(ws) == 1 and words in str(ws[0].message)
    if not kwargs.get("dropout_p"):
        kw = {k_: v_ for k_, v_ in kwargs.items() if k_ in ("attn_mask", "enable_gqa")}
        torch.testing.assert_close(out, SDPA(q, k, v, **kw), atol=0, rtol=0)


def test_environment_reasons(monkeypatch):
    cpu = torch.device("cpu")
    assert "CUDA-only" in _routing._environment_reason(cpu)
    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(_ops, "_OP", None)
    monkeypatch.setattr(_ops, "_IMPORT_ERROR", "ModuleNotFoundError: x")
    monkeypatch.setattr(_routing, "_env_reason_cache", {})
    assert "not available" in _routing._environment_reason(cuda)
    assert _routing._env_reason_cache == {0: _routing._environment_reason(cuda)}  # cached

    monkeypatch.setattr(_ops, "_OP", object())
    monkeypatch.setattr(_ops, "_ARCHS", ("80", "89", "90a"))
    monkeypatch.setattr(_ops, "_PTX_ARCHS", ("80",))

    def cap(c):
        monkeypatch.setattr(_routing, "_capability_cache", {0: c})
        monkeypatch.setattr(_routing, "_env_reason_cache", {})
        return _routing._environment_reason(cuda)

    assert "7.5" in cap((7, 5))
    assert cap((8, 0)) is None and cap((8, 6)) is None  # sm_80 SASS runs on sm_86
    assert cap((9, 0)) is None
    assert cap((12, 0)) is None  # compute_80 PTX, JIT-compiled
    monkeypatch.setattr(_ops, "_PTX_ARCHS", ())
    assert "sm_120" in cap((12, 0))
    monkeypatch.setattr(_ops, "_ARCHS", ("90a",))
    monkeypatch.setattr(_ops, "_PTX_ARCHS", ("90a",))  # arch-specific PTX: sm_90 only
    assert "sm_89" in cap((8, 9)) and "sm_100" in cap((10, 0))
    assert cap((9, 0)) is None


def test_default_ptx_arch_is_the_lowest_target():
    assert _ops._default_ptx_archs(("89", "80", "90a")) == ("80",)
    assert _ops._default_ptx_archs(("90a", "100")) == ("90a",)
    assert _ops._default_ptx_archs(()) == ()


@pytest.mark.parametrize("arch,cap,ptx,ok", [
    ("80", (8, 0), False, True), ("80", (8, 9), False, True), ("86", (8, 0), False, False),
    ("90a", (9, 0), False, True), ("90a", (9, 1), False, False), ("sm_90", (9, 0), False, True),
    ("100f", (10, 3), False, True), ("80", (9, 0), False, False), ("", (8, 0), False, False),
    ("compute_89", (8, 9), False, True), ("80", (9, 0), True, True), ("80", (12, 0), True, True),
    ("90", (8, 9), True, False), ("90a", (10, 0), True, False), ("90a", (9, 0), True, True),
])
def test_arch_compatibility(arch, cap, ptx, ok):
    assert _routing._arch_runs_on(arch, *cap, ptx=ptx) is ok


def test_routing_dtype_not_compiled(mock_kernel, monkeypatch, gen, record):
    monkeypatch.setattr(_ops, "_DTYPES", frozenset({"bfloat16"}))
    q, k, v = (rn(gen, 1, 2, 9, 16, dtype=torch.float16) for _ in range(3))
    with pytest.raises(FFPAUnsupportedError, match="float16 is not compiled"):
        ffpa_attn.forward(q, k, v, strict=True)
    ffpa_attn.forward(q.bfloat16(), k.bfloat16(), v.bfloat16(), strict=True)
    assert len(mock_kernel) == 1


@pytest.mark.parametrize("scale", [math.inf, -math.inf, math.nan])
def test_routing_non_finite_scale(mock_kernel, gen, scale):
    q, k, v = (rn(gen, 1, 2, 9, 16, dtype=torch.float16) for _ in range(3))
    with pytest.raises(FFPAUnsupportedError, match="non-finite scale"):
        ffpa_attn.forward(q, k, v, scale=scale, strict=True)
    out = ffpa_attn.forward(q, k, v, scale=scale)  # SDPA decides what that means
    torch.testing.assert_close(out, SDPA(q, k, v, scale=scale), atol=0, rtol=0, equal_nan=True)
    assert mock_kernel == []


def test_routing_too_many_heads(mock_kernel, gen):
    q, k, v = (rn(gen, 1, 65536, 1, 8, dtype=torch.bfloat16) for _ in range(3))
    with pytest.raises(FFPAUnsupportedError, match="65535"):
        ffpa_attn.forward(q, k, v, strict=True)
    assert mock_kernel == []


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_kernel_path_compile_fullgraph(mock_kernel, gen, backend):
    def fn(q, k, v):
        out, lse = ffpa_attn.forward(q, k, v, is_causal=True, enable_gqa=True, return_lse=True)
        return out * 2, lse

    q = rn(gen, 2, 17, 4, 16, dtype=torch.float16).transpose(1, 2)  # BLHD view
    k, v = rn(gen, 2, 2, 33, 16, dtype=torch.float16), rn(gen, 2, 2, 33, 16, dtype=torch.float16)
    eager_out, eager_lse = fn(q, k, v)
    MOCK_CALLS.clear()
    c_out, c_lse = torch.compile(fn, fullgraph=True, backend=backend)(q, k, v)
    assert len(MOCK_CALLS) == 1  # the compiled graph called the kernel
    torch.testing.assert_close(c_out, eager_out, atol=0, rtol=0)
    torch.testing.assert_close(c_lse, eager_lse, atol=0, rtol=0)
    assert c_out.stride() == eager_out.stride()

    # misaligned data pointer: only visible at run time, fixed inside the realigning op
    base = rn(gen, 2 * 4 * 17 * 16 + 1, dtype=torch.float16)
    qm = base[1:].view(2, 4, 17, 16)
    c_out, _ = torch.compile(fn, fullgraph=True, backend=backend)(qm, k, v)
    torch.testing.assert_close(c_out, fn(qm, k, v)[0], atol=0, rtol=0)


def test_kernel_path_compile_guards_do_not_grow_with_the_build(mock_kernel, monkeypatch, gen):
    """The compiled call's guards are the same with a registry of 300 more kernels: the routing's lookup
    under dynamo reads the index of the asked key only. (It once compared the registry tuple with the
    one the index was built from, and dynamo guarded every field of every entry: some 6000 guards in a
    full build, evaluated at every call of a compiled decode step.)"""
    def fn(q, k, v):
        return ffpa_attn.forward(q, k, v, is_causal=True)

    def guards_of_a_compiled_call():
        torch._dynamo.reset()
        counts = []
        compiled = torch._dynamo.optimize("eager", guard_export_fn=lambda g: counts.append(len(g)))(fn)
        MOCK_CALLS.clear()
        compiled(q, q, q)
        assert len(MOCK_CALLS) == 1  # the kernel path, traced
        assert len(counts) == 1
        return counts[0]

    q = rn(gen, 1, 2, 5, 16, dtype=torch.float16)
    before = guards_of_a_compiled_call()
    more = _ops._REGISTRY + tuple(("fwd", "fa2", "any", dt, "fp32", e, e, 0)
                                  for e in range(1000, 1150) for dt in ("float16", "bfloat16"))
    monkeypatch.setattr(_ops, "_REGISTRY", more)
    monkeypatch.setattr(_ops, "_INDEX", _ops.build_index(more))
    assert guards_of_a_compiled_call() == before


def test_kernel_path_compile_dynamic(mock_kernel, gen):
    fn = torch.compile(
        lambda q, k, v: ffpa_attn.forward(q, k, v, enable_gqa=True), fullgraph=True,
        backend="aot_eager", dynamic=True,
    )
    for L, S in ((9, 17), (13, 5), (33, 33)):
        q = rn(gen, 2, 4, L, 16, dtype=torch.bfloat16)
        k, v = rn(gen, 2, 2, S, 16, dtype=torch.bfloat16), rn(gen, 2, 2, S, 16, dtype=torch.bfloat16)
        torch.testing.assert_close(fn(q, k, v), ffpa_attn.forward(q, k, v, enable_gqa=True), atol=0, rtol=0)


def test_kernel_path_compile_scalar_arguments(mock_kernel, gen):
    # scale / dropout_p passed into the compiled function (dynamo may trace them symbolically)
    def fn(q, k, v, scale, p):
        return ffpa_attn.forward(q, k, v, scale=scale, dropout_p=p, return_lse=True)

    q, k, v = (rn(gen, 1, 2, 9, 16, dtype=torch.bfloat16) for _ in range(3))
    cf = torch.compile(fn, fullgraph=True, backend="aot_eager", dynamic=True)
    for scale in (0.3, 0.7):
        got, expected = cf(q, k, v, scale, 0.0), fn(q, k, v, scale, 0.0)
        torch.testing.assert_close(got, expected, atol=0, rtol=0)
    assert [c["scale"] for c in MOCK_CALLS] == pytest.approx([0.3, 0.3, 0.7, 0.7])


@pytest.mark.parametrize("E,Ev,level,family,op_level", [
    (16, 16, None, "fa2", 0), (32, 32, None, "fa2", 0), (48, 32, None, "fa2", 0),
    (64, 64, None, "ffpa_l1", 0), (64, 64, 1, "ffpa_l1", 1), (64, 64, 2, "ffpa_l2", 2),
    (64, 64, 3, "ffpa_l3", 3), (128, 128, None, "ffpa_l3", 0), (128, 128, 3, "ffpa_l3", 3),
])
def test_routing_picks_family(mock_kernel, gen, E, Ev, level, family, op_level, record):
    q, k = rn(gen, 2, 4, 9, E, dtype=torch.bfloat16), rn(gen, 2, 2, 11, E, dtype=torch.bfloat16)
    v = rn(gen, 2, 2, 11, Ev, dtype=torch.bfloat16)
    assert _routing._family_for(E, Ev, level) == family
    out, lse = ffpa_attn.forward(q, k, v, enable_gqa=True, level=level, strict=True,
                                 return_lse=True)
    call = mock_kernel[0]
    assert (call["family"], call["level"]) == (family, op_level)
    assert out.shape == (2, 4, 9, Ev) and call["v_shape"] == (2, 2, 11, Ev)
    ref_out, ref_lse = ref_attention(q, k, v, enable_gqa=True)
    torch.testing.assert_close(out.double(), ref_out, **TOL[torch.bfloat16])
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-4, rtol=1e-4)
    assert fallback_warnings(record) == []


@pytest.mark.parametrize("level", [None, 1, 2, 3])
@pytest.mark.parametrize("acc,code", [("fp16", 2), ("mixed", 3), ("fp32", 1), ("auto", 0)])
def test_accumulation_mode_reaches_the_op(mock_kernel, gen, level, acc, code, record):
    q, k, v = (rn(gen, 1, 2, 9, 64, dtype=torch.float16) for _ in range(3))
    ffpa_attn.forward(q, k, v, level=level, acc=acc, strict=True)
    call = mock_kernel[0]
    assert call["acc"] == code and call["level"] == (level or 0)
    assert call["family"].startswith("ffpa_l")
    assert fallback_warnings(record) == []


def test_half_accumulation_needs_fp16_inputs_and_an_ffpa_kernel(mock_kernel, gen, record):
    qb, kb, vb = (rn(gen, 1, 2, 9, 64, dtype=torch.bfloat16) for _ in range(3))
    with pytest.raises(FFPAUnsupportedError, match="needs float16 inputs"):
        ffpa_attn.forward(qb, kb, vb, acc="fp16", strict=True)
    q, k, v = (rn(gen, 1, 2, 9, 16, dtype=torch.float16) for _ in range(3))  # an FA-2-only dim
    with pytest.raises(FFPAUnsupportedError, match="acc='mixed' is not compiled for head dim 16"):
        ffpa_attn.forward(q, k, v, acc="mixed", strict=True)
    out = ffpa_attn.forward(q, k, v, acc="fp16")  # falls back, once, naming the reason
    (w,) = fallback_warnings(record)
    assert "acc='fp16'" in str(w.message)
    torch.testing.assert_close(out, SDPA(q, k, v), atol=0, rtol=0)
    assert mock_kernel == []


def test_forced_level_without_the_pair_names_the_level(mock_kernel, gen):
    q, k, v = (rn(gen, 1, 2, 9, 128, dtype=torch.float16) for _ in range(3))
    with pytest.raises(FFPAUnsupportedError, match="level=1 .ffpa_l1. has no kernel for head dim 128"):
        ffpa_attn.forward(q, k, v, level=1, strict=True)
    ffpa_attn.forward(q, k, v, level=3, strict=True)
    assert mock_kernel[0]["family"] == "ffpa_l3"


def test_routing_level1_on_fa2_dim_warns_naming_compiled_dims(mock_kernel, gen, record):
    q, k, v = (rn(gen, 1, 2, 9, 16, dtype=torch.float16) for _ in range(3))
    out = ffpa_attn.forward(q, k, v, level=1)
    assert mock_kernel == []
    (w,) = fallback_warnings(record)
    assert "level=1" in str(w.message) and MOCK_COMPILED in str(w.message)
    torch.testing.assert_close(out, SDPA(q, k, v), atol=0, rtol=0)
    with pytest.raises(FFPAUnsupportedError, match="level=None runs it on the fa2 kernel"):
        ffpa_attn.forward(q, k, v, level=1, strict=True)
    ffpa_attn.forward(q, k, v, strict=True)  # auto: the FA-2 kernel
    assert mock_kernel[0]["family"] == "fa2"


def test_compiled_text_lists_each_family():
    pairs = {"fa2": frozenset({(64, 64), (192, 128), (32, 32), (192, 192)}),
             "ffpa_l1": frozenset({(512, 512), (320, 320)})}
    saved = _ops._PAIRS
    try:
        _ops._PAIRS = pairs
        assert _routing._compiled_text() == "fa2: 32, 64, 192 and E/Ev 192/128; ffpa_l1: 320, 512"
        _ops._PAIRS = {"fa2": frozenset(), "ffpa_l1": frozenset()}
        assert _routing._compiled_text() == "none"
    finally:
        _ops._PAIRS = saved


def test_manifest_without_pairs_means_square_pairs(monkeypatch):
    # Builds whose manifest has no "head_dim_pairs" key: (d, d) for each head dim.
    monkeypatch.setattr(_ops, "_OP", object())
    monkeypatch.setattr(_ops, "_C", type("C", (), {"build_info": staticmethod(
        lambda: {"families": ["ffpa_l1"], "head_dims": {"ffpa_l1": [320, 512]}})}))
    info = _ops._load_build_info()
    assert info["head_dim_pairs"] == {"ffpa_l1": [[320, 320], [512, 512]]}
    assert _ops._pair_set(info["head_dim_pairs"]["ffpa_l1"]) == {(320, 320), (512, 512)}


def test_stale_extension_schema_is_detected():
    def op_with(*names):
        args = [type("Arg", (), {"name": n}) for n in names]
        schema = type("Schema", (), {"arguments": args})
        return type("Op", (), {"default": type("Overload", (), {"_schema": schema})})

    assert _ops._stale_schema_error(op_with(*_ops._OP_ARGS)) is None
    old = op_with("q", "k", "v", "scale", "is_causal", "level", "num_stages")
    err = _ops._stale_schema_error(old)
    assert "ffpa_fwd(q, k, v, scale, is_causal, level, num_stages)" in err and "rebuild" in err
    assert "rebuild" in _ops._stale_schema_error(object())  # no schema at all
