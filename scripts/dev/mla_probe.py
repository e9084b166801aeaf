"""Dev probe: the MLA decode kernel's error against the float64 reference over a small grid (paged caches
hold S // page whole pages, so S is a multiple of every page size here).
Usage: PYTHONPATH=$PWD python3 scripts/dev/mla_probe.py"""
import itertools
import sys

import torch

sys.path.insert(0, "tests")
from _decode_case import run_case  # noqa: E402

for page, splits, lens, S, dt in itertools.product([0, 32, 64], [1, 2, 3, 4], [[1000, 65], [1024, 1024], [1000, 960]],
                                                   [1024], [torch.bfloat16]):
    try:
        run_case(2, 1, 128, 1, S, 576, 512, dt, lens=lens, page=page, splits=splits, v_view_of_k=True, seed=1281)
        r = "ok"
    except AssertionError as e:
        r = "FAIL " + " ".join(str(e).split("\n")[1:3])
    print(f"page {page} splits {splits} lens {lens}: {r}", flush=True)
