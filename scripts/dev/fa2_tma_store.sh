#!/usr/bin/env bash
# Development probe (prepared in session 42, compiled, not yet run): the warp-specialised FA-2 kernel
# storing O through shared memory and TMA (fa2_tma_store.patch: Fa2FwdWs kTmaStore; each consumer packs O,
# stmatrix into a 128-byte-swizzled 64-row buffer, one cp.async.bulk.tensor store a 64-column chunk, rows
# past len_q clipped by the map; the LSE from registers) against today's epilogue (st.global from
# registers), in one process (FFPA_DEV_WS=1 picks the variant; compiled where Dv <= 128 and two K/V stages
# fit beside the buffer: D = 64 both tiles with today's 4 stages; D = 96's 128 x 128 tile and D = 128 drop from 3
# stages to 2 for the buffer, so read those cells as buffer + fewer stages). Why: session 42's ncu of
# ViT-B N = 197 and B=64 H=16 N=256 at D = 64 against SDPA cuDNN (docs/hopper_profile.md session 42): the
# same persistent 3-warpgroup structure and tile, 6% more instructions, 13-17% more cycles, and cuDNN's
# L1/TEX hit rate 0 (no LSU global traffic: its O goes out by TMA) against our 66%; session 41's trace put
# the epilogue at 1248 of an 8064-cycle item there. Builds the FA-2 family (bf16 + fp16, D = 64 / 96 / 128,
# sm_90a), runs the FA-2 GPU tests with the variant on (outputs poisoned: every row written, none past
# len_q), memcheck / racecheck / synccheck on odd lengths with it on, then fa2_ws_variants.py 0,1 beside
# cuDNN; reverts the patch. Writes to $OUT. ptxas (local, CUDA 13.0): no C7515 / C7517, no spills.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_tma_store.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-64,96,128} FFPA_DTYPES=fp16,bf16 FFPA_EXPECT_EXTENSION=1
t0=$(date +%s)
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s; ptxas warnings: $(grep -c 'C751' "$OUT/build.log")"
(cd tests && PYTHONPATH=$PWD/.. FFPA_DEV_WS=1 timeout 200 python3 -m pytest -q -p no:cacheprovider -x test_fa2_gpu.py \
  > "$OUT/pytest.log" 2>&1; echo "tests (variant on): $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head)
cat > "$OUT/san.py" <<'P'
import torch, ffpa_attn
from torch.nn.attention import SDPBackend, sdpa_kernel
for D, L, S in ((64, 133, 1100), (96, 1037, 300), (128, 250, 250)):
    for causal in (False, True):
        q = torch.randn(2, 150, L, D, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(2, 150, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        out = ffpa_attn.forward(q, k, v, is_causal=causal, strict=True)
        with sdpa_kernel(SDPBackend.MATH):  # (the fp32 efficient kernel reports racecheck hazards of its own)
            ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        print(D, causal, float((out.float() - ref).abs().max()))
P
for tool in memcheck racecheck synccheck; do
  PYTHONPATH=$PWD FFPA_DEV_WS=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 python3 "$OUT/san.py" > "$OUT/$tool.log" 2>&1
  echo "$tool (variant on): exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1)"
done
PYTHONPATH=$PWD DIMS="${DIMS:-64 96 128}" SHAPES="${SHAPES:-128x12x197 64x16x256 32x16x512 8x16x2048 1x32x8192}" \
  python3 scripts/dev/fa2_ws_variants.py 0,1 2>&1 | grep -v Warn
