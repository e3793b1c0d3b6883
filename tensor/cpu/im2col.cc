#include "tensor/cpu/im2col.h"

#include <algorithm>
#include <cstdint>

namespace tandem::cpu {
namespace {

// The output columns ow whose input column w = ow*stride_w - pad_w + j lies
// inside [0, width): a contiguous range [lo, hi) (empty when lo >= hi).
struct ValidRange {
  int64_t lo, hi;
};

ValidRange ValidColumns(const ConvGeometry& g, int64_t j) {
  const int64_t ow_n = g.out_w();
  const int64_t first = g.pad_w - j;  // ow * stride_w >= first
  int64_t lo = first <= 0 ? 0 : (first + g.stride_w - 1) / g.stride_w;
  const int64_t last = g.width - 1 + g.pad_w - j;  // ow * stride_w <= last
  int64_t hi = last < 0 ? 0 : std::min(ow_n, last / g.stride_w + 1);
  lo = std::min(lo, ow_n);
  return {lo, std::max(lo, hi)};
}

// Calls row(col_offset, inside, x_offset, valid) for every output row
// of every (c, i, j) — one contiguous run of out_w column entries each — so
// the per-element work below is a straight copy or add, without branches.
template <typename RowFn>
void ForEachRow(const ConvGeometry& g, RowFn row) {
  const int64_t oh_n = g.out_h(), ow_n = g.out_w();
  int64_t col_offset = 0;
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const ValidRange valid = ValidColumns(g, j);
        for (int64_t oh = 0; oh < oh_n; ++oh, col_offset += ow_n) {
          const int64_t h = oh * g.stride_h - g.pad_h + i;
          const bool inside = h >= 0 && h < g.height;
          // x index of output column 0 (may lie outside the row, even be
          // negative; only columns inside `valid` are used).
          const int64_t x_offset = (c * g.height + h) * g.width - g.pad_w + j;
          row(col_offset, inside, x_offset, valid);
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void Im2Col(const ConvGeometry& g, const T* x, T* col) {
  const int64_t ow_n = g.out_w(), sw = g.stride_w;
  ForEachRow(g, [&](int64_t co, bool inside, int64_t xo, ValidRange valid) {
    T* out = col + co;
    if (!inside) {
      std::fill(out, out + ow_n, T(0));
      return;
    }
    std::fill(out, out + valid.lo, T(0));
    if (sw == 1) {
      std::copy(x + xo + valid.lo, x + xo + valid.hi, out + valid.lo);
    } else {
      for (int64_t ow = valid.lo; ow < valid.hi; ++ow)
        out[ow] = x[xo + ow * sw];
    }
    std::fill(out + valid.hi, out + ow_n, T(0));
  });
}

template <typename T>
void Col2ImAdd(const ConvGeometry& g, const T* col, T* x) {
  const int64_t sw = g.stride_w;
  ForEachRow(g, [&](int64_t co, bool inside, int64_t xo, ValidRange valid) {
    if (!inside) return;
    const T* in = col + co;
    if (sw == 1) {
      T* dst = x + xo;
      for (int64_t ow = valid.lo; ow < valid.hi; ++ow) dst[ow] += in[ow];
    } else {
      for (int64_t ow = valid.lo; ow < valid.hi; ++ow)
        x[xo + ow * sw] += in[ow];
    }
  });
}

template void Im2Col<float>(const ConvGeometry&, const float*, float*);
template void Im2Col<double>(const ConvGeometry&, const double*, double*);
template void Col2ImAdd<float>(const ConvGeometry&, const float*, float*);
template void Col2ImAdd<double>(const ConvGeometry&, const double*, double*);

}  // namespace tandem::cpu
