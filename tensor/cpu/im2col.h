// im2col / col2im for 2-d convolution on NCHW images (host memory).
//
// For an image x [C, H, W], the column matrix col has C*kh*kw rows and
// out_h*out_w columns; row (c, i, j), column (oh, ow) holds
//   x[c, oh*stride_h - pad_h + i, ow*stride_w - pad_w + j]
// or 0 where that position falls in the zero padding. Convolution is then
// one GEMM: out [O, out_h*out_w] = weight [O, C*kh*kw] · col.
//
// The Taps variants write a batch's column matrices side by side (image n's
// columns at offset n*out_h*out_w of rows `ld` apart) and only the rows of
// the listed kernel taps (row (c, t) for tap t = i*kw + j), so a caller can
// drop the taps that read nothing but padding (LiveTaps): on ResNet's 1x1
// feature maps a 3x3 kernel has one live tap of nine.
//
// Pure functions over caller-owned buffers; thread-safe.
#ifndef TANDEM_TENSOR_CPU_IM2COL_H_
#define TANDEM_TENSOR_CPU_IM2COL_H_

#include <cstdint>
#include <vector>

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

// One convolution of a batch: the per-image geometry, the batch size and
// the output channels.
struct ConvProblem {
  ConvGeometry geometry;  // per image: channels, height, width, kernel...
  int64_t batch = 0;
  int64_t out_channels = 0;
};

// col [col_rows, col_cols] = im2col(x [C, H, W]). Overwrites col.
template <typename T>
void Im2Col(const ConvGeometry& g, const T* x, T* col);

// x [C, H, W] += col2im(col): each column entry is added back to the input
// position it was copied from (padding entries are dropped).
template <typename T>
void Col2ImAdd(const ConvGeometry& g, const T* col, T* x);

// The taps t = i*kernel_w + j, ascending, that read an input pixel at some
// output position; every other tap's column rows are all zero.
std::vector<int64_t> LiveTaps(const ConvGeometry& g);

// Rows (c, taps[k]) of im2col of each image of x [batch, C, H, W], in that
// order (c major): image n's entry (row, column) goes to
// col[row * ld + n * col_cols + column]. Overwrites them; ld must be at
// least batch * col_cols.
template <typename T>
void Im2ColTaps(const ConvGeometry& g, const std::vector<int64_t>& taps,
                int64_t batch, const T* x, T* col, int64_t ld);

// The adjoint of Im2ColTaps: x [batch, C, H, W] += col2im of those rows.
template <typename T>
void Col2ImTapsAdd(const ConvGeometry& g, const std::vector<int64_t>& taps,
                   int64_t batch, const T* col, int64_t ld, T* x);

}  // namespace tandem::cpu

#endif  // TANDEM_TENSOR_CPU_IM2COL_H_
