// Internal: element conversions between dtypes on host memory.
//
// Rules (shared by Tensor::To, Tensor::Full and Item):
//   - to f16/bf16: via float, round to nearest even (base/half.h);
//   - between f32/f64: static_cast (round to nearest);
//   - float to int: truncate toward zero; NaN -> 0; out of range saturates;
//   - int to int: C++20 static_cast (i64 -> i32 wraps, as PyTorch does).
#ifndef TANDEM_TENSOR_CONVERT_H_
#define TANDEM_TENSOR_CONVERT_H_

#include <cstdint>

#include "base/dtype.h"

namespace tandem::internal {

// dst[i] = convert(src[i]) for i in [0, n). src and dst must not overlap
// unless they are the same pointer with the same dtype.
void ConvertElements(const void* src, DType src_dtype, void* dst,
                     DType dst_dtype, int64_t n);

// Writes `value` converted to `dtype` into dst[0..n).
void FillElements(void* dst, DType dtype, int64_t n, double value);

// Element i of `src` as a double.
double ElementAsDouble(const void* src, DType dtype, int64_t i);

}  // namespace tandem::internal

#endif  // TANDEM_TENSOR_CONVERT_H_
