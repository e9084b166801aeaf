"""PNG bar plots of bench results (matplotlib, Agg backend): TFLOPS and speedups per kernel per
head dim. bench_report.write_outputs calls make_plots; bench.py checks missing_plot_deps() when
it parses --plot. Importing this module needs no matplotlib.

Every figure draws a kernel in the same colour (kernel_color), titles say dtype, causal or
non-causal, mask and shape (plot_title), and FFPA auto is labelled with the kernel it ran
(auto_legend: in the legend, or under each head dim where that differs across the figure).
"""
from __future__ import annotations

import importlib
import math
import os
import zlib

from bench_report import (
    _cells,
    _col_label,
    acc_variant,
    auto_columns,
    auto_label,
    auto_name,
    group_results,
    label,
    speedup_series,
    split_variant,
)

PLOT_DEPS = ("numpy", "matplotlib")
EXTRA_HINT = 'pip install --no-build-isolation ".[bench]"'


def missing_plot_deps() -> list:
    """The packages of PLOT_DEPS that do not import ([] when --plot can run)."""
    missing = []
    for name in PLOT_DEPS:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def plot_deps_message(missing) -> str:
    return f"--plot needs {' and '.join(missing)}: pip install {' '.join(missing)} (or {EXTRA_HINT})"


# --------------------------------------------------------------------------
# Colours: one per kernel, whatever else a figure shows
# --------------------------------------------------------------------------
KERNEL_COLORS = {  # matplotlib's tab10, fixed by name
    "sdpa_efficient": "#7f7f7f",
    "sdpa_flash": "#8c564b",
    "sdpa_cudnn": "#bcbd22",
    "sdpa_math": "#17becf",
    "ffpa_l1": "#1f77b4",
    "ffpa_l2": "#ff7f0e",
    "ffpa_l3": "#2ca02c",
    "fa2": "#d62728",
    "fa2_sync": "#e377c2",
    "ffpa_auto": "#9467bd",
}
# kernels not named above: picked by a hash of the name (stable across runs and figures)
_OTHER_COLORS = ["#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2",
                 "#dbdb8d", "#9edae5", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"]


def _mix(color: str, other: str, t: float) -> str:
    """Hex colour ``color`` moved a fraction ``t`` towards ``other``."""
    a = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    b = [int(other[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def kernel_color(kernel: str) -> str:
    """The colour of ``kernel`` in every figure: KERNEL_COLORS for the known names; a level's
    forced-depth variants (ffpa_l1_s2) are its colour lightened by depth, its fp16 / mixed
    accumulation variants darkened."""
    base, stages = split_variant(kernel)
    color = KERNEL_COLORS.get(base)
    if color is None:
        return _OTHER_COLORS[zlib.crc32(kernel.encode()) % len(_OTHER_COLORS)]
    if stages:
        color = _mix(color, "#ffffff", 0.15 * stages)
    acc = acc_variant(kernel)
    if acc != "auto":
        color = _mix(color, "#000000", 0.5 if acc == "fp16" else 0.25)
    return color


def _text_color(bar_color: str) -> str:
    """Black or white, whichever reads better on ``bar_color``."""
    r, g, b = (int(bar_color[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.6 else "white"


# --------------------------------------------------------------------------
# Titles and FFPA auto's label
# --------------------------------------------------------------------------
def plot_title(what: str, g: dict, device: str) -> str:
    """'<what> | bf16, non-causal[, mask ...]' over '<device> | B=.. H=.. Hkv=.. L=.. S=..' for
    the group ``g`` of bench_report.group_results."""
    B, Hq, Hkv, L, S = g["shape"]
    mode = "causal" if g["causal"] else "non-causal"
    mask = "" if g["mask"] == "none" else f", mask {g['mask']} (dense flops)"
    return f"{what} | {g['dtype']}, {mode}{mask}\n{device} | B={B} H={Hq} Hkv={Hkv} L={L} S={S}"


def auto_legend(ran: dict):
    """FFPA auto's legend label and the per-column tick notes for a figure, from ``ran`` =
    {column: what auto ran there (None: unknown)} over the columns where it has a bar.

    One known kernel everywhere: 'FFPA auto (L1)' and no notes; else 'auto: FA-2' / 'auto: L3'
    under each head dim where what ran is known (none where not: plain 'FFPA auto')."""
    kinds = set(ran.values())
    if len(kinds) == 1 and None not in kinds:
        return auto_label(kinds.pop()), {}
    notes = {c: "auto: " + auto_name(k) for c, k in ran.items() if k}
    return auto_label(None) + (" (ran: see head dims)" if notes else ""), notes


# --------------------------------------------------------------------------
# Bars
# --------------------------------------------------------------------------
LABEL_FONT = 7  # value labels, points
_CHAR_W = 0.62  # a digit's width in DejaVu Sans, in font sizes


def _finite(v) -> bool:
    return v is not None and math.isfinite(v)


def _bars(ax, xlabels, series):
    """One group of bars per column, one bar per (kernel, label, values) of ``series``; the
    legend under the axes. Returns [(bar container, values, colour)] for _value_labels."""
    n = max(len(series), 1)
    width = 0.8 / n
    xs = list(range(len(xlabels)))
    drawn = []
    for i, (kernel, name, vals) in enumerate(series):
        pos = [x - 0.4 + width * (i + 0.5) for x in xs]
        color = kernel_color(kernel)
        rects = ax.bar(pos, [v if _finite(v) else 0.0 for v in vals], width, label=name,
                       color=color)
        drawn.append((rects, vals, color))
    ax.set_xticks(xs)
    ax.set_xticklabels(xlabels)
    ax.set_xlabel("head dim")
    top = max((v for _, _, vals in series for v in vals if _finite(v)), default=1.0)
    ax.set_ylim(0, top * 1.14)
    ax.legend(fontsize=8, ncol=min(n, 5), loc="upper center", bbox_to_anchor=(0.5, -0.16),
              frameon=False)
    return drawn


def _value_labels(ax, drawn, fmt):
    """A label per bar, ``fmt``-formatted: level above the bar where it fits the bar's width,
    else turned upright inside the bar's top (or above a bar too short to hold it). Needs the
    final layout: call after tight_layout."""
    pt = 72.0 / ax.figure.dpi
    for rects, vals, color in drawn:
        for rect, v in zip(rects, vals):
            x = rect.get_x() + rect.get_width() / 2
            if not _finite(v):
                ax.annotate("-", (x, 0), ha="center", va="bottom", fontsize=LABEL_FONT,
                            xytext=(0, 2), textcoords="offset points")
                continue
            text = fmt(v)
            (x0, y0), (x1, y1) = ax.transData.transform(
                [(rect.get_x(), 0.0), (rect.get_x() + rect.get_width(), rect.get_height())])
            need = _CHAR_W * LABEL_FONT * len(text)
            top = (x, rect.get_height())
            if (x1 - x0) * pt >= need + 4:  # a gap between neighbours
                ax.annotate(text, top, ha="center", va="bottom", fontsize=LABEL_FONT,
                            xytext=(0, 2), textcoords="offset points")
            elif (y1 - y0) * pt >= need + 6:
                ax.annotate(text, top, ha="center", va="top", fontsize=LABEL_FONT, rotation=90,
                            color=_text_color(color), xytext=(0, -3), textcoords="offset points")
            else:
                ax.annotate(text, top, ha="center", va="bottom", fontsize=LABEL_FONT, rotation=90,
                            xytext=(0, 2), textcoords="offset points")


def _figure(cols, series, ticks, fmt, ylabel, title, path, paths, ref_line=False):
    import matplotlib.pyplot as plt

    # about 0.3 in per bar and group gap, so a label of up to 4 digits fits a bar's width
    width = min(30.0, max(6.0, len(cols) * (0.3 * len(series) + 0.3) + 2.5))
    fig, ax = plt.subplots(figsize=(width, 5.5))
    xlabels = [_col_label(c)[2:] + (f"\n{ticks[c]}" if c in ticks else "") for c in cols]
    drawn = _bars(ax, xlabels, series)
    if ref_line:
        ax.axhline(1.0, color="gray", linestyle="--", linewidth=1, zorder=0)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    _value_labels(ax, drawn, fmt)
    fig.savefig(path, dpi=120, bbox_inches="tight")  # "tight": the legend under the axes too
    plt.close(fig)
    paths.append(path)


def _label_series(series, cols, ran):
    """(kernel, values) series -> ((kernel, legend label, values) series, tick notes), FFPA auto
    named by what it ran (``ran``, from auto_columns) at the columns where it has a bar."""
    out, ticks = [], {}
    for kernel, vals in series:
        name = label(kernel)
        if kernel == "ffpa_auto":
            name, ticks = auto_legend({c: ran[c] for c, v in zip(cols, vals) if c in ran and _finite(v)})
        out.append((kernel, name, vals))
    return out, ticks


def _tflops(cells, kernel, cols):
    out = []
    for c in cols:
        r = cells.get((kernel, c))
        out.append(float(r["tflops"]) if r is not None and r.get("tflops") is not None else None)
    return out


# plot file prefix and y label per speedup baseline
_SPEEDUP_PLOTS = {"sdpa_efficient": ("speedup", "SDPA efficient attention"),
                  "sdpa_flash": ("speedup_vs_fa", "SDPA flash attention"),
                  "sdpa_cudnn": ("speedup_vs_cudnn", "SDPA cuDNN attention")}


def make_plots(results_json, out_dir) -> list:
    """Write bar plots (matplotlib Agg) and return the list of written paths.

    Per (dtype, causal, mask) combo: ``tflops_<tag>.png`` (TFLOPS per kernel per head dim),
    ``speedup_<tag>.png`` (each of ours vs SDPA EA) when SDPA EA and one of ours ran, and
    ``speedup_vs_fa_<tag>.png`` (vs SDPA FA) and ``speedup_vs_cudnn_<tag>.png`` (vs SDPA cuDNN) when one
    of ours shares a head dim with that backend.
    """
    import matplotlib
    matplotlib.use("Agg")

    os.makedirs(out_dir, exist_ok=True)
    device = results_json.get("device", "unknown device")
    paths = []
    for tag, g in group_results(results_json).items():
        cols, kernels, cells = _cells(g["results"])
        ran = auto_columns(results_json, cells, cols)
        series, ticks = _label_series([(k, _tflops(cells, k, cols)) for k in kernels], cols, ran)
        _figure(cols, series, ticks, lambda v: f"{v:.0f}", "TFLOPS",
                plot_title("Attention forward TFLOPS", g, device),
                os.path.join(out_dir, f"tflops_{tag}.png"), paths)

        all_series = speedup_series(cells, cols, kernels)
        for base, (prefix, name) in _SPEEDUP_PLOTS.items():
            raw = [(k, vals) for k, b, vals in all_series if b == base]
            if not raw:
                continue
            series, ticks = _label_series(raw, cols, ran)
            _figure(cols, series, ticks, lambda v: f"{v:.2f}x", f"speedup vs {label(base)}",
                    plot_title(f"Speedup vs {name}", g, device),
                    os.path.join(out_dir, f"{prefix}_{tag}.png"), paths, ref_line=True)
    return paths
