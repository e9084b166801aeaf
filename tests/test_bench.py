"""CPU-only tests for bench/bench.py, bench_cli.py and bench_report.py (tables, FLOP accounting,
masks, presets, CLI help, the timer, what auto ran); plotting and the extras: test_bench_plot.py."""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from _bench_helpers import (  # noqa: F401  (some names are used by one file only)
    B, BASE_MS, BENCH_PY, DEVICE, DIMS, FA2_DIMS, FA2_SPEED, HKV, HQ, KERNEL_SPEED, L, MISSING, PNG_MAGIC, REPO, S,
    _fa2_synthetic, _find, _row, _synthetic, bench, needs_matplotlib,
)
# ---------------------------------------------------------------- FLOPs
def test_causal_pairs_L_ne_S():
    assert bench.causal_pairs(3, 5) == 1 + 2 + 3
    assert bench.causal_pairs(5, 3) == 1 + 2 + 3 + 3 + 3
    assert bench.causal_pairs(4, 4) == 10
    for Lq in range(1, 9):
        for Sk in range(1, 9):
            assert bench.causal_pairs(Lq, Sk) == sum(min(i + 1, Sk) for i in range(Lq))


def test_tflops_helper():
    # non-causal: 2*B*H*L*S*(D+Dv)
    assert bench.attn_flops(2, 4, 3, 5, 64, 32, False) == 2 * 2 * 4 * 15 * 96
    # causal uses the exact pair count, L != S both ways
    assert bench.attn_flops(1, 1, 3, 5, 8, 8, True) == 2 * 6 * 16
    assert bench.attn_flops(1, 1, 5, 3, 8, 8, True) == 2 * 12 * 16
    ms = 2.0
    expect = 2 * 1 * 2 * 12 * (16 + 16) / (ms * 1e-3) / 1e12
    assert bench.compute_tflops(1, 2, 5, 3, 16, 16, True, ms) == pytest.approx(expect)


# ---------------------------------------------------------------- tables
def test_make_tables_content():
    data = _synthetic()
    tables = bench.make_tables(data)
    assert set(tables) == {"bench_bf16", "bench_bf16_causal", "bench_fp16", "bench_fp16_causal"}
    for name, md in tables.items():
        dtype = name.split("_")[1]
        causal = name.endswith("_causal")
        assert DEVICE in md
        assert f"dtype: {dtype}" in md
        assert f"causal: {causal}" in md
        assert f"B={B} H={HQ} Hkv={HKV} L={L} S={S}" in md
        assert data["date"] in md
        for D in DIMS:
            assert f"D={D}" in md
        for kernel, lab in (("sdpa_efficient", "SDPA EA"), ("ffpa_l1", "FFPA L1"),
                            ("ffpa_auto", "FFPA auto")):
            cells = _row(md, lab)
            assert len(cells) == len(DIMS)
            for D, cell in zip(DIMS, cells):
                r = _find(data, kernel, dtype, causal, D)
                assert cell == ("-" if r is None else f"{r['tflops']:.1f}")
        for kernel, lab in (("ffpa_l1", "FFPA L1"), ("ffpa_auto", "FFPA auto")):
            cells = _row(md, f"{lab} speedup vs SDPA EA")
            for D, cell in zip(DIMS, cells):
                r = _find(data, kernel, dtype, causal, D)
                base = _find(data, "sdpa_efficient", dtype, causal, D)
                if r is None:
                    assert cell == "-"
                else:
                    assert cell == f"{r['tflops'] / base['tflops']:.2f}x"
    # spot-check the concrete speedup strings and the missing cell
    assert _row(tables["bench_bf16"], "FFPA L1 speedup vs SDPA EA") == ["1.50x"] * 3
    assert _row(tables["bench_bf16"], "FFPA auto speedup vs SDPA EA") == ["1.37x"] * 3
    assert _row(tables["bench_fp16_causal"], "FFPA L1")[-1] == "-"
    assert _row(tables["bench_fp16_causal"], "FFPA L1 speedup vs SDPA EA")[-1] == "-"
    # rows only for kernels that ran
    assert "SDPA FA" not in tables["bench_bf16"]
    assert "FFPA L2" not in tables["bench_bf16"]


