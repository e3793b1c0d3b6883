// im2col / col2im for 2-d convolution on one NCHW image (host memory).
//
// For an image x [C, H, W], the column matrix col has C*kh*kw rows and
// out_h*out_w columns; row (c, i, j), column (oh, ow) holds
//   x[c, oh*stride_h - pad_h + i, ow*stride_w - pad_w + j]
// or 0 where that position falls in the zero padding. Convolution is then
// one GEMM: out [O, out_h*out_w] = weight [O, C*kh*kw] · col.
//
// Pure functions over caller-owned buffers; thread-safe.
#ifndef TANDEM_TENSOR_CPU_IM2COL_H_
#define TANDEM_TENSOR_CPU_IM2COL_H_

#include <cstdint>

namespace tandem::cpu {

struct ConvGeometry {
  int64_t channels = 0, height = 0, width = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;

  int64_t out_h() const {
    return (height + 2 * pad_h - kernel_h) / stride_h + 1;
  }
  int64_t out_w() const {
    return (width + 2 * pad_w - kernel_w) / stride_w + 1;
  }
  int64_t col_rows() const { return channels * kernel_h * kernel_w; }
  int64_t col_cols() const { return out_h() * out_w(); }
};

// col [col_rows, col_cols] = im2col(x [C, H, W]). Overwrites col.
template <typename T>
void Im2Col(const ConvGeometry& g, const T* x, T* col);

// x [C, H, W] += col2im(col): each column entry is added back to the input
// position it was copied from (padding entries are dropped).
template <typename T>
void Col2ImAdd(const ConvGeometry& g, const T* col, T* x);

}  // namespace tandem::cpu

#endif  // TANDEM_TENSOR_CPU_IM2COL_H_
