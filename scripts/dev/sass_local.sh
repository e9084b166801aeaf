#!/usr/bin/env bash
# SASS of one FA-2 (or FP8) launcher instantiation without a GPU: nvcc -ptx + ptxas here, nvdisasm from the
# nvidia-cuda-nvdisasm wheel (PyPI, unpacked once into /tmp), then sass_segments.py on the kernels whose
# names contain FILTER (default fa2_fwd_ws_kernel). Prints ptxas's registers / spills / C75xx per kernel.
#   bash scripts/dev/sass_local.sh 128                 # Fa2Launcher<bf16, 128, 128, kWgmma>
#   KIND=fp8 bash scripts/dev/sass_local.sh 128        # Fp8Launcher<e4m3, 128, 128>
# Writes /tmp/sass_local/D<d>.{ptx,cubin,log,sass}.
set -euo pipefail
cd "$(dirname "$0")/../.."
D=${1:-128}; KIND=${KIND:-fa2}; FILTER=${FILTER:-$([ "$KIND" = fp8 ] && echo fa2_fwd_fp8_kernel || echo fa2_fwd_ws_kernel)}
W=/tmp/sass_local; mkdir -p "$W"
ND=$(ls /tmp/nvdisasm_whl/nvidia/cu*/bin/nvdisasm 2>/dev/null | head -1 || true)
if [ -z "$ND" ]; then
  python3 -m pip download --no-deps -q nvidia-cuda-nvdisasm -d /tmp/nvdisasm_dl
  mkdir -p /tmp/nvdisasm_whl && (cd /tmp/nvdisasm_whl && unzip -qo /tmp/nvdisasm_dl/nvidia_cuda_nvdisasm-*.whl)
  ND=$(ls /tmp/nvdisasm_whl/nvidia/cu*/bin/nvdisasm | head -1); chmod +x "$ND"
fi
if [ "$KIND" = fp8 ]; then
  printf '#include "launch/fa2_fp8_launch.cuh"\nnamespace ffpa::launch { template struct Fp8Launcher<__nv_fp8_e4m3, %s, %s>; }\n' "$D" "$D" > "$W/D$D.cu"
else
  printf '#include "launch/fa2_fwd_launch.cuh"\nnamespace ffpa::launch { template struct Fa2Launcher<__nv_bfloat16, %s, %s, Fa2Mma::kWgmma>; }\n' "$D" "$D" > "$W/D$D.cu"
fi
nvcc -std=c++17 -O3 -ptx --expt-relaxed-constexpr -DFFPA_HAS_SM90A=1 -Icsrc -Icsrc/include -arch=sm_90a "$W/D$D.cu" -o "$W/D$D.ptx"
ptxas -arch=sm_90a -v "$W/D$D.ptx" -o "$W/D$D.cubin" > "$W/D$D.log" 2>&1
grep -E "C75[0-9]{2}" "$W/D$D.log" | sed 's/ptxas info    : //' | cut -c1-160 || true
grep -A1 "Function properties for .*$FILTER" "$W/D$D.log" | grep -o "[0-9]* bytes spill stores, [0-9]* bytes spill loads" | sort | uniq -c
"$ND" -c "$W/D$D.cubin" > "$W/D$D.sass"
python3 scripts/dev/sass_segments.py "$W/D$D.sass" "$FILTER"
