#!/usr/bin/env bash
# Prepared in session 51 (compiled here: D = 64 / 128 / 256 pre-pass form without spills, the opt-in in-kernel V^T
# form's transposers 108 bytes), not yet run. Causal FP8 calls on the persistent grid: fp8_causal_walk.patch gives the
# FA-2-style FP8 kernel the bf16 kernel's walk (Fa2WsItems::Walk without a work counter: pairs of query blocks M - 1 - q
# and q on one block an SM; masked calls and FFPA_DEV_WS=1 one block an item, every head in the tail: single items
# longest first, which needs fa2_tail_order.patch's order, applied first). One call of s51_fp8_persist.sh with both
# patches: build (fa2 + fp8, D = 64 / 128 / 256), the FP8 GPU tests (the persistent-walk test gains causal rows),
# fp8_probe.py 0,1,0,1 causal, the fp8 sanitizers. Land with the tail order if it wins (then fold the dev switch into
# fp8_persistent_grid and drop the early return in the test), else drop both FP8 parts.
cd "$(dirname "$0")/../.."
PATCHES="scripts/dev/fa2_tail_order.patch scripts/dev/fp8_causal_walk.patch" CAUSAL=1 \
  SHAPES="${SHAPES:-4x8x8448 1x32x8192 8x16x2048}" exec bash scripts/dev/s51_fp8_persist.sh
