// ffpa::ptx ordering between grids and blocks. Programmatic dependent launch (sm_90): a kernel launched with the programmatic
// stream-serialization attribute may start while the kernel before it in the stream still runs,
// once every block of that one has called launch_dependents (or exited); it must call
// grid_dependency_wait before reading what that kernel wrote, which returns once that whole grid
// has completed and its memory is visible. On a launch without the attribute, and before sm_90,
// both are no-ops.
//
//   split kernel (primary)                      merge kernel (secondary, PDL launch)
//   launch_dependents()   -- lets the merge's blocks be scheduled into SMs the split frees
//   ... writes partials ...                     grid_dependency_wait()   -- the whole split grid done
//                                               reads the partials
#pragma once

namespace ffpa::ptx {

// The grids launched after this one with programmatic serialization may begin launching.
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Wait until the grids this one depends on programmatically have completed, their writes visible.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// A 32-bit load with acquire semantics at GPU scope: what other blocks wrote before their release (an
// atomic after a fence) is visible to this thread's later reads. For a block polling a counter that
// blocks of the same grid increment (the decode spread merge, kernels/decode_merge.cuh).
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

}  // namespace ffpa::ptx
