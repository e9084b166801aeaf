"""Development probe (#17): the kernels one FP8 forward call launches and their device times (torch
profiler), against the call's time by CUDA events (L2 flushed, as the bench). Args: B H N D causal."""
import sys

import torch

import ffpa_attn

B, H, N, D, causal = (int(x) for x in (sys.argv[1:6] if len(sys.argv) > 5 else (4, 8, 8448, 512, 0)))
(q, qd), (k, kd), (v, vd) = (ffpa_attn.quantize_fp8(torch.randn(B, H, N, D, device="cuda")) for _ in range(3))
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def call():
    # with the descales: without them the scores are ~1e4 x too large and every tile takes the standing max's repair
    return ffpa_attn.forward(q, k, v, q_descale=qd, k_descale=kd, v_descale=vd, is_causal=bool(causal), strict=True)


for _ in range(3):
    call()
torch.cuda.synchronize()
ts = []
for _ in range(10):
    flush.zero_()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    call()
    e.record()
    e.synchronize()
    ts.append(s.elapsed_time(e))
ts.sort()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    for _ in range(5):
        call()
    torch.cuda.synchronize()
print(f"B={B} H={H} N={N} D={D} causal={causal}: call {ts[len(ts) // 2]:.3f} ms (median of 10)")
for ev in sorted(prof.key_averages(), key=lambda x: -x.device_time_total)[:8]:
    if ev.device_time_total > 0:
        print(f"  {ev.device_time_total / 5 / 1e3:8.3f} ms per call  x{ev.count / 5:.0f}  {ev.key[:100]}")
