#!/usr/bin/env bash
# Session 49's prepared experiment for branch s49-no-max, one device call (~5 min): the standing max
# (attn/standing_max.cuh) in the long-key kernels against the tile max everywhere (fa2_standing_max_ab.patch,
# FFPA_DEV_WS=1 = off): build (fa2 at D = 64 / 96 / 128 / 256, bf16 and fp16), the FA-2 GPU tests at those dims
# (the standing max's own: test_fa2_scores_far_above_the_standing_max, test_fa2_one_key_near_the_float_limit,
# test_fa2_nan_key_propagates), the three sanitizers, fa2_ws_variants.py 0,1,0,1 beside cuDNN.
# On the device: OUT=$OUT bash scripts/dev/s50_probes.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
OUT=$OUT FFPA_HEAD_DIMS=64,96,128,256 DIMS="128 64 96 256" TEST_K="64 or 96 or 128 or 256" TEST_S=200 \
  SHAPES="8x16x2048 1x32x8192 16x16x1024 32x16x512 64x16x256" bash scripts/dev/fa2_patch_ab.sh fa2_standing_max_ab.patch
