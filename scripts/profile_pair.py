"""Profile helper (run under ncu on the device): one call each of SDPA's flash backend and our
FA-2 kernel on the same inputs, after one warm-up call each, so `ncu -k regex:...` can compare
them side by side.   python scripts/profile_pair.py D [B H N causal]"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import ffpa_attn

D = int(sys.argv[1])
B, H, N = (int(x) for x in (sys.argv[2:5] if len(sys.argv) > 4 else (1, 32, 4096)))
causal = len(sys.argv) > 5 and sys.argv[5] == "1"
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(2):
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    ffpa_attn.forward(q, k, v, is_causal=causal, strict=True)
torch.cuda.synchronize()
