#!/usr/bin/env bash
# Development probe (prepared in session 43, compiled, not yet run): the warp-specialised FA-2 kernel with
# two Q slots (fa2_q_slots.patch: Fa2FwdWs kQSlots = 2, a StageRing<2> for Q and an item word per slot, so
# the producer loads the next item's Q while this item runs) against today's one slot, in one process
# (FFPA_DEV_WS=1 picks it; compiled where the second slot costs no K/V stage: D <= 64 both tiles, D = 96's
# 128 x 128 tile). Why: session 43's ncu at B=64 H=16 N=256 D=64 (docs/hopper_profile.md): our instructions
# no more than cuDNN's, 14% more cycles, more fixed-latency and long-scoreboard stalls; with 2 key tiles an
# item, the next item's Q is requested only once both consumers have done this item's last S. Builds the
# FA-2 family (bf16 + fp16, D = 64 / 96, sm_90a), runs the FA-2 GPU tests with the variant on (outputs
# poisoned), memcheck / racecheck / synccheck with it on (more items than SMs: each slot reused; a negative
# scale: Q flipped in its slot), then fa2_ws_variants.py 0,1,0,1 beside cuDNN (an A/A inside the A/B);
# reverts the patch. Writes to $OUT. ptxas (local, CUDA 13.0): no C7515 / C7517, no spills.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_q_slots.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-64,96} FFPA_DTYPES=fp16,bf16 FFPA_EXPECT_EXTENSION=1
t0=$(date +%s)
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s; ptxas warnings: $(grep -c 'C751' "$OUT/build.log")"
(cd tests && PYTHONPATH=$PWD/.. FFPA_DEV_WS=1 timeout 200 python3 -m pytest -q -p no:cacheprovider -x test_fa2_gpu.py test_fa2_hopper_gpu.py \
  > "$OUT/pytest.log" 2>&1; echo "tests (variant on): $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head)
cat > "$OUT/san.py" <<'P'
import torch, ffpa_attn
from torch.nn.attention import SDPBackend, sdpa_kernel
H = torch.cuda.get_device_properties(0).multi_processor_count + 9  # more items than blocks: slots reused
for D, L, S in ((64, 133, 1100), (64, 197, 197), (96, 197, 203)):
    for causal in (False, True):
        q = torch.randn(1, H, L, D, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(1, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        out = ffpa_attn.forward(q, k, v, is_causal=causal, scale=-0.1 if causal else None, strict=True)
        with sdpa_kernel(SDPBackend.MATH):  # (the fp32 efficient kernel reports racecheck hazards of its own)
            ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal,
                                                                   scale=-0.1 if causal else None)
        print(D, L, S, causal, float((out.float() - ref).abs().max()))
P
for tool in memcheck racecheck synccheck; do
  PYTHONPATH=$PWD FFPA_DEV_WS=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 python3 "$OUT/san.py" > "$OUT/$tool.log" 2>&1
  echo "$tool (variant on): exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1)"
done
PYTHONPATH=$PWD DIMS="${DIMS:-64 96}" SHAPES="${SHAPES:-128x12x197 64x16x256 32x16x512 8x16x2048 1x32x8192}" \
  python3 scripts/dev/fa2_ws_variants.py 0,1,0,1 2>&1 | grep -v Warn
