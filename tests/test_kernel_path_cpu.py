"""CPU tests of the kernel path of ffpa_attn.forward, against a CPU mock of
torch.ops.ffpa_attn.ffpa_fwd that asserts the C++ contract (4-D, aligned q/k/v, K/V not
expanded, mask 4-D with every dim 1 or full, output layout, the family the head dims select):

* plumbing: shapes, strides, knobs, autocast, no-grad, torch.compile (static, dynamic);
* routing: FA-2 family for the (E, Ev) pairs compiled for it (Ev != E included), FFPA above,
  levels 1..3 forced, accumulation modes (fp16 inputs, FFPA only), fallback reasons naming what
  is compiled per family;
* masks to the kernel: bool and float (fp16/bf16/fp32, -inf), their 4-D views (stride-0
  broadcast dims kept, no copies), the bottom-right causal flag.
No GPU and no compiled extension needed: the mock pretends CPU is a supported device.
"""

import math
import re
from typing import Optional

import pytest
import torch

import ffpa_attn
from _cpu_helpers import SDPA, TOL, fallback_warnings, ref_attention, rn
from ffpa_attn import FFPAUnsupportedError, _masks, _ops, _routing
from ffpa_attn._spec import ACC_CODES, FAMILIES, family_accs  # the families a build may have

# ====================================================== the mocked C++ op
MOCK_CALLS: list = []
# What the mock "build" has: the FA-2 family for small dims (plus one Ev != E pair, like the real
# 192/128), FFPA L1 and L2 for one larger dim, L3 for two (the second only there); fp16/mixed
# accumulation for fp16 inputs of the FFPA levels.
MOCK_PAIRS = {
    "fa2": frozenset({(8, 8), (16, 16), (32, 32), (48, 32)}),
    "ffpa_l1": frozenset({(64, 64)}),
    "ffpa_l2": frozenset({(64, 64)}),
    "ffpa_l3": frozenset({(64, 64), (128, 128)}),
}
MOCK_ACCS = {
    (f, dt): frozenset(family_accs(f, {"float16": "fp16", "bfloat16": "bf16"}[dt]))
    for f in MOCK_PAIRS for dt in ("float16", "bfloat16")
}
MOCK_COMPILED = "fa2: 8, 16, 32 and E/Ev 48/32; ffpa_l1: 64; ffpa_l2: 64; ffpa_l3: 64, 128"
# The manifest registry of that build (_ops._REGISTRY: op, family, arch, dtype, acc, E, Ev, level),
# the families' lines from the spec (every arch: the mock device is any device).
MOCK_REGISTRY = tuple(
    (line.op, line.name, line.arch, dt, acc, e, ev, line.level)
    for line in FAMILIES if line.name in MOCK_PAIRS
    for dt in ("float16", "bfloat16") for acc in MOCK_ACCS[(line.name, dt)]
    for e, ev in sorted(MOCK_PAIRS[line.name])
)
_MASK_DTYPES = (torch.bool, torch.float16, torch.bfloat16, torch.float32)


def _check_vec_aligned(t):
    assert t.stride(-1) == 1, f"last-dim stride {t.stride()}"
    es = t.element_size()
    for size, stride in zip(t.shape[:-1], t.stride()[:-1]):
        assert size == 1 or (stride * es) % 16 == 0, f"stride {t.stride()} not 16B aligned"
    assert t.data_ptr() % 16 == 0, "data_ptr not 16B aligned"


def _check_mask(m, q, k):
    B, Hq, L, _ = q.shape
    S = k.shape[2]
    assert m.dim() == 4, f"attn_mask must be 4-D, got {tuple(m.shape)}"
    assert m.device == q.device and m.dtype in _MASK_DTYPES, (m.device, m.dtype)
    for got, full in zip(m.shape, (B, Hq, L, S)):
        assert got in (1, full), f"attn_mask {tuple(m.shape)} vs (B, Hq, L, S) {(B, Hq, L, S)}"


