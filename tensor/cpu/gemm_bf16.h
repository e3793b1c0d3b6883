// Row-major bf16 GEMM on host memory through oneDNN's matmul primitive
// (dnnl_sgemm has no bf16 form): bf16 operands, f32 accumulation inside
// the kernel, one rounding to bf16 at the end — the kernel PyTorch's CPU
// autocast uses. oneDNN picks AVX-512 BF16 or AMX where the processor has
// them and emulates bf16 otherwise (correct, slower).
//
//   // C[M,N] (+)= op(A)·op(B) (+ bias[N] broadcast over rows)
//   TANDEM_RETURN_IF_ERROR(tandem::cpu::GemmBf16(
//       {.transpose_b = true, .m = M, .n = N, .k = K}, a, b, bias, c));
//
// Elements are raw bf16 encodings (uint16_t; tandem::BFloat16's bits), so
// this library stays below the tensor core.
//
// Threads: the same OpenMP thread count as tensor/cpu/blas.h (1 per rank
// by default). Reentrant: each thread keeps its own primitive cache
// (keyed by the shape and flags), so ranks never share oneDNN objects.
#ifndef TANDEM_TENSOR_CPU_GEMM_BF16_H_
#define TANDEM_TENSOR_CPU_GEMM_BF16_H_

#include <cstdint>

#include "absl/status/status.h"

namespace tandem::cpu {

struct GemmBf16Shape {
  bool transpose_a = false;  // A is [K, M] instead of [M, K]
  bool transpose_b = false;  // B is [N, K] instead of [K, N]
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  // C += op(A)·op(B) (the sum is rounded once) instead of C = op(A)·op(B).
  bool accumulate = false;
};

// `bias` (may be nullptr) is bf16 [N], added in f32 before the rounding.
// M or N == 0 is a no-op; K == 0 gives C = bias (or 0, or C unchanged when
// accumulating). InvalidArgument for negative dims; Internal when oneDNN
// refuses (message includes oneDNN's status).
absl::Status GemmBf16(const GemmBf16Shape& shape, const uint16_t* a,
                      const uint16_t* b, const uint16_t* bias, uint16_t* c);

// Whether this processor runs GemmBf16 on oneDNN's bf16 kernel (true) or
// through the f32 GEMM (false). Decided once per process.
bool HasNativeBf16Gemm();

}  // namespace tandem::cpu

#endif  // TANDEM_TENSOR_CPU_GEMM_BF16_H_
