"""The pure (CPU-only) half of bench/bench.py: kernel names and labels, FLOP accounting, what
ffpa_auto ran, grouping of results and markdown tables (the PNG plots are in bench_plot.py).
bench.py re-exports everything here; tests load it through bench.py.

A result is a dict with kernel, dtype, B, Hq, Hkv, L, S, D, Dv, causal, mask ("none" or
"blocksparse"; absent in older JSON = "none"), ms, tflops, optional check/expand fields and, for
ffpa_auto, "auto_kernel" (what it ran; absent in older JSON).
"""
from __future__ import annotations

import math
import os
import re
from collections import OrderedDict

# --------------------------------------------------------------------------
# Kernel registry
# --------------------------------------------------------------------------
SDPA_KERNELS = ["sdpa_efficient", "sdpa_flash", "sdpa_cudnn", "sdpa_math"]
OUR_KERNELS = ["ffpa_l1", "ffpa_l2", "ffpa_l3", "fa2", "ffpa_auto"]
# Variants of our kernels a sweep may name besides those: fa2_sync is the FA-2 family forced onto
# its mma.sync kernel (ffpa_attn.set_fa2_mma("sync")), to compare it with the wgmma kernel that
# "fa2" runs on Hopper. Its compiled head dims are those of "fa2".
OUR_VARIANTS = {"fa2_sync": "fa2"}
BASELINE = "sdpa_efficient"
# Speedup rows are drawn against each of these that ran (SDPA FA and cuDNN: head dims <= 256 only;
# cuDNN is SDPA's default on Hopper there).
SPEEDUP_BASELINES = ["sdpa_efficient", "sdpa_flash", "sdpa_cudnn"]
MASKS = ["none", "blocksparse"]

LABELS = {
    "sdpa_efficient": "SDPA EA",
    "sdpa_flash": "SDPA FA",
    "sdpa_cudnn": "SDPA cuDNN",
    "sdpa_math": "SDPA Math",
    "ffpa_l1": "FFPA L1",
    "ffpa_l2": "FFPA L2",
    "ffpa_l3": "FFPA L3",
    "fa2": "FA2 (ours)",
    "fa2_sync": "FA2 mma.sync (ours)",
    "ffpa_auto": "FFPA auto",
}

# --check criterion: ours fails if err > CHECK_FACTOR * err(sdpa_efficient) + CHECK_ATOL
CHECK_FACTOR = 2.0
CHECK_ATOL = 1e-3

FAIL_MARK = "!"
EXPAND_MARK = "*"

_VARIANT = re.compile(r"^(ffpa_l[123])(?:_s([1-4]))?(?:_(fp16|mixed)acc)?$")


def split_variant(kernel: str):
    """'ffpa_l1_s3' -> ('ffpa_l1', 3): a level forced to a pipeline depth; else (kernel, None).
    A trailing '_fp16acc' / '_mixedacc' (see acc_variant) does not change the base."""
    m = _VARIANT.match(kernel)
    return (m.group(1), int(m.group(2)) if m.group(2) else None) if m else (kernel, None)


def acc_variant(kernel: str) -> str:
    """The MMA accumulation a kernel name asks for: 'ffpa_l2_fp16acc' -> 'fp16', else 'auto'."""
    m = _VARIANT.match(kernel)
    return m.group(3) if m and m.group(3) else "auto"


def base_kernel(kernel: str) -> str:
    return split_variant(kernel)[0]


def family_of(kernel: str) -> str:
    """The build family (build_info names) whose compiled head dims a kernel name runs."""
    base = base_kernel(kernel)
    return OUR_VARIANTS.get(base, base)


def label(kernel: str) -> str:
    base, stages = split_variant(kernel)
    acc = acc_variant(kernel)
    return (LABELS.get(base, base) + (f" ({stages} stages)" if stages else "")
            + (f" ({acc} acc)" if acc != "auto" else ""))


def is_sdpa(kernel: str) -> bool:
    return kernel.startswith("sdpa_")


# --------------------------------------------------------------------------
# What ffpa_auto ran
# --------------------------------------------------------------------------
# A ffpa_auto result records what the call ran in "auto_kernel": a family, or "sdpa" where
# ffpa_attn fell back to torch SDPA. Short names for labels:
AUTO_NAMES = {"fa2": "FA-2", "ffpa_l1": "L1", "ffpa_l2": "L2", "ffpa_l3": "L3", "sdpa": "SDPA fallback"}
AUTO_RAN_ROW = "FFPA auto ran"  # the table row that says it per head dim
FFPA_LEVELS = ("ffpa_l1", "ffpa_l2", "ffpa_l3")