def test_table_marks_failed_check():
    data = _synthetic()
    r = _find(data, "ffpa_l1", "bf16", False, 512)
    r.update(check_ok=False, max_abs_err=0.5, rel_err=0.1)
    md = bench.make_tables(data)["bench_bf16"]
    cells = _row(md, "FFPA L1")
    assert cells[1] == f"{r['tflops']:.1f}{bench.FAIL_MARK}"
    assert "check failed" in md


# ---------------------------------------------------------------- plots
def _assert_png(path):
    assert os.path.isfile(path)
    with open(path, "rb") as f:
        head = f.read(8)
    assert head == PNG_MAGIC
    assert os.path.getsize(path) > 5000


@needs_matplotlib
def test_make_plots(tmp_path):
    paths = bench.make_plots(_synthetic(), str(tmp_path))
    names = {os.path.basename(p) for p in paths}
    for tag in ("bf16", "bf16_causal", "fp16", "fp16_causal"):
        assert f"speedup_{tag}.png" in names
        assert f"tflops_{tag}.png" in names
    for p in paths:
        _assert_png(p)


# ---------------------------------------------------------------- CLI
def _run(args, **kw):
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = ""  # force "no GPU" even on a GPU box
    env["MPLBACKEND"] = "Agg"
    return subprocess.run([sys.executable, BENCH_PY] + args, cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=180, **kw)


@needs_matplotlib
def test_from_json_cli_roundtrip(tmp_path):
    jpath = tmp_path / "results.json"
    jpath.write_text(json.dumps(_synthetic()))
    out = tmp_path / "out"
    proc = _run(["--from-json", str(jpath), "--gen-bench", "--plot", "--out-dir", str(out)])
    assert proc.returncode == 0, proc.stderr
    for tag in ("bf16", "bf16_causal", "fp16", "fp16_causal"):
        md = out / f"bench_{tag}.md"
        assert md.is_file()
        assert DEVICE in md.read_text()
        _assert_png(str(out / f"speedup_{tag}.png"))
        _assert_png(str(out / f"tflops_{tag}.png"))
    assert DEVICE in proc.stdout  # table printed too


def test_no_gpu_exits_2():
    proc = _run(["--quick"])
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "no CUDA GPU" in proc.stderr
    assert "--from-json" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_table_marks_gqa_expanded():
    data = _synthetic()
    r = _find(data, "sdpa_efficient", "bf16", True, 320)
    r["gqa_expanded"] = True
    md = bench.make_tables(data)["bench_bf16_causal"]
    assert _row(md, "SDPA EA")[0] == f"{r['tflops']:.1f}{bench.EXPAND_MARK}"
    assert "pre-expanded" in md
    # speedup still computed from the numbers
    ours = _find(data, "ffpa_l1", "bf16", True, 320)
    assert _row(md, "FFPA L1 speedup vs SDPA EA")[0] == f"{ours['tflops'] / r['tflops']:.2f}x"


# ---------------------------------------------------------------- FA-2 rows, masks, presets
def test_fa2_rows_show_ratios_vs_flash_and_efficient():
    md = bench.make_tables(_fa2_synthetic())["bench_bf16"]
    for lab in ("SDPA FA", "SDPA EA", "SDPA cuDNN", "FA2 (ours)"):
        assert len(_row(md, lab)) == len(FA2_DIMS)
    assert _row(md, "FA2 (ours) speedup vs SDPA FA") == ["1.20x"] * 3
    assert _row(md, "FA2 (ours) speedup vs SDPA EA") == ["1.50x"] * 3
    assert _row(md, "FA2 (ours) speedup vs SDPA cuDNN") == [f"{1.2 / 1.1:.2f}x"] * 3
    assert "mask: none" in md and "mask blocksparse" not in md


def test_speedup_rows_without_a_shared_head_dim_are_dropped():
    md = bench.make_tables(_fa2_synthetic(extra_l1=True))["bench_bf16"]
    assert _row(md, "FA2 (ours) speedup vs SDPA FA") == ["1.20x"] * 3 + ["-"]
    assert _row(md, "FFPA L1 speedup vs SDPA EA") == ["-"] * 3 + [f"{1.3 / 0.8:.2f}x"]
    assert "FFPA L1 speedup vs SDPA FA" not in md  # SDPA FA has no D > 256


