"""Development workload for profilers: a few ffpa_attn.decode calls on one shape (bf16). Args: B S Hq Hkv D
Dv paged (MLA when D != Dv: v is a view of k). Used by decode_probe.sh and ncu_decode.sh."""
import sys

import torch

import ffpa_attn

B, S, Hq, Hkv, D, Dv, paged = [int(x) for x in sys.argv[1:8]]
k = torch.randn(B, S, Hkv, D, device="cuda", dtype=torch.bfloat16)
v = k[..., :Dv] if D != Dv else torch.randn(B, S, Hkv, Dv, device="cuda", dtype=torch.bfloat16)
q = torch.randn(B, 1, Hq, D, device="cuda", dtype=torch.bfloat16)
table = None
if paged:
    k = k.view(B * S // 64, 64, Hkv, D)
    v = k[..., :Dv] if D != Dv else v.reshape(B * S // 64, 64, Hkv, Dv)
    table = torch.randperm(B * S // 64, device="cuda").view(B, -1).int()
for _ in range(3):
    ffpa_attn.decode(q, k, v, block_table=table)
torch.cuda.synchronize()
