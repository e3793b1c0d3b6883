// Elementwise reduction kernels: the arithmetic of AllReduce and ReduceScatter
// for backends that reduce on the host (sim; any host fallback).
//
//   // result = a + b, written back into both (an in-place 2-rank all-reduce)
//   const void* srcs[] = {a, b};
//   void* dsts[] = {a, b};
//   TANDEM_RETURN_IF_ERROR(comm::ReduceInto(comm::DType::kF32,
//       comm::ReduceOp::kSum, n, srcs, dsts, /*avg_divisor=*/2));
//
// Contract (what makes results deterministic and equal to a serial loop):
//   out[i] = op(..op(op(srcs[0][i], srcs[1][i]), srcs[2][i]).., srcs[k-1][i])
// combined strictly in the order of `srcs` (rank order), never reassociated.
//   * kAvg: the Sum divided by `avg_divisor` (the world size), in the
//     accumulation type; only for floating-point dtypes.
//   * f16/bf16: converted to f32 exactly, combined in f32, rounded once
//     (nearest, ties to even) when written.
//   * Integers: Sum and Prod wrap around (two's complement); Max/Min compare
//     as the signed or unsigned type.
//   * Max/Min on floats propagate NaN.
// Every buffer in `dsts` receives the same `count` result elements. A dst may
// be the very memory of a src (in place); otherwise dsts and srcs must not
// overlap. Blocks in chunks that stay in L1, so each src is read once and
// each dst written once. Thread-safe for disjoint outputs.
#ifndef TANDEM_COMM_REDUCE_H_
#define TANDEM_COMM_REDUCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "comm/types.h"

namespace tandem::comm {

// Returns kInvalidArgument for an empty `srcs`, a negative count, an unknown
// dtype or op, Avg on an integer dtype, or avg_divisor < 1.
absl::Status ReduceInto(DType dtype, ReduceOp op, int64_t count,
                        absl::Span<const void* const> srcs,
                        absl::Span<void* const> dsts, int64_t avg_divisor);

}  // namespace tandem::comm

#endif  // TANDEM_COMM_REDUCE_H_
