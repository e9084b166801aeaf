"""Development probe: the 128-head MLA decode shape (B=128, S=4096, 128/1, 576/512, V = K[..., :512])
on a contiguous cache against page pools of 64, 128 and 256 keys, pages in order or shuffled
(interleaved CUDA-event medians, L2 evicted before each call): what the paged cache costs and whether
it depends on the page size or the pages' order."""
import os
import sys

import torch

import ffpa_attn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench import _l2_flusher, _time_interleaved  # noqa: E402

B, S, Hq, Hkv, D, Dv = (int(x) for x in os.environ.get("SHAPE", "128,4096,128,1,576,512").split(","))
g = torch.Generator(device="cuda").manual_seed(0)
k = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16, generator=g)
q = torch.randn(B, 1, Hq, D, device="cuda", dtype=torch.bfloat16, generator=g)
cases = {"contiguous": (k, k[..., :Dv], None)}
for page in (64, 128, 256):
    for shuffle in (False, True):
        n = B * (S // page)
        perm = torch.randperm(n, device="cuda", generator=g) if shuffle else torch.arange(n, device="cuda")
        pool = torch.empty(n, page, Hkv, D, device="cuda", dtype=torch.bfloat16)
        pool[perm] = k.reshape(n, page, Hkv, D)
        cases[f"paged{page}{' shuffled' if shuffle else ''}"] = (pool, pool[..., :Dv], perm.view(B, -1).to(torch.int32))
want = ffpa_attn.decode(q, k, k[..., :Dv])
fns = []
for name, (kk, vv, t) in cases.items():
    got = ffpa_attn.decode(q, kk, vv, block_table=t)
    assert (got.float() - want.float()).abs().max().item() < 1e-2, name
    fns.append(lambda kk=kk, vv=vv, t=t: ffpa_attn.decode(q, kk, vv, block_table=t))
flops = 2.0 * Hq * B * S * (D + Dv)
for rnd in range(2):
    times = _time_interleaved(fns, 20, 150, flush=_l2_flusher())
    print(f"round {rnd}: " + ", ".join(f"{n} {ms:.3f} ms {flops / ms / 1e9:.0f} TFLOPS ({times[0] / ms:.2f})"
                                     for n, ms in zip(cases, times)), flush=True)
