"""Dev A/B of the order split-KV decode blocks take their sequences (ffpa_attn._C.set_decode_order:
'launch' against 'auto', which is longest first where csrc/launch/heuristics.h says so): the bench's
shapes with per-sequence lengths drawn as bench_decode.py draws them ([S/2, S], seeded by B x S),
contiguous or paged 64, both orders interleaved in one timer (L2 flushed, medians), GB/s of K/V
covered and TFLOPS as bench_decode.py counts them.
MODES (default "launch auto"): the orders to time, e.g. "launch longest balanced"; the last column is
each mode's largest difference from the first mode's output.
Usage: SHAPES="128x4096x128x1x576x512 64x8192x32x8x128" LAYOUTS="varlen paged_varlen" \\
       python3 scripts/dev/decode_order_ab.py"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from bench_decode import _caches, kv_bytes  # noqa: E402
from bench_timing import l2_flusher, time_interleaved  # noqa: E402

import ffpa_attn  # noqa: E402
import ffpa_attn._C as C  # noqa: E402

shapes = [tuple(int(x) for x in s.split("x")) for s in
          os.environ.get("SHAPES", "128x4096x128x1x576x512 64x8192x32x8x128x128").split()]
layouts = os.environ.get("LAYOUTS", "varlen paged_varlen").split()
dtypes = [getattr(torch, d) for d in os.environ.get("DTYPES", "bfloat16").split()]
modes = tuple(os.environ.get("MODES", "launch auto").split())
flush = l2_flusher()
print(torch.cuda.get_device_name(), flush=True)
for dt in dtypes:
    for B, S, Hq, Hkv, D, Dv in shapes:
        shared = Dv < D
        for layout in layouts:
            gen = torch.Generator(device="cuda").manual_seed(B * S)
            k, v, table, _ = _caches(torch, B, S, Hkv, D, Dv, dt, "paged64" if "paged" in layout else "contiguous",
                                     gen, shared)
            lens = torch.randint(S // 2, S + 1, (B,), generator=torch.Generator().manual_seed(B * S)).tolist()
            seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
            q = torch.randn(B, 1, Hq, D, device="cuda", dtype=dt, generator=gen)
            outs = {}

            def call(mode):
                C.set_decode_order(mode)
                outs[mode] = ffpa_attn.decode(q, k, v, cache_seqlens=seqlens, block_table=table)
                return outs[mode]
            times = time_interleaved([lambda m=m: call(m) for m in modes], 20, 200, flush)
            C.set_decode_order("auto")
            gb = kv_bytes(lens, Hkv, D, Dv, q.element_size(), shared) / 1e9
            flops = 2.0 * sum(lens) * Hq * (D + Dv)
            diff = [float((outs[m].float() - outs[modes[0]].float()).abs().max()) for m in modes]
            cells = []
            for m, ms in zip(modes, times):
                cells.append(f"{m} {ms * 1e3:8.1f} us {gb / ms * 1e3:7.0f} GB/s {flops / ms / 1e9:6.0f} TFLOPS")
            print(f"{str(dt)[6:]:8s} B={B} S={S} {Hq}/{Hkv} {D}/{Dv} {layout:13s} | " + " | ".join(cells)
                  + " | " + " ".join(f"{modes[0]}/{m} {times[0] / t:.3f}" for m, t in zip(modes[1:], times[1:]))
                  + f" | max diff {max(diff):.2e}",
                  flush=True)
            del k, v, table
