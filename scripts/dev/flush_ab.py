"""Development probe: the decode bench's cells under the two L2 flushes of bench_timing.l2_flusher
("write": a memset, the L2 left dirty; "read": a reduction, the L2 left clean), each in its own
bench_decode run on the same GPU, alternating W R W R. Args: bench_decode's (e.g. --shapes ..
--layouts contiguous --no-hf --no-latency); the summary prints each cell's x copy and ratio to SDPA."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import bench_decode  # noqa: E402

results = {}
for i, mode in enumerate(["write", "read", "write", "read"]):
    os.environ["FFPA_BENCH_FLUSH"] = mode
    out = tempfile.mkdtemp()
    bench_decode.main(sys.argv[1:] + ["--out-dir", out])
    rows = json.load(open(os.path.join(out, "decode.json")))["rows"]
    results[f"{mode}{i // 2}"] = rows
for name, rows in results.items():
    copy = next(r for r in rows if r["kernel"] == "copy_ceiling")["gbps"]
    print(f"== flush {name}: copy ceiling {copy:.0f} GB/s")
    for r in rows:
        if r["kernel"] in ("copy_ceiling", "gemm_ceiling"):
            continue
        print(f"  {r['kernel']:12s} B={r['B']} S={r['S']} {r['Hq']}/{r['Hkv']} D={r['D']}/{r['Dv']} "
              f"page={r['page_size']} varlen={r['varlen']}: {r['ms'] * 1e3:7.1f} us {r['gbps']:6.0f} GB/s "
              f"({r['gbps'] / copy:.3f} copy)")
