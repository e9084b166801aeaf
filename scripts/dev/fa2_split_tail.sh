#!/usr/bin/env bash
# Development probe (session 44): the split tail of the warp-specialised FA-2 kernel (fa2_split_tail.patch,
# kernels/fa2_ws_split.cuh: the walk's last round plus its remainder as G equal shares of key tiles,
# stream-K style; an item a share boundary cuts is merged by the warp that finishes second), on with
# FFPA_DEV_WS=1 for calls without causal masking or a mask. Why: 2048 equal items on 132 SMs end on a
# half-full 16th round (ncu, session 44: SM active cycles 3.3% under elapsed at D = 128 B=1 H=32 N=8192).
# Builds FA-2 bf16 + fp16 at D = 64 / 128 (sm_90a), runs the FA-2 GPU tests with the split on (items
# past the SMs in test_fa2_more_items_than_sms / tma_store / look_ahead: split), memcheck of split calls,
# then fa2_ws_variants.py 0,1,0,1 beside cuDNN. Reverts the patch. Writes to $OUT.
# ptxas (local): D = 64's look-ahead table kernel spills 16 bytes with the patch (to fix before landing).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
. scripts/dev/with_patch.sh scripts/dev/fa2_split_tail.patch
export MAX_JOBS=16 FFPA_ARCHS=90a FFPA_FAMILIES=fa2 FFPA_ACCS=fp32 FFPA_HEAD_DIMS=${FFPA_HEAD_DIMS:-64,128} FFPA_DTYPES=${FFPA_DTYPES:-fp16,bf16} FFPA_EXPECT_EXTENSION=1
t0=$(date +%s)
python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
(cd tests && PYTHONPATH=$PWD/.. FFPA_DEV_WS=1 timeout ${TEST_S:-150} python3 -m pytest -q -p no:cacheprovider -x test_fa2_gpu.py test_fa2_hopper_gpu.py \
  -k "more_items or tma_store or look_ahead or every_head_dim or odd_lengths" > "$OUT/pytest.log" 2>&1
 echo "tests (split on): $(tail -1 "$OUT/pytest.log")"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head)
cat > "$OUT/san.py" <<'P'
import torch, ffpa_attn
H = torch.cuda.get_device_properties(0).multi_processor_count + 9  # items past the SMs: the tail splits
for D, L, S in ((64, 197, 1100), (128, 300, 777)):
    q = torch.randn(2, H, L, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(2, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out, lse = ffpa_attn.forward(q, k, v, strict=True, return_lse=True)
    s = (q.float() @ k.float().transpose(-1, -2)) * D ** -0.5
    ref = torch.softmax(s, -1) @ v.float()
    print(D, L, S, float((out.float() - ref).abs().max()), float((lse.float() - torch.logsumexp(s, -1)).abs().max()))
P
PYTHONPATH=$PWD FFPA_DEV_WS=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 python3 "$OUT/san.py" > "$OUT/memcheck.log" 2>&1
echo "memcheck (split on): exit $? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"; grep -E "^(64|128) " "$OUT/memcheck.log"
PYTHONPATH=$PWD DIMS="${DIMS:-64 128}" SHAPES="${SHAPES:-1x32x8192 8x16x2048 4x16x3072 64x16x256}" \
  python3 scripts/dev/fa2_ws_variants.py 0,1,0,1 2>&1 | grep -v Warn
