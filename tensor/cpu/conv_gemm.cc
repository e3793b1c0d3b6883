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

// The products run over chunks of `chunk` images: enough output pixels
// per GEMM (kMinColumns) for the GEMM to run near its peak, no more, so the
// chunk's column matrix stays small enough for the caches and a large
// feature map (one image already wide enough) needs no gather or scatter.
constexpr int64_t kMinColumns = 512;

// The shape of the products: K = C * live taps rows of the column matrix;
// a chunk of b images has b * cols columns (image n's at n * cols).
struct Layout {
  std::vector<int64_t> taps;  // live taps, ascending
  int64_t taps_all = 0;       // KH * KW
  int64_t k = 0;              // C * taps.size()
  int64_t cols = 0;           // OH * OW
  int64_t chunk = 1;          // images per GEMM
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
  l.chunk = std::clamp<int64_t>(
      (kMinColumns + l.cols - 1) / std::max<int64_t>(l.cols, 1), 1,
      std::max<int64_t>(p.batch, 1));
  l.in_plane = g.channels * g.height * g.width;
  return l;
}

template <typename T>
std::unique_ptr<T[]> Uninit(int64_t n) {
  return std::make_unique_for_overwrite<T[]>(static_cast<size_t>(n));
}

bool IsPointwise(const ConvGeometry& g) {
  return g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 &&
         g.stride_w == 1 && g.pad_h == 0 && g.pad_w == 0;
}

// The column matrix [K, b * cols] of images x [b, C, H, W]: x itself for
// one image of a pointwise convolution, else im2col into `col`.
template <typename T>
const T* Columns(const ConvProblem& p, const Layout& l, int64_t b, const T* x,
                 T* col) {
  if (b == 1 && IsPointwise(p.geometry)) return x;
  Im2ColTaps(p.geometry, l.taps, b, x, col, b * l.cols);
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

// dW [O, K] (+)= gy [O, b * cols] · col^T for one chunk, into `dwl` (dw
// itself when every tap is live). Kept out of line (as BackwardData) so
// profiles name each pass (bench/PERFORMANCE.md).
template <typename T>
[[gnu::noinline]] absl::Status BackwardWeights(const ConvProblem& p,
                                               const Layout& l, int64_t b,
                                               const T* x, const T* gy, T* col,
                                               T* dwl, bool add) {
  const T* c = Columns(p, l, b, x, col);
  // oneDNN's sgemm: faster than OpenBLAS's on 13 of 14 runs of ResNet-18's
  // A·Bᵀ shapes (long K), bench/PERFORMANCE.md.
  return GemmOneDnn<T>(false, true, p.out_channels, l.k, b * l.cols, T(1), gy,
                       c, add ? T(1) : T(0), dwl);
}

// dcol [K, b * cols] = W^T · gy, then dx += col2im(dcol) for one chunk;
// `col` is scratch.
template <typename T>
[[gnu::noinline]] absl::Status BackwardData(const ConvProblem& p,
                                            const Layout& l, int64_t b,
                                            const T* wl, const T* gy, T* col,
                                            T* dx) {
  TANDEM_CONV_GEMM(Gemm<T>(true, false, l.k, b * l.cols, p.out_channels, T(1),
                           wl, gy, T(0), col));
  Col2ImTapsAdd(p.geometry, l.taps, b, col, b * l.cols, dx);
  return absl::OkStatus();
}

}  // namespace

