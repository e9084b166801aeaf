// What the device test programs of tests/primitives share: the check counters and the final
// "N checks, M failed" line tests/test_primitives.py reads, CUDA_OK (a failed runtime call ends the
// program as one failed check), and the compute capability gate of the sm_90a programs.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

namespace harness {

inline long g_checks = 0, g_failed = 0;

// Counts a check; true when its failure should be printed (the first 40 are).
inline bool record(bool ok) {
  ++g_checks;
  return !ok && ++g_failed <= 40;
}

// The last line the pytest side reads, and the exit code.
inline int report() {
  std::printf("%ld checks, %ld failed\n", g_checks, g_failed);
  return g_failed == 0 ? 0 : 1;
}

#define CUDA_OK(x)                                                                  \
  do {                                                                              \
    const cudaError_t e_ = (x);                                                     \
    if (e_ != cudaSuccess) {                                                        \
      std::printf("FAIL %s: %s\n0 checks, 1 failed\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

// Ends the program as one failed check unless the current device is compute capability major.minor.
inline void require_compute_capability(int want_major, int want_minor) {
  int dev = 0, major = 0, minor = 0;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  if (major != want_major || minor != want_minor) {
    std::printf("needs compute capability %d.%d, got %d.%d\n0 checks, 1 failed\n", want_major, want_minor, major, minor);
    std::exit(1);
  }
}

}  // namespace harness
