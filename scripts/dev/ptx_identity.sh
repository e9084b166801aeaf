#!/usr/bin/env bash
# Does a source change alter the compiled kernels? PTX of representative translation units (FA-2 mma.sync and
# wgmma, FP8 at D = 128 / 256 / 512, FFPA L1 on both archs, the decode kernels; sm_80 and sm_90a) from the base
# revision and from the working tree, compared with the internal-linkage name hashes (derived from the file path)
# masked. Identical PTX gives identical SASS, so a refactor that passes needs no device time to show it changed
# nothing. No GPU; ~1 min on 2 cores (cicc only). Usage: scripts/dev/ptx_identity.sh [BASE_REV (default HEAD)]
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=${1:-HEAD}
W=/tmp/ptx_identity; rm -rf "$W"; mkdir -p "$W"
git worktree add -f -q --detach "$W/base" "$BASE"
trap 'git worktree remove --force "$W/base"' EXIT
mkdir -p "$W/work/ffpa_attn" && cp -r csrc tools "$W/work/" && cp ffpa_attn/_spec.py "$W/work/ffpa_attn/"
rm -rf "$W/work/csrc/generated"
ptx() {  # tree out
  local T=$1 O=$2; mkdir -p "$O/tu"
  (cd "$T" && python3 tools/gen_instantiations.py --out "$O/gen" --head-dims 64,128,256,512,576 --dtypes bf16 \
    --archs "80;90a" --accs fp32 > /dev/null)
  w() { printf '%s\nnamespace ffpa::launch { %s; }\n' "$2" "$3" > "$O/tu/$1.cu"; }
  w fa2w64 '#include "launch/fa2_fwd_launch.cuh"' 'template struct Fa2Launcher<__nv_bfloat16, 64, 64, Fa2Mma::kWgmma>'
  w fa2w128 '#include "launch/fa2_fwd_launch.cuh"' 'template struct Fa2Launcher<__nv_bfloat16, 128, 128, Fa2Mma::kWgmma>'
  w fa2w256 '#include "launch/fa2_fwd_launch.cuh"' 'template struct Fa2Launcher<__nv_bfloat16, 256, 256, Fa2Mma::kWgmma>'
  w fp8_128 '#include "launch/fa2_fp8_launch.cuh"' 'template struct Fp8Launcher<__nv_fp8_e4m3, 128, 128>'
  w fp8_256 '#include "launch/fa2_fp8_launch.cuh"' 'template struct Fp8Launcher<__nv_fp8_e4m3, 256, 256>'
  w fp8_512 '#include "launch/fa2_fp8_launch.cuh"' 'template struct Fp8Launcher<__nv_fp8_e4m3, 512, 512>'
  c() { (cd "$T" && nvcc -std=c++17 -O3 -ptx --expt-relaxed-constexpr -DFFPA_HAS_SM90A=1 -Icsrc -Icsrc/include \
        -arch="$2" "$1" -o "$O/$(basename "$1" .cu).$2.ptx"); }
  for t in fa2w64 fa2w128 fa2w256 fp8_128 fp8_256 fp8_512; do c "$O/tu/$t.cu" sm_90a & done; wait
  for f in fa2_bf16_d64 fa2_bf16_d128 ffpa_l1_bf16_d512 ffpa_l2_bf16_d512 ffpa_l3_bf16_d512 decode_bf16_d64 \
           decode_bf16_d128; do c "$O/gen/$f.cu" sm_80 & done; wait
  for f in ffpa_l1_bf16_d512 ffpa_l1_bf16_d576_dv512 decode_bf16_d512 decode_bf16_d576_dv512; do
    c "$O/gen/$f.cu" sm_90a &
  done; wait
}
ptx "$W/base" "$W/ptx_base" & ptx "$W/work" "$W/ptx_work"; wait
mask='s/[0-9]*_INTERNAL_[0-9a-f]*_[0-9]*_[A-Za-z0-9_]*_cu_[0-9a-f]*_[0-9]*/N_INTERNAL_X/g'  # (the name's length prefix too: it moves with the hash)
rc=0
for f in "$W"/ptx_base/*.ptx; do
  n=$(basename "$f")
  if cmp -s <(sed "$mask" "$f") <(sed "$mask" "$W/ptx_work/$n"); then echo "same $n"; else
    echo "DIFFERS $n ($(diff <(sed "$mask" "$f") <(sed "$mask" "$W/ptx_work/$n") | grep -c '^[<>]') lines)"; rc=1; fi
done
exit $rc
