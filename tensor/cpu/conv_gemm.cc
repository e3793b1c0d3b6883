#include "tensor/cpu/conv_gemm.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/cpu/blas.h"

namespace tandem::cpu {
namespace {

#define TANDEM_CONV_GEMM(expr)                     \
  do {                                             \
    absl::Status tandem_conv_gemm_status = (expr); \
    if (!tandem_conv_gemm_status.ok()) {           \
      return tandem_conv_gemm_status;              \
    }                                              \
  } while (false)

// The shape of the batched products: K = C * live taps rows of the column
// matrix, NC = N * OH * OW columns (image n's at n * cols).
struct Layout {
  std::vector<int64_t> taps;  // live taps, ascending
  int64_t taps_all = 0;       // KH * KW
  int64_t k = 0;              // C * taps.size()
  int64_t cols = 0;           // OH * OW
  int64_t nc = 0;             // N * cols
  int64_t in_plane = 0;       // C * H * W

  bool all_live() const {
    return static_cast<int64_t>(taps.size()) == taps_all;
  }
};

Layout LayoutOf(const ConvProblem& p) {
  const ConvGeometry& g = p.geometry;
  Layout l;
  l.taps = LiveTaps(g);
  l.taps_all = g.kernel_h * g.kernel_w;
  l.k = g.channels * static_cast<int64_t>(l.taps.size());
  l.cols = g.col_cols();
  l.nc = p.batch * l.cols;
  l.in_plane = g.channels * g.height * g.width;
  return l;
}

template <typename T>
std::unique_ptr<T[]> Uninit(int64_t n) {
  return std::make_unique_for_overwrite<T[]>(static_cast<size_t>(n));
}

// col [K, NC]: every image's live rows side by side.
template <typename T>
std::unique_ptr<T[]> Columns(const ConvProblem& p, const Layout& l,
                             const T* x) {
  std::unique_ptr<T[]> col = Uninit<T>(l.k * l.nc);
  Im2ColTaps(p.geometry, l.taps, p.batch, x, col.get(), l.nc);
  return col;
}

// The weight's live columns [O, K] (w itself when every tap is live).
template <typename T>
const T* LiveWeights(const ConvProblem& p, const Layout& l, const T* w,
                     std::unique_ptr<T[]>& storage) {
  if (l.all_live()) return w;
  storage = Uninit<T>(p.out_channels * l.k);
  const int64_t live = static_cast<int64_t>(l.taps.size());
  for (int64_t r = 0; r < p.out_channels * p.geometry.channels; ++r) {
    for (int64_t t = 0; t < live; ++t) {
      storage[r * live + t] = w[r * l.taps_all + l.taps[t]];
    }
  }
  return storage.get();
}

// dW [O, K] (+)= gy [O, NC] · col^T, into dw [O, C, KH, KW]; leaves the
// column matrix in `col` for BackwardData's reuse as scratch. dw's dead
// taps were zeroed by the caller when not accumulating. Kept out of line
// (as BackwardData) so profiles name each pass (bench/PERFORMANCE.md).
template <typename T>
[[gnu::noinline]] absl::Status BackwardWeights(const ConvProblem& p,
                                               const Layout& l, const T* x,
                                               const T* gy, T* dw,
                                               bool accumulate,
                                               std::unique_ptr<T[]>& col) {
  const int64_t o_n = p.out_channels;
  col = Columns(p, l, x);
  // oneDNN's sgemm: 1.2-1.7x OpenBLAS's on these A·Bᵀ shapes (long K).
  if (l.all_live()) {
    return GemmOneDnn<T>(false, true, o_n, l.k, l.nc, T(1), gy, col.get(),
                         accumulate ? T(1) : T(0), dw);
  }
  std::unique_ptr<T[]> dwl = Uninit<T>(o_n * l.k);
  TANDEM_CONV_GEMM(GemmOneDnn<T>(false, true, o_n, l.k, l.nc, T(1), gy,
                                 col.get(), T(0), dwl.get()));
  const int64_t live = static_cast<int64_t>(l.taps.size());
  for (int64_t r = 0; r < o_n * p.geometry.channels; ++r) {
    for (int64_t t = 0; t < live; ++t) {
      dw[r * l.taps_all + l.taps[t]] += dwl[r * live + t];
    }
  }
  return absl::OkStatus();
}

// dcol [K, NC] = W^T · gy, then dx += col2im(dcol); `col` is scratch (the
// weight pass's column matrix when it ran, else allocated here).
template <typename T>
[[gnu::noinline]] absl::Status BackwardData(const ConvProblem& p,
                                            const Layout& l, const T* w,
                                            const T* gy, T* dx,
                                            std::unique_ptr<T[]>& col) {
  std::unique_ptr<T[]> w_storage;
  const T* wl = LiveWeights(p, l, w, w_storage);
  if (col == nullptr) col = Uninit<T>(l.k * l.nc);
  TANDEM_CONV_GEMM(Gemm<T>(true, false, l.k, l.nc, p.out_channels, T(1), wl, gy,
                           T(0), col.get()));
  Col2ImTapsAdd(p.geometry, l.taps, p.batch, col.get(), l.nc, dx);
  return absl::OkStatus();
}

}  // namespace

template <typename T>
absl::Status ConvGemmForward(const ConvProblem& p, const T* x, const T* w,
                             const T* bias, T* y) {
  const Layout l = LayoutOf(p);
  const int64_t o_n = p.out_channels;
  if (l.nc == 0 || o_n == 0) return absl::OkStatus();
  std::unique_ptr<T[]> w_storage;
  const T* wl = LiveWeights(p, l, w, w_storage);
  std::unique_ptr<T[]> col = Columns(p, l, x);
  // out [O, NC] = W · col, then each image's block moved to y [N, O, cols]
  // with the bias added (one pass over the output either way).
  std::unique_ptr<T[]> out = Uninit<T>(o_n * l.nc);
  TANDEM_CONV_GEMM(Gemm<T>(false, false, o_n, l.nc, l.k, T(1), wl, col.get(),
                           T(0), out.get()));
  for (int64_t o = 0; o < o_n; ++o) {
    const T b = bias != nullptr ? bias[o] : T(0);
    for (int64_t n = 0; n < p.batch; ++n) {
      const T* src = out.get() + o * l.nc + n * l.cols;
      T* dst = y + (n * o_n + o) * l.cols;
      for (int64_t i = 0; i < l.cols; ++i) dst[i] = src[i] + b;
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ConvGemmBackward(const ConvProblem& p, const T* x, const T* w,
                              const T* dy, T* dw, bool accumulate_dw, T* dx,
                              bool accumulate_dx) {
  const Layout l = LayoutOf(p);
  const ConvGeometry& g = p.geometry;
  const int64_t o_n = p.out_channels;
  const int64_t w_count = o_n * g.col_rows();
  const bool empty = l.nc == 0 || o_n == 0 || l.k == 0;
  // dW is written by one GEMM (beta 0) when every tap is live; otherwise
  // the dead taps' entries are zero and the live ones added below.
  if (dw != nullptr && !accumulate_dw && (empty || !l.all_live())) {
    std::fill(dw, dw + w_count, T(0));
  }
  if (dx != nullptr && !accumulate_dx) {
    std::fill(dx, dx + p.batch * l.in_plane, T(0));
  }
  if (empty) return absl::OkStatus();
  // dy as [O, NC]: the layout both products read.
  std::unique_ptr<T[]> gy = Uninit<T>(o_n * l.nc);
  for (int64_t n = 0; n < p.batch; ++n) {
    for (int64_t o = 0; o < o_n; ++o) {
      const T* src = dy + (n * o_n + o) * l.cols;
      T* dst = gy.get() + o * l.nc + n * l.cols;
      // A plain loop: rows are 1 to 64 wide here, below memcpy's break-even.
      for (int64_t i = 0; i < l.cols; ++i) dst[i] = src[i];
    }
  }
  std::unique_ptr<T[]> col;
  if (dw != nullptr) {
    TANDEM_CONV_GEMM(
        BackwardWeights(p, l, x, gy.get(), dw, accumulate_dw, col));
  }
  if (dx != nullptr) {
    TANDEM_CONV_GEMM(BackwardData(p, l, w, gy.get(), dx, col));
  }
  return absl::OkStatus();
}

template absl::Status ConvGemmForward<float>(const ConvProblem&, const float*,
                                             const float*, const float*,
                                             float*);
template absl::Status ConvGemmForward<double>(const ConvProblem&, const double*,
                                              const double*, const double*,
                                              double*);
template absl::Status ConvGemmBackward<float>(const ConvProblem&, const float*,
                                              const float*, const float*,
                                              float*, bool, float*, bool);
template absl::Status ConvGemmBackward<double>(const ConvProblem&,
                                               const double*, const double*,
                                               const double*, double*, bool,
                                               double*, bool);

}  // namespace tandem::cpu
