#include "bench/flag_checks.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/memory.h"

namespace tandem::bench {

absl::Status CheckSeconds(absl::string_view flag, double value,
                          double max_seconds) {
  if (!(value > 0 && value <= max_seconds)) {  // false for nan
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " must be a number of seconds in (0, ", max_seconds,
                     "], got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckInt(absl::string_view flag, int64_t value, int64_t lo,
                      int64_t hi) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " must be in [", lo, ", ", hi, "], got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckByteRange(int64_t min_bytes, int64_t max_bytes,
                            int64_t buffers_per_byte) {
  if (min_bytes < 1 || max_bytes < min_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need 1 <= --min_bytes <= --max_bytes, got --min_bytes=", min_bytes,
        " --max_bytes=", max_bytes));
  }
  return CheckFitsInMemory(
      max_bytes, buffers_per_byte,
      absl::StrCat("--max_bytes=", max_bytes, " (", buffers_per_byte,
                   " bytes of buffers per byte)"));
}

std::vector<int64_t> GeometricSizes(int64_t min_bytes, int64_t max_bytes,
                                    int64_t factor) {
  std::vector<int64_t> sizes;
  for (int64_t s = min_bytes; s <= max_bytes; s *= factor) {
    sizes.push_back(s);
    if (s > max_bytes / factor) break;  // the next step would pass max_bytes
  }
  return sizes;
}

}  // namespace tandem::bench