template <typename T>
absl::Status ConvGemmForward(const ConvProblem& p, const T* x, const T* w,
                             const T* bias, T* y) {
  const Layout l = LayoutOf(p);
  const int64_t o_n = p.out_channels;
  if (p.batch == 0 || l.cols == 0 || o_n == 0) return absl::OkStatus();
  std::unique_ptr<T[]> w_storage;
  const T* wl = LiveWeights(p, l, w, w_storage);
  std::unique_ptr<T[]> col = Uninit<T>(l.k * l.chunk * l.cols);
  std::unique_ptr<T[]> out =
      l.chunk > 1 ? Uninit<T>(o_n * l.chunk * l.cols) : nullptr;
  for (int64_t n0 = 0; n0 < p.batch; n0 += l.chunk) {
    const int64_t b = std::min(l.chunk, p.batch - n0);
    const int64_t nc = b * l.cols;
    T* y0 = y + n0 * o_n * l.cols;
    const T* c = Columns(p, l, b, x + n0 * l.in_plane, col.get());
    // One image: straight into y. Several: out [O, b * cols], then each
    // image's block moved to y [b, O, cols]. The bias is added in the
    // same pass.
    T* dst = b == 1 ? y0 : out.get();
    TANDEM_CONV_GEMM(
        Gemm<T>(false, false, o_n, nc, l.k, T(1), wl, c, T(0), dst));
    for (int64_t o = 0; o < o_n; ++o) {
      const T bo = bias != nullptr ? bias[o] : T(0);
      if (b == 1) {
        if (bias == nullptr) continue;
        for (int64_t i = 0; i < l.cols; ++i) y0[o * l.cols + i] += bo;
        continue;
      }
      for (int64_t n = 0; n < b; ++n) {
        const T* src = out.get() + o * nc + n * l.cols;
        T* to = y0 + (n * o_n + o) * l.cols;
        for (int64_t i = 0; i < l.cols; ++i) to[i] = src[i] + bo;
      }
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
  const bool empty = p.batch == 0 || l.cols == 0 || o_n == 0 || l.k == 0;
  // dW is written by the GEMMs (beta 0 first) when every tap is live;
  // otherwise the dead taps' entries are zero and the live ones added.
  if (dw != nullptr && !accumulate_dw && (empty || !l.all_live())) {
    std::fill(dw, dw + w_count, T(0));
  }
  if (dx != nullptr && !accumulate_dx) {
    std::fill(dx, dx + p.batch * l.in_plane, T(0));
  }
  if (empty) return absl::OkStatus();
  std::unique_ptr<T[]> w_storage, dwl_storage;
  const T* wl = dx != nullptr ? LiveWeights(p, l, w, w_storage) : nullptr;
  T* dwl = dw;
  if (dw != nullptr && !l.all_live()) {
    dwl_storage = Uninit<T>(o_n * l.k);
    dwl = dwl_storage.get();
  }
  std::unique_ptr<T[]> col = Uninit<T>(l.k * l.chunk * l.cols);
  std::unique_ptr<T[]> gy_storage =
      l.chunk > 1 ? Uninit<T>(o_n * l.chunk * l.cols) : nullptr;
  for (int64_t n0 = 0; n0 < p.batch; n0 += l.chunk) {
    const int64_t b = std::min(l.chunk, p.batch - n0);
    const int64_t nc = b * l.cols;
    // dy as [O, b * cols], the layout both products read: dy itself for
    // one image.
    const T* dy0 = dy + n0 * o_n * l.cols;
    const T* gy = dy0;
    if (b > 1) {
      for (int64_t n = 0; n < b; ++n) {
        for (int64_t o = 0; o < o_n; ++o) {
          const T* src = dy0 + (n * o_n + o) * l.cols;
          T* to = gy_storage.get() + o * nc + n * l.cols;
          // A plain loop: rows are 1 to 64 wide here, below memcpy's
          // break-even.
          for (int64_t i = 0; i < l.cols; ++i) to[i] = src[i];
        }
      }
      gy = gy_storage.get();
    }
    if (dw != nullptr) {
      const bool add = n0 > 0 || (accumulate_dw && l.all_live());
      TANDEM_CONV_GEMM(BackwardWeights(p, l, b, x + n0 * l.in_plane, gy,
                                       col.get(), dwl, add));
    }
    if (dx != nullptr) {
      TANDEM_CONV_GEMM(
          BackwardData(p, l, b, wl, gy, col.get(), dx + n0 * l.in_plane));
    }
  }
  if (dw != nullptr && !l.all_live()) {
    const int64_t live = static_cast<int64_t>(l.taps.size());
    for (int64_t r = 0; r < o_n * g.channels; ++r) {
      for (int64_t t = 0; t < live; ++t) {
        dw[r * l.taps_all + l.taps[t]] += dwl[r * live + t];
      }
    }
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
