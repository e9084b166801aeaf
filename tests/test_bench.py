"""CPU-only tests for bench/bench.py, bench_cli.py, bench_report.py and bench_plot.py (table/plot
generation, FLOP accounting, masks, presets, CLI help, plot colours/titles/labels, what auto ran)."""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

# Plotting tests need the bench extra (pip install --no-build-isolation ".[bench]"); the README's
# install and CI bring it, so these run there.
needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                      reason='needs matplotlib: pip install --no-build-isolation ".[bench]"')

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_PY = os.path.join(REPO, "bench", "bench.py")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _load_bench():
    spec = importlib.util.spec_from_file_location("ffpa_bench_under_test", BENCH_PY)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bench = _load_bench()

DEVICE = "NVIDIA H100 80GB HBM3 (synthetic)"
B, HQ, HKV, L, S = 1, 32, 8, 4096, 4096
DIMS = [320, 512, 1024]
KERNEL_SPEED = {"sdpa_efficient": 1.0, "ffpa_l1": 1.5, "ffpa_auto": 1.37}
BASE_MS = {320: 10.0, 512: 16.0, 1024: 33.0}
MISSING = ("ffpa_l1", "fp16", True, 1024)  # (kernel, dtype, causal, D) left out


def _synthetic():
    results = []
    for dtype, dscale in (("bf16", 1.0), ("fp16", 0.9)):
        for causal in (False, True):
            for D in DIMS:
                for kernel, speed in KERNEL_SPEED.items():
                    if (kernel, dtype, causal, D) == MISSING:
                        continue
                    ms = BASE_MS[D] * dscale / speed * (0.55 if causal else 1.0)
                    results.append({
                        "kernel": kernel, "dtype": dtype, "B": B, "Hq": HQ, "Hkv": HKV,
                        "L": L, "S": S, "D": D, "Dv": D, "causal": causal, "ms": ms,
                        "tflops": bench.compute_tflops(B, HQ, L, S, D, D, causal, ms),
                    })
    return {"device": DEVICE, "torch": "2.11.0", "cuda": "12.8",
            "date": "2025-01-02T03:04:05", "args": {"B": B}, "results": results}


def _find(data, kernel, dtype, causal, D):
    for r in data["results"]:
        if (r["kernel"], r["dtype"], r["causal"], r["D"]) == (kernel, dtype, causal, D):
            return r
    return None


def _row(md, label):
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == label:
            return cells[1:]
    raise AssertionError(f"row {label!r} not found in:\n{md}")


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
FA2_DIMS = [64, 128, 256]
FA2_SPEED = {"sdpa_flash": 1.0, "sdpa_efficient": 0.8, "sdpa_cudnn": 1.1, "fa2": 1.2}


def _fa2_synthetic(mask=None, extra_l1=False):
    results = []
    for D in FA2_DIMS + ([512] if extra_l1 else []):
        for kernel, speed in FA2_SPEED.items():
            if D > 256 and kernel in ("sdpa_flash", "fa2"):
                continue
            ms = D / 64 / speed
            r = {"kernel": kernel, "dtype": "bf16", "B": 8, "Hq": 16, "Hkv": 16, "L": 2048,
                 "S": 2048, "D": D, "Dv": D, "causal": False, "ms": ms,
                 "tflops": bench.compute_tflops(8, 16, 2048, 2048, D, D, False, ms)}
            if mask is not None:
                r["mask"] = mask
            results.append(r)
        if extra_l1 and D > 256:
            ms = D / 64 / 1.3
            results.append({"kernel": "ffpa_l1", "dtype": "bf16", "B": 8, "Hq": 16, "Hkv": 16,
                            "L": 2048, "S": 2048, "D": D, "Dv": D, "causal": False, "ms": ms,
                            "tflops": bench.compute_tflops(8, 16, 2048, 2048, D, D, False, ms),
                            **({"mask": mask} if mask else {})})
    return {"device": DEVICE, "torch": "2.11.0", "cuda": "13.0", "date": "2026-01-02T03:04:05",
            "results": results}


def test_fa2_rows_show_ratios_vs_flash_and_efficient():
    md = bench.make_tables(_fa2_synthetic())["bench_bf16"]
    for lab in ("SDPA FA", "SDPA EA", "SDPA cuDNN", "FA2 (ours)"):
        assert len(_row(md, lab)) == len(FA2_DIMS)
    assert _row(md, "FA2 (ours) speedup vs SDPA FA") == ["1.20x"] * 3
    assert _row(md, "FA2 (ours) speedup vs SDPA EA") == ["1.50x"] * 3
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
                     "speedup_vs_fa_bf16_blocksparse.png"}
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


