"""CPU-only tests for bench/bench_plot.py and the bench extras: plots without matplotlib or numpy,
fixed colours per kernel, titles, auto labels, value labels, and that bench records what auto ran."""
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
