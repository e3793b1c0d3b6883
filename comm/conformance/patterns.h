// Exact test data for the conformance suite.
//
// Every element is a small integer, stored in the buffer's dtype, chosen so
// that every result the suite checks is exact in every dtype (f16 and bf16
// included): sums over up to 8 ranks stay within +-32, products within
// +-256, and copies use values below 128. Expected results are computed
// here by a scalar loop that follows the contract literally (rank order, f16
// and bf16 in f32 rounded once, Avg = Sum / n, integers wrapping), so a
// result must match bit for bit.
//
//   std::vector<uint8_t> buf(count * comm::DTypeSize(dtype));
//   FillPattern(Pattern::kSum, dtype, rank, /*buffer=*/0, buf.data(), count);
//   ... all-reduce ...
//   std::vector<uint8_t> want = ReferenceReduce(Pattern::kSum, dtype,
//       comm::ReduceOp::kSum, world_size, /*buffer=*/0, count);
//   TANDEM_RETURN_IF_ERROR(CompareBuffers("all-reduce result", dtype,
//                                         buf.data(), want.data(), count));
#ifndef TANDEM_COMM_CONFORMANCE_PATTERNS_H_
#define TANDEM_COMM_CONFORMANCE_PATTERNS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "comm/types.h"

namespace tandem::comm::conformance {

enum class Pattern {
  kSum,     // Sum and Avg: values in [-4, 4] ([0, 8] for u8)
  kMinMax,  // values in [-8, 8] ([0, 16] for u8)
  kProd,    // values in {1, -1, 2, -2} ({1, 2, 3} for u8)
  kCopy,    // values in [-125, 125] ([0, 250] for u8); integers also carry
            // the rank in high bits, so a misplaced block cannot pass
};

// The pattern that keeps `op` exact.
Pattern PatternFor(ReduceOp op);

// Element `i` of buffer number `buffer` on rank `rank`.
int64_t PatternValue(Pattern pattern, DType dtype, int rank, int buffer,
                     int64_t i);

// Writes PatternValue(..., i) for i in [0, count) into `data` as `dtype`.
void FillPattern(Pattern pattern, DType dtype, int rank, int buffer, void* data,
                 int64_t count);

// The reduction over ranks 0..world_size-1 of FillPattern(pattern, dtype,
// rank, buffer, ...), as count elements of `dtype`.
std::vector<uint8_t> ReferenceReduce(Pattern pattern, DType dtype, ReduceOp op,
                                     int world_size, int buffer, int64_t count);

// Element `i` of `data` for messages: "3" for integers, "2.5 (0x4020)" for
// floats (value and bits).
std::string FormatElement(DType dtype, const void* data, int64_t i);

// OK if the count elements are bitwise equal; otherwise kInternal naming
// `what`, the first differing index, expected and found values, and how many
// elements differ.
absl::Status CompareBuffers(absl::string_view what, DType dtype,
                            const void* found, const void* expected,
                            int64_t count);

}  // namespace tandem::comm::conformance

#endif  // TANDEM_COMM_CONFORMANCE_PATTERNS_H_