def test_plot_without_matplotlib_fails_at_parse_time(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    assert bench.missing_plot_deps() == ["matplotlib"]
    with pytest.raises(SystemExit) as e:
        bench.parse_args(["--quick", "--plot"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--plot needs matplotlib: pip install matplotlib" in err
    assert '".[bench]"' in err
    assert bench.parse_args(["--quick"]).plot is False  # no --plot, no check
    # main() stops at parsing: before reading the JSON or looking for a GPU
    with pytest.raises(SystemExit) as e:
        bench.main(["--from-json", str(tmp_path / "missing.json"), "--plot"])
    assert e.value.code == 2
    assert "--plot needs matplotlib" in capsys.readouterr().err
    # --from-json without --plot/--gen-bench: tables, and a note instead of the plots
    jpath = tmp_path / "results.json"
    jpath.write_text(json.dumps(_synthetic()))
    assert bench.main(["--from-json", str(jpath), "--out-dir", str(tmp_path / "out")]) == 0
    names = os.listdir(tmp_path / "out")
    assert "bench_bf16.md" in names and not any(n.endswith(".png") for n in names)
    assert "no plots: --plot needs matplotlib" in capsys.readouterr().err


@needs_matplotlib
def test_plot_without_numpy_names_numpy(monkeypatch, capsys):
    import matplotlib  # noqa: F401  (loaded: only numpy is missing)

    monkeypatch.setitem(sys.modules, "numpy", None)
    assert bench.missing_plot_deps() == ["numpy"]
    with pytest.raises(SystemExit) as e:
        bench.parse_args(["--plot"])
    assert e.value.code == 2
    assert "--plot needs numpy: pip install numpy" in capsys.readouterr().err


# ---------------------------------------------------------------- colours, titles, auto labels
def _plot_calls(monkeypatch):
    """Record every figure make_plots draws: file name, title, tick labels and, per series, its
    kernel, legend label and the bars' face colour."""
    plot = sys.modules["bench_plot"]
    calls = []
    orig_figure, orig_bars = plot._figure, plot._bars

    def bars(ax, xlabels, series):
        drawn = orig_bars(ax, xlabels, series)
        calls[-1]["series"] = [(k, name, tuple(rects.patches[0].get_facecolor()))
                               for (k, name, _), (rects, _, _) in zip(series, drawn)]
        calls[-1]["xlabels"] = list(xlabels)
        return drawn

    def figure(cols, series, ticks, fmt, ylabel, title, path, paths, ref_line=False):
        calls.append({"name": os.path.basename(path), "title": title})
        return orig_figure(cols, series, ticks, fmt, ylabel, title, path, paths, ref_line)

    monkeypatch.setattr(plot, "_bars", bars)
    monkeypatch.setattr(plot, "_figure", figure)
    return calls


@needs_matplotlib
def test_kernel_color_is_fixed_whatever_the_figure_shows(monkeypatch, tmp_path):
    first = {k: bench.kernel_color(k) for k in ("sdpa_efficient", "ffpa_l1", "ffpa_auto")}
    second = {k: bench.kernel_color(k) for k in ("ffpa_auto", "ffpa_l3", "ffpa_l1", "fa2_sync")}
    for k in set(first) & set(second):
        assert first[k] == second[k]
    named = bench.SDPA_KERNELS + bench.OUR_KERNELS + list(bench.OUR_VARIANTS)
    variants = ["ffpa_l1_s2", "ffpa_l1_s3", "ffpa_l1_fp16acc", "ffpa_l1_mixedacc"]
    colors = [bench.kernel_color(k) for k in named + variants]
    assert len(set(colors)) == len(colors), dict(zip(named + variants, colors))
    assert bench.kernel_color("someone_else") == bench.kernel_color("someone_else")

    # in the figures: the TFLOPS plot (SDPA EA + ours) and the speedup plot (ours only) of one
    # run, and a second run with another subset, draw each kernel in one colour
    calls = _plot_calls(monkeypatch)
    bench.make_plots(_synthetic(), str(tmp_path / "a"))
    other = _synthetic()
    other["results"] = [r for r in other["results"] if r["kernel"] != "ffpa_l1"]
    bench.make_plots(other, str(tmp_path / "b"))
    seen = {}
    for call in calls:
        for kernel, _, rgba in call["series"]:
            seen.setdefault(kernel, set()).add(rgba)
    assert set(seen) == {"sdpa_efficient", "ffpa_l1", "ffpa_auto"}
    assert all(len(v) == 1 for v in seen.values()), seen
    assert len({next(iter(v)) for v in seen.values()}) == 3  # and different kernels differ


@needs_matplotlib
def test_plot_titles_say_causal_or_non_causal(monkeypatch, tmp_path):
    g = {"dtype": "bf16", "causal": False, "mask": "none", "shape": (1, 32, 8, 4096, 2048)}
    title = bench.plot_title("Attention forward TFLOPS", g, DEVICE)
    assert "non-causal" in title and "bf16" in title and DEVICE in title
    assert "B=1 H=32 Hkv=8 L=4096 S=2048" in title
    title = bench.plot_title("Speedup", dict(g, causal=True, dtype="fp16", mask="blocksparse"), DEVICE)
    assert "causal" in title and "non-causal" not in title
    assert "fp16" in title and "blocksparse" in title
    calls = _plot_calls(monkeypatch)
    bench.make_plots(_synthetic(), str(tmp_path))
    assert len(calls) == 8
    for call in calls:
        causal = "_causal" in call["name"]
        assert ("non-causal" in call["title"]) is not causal, call
        assert "causal" in call["title"]
        assert ("bf16" in call["title"]) is ("bf16" in call["name"]), call


BUILD_INFO = {"families": ["fa2", "ffpa_l1", "ffpa_l3"],
              "head_dim_pairs": {"fa2": [[128, 128], [320, 320]],
                                 "ffpa_l1": [[320, 320], [512, 512]],
                                 "ffpa_l3": [[512, 512], [1024, 1024]]}}


def test_auto_ran_new_and_old_rows():
    pairs = bench.compiled_pairs(BUILD_INFO)
    # new rows: what the bench recorded wins
    assert bench.auto_ran({"D": 512, "Dv": 512, "auto_kernel": "ffpa_l3"}, pairs) == "ffpa_l3"
    assert bench.auto_ran({"D": 320, "Dv": 320, "auto_kernel": "sdpa"}, None) == "sdpa"
    # old rows: FA-2 where the pair is compiled for it, a level where it is the only one
    assert bench.auto_ran({"D": 320, "Dv": 320}, pairs) == "fa2"
    assert bench.auto_ran({"D": 128}, pairs) == "fa2"
    assert bench.auto_ran({"D": 1024, "Dv": 1024}, pairs) == "ffpa_l3"
    assert bench.auto_ran({"D": 512, "Dv": 512}, pairs) is None  # L1 or L3: not recorded
    assert bench.auto_ran({"D": 320, "Dv": 320}, None) is None  # no build_info at all
    # build_info with head_dims only (older manifests)
    old = bench.compiled_pairs({"families": ["ffpa_l1"], "head_dims": {"ffpa_l1": [320, 512]}})
    assert bench.auto_ran({"D": 320, "Dv": 320}, old) == "ffpa_l1"
    # at bench time: the level heuristic picks among the levels compiled
    assert bench.auto_pick(pairs, 512, 512, lambda levels: 3) == "ffpa_l3"
    assert bench.auto_pick(pairs, 512, 512, lambda levels: 1) == "ffpa_l1"
    assert bench.auto_pick(pairs, 320, 320, lambda levels: 1) == "fa2"
    assert bench.auto_pick(pairs, 96, 96, lambda levels: 1) is None


@needs_matplotlib
def test_auto_labels_in_legend_ticks_and_table(monkeypatch, tmp_path):
    report = sys.modules["bench_report"]
    plot = sys.modules["bench_plot"]
    assert report.auto_label("fa2") == "FFPA auto (FA-2)"
    assert report.auto_label("ffpa_l3") == "FFPA auto (L3)"
    assert report.auto_label(None) == "FFPA auto"
    assert plot.auto_legend({(512, 512): "ffpa_l1", (576, 576): "ffpa_l1"}) == ("FFPA auto (L1)", {})
    name, ticks = plot.auto_legend({(320, 320): "fa2", (1024, 1024): "ffpa_l3"})
    assert "(L" not in name and "(FA-2)" not in name
    assert ticks == {(320, 320): "auto: FA-2", (1024, 1024): "auto: L3"}
    assert plot.auto_legend({(512, 512): None}) == ("FFPA auto", {})

    data = _synthetic()
    data["build_info"] = BUILD_INFO
    for r in data["results"]:  # new rows record it at 320 only; old rows elsewhere
        if r["kernel"] == "ffpa_auto" and r["D"] == 320:
            r["auto_kernel"] = "fa2"
    md = bench.make_tables(data)["bench_bf16"]
    assert _row(md, "FFPA auto ran") == ["FA-2", "?", "L3"]  # D = 320, 512 (L1 or L3), 1024
    assert "does not record" in md
    assert _row(md, "FFPA auto") == [f"{_find(data, 'ffpa_auto', 'bf16', False, D)['tflops']:.1f}"
                                     for D in DIMS]
    assert "FFPA auto ran" not in bench.make_tables(_fa2_synthetic())["bench_bf16"]

    calls = _plot_calls(monkeypatch)
    bench.make_plots(data, str(tmp_path / "mixed"))
    tflops = next(c for c in calls if c["name"] == "tflops_bf16.png")
    assert tflops["xlabels"] == ["320\nauto: FA-2", "512", "1024\nauto: L3"]
    assert "FFPA auto (ran: see head dims)" in [n for _, n, _ in tflops["series"]]
    for r in data["results"]:  # one kernel at every head dim: said in the legend
        if r["kernel"] == "ffpa_auto":
            r["auto_kernel"] = "ffpa_l3"
    calls.clear()
    bench.make_plots(data, str(tmp_path / "l3"))
    for call in calls:
        assert "FFPA auto (L3)" in [n for _, n, _ in call["series"]], call
        assert not any("auto" in x for x in call["xlabels"])


def test_bench_records_what_auto_ran(monkeypatch):
    """_auto_kernel (GPU side, with a fake ffpa_attn): 'sdpa' where a strict call is refused, else
    the family from the build's pairs and ffpa_attn._C.pick_ffpa_level."""
    import types

    import torch

    asked = []

    def pick_ffpa_level(D, Dv, L, S, batch_heads, levels):
        asked.append((D, Dv, L, S, batch_heads, tuple(levels)))
        return 3 if D > 640 else 1

    monkeypatch.setitem(sys.modules, "ffpa_attn._C", types.SimpleNamespace(pick_ffpa_level=pick_ffpa_level))
    refuse = {"now": False}

    def forward(q, k, v, **kw):
        assert kw["strict"] is True
        if refuse["now"]:
            raise NotImplementedError("head dim not compiled")
        return q

    sw = types.SimpleNamespace(ffpa=types.SimpleNamespace(forward=forward),
                               pairs=bench.compiled_pairs(BUILD_INFO))

    def tensors(D, B=2, H=4, L=16, S=24):
        return (torch.empty(B, H, L, D), torch.empty(B, H, S, D), torch.empty(B, H, S, D))

    assert bench._auto_kernel(sw, *tensors(320), False, False, None) == "fa2"
    assert bench._auto_kernel(sw, *tensors(512), False, False, None) == "ffpa_l1"
    assert asked == [(512, 512, 16, 24, 8, (1, 3))]
    sw.pairs["ffpa_l1"].add((1024, 1024))
    assert bench._auto_kernel(sw, *tensors(1024), True, False, None) == "ffpa_l3"
    refuse["now"] = True
    assert bench._auto_kernel(sw, *tensors(96), False, False, None) == "sdpa"
    refuse["now"] = False
    sw.pairs = None
    assert bench._auto_kernel(sw, *tensors(512), False, False, None) is None


# ---------------------------------------------------------------- value labels
@needs_matplotlib
def test_value_labels_fixed_decimals_and_no_overlap(monkeypatch, tmp_path):
    """Every bar's value label uses fixed decimals, a small font, and no two labels overlap,
    also with many kernels per head dim."""
    plot = sys.modules["bench_plot"]
    texts = []
    orig = plot._value_labels

    def value_labels(ax, drawn, fmt):
        orig(ax, drawn, fmt)
        renderer = ax.figure.canvas.get_renderer()
        texts.append([(t.get_text(), t.get_fontsize(), t.get_window_extent(renderer))
                      for t in ax.texts])

    monkeypatch.setattr(plot, "_value_labels", value_labels)
    crowded = _synthetic()  # 8 head dims x 10 kernels, equal heights: labels side by side
    crowded["results"] += [dict(r, D=D, Dv=D) for r in crowded["results"] if r["D"] == 320
                           for D in (384, 448, 576, 640, 768)]
    crowded["results"] += [dict(r, kernel=name) for r in crowded["results"] if r["kernel"] == "ffpa_l1"
                           for name in ("ffpa_l1_s1", "ffpa_l1_s2", "ffpa_l1_s3", "ffpa_l2",
                                        "ffpa_l3", "ffpa_l1_fp16acc", "ffpa_l1_mixedacc")]
    bench.make_plots(crowded, str(tmp_path))
    assert texts
    for labels in texts:
        values = [t for t in labels if t[0] != "-"]
        assert values
        for text, size, _ in values:
            assert re.fullmatch(r"\d+|\d+\.\d\dx", text), text
            assert size <= 8
        for i, (_, _, a) in enumerate(labels):
            for _, _, b in labels[i + 1:]:
                assert not a.overlaps(b), (labels,)
