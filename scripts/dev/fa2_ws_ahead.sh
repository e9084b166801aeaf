#!/usr/bin/env bash
# Development probe (prepared in session 41, compiled, not yet run): the warp-specialised FA-2 kernel with
# each consumer's next item's first S issued before its epilogue (fa2_ws_ahead.patch: Fa2FwdWs kAhead;
# O / l packed to b16 first, then the S issued on the warpgroup's turn, then the stores under it, then the
# wait), against today's kernel in one process (FFPA_DEV_WS=1 picks the variant). Short items pay the first
# S and the epilogue in full (session 41's trace, ViT-B N = 197 D = 64: first S 432 + epilogue 1248 of an
# 8064-cycle item; B=8 N=2048 D = 128: ~1000 + ~2000 of ~70000, session 20). Applies the patch, builds the
# FA-2 family (bf16, D = 64 / 96 / 128 / 256, sm_90a), runs the FA-2 GPU tests with the variant on, racecheck
# and synccheck on a shape with more items than SMs with it on, then fa2_ws_variants.py 0,1 beside cuDNN;
# reverts the patch. Writes to $OUT. ptxas (local, CUDA 13.0): no C7515 / C7517, no spills, D = 32..384.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_ws_ahead.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-64,96,128,256} FFPA_DTYPES=bf16 FFPA_EXPECT_EXTENSION=1
t0=$(date +%s)
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s; ptxas warnings: $(grep -c 'C751' "$OUT/build.log")"
(cd tests && PYTHONPATH=$PWD/.. FFPA_DEV_WS=1 timeout 200 python3 -m pytest -q -p no:cacheprovider -x test_fa2_gpu.py \
  > "$OUT/pytest.log" 2>&1; echo "tests (variant on): $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head)
cat > "$OUT/san.py" <<'P'
import torch, ffpa_attn
for D in (64, 128):
    for causal in (False, True):
        q, k, v = (torch.randn(2, 150, 133, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        out = ffpa_attn.forward(q, k, v, is_causal=causal, strict=True, scale=-0.1 if causal else None)
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal,
                                                               scale=-0.1 if causal else None)
        print(D, causal, float((out.float() - ref).abs().max()))
P
for tool in racecheck synccheck; do
  PYTHONPATH=$PWD FFPA_DEV_WS=1 timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 python3 "$OUT/san.py" > "$OUT/$tool.log" 2>&1
  echo "$tool (variant on): exit $? $(grep -E 'ERROR SUMMARY|hazard' "$OUT/$tool.log" | tail -1)"
done
PYTHONPATH=$PWD DIMS="${DIMS:-64 128 256}" SHAPES="${SHAPES:-128x12x197 64x16x256 16x16x1024 8x16x2048 1x32x8192}" \
  python3 scripts/dev/fa2_ws_variants.py 0,1 2>&1 | grep -v Warn
