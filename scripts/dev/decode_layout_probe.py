"""Development probe (session 51): does the cache's memory order move the split decode kernel's streaming rate? The
same decode call on the serving layout (B, S, Hkv, D: a key's heads side by side, so one head's keys are Hkv x D x 2
bytes apart) and on head-major memory (B, Hkv, S, D, each head's keys contiguous) passed as a (B, S, Hkv, D) view;
SDPA cuDNN / flash on (B, Hkv, S, D) views of both. Bench's interleaved timer (L2 flushed, medians), GB/s of K/V
covered beside the copy ceiling of the same run. Args: shapes BxSxHqxHkvxD."""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import ffpa_attn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from bench_timing import l2_flusher, time_interleaved  # noqa: E402

flush = l2_flusher()
src = torch.empty(2**29, dtype=torch.uint8, device="cuda")
dst = torch.empty_like(src)
ms = time_interleaved([lambda: dst.copy_(src)], 10, 300, flush)[0]
copy = 2 * src.numel() / (ms * 1e-3) / 1e9
print(f"{torch.cuda.get_device_name()}: copy ceiling {copy:.0f} GB/s")
for shape in sys.argv[1:] or ["1x131072x32x8x64", "1x131072x32x8x128", "8x32768x32x8x64"]:
    B, S, Hq, Hkv, D = (int(x) for x in shape.split("x"))
    q = torch.randn(B, 1, Hq, D, device="cuda", dtype=torch.bfloat16)
    serving = [torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    headmajor = [torch.randn(B, Hkv, S, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2) for _ in range(2)]
    nbytes = 2 * B * S * Hkv * D * 2
    qs = q.transpose(1, 2)

    def ours(kv):
        return lambda: ffpa_attn.decode(q, kv[0], kv[1])

    def sdpa(kv, backend):
        def f():
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(qs, kv[0].transpose(1, 2), kv[1].transpose(1, 2), enable_gqa=True)
        return f

    ref = [sdpa(serving, SDPBackend.FLASH_ATTENTION)().transpose(1, 2), sdpa(headmajor, SDPBackend.FLASH_ATTENTION)().transpose(1, 2)]
    for kv, r in zip((serving, headmajor), ref):
        err = (ours(kv)().float() - r.float()).abs().max().item()
        assert err < 2e-2, err
    names = ["ours serving", "ours head-major", "cudnn serving", "cudnn head-major", "flash serving", "flash head-major"]
    fns = [ours(serving), ours(headmajor), sdpa(serving, SDPBackend.CUDNN_ATTENTION), sdpa(headmajor, SDPBackend.CUDNN_ATTENTION),
           sdpa(serving, SDPBackend.FLASH_ATTENTION), sdpa(headmajor, SDPBackend.FLASH_ATTENTION)]
    ts = time_interleaved(fns, 20, 400, flush)
    cells = ", ".join(f"{n} {1e3 * t:.1f} us {nbytes / (t * 1e-3) / 1e9 / copy:.3f}x" for n, t in zip(names, ts))
    print(f"{shape}: {cells}", flush=True)
