"""Development workload for profilers: a few SDPA calls (one backend) on a decode shape (bf16, one
query row, GQA). Args: B S Hq Hkv D backend (cudnn | flash)."""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

B, S, Hq, Hkv, D = [int(x) for x in sys.argv[1:6]]
be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[sys.argv[6]]
k = torch.randn(B, Hkv, S, D, device="cuda", dtype=torch.bfloat16)
v = torch.randn(B, Hkv, S, D, device="cuda", dtype=torch.bfloat16)
q = torch.randn(B, Hq, 1, D, device="cuda", dtype=torch.bfloat16)
with sdpa_kernel(be):
    for _ in range(4):
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
torch.cuda.synchronize()
