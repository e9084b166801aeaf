"""Dev probe for A/B across builds (run it alternately under two PYTHONPATHs, ABAB): the median time of
ffpa_attn.decode on one shape, L2 flushed before each call (bench's timer), contiguous or with the
bench's per-sequence lengths, PAGE=n: a shuffled page pool of n-key pages.
Usage: SHAPE=128x4096x128x1x576x512 VARLEN=0 PAGE=0 python3 scripts/dev/decode_time_one.py"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_timing import l2_flusher, time_interleaved  # noqa: E402

import ffpa_attn  # noqa: E402

B, S, Hq, Hkv, D, Dv = (int(x) for x in os.environ.get("SHAPE", "128x4096x128x1x576x512").split("x"))
varlen = os.environ.get("VARLEN", "0") == "1"
g = torch.Generator(device="cuda").manual_seed(B * S)
k = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16, generator=g)
v = k[..., :Dv] if Dv < D else torch.randn(B, S, Hkv, Dv, device="cuda", dtype=torch.bfloat16, generator=g)
q = torch.randn(B, 1, Hq, D, device="cuda", dtype=torch.bfloat16, generator=g)
lens = torch.randint(S // 2, S + 1, (B,), generator=torch.Generator().manual_seed(B * S)).tolist() if varlen else [S] * B
seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda") if varlen else None
page = int(os.environ.get("PAGE", "0"))
table = None
if page:
    n = B * S // page
    perm = torch.randperm(n, device="cuda", generator=g)
    pool = torch.empty(n, page, Hkv, D, device="cuda", dtype=k.dtype)
    pool[perm] = k.reshape(n, page, Hkv, D)
    vpool = pool[..., :Dv] if Dv < D else torch.empty(n, page, Hkv, Dv, device="cuda", dtype=k.dtype)
    if Dv == D:
        vpool[perm] = v.reshape(n, page, Hkv, Dv)
    k, v, table = pool, vpool, perm.view(B, -1).to(torch.int32)
ms = time_interleaved([lambda: ffpa_attn.decode(q, k, v, cache_seqlens=seqlens, block_table=table)], 50, 300,
                      l2_flusher())[0]
flops = 2.0 * Hq * sum(lens) * (D + Dv)
nbytes = sum(lens) * Hkv * (D if Dv < D else D + Dv) * q.element_size()
print(f"{os.environ.get('TAG', '')} {B}x{S}x{Hq}x{Hkv}x{D}x{Dv} varlen={int(varlen)} page={page}: {ms * 1e3:.1f} us "
      f"{nbytes / ms / 1e6:.0f} GB/s {flops / ms / 1e9:.0f} TFLOPS", flush=True)