def _mock_family(E, Ev, level, acc):
    """The C++ chooser's rule (csrc/launch/route.cpp) on the spec's lines (ffpa_attn/_spec.py): a
    forced level runs that level's family; an auto call takes an "auto: first" family that has the
    pair (FA-2; fp32 accumulation only), else the first "auto: heuristic" family that has it (the real
    heuristic's default where L1 exists)."""
    assert acc in ACC_CODES.values(), acc
    assert level in (0, 1, 2, 3), level
    fwd = [f for f in FAMILIES if f.op == "fwd"]  # the decode family serves the decode op only
    if level:
        candidates = [f for f in fwd if f.level == level]
    else:
        candidates = [f for f in fwd if f.auto == "first" and acc in (0, 1)]
        candidates += [f for f in fwd if f.auto == "heuristic"]
    for family in candidates:
        if (E, Ev) in MOCK_PAIRS[family.name]:
            return family.name
    raise AssertionError(f"head dims {(E, Ev)} not compiled for level {level}")


@torch.library.custom_op("ffpa_attn_test::ffpa_fwd", mutates_args=())
def _mock_ffpa_fwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: Optional[torch.Tensor],
    scale: float,
    is_causal: bool,
    causal_bottom_right: bool,
    level: int,
    acc: int,
    num_stages: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """CPU stand-in for torch.ops.ffpa_attn.ffpa_fwd that asserts its contract."""
    assert q.dim() == k.dim() == v.dim() == 4
    assert q.dtype in (torch.float16, torch.bfloat16) and k.dtype == v.dtype == q.dtype
    for t in (q, k, v):
        _check_vec_aligned(t)
    B, Hq, L, D = q.shape
    Hkv, S, Dv = k.shape[1], k.shape[2], v.shape[3]
    assert k.shape[0] == v.shape[0] == B and v.shape[1] == Hkv and v.shape[2] == S
    assert k.shape[3] == D and Hq % Hkv == 0
    assert num_stages in (0, 1, 2, 3, 4)
    family = _mock_family(D, Dv, level, acc)
    assert acc in (ACC_CODES["auto"], ACC_CODES["fp32"]) or q.dtype == torch.float16, "fp16 accumulation needs fp16 inputs"
    if attn_mask is not None:
        _check_mask(attn_mask, q, k)
    MOCK_CALLS.append(
        dict(
            q_shape=tuple(q.shape), k_shape=tuple(k.shape), v_shape=tuple(v.shape),
            q_ptr=q.data_ptr(), k_ptr=k.data_ptr(), v_ptr=v.data_ptr(), dtype=q.dtype,
            scale=scale, is_causal=is_causal, bottom_right=causal_bottom_right, level=level,
            acc=acc, num_stages=num_stages, family=family,
            mask=None if attn_mask is None else dict(
                shape=tuple(attn_mask.shape), stride=attn_mask.stride(), dtype=attn_mask.dtype,
                storage=attn_mask.untyped_storage().data_ptr(),
            ),
        )
    )
    out, lse = ref_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale,
                             enable_gqa=True, causal_bottom_right=causal_bottom_right)
    if q.stride(1) < q.stride(2):
        o = torch.empty(B, L, Hq, Dv, dtype=q.dtype).transpose(1, 2)
    else:
        o = torch.empty(B, Hq, L, Dv, dtype=q.dtype)
    o.copy_(out)
    return o, lse.float().contiguous()


_mock_ffpa_fwd.register_fake(_ops._ffpa_fwd_fake)


@pytest.fixture
def mock_kernel(monkeypatch):
    """Pretend CPU is a supported device and the extension is built for fp16/bf16 and the
    MOCK_PAIRS head dims (whatever the real build in the checkout has), and route the op to
    the mock."""

    def mocked(q, k, v, attn_mask, scale, is_causal, causal_bottom_right=False, level=0,
               acc=0, num_stages=0):
        return torch.ops.ffpa_attn_test.ffpa_fwd(
            q, k, v, attn_mask, scale, is_causal, causal_bottom_right, level, acc, num_stages
        )

    monkeypatch.setattr(_ops, "ffpa_fwd", mocked)
    monkeypatch.setattr(_ops, "_PAIRS", dict(MOCK_PAIRS))
    monkeypatch.setattr(_ops, "_HEAD_DIMS", {f: frozenset(e for e, _ in p) for f, p in MOCK_PAIRS.items()})
    monkeypatch.setattr(_ops, "_DTYPES", frozenset({"float16", "bfloat16"}))
    monkeypatch.setattr(_ops, "_ACCS", dict(MOCK_ACCS))
    monkeypatch.setattr(_ops, "_REGISTRY", MOCK_REGISTRY)
    monkeypatch.setattr(_routing, "_environment_reason", lambda device: None)
    MOCK_CALLS.clear()
    torch._dynamo.reset()
    yield MOCK_CALLS
    MOCK_CALLS.clear()
    torch._dynamo.reset()


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


