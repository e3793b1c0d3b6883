// Permute's kernel signature and row of the kernel table
// (tensor/dispatch/op_table.h), for kernel libraries, not for users. The op's
// definition (tensor/ops/permute.cc) checked `dims` (a permutation of
// [0, x.ndim())) and allocated `out` (x's dtype, the permuted shape) on
// x's device; a kernel writes every element of `out` in its device's stream
// order.
#ifndef TANDEM_TENSOR_DISPATCH_PERMUTE_KERNELS_H_
#define TANDEM_TENSOR_DISPATCH_PERMUTE_KERNELS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "tensor/dispatch/op_table.h"
#include "tensor/tensor.h"

namespace tandem {

// out[i_0, ..., i_{n-1}] = x[j] where j_{dims[k]} = i_k: out's dim k is x's
// dim dims[k]. Any dtype (elements are moved as bytes).
using PermuteKernel = absl::Status(const Tensor& x,
                                   const std::vector<int64_t>& dims,
                                   const Tensor& out);

TANDEM_OP_ROW(PermuteKernels, PermuteKernel, "Permute")

}  // namespace tandem

#endif  // TANDEM_TENSOR_DISPATCH_PERMUTE_KERNELS_H_
