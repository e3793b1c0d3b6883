// Sums in PyTorch 1.13's CPU order (at::sum's "cascade sum"), so that a
// reduction gives the same float bits as torch.sum on the same data.
//
// PyTorch adds a run of n values by reading it as rows of 4 (four
// interleaved partial sums, the leftover n % 4 values going to the first)
// and, for long runs, moving each partial sum up a level every 2^p values
// (p >= 4), so only values of similar magnitude meet; the four partial sums
// are added last, first to fourth. A column sum of a row-major [rows, cols]
// matrix (x.sum(0)) takes that path for every column except, when
// cols >= 32, the first floor(cols / 32) * 32 columns, which skip the
// interleave (one partial sum per column, same levels).
//
// Thread-safety: pure functions.
#ifndef TANDEM_TENSOR_CPU_PYTORCH_MATH_CASCADE_SUM_H_
#define TANDEM_TENSOR_CPU_PYTORCH_MATH_CASCADE_SUM_H_

#include <cstdint>

namespace tandem::internal {

// data[0], data[stride], ..., data[(n - 1) * stride] summed as torch.sum
// sums a strided run (the interleaved form; a contiguous torch.sum over the
// last dim takes a vectorised variant not reproduced here). n == 0 gives 0.
template <typename T>
T CascadeSum(const T* data, int64_t stride, int64_t n);

// out[c] = sum over r of x[r * cols + c], as x.sum(0) in PyTorch.
template <typename T>
void ColumnSums(const T* x, int64_t rows, int64_t cols, T* out);

}  // namespace tandem::internal

#endif  // TANDEM_TENSOR_CPU_PYTORCH_MATH_CASCADE_SUM_H_