# ====================================================== masks to the kernel
def _bool_mask(g, *shape, p=0.3):
    m = torch.rand(shape, generator=g) > p
    m[..., 0] = True  # no fully masked row unless a test wants one
    return m


MASK_CASES = {
    # id: (q shape, kv shape, mask builder(g, L, S), 4-D shape the kernel must see)
    "2d_LS": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: _bool_mask(g, L, S), (1, 1, 9, 11)),
    "padding_B11S": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 2, 1, 1, S), (2, 1, 1, 11)),
    "key_row_1S": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 1, S), (1, 1, 1, 11)),
    "per_head": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 3, L, S), (1, 3, 9, 11)),
    "full_4d": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 2, 3, L, S), (2, 3, 9, 11)),
    "column_L1": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: _bool_mask(g, L, 1, p=-1), (1, 1, 9, 1)),
    "float_fp32": ((2, 3, 9, 16), (2, 3, 11, 16), lambda g, L, S: rn(g, 2, 1, L, S), (2, 1, 9, 11)),
    "q2d": ((9, 16), (11, 16), lambda g, L, S: _bool_mask(g, L, S), (1, 1, 9, 11)),
    "q3d": ((3, 9, 16), (3, 11, 16), lambda g, L, S: _bool_mask(g, 3, L, S), (1, 3, 9, 11)),
    "q5d_2d_mask": ((2, 2, 3, 9, 16), (2, 2, 3, 11, 16), lambda g, L, S: _bool_mask(g, L, S), (1, 1, 9, 11)),
    "q5d_full": ((2, 2, 3, 9, 16), (2, 2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 2, 2, 3, L, S), (4, 3, 9, 11)),
    "q5d_heads_only": ((2, 2, 3, 9, 16), (2, 2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 3, L, S), (1, 3, 9, 11)),
    "q5d_part_batch": ((2, 2, 3, 9, 16), (2, 2, 3, 11, 16), lambda g, L, S: _bool_mask(g, 2, 1, 1, 1, S), (4, 1, 1, 11)),
    "gqa": ((2, 4, 9, 16), (2, 2, 11, 16), lambda g, L, S: _bool_mask(g, 2, 4, L, S), (2, 4, 9, 11)),
}
# Where the kernel must get a view of the user's mask (no copy).
MASK_VIEWS = {"2d_LS", "padding_B11S", "key_row_1S", "per_head", "full_4d", "column_L1",
              "float_fp32", "q2d", "q3d", "q5d_2d_mask", "q5d_full", "q5d_heads_only", "gqa"}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("case", list(MASK_CASES))
def test_masks_go_to_the_kernel(mock_kernel, gen, case, dtype, record):
    qs, kvs, make, kernel_shape = MASK_CASES[case]
    q, k, v = rn(gen, *qs, dtype=dtype), rn(gen, *kvs, dtype=dtype), rn(gen, *kvs, dtype=dtype)
    mask = make(gen, qs[-2], kvs[-2])
    gqa = len(qs) >= 3 and qs[-3] != kvs[-3]
    out, lse = ffpa_attn.forward(q, k, v, attn_mask=mask, enable_gqa=gqa, return_lse=True,
                                 strict=True)
    call = mock_kernel[0]
    assert call["mask"]["shape"] == kernel_shape and call["mask"]["dtype"] == mask.dtype
    if case in MASK_VIEWS:
        assert call["mask"]["storage"] == mask.untyped_storage().data_ptr(), "mask was copied"
    ref_out, ref_lse = ref_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
    torch.testing.assert_close(out.double(), ref_out, **TOL[dtype])
    torch.testing.assert_close(out, SDPA(q, k, v, attn_mask=mask, enable_gqa=gqa), **TOL[dtype])
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-4, rtol=1e-4)
    assert fallback_warnings(record) == []


