// Development probe (not part of the build): how many thread-block clusters of 2 / 4 / 8 / 16 blocks run at
// once (cudaOccupancyMaxActiveClusters) for a kernel of 160 threads with 100 or 215 KiB of shared memory (one
// block per SM: the narrow decode kernel's), i.e. whether a split-KV cluster merge could keep every SM busy.
// nvcc -arch=sm_90a -o /tmp/cp scripts/dev/cluster_probe.cu && /tmp/cp
#include <cstdio>
#include <cuda_runtime.h>
__global__ void __launch_bounds__(160, 1) k(int* x) { extern __shared__ char s[]; if (threadIdx.x == 0 && x) x[blockIdx.x] = s[0]; }
int main() {
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 215 * 1024);
  cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  for (int smem : {100 * 1024, 215 * 1024})
  for (int c : {2, 4, 8, 16}) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(c * 64); cfg.blockDim = dim3(160); cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute a[1]; a[0].id = cudaLaunchAttributeClusterDimension; a[0].val.clusterDim.x = c; a[0].val.clusterDim.y = 1; a[0].val.clusterDim.z = 1;
    cfg.attrs = a; cfg.numAttrs = 1;
    int n = -1; cudaError_t e = cudaOccupancyMaxActiveClusters(&n, k, &cfg);
    printf("SMs %d smem %d KB cluster %d: max active clusters %d (%d blocks) %s\n", sms, smem / 1024, c, n, n * c, cudaGetErrorString(e));
  }
}
