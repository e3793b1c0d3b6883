#include "bench/flag_checks.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/memory.h"
#include "base/status_macros.h"

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

absl::Status CheckWarmUpSeconds(double value) {
  if (value == 0) return absl::OkStatus();
  if (!(value > 0 && value <= 60)) {  // false for nan
    return absl::InvalidArgumentError(absl::StrCat(
        "--warmup_seconds must be 0 (no warm-up) or a number of seconds in "
        "(0, 60], got ",
        value));
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

absl::Status CheckSizeSweep(int64_t min_bytes, int64_t max_bytes,
                            int64_t buffers_per_byte, double target_seconds) {
  TANDEM_RETURN_IF_ERROR(CheckInt("--max_bytes", max_bytes, 4, INT64_MAX));
  TANDEM_RETURN_IF_ERROR(
      CheckByteRange(min_bytes, max_bytes, buffers_per_byte));
  return CheckSeconds("--target_seconds", target_seconds);
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

absl::Status CheckGoogleBenchmarkFlags(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    absl::string_view value;
    for (absl::string_view flag :
         {"--benchmark_min_time=", "--benchmark_min_warmup_time="}) {
      if (!absl::StartsWith(arg, flag)) continue;
      value = absl::StripSuffix(arg.substr(flag.size()), "s");
      double seconds = 0;
      if (!absl::SimpleAtod(value, &seconds) ||
          !(seconds >= 0 && seconds <= 3600)) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag.substr(0, flag.size() - 1),
                         " must be a number of seconds in [0, 3600], got '",
                         arg.substr(flag.size()), "'"));
      }
    }
    constexpr absl::string_view kRepetitions = "--benchmark_repetitions=";
    if (absl::StartsWith(arg, kRepetitions)) {
      int64_t repetitions = 0;
      if (!absl::SimpleAtoi(arg.substr(kRepetitions.size()), &repetitions)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--benchmark_repetitions must be an integer, got '",
                         arg.substr(kRepetitions.size()), "'"));
      }
      TANDEM_RETURN_IF_ERROR(
          CheckInt("--benchmark_repetitions", repetitions, 1, 10000));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::bench