def test_mask_as_4d_views_and_expanded_dims(gen):
    base = _bool_mask(gen, 1, 1, 9, 11)
    expanded = base.expand(2, 3, 9, 11)  # what users get from .expand: stride 0, no copy
    m4 = _masks.mask_as_4d(expanded, (2, 3, 9, 16))
    assert m4.shape == (1, 1, 9, 11)  # expanded dims back to 1: one block-map slice, same values
    assert m4.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert _masks.mask_slices(expanded, (2, 3, 9, 16)) == 1
    pad = _bool_mask(gen, 2, 11)[:, None, None, :].expand(2, 3, 9, 11)  # padding mask, expanded
    m4 = _masks.mask_as_4d(pad, (2, 3, 9, 16))
    assert m4.shape == (2, 1, 1, 11) and m4.untyped_storage().data_ptr() == pad.untyped_storage().data_ptr()
    assert torch.equal(m4.expand(2, 3, 9, 11), pad)
    assert _masks.mask_slices(pad, (2, 3, 9, 16)) == 2
    assert _masks.mask_slices(_bool_mask(gen, 2, 3, 9, 11), (2, 3, 9, 16)) == 6
    assert _masks.mask_slices(_bool_mask(gen, 3, 9, 11), (2, 3, 9, 16)) == 3
    # 5-D query: batch dims merged in a view when they are all broadcast or all full ...
    m5 = _bool_mask(gen, 1, 1, 3, 9, 11).expand(2, 2, 3, 9, 11)
    assert _masks.mask_as_4d(m5[:1, :1], (2, 2, 3, 9, 16)).shape == (1, 3, 9, 11)
    # ... and copies only the batch broadcast when some batch dims broadcast and some not
    part = _bool_mask(gen, 2, 1, 1, 1, 11)
    m4 = _masks.mask_as_4d(part, (2, 2, 3, 9, 16))
    assert m4.shape == (4, 1, 1, 11)
    assert torch.equal(m4.reshape(2, 2, 1, 1, 11), part.expand(2, 2, 1, 1, 11))
    assert _masks.mask_slices(part, (2, 2, 3, 9, 16)) == 4


def test_expanded_mask_reaches_kernel_unexpanded(mock_kernel, gen):
    q, k, v = (rn(gen, 2, 3, 9, 16, dtype=torch.float16) for _ in range(3))
    base = _bool_mask(gen, 1, 1, 9, 9)
    mask = base.expand(2, 3, 9, 9)
    out = ffpa_attn.forward(q, k, v, attn_mask=mask)
    call = mock_kernel[0]
    assert call["mask"]["shape"] == (1, 1, 9, 9)
    assert call["mask"]["storage"] == base.untyped_storage().data_ptr()
    torch.testing.assert_close(out, SDPA(q, k, v, attn_mask=mask), **TOL[torch.float16])


def test_mask_with_too_many_slices_falls_back(mock_kernel, gen, record):
    q, k, v = (rn(gen, 2, 40000, 1, 8, dtype=torch.bfloat16) for _ in range(3))
    per_head = torch.ones(2, 40000, 1, 1, dtype=torch.bool)  # 80000 (batch, head) slices
    with pytest.raises(FFPAUnsupportedError, match="65535 .batch, head. slices"):
        ffpa_attn.forward(q, k, v, attn_mask=per_head, strict=True)
    ffpa_attn.forward(q, k, v, attn_mask=per_head[:1].expand(2, 40000, 1, 1), strict=True)  # 40000
    ffpa_attn.forward(q, k, v, attn_mask=per_head[:, :1].expand(2, 40000, 1, 1), strict=True)  # 2
    assert [c["mask"]["shape"] for c in mock_kernel] == [(1, 40000, 1, 1), (2, 1, 1, 1)]


