// ffpa::static_for: a loop whose index is a compile-time constant in its body (a
// std::integral_constant), for bodies that pass it on as a template argument or branch on it with
// `if constexpr`; `#pragma unroll` gives a constant only after optimisation, too late for either.
#pragma once
#include <type_traits>
#include <utility>

namespace ffpa {

template <typename F, int... kI>
__device__ __forceinline__ void static_for_each(F&& body, std::integer_sequence<int, kI...>) {
  (body(std::integral_constant<int, kI>{}), ...);
}

// body(0), body(1), ... body(kN - 1), in order.
template <int kN, typename F>
__device__ __forceinline__ void static_for(F&& body) {
  static_for_each(body, std::make_integer_sequence<int, kN>{});
}

}  // namespace ffpa
