#!/usr/bin/env python3
"""Benchmark ffpa_attn kernels against PyTorch SDPA backends.

Run from the repository root::

    python bench/bench.py                          # full default sweep (needs a CUDA GPU)
    python bench/bench.py --quick --check --gen-bench --plot
    python bench/bench.py --preset fa2 --dtype bf16 fp16 --causal-both --check --gen-bench
    python bench/bench.py --mask blocksparse --D 128 256 512 --gen-bench
    python bench/bench.py --preset decode --dtype bf16 fp16 --gen-bench   # bench_decode.py
    python bench/bench.py --preset fp8 --gen-bench                        # bench_fp8.py
    python bench/bench.py --from-json bench/out/bench.json --gen-bench --plot   # no GPU

Owns main() and the GPU timing loop; the flags are in bench_cli.py, kernel names, FLOP
accounting and tables in bench_report.py, plots in bench_plot.py (all re-exported here).  The
module is importable (tests load it with importlib); the pure helpers are ``causal_pairs``,
``attn_flops``, ``compute_tflops``, ``blocksparse_mask``, ``make_tables``, ``make_plots``,
``parse_args``, ``resolve_args`` and ``main(argv)``.

Each ffpa_auto result records what the call ran (``"auto_kernel"``: fa2, ffpa_l1..3, or sdpa
for a fallback), which the tables and plots name.

Timing (bench_timing.py, ``time_interleaved``): CUDA events around single calls, interleaved across
the kernels of one cell, in shuffled rounds with the L2 evicted before every call; each kernel's
figure is the median of its rounds. After each kernel's checked first call and ``--warmup`` ms of
untimed calls, the rounds run for about ``--iters`` ms per kernel.
"""
from __future__ import annotations

import datetime as _dt
import importlib
import json
import os
import re
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_report import (  # noqa: E402  (re-exported: tests use bench.<name>)
    BASELINE,
    CHECK_ATOL,
    CHECK_FACTOR,
    EXPAND_MARK,
    FAIL_MARK,
    LABELS,
    MASKS,
    OUR_KERNELS,
    OUR_VARIANTS,
    SDPA_KERNELS,
    SPEEDUP_BASELINES,
    _VARIANT,
    acc_variant,
    attn_flops,
    auto_pick,
    auto_ran,
    base_kernel,
    causal_pairs,
    compiled_pairs,
    compute_tflops,
    family_of,
    group_results,
    is_sdpa,
    label,
    make_tables,
    split_variant,
    write_outputs,
)
from bench_plot import (  # noqa: E402
    kernel_color,
    make_plots,
    missing_plot_deps,
    plot_deps_message,
    plot_title,
)
from bench_timing import (  # noqa: E402  (also under the old names, which tests and scripts/dev use)
    MAX_ROUNDS,
    MIN_ROUNDS,
    l2_flusher as _l2_flusher,
    time_interleaved as _time_interleaved,
    timer_desc as _timer_desc,
)
from bench_cli import (  # noqa: E402
    DEFAULT_KERNELS,
    MASK_BLOCK,
    PRESETS,
    build_parser,
    parse_args,
    parse_shape,
    resolve_args,
)

__all__ = [
    "BASELINE", "CHECK_ATOL", "CHECK_FACTOR", "EXPAND_MARK", "FAIL_MARK", "LABELS", "MASKS",
    "OUR_KERNELS", "SDPA_KERNELS", "SPEEDUP_BASELINES", "attn_flops", "base_kernel",
    "causal_pairs", "compute_tflops", "group_results", "is_sdpa", "label", "make_plots",
    "make_tables", "split_variant", "write_outputs", "auto_pick", "auto_ran", "compiled_pairs",
    "kernel_color", "missing_plot_deps", "plot_title", "blocksparse_mask", "DEFAULT_KERNELS",
    "PRESETS", "parse_shape", "build_parser", "parse_args", "resolve_args", "main",
]



# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------
def blocksparse_mask(L: int, S: int, block: int = MASK_BLOCK, device=None, causal: bool = False):
    """Bool mask (1, 1, L, S), True = attend: ``block`` x ``block`` tiles in a checkerboard (half
    of them masked), the diagonal tiles (row tile i: column tile min(i, last)) kept so no row is
    empty; with ``causal`` also the top-left causal mask (is_causal cannot go with a mask)."""
    import torch

    bi = torch.arange(L, device=device).unsqueeze(-1) // block
    bj = torch.arange(S, device=device) // block
    last = (S - 1) // block
    keep = ((bi + bj) % 2 == 0) | (bj == bi.clamp(max=last))
    if causal:
        keep &= torch.arange(S, device=device) <= torch.arange(L, device=device).unsqueeze(-1)
    return keep.view(1, 1, L, S)


def _die(msg, code=2):
    print(f"bench.py: error: {msg}", file=sys.stderr)
    return code


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.from_json:
        try:
            with open(args.from_json) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            return _die(f"cannot read results JSON {args.from_json!r}: {e}")
        gen, plot = args.gen_bench, args.plot
        if not gen and not plot:  # neither asked for: both, plots where they can be drawn
            missing = missing_plot_deps()
            gen, plot = True, not missing
            if missing:
                print(f"note: no plots: {plot_deps_message(missing)}", file=sys.stderr)
        write_outputs(data, args.out_dir, gen_bench=gen, plot=plot)
        return 0

    if args.preset == "decode":  # its own sweep and table (bench_decode.py)
        import bench_decode

        argv2 = ["--dtype", *args.dtype, "--out-dir", args.out_dir] + (["--gen-bench"] if args.gen_bench else [])
        argv2 += (["--warmup", str(args.warmup)] if args.warmup is not None else [])
        argv2 += (["--iters", str(args.iters)] if args.iters is not None else [])
        return bench_decode.main(argv2)
    if args.preset == "fp8":  # its own sweep and table (bench_fp8.py)
        import bench_fp8

        argv2 = ["--out-dir", args.out_dir] + (["--gen-bench"] if args.gen_bench else [])
        argv2 += (["--warmup", str(args.warmup)] if args.warmup is not None else [])
        argv2 += (["--iters", str(args.iters)] if args.iters is not None else [])
        return bench_fp8.main(argv2)
    args = resolve_args(args)
    if args.stages:  # forced pipeline depths: ffpa_lX_sN variants of every requested level
        args.kernels = list(args.kernels) + [f"{k}_s{n}" for k in args.kernels if _VARIANT.match(f"{k}_s1")
                                             for n in args.stages]
    if args.acc:  # accumulation variants ffpa_lX_<acc>acc of every requested level
        args.kernels = list(args.kernels) + [f"{k}_{a}acc" for k in args.kernels
                                             if re.fullmatch(r"ffpa_l[123]", k) for a in args.acc]
    unknown = [k for k in args.kernels if base_kernel(k) not in SDPA_KERNELS + OUR_KERNELS + list(OUR_VARIANTS)]
    if unknown:
        return _die(f"unknown kernel(s) {unknown}; choose from {SDPA_KERNELS + OUR_KERNELS + list(OUR_VARIANTS)}")
    for _, H, Hkv, _, _ in args.shapes:
        if H % Hkv != 0:
            return _die(f"--H ({H}) must be a multiple of --Hkv ({Hkv})")
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


