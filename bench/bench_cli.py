"""The command line of bench/bench.py: flags, defaults and presets (build_parser, parse_args,
resolve_args). bench.py re-exports all of it.

Flags whose default depends on --quick or --preset parse to None; resolve_args fills them in.
"""
from __future__ import annotations

import argparse
import os

from bench_plot import missing_plot_deps, plot_deps_message
from bench_report import CHECK_ATOL, CHECK_FACTOR, MASKS, OUR_KERNELS, OUR_VARIANTS, SDPA_KERNELS

DEFAULT_KERNELS = ["sdpa_efficient", "sdpa_flash", "sdpa_cudnn"] + OUR_KERNELS
DEFAULT_D = [320, 384, 448, 512, 576, 640, 768, 1024]
FA2_D = [32, 64, 96, 128, 160, 192, 224, 256]
MASK_BLOCK = 128

QUICK = {"N": 1024, "H": 8, "D": [320, 512, 1024], "warmup": 5, "iters": 20}
DEFAULTS = {"B": 1, "H": 32, "N": 8192, "D": DEFAULT_D, "warmup": 25, "iters": 100}
# Named sweeps (explicit --shapes / --D win).  "fa2": the FA-2 family against SDPA flash,
# efficient and cuDNN at the two shapes of issue #4; "short": short sequences of vision and encoder models
# (ViT-B/16 at 224 px: 197 tokens, 12 heads of 64; 256 tokens, 16 heads; ViT-L/14 and DINOv2-L at 224 px: 257
# tokens, 16 heads of 64, one key past two 128-key tiles), where tile padding weighs most.
PRESETS = {
    "fa2": {"shapes": ["1x32x8192", "8x16x2048"], "D": FA2_D},
    "short": {"shapes": ["128x12x197", "64x16x256", "64x16x257"], "D": [64, 96, 128]},
    "decode": {},  # bench/bench_decode.py's sweep (it takes --dtype, --warmup, --iters, --out-dir, --gen-bench)
    "fp8": {},  # bench/bench_fp8.py's sweep (it takes --warmup, --iters, --out-dir, --gen-bench)
}


def parse_shape(spec: str):
    """'BxHxN' (L = S = N) or 'BxHxLxS' -> (B, H, L, S)."""
    try:
        parts = [int(x) for x in spec.lower().split("x")]
    except ValueError:
        parts = []
    if len(parts) == 3:
        parts.append(parts[2])
    if len(parts) != 4 or min(parts) <= 0:
        raise argparse.ArgumentTypeError(f"shape must be BxHxN or BxHxLxS with positive sizes, got {spec!r}")
    return tuple(parts)


def _dims(ds):
    return " ".join(map(str, ds))


