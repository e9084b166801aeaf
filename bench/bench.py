#!/usr/bin/env python3
"""Benchmark ffpa_attn kernels against PyTorch SDPA backends.

Run from the repository root::

    python bench/bench.py                          # full default sweep (needs a CUDA GPU)
    python bench/bench.py --quick --check --gen-bench --plot
    python bench/bench.py --from-json bench/out/bench.json --gen-bench --plot   # no GPU

The module is importable (tests load it with importlib); the pure helpers are
``causal_pairs``, ``attn_flops``, ``compute_tflops``, ``make_tables``,
``make_plots`` and ``main(argv)``.

Timing: when triton imports, ``triton.testing.do_bench(fn, warmup=W, rep=I,
return_mode="median")`` is used and ``--warmup``/``--iters`` are *milliseconds*
budgets.  Without triton a CUDA-event loop is used and they are *counts*
(``--warmup`` untimed calls, then the median of ``--iters`` timed calls).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import re
import statistics
import sys
import warnings
from collections import OrderedDict

# --------------------------------------------------------------------------
# Kernel registry
# --------------------------------------------------------------------------
SDPA_KERNELS = ["sdpa_efficient", "sdpa_flash", "sdpa_cudnn", "sdpa_math"]
OUR_KERNELS = ["ffpa_l1", "ffpa_l2", "ffpa_l3", "fa2", "ffpa_auto"]
BASELINE = "sdpa_efficient"
DEFAULT_KERNELS = ["sdpa_efficient", "sdpa_flash", "sdpa_cudnn"] + OUR_KERNELS
DEFAULT_D = [320, 384, 448, 512, 576, 640, 768, 1024]
FA2_MAX_D = 256

LABELS = {
    "sdpa_efficient": "SDPA EA",
    "sdpa_flash": "SDPA FA",
    "sdpa_cudnn": "SDPA cuDNN",
    "sdpa_math": "SDPA Math",
    "ffpa_l1": "FFPA L1",
    "ffpa_l2": "FFPA L2",
    "ffpa_l3": "FFPA L3",
    "fa2": "FA2 (ours)",
    "ffpa_auto": "FFPA auto",
}

# --check criterion: ours fails if err > CHECK_FACTOR * err(sdpa_efficient) + CHECK_ATOL
CHECK_FACTOR = 2.0
CHECK_ATOL = 1e-3

QUICK = {"N": 1024, "H": 8, "D": [320, 512, 1024], "warmup": 5, "iters": 20}
DEFAULTS = {"B": 1, "H": 32, "N": 8192, "D": DEFAULT_D, "warmup": 25, "iters": 100}

FAIL_MARK = "!"
EXPAND_MARK = "*"


_VARIANT = re.compile(r"^(ffpa_l[123])_s([1-4])$")


def split_variant(kernel: str):
    """'ffpa_l1_s3' -> ('ffpa_l1', 3): a level forced to a pipeline depth; else (kernel, None)."""
    m = _VARIANT.match(kernel)
    return (m.group(1), int(m.group(2))) if m else (kernel, None)


def base_kernel(kernel: str) -> str:
    return split_variant(kernel)[0]


def label(kernel: str) -> str:
    base, stages = split_variant(kernel)
    return LABELS.get(base, base) + (f" ({stages} stages)" if stages else "")


def is_sdpa(kernel: str) -> bool:
    return kernel.startswith("sdpa_")


# --------------------------------------------------------------------------
# FLOP accounting
# --------------------------------------------------------------------------
def causal_pairs(L: int, S: int) -> int:
    """Number of unmasked (query, key) pairs for top-left aligned causal masking.

    Equals ``sum(min(i + 1, S) for i in range(L))`` (exact, not L*S/2).
    """
    L, S = int(L), int(S)
    if L <= 0 or S <= 0:
        return 0
    m = min(L, S)
    return m * (m + 1) // 2 + max(L - S, 0) * S


def attn_flops(B: int, Hq: int, L: int, S: int, D: int, Dv: int | None = None,
               causal: bool = False) -> int:
    """FLOPs of attention forward: 2*B*Hq*pairs*(D + Dv) (QK^T plus PV)."""
    Dv = D if Dv is None else Dv
    pairs = causal_pairs(L, S) if causal else int(L) * int(S)
    return 2 * int(B) * int(Hq) * pairs * (int(D) + int(Dv))


def compute_tflops(B, Hq, L, S, D, Dv, causal, ms) -> float:
    """TFLOPS for a run that took ``ms`` milliseconds."""
    if ms is None or ms <= 0:
        return float("nan")
    return attn_flops(B, Hq, L, S, D, Dv, causal) / (ms * 1e-3) / 1e12


# --------------------------------------------------------------------------
# Grouping / formatting (pure, CPU-only)
# --------------------------------------------------------------------------
def fmt_tflops(x) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.1f}"


def fmt_speedup(r) -> str:
    if r is None or (isinstance(r, float) and not math.isfinite(r)):
        return "-"
    return f"{r:.2f}x"


def fmt_err(x) -> str:
    if x is None:
        return "-"
    return f"{x:.2e}"


def _kernel_order(kernels):
    known = SDPA_KERNELS + OUR_KERNELS
    ks = list(dict.fromkeys(kernels))
    return sorted(ks, key=lambda k: (known.index(base_kernel(k)) if base_kernel(k) in known else len(known), k))


def _shape_key(r):
    return (int(r["B"]), int(r["Hq"]), int(r["Hkv"]), int(r["L"]), int(r["S"]))


def group_results(results_json) -> "OrderedDict[str, dict]":
    """Group results by (dtype, causal[, shape]) -> {tag: {dtype, causal, shape, results}}.

    The tag is ``<dtype>`` or ``<dtype>_causal``; if one (dtype, causal) combo
    holds several (B, Hq, Hkv, L, S) shapes, a shape suffix is appended.
    """
    results = list(results_json.get("results", []))
    combos: "OrderedDict[tuple, OrderedDict]" = OrderedDict()
    for r in results:
        key = (str(r["dtype"]), bool(r["causal"]))
        combos.setdefault(key, OrderedDict()).setdefault(_shape_key(r), []).append(r)
    # stable order: dtype order of appearance, non-causal before causal
    dtypes = list(dict.fromkeys(k[0] for k in combos))
    out: "OrderedDict[str, dict]" = OrderedDict()
    for dt in dtypes:
        for causal in (False, True):
            shapes = combos.get((dt, causal))
            if not shapes:
                continue
            base = dt + ("_causal" if causal else "")
            for shape, rs in shapes.items():
                tag = base
                if len(shapes) > 1:
                    B, Hq, Hkv, L, S = shape
                    tag = f"{base}_B{B}_H{Hq}_Hkv{Hkv}_L{L}_S{S}"
                out[tag] = {"dtype": dt, "causal": causal, "shape": shape, "results": rs}
    return out


def _cells(rs):
    """-> (columns [(D, Dv)], kernels, {(kernel, (D, Dv)): result})"""
    cells = {}
    for r in rs:
        D = int(r["D"])
        Dv = int(r.get("Dv", D))
        cells[(r["kernel"], (D, Dv))] = r  # duplicates: last one wins
    cols = sorted({c for (_, c) in cells})
    kernels = _kernel_order(k for (k, _) in cells)
    return cols, kernels, cells


def _col_label(col):
    D, Dv = col
    return f"D={D}" if D == Dv else f"D={D}/Dv={Dv}"


def _speedup(cells, kernel, col):
    ours = cells.get((kernel, col))
    base = cells.get((BASELINE, col))
    if not ours or not base:
        return None
    try:
        t_ours, t_base = float(ours["tflops"]), float(base["tflops"])
    except (TypeError, ValueError, KeyError):
        return None
    if not (math.isfinite(t_ours) and math.isfinite(t_base)) or t_base <= 0:
        return None
    return t_ours / t_base


def _md_row(cells):
    return "| " + " | ".join(cells) + " |"


def make_tables(results_json) -> "OrderedDict[str, str]":
    """Markdown tables, one per (dtype, causal): {"bench_<dtype>[_causal]": markdown}.

    Rows: SDPA EA TFLOPS, other SDPA backends that ran, each of our kernels'
    TFLOPS, then "<ours> speedup vs SDPA EA" rows.  Missing cells are "-";
    cells whose --check failed get a trailing "!".
    """
    device = results_json.get("device", "unknown device")
    date = results_json.get("date", "")
    torch_v = results_json.get("torch", "")
    cuda_v = results_json.get("cuda", "")
    tables: "OrderedDict[str, str]" = OrderedDict()
    for tag, g in group_results(results_json).items():
        cols, kernels, cells = _cells(g["results"])
        B, Hq, Hkv, L, S = g["shape"]
        sdpa = [k for k in kernels if is_sdpa(k)]
        ours = [k for k in kernels if not is_sdpa(k)]
        lines = [
            f"### {g['dtype']}{' causal' if g['causal'] else ''} — {device}",
            "",
            (f"Device: {device} | dtype: {g['dtype']} | B={B} H={Hq} Hkv={Hkv} "
             f"L={L} S={S} | causal: {g['causal']} | torch {torch_v} CUDA {cuda_v} "
             f"| date: {date}"),
            "",
            _md_row(["Kernel (TFLOPS)"] + [_col_label(c) for c in cols]),
            _md_row(["---"] + ["---:"] * len(cols)),
        ]
        any_fail = any_expanded = False
        for k in sdpa + ours:
            row = [label(k)]
            for c in cols:
                r = cells.get((k, c))
                if r is None:
                    row.append("-")
                    continue
                s = fmt_tflops(r.get("tflops"))
                if r.get("gqa_expanded"):
                    s += EXPAND_MARK
                    any_expanded = True
                if r.get("check_ok") is False:
                    s += FAIL_MARK
                    any_fail = True
                row.append(s)
            lines.append(_md_row(row))
        if BASELINE in kernels:
            for k in ours:
                lines.append(_md_row([f"{label(k)} speedup vs SDPA EA"]
                                     + [fmt_speedup(_speedup(cells, k, c)) for c in cols]))
        if any_expanded:
            lines += ["", f"`{EXPAND_MARK}` = backend has no native GQA: K/V were pre-expanded "
                      "to Hq heads outside the timed region."]
        if any_fail:
            lines += ["", f"`{FAIL_MARK}` = output check failed (error > "
                      f"{CHECK_FACTOR:g}x SDPA EA error + {CHECK_ATOL:g})."]
        # optional accuracy table (present when the run used --check)
        if any(r.get("max_abs_err") is not None for r in g["results"]):
            lines += ["", "Max abs err (rel err) vs fp32 SDPA math reference:", "",
                      _md_row(["Kernel"] + [_col_label(c) for c in cols]),
                      _md_row(["---"] + ["---:"] * len(cols))]
            for k in sdpa + ours:
                row = [label(k)]
                for c in cols:
                    r = cells.get((k, c))
                    if r is None or r.get("max_abs_err") is None:
                        row.append("-")
                    else:
                        row.append(f"{fmt_err(r['max_abs_err'])} ({fmt_err(r.get('rel_err'))})")
                lines.append(_md_row(row))
        tables[f"bench_{tag}"] = "\n".join(lines) + "\n"
    return tables


def make_plots(results_json, out_dir) -> list:
    """Write bar plots (matplotlib Agg) and return the list of written paths.

    Per (dtype, causal) combo: ``tflops_<tag>.png`` (TFLOPS per kernel per head
    dim) and, when SDPA EA and at least one of ours ran, ``speedup_<tag>.png``
    (speedup of each of ours vs SDPA EA per head dim).
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    device = results_json.get("device", "unknown device")
    paths = []
    for tag, g in group_results(results_json).items():
        cols, kernels, cells = _cells(g["results"])
        B, Hq, Hkv, L, S = g["shape"]
        subtitle = (f"{device} | {g['dtype']} | B={B} H={Hq} Hkv={Hkv} L={L} S={S}"
                    f"{' | causal' if g['causal'] else ''}")
        xs = list(range(len(cols)))
        xlabels = [_col_label(c)[2:] for c in cols]

        def bars(ax, series, fmt):
            n = max(len(series), 1)
            width = 0.8 / n
            for i, (name, vals) in enumerate(series):
                pos = [x - 0.4 + width * (i + 0.5) for x in xs]
                hs = [v if v is not None and math.isfinite(v) else 0.0 for v in vals]
                rects = ax.bar(pos, hs, width, label=name)
                for rect, v in zip(rects, vals):
                    if v is None or not math.isfinite(v):
                        ax.annotate("-", (rect.get_x() + rect.get_width() / 2, 0),
                                    ha="center", va="bottom", fontsize=8,
                                    xytext=(0, 2), textcoords="offset points")
                        continue
                    ax.annotate(fmt(v), (rect.get_x() + rect.get_width() / 2, rect.get_height()),
                                ha="center", va="bottom", fontsize=6, rotation=90,
                                xytext=(0, 2), textcoords="offset points")
            ax.set_xticks(xs)
            ax.set_xticklabels(xlabels)
            ax.set_xlabel("head dim")
            ax.legend(fontsize=7, ncol=min(n, 5), loc="upper center",
                      bbox_to_anchor=(0.5, -0.14), frameon=False)
            ax.margins(y=0.12)

        # TFLOPS plot
        series = []
        for k in kernels:
            vals = []
            for c in cols:
                r = cells.get((k, c))
                vals.append(float(r["tflops"]) if r is not None and r.get("tflops") is not None
                            else None)
            series.append((label(k), vals))
        fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(cols) + 3), 5.0))
        bars(ax, series, lambda v: f"{v:.0f}")
        ax.set_ylabel("TFLOPS")
        ax.set_title(f"Attention forward TFLOPS\n{subtitle}", fontsize=9)
        fig.tight_layout()
        p = os.path.join(out_dir, f"tflops_{tag}.png")
        fig.savefig(p, dpi=120)
        plt.close(fig)
        paths.append(p)

        # Speedup plot
        ours = [k for k in kernels if not is_sdpa(k)]
        if BASELINE in kernels and ours:
            series = [(label(k), [_speedup(cells, k, c) for c in cols]) for k in ours]
            fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(cols) + 3), 5.0))
            bars(ax, series, lambda v: f"{v:.2f}x")
            ax.axhline(1.0, color="gray", linestyle="--", linewidth=1)
            ax.set_ylabel("speedup vs SDPA EA")
            ax.set_title(f"Speedup vs SDPA efficient attention\n{subtitle}", fontsize=9)
            fig.tight_layout()
            p = os.path.join(out_dir, f"speedup_{tag}.png")
            fig.savefig(p, dpi=120)
            plt.close(fig)
            paths.append(p)
    return paths


