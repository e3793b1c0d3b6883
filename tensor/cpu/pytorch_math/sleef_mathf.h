// expf and logf as PyTorch 1.13 evaluates them in its vectorised CPU
// kernels (torch.exp, softmax, log_softmax on float tensors): SLEEF's 1-ulp
// single-precision algorithms (Sleef_expf8_u10 / Sleef_logf8_u10 on AVX2,
// which use fused multiply-adds), evaluated one value at a time with the
// same operations in the same order, so the results equal PyTorch's bit for
// bit on any CPU. Both are within 1 ulp of the exact value; they are not the
// C library's (which rounds differently in a few percent of cases).
//
// Compiled with -ffp-contract=off (tensor/BUILD): every fused operation is
// an explicit std::fmaf. Thread-safety: pure functions.
#ifndef TANDEM_TENSOR_CPU_PYTORCH_MATH_SLEEF_MATHF_H_
#define TANDEM_TENSOR_CPU_PYTORCH_MATH_SLEEF_MATHF_H_

namespace tandem::internal {

// e^x. 0 below -104, +inf above 100 (as SLEEF), NaN for NaN.
float SleefExpf(float x);

// ln(x). -inf at 0, NaN below 0 or for NaN, +inf at +inf.
float SleefLogf(float x);

}  // namespace tandem::internal

#endif  // TANDEM_TENSOR_CPU_PYTORCH_MATH_SLEEF_MATHF_H_
