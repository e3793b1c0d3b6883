#include "tensor/cpu/im2col.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace tandem::cpu {
namespace {

// The output positions o whose input position o*stride - pad + k lies
// inside [0, size): a contiguous range [lo, hi) (empty when lo >= hi).
struct ValidRange {
  int64_t lo, hi;
};

ValidRange Valid(int64_t size, int64_t stride, int64_t pad, int64_t out_n,
                 int64_t k) {
  const int64_t first = pad - k;  // o * stride >= first
  int64_t lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  const int64_t last = size - 1 + pad - k;  // o * stride <= last
  int64_t hi = last < 0 ? 0 : std::min(out_n, last / stride + 1);
  lo = std::min(lo, out_n);
  return {lo, std::max(lo, hi)};
}

ValidRange ValidColumns(const ConvGeometry& g, int64_t j) {
  return Valid(g.width, g.stride_w, g.pad_w, g.out_w(), j);
}

ValidRange ValidRows(const ConvGeometry& g, int64_t i) {
  return Valid(g.height, g.stride_h, g.pad_h, g.out_h(), i);
}

std::vector<int64_t> AllTaps(const ConvGeometry& g) {
  std::vector<int64_t> taps(static_cast<size_t>(g.kernel_h * g.kernel_w));
  std::iota(taps.begin(), taps.end(), int64_t{0});
  return taps;
}

// Where one column row's entries come from, per output row oh: image
// row h (inside: whether it lies in the image, not the padding) and the
// output columns [lo, hi) that read a pixel.
struct Segment {
  bool inside;
  int64_t x_offset;  // in the channel plane, of output column 0 (may be
                     // negative or past the row; only [lo, hi) is read)
  int64_t lo, hi;
};

// The segments of every tap, [taps.size() * out_h], tap major.
std::vector<Segment> Segments(const ConvGeometry& g,
                              const std::vector<int64_t>& taps) {
  const int64_t oh_n = g.out_h();
  std::vector<Segment> segments;
  segments.reserve(taps.size() * static_cast<size_t>(oh_n));
  for (const int64_t tap : taps) {
    const int64_t i = tap / g.kernel_w, j = tap % g.kernel_w;
    const ValidRange valid = ValidColumns(g, j);
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      const int64_t h = oh * g.stride_h - g.pad_h + i;
      segments.push_back({h >= 0 && h < g.height, h * g.width - g.pad_w + j,
                          valid.lo, valid.hi});
    }
  }
  return segments;
}

// Calls run(col_offset, x_offset, segment) for every output row of every
// (c, tap) row of every image: one run of out_w column entries at
// col_offset whose pixels start at x_offset (the segment's offset plus the
// image's and channel's planes). Column row (c, k) starts at
// (c * taps + k) * ld; image n's columns at n * out_h * out_w. The
// per-element work is then a plain loop, with no per-call overhead on the
// 1- to 4-wide rows of small feature maps.
template <typename RunFn>
void ForEachRun(const ConvGeometry& g, const std::vector<int64_t>& taps,
                int64_t batch, int64_t ld, RunFn run) {
  const std::vector<Segment> segments = Segments(g, taps);
  const int64_t oh_n = g.out_h(), ow_n = g.out_w();
  const int64_t cols = oh_n * ow_n, plane = g.height * g.width;
  const int64_t in_image = g.channels * plane;
  const int64_t num_taps = static_cast<int64_t>(taps.size());
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t k = 0; k < num_taps; ++k) {
      const Segment* seg = segments.data() + k * oh_n;
      const int64_t row = (c * num_taps + k) * ld;
      for (int64_t n = 0; n < batch; ++n) {
        const int64_t x_base = n * in_image + c * plane;
        int64_t col_offset = row + n * cols;
        for (int64_t oh = 0; oh < oh_n; ++oh, col_offset += ow_n) {
          run(col_offset, x_base + seg[oh].x_offset, seg[oh]);
        }
      }
    }
  }
}

}  // namespace

std::vector<int64_t> LiveTaps(const ConvGeometry& g) {
  std::vector<int64_t> taps;
  for (int64_t i = 0; i < g.kernel_h; ++i) {
    const ValidRange rows = ValidRows(g, i);
    if (rows.lo >= rows.hi) continue;
    for (int64_t j = 0; j < g.kernel_w; ++j) {
      const ValidRange cols = ValidColumns(g, j);
      if (cols.lo < cols.hi) taps.push_back(i * g.kernel_w + j);
    }
  }
  return taps;
}

template <typename T>
void Im2ColTaps(const ConvGeometry& g, const std::vector<int64_t>& taps,
                int64_t batch, const T* x, T* col, int64_t ld) {
  const int64_t ow_n = g.out_w(), sw = g.stride_w;
  ForEachRun(g, taps, batch, ld,
             [&](int64_t co, int64_t xo, const Segment& seg) {
               T* out = col + co;
               if (!seg.inside) {
                 for (int64_t ow = 0; ow < ow_n; ++ow) out[ow] = T(0);
                 return;
               }
               const T* in = x + xo;
               for (int64_t ow = 0; ow < seg.lo; ++ow) out[ow] = T(0);
               if (sw == 1) {
                 for (int64_t ow = seg.lo; ow < seg.hi; ++ow) out[ow] = in[ow];
               } else {
                 for (int64_t ow = seg.lo; ow < seg.hi; ++ow)
                   out[ow] = in[ow * sw];
               }
               for (int64_t ow = seg.hi; ow < ow_n; ++ow) out[ow] = T(0);
             });
}

template <typename T>
void Col2ImTapsAdd(const ConvGeometry& g, const std::vector<int64_t>& taps,
                   int64_t batch, const T* col, int64_t ld, T* x) {
  const int64_t sw = g.stride_w;
  ForEachRun(g, taps, batch, ld,
             [&](int64_t co, int64_t xo, const Segment& seg) {
               if (!seg.inside) return;
               const T* in = col + co;
               T* out = x + xo;
               if (sw == 1) {
                 for (int64_t ow = seg.lo; ow < seg.hi; ++ow) out[ow] += in[ow];
               } else {
                 for (int64_t ow = seg.lo; ow < seg.hi; ++ow)
                   out[ow * sw] += in[ow];
               }
             });
}

template <typename T>
void Im2Col(const ConvGeometry& g, const T* x, T* col) {
  Im2ColTaps(g, AllTaps(g), 1, x, col, g.col_cols());
}

template <typename T>
void Col2ImAdd(const ConvGeometry& g, const T* col, T* x) {
  Col2ImTapsAdd(g, AllTaps(g), 1, col, g.col_cols(), x);
}

template void Im2Col<float>(const ConvGeometry&, const float*, float*);
template void Im2Col<double>(const ConvGeometry&, const double*, double*);
template void Col2ImAdd<float>(const ConvGeometry&, const float*, float*);
template void Col2ImAdd<double>(const ConvGeometry&, const double*, double*);
template void Im2ColTaps<float>(const ConvGeometry&,
                                const std::vector<int64_t>&, int64_t,
                                const float*, float*, int64_t);
template void Im2ColTaps<double>(const ConvGeometry&,
                                 const std::vector<int64_t>&, int64_t,
                                 const double*, double*, int64_t);
template void Col2ImTapsAdd<float>(const ConvGeometry&,
                                   const std::vector<int64_t>&, int64_t,
                                   const float*, int64_t, float*);
template void Col2ImTapsAdd<double>(const ConvGeometry&,
                                    const std::vector<int64_t>&, int64_t,
                                    const double*, int64_t, double*);

}  // namespace tandem::cpu