def write_outputs(results_json, out_dir, gen_bench=True, plot=True, echo=True) -> list:
    """Write markdown tables and/or plots; returns written paths."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    if gen_bench:
        for name, md in make_tables(results_json).items():
            p = os.path.join(out_dir, f"{name}.md")
            with open(p, "w") as f:
                f.write(md)
            written.append(p)
            if echo:
                print(md)
    if plot:
        written += make_plots(results_json, out_dir)
    if echo:
        for p in written:
            print(f"wrote {p}")
    return written


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Benchmark ffpa_attn against torch SDPA backends.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--B", type=int, default=None, help="batch size (default 1)")
    p.add_argument("--H", type=int, default=None, help="query heads (default 32; --quick: 8)")
    p.add_argument("--Hkv", type=int, default=None, help="key/value heads (default = H)")
    p.add_argument("--N", type=int, default=None, help="seq len, L = S = N (default 8192; --quick: 1024)")
    p.add_argument("--L", type=int, default=None, help="query length override")
    p.add_argument("--S", type=int, default=None, help="key/value length override")
    p.add_argument("--D", type=int, nargs="+", default=None,
                   help=f"head dims (default {' '.join(map(str, DEFAULT_D))})")
    p.add_argument("--Dv", type=int, default=None, help="value head dim (default = D)")
    p.add_argument("--dtype", nargs="+", choices=["bf16", "fp16"], default=["bf16"])
    p.add_argument("--causal", action="store_true", help="causal (top-left) masking")
    p.add_argument("--causal-both", action="store_true", help="run both non-causal and causal")
    p.add_argument("--warmup", type=int, default=None,
                   help="warmup: ms budget for triton do_bench, else call count (default 25)")
    p.add_argument("--iters", type=int, default=None,
                   help="timing: ms budget (rep) for triton do_bench, else call count (default 100)")
    p.add_argument("--kernels", nargs="+", default=None,
                   help=f"kernels to run (default {' '.join(DEFAULT_KERNELS)}; "
                        "sdpa_math only with --with-math or when listed)")
    p.add_argument("--with-math", action="store_true", help="also time sdpa_math (slow)")
    p.add_argument("--check", action="store_true",
                   help="compare outputs to an fp32 SDPA math reference before timing")
    p.add_argument("--gen-bench", action="store_true",
                   help="print markdown tables and write <out>/bench_<dtype>[_causal].md")
    p.add_argument("--plot", action="store_true", help="write speedup/TFLOPS PNG bar plots")
    p.add_argument("--out-dir", default=os.path.join("bench", "out"))
    p.add_argument("--json", default=None, help="results JSON path (default <out>/bench.json)")
    p.add_argument("--quick", action="store_true",
                   help="small smoke preset: N=1024 H=8 D 320 512 1024, small warmup/iters")
    p.add_argument("--from-json", default=None, metavar="FILE",
                   help="no GPU work: load results JSON and regenerate tables/plots")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stages", type=int, nargs="+", choices=[1, 2, 3, 4], default=None,
                   help="also time each requested FFPA level forced to these pipeline depths "
                        "(kernels named ffpa_l1_s2, ...)")
    return p


def resolve_args(args) -> argparse.Namespace:
    """Fill in preset/default values (explicit flags always win)."""
    preset = QUICK if args.quick else {}
    for key in ("B", "H", "N", "D", "warmup", "iters"):
        if getattr(args, key) is None:
            setattr(args, key, preset.get(key, DEFAULTS[key]))
    if args.Hkv is None:
        args.Hkv = args.H
    if args.L is None:
        args.L = args.N
    if args.S is None:
        args.S = args.N
    if args.kernels is None:
        args.kernels = list(DEFAULT_KERNELS)
        if args.with_math:
            args.kernels.insert(3, "sdpa_math")
    elif args.with_math and "sdpa_math" not in args.kernels:
        args.kernels.append("sdpa_math")
    args.kernels = list(dict.fromkeys(args.kernels))
    if args.json is None:
        args.json = os.path.join(args.out_dir, "bench.json")
    return args


def _die(msg, code=2):
    print(f"bench.py: error: {msg}", file=sys.stderr)
    return code


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.from_json:
        try:
            with open(args.from_json) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            return _die(f"cannot read results JSON {args.from_json!r}: {e}")
        gen, plot = args.gen_bench, args.plot
        if not gen and not plot:
            gen = plot = True
        write_outputs(data, args.out_dir, gen_bench=gen, plot=plot)
        return 0

    args = resolve_args(args)
    if args.stages:  # forced pipeline depths: ffpa_lX_sN variants of every requested level
        args.kernels = list(args.kernels) + [f"{k}_s{n}" for k in args.kernels if _VARIANT.match(f"{k}_s1")
                                             for n in args.stages]
    unknown = [k for k in args.kernels if base_kernel(k) not in SDPA_KERNELS + OUR_KERNELS]
    if unknown:
        return _die(f"unknown kernel(s) {unknown}; choose from {SDPA_KERNELS + OUR_KERNELS}")
    if args.H % args.Hkv != 0:
        return _die(f"--H ({args.H}) must be a multiple of --Hkv ({args.Hkv})")
    try:
        import torch
    except ImportError:
        return _die("torch is not installed; use --from-json FILE to render saved results.")
    if not torch.cuda.is_available():
        return _die("no CUDA GPU available (torch.cuda.is_available() is False). "
                    "Run on a GPU machine, or use --from-json FILE to regenerate "
                    "tables/plots from saved results.")
    return run_gpu(args)


# --------------------------------------------------------------------------
# GPU benchmarking
# --------------------------------------------------------------------------
class _Progress:
    def __init__(self, total):
        self.total, self.n = total, 0
        try:
            from tqdm import tqdm
            self.bar = tqdm(total=total, dynamic_ncols=True)
        except ImportError:
            self.bar = None

    def update(self, desc):
        self.n += 1
        if self.bar is not None:
            self.bar.set_description(desc)
            self.bar.update(1)
        else:
            print(f"[{self.n}/{self.total}] {desc}", file=sys.stderr, flush=True)

    def write(self, msg):
        if self.bar is not None:
            self.bar.write(msg)
        else:
            print(msg, file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _get_timer(warmup, iters):
    """Return (timer(fn) -> median ms, description)."""
    import torch
    try:
        import triton.testing

        def timer(fn):
            return float(triton.testing.do_bench(fn, warmup=warmup, rep=iters,
                                                 return_mode="median"))
        return timer, f"triton.testing.do_bench(warmup={warmup}ms, rep={iters}ms, median)"
    except Exception:  # triton missing or broken
        pass

    def timer(fn):
        for _ in range(max(warmup, 0)):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(max(iters, 1)):
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        return float(statistics.median(times))
    return timer, f"CUDA events (warmup={warmup} calls, median of {iters} calls)"


def _build_info():
    """-> (ffpa_attn module or None, info dict or None, note)."""
    try:
        import ffpa_attn
    except Exception as e:  # noqa: BLE001 - any import failure means "not built"
        return None, None, f"ffpa_attn not importable ({type(e).__name__}: {e})"
    if not callable(getattr(ffpa_attn, "forward", None)):
        return None, None, "ffpa_attn has no forward() (extension not built/installed?)"
    try:
        info = ffpa_attn.build_info()
        if not isinstance(info, dict):
            raise TypeError(f"build_info() returned {type(info).__name__}")
    except Exception as e:  # noqa: BLE001
        return ffpa_attn, None, f"ffpa_attn.build_info() failed ({e}); trying all kernels"
    return ffpa_attn, info, ""


def _make_fn(kernel, q, k, v, causal, gqa, ffpa):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = {
        "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION,
        "sdpa_flash": SDPBackend.FLASH_ATTENTION,
        "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
        "sdpa_math": SDPBackend.MATH,
    }
    if kernel in backends:
        be = backends[kernel]

        def fn():
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                      enable_gqa=gqa)
        return fn
    levels = {"ffpa_l1": 1, "ffpa_l2": 2, "ffpa_l3": 3}
    base, stages = split_variant(kernel)
    if base in levels:
        lvl = levels[base]
        return lambda: ffpa.forward(q, k, v, is_causal=causal, enable_gqa=gqa,
                                    strict=True, level=lvl, num_stages=stages)
    if kernel == "fa2":
        return lambda: ffpa.forward(q, k, v, is_causal=causal, enable_gqa=gqa,
                                    strict=True, level=None)
    if kernel == "ffpa_auto":
        return lambda: ffpa.forward(q, k, v, is_causal=causal, enable_gqa=gqa)
    raise ValueError(kernel)


def _first_call(kernel, q, k, v, causal, gqa, ffpa, expand_cache):
    """Build the kernel's closure and call it once -> (fn, out, gqa_expanded).

    SDPA backends without native GQA support (e.g. EFFICIENT_ATTENTION in
    torch 2.11 rejects enable_gqa=True) are retried with K/V pre-expanded to Hq
    heads; the expansion happens once, outside the timed closure.
    """
    import torch
    fn = _make_fn(kernel, q, k, v, causal, gqa, ffpa)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = _unwrap(fn())
            torch.cuda.synchronize()
            return fn, out, False
        except RuntimeError:
            if not (gqa and is_sdpa(kernel)):
                raise
        if "kv" not in expand_cache:
            rep = q.shape[1] // k.shape[1]
            expand_cache["kv"] = (k.repeat_interleave(rep, dim=1).contiguous(),
                                  v.repeat_interleave(rep, dim=1).contiguous())
        kx, vx = expand_cache["kv"]
        fn = _make_fn(kernel, q, kx, vx, causal, False, ffpa)
        out = _unwrap(fn())
        torch.cuda.synchronize()
        return fn, out, True


def _unwrap(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def _reference(q, k, v, causal):
    """fp32 SDPA-math reference, computed in head chunks to bound memory."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, Hq, L, _ = q.shape
    Hkv, S, Dv = k.shape[1], k.shape[2], v.shape[3]
    rep = Hq // Hkv
    out = torch.empty(B, Hq, L, Dv, device=q.device, dtype=torch.float32)
    # ~3 fp32 LxS buffers per head live in the math path; cap at ~4 GiB
    chunk = max(1, min(Hq, (4 << 30) // max(1, 3 * 4 * L * S)))
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        with sdpa_kernel(SDPBackend.MATH):
            for b in range(B):
                for h0 in range(0, Hq, chunk):
                    hs = torch.arange(h0, min(h0 + chunk, Hq), device=q.device)
                    qc = q[b:b + 1, hs].float()
                    kc = k[b:b + 1, hs // rep].float()
                    vc = v[b:b + 1, hs // rep].float()
                    out[b:b + 1, h0:h0 + len(hs)] = F.scaled_dot_product_attention(
                        qc, kc, vc, is_causal=causal)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    return out


def _errors(out, ref):
    """-> (max abs err, relative Frobenius err); inf when out has NaN/Inf."""
    import torch
    if tuple(out.shape) != tuple(ref.shape) or not bool(torch.isfinite(out).all().item()):
        return float("inf"), float("inf")
    d = out.float() - ref
    max_abs = d.abs().max().item()
    rel = (d.norm() / ref.norm().clamp_min(1e-30)).item()
    return max_abs, rel


_SKIP_EXC = (NotImplementedError, RuntimeError, ValueError, TypeError, AssertionError)


def run_gpu(args) -> int:
    import torch

    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    causals = [False, True] if args.causal_both else [bool(args.causal)]
    B, Hq, Hkv, L, S = args.B, args.H, args.Hkv, args.L, args.S
    gqa = Hq != Hkv
    timer, timer_desc = _get_timer(args.warmup, args.iters)

    ffpa, info, note = (None, None, "")
    if any(base_kernel(k) in OUR_KERNELS for k in args.kernels):
        ffpa, info, note = _build_info()
    if note:
        print(f"note: {note}", file=sys.stderr)
    families = set(info.get("families", [])) if info else None
    head_dims = (info.get("head_dims") or {}) if info else {}

    kernels = []
    for kname in args.kernels:
        if base_kernel(kname) in OUR_KERNELS:
            if ffpa is None:
                print(f"note: skipping {kname}: ffpa_attn unavailable", file=sys.stderr)
                continue
            if kname != "ffpa_auto" and families is not None and base_kernel(kname) not in families:
                print(f"note: skipping {kname}: not in this build "
                      f"(families={sorted(families)})", file=sys.stderr)
                continue
            if kname == "ffpa_auto" and families is not None and not families:
                print("note: skipping ffpa_auto: build has no kernel families", file=sys.stderr)
                continue
        kernels.append(kname)

    device = torch.cuda.get_device_name()
    print(f"device: {device} | torch {torch.__version__} CUDA {torch.version.cuda} | "
          f"timer: {timer_desc}", file=sys.stderr)
    print(f"shape: B={B} Hq={Hq} Hkv={Hkv} L={L} S={S} D={args.D} dtypes={args.dtype} "
          f"causal={causals} kernels={kernels}", file=sys.stderr)

    results, skipped, failures = [], [], []
    prog = _Progress(len(args.dtype) * len(causals) * len(args.D) * max(len(kernels), 1))
    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed)

    def skip(kname, dt, D, causal, reason):
        skipped.append({"kernel": kname, "dtype": dt, "D": D, "causal": causal,
                        "reason": reason})

    for dt in args.dtype:
        dtype = dtypes[dt]
        for causal in causals:
            for D in args.D:
                Dv = args.Dv if args.Dv is not None else D
                q = k = v = ref = None
                try:
                    q = torch.randn(B, Hq, L, D, device="cuda", dtype=dtype, generator=gen)
                    k = torch.randn(B, Hkv, S, D, device="cuda", dtype=dtype, generator=gen)
                    v = torch.randn(B, Hkv, S, Dv, device="cuda", dtype=dtype, generator=gen)
                    base_err = None
                    expand_cache = {}
                    if args.check:
                        ref = _reference(q, k, v, causal)
                        try:  # baseline error, even when sdpa_efficient is not timed
                            _, o, _ = _first_call(BASELINE, q, k, v, causal, gqa, None,
                                                  expand_cache)
                            base_err = _errors(o, ref)
                            del o
                        except _SKIP_EXC as e:
                            prog.write(f"note: {BASELINE} baseline failed for D={D}: {e}")
                except torch.OutOfMemoryError as e:
                    prog.write(f"skip D={D} {dt} causal={causal}: OOM allocating inputs ({e})")
                    for kname in kernels:
                        skip(kname, dt, D, causal, "OOM allocating inputs")
                        prog.update(f"{kname} D={D} (OOM)")
                    q = k = v = ref = None
                    torch.cuda.empty_cache()
                    continue

                for kname in kernels:
                    desc = f"{dt}{' causal' if causal else ''} D={D} {kname}"
                    if kname == "fa2" and max(D, Dv) > FA2_MAX_D:
                        skip(kname, dt, D, causal, f"fa2 only for D <= {FA2_MAX_D}")
                        prog.update(desc + " (skip)")
                        continue
                    hd = head_dims.get(base_kernel(kname))
                    if hd and D not in set(int(x) for x in hd):
                        skip(kname, dt, D, causal, "head dim not in build_info")
                        prog.update(desc + " (skip)")
                        continue
                    rec = {"kernel": kname, "dtype": dt, "B": B, "Hq": Hq, "Hkv": Hkv,
                           "L": L, "S": S, "D": D, "Dv": Dv, "causal": causal}
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            # first call also surfaces "unsupported shape"
                            fn, out, expanded = _first_call(kname, q, k, v, causal, gqa,
                                                            ffpa, expand_cache)
                            if expanded:
                                rec["gqa_expanded"] = True
                            if args.check:
                                mae, rel = _errors(out, ref)
                                rec["max_abs_err"], rec["rel_err"] = mae, rel
                                if not is_sdpa(kname):
                                    if base_err is None:
                                        rec["check_ok"] = None
                                    else:
                                        tol = CHECK_FACTOR * base_err[0] + CHECK_ATOL
                                        rec["check_tol"] = tol
                                        rec["check_ok"] = bool(mae <= tol)
                                        if not rec["check_ok"]:
                                            failures.append(
                                                f"{kname} {dt} causal={causal} D={D}: "
                                                f"max_abs_err {mae:.3e} > tol {tol:.3e} "
                                                f"(SDPA EA err {base_err[0]:.3e})")
                                            prog.write("CHECK FAIL: " + failures[-1])
                            del out
                            ms = timer(fn)
                    except _SKIP_EXC as e:
                        msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
                        skip(kname, dt, D, causal, f"{type(e).__name__}: {msg}")
                        if isinstance(e, torch.OutOfMemoryError):
                            torch.cuda.empty_cache()
                        prog.update(desc + " (skip)")
                        continue
                    rec["ms"] = ms
                    rec["tflops"] = compute_tflops(B, Hq, L, S, D, Dv, causal, ms)
                    results.append(rec)
                    prog.update(f"{desc} {rec['tflops']:.1f} TFLOPS")
                del q, k, v, ref, expand_cache
                torch.cuda.empty_cache()
    prog.close()

    data = {
        "device": device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "args": {k: v for k, v in vars(args).items()},
        "results": results,
        "timer": timer_desc,
        "build_info": info,
        "skipped": skipped,
    }
    os.makedirs(args.out_dir, exist_ok=True)
    jdir = os.path.dirname(args.json)
    if jdir:
        os.makedirs(jdir, exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(data, f, indent=2, default=str)
    print(f"wrote {args.json}")

    if args.gen_bench or args.plot:
        write_outputs(data, args.out_dir, gen_bench=args.gen_bench, plot=args.plot)
    else:
        for md in make_tables(data).values():
            print(md)
    for s in skipped:
        print(f"skipped: {s['kernel']} {s['dtype']} causal={s['causal']} D={s['D']}: "
              f"{s['reason']}", file=sys.stderr)
    if failures:
        print("\nCHECK FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