def _make_fn(kernel, q, k, v, causal, gqa, ffpa, mask=None):
    """The closure timed for ``kernel``. With a mask (causal already folded into it) every
    kernel gets attn_mask=mask and is_causal=False (SDPA rejects both together)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if mask is not None:
        causal = False
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
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                                      enable_gqa=gqa)
        return fn
    levels = {"ffpa_l1": 1, "ffpa_l2": 2, "ffpa_l3": 3}
    base, stages = split_variant(kernel)
    kw = dict(attn_mask=mask, is_causal=causal, enable_gqa=gqa)
    if base in levels:
        lvl, acc = levels[base], acc_variant(kernel)
        return lambda: ffpa.forward(q, k, v, strict=True, level=lvl, num_stages=stages, acc=acc, **kw)
    if kernel == "fa2":  # auto routing, strict: the FA-2 family where the head dims are compiled for it
        return lambda: ffpa.forward(q, k, v, strict=True, level=None, **kw)
    if kernel == "fa2_sync":  # the same on the mma.sync kernel (differs from fa2 on Hopper only)
        def fn_sync():
            ffpa.set_fa2_mma("sync")
            try:
                return ffpa.forward(q, k, v, strict=True, level=None, **kw)
            finally:
                ffpa.set_fa2_mma("auto")
        return fn_sync
    if kernel == "ffpa_auto":
        return lambda: ffpa.forward(q, k, v, **kw)
    raise ValueError(kernel)


def _first_call(kernel, q, k, v, causal, gqa, ffpa, expand_cache, mask=None):
    """Build the kernel's closure and call it once -> (fn, out, gqa_expanded).

    SDPA backends without native GQA support (e.g. EFFICIENT_ATTENTION in
    torch 2.11 rejects enable_gqa=True) are retried with K/V pre-expanded to Hq
    heads; the expansion happens once, outside the timed closure.
    """
    import torch
    fn = _make_fn(kernel, q, k, v, causal, gqa, ffpa, mask)
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
        fn = _make_fn(kernel, q, kx, vx, causal, False, ffpa, mask)
        out = _unwrap(fn())
        torch.cuda.synchronize()
        return fn, out, True


def _unwrap(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def _reference(q, k, v, causal, mask=None):
    """fp32 SDPA-math reference, computed in head chunks to bound memory (a mask already holds
    the causal part)."""
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
                        qc, kc, vc, attn_mask=mask, is_causal=causal and mask is None)
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


def _auto_kernel(sw, q, k, v, causal, gqa, mask):
    """What ffpa_auto runs on these inputs (a result's "auto_kernel"): "sdpa" where a strict call
    is refused (auto falls back to torch SDPA), else the family the chooser picks on this device
    (ffpa_attn._C.route; without it, the build's head-dim pairs and the level heuristic,
    ffpa_attn._C.pick_ffpa_level); None where that is unknown."""
    try:  # strict refusals raise before any launch
        sw.ffpa.forward(q, k, v, attn_mask=mask, is_causal=causal and mask is None,
                        enable_gqa=gqa, strict=True)
    except NotImplementedError:
        return "sdpa"
    except _SKIP_EXC:
        return None
    if sw.pairs is None:
        return None
    B, Hq, L, D = q.shape
    S, Dv = k.shape[2], v.shape[3]
    try:
        C = importlib.import_module("ffpa_attn._C")
    except ImportError:
        return auto_pick(sw.pairs, D, Dv)
    route = getattr(C, "route", None)  # the chooser itself, on this device (knows the Hopper kernels)
    if route is not None:
        try:
            got = route("fwd", str(q.dtype).replace("torch.", ""), D, Dv, 0, 0, L, S, B * Hq)
        except (ValueError, RuntimeError):
            got = None
        if got is not None:
            return got["family"]
    pick = getattr(C, "pick_ffpa_level", None)
    if pick is None:
        return auto_pick(sw.pairs, D, Dv)
    return auto_pick(sw.pairs, D, Dv, lambda levels: pick(D, Dv, L, S, B * Hq, levels))


def _static_skip(kname, D, Dv, pairs, mask):
    """Why ``kname`` cannot run head dims (D, Dv) with this mask, before trying (None: try)."""
    base = family_of(kname)
    if base == "sdpa_flash" and mask != "none":
        return "sdpa_flash takes no attn_mask"
    if pairs is not None and base in ("fa2", "ffpa_l1", "ffpa_l2", "ffpa_l3"):
        if (D, Dv) not in pairs.get(base, set()):
            return f"head dims ({D}, {Dv}) not compiled for {base} (build_info head_dim_pairs)"
    return None


def _select_kernels(args, ffpa, info):
    families = set(info.get("families", [])) if info else None
    kernels = []
    for kname in args.kernels:
        if base_kernel(kname) in OUR_KERNELS or base_kernel(kname) in OUR_VARIANTS:
            if ffpa is None:
                print(f"note: skipping {kname}: ffpa_attn unavailable", file=sys.stderr)
                continue
            if kname != "ffpa_auto" and families is not None and family_of(kname) not in families:
                print(f"note: skipping {kname}: not in this build "
                      f"(families={sorted(families)})", file=sys.stderr)
                continue
            if kname == "ffpa_auto" and families is not None and not families:
                print("note: skipping ffpa_auto: build has no kernel families", file=sys.stderr)
                continue
        kernels.append(kname)
    return kernels


class _Sweep:
    """State of one run: what was measured, skipped or failed, and how to time it."""

    def __init__(self, args, kernels, ffpa, pairs, prog):
        self.args, self.kernels, self.ffpa, self.pairs = args, kernels, ffpa, pairs
        self.prog = prog
        self.flush = _l2_flusher()
        self.results, self.skipped, self.failures = [], [], []

    def skip(self, kname, dt, D, causal, shape, reason):
        B, Hq, Hkv, L, S = shape
        self.skipped.append({"kernel": kname, "dtype": dt, "D": D, "causal": causal,
                             "mask": self.args.mask, "B": B, "Hq": Hq, "Hkv": Hkv, "L": L, "S": S,
                             "reason": reason})


def _run_cell(sw, shape, dt, dtype, causals, D, gen):
    """Every kernel at one (shape, dtype, D), causal and not as asked: inputs, optional check, then one
    interleaved timing of all of them (so causal against non-causal compares calls made at the same
    clocks: cells timed minutes apart drifted by 5-15% on one H100, session 27)."""
    import torch

    args = sw.args
    B, Hq, Hkv, L, S = shape
    Dv = args.Dv if args.Dv is not None else D
    try:
        q = torch.randn(B, Hq, L, D, device="cuda", dtype=dtype, generator=gen)
        k = torch.randn(B, Hkv, S, D, device="cuda", dtype=dtype, generator=gen)
        v = torch.randn(B, Hkv, S, Dv, device="cuda", dtype=dtype, generator=gen)
    except torch.OutOfMemoryError as e:
        for causal in causals:
            _skip_oom(sw, shape, dt, causal, D, e)
        torch.cuda.empty_cache()
        return
    timed = []  # (fn, rec, desc) of the kernels that ran; timed together below
    for causal in causals:
        timed += _prepare_cell(sw, shape, dt, causal, D, q, k, v)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times = _time_interleaved([t[0] for t in timed], args.warmup, args.iters, sw.flush)
    for (_, rec, desc), ms in zip(timed, times):
        rec["ms"] = ms
        # Dense (or causal) flop count even with a mask: the numbers compare as time ratios.
        rec["tflops"] = compute_tflops(B, Hq, L, S, D, Dv, rec["causal"], ms)
        sw.results.append(rec)
        sw.prog.update(f"{desc} {rec['tflops']:.1f} TFLOPS")
    del timed, q, k, v
    torch.cuda.empty_cache()


def _skip_oom(sw, shape, dt, causal, D, e):
    """Every kernel of a cell whose inputs did not fit, skipped as such."""
    sw.prog.write(f"skip D={D} {dt} causal={causal}: OOM allocating inputs ({e})")
    for kname in sw.kernels:
        sw.skip(kname, dt, D, causal, shape, "OOM allocating inputs")
        sw.prog.update(f"{kname} D={D} (OOM)")


def _prepare_cell(sw, shape, dt, causal, D, q, k, v):
    """The kernels of one (shape, dtype, causal, D) on inputs q, k, v: each one's first call (and
    check), as (fn, rec, desc) for the timing."""
    import torch

    args = sw.args
    B, Hq, Hkv, L, S = shape
    gqa = Hq != Hkv
    Dv = v.shape[-1]
    ref = mask = None
    try:
        if args.mask == "blocksparse":
            mask = blocksparse_mask(L, S, device="cuda", causal=causal)
        base_err = None
        expand_cache = {}
        if args.check:
            ref = _reference(q, k, v, causal, mask)
            try:  # baseline error, even when sdpa_efficient is not timed
                _, o, _ = _first_call(BASELINE, q, k, v, causal, gqa, None, expand_cache, mask)
                base_err = _errors(o, ref)
                del o
            except _SKIP_EXC as e:
                sw.prog.write(f"note: {BASELINE} baseline failed for D={D}: {e}")
    except torch.OutOfMemoryError as e:
        _skip_oom(sw, shape, dt, causal, D, e)
        torch.cuda.empty_cache()
        return []

    timed = []
    for kname in sw.kernels:
        desc = f"{dt}{' causal' if causal else ''} B={B} H={Hq} L={L} D={D} {kname}"
        reason = _static_skip(kname, D, Dv, sw.pairs, args.mask)
        if reason is None and acc_variant(kname) != "auto" and dt != "fp16":
            reason = "fp16/mixed accumulation takes fp16 inputs"
        if reason:
            sw.skip(kname, dt, D, causal, shape, reason)
            sw.prog.update(desc + " (skip)")
            continue
        rec = {"kernel": kname, "dtype": dt, "B": B, "Hq": Hq, "Hkv": Hkv,
               "L": L, "S": S, "D": D, "Dv": Dv, "causal": causal, "mask": args.mask}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # first call also surfaces "unsupported shape"
                fn, out, expanded = _first_call(kname, q, k, v, causal, gqa, sw.ffpa,
                                                expand_cache, mask)
                if expanded:
                    rec["gqa_expanded"] = True
                if kname == "ffpa_auto":
                    rec["auto_kernel"] = _auto_kernel(sw, q, k, v, causal, gqa, mask)
                if args.check:
                    _record_check(sw, rec, out, ref, base_err, f"{kname} {dt} causal={causal} D={D}")
                del out
        except _SKIP_EXC as e:
            msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
            sw.skip(kname, dt, D, causal, shape, f"{type(e).__name__}: {msg}")
            if isinstance(e, torch.OutOfMemoryError):
                torch.cuda.empty_cache()
            sw.prog.update(desc + " (skip)")
            continue
        timed.append((fn, rec, desc))
    return timed


def _record_check(sw, rec, out, ref, base_err, what):
    mae, rel = _errors(out, ref)
    rec["max_abs_err"], rec["rel_err"] = mae, rel
    if is_sdpa(rec["kernel"]):
        return
    if base_err is None:
        rec["check_ok"] = None
        return
    tol = CHECK_FACTOR * base_err[0] + CHECK_ATOL
    acc = acc_variant(rec["kernel"])
    if acc in ("fp16", "mixed"):  # fp16 accumulation's own bound (tests/_reference.py module doc)
        steps = (rec["D"] if acc == "fp16" else 0) + rec["S"]
        tol += 4 * 2.0 ** -11 * (steps / 16) ** 0.5 * ref.abs().max().item()
    rec["check_tol"] = tol
    rec["check_ok"] = bool(mae <= tol)
    if not rec["check_ok"]:
        sw.failures.append(f"{what}: max_abs_err {mae:.3e} > tol {tol:.3e} "
                           f"(SDPA EA err {base_err[0]:.3e})")
        sw.prog.write("CHECK FAIL: " + sw.failures[-1])


def run_gpu(args) -> int:
    import torch

    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    causals = [False, True] if args.causal_both else [bool(args.causal)]
    timer_desc = _timer_desc(args.warmup, args.iters)

    ffpa, info, note = (None, None, "")
    if any(family_of(k) in OUR_KERNELS for k in args.kernels):
        ffpa, info, note = _build_info()
    if note:
        print(f"note: {note}", file=sys.stderr)
    kernels = _select_kernels(args, ffpa, info)

    device = torch.cuda.get_device_name()
    print(f"device: {device} | torch {torch.__version__} CUDA {torch.version.cuda} | "
          f"timer: {timer_desc}", file=sys.stderr)
    print(f"shapes (B, Hq, Hkv, L, S): {args.shapes} D={args.D} dtypes={args.dtype} "
          f"causal={causals} mask={args.mask} kernels={kernels}", file=sys.stderr)

    prog = _Progress(len(args.shapes) * len(args.dtype) * len(causals) * len(args.D)
                     * max(len(kernels), 1))
    sw = _Sweep(args, kernels, ffpa, compiled_pairs(info), prog)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed)
    for shape in args.shapes:
        for dt in args.dtype:
            for D in args.D:
                _run_cell(sw, shape, dt, dtypes[dt], causals, D, gen)
    prog.close()

    data = {
        "device": device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "args": {k: v for k, v in vars(args).items()},
        "results": sw.results,
        "timer": timer_desc,
        "build_info": info,
        "skipped": sw.skipped,
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
    for s in sw.skipped:
        print(f"skipped: {s['kernel']} {s['dtype']} causal={s['causal']} mask={s['mask']} "
              f"B={s['B']} H={s['Hq']} L={s['L']} D={s['D']}: {s['reason']}", file=sys.stderr)
    if sw.failures:
        print("\nCHECK FAILED:\n  " + "\n  ".join(sw.failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
