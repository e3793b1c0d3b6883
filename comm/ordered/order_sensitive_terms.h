// Test terms whose sum changes with its association (testonly): large and
// small values of both signs, so that the canonical tree, a left-to-right
// sum and a ring give different bits. f32 keeps 24 bits, so 1e7 + ~1 loses
// digits differently in each order; f64 the same with 1e16.
#ifndef TANDEM_COMM_ORDERED_ORDER_SENSITIVE_TERMS_H_
#define TANDEM_COMM_ORDERED_ORDER_SENSITIVE_TERMS_H_

#include <cstdint>
#include <vector>

namespace tandem::comm {

// Term i of leaf (rank) `leaf`.
template <typename T>
T OrderSensitiveTerm(int64_t leaf, int64_t i) {
  const T big = sizeof(T) == 4 ? T(1e7) : T(1e16);
  const T small = T(1) + T((leaf * 31 + i * 7) % 17) / T(16);
  const T sign = (leaf + i) % 2 == 0 ? T(1) : T(-1);
  return sign * ((leaf * 5 + i * 3) % 4 == 0 ? big : small);
}

// Terms 0 .. count - 1 of leaf `leaf`.
template <typename T>
std::vector<T> OrderSensitiveTerms(int64_t leaf, int64_t count) {
  std::vector<T> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[i] = OrderSensitiveTerm<T>(leaf, i);
  return v;
}

}  // namespace tandem::comm

#endif  // TANDEM_COMM_ORDERED_ORDER_SENSITIVE_TERMS_H_
