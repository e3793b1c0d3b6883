#include "base/dtype.h"

#include <array>
#include <string>

namespace tandem {

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kU8:
      return 1;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kI64:
      return "i64";
    case DType::kI32:
      return "i32";
    case DType::kU8:
      return "u8";
  }
  // Names of the values outside the enum, built once (thread-safe static
  // initialization) so that the result stays a static string.
  static const std::array<std::string, 256>* const kInvalid = [] {
    auto* names = new std::array<std::string, 256>;
    for (int v = -128; v < 128; ++v) {
      (*names)[static_cast<uint8_t>(v)] = "dtype(" + std::to_string(v) + ")";
    }
    return names;
  }();
  return (*kInvalid)[static_cast<uint8_t>(dtype)].c_str();
}

bool IsValidDType(DType dtype) { return DTypeSize(dtype) != 0; }

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 ||
         dtype == DType::kBF16;
}

bool Is16BitFloat(DType dtype) {
  return dtype == DType::kF16 || dtype == DType::kBF16;
}

void Widen16BitFloats(DType dtype, const void* src, float* dst, int64_t count) {
  const auto* in = static_cast<const uint16_t*>(src);
  if (dtype == DType::kF16) {
    for (int64_t i = 0; i < count; ++i) dst[i] = half::F32FromF16(in[i]);
  } else if (dtype == DType::kBF16) {
    for (int64_t i = 0; i < count; ++i) dst[i] = half::F32FromBF16(in[i]);
  }
}

void Narrow16BitFloats(DType dtype, const float* src, void* dst,
                       int64_t count) {
  auto* out = static_cast<uint16_t*>(dst);
  if (dtype == DType::kF16) {
    for (int64_t i = 0; i < count; ++i) out[i] = half::F16FromF32(src[i]);
  } else if (dtype == DType::kBF16) {
    for (int64_t i = 0; i < count; ++i) out[i] = half::BF16FromF32(src[i]);
  }
}

}  // namespace tandem
