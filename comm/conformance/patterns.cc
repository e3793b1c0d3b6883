#include "comm/conformance/patterns.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/half.h"
#include "comm/types.h"

namespace tandem::comm::conformance {
namespace {

template <typename T>
T Load(const void* data, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(data) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void Put(void* data, int64_t i, T v) {
  std::memcpy(static_cast<char*>(data) + i * sizeof(T), &v, sizeof(T));
}

// Writes an exact small integer `v` as `dtype`.
void StoreValue(DType dtype, void* data, int64_t i, int64_t v) {
  switch (dtype) {
    case DType::kF32:
      Put<float>(data, i, static_cast<float>(v));
      return;
    case DType::kF64:
      Put<double>(data, i, static_cast<double>(v));
      return;
    case DType::kF16:
      Put<uint16_t>(data, i, half::F16FromF32(static_cast<float>(v)));
      return;
    case DType::kBF16:
      Put<uint16_t>(data, i, half::BF16FromF32(static_cast<float>(v)));
      return;
    case DType::kI32:
      Put<int32_t>(data, i, static_cast<int32_t>(v));
      return;
    case DType::kI64:
      Put<int64_t>(data, i, v);
      return;
    case DType::kU8:
      Put<uint8_t>(data, i, static_cast<uint8_t>(v));
      return;
  }
}

template <typename A>
A Combine(ReduceOp op, A a, A b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
    case ReduceOp::kTreeSum:
      return a + b;
    case ReduceOp::kProd:
      return a * b;
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kMin:
      return std::min(a, b);
  }
  return a;
}

}  // namespace

Pattern PatternFor(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
    case ReduceOp::kTreeSum:
      return Pattern::kSum;
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      return Pattern::kMinMax;
    case ReduceOp::kProd:
      return Pattern::kProd;
  }
  return Pattern::kSum;
}

int64_t PatternValue(Pattern pattern, DType dtype, int rank, int buffer,
                     int64_t i) {
  const bool unsigned_type = dtype == DType::kU8;
  const int64_t r = rank, b = buffer;
  switch (pattern) {
    case Pattern::kSum: {
      const int64_t v = (i * 7 + r * 13 + b * 5) % 9;
      return unsigned_type ? v : v - 4;
    }
    case Pattern::kMinMax: {
      const int64_t v = (i * 11 + r * 5 + b * 3) % 17;
      return unsigned_type ? v : v - 8;
    }
    case Pattern::kProd: {
      if (unsigned_type) return 1 + (i + 2 * r + b) % 3;
      static constexpr int64_t kValues[] = {1, -1, 2, 1, -2, 1, 1, -1};
      return kValues[(i + 3 * r + b) % 8];
    }
    case Pattern::kCopy: {
      const int64_t v = (i * 31 + r * 17 + b * 7) % 251;
      switch (dtype) {
        case DType::kU8:
          return v;
        case DType::kI32:
          return (v - 125) + (r + 1) * (int64_t{1} << 20);
        case DType::kI64:
          return (v - 125) + (r + 1) * (int64_t{1} << 40);
        default:
          return v - 125;
      }
    }
  }
  return 0;
}

void FillPattern(Pattern pattern, DType dtype, int rank, int buffer, void* data,
                 int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    StoreValue(dtype, data, i, PatternValue(pattern, dtype, rank, buffer, i));
  }
}

std::vector<uint8_t> ReferenceReduce(Pattern pattern, DType dtype, ReduceOp op,
                                     int world_size, int buffer,
                                     int64_t count) {
  std::vector<uint8_t> out(count * DTypeSize(dtype));
  void* data = out.data();
  const int n = world_size;
  auto value = [&](int r, int64_t i) {
    return PatternValue(pattern, dtype, r, buffer, i);
  };
  for (int64_t i = 0; i < count; ++i) {
    if (IsFloatingPoint(dtype)) {
      if (dtype == DType::kF64) {
        double acc = static_cast<double>(value(0, i));
        for (int r = 1; r < n; ++r) {
          acc = Combine<double>(op, acc, static_cast<double>(value(r, i)));
        }
        if (op == ReduceOp::kAvg) acc = acc / static_cast<double>(n);
        Put<double>(data, i, acc);
        continue;
      }
      // f32, and f16/bf16 accumulated in f32 then rounded once.
      float acc = static_cast<float>(value(0, i));
      for (int r = 1; r < n; ++r) {
        acc = Combine<float>(op, acc, static_cast<float>(value(r, i)));
      }
      if (op == ReduceOp::kAvg) acc = acc / static_cast<float>(n);
      if (dtype == DType::kF32) Put<float>(data, i, acc);
      if (dtype == DType::kF16) Put<uint16_t>(data, i, half::F16FromF32(acc));
      if (dtype == DType::kBF16) Put<uint16_t>(data, i, half::BF16FromF32(acc));
      continue;
    }
    // Integers: exact in int64 for these patterns, then wrapped to the width.
    int64_t acc = value(0, i);
    for (int r = 1; r < n; ++r) acc = Combine<int64_t>(op, acc, value(r, i));
    StoreValue(dtype, data, i, acc);
  }
  return out;
}

std::string FormatElement(DType dtype, const void* data, int64_t i) {
  switch (dtype) {
    case DType::kF32: {
      const float v = Load<float>(data, i);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      return absl::StrFormat("%.9g (0x%08x)", v, bits);
    }
    case DType::kF64: {
      const double v = Load<double>(data, i);
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      return absl::StrFormat("%.17g (0x%016x)", v, bits);
    }
    case DType::kF16: {
      const uint16_t h = Load<uint16_t>(data, i);
      return absl::StrFormat("%.6g (0x%04x)", half::F32FromF16(h), h);
    }
    case DType::kBF16: {
      const uint16_t h = Load<uint16_t>(data, i);
      return absl::StrFormat("%.6g (0x%04x)", half::F32FromBF16(h), h);
    }
    case DType::kI32:
      return absl::StrCat(Load<int32_t>(data, i));
    case DType::kI64:
      return absl::StrCat(Load<int64_t>(data, i));
    case DType::kU8:
      return absl::StrCat(Load<uint8_t>(data, i));
  }
  return "?";
}

absl::Status CompareBuffers(absl::string_view what, DType dtype,
                            const void* found, const void* expected,
                            int64_t count) {
  const int64_t es = DTypeSize(dtype);
  if (count == 0 || std::memcmp(found, expected, count * es) == 0) {
    return absl::OkStatus();
  }
  int64_t first = -1, wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (std::memcmp(static_cast<const char*>(found) + i * es,
                    static_cast<const char*>(expected) + i * es, es) != 0) {
      if (first < 0) first = i;
      ++wrong;
    }
  }
  return absl::InternalError(
      absl::StrCat(what, ": ", wrong, " of ", count, " ", DTypeName(dtype),
                   " elements differ; first at index ", first, ": expected ",
                   FormatElement(dtype, expected, first), ", found ",
                   FormatElement(dtype, found, first)));
}

}  // namespace tandem::comm::conformance