def compiled_pairs(info):
    """family -> set of compiled (E, Ev) pairs from a build_info() dict (None: unknown)."""
    if not info:
        return None
    pairs = info.get("head_dim_pairs") or {
        f: [[d, d] for d in dims] for f, dims in (info.get("head_dims") or {}).items()}
    return {f: {(int(e), int(ev)) for e, ev in ps} for f, ps in pairs.items()}


def auto_pick(pairs, D, Dv, pick_level=None):
    """The family an auto call runs at head dims (D, Dv) on a build with these compiled pairs:
    "fa2" where the pair is compiled for FA-2, else the FFPA level that ``pick_level(levels)``
    (ffpa_attn._C.pick_ffpa_level) picks among the levels compiled for it. Without
    ``pick_level``, a level only where it is the one compiled. None: unknown or none compiled."""
    if (D, Dv) in pairs.get("fa2", ()):
        return "fa2"
    levels = [int(f[-1]) for f in FFPA_LEVELS if (D, Dv) in pairs.get(f, ())]
    if pick_level is not None and levels:
        level = pick_level(levels)
    elif len(levels) == 1:
        level = levels[0]
    else:
        return None
    return f"ffpa_l{level}" if level in levels else None


def auto_ran(r, pairs):
    """What the ffpa_auto result ``r`` ran: its recorded "auto_kernel"; for JSON written before
    bench.py recorded it, derived from the run's compiled pairs (``pairs``, from its build_info)
    with auto_pick; None where neither tells."""
    if r.get("auto_kernel"):
        return r["auto_kernel"]
    if pairs is None:
        return None
    D = int(r["D"])
    return auto_pick(pairs, D, int(r.get("Dv", D)))


def auto_name(kernel) -> str:
    """'fa2' -> 'FA-2', 'ffpa_l3' -> 'L3', None -> '?'."""
    return AUTO_NAMES.get(kernel, kernel) if kernel else "?"


def auto_label(kernel) -> str:
    """Label of ffpa_auto when it ran ``kernel`` (None: unknown): 'FFPA auto (FA-2)'."""
    return label("ffpa_auto") + (f" ({auto_name(kernel)})" if kernel else "")


def auto_columns(results_json, cells, cols) -> dict:
    """{column: what ffpa_auto ran there (None: unknown)} for the columns with an ffpa_auto cell."""
    pairs = compiled_pairs(results_json.get("build_info"))
    return {c: auto_ran(cells[("ffpa_auto", c)], pairs) for c in cols if ("ffpa_auto", c) in cells}


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
    """FLOPs of attention forward: 2*B*Hq*pairs*(D + Dv) (QK^T plus PV).

    Masks other than causal are not counted: a masked run is measured on the dense
    (or causal) count, so its TFLOPS compare as time ratios (see make_tables)."""
    Dv = D if Dv is None else Dv
    pairs = causal_pairs(L, S) if causal else int(L) * int(S)
    return 2 * int(B) * int(Hq) * pairs * (int(D) + int(Dv))


def compute_tflops(B, Hq, L, S, D, Dv, causal, ms) -> float:
    """TFLOPS for a run that took ``ms`` milliseconds."""
    if ms is None or ms <= 0:
        return float("nan")
    return attn_flops(B, Hq, L, S, D, Dv, causal) / (ms * 1e-3) / 1e12


# --------------------------------------------------------------------------
# Grouping / formatting
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
    known = SDPA_KERNELS + OUR_KERNELS + list(OUR_VARIANTS)
    ks = list(dict.fromkeys(kernels))
    return sorted(ks, key=lambda k: (known.index(base_kernel(k)) if base_kernel(k) in known else len(known), k))


def _shape_key(r):
    return (int(r["B"]), int(r["Hq"]), int(r["Hkv"]), int(r["L"]), int(r["S"]))


def result_mask(r) -> str:
    return str(r.get("mask") or "none")


