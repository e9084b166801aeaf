"""Shared helpers for the kernel tests: random inputs, the float64 reference (masks, both causal
alignments), the tolerance rule, output poisoning and CUDA-graph capture.

Tolerance rule: on every row that keeps at least one key, our max error against the float64
reference must stay within 2x PyTorch SDPA's own low-precision error + ATOL; rows with no key
left (fully masked by the mask or the causal alignment) must be exactly 0 with lse -inf.

fp16 MMA accumulation (FFPA acc="fp16" / "mixed") adds its own rounding on top: the fp16
accumulator is rounded once per 16-wide k-step, i.e. D/16 times for a score (acc="fp16" only) and
S/16 times for an output's running sum, plus one fp16 rescale per KV tile. Each rounding is at
most u = 2^-11 relative to the running sum, whose normalised size is that of the output; as a
random walk that is about u * sqrt(#roundings) * max|out|. Two such sources (the sums and the
rescales), each allowed 2 sigma, give the bound 4 * u * sqrt((D + S) / 16) * max|ref| on top of
2x SDPA's error + ATOL (the H100 bench measured 1.0e-3 to 1.7e-3 at S=8192, D=320..1024).
The lse gets u * sqrt(D / 16) * (|lse| + 4) on top of its tolerance (acc="fp16")."""
from __future__ import annotations

import contextlib

import math

import torch
import torch.nn.functional as F

# The original SDPA, captured before any test can patch F.scaled_dot_product_attention.
SDPA = F.scaled_dot_product_attention

def rand_qkv(B, Hq, Hkv, L, S, D, dtype, seed, layout="bhld", Dv=None, device="cuda"):
    """Fresh randn q (B, Hq, L, D), k (B, Hkv, S, D), v (B, Hkv, S, Dv or D). layout "blhd":
    (B, N, H, D) storage viewed as (B, H, N, D), i.e. strided heads."""
    g = torch.Generator(device=device).manual_seed(seed)

    def make(H, N, d):
        if layout == "blhd":
            return torch.randn(B, N, H, d, device=device, dtype=dtype, generator=g).transpose(1, 2)
        return torch.randn(B, H, N, d, device=device, dtype=dtype, generator=g)

    return make(Hq, L, D), make(Hkv, S, D), make(Hkv, S, D if Dv is None else Dv)


