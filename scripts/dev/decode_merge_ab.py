"""Dev A/B of the split-KV merge's two forms (ffpa_attn._C.set_decode_merge: "kernel" = the second
kernel, "fused" = the last split block of each row block merges, "auto" = the launcher's heuristic, launch/heuristics.h decode_fused_merge; on a build
without the setter the one mode "base") beside SDPA's best backend: the bench's interleaved timer (L2
flushed, medians); GB/s of K/V covered and us per call. Shapes 'B,S,Hq,Hkv[,D[,Dv]]' (bf16, Lq 1,
contiguous; D/Dv 576/512 is MLA's single cache, V a view of K, no SDPA). MASKED=1 adds forward() with a
(B, 1, 1, S) key-padding mask (the Hugging Face static cache's step; the merge modes apply there too).
SPLITS="2,4,8": each mode also at those forced counts (default: the auto count only). VARLEN=1: per-sequence
lengths drawn in [S/2, S] (cache_seqlens, as the bench's varlen cells; GB/s of the keys they cover).
MODES="kernel,spread": the modes timed (set_decode_merge).
Usage: SHAPES="8,32768,32,8 16,16384,16,1,576,512" MASKED=1 python3 scripts/dev/decode_merge_ab.py"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_timing import l2_flusher, time_interleaved  # noqa: E402

import ffpa_attn  # noqa: E402
import ffpa_attn._C as C  # noqa: E402

HAS_MODES = hasattr(C, "set_decode_merge")
MODES = os.environ.get("MODES", "kernel,fused,auto" if HAS_MODES else "base").split(",")


def set_mode(mode):
    if HAS_MODES:
        C.set_decode_merge("auto" if mode == "base" else mode)


DEFAULT = ("8,32768,32,8 64,8192,32,8 1,131072,32,8 4,1056,32,32 4,1056,32,8 32,1024,32,8 32,8192,32,8,256,256 "
           "16,8192,64,8,512,512 16,16384,16,1,576,512 32,8192,32,1,576,512")
shapes = [tuple(int(x) for x in s.split(",")) for s in os.environ.get("SHAPES", DEFAULT).split()]
BUILT = {tuple(p) for p in ffpa_attn.build_info()["head_dim_pairs"].get("decode", [])}
skipped = [s for s in shapes if ((s[4], s[5] if len(s) > 5 else s[4]) if len(s) > 4 else (128, 128)) not in BUILT]
shapes = [s for s in shapes if s not in skipped]
masked = os.environ.get("MASKED", "0") == "1"
splits = [None] + [int(x) for x in os.environ.get("SPLITS", "").split(",") if x]
flush = l2_flusher()
dt = torch.bfloat16
print(torch.cuda.get_device_name(), "modes", MODES, "| not built, skipped:", skipped, flush=True)
for shape in shapes:
    B, S, Hq, Hkv = shape[:4]
    D = shape[4] if len(shape) > 4 else 128
    Dv = shape[5] if len(shape) > 5 else D
    mla = Dv < D
    g = torch.Generator(device="cuda").manual_seed(B * S + D)
    q = torch.randn(B, 1, Hq, D, device="cuda", dtype=dt, generator=g)
    k = torch.randn(B, S, Hkv, D, device="cuda", dtype=dt, generator=g)
    v = k[..., :Dv] if mla else torch.randn(B, S, Hkv, Dv, device="cuda", dtype=dt, generator=g)
    qs, ks, vs = (t.transpose(1, 2) for t in (q, k, v))  # SDPA layout views
    mask = torch.ones(B, 1, 1, S, device="cuda", dtype=torch.bool)
    mask[..., S - 17:] = False
    lens = None
    if os.environ.get("VARLEN", "0") == "1":
        lens = torch.randint(S // 2, S + 1, (B,), device="cuda", dtype=torch.int32, generator=g)
    keys = B * S if lens is None else int(lens.sum())
    gb = keys * Hkv * (D + (0 if mla else Dv)) * q.element_size() / 1e9

    def ours(mode, n, m=None):
        set_mode(mode)
        if m is None:
            return ffpa_attn.decode(q, k, v, cache_seqlens=lens, num_splits=n)
        return ffpa_attn.forward(qs, ks, vs, attn_mask=m, enable_gqa=Hq != Hkv)

    def sdpa(m=None):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
            return F.scaled_dot_product_attention(qs, ks, vs, attn_mask=m, enable_gqa=Hq != Hkv)

    for m, tag in [(None, "")] + ([(mask, " masked")] if masked and not mla else []):
        names, fns = [], []
        for n in splits if m is None else [None]:
            for mode in MODES:
                names.append(f"{mode}{'' if n is None else n}")
                fns.append(lambda mode=mode, n=n, m=m: ours(mode, n, m))
        if D <= 256:
            names.append("sdpa")
            fns.append(lambda m=m: sdpa(m))
        t = time_interleaved(fns, 10, 60, flush=flush)
        set_mode("base")
        row = " ".join(f"{name}={gb / (x * 1e-3):6.0f}" for name, x in zip(names, t))
        us = " ".join(f"{name}={x * 1e3:.1f}" for name, x in zip(names, t))
        print(f"B{B} S{S} {Hq}/{Hkv} D{D}/{Dv}{tag}: GB/s {row} | us {us}", flush=True)
set_mode("base")
