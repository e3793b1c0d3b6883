#include "tensor/cpu/pytorch_math/softmax_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor/cpu/pytorch_math/sleef_mathf.h"

// Built with -ffp-contract=off: each fused multiply-add of PyTorch's build
// is an explicit std::fmaf, nothing else is fused.

namespace tandem::internal {
namespace {

constexpr int kLanes = 8;  // one AVX2 vector of floats

struct Vec {
  float v[kLanes];
};

// Lanes [0, n) from p, the rest 0 (Vectorized::loadu(p, n)).
Vec Load(const float* p, int64_t n = kLanes) {
  Vec r{};
  for (int64_t i = 0; i < n; ++i) r.v[i] = p[i];
  return r;
}

template <typename F>
Vec Map(const Vec& a, const Vec& b, F f) {
  Vec r;
  for (int i = 0; i < kLanes; ++i) r.v[i] = f(a.v[i], b.v[i]);
  return r;
}

// Combines the first `lanes` lanes of a partly filled vector as PyTorch's
// vec_reduce_all(f, v, size) does: lane i (i >= 1) folded into lane 0 in
// order.
template <typename F>
float ReduceLanes(const Vec& acc, int64_t lanes, F f) {
  float r = acc.v[0];
  for (int64_t i = 1; i < lanes; ++i) r = f(r, acc.v[i]);
  return r;
}

// Combines all 8 lanes as PyTorch's AVX2 vec_reduce_all(f, v) does: the
// two halves, then pairs of pairs, then neighbours (lane i with i ^ 4,
// then i ^ 2, then i ^ 1); lane 0's result.
template <typename F>
float ReduceTree(Vec v, F f) {
  for (int step : {4, 2, 1}) {
    Vec w;
    for (int i = 0; i < kLanes; ++i) w.v[i] = f(v.v[i], v.v[i ^ step]);
    v = w;
  }
  return v.v[0];
}

// vec::map_reduce_all: `map` on each vector of the row, `reduce` across
// vectors (a short tail updates only its own lanes), then across lanes.
template <typename M, typename R>
float MapReduceRow(const float* x, int64_t n, M map, R reduce) {
  auto mapped = [&](const float* p, int64_t count) {
    Vec v = Load(p, count);
    for (float& e : v.v) e = map(e);
    return v;
  };
  if (n < kLanes) return ReduceLanes(mapped(x, n), n, reduce);
  Vec acc = mapped(x, kLanes);
  int64_t d = kLanes;
  for (; d < n - n % kLanes; d += kLanes) {
    acc = Map(acc, mapped(x + d, kLanes), reduce);
  }
  if (n - d > 0) {
    const Vec t = Map(acc, mapped(x + d, n - d), reduce);
    for (int64_t i = 0; i < n - d; ++i) acc.v[i] = t.v[i];
  }
  return ReduceTree(acc, reduce);
}

float Max(float a, float b) {
  // _mm256_max_ps(a, b): b when either is NaN... PyTorch's vec::maximum
  // propagates NaN from either side.
  if (std::isnan(a) || std::isnan(b)) return std::nanf("");
  return a > b ? a : b;
}

float Add(float a, float b) { return a + b; }
float Identity(float a) { return a; }

float RowMax(const float* x, int64_t n) {
  return MapReduceRow(x, n, Identity, Max);
}

}  // namespace

void SoftmaxRows(const float* x, int64_t rows, int64_t cols, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    const float m = RowMax(in, cols);
    for (int64_t k = 0; k < cols; ++k) out[k] = SleefExpf(in[k] - m);
    const float inv = 1.0f / MapReduceRow(out, cols, Identity, Add);
    for (int64_t k = 0; k < cols; ++k) out[k] = out[k] * inv;
  }
}

void LogSoftmaxRows(const float* x, int64_t rows, int64_t cols, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    const float m = RowMax(in, cols);
    const float sum = MapReduceRow(
        in, cols, [m](float v) { return SleefExpf(v - m); }, Add);
    const float lse = SleefLogf(sum);
    for (int64_t k = 0; k < cols; ++k) out[k] = (in[k] - m) - lse;
  }
}

void SoftmaxBackwardRows(const float* g, const float* y, int64_t rows,
                         int64_t cols, float* gx) {
  std::vector<float> prod(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* gr = g + r * cols;
    const float* yr = y + r * cols;
    // sum(g * y): products per vector, summed across vectors as the
    // reduction adds them (the tail's add fused with its product).
    float dot;
    if (cols < kLanes) {
      Vec p{};
      for (int64_t k = 0; k < cols; ++k) p.v[k] = gr[k] * yr[k];
      dot = ReduceLanes(p, cols, Add);
    } else {
      Vec acc{};
      for (int i = 0; i < kLanes; ++i) acc.v[i] = gr[i] * yr[i];
      int64_t d = kLanes;
      for (; d < cols - cols % kLanes; d += kLanes) {
        for (int i = 0; i < kLanes; ++i) {
          acc.v[i] = std::fmaf(gr[d + i], yr[d + i], acc.v[i]);
        }
      }
      for (int64_t i = 0; i < cols - d; ++i) {
        acc.v[i] = std::fmaf(gr[d + i], yr[d + i], acc.v[i]);
      }
      dot = ReduceTree(acc, Add);
    }
    float* out = gx + r * cols;
    for (int64_t k = 0; k < cols; ++k) out[k] = (gr[k] - dot) * yr[k];
  }
}

void LogSoftmaxBackwardRows(const float* g, const float* y, int64_t rows,
                            int64_t cols, float* gx) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gr = g + r * cols;
    const float* yr = y + r * cols;
    const float sum = MapReduceRow(gr, cols, Identity, Add);
    float* out = gx + r * cols;
    for (int64_t k = 0; k < cols; ++k) {
      out[k] = std::fmaf(-SleefExpf(yr[k]), sum, gr[k]);
    }
  }
}

float NllLoss(const float* logp, const int64_t* labels, int64_t rows,
              int64_t cols, int64_t ignore_index, bool mean) {
  // Eight levels; level 0 moves up after every element whose index is a
  // multiple of 2^p (p >= 4), level j after multiples of 2^((j+1)p). An
  // ignored row is skipped before that step (PyTorch's `continue`).
  constexpr int kLevels = 8;
  int64_t ceil_log2 = 1;
  if (rows > 2) {
    ceil_log2 = 0;
    for (uint64_t v = static_cast<uint64_t>(rows) - 1; v != 0; v >>= 1) {
      ++ceil_log2;
    }
  }
  const int64_t power = std::max<int64_t>(4, ceil_log2 / kLevels);
  const int64_t mask = (int64_t{1} << power) - 1;
  float partial[kLevels] = {};
  int64_t ignored = 0;
  for (int64_t b = 0; b < rows; ++b) {
    if (labels[b] == ignore_index) {
      ++ignored;
      continue;
    }
    partial[0] -= logp[b * cols + labels[b]];
    for (int j = 0; j + 1 < kLevels; ++j) {
      if ((b & (mask << (j * power))) != 0) break;
      partial[j + 1] += partial[j];
      partial[j] = 0.0f;
    }
  }
  float total = 0.0f;
  for (float p : partial) total += p;
  return mean ? total / static_cast<float>(rows - ignored) : total;
}

}  // namespace tandem::internal
