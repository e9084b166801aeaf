"""The CPU mock of torch.ops.ffpa_attn.ffpa_fwd the kernel-path tests run against: it asserts the
C++ contract (4-D, aligned q/k/v, K/V not expanded, mask 4-D with every dim 1 or full, output layout,
the family the head dims select by the chooser's rule on the spec's lines) and computes the
reference; ``mock_kernel`` (a fixture) pretends CPU is a supported device with a small build."""
from typing import Optional

import pytest
import torch

from _cpu_helpers import ref_attention
from ffpa_attn import _ops, _routing
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
    # the decode family serves the decode op only, the FP8 one e4m3 inputs through its own op
    fwd = [f for f in FAMILIES if f.op == "fwd" and "bf16" in f.dtypes]
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


def impl_on_cpu(name, fn):
    """forward()'s fast path (csrc/ops/fastpath.cpp) calls the real op ``ffpa_attn::<name>`` through the
    dispatcher: ``fn`` becomes its CPU kernel so that calls on CPU tensors reach the mock there too.
    Returns the registration to ``_destroy()`` after the test (None without the extension: no fast path)."""
    if _ops._C is None:
        return None
    lib = torch.library.Library("ffpa_attn", "IMPL")
    lib.impl(name, fn, "CPU")
    return lib


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
    monkeypatch.setattr(_ops, "_INDEX", _ops.build_index(MOCK_REGISTRY))
    monkeypatch.setattr(_routing, "_environment_reason", lambda device: None)
    lib = impl_on_cpu("ffpa_fwd", lambda *args: torch.ops.ffpa_attn_test.ffpa_fwd(*args))
    MOCK_CALLS.clear()
    torch._dynamo.reset()
    yield MOCK_CALLS
    MOCK_CALLS.clear()
    torch._dynamo.reset()
    if lib is not None:
        lib._destroy()
