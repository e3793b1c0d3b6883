#include "tensor/cuda/internal/gemm.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"

namespace tandem::cuda::internal {
namespace {

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  bool double_scalars;  // alpha/beta as double (f64) or float
};

absl::StatusOr<GemmTypes> TypesFor(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return GemmTypes{
          CUDA_R_32F,
          AllowTf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
          false};
    case DType::kF64:
      return GemmTypes{CUDA_R_64F, CUBLAS_COMPUTE_64F, true};
    case DType::kF16:
      return GemmTypes{CUDA_R_16F, CUBLAS_COMPUTE_32F, false};
    case DType::kBF16:
      return GemmTypes{CUDA_R_16BF, CUBLAS_COMPUTE_32F, false};
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("cuBLAS GEMM supports f32, f64, f16 and bf16, not ",
                       DTypeName(dtype)));
  }
}

absl::Status CheckInt(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GEMM ", what, " = ", v, " is outside cuBLAS's 32-bit int range"));
  }
  return absl::OkStatus();
}

// K == 0: C = beta * C.
absl::Status EmptyK(cudaStream_t stream, DType dtype, int64_t elements,
                    double beta, void* c) {
  if (beta == 1.0) return absl::OkStatus();
  if (beta != 0.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GEMM with K == 0 supports beta 0 or 1, got ", beta));
  }
  TANDEM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
      c, 0, static_cast<size_t>(elements * DTypeSize(dtype)), stream));
  return absl::OkStatus();
}

}  // namespace

absl::Status GemmStridedBatched(int device, cudaStream_t stream, DType dtype,
                                bool transpose_a, bool transpose_b, int64_t m,
                                int64_t n, int64_t k, double alpha,
                                const void* a, int64_t stride_a, const void* b,
                                int64_t stride_b, double beta, void* c,
                                int64_t stride_c, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return absl::OkStatus();
  TANDEM_ASSIGN_OR_RETURN(GemmTypes types, TypesFor(dtype));
  if (k == 0) {
    if (stride_c != m * n && batch > 1) {
      return absl::InvalidArgumentError(
          "GEMM with K == 0 needs contiguous C matrices");
    }
    return EmptyK(stream, dtype, m * n * batch, beta, c);
  }
  TANDEM_RETURN_IF_ERROR(CheckInt(m, "M"));
  TANDEM_RETURN_IF_ERROR(CheckInt(n, "N"));
  TANDEM_RETURN_IF_ERROR(CheckInt(k, "K"));
  TANDEM_RETURN_IF_ERROR(CheckInt(batch, "batch"));
  TANDEM_ASSIGN_OR_RETURN(cublasHandle_t handle, BlasHandle(device, stream));
  // Column-major view: C^T [n, m] = op(B)^T [n, k] · op(A)^T [k, m].
  const int lda = static_cast<int>(transpose_a ? m : k);
  const int ldb = static_cast<int>(transpose_b ? k : n);
  const int ldc = static_cast<int>(n);
  const cublasOperation_t op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const float alpha_f = static_cast<float>(alpha);
  const float beta_f = static_cast<float>(beta);
  const void* alpha_p = types.double_scalars
                            ? static_cast<const void*>(&alpha)
                            : static_cast<const void*>(&alpha_f);
  const void* beta_p = types.double_scalars ? static_cast<const void*>(&beta)
                                            : static_cast<const void*>(&beta_f);
  if (batch == 1) {
    TANDEM_CUBLAS_RETURN_IF_ERROR(cublasGemmEx(
        handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
        static_cast<int>(k), alpha_p, b, types.data, ldb, a, types.data, lda,
        beta_p, c, types.data, ldc, types.compute, CUBLAS_GEMM_DEFAULT));
    return absl::OkStatus();
  }
  TANDEM_CUBLAS_RETURN_IF_ERROR(cublasGemmStridedBatchedEx(
      handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
      static_cast<int>(k), alpha_p, b, types.data, ldb, stride_b, a, types.data,
      lda, stride_a, beta_p, c, types.data, ldc, stride_c,
      static_cast<int>(batch), types.compute, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

absl::Status Gemm(int device, cudaStream_t stream, DType dtype,
                  bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                  int64_t k, double alpha, const void* a, const void* b,
                  double beta, void* c) {
  return GemmStridedBatched(device, stream, dtype, transpose_a, transpose_b, m,
                            n, k, alpha, a, 0, b, 0, beta, c, m * n, 1);
}

}  // namespace tandem::cuda::internal