@pytest.mark.parametrize("mask_dtype", [torch.float32, "same"], ids=["fp32", "same"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_additive_masks_with_minus_inf(mock_kernel, gen, dtype, mask_dtype):
    mdt = dtype if mask_dtype == "same" else mask_dtype
    q, k, v = (rn(gen, 2, 2, 7, 32, dtype=dtype) for _ in range(3))
    mask = rn(gen, 2, 1, 7, 7, dtype=mdt)
    mask[..., 2] = -math.inf  # a masked key column
    mask[0, :, 4] = -math.inf  # a fully masked row: out 0, lse -inf
    out, lse = ffpa_attn.forward(q, k, v, attn_mask=mask, return_lse=True)
    assert mock_kernel[0]["mask"]["dtype"] == mdt
    ref_out, ref_lse = ref_attention(q, k, v, attn_mask=mask)
    assert (out[0, :, 4] == 0).all() and torch.isneginf(lse[0, :, 4]).all()
    torch.testing.assert_close(out.double(), ref_out, **TOL[dtype])
    live = ~torch.isneginf(ref_lse)
    torch.testing.assert_close(lse[live].double(), ref_lse[live], atol=1e-4, rtol=1e-4)


def test_mask_keeps_its_dtype_under_autocast(mock_kernel, gen):
    q, k, v = rn(gen, 2, 2, 9, 16), rn(gen, 2, 2, 11, 16), rn(gen, 2, 2, 11, 16)
    mask = rn(gen, 9, 11)  # float32: the kernel reads it as is (more precise than SDPA's cast)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ffpa_attn.forward(q, k, v, attn_mask=mask)
        expected = SDPA(q, k, v, attn_mask=mask)
    call = mock_kernel[0]
    assert call["dtype"] == torch.bfloat16 and call["mask"]["dtype"] == torch.float32
    torch.testing.assert_close(out, expected, **TOL[torch.bfloat16])


def test_mask_requiring_grad_runs_the_kernel_under_no_grad(mock_kernel, gen):
    q, k, v = (rn(gen, 1, 2, 9, 16, dtype=torch.float16) for _ in range(3))
    mask = torch.zeros(9, 9, requires_grad=True)
    with torch.no_grad():
        ffpa_attn.forward(q, k, v, attn_mask=mask, strict=True)
    assert len(mock_kernel) == 1
    with pytest.raises(FFPAUnsupportedError, match="attn_mask requires grad"):
        ffpa_attn.forward(q, k, v, attn_mask=mask, strict=True)


@pytest.mark.parametrize("L,S", [(5, 9), (9, 5), (7, 7), (1, 9), (9, 1)])
@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
def test_causal_align_flag_reaches_the_kernel(mock_kernel, gen, L, S, align, record):
    q = rn(gen, 2, 4, L, 16, dtype=torch.bfloat16)
    k, v = rn(gen, 2, 2, S, 16, dtype=torch.bfloat16), rn(gen, 2, 2, S, 16, dtype=torch.bfloat16)
    br = align == "bottom_right"
    out, lse = ffpa_attn.forward(q, k, v, is_causal=True, causal_align=align, enable_gqa=True,
                                 return_lse=True, strict=True)
    call = mock_kernel[0]
    assert call["is_causal"] is True and call["bottom_right"] is br and call["mask"] is None
    ref_out, ref_lse = ref_attention(q, k, v, is_causal=True, enable_gqa=True,
                                     causal_bottom_right=br)
    torch.testing.assert_close(out.double(), ref_out, **TOL[torch.bfloat16])
    dead = torch.isneginf(ref_lse)
    assert (out[dead] == 0).all() and torch.isneginf(lse[dead]).all()
    torch.testing.assert_close(lse[~dead].double(), ref_lse[~dead], atol=1e-4, rtol=1e-4)
    # the fallback gives the same answer (SDPA with the equivalent bool mask)
    fb_out, fb_lse = ffpa_attn.forward(q.float(), k.float(), v.float(), is_causal=True,
                                       causal_align=align, enable_gqa=True, return_lse=True)
    torch.testing.assert_close(out.float(), fb_out, **TOL[torch.bfloat16])
    torch.testing.assert_close(lse, fb_lse, atol=1e-4, rtol=1e-4)
    # without is_causal the alignment is ignored
    ffpa_attn.forward(q, k, v, causal_align=align, enable_gqa=True)
    assert mock_kernel[-1]["is_causal"] is False and mock_kernel[-1]["bottom_right"] is False


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_kernel_path_compile_fullgraph_with_mask(mock_kernel, gen, backend):
    def fn(q, k, v, mask):
        a = ffpa_attn.forward(q, k, v, attn_mask=mask, enable_gqa=True)
        b, lse = ffpa_attn.forward(q, k, v, is_causal=True, causal_align="bottom_right",
                                   enable_gqa=True, return_lse=True)
        return a + b, lse

    q = rn(gen, 2, 4, 9, 16, dtype=torch.float16)
    k, v = rn(gen, 2, 2, 13, 16, dtype=torch.float16), rn(gen, 2, 2, 13, 16, dtype=torch.float16)
    mask = _bool_mask(gen, 2, 1, 1, 13).expand(2, 4, 9, 13)
    eager = fn(q, k, v, mask)
    MOCK_CALLS.clear()
    got = torch.compile(fn, fullgraph=True, backend=backend)(q, k, v, mask)
    assert len(MOCK_CALLS) == 2 and MOCK_CALLS[1]["bottom_right"] is True
    assert MOCK_CALLS[0]["mask"]["shape"] == (2, 1, 1, 13)  # the expand undone: a view
    for a, b in zip(got, eager):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_kernel_path_compile_dynamic_pairs_and_masks(mock_kernel, gen):
    fn = torch.compile(
        lambda q, k, v, m: ffpa_attn.forward(q, k, v, attn_mask=m, enable_gqa=True),
        fullgraph=True, backend="aot_eager", dynamic=True,
    )
    for L, S, E, Ev in ((9, 17, 16, 16), (13, 5, 48, 32), (33, 33, 32, 32)):
        q = rn(gen, 2, 4, L, E, dtype=torch.bfloat16)
        k = rn(gen, 2, 2, S, E, dtype=torch.bfloat16)
        v = rn(gen, 2, 2, S, Ev, dtype=torch.bfloat16)
        m = _bool_mask(gen, L, S)
        torch.testing.assert_close(fn(q, k, v, m), ffpa_attn.forward(q, k, v, attn_mask=m, enable_gqa=True),
                                   atol=0, rtol=0)
    assert {c["family"] for c in MOCK_CALLS} == {"fa2"}


def test_fake_kernel_accepts_a_mask():
    q = torch.empty(2, 4, 9, 32, device="meta", dtype=torch.bfloat16)
    k = torch.empty(2, 2, 13, 32, device="meta", dtype=torch.bfloat16)
    v = torch.empty(2, 2, 13, 16, device="meta", dtype=torch.bfloat16)
    mask = torch.empty(1, 1, 9, 13, device="meta", dtype=torch.bool).expand(2, 4, 9, 13)
    out, lse = _ops._ffpa_fwd_fake(q, k, v, mask, 0.1, True, True, 0, 0, 0)
    assert out.shape == (2, 4, 9, 16) and lse.shape == (2, 4, 9)
    with pytest.raises(RuntimeError, match="attn_mask"):
        _ops._ffpa_fwd_fake(q, k, v, mask[0], 0.1, False, False, 0, 0, 0)


# ===================================================================== fake kernel
@pytest.mark.parametrize("blhd", [False, True])
def test_fake_kernel_shapes_and_layout(blhd):
    B, H, Hkv, L, S, D = 2, 8, 2, 17, 33, 64
    if blhd:
        q = torch.empty(B, L, H, D, device="meta", dtype=torch.float16).transpose(1, 2)
    else:
        q = torch.empty(B, H, L, D, device="meta", dtype=torch.float16)
    k = torch.empty(B, Hkv, S, D, device="meta", dtype=torch.float16)
    v = torch.empty(B, Hkv, S, D, device="meta", dtype=torch.float16)
    out, lse = _ops._ffpa_fwd_fake(q, k, v, None, 0.1, True, False, 0, 0, 0)
    assert out.shape == (B, H, L, D) and out.dtype == torch.float16 and out.device == q.device
    assert lse.shape == (B, H, L) and lse.dtype == torch.float32 and lse.is_contiguous()
    if blhd:
        assert out.stride() == torch.empty(B, L, H, D).transpose(1, 2).stride()
    else:
        assert out.is_contiguous()


def test_realigned_op_keeps_promised_layout(monkeypatch, gen):
    # If realigning copies a BLHD q, the op still returns the BLHD layout its fake promised.
    calls = []

    def fake_kernel(q, k, v, attn_mask, scale, is_causal, causal_bottom_right=False, level=0,
                    acc=0, num_stages=0):
        calls.append(q.stride())
        out = torch.zeros(q.shape[0], q.shape[1], q.shape[2], v.shape[-1], dtype=q.dtype)
        return out, torch.zeros(q.shape[:3])

    monkeypatch.setattr(_ops, "ffpa_fwd", fake_kernel)
    base = rn(gen, 2 * 5 * 3 * 16 + 1, dtype=torch.float16)
    q = base[1:].view(2, 5, 3, 16).transpose(1, 2)  # BLHD view, misaligned pointer
    k = v = rn(gen, 2, 3, 7, 16, dtype=torch.float16)
    out, _ = _ops.ffpa_fwd_realigned(q, k, v, None, 0.25, False, False, 0, 0, 0)
    assert calls[0] == (240, 80, 16, 1)  # the kernel got a contiguous, aligned copy
    assert out.stride() == _ops._expected_out_strides(q, 16)