def build_parser() -> argparse.ArgumentParser:
    """The CLI. Each help text names its flag's effective default once (the preset values are
    filled in by resolve_args, so the parser's own defaults are None)."""
    p = argparse.ArgumentParser(description="Benchmark ffpa_attn against torch SDPA backends.")
    p.add_argument("--B", type=int, default=None, help=f"batch size (default: {DEFAULTS['B']})")
    p.add_argument("--H", type=int, default=None,
                   help=f"query heads (default: {DEFAULTS['H']}; {QUICK['H']} with --quick)")
    p.add_argument("--Hkv", type=int, default=None,
                   help="key/value heads, H a multiple of it (default: H)")
    p.add_argument("--N", type=int, default=None,
                   help=f"sequence length, L = S = N (default: {DEFAULTS['N']}; {QUICK['N']} with --quick)")
    p.add_argument("--L", type=int, default=None, help="query length (default: N)")
    p.add_argument("--S", type=int, default=None, help="key/value length (default: N)")
    p.add_argument("--shapes", type=parse_shape, nargs="+", default=None, metavar="BxHxN",
                   help="several shapes in one run, each BxHxN or BxHxLxS (--Hkv applies to each); "
                        "replaces --B/--H/--N/--L/--S (default: the one shape those give)")
    p.add_argument("--D", type=int, nargs="+", default=None,
                   help=f"head dims (default: {_dims(DEFAULT_D)}; {_dims(QUICK['D'])} with --quick; "
                        f"{_dims(FA2_D)} with --preset fa2)")
    p.add_argument("--Dv", type=int, default=None, help="value head dim (default: D)")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help=f"named sweep: fa2 = --shapes {' '.join(PRESETS['fa2']['shapes'])} "
                        f"--D {_dims(FA2_D)}; short = --shapes {' '.join(PRESETS['short']['shapes'])} --D "
                        f"{_dims(PRESETS['short']['D'])}; explicit --shapes/--D win; decode = the split-KV decode "
                        "sweep of bench/bench_decode.py; fp8 = the FP8 sweep of bench/bench_fp8.py (default: none)")
    p.add_argument("--dtype", nargs="+", choices=["bf16", "fp16"], default=["bf16"],
                   help="input dtypes, a sweep each (default: bf16)")
    p.add_argument("--causal", action="store_true", help="causal (top-left) masking")
    p.add_argument("--causal-both", action="store_true", help="run both non-causal and causal")
    p.add_argument("--mask", choices=MASKS, default="none",
                   help=f"attn_mask given to every kernel: blocksparse = bool (1, 1, L, S), "
                        f"{MASK_BLOCK}x{MASK_BLOCK} blocks in a checkerboard, diagonal blocks kept "
                        "(with causal: ANDed with the causal mask); TFLOPS count dense flops "
                        "(default: none)")
    p.add_argument("--warmup", type=int, default=None,
                   help=f"untimed warm-up per kernel and cell, ms (default: {DEFAULTS['warmup']}; "
                        f"{QUICK['warmup']} with --quick)")
    p.add_argument("--iters", type=int, default=None,
                   help=f"timed rounds per cell: about this many ms per kernel (default: "
                        f"{DEFAULTS['iters']}; {QUICK['iters']} with --quick)")
    selectable = SDPA_KERNELS + OUR_KERNELS + list(OUR_VARIANTS)
    p.add_argument("--kernels", nargs="+", default=None, metavar="KERNEL",
                   help=f"kernels to run, of: {' '.join(selectable)}; and a level's variants "
                        "ffpa_l1_s2, ffpa_l1_fp16acc, ... (see --stages, --acc). fa2 = the FA-2 "
                        "family (strict auto routing), fa2_sync = the same forced onto its "
                        "mma.sync kernel, ffpa_auto = ffpa_attn.forward as users call it "
                        f"(default: {' '.join(DEFAULT_KERNELS)}; sdpa_math too with --with-math)")
    p.add_argument("--with-math", action="store_true", help="also time sdpa_math (slow)")
    p.add_argument("--check", action="store_true",
                   help="compare outputs with an fp32 SDPA math reference before timing; exit 1 "
                        f"when one of ours is off by more than {CHECK_FACTOR:g}x SDPA EA's error "
                        f"+ {CHECK_ATOL:g}")
    p.add_argument("--gen-bench", action="store_true",
                   help="print markdown tables and write them to --out-dir as "
                        "bench_<dtype>[_causal][_<mask>].md")
    p.add_argument("--plot", action="store_true",
                   help="write speedup/TFLOPS PNG bar plots to --out-dir (needs numpy and matplotlib)")
    p.add_argument("--out-dir", default=os.path.join("bench", "out"), metavar="DIR",
                   help="folder of the results JSON, tables and plots (default: %(default)s)")
    p.add_argument("--json", default=None, metavar="FILE",
                   help="results JSON path (default: <out-dir>/bench.json)")
    p.add_argument("--quick", action="store_true",
                   help=f"small smoke sweep: N={QUICK['N']} H={QUICK['H']} D {_dims(QUICK['D'])}, "
                        f"warmup {QUICK['warmup']} ms, iters {QUICK['iters']} ms")
    p.add_argument("--from-json", default=None, metavar="FILE",
                   help="no GPU work: load a results JSON and redraw its tables and plots, both "
                        "when neither --gen-bench nor --plot is given (default: none, time on the GPU)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: %(default)s)")
    p.add_argument("--acc", nargs="+", choices=["fp16", "mixed"], default=None,
                   help="also time each requested FFPA level with fp16 / mixed MMA accumulation "
                        "(fp16 inputs only; kernels named ffpa_l1_fp16acc, ...; default: none)")
    p.add_argument("--stages", type=int, nargs="+", choices=[1, 2, 3, 4], default=None,
                   help="also time each requested FFPA level forced to these pipeline depths "
                        "(kernels named ffpa_l1_s2, ...; default: none)")
    return p


def parse_args(argv=None) -> argparse.Namespace:
    """Parse the command line. --plot without numpy or matplotlib importable is an argparse error
    (exit 2) here, before any GPU work."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.plot:
        missing = missing_plot_deps()
        if missing:
            parser.error(plot_deps_message(missing))
    return args


def resolve_args(args) -> argparse.Namespace:
    """Fill in preset/default values (explicit flags always win).

    Sets ``args.shapes`` to the list of (B, Hq, Hkv, L, S) to run (and B/H/Hkv/L/S to the
    first of them)."""
    preset = dict(QUICK if args.quick else {})
    named = PRESETS.get(args.preset or "", {})
    if args.D is None and "D" in named:
        args.D = list(named["D"])
    if args.shapes is None and "shapes" in named:
        args.shapes = [parse_shape(s) for s in named["shapes"]]
    for key in ("B", "H", "N", "D", "warmup", "iters"):
        if getattr(args, key) is None:
            setattr(args, key, preset.get(key, DEFAULTS[key]))
    if args.shapes is None:
        args.shapes = [(args.B, args.H, args.L or args.N, args.S or args.N)]
    args.shapes = [(B, H, args.Hkv or H, L, S) for B, H, L, S in args.shapes]
    args.B, args.H, args.Hkv, args.L, args.S = args.shapes[0]
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
