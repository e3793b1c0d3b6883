// Element types of a tandem Tensor.
//
//   DType t = DType::kF32;
//   DTypeSize(t);             // 4
//   DTypeName(t);             // "f32"
//   IsFloatingPoint(t);       // true
//   DTypeOf<double>::value;   // DType::kF64
//
// f16 and bf16 elements are stored as tandem::Half / tandem::BFloat16
// (tensor/half.h). Pure functions; thread-safe.
#ifndef TANDEM_TENSOR_DTYPE_H_
#define TANDEM_TENSOR_DTYPE_H_

#include <cstdint>

#include "tensor/half.h"

namespace tandem {

enum class DType : int8_t {
  kF32 = 0,
  kF64 = 1,
  kF16 = 2,
  kBF16 = 3,
  kI64 = 4,
  kI32 = 5,
};

// Bytes per element: 4, 8, 2, 2, 8, 4.
int64_t DTypeSize(DType dtype);
// "f32", "f64", "f16", "bf16", "i64", "i32" (a static string; const char*
// because Debian's Abseil StrCat does not take std::string_view).
const char* DTypeName(DType dtype);
// True for f32, f64, f16, bf16 (the dtypes that may require gradients).
bool IsFloatingPoint(DType dtype);

// Maps a C++ element type to its DType: float, double, Half, BFloat16,
// int64_t, int32_t. Other types do not compile.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kF64;
};
template <>
struct DTypeOf<Half> {
  static constexpr DType value = DType::kF16;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::kBF16;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kI64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kI32;
};

}  // namespace tandem

#endif  // TANDEM_TENSOR_DTYPE_H_