def test_mask_results_get_their_own_tables_and_note():
    data = _fa2_synthetic()
    data["results"] += _fa2_synthetic(mask="blocksparse")["results"]
    tables = bench.make_tables(data)
    assert set(tables) == {"bench_bf16", "bench_bf16_blocksparse"}
    md = tables["bench_bf16_blocksparse"]
    assert md.startswith("### bf16, mask blocksparse")
    assert "mask: blocksparse" in md and "dense flops" in md and "time ratios" in md
    assert "dense flops" not in tables["bench_bf16"]


@needs_matplotlib
def test_make_plots_speedup_vs_flash(tmp_path):
    paths = {os.path.basename(p) for p in bench.make_plots(_fa2_synthetic(mask="blocksparse"), str(tmp_path))}
    assert paths == {"tflops_bf16_blocksparse.png", "speedup_bf16_blocksparse.png",
                     "speedup_vs_fa_bf16_blocksparse.png", "speedup_vs_cudnn_bf16_blocksparse.png"}
    for p in paths:
        _assert_png(str(tmp_path / p))


@pytest.mark.parametrize("L,S", [(512, 512), (300, 520), (520, 300), (1000, 100), (100, 1000), (1, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_blocksparse_mask(L, S, causal):
    import torch

    m = bench.blocksparse_mask(L, S, causal=causal)
    assert m.shape == (1, 1, L, S) and m.dtype == torch.bool
    keep = m[0, 0]
    assert keep.any(-1).all(), "a row with no key"
    i = torch.arange(L).unsqueeze(-1) // 128
    j = torch.arange(S) // 128
    checker = (i + j) % 2 == 0
    off = ~checker & (j != i.clamp(max=(S - 1) // 128))
    assert not (keep & off).any()  # the other blocks masked, except the diagonal ones
    if causal:
        assert not (keep & (torch.arange(S) > torch.arange(L).unsqueeze(-1))).any()
    else:
        assert keep[checker].all()  # the checkerboard blocks kept
    if (L, S) == (512, 512) and not causal:
        assert keep.float().mean().item() == 0.5  # half the blocks masked


def test_fa2_preset_and_shapes():
    args = bench.resolve_args(bench.build_parser().parse_args(["--preset", "fa2"]))
    assert args.shapes == [(1, 32, 32, 8192, 8192), (8, 16, 16, 2048, 2048)]
    assert args.D == [32, 64, 96, 128, 160, 192, 224, 256]
    assert "fa2" in args.kernels and "sdpa_flash" in args.kernels and "sdpa_cudnn" in args.kernels
    assert args.mask == "none"
    args = bench.resolve_args(bench.build_parser().parse_args(["--preset", "fa2", "--D", "128", "--Hkv", "8"]))
    assert args.D == [128] and args.shapes == [(1, 32, 8, 8192, 8192), (8, 16, 8, 2048, 2048)]
    args = bench.resolve_args(bench.build_parser().parse_args(["--preset", "short"]))
    assert args.shapes == [(128, 12, 12, 197, 197), (64, 16, 16, 256, 256), (64, 16, 16, 257, 257)]
    assert args.D == [64, 96, 128]
    args = bench.resolve_args(bench.build_parser().parse_args(["--shapes", "2x4x100x300", "--mask", "blocksparse"]))
    assert args.shapes == [(2, 4, 4, 100, 300)] and args.mask == "blocksparse"
    args = bench.resolve_args(bench.build_parser().parse_args(["--H", "8", "--L", "10", "--S", "20"]))
    assert args.shapes == [(1, 8, 8, 10, 20)]
    with pytest.raises(SystemExit):
        bench.build_parser().parse_args(["--shapes", "1x2"])


def test_cli_rejects_bad_shape_and_gqa_without_gpu():
    proc = _run(["--shapes", "1x32x8192", "--Hkv", "5", "--mask", "blocksparse"])
    assert proc.returncode == 2 and "--Hkv" in proc.stderr
    proc = _run(["--shapes", "1xAx8192"])
    assert proc.returncode == 2 and "BxHxN" in proc.stderr


def test_from_json_roundtrip_with_mask(tmp_path):
    data = _fa2_synthetic(mask="blocksparse")
    jpath = tmp_path / "results.json"
    jpath.write_text(json.dumps(data))
    proc = _run(["--from-json", str(jpath), "--gen-bench", "--out-dir", str(tmp_path / "out")])
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "out" / "bench_bf16_blocksparse.md").read_text()
    assert "FA2 (ours) speedup vs SDPA FA" in md


def test_interleaved_timer_medians_and_shuffle(monkeypatch):
    """_time_interleaved on a fake clock: each kernel's median is its own duration even while
    the 'GPU' drifts slower over time, every round calls every kernel once with the flush
    before each call, and the order changes between rounds (no fixed predecessor)."""
    import torch

    clock = {"t": 0.0, "drift": 1.0}
    calls = []

    class FakeEvent:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = clock["t"]

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return other.t - self.t

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)

    def kernel(name, ms):
        def fn():
            calls.append(name)
            clock["t"] += ms * clock["drift"]
            clock["drift"] *= 1.0001  # slowly heating up
        return fn

    def flush():
        calls.append("flush")
        clock["t"] += 0.5  # untimed: outside every kernel's event pair

    fns = [kernel("a", 2.0), kernel("b", 1.0), kernel("c", 4.0)]
    times = bench._time_interleaved(fns, warmup_ms=10, iters_ms=40, flush=flush)
    assert [round(t, 1) for t in times] == [2.0, 1.0, 4.0], times
    warm = 3 + 5 + 10 + 2  # one estimate call each, then 10 ms of warm-up each (2.5 -> 2 calls)
    assert calls[:warm] == ["a", "b", "c"] + ["a"] * 5 + ["b"] * 10 + ["c"] * 2
    timed = calls[warm:]
    assert timed[0::2] == ["flush"] * (len(timed) // 2)  # a flush before every timed call
    seq = timed[1::2]
    rounds = len(seq) // 3
    assert rounds >= bench.MIN_ROUNDS and len(seq) == 3 * rounds
    orders = {tuple(seq[3 * r: 3 * r + 3]) for r in range(rounds)}
    assert all(sorted(o) == ["a", "b", "c"] for o in orders)
    assert len(orders) > 1, orders  # shuffled, not one fixed order
    assert bench._time_interleaved([], 10, 40) == []


# ---------------------------------------------------------------- CLI help, plot dependencies
def _help_texts():
    """{flag: help text as --help prints it (the formatter's own additions included)}."""
    parser = bench.build_parser()
    fmt = parser._get_formatter()
    return {a.option_strings[0]: fmt._expand_help(a) if a.help else a.help
            for a in parser._actions if not isinstance(a, argparse._HelpAction)}


def test_help_documents_every_flag_with_one_default():
    texts = _help_texts()
    assert {"--out-dir", "--seed", "--dtype", "--kernels", "--plot"} <= set(texts)
    parser = bench.build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        flag = action.option_strings[0]
        text = texts[flag]
        assert text and text.strip(), f"{flag} has no help"
        assert "None" not in text, (flag, text)
        n = text.lower().count("default")
        if action.nargs == 0:  # on/off flags: no default needed, never two
            assert n <= 1, (flag, text)
        else:  # flags taking a value name their effective default exactly once
            assert n == 1, (flag, text)
    assert "(default: 1)" in texts["--B"]
    assert f"(default: {os.path.join('bench', 'out')})" in texts["--out-dir"]
    assert "(default: 0)" in texts["--seed"]
    assert "(default: bf16)" in texts["--dtype"]
    for k in bench.SDPA_KERNELS + bench.OUR_KERNELS + list(bench.OUR_VARIANTS):
        assert re.search(rf"(?<![\w]){k}(?![\w])", texts["--kernels"]), (k, texts["--kernels"])
    assert "fa2_sync" in texts["--kernels"]


def test_help_output_has_no_doubled_defaults():
    proc = _run(["--help"])
    assert proc.returncode == 0, proc.stderr
    assert "(default: None)" not in proc.stdout
    assert ") (default" not in proc.stdout
    assert "fa2_sync" in proc.stdout and "--out-dir DIR" in proc.stdout


# ---------------------------------------------------------------- decode table
def _load_bench_decode():
    sys.path.insert(0, os.path.dirname(BENCH_PY))  # bench_decode imports bench_timing beside it
    try:
        spec = importlib.util.spec_from_file_location("ffpa_bench_decode_under_test",
                                                      os.path.join(os.path.dirname(BENCH_PY), "bench_decode.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.pop(0)


def test_decode_table_reports_the_model_probe_or_its_failure():
    """bench_decode.make_table: the decode rows against SDPA's best, the Hugging Face probe's line, and a
    failed probe (recorded by run() as an hf_llama_failed row, the sweep then exiting 1) said as FAILED
    with its error instead of losing the table."""
    bd = _load_bench_decode()
    cell = dict(dtype="bf16", B=8, S=32768, Hq=32, Hkv=8, D=128, Dv=128, Lq=1, causal=False, page_size=0, varlen=False)
    rows = [{"kernel": "copy_ceiling", "gbps": 4000.0}, {"kernel": "gemm_ceiling", "tflops": 800.0},
            dict(cell, kernel="ffpa_decode", gbps=3900.0, tflops=16.0), dict(cell, kernel="sdpa_cudnn", gbps=4100.0)]
    data = {"device": "H200 (synthetic)", "date": "2026-11-26", "torch": "2.11", "rows": rows}
    md = bd.make_table(data)
    assert "| bf16 | 8 | 32768 | 32/8 | 128/128 | 1 | contiguous | 3900 (0.97) | 16 | - | 4100 | 0.95x |" in md
    assert "Hugging Face" not in md
    ok = {"kernel": "hf_llama", "layers": 4, "Hq": 32, "Hkv": 8, "D": 128, "B": 4, "prompt": 1024, "rounds": 5,
          "sdpa_ms_per_token": 3.3, "ffpa_ms_per_token": 3.13}
    assert "3.30 ms per token with SDPA, 3.13 ms under ffpa_attn.sdpa_patched()" in bd.make_table(dict(data, rows=rows + [ok]))
    failed = {"kernel": "hf_llama_failed", "error": "RuntimeError: Detected 1 tensor(s) in the cudagraph pool"}
    md = bd.make_table(dict(data, rows=rows + [failed]))
    assert "Hugging Face Llama-style model: FAILED (RuntimeError: Detected 1 tensor(s) in the cudagraph pool)." in md
    assert "3900 (0.97)" in md
    # a compute-bound cell times the GEMM again right after its calls: TFLOPS against that GEMM, the run's first
    # GEMM still named as the start's
    mla = dict(cell, B=128, S=4096, Hq=128, Hkv=1, D=576, Dv=512)
    md = bd.make_table(dict(data, rows=rows + [dict(mla, kernel="ffpa_decode", gbps=2000.0, tflops=480.0),
                                               dict(mla, kernel="gemm_ceiling", tflops=750.0)]))
    assert "bf16 GEMM ceiling 800 TFLOPS at the run's start" in md
    assert "| bf16 | 128 | 4096 | 128/1 | 576/512 | 1 | contiguous | 2000 (0.50) | 480 (0.64x: 750) | - | - | - |" in md


def test_l2_flusher_modes(monkeypatch):
    """bench_timing.l2_flusher: 'read' (default) or 'write' (the memset flush before session 28), from
    the argument or FFPA_BENCH_FLUSH; anything else is a ValueError naming both, checked before any
    CUDA work (None without a GPU)."""
    import torch

    monkeypatch.syspath_prepend(os.path.dirname(BENCH_PY))
    import bench_timing

    monkeypatch.delenv("FFPA_BENCH_FLUSH", raising=False)
    with pytest.raises(ValueError, match=r"FFPA_BENCH_FLUSH / mode: expected 'read' or 'write', got 'memset'"):
        bench_timing.l2_flusher("memset")
    monkeypatch.setenv("FFPA_BENCH_FLUSH", "evict")
    with pytest.raises(ValueError, match="got 'evict'"):
        bench_timing.l2_flusher()
    for mode in ("read", "write"):
        monkeypatch.setenv("FFPA_BENCH_FLUSH", mode)
        flush = bench_timing.l2_flusher()
        assert (flush is None) == (not torch.cuda.is_available())