def rising_then_jumping_keys(k, top=2.5, jump=4.0):
    """k with its scores' spread rising along the keys (x1 .. x`top`: each key tile's max a little above the
    last, within the Hopper kernels' lazy-max slack, so P = exp2(s - m) runs well above 1) and jumping x`jump`
    in the last quarter (past the slack: the row max moves and O rescales); attn/state.cuh, online_update_lazy."""
    S = k.shape[2]
    ramp = torch.linspace(1.0, top, S, device=k.device, dtype=torch.float32)
    ramp[3 * S // 4:] *= jump
    return (k.float() * ramp[:, None]).to(k.dtype)


def capture_graph(f):
    """Capture f() in a CUDA graph after one warm-up call on the capture stream (one-time
    attribute setup must not happen inside the capture) -> (graph, the captured output)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        f()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = f()
    return graph, static_out


# Absolute slack on top of "2x SDPA's own error": one b16 rounding step of a unit-size output.
ATOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3}
# LSE (fp32 in the kernels) against the float64 reference.
LSE_ATOL, LSE_RTOL = 2e-3, 1e-5


def causal_keep(L, S, bottom_right=False, device="cuda"):
    """(L, S) bool: top-left keeps j <= i (SDPA), bottom-right keeps j <= i + S - L."""
    i = torch.arange(L, device=device).unsqueeze(-1)
    j = torch.arange(S, device=device)
    return j <= i + (S - L if bottom_right else 0)


def equivalent_mask(q, k, is_causal=False, attn_mask=None, causal_bottom_right=False):
    """One SDPA-compatible mask for (attn_mask, causal alignment), or None: SDPA has no
    bottom-right flag and rejects attn_mask together with is_causal."""
    if not is_causal:
        return attn_mask
    keep = causal_keep(q.shape[-2], k.shape[-2], causal_bottom_right, q.device)
    if attn_mask is None:
        return keep
    if attn_mask.dtype == torch.bool:
        return attn_mask & keep
    return attn_mask.masked_fill(~keep, float("-inf"))


def reference(q, k, v, is_causal=False, scale=None, attn_mask=None, causal_bottom_right=False):
    """Attention in float64 math on the inputs' device (GQA by repeating K/V heads).

    Returns (out, lse) with lse the natural-log log-sum-exp of the scaled, masked scores;
    rows with no key left have out 0 and lse -inf."""
    qd, kd, vd = q.double(), k.double(), v.double()
    hq, hkv = q.shape[-3], k.shape[-3]
    if hq != hkv:
        kd = kd.repeat_interleave(hq // hkv, dim=-3)
        vd = vd.repeat_interleave(hq // hkv, dim=-3)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (qd @ kd.transpose(-1, -2)) * scale
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        s = s.masked_fill(~causal_keep(L, S, causal_bottom_right, q.device), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask.double()
    lse = torch.logsumexp(s, dim=-1)
    dead = torch.isneginf(lse).unsqueeze(-1)
    out = (torch.softmax(s, dim=-1) @ vd).masked_fill(dead, 0.0)
    return out, lse


def sdpa_low_precision(q, k, v, is_causal=False, scale=None, attn_mask=None, causal_bottom_right=False):
    """PyTorch's own answer in the inputs' dtype (default backend choice): the error yardstick.
    Masks and the bottom-right alignment go in as the equivalent bool/additive mask."""
    gqa = q.shape[-3] != k.shape[-3]
    if scale is not None and scale < 0 and q.is_cuda:
        # SDPA's flash backend (its default for head dims <= 256) returns NaN for a negative scale
        # (torch 2.11, H200): measure against the memory-efficient backend, which handles it.
        from torch.nn.attention import SDPBackend, sdpa_kernel

        if gqa:  # that backend takes no enable_gqa: the K/V heads expanded instead
            rep = q.shape[-3] // k.shape[-3]
            k, v, gqa = k.repeat_interleave(rep, dim=-3), v.repeat_interleave(rep, dim=-3), False
        with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
            return _sdpa_any(q, k, v, is_causal, scale, attn_mask, causal_bottom_right, gqa)
    return _sdpa_any(q, k, v, is_causal, scale, attn_mask, causal_bottom_right, gqa)


def _sdpa_any(q, k, v, is_causal, scale, attn_mask, causal_bottom_right, gqa):
    if attn_mask is None and not (is_causal and causal_bottom_right):
        return SDPA(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=gqa)
    mask = equivalent_mask(q, k, is_causal, attn_mask, causal_bottom_right)
    if mask.dtype != torch.bool and mask.dtype != q.dtype:
        # SDPA's CUDA kernels want a float mask in the query's dtype (an fp32 mask with fp16
        # inputs came back NaN from the chosen backend); the yardstick is SDPA's own precision.
        mask = mask.to(q.dtype)
    return SDPA(q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)


def max_err(a, ref):
    return (a.double() - ref).abs().max().item() if a.numel() else 0.0


U_FP16 = 2.0 ** -11


def assert_close_to_reference(out, q, k, v, is_causal=False, scale=None, what="", attn_mask=None,
                              causal_bottom_right=False, lse=None, acc="fp32"):
    """The tolerance rule (module doc) on out, and lse against the reference when given;
    acc names the kernel's MMA accumulation ("fp32", "fp16" or "mixed")."""
    kw = dict(is_causal=is_causal, scale=scale, attn_mask=attn_mask, causal_bottom_right=causal_bottom_right)
    ref, ref_lse = reference(q, k, v, **kw)
    assert not torch.isnan(out).any(), f"{what}: NaN in output (unwritten or poisoned elements)"
    dead = torch.isneginf(ref_lse)  # (..., L): rows with no key left
    assert (out[dead] == 0).all(), f"{what}: fully masked rows must be exactly 0"
    live = ~dead
    ours = max_err(out[live], ref[live])
    theirs = max_err(sdpa_low_precision(q, k, v, **kw)[live], ref[live])
    bound = 2.0 * theirs + ATOL[q.dtype]
    if acc in ("fp16", "mixed"):
        steps = (q.shape[-1] if acc == "fp16" else 0) + k.shape[-2]
        bound += 4 * U_FP16 * math.sqrt(steps / 16) * ref[live].abs().max().item()
    assert ours <= bound, f"{what}: max error {ours:.3e} > 2 x SDPA's {theirs:.3e} + atol ({bound:.3e})"
    if lse is not None:
        assert lse.dtype == torch.float32 and lse.shape == ref_lse.shape, (lse.dtype, lse.shape)
        assert torch.isneginf(lse[dead]).all(), f"{what}: lse of fully masked rows must be -inf"
        err = (lse[live].double() - ref_lse[live]).abs()
        tol = LSE_ATOL + LSE_RTOL * ref_lse[live].abs()
        if acc == "fp16":
            tol = tol + U_FP16 * math.sqrt(q.shape[-1] / 16) * (ref_lse[live].abs() + 4)
        assert (err <= tol).all(), f"{what}: lse error {err.max().item():.3e} > {LSE_ATOL} + {LSE_RTOL} x |lse|"
    return ours, theirs


MASK_KINDS = ["bool_bcast", "bool_full", "additive_same", "additive_fp32", "blocksparse", "padding"]


def make_mask(kind, B, Hq, L, S, dtype, generator, device="cuda"):
    """A mask of one of MASK_KINDS for (B, Hq, L, S) scores of ``dtype`` inputs:

    bool_bcast (1, 1, L, S) random; bool_full (B, Hq, L, S) random; additive_same / additive_fp32
    (B, 1, L, S) randn in the inputs' dtype / float32 with ~10% -inf entries; blocksparse (1, 1, L, S)
    128x128 blocks masked in a checkerboard plus one fully masked row; padding (B, 1, 1, S): the
    last keys of each batch masked (a different count per batch, never all)."""
    g = generator
    if kind in ("bool_bcast", "bool_full"):
        shape = (1, 1, L, S) if kind == "bool_bcast" else (B, Hq, L, S)
        return torch.rand(shape, device=device, generator=g) > 0.3
    if kind in ("additive_same", "additive_fp32"):
        mdt = dtype if kind == "additive_same" else torch.float32
        m = torch.randn((B, 1, L, S), device=device, generator=g).to(mdt)
        drop = torch.rand((B, 1, L, S), device=device, generator=g) < 0.1
        return m.masked_fill(drop, float("-inf"))
    if kind == "blocksparse":
        i = torch.arange(L, device=device).unsqueeze(-1) // 128
        j = torch.arange(S, device=device) // 128
        keep = (i + j) % 2 == 0
        keep[min(5, L - 1)] = False
        return keep.view(1, 1, L, S)
    if kind == "padding":
        valid = torch.tensor([max(1, S - 1 - (b * 37) % max(S, 1)) for b in range(B)], device=device)
        return (torch.arange(S, device=device) < valid.view(B, 1)).view(B, 1, 1, S)
    raise ValueError(f"unknown mask kind {kind!r}; expected one of {MASK_KINDS}")


def poison_allocator(*shapes_dtypes, device="cuda"):
    """Fill soon-to-be-reused caching-allocator blocks with NaN so an output element the kernel
    forgets to write shows up as NaN instead of a stale plausible value."""
    blocks = [torch.full(shape, float("nan"), dtype=dt, device=device) for shape, dt in shapes_dtypes]
    torch.cuda.synchronize()
    del blocks


def kernels_launched(fn):
    """Names of the CUDA kernels fn() launches (torch.profiler): which kernel a path really ran."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}


def template_bools(name, template, count):
    """The last `count` arguments of class template `template` in a demangled kernel name, as bools (the
    demangler writes true or (bool)1): e.g. FfpaWsTraits<elem, D, Dv, pair, share K> -> (pair, share K)."""
    args = name.split(template + "<", 1)[1].split(">", 1)[0].split(",")
    return tuple(a.strip() in ("true", "(bool)1") for a in args[-count:])


@contextlib.contextmanager
def process_mode(name, mode):
    """ffpa_attn._C.set_<name>(mode) (a process-wide mode: decode_merge, fp8_v_transpose, fa2_mma) for the
    block, checked through get_<name>, and back to 'auto' after."""
    import ffpa_attn._C as C

    getattr(C, f"set_{name}")(mode)
    assert getattr(C, f"get_{name}")() == mode
    try:
        yield mode
    finally:
        getattr(C, f"set_{name}")("auto")
