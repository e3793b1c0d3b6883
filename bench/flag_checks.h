// Checks the benchmark binaries make on their numeric flags before running,
// so that no value (0, -1, the type's maximum, inf, nan) ends in a signal, an
// endless loop or an unbounded allocation: each failure is a usage error
// (the binary prints "<name>: <message>" and exits 2) that names the flag,
// the value found and the range accepted.
//
//   if (absl::Status s = bench::CheckSeconds("--target_seconds", t); !s.ok())
//     return UsageError(s);
#ifndef TANDEM_BENCH_FLAG_CHECKS_H_
#define TANDEM_BENCH_FLAG_CHECKS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tandem::bench {

// A timed-work target: finite and in (0, max_seconds].
absl::Status CheckSeconds(absl::string_view flag, double value,
                          double max_seconds = 3600);

// A warm-up before the first timed size (--warmup_seconds): 0 (none) or a
// finite number of seconds in (0, 60].
absl::Status CheckWarmUpSeconds(double value);

// An integer flag in [lo, hi].
absl::Status CheckInt(absl::string_view flag, int64_t value, int64_t lo,
                      int64_t hi);

// A size sweep: 1 <= min_bytes <= max_bytes, and `buffers_per_byte` bytes of
// buffers for each byte of max_bytes (the benchmark's own memory rule, e.g.
// world size x 4) fit in this machine's physical memory.
absl::Status CheckByteRange(int64_t min_bytes, int64_t max_bytes,
                            int64_t buffers_per_byte);

// What every size-sweep benchmark checks: --max_bytes >= 4 (one f32),
// CheckByteRange and CheckSeconds("--target_seconds", target_seconds).
absl::Status CheckSizeSweep(int64_t min_bytes, int64_t max_bytes,
                            int64_t buffers_per_byte, double target_seconds);

// The sizes min_bytes, min_bytes * factor, ... up to max_bytes, without
// overflow (factor >= 2, 1 <= min_bytes <= max_bytes as checked above).
std::vector<int64_t> GeometricSizes(int64_t min_bytes, int64_t max_bytes,
                                    int64_t factor);

// Google Benchmark's own numeric flags among argv[1..argc), which the library
// takes unchecked (--benchmark_min_time=inf or nan runs for ever,
// --benchmark_repetitions=-1 aborts in std::vector::reserve): min_time and
// min_warmup_time finite in [0, 3600] (an "s" suffix allowed),
// repetitions in [1, 10000]. Call before benchmark::Initialize.
absl::Status CheckGoogleBenchmarkFlags(int argc, const char* const* argv);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_FLAG_CHECKS_H_
