#include "tensor/cpu/im2col.h"

#include <cstdint>

namespace tandem::cpu {
namespace {

// Calls f(col_index, x_index_or_minus_1) for every column-matrix entry, in
// col order. x index -1 marks padding.
template <typename F>
void ForEachEntry(const ConvGeometry& g, F f) {
  const int64_t oh_n = g.out_h(), ow_n = g.out_w();
  int64_t col_index = 0;
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        for (int64_t oh = 0; oh < oh_n; ++oh) {
          const int64_t h = oh * g.stride_h - g.pad_h + i;
          const bool row_ok = h >= 0 && h < g.height;
          const int64_t row_base = (c * g.height + h) * g.width;
          for (int64_t ow = 0; ow < ow_n; ++ow, ++col_index) {
            const int64_t w = ow * g.stride_w - g.pad_w + j;
            const bool ok = row_ok && w >= 0 && w < g.width;
            f(col_index, ok ? row_base + w : int64_t{-1});
          }
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void Im2Col(const ConvGeometry& g, const T* x, T* col) {
  ForEachEntry(g, [&](int64_t ci, int64_t xi) {
    col[ci] = xi >= 0 ? x[xi] : T(0);
  });
}

template <typename T>
void Col2ImAdd(const ConvGeometry& g, const T* col, T* x) {
  ForEachEntry(g, [&](int64_t ci, int64_t xi) {
    if (xi >= 0) x[xi] += col[ci];
  });
}

template void Im2Col<float>(const ConvGeometry&, const float*, float*);
template void Im2Col<double>(const ConvGeometry&, const double*, double*);
template void Col2ImAdd<float>(const ConvGeometry&, const float*, float*);
template void Col2ImAdd<double>(const ConvGeometry&, const double*, double*);

}  // namespace tandem::cpu
