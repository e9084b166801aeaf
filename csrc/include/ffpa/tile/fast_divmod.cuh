// ffpa::FastDivmod: x / d and x % d for a divisor fixed for a kernel's life, as a multiply-high, an add and
// a shift (the round-up method of Granlund and Montgomery, as in Hacker's Delight 10-9), for 0 <= x < 2^31
// and 1 <= d < 2^31. The compiler's signed division is a dependent I2F / MUFU.RCP / F2I / IMAD chain of
// a few hundred cycles; the persistent kernels decode a work item's (batch, head, block) from its index at
// every item, on the path to its first GEMM (the warp-specialised FA-2 kernel: session 47's trace put ~550
// cycles between an item's Q and its first K wait, mostly two such chains in the SASS). Build it once per kernel from the
// divisor; the multiplier's 64-bit division runs then. Checked exhaustively for small divisors and at
// the ends of the range on the host (tests/primitives/layout_host.cu).
#pragma once
#include <cstdint>

namespace ffpa {

struct FastDivmod {
  int d;
  uint32_t mul, shift;

  __host__ __device__ __forceinline__ explicit FastDivmod(int divisor) : d(divisor) {
    // shift = ceil(log2 d); mul = floor(2^32 (2^shift - d) / d) + 1 (< 2^32 since 2^shift < 2 d)
#ifdef __CUDA_ARCH__
    shift = 32 - __clz(d - 1);
#else
    shift = 0;
    while (shift < 31 && (1u << shift) < static_cast<uint32_t>(d)) ++shift;
#endif
    mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - static_cast<uint32_t>(d))) /
                                static_cast<uint32_t>(d) + 1);
  }
  __host__ __device__ __forceinline__ int div(int x) const {
    const uint32_t u = static_cast<uint32_t>(x);
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(u, mul);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(u) * mul) >> 32);
#endif
    return static_cast<int>((hi + u) >> shift);  // hi <= u < 2^31: no overflow
  }
  // The quotient, and the remainder in rem.
  __host__ __device__ __forceinline__ int divmod(int x, int& rem) const {
    const int q = div(x);
    rem = x - q * d;
    return q;
  }
};

}  // namespace ffpa
