"""Development probe: the Hugging Face static cache's attention call as the model makes it. transformers
repeats the K/V heads (`repeat_kv`, a copy) right before the call, so part of what the call reads is still
in L2: how much a kernel gains from that depends on the order it reads in. Times the call (CUDA events,
interleaved rounds, medians) after a fresh repeat ("warm") and after the repeat plus an L2 flush ("cold"):
forward() (ours), SDPA's default and cuDNN. (Session 25 ran it with a temporary switch, FFPA_DEV_WS=1, for the
decode kernels' block order; since then the kernels take their blocks in reverse order always,
kernels/decode_grid.cuh, and "ffpa reversed" reads as "ffpa" on builds without the switch.)
Env: SHAPES 'B,S;..' (32/8 heads repeated to 32/32, D = 128, bf16, one query row, (B, 1, 1, S) bool mask)."""
import os
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import ffpa_attn

torch.manual_seed(0)
dev, dt = "cuda", torch.bfloat16
Hq, Hkv, D = 32, 8, 128
G = Hq // Hkv
shapes = [tuple(int(x) for x in s.split(",")) for s in os.environ.get("SHAPES", "4,1056;8,2080;1,4128").split(";")]
flush_buf = torch.empty(512 << 20, dtype=torch.uint8, device=dev)
rounds = int(os.environ.get("ROUNDS", "40"))


def sdpa_cudnn(q, k, v, m):
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)


def ours(rev):
    def fn(q, k, v, m):
        os.environ["FFPA_DEV_WS"] = "1" if rev else "0"
        return ffpa_attn.forward(q, k, v, attn_mask=m)
    return fn


fns = {
    "ffpa": ours(False),
    "ffpa reversed": ours(True),
    "sdpa": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
    "sdpa cudnn": sdpa_cudnn,
}

for B, S in shapes:
    kb = torch.randn(B, Hkv, S, D, device=dev, dtype=dt)
    vb = torch.randn(B, Hkv, S, D, device=dev, dtype=dt)
    q = torch.randn(B, Hq, 1, D, device=dev, dtype=dt)
    valid = S - 31
    for masked in (True, False):
        m = None
        if masked:
            m = torch.zeros(B, 1, 1, S, device=dev, dtype=torch.bool)
            m[..., :valid] = True

        def rep(t):
            return t[:, :, None].expand(B, Hkv, G, S, D).reshape(B, Hq, S, D)

        ref = F.scaled_dot_product_attention(q.double(), rep(kb).double(), rep(vb).double(), attn_mask=m)
        for name, fn in fns.items():
            err = (fn(q, rep(kb), rep(vb), m).double() - ref).abs().max().item()
            assert err < 2e-2, (name, err)
        times = {(n, c): [] for n in fns for c in ("warm", "cold")}
        for r in range(rounds):
            for cold in (False, True):
                for name, fn in fns.items():
                    k, v = rep(kb), rep(vb)
                    if cold:
                        flush_buf.zero_()
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    fn(q, k, v, m)
                    b.record()
                    torch.cuda.synchronize()
                    if r >= 3:
                        times[(name, "cold" if cold else "warm")].append(a.elapsed_time(b) * 1e3)
        for c in ("warm", "cold"):
            print(f"B={B} S={S} 32/32 (repeated) {'masked' if masked else 'unmasked'} {c}: " +
                  "  ".join(f"{n} {statistics.median(times[(n, c)]):.1f}" for n in fns) + "  (us)")
os.environ.pop("FFPA_DEV_WS", None)
