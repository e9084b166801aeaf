"""Dev A/B of decode kernel variants beside SDPA's best backend: bench's interleaved timer (L2 flushed,
medians), GB/s of K/V covered. Each variant sets FFPA_DEV_WS=<n> before its call; the decode launchers read
nothing by default, so an A/B first adds a temporary switch on that variable (e.g. in
DecodeLauncher::Impl::launch, picking a template variant; never committed) and removes it after.
Shapes 'B,S,Hq,Hkv[,D[,Dv]]' (D = Dv = 128 unless given, bf16, Lq = 1, contiguous cache; Dv < D is MLA's
single cache, V a view of K, with no SDPA peer); MASKED=1 adds forward() calls with a
(B, 1, 1, S) key-padding mask at the same shapes (what a Hugging Face static cache passes).
SPLITS="1,2,4": decode() with those forced split counts beside (variant 0's kernel).
Usage: SHAPES="8,32768,32,8 4,1056,32,32" MASKED=1 python3 scripts/dev/decode_variants.py 0,1,2"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench import _l2_flusher, _time_interleaved  # noqa: E402

import ffpa_attn  # noqa: E402

variants = sys.argv[1].split(",") if len(sys.argv) > 1 else ["0", "1"]
shapes = [tuple(int(x) for x in s.split(",")) for s in
          os.environ.get("SHAPES", "8,32768,32,8 64,8192,32,8 1,131072,32,8 4,1056,32,32").split()]
masked = os.environ.get("MASKED", "0") == "1"
flush = _l2_flusher()
dt = torch.bfloat16
print(torch.cuda.get_device_name(), "variants", variants, flush=True)
for shape in shapes:
    B, S, Hq, Hkv = shape[:4]
    D = shape[4] if len(shape) > 4 else 128
    Dv = shape[5] if len(shape) > 5 else D
    g = torch.Generator(device="cuda").manual_seed(B * S)
    q = torch.randn(B, 1, Hq, D, device="cuda", dtype=dt, generator=g)
    k = torch.randn(B, S, Hkv, D, device="cuda", dtype=dt, generator=g)
    v = k[..., :Dv] if Dv < D else torch.randn(B, S, Hkv, D, device="cuda", dtype=dt, generator=g)
    qs, ks, vs = (t.transpose(1, 2) for t in (q, k, v))  # SDPA layout views
    mask = torch.ones(B, 1, 1, S, device="cuda", dtype=torch.bool)
    mask[..., S - 17:] = False
    gb = (1 if Dv < D else 2) * B * S * Hkv * D * q.element_size() / 1e9

    def ours(var, m=None):
        os.environ["FFPA_DEV_WS"] = var
        if m is None:
            return ffpa_attn.decode(q, k, v)
        return ffpa_attn.forward(qs, ks, vs, attn_mask=m, enable_gqa=Hq != Hkv)

    def sdpa(m=None):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
            return F.scaled_dot_product_attention(qs, ks, vs, attn_mask=m, enable_gqa=Hq != Hkv)
    splits = [int(x) for x in os.environ.get("SPLITS", "").split(",") if x]
    has_sdpa = Dv == D and D <= 256
    cases = [(None, "")] + ([(mask, " masked")] if masked and has_sdpa else [])
    for m, tag in cases:
        names = [f"v{var}" for var in variants] + ([f"s{n}" for n in splits] if m is None else [])
        fns = [lambda var=var, m=m: ours(var, m) for var in variants]
        if m is None:
            fns += [lambda n=n: (os.environ.__setitem__("FFPA_DEV_WS", "0"), ffpa_attn.decode(q, k, v, num_splits=n))[1]
                    for n in splits]
        if has_sdpa:
            fns.append(lambda m=m: sdpa(m))
            names.append("sdpa")
        t = _time_interleaved(fns, 10, 60, flush=flush)
        row = " ".join(f"{name}={gb / (x * 1e-3):6.0f}" for name, x in zip(names, t))
        print(f"B{B} S{S} {Hq}/{Hkv} D{D}/{Dv}{tag}: GB/s {row} | us {' '.join(f'{x * 1e3:.1f}' for x in t)}", flush=True)