def group_results(results_json) -> "OrderedDict[str, dict]":
    """Group results by (dtype, causal, mask[, shape]) -> {tag: {dtype, causal, mask, shape, results}}.

    The tag is ``<dtype>[_causal][_<mask>]`` (no suffix for mask "none"); if one
    (dtype, causal, mask) combo holds several (B, Hq, Hkv, L, S) shapes, a shape suffix is
    appended.
    """
    results = list(results_json.get("results", []))
    combos: "OrderedDict[tuple, OrderedDict]" = OrderedDict()
    for r in results:
        key = (str(r["dtype"]), bool(r["causal"]), result_mask(r))
        combos.setdefault(key, OrderedDict()).setdefault(_shape_key(r), []).append(r)
    # stable order: dtype order of appearance, non-causal before causal, masks in MASKS order
    dtypes = list(dict.fromkeys(k[0] for k in combos))
    masks = MASKS + sorted({k[2] for k in combos} - set(MASKS))
    out: "OrderedDict[str, dict]" = OrderedDict()
    for dt in dtypes:
        for causal in (False, True):
            for mask in masks:
                shapes = combos.get((dt, causal, mask))
                if not shapes:
                    continue
                base = dt + ("_causal" if causal else "") + ("" if mask == "none" else f"_{mask}")
                for shape, rs in shapes.items():
                    tag = base
                    if len(shapes) > 1:
                        B, Hq, Hkv, L, S = shape
                        tag = f"{base}_B{B}_H{Hq}_Hkv{Hkv}_L{L}_S{S}"
                    out[tag] = {"dtype": dt, "causal": causal, "mask": mask, "shape": shape,
                                "results": rs}
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


def _speedup(cells, kernel, col, baseline=BASELINE):
    ours = cells.get((kernel, col))
    base = cells.get((baseline, col))
    if not ours or not base:
        return None
    try:
        t_ours, t_base = float(ours["tflops"]), float(base["tflops"])
    except (TypeError, ValueError, KeyError):
        return None
    if not (math.isfinite(t_ours) and math.isfinite(t_base)) or t_base <= 0:
        return None
    return t_ours / t_base


def speedup_series(cells, cols, kernels):
    """[(ours, baseline, [ratio or None per column])] for every (ours, baseline) pair with at
    least one number: each of ours against each SPEEDUP_BASELINES kernel that ran."""
    series = []
    for base in SPEEDUP_BASELINES:
        if base not in kernels:
            continue
        for k in kernels:
            if is_sdpa(k):
                continue
            vals = [_speedup(cells, k, c, base) for c in cols]
            if any(v is not None for v in vals):
                series.append((k, base, vals))
    return series


def _md_row(cells):
    return "| " + " | ".join(cells) + " |"


def _title(g, device):
    extra = "" if g["mask"] == "none" else f", mask {g['mask']}"
    return f"### {g['dtype']}{' causal' if g['causal'] else ''}{extra} — {device}"


def make_tables(results_json) -> "OrderedDict[str, str]":
    """Markdown tables, one per (dtype, causal, mask): {"bench_<tag>": markdown}.

    Rows: SDPA EA TFLOPS, other SDPA backends that ran, each of our kernels' TFLOPS (after
    FFPA auto's, a "FFPA auto ran" row: FA-2 / L1 / L2 / L3 per head dim, "?" where unknown), then
    "<ours> speedup vs SDPA EA", "... vs SDPA FA" and "... vs SDPA cuDNN" rows (where that
    baseline ran and the row has a number).  Missing cells are "-"; cells whose --check failed get a
    trailing "!".  Masked runs count dense flops (noted under the table).
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
            _title(g, device),
            "",
            (f"Device: {device} | dtype: {g['dtype']} | B={B} H={Hq} Hkv={Hkv} "
             f"L={L} S={S} | causal: {g['causal']} | mask: {g['mask']} | torch {torch_v} "
             f"CUDA {cuda_v} | date: {date}"),
            "",
            _md_row(["Kernel (TFLOPS)"] + [_col_label(c) for c in cols]),
            _md_row(["---"] + ["---:"] * len(cols)),
        ]
        any_fail = any_expanded = any_unknown = False
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
            if k == "ffpa_auto":
                ran = auto_columns(results_json, cells, cols)
                any_unknown = None in ran.values()
                lines.append(_md_row([AUTO_RAN_ROW] + [auto_name(ran[c]) if c in ran else "-"
                                                       for c in cols]))
        for k, base, vals in speedup_series(cells, cols, kernels):
            lines.append(_md_row([f"{label(k)} speedup vs {label(base)}"] + [fmt_speedup(v) for v in vals]))
        if g["mask"] != "none":
            lines += ["", f"Mask `{g['mask']}`: TFLOPS count the dense flops "
                      f"({'causal pairs' if g['causal'] else 'every (query, key) pair'}, masked or "
                      "not), so they and the speedups read as time ratios, not useful work."]
        if any_unknown:
            lines += ["", f"`?` in \"{AUTO_RAN_ROW}\": the results JSON does not record which kernel "
                      "auto ran there, and its build_info does not settle it."]
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
        from bench_plot import make_plots  # matplotlib only when plotting

        written += make_plots(results_json, out_dir)
    if echo:
        for p in written:
            print(f"wrote {p}")
    return written
