#include "tensor/cpu/pytorch_math/cascade_sum.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace tandem::internal {
namespace {

constexpr int kLevels = 4;

int64_t CeilLog2(int64_t x) {
  if (x <= 2) return 1;
  int64_t bits = 0;
  for (uint64_t v = static_cast<uint64_t>(x) - 1; v != 0; v >>= 1) ++bits;
  return bits;
}

// `kLanes` independent sums of `n` steps: lane k of step i reads
// data[i * step + k * lane_stride]. Each lane accumulates at level 0; every
// 2^p steps level 0 moves into level 1 (and, at multiples of 2^(2p), level
// 1 into 2, and so on); the levels are added into level 0 at the end.
template <typename T, int kLanes>
std::array<T, kLanes> LeveledSums(const T* data, int64_t step,
                                  int64_t lane_stride, int64_t n) {
  const int64_t power = std::max<int64_t>(4, CeilLog2(n) / kLevels);
  const int64_t level_step = int64_t{1} << power;
  const int64_t level_mask = level_step - 1;
  T acc[kLevels][kLanes] = {};
  int64_t i = 0;
  while (i + level_step <= n) {
    for (int64_t j = 0; j < level_step; ++j, ++i) {
      for (int k = 0; k < kLanes; ++k) {
        acc[0][k] += data[i * step + k * lane_stride];
      }
    }
    for (int j = 1; j < kLevels; ++j) {
      for (int k = 0; k < kLanes; ++k) {
        acc[j][k] += acc[j - 1][k];
        acc[j - 1][k] = T(0);
      }
      if ((i & (level_mask << (j * power))) != 0) break;
    }
  }
  for (; i < n; ++i) {
    for (int k = 0; k < kLanes; ++k) {
      acc[0][k] += data[i * step + k * lane_stride];
    }
  }
  for (int j = 1; j < kLevels; ++j) {
    for (int k = 0; k < kLanes; ++k) acc[0][k] += acc[j][k];
  }
  std::array<T, kLanes> out;
  for (int k = 0; k < kLanes; ++k) out[k] = acc[0][k];
  return out;
}

}  // namespace

template <typename T>
T CascadeSum(const T* data, int64_t stride, int64_t n) {
  constexpr int kInterleave = 4;
  const int64_t groups = n / kInterleave;
  std::array<T, kInterleave> partial =
      LeveledSums<T, kInterleave>(data, stride * kInterleave, stride, groups);
  for (int64_t i = groups * kInterleave; i < n; ++i) {
    partial[0] += data[i * stride];
  }
  for (int k = 1; k < kInterleave; ++k) partial[0] += partial[k];
  return partial[0];
}

// Leveled sums (as LeveledSums) of `lanes` independent lanes over `n`
// steps, lanes innermost so that a row-major matrix is read in order:
// load(i, lane) is lane's value at step i.
template <typename T, typename Load>
std::vector<T> LeveledLanes(int64_t n, int64_t lanes, Load load) {
  const int64_t power = std::max<int64_t>(4, CeilLog2(n) / kLevels);
  const int64_t level_step = int64_t{1} << power;
  const int64_t level_mask = level_step - 1;
  std::vector<T> acc(static_cast<size_t>(kLevels * lanes), T(0));
  auto level = [&](int j) { return acc.data() + j * lanes; };
  int64_t i = 0;
  while (i + level_step <= n) {
    for (int64_t j = 0; j < level_step; ++j, ++i) {
      T* a0 = level(0);
      for (int64_t k = 0; k < lanes; ++k) a0[k] += load(i, k);
    }
    for (int j = 1; j < kLevels; ++j) {
      T* up = level(j);
      T* down = level(j - 1);
      for (int64_t k = 0; k < lanes; ++k) {
        up[k] += down[k];
        down[k] = T(0);
      }
      if ((i & (level_mask << (j * power))) != 0) break;
    }
  }
  for (; i < n; ++i) {
    T* a0 = level(0);
    for (int64_t k = 0; k < lanes; ++k) a0[k] += load(i, k);
  }
  for (int j = 1; j < kLevels; ++j) {
    T* a0 = level(0);
    const T* aj = level(j);
    for (int64_t k = 0; k < lanes; ++k) a0[k] += aj[k];
  }
  acc.resize(static_cast<size_t>(lanes));
  return acc;
}

template <typename T>
void ColumnSums(const T* x, int64_t rows, int64_t cols, T* out) {
  // PyTorch reduces 32 columns at a time (4 vectors of 8) without the
  // interleave, then the rest column by column with it. Same arithmetic
  // per column as CascadeSum / LeveledSums<T, 1>, read row by row.
  const int64_t wide = cols / 32 * 32;
  if (wide > 0) {
    const std::vector<T> sums = LeveledLanes<T>(
        rows, wide, [&](int64_t i, int64_t c) { return x[i * cols + c]; });
    std::copy(sums.begin(), sums.end(), out);
  }
  const int64_t narrow = cols - wide;
  if (narrow == 0) return;
  constexpr int kInterleave = 4;
  const int64_t groups = rows / kInterleave;
  // Lane k * narrow + c: column wide + c, rows k, k + 4, k + 8, ...
  std::vector<T> partial = LeveledLanes<T>(
      groups, kInterleave * narrow, [&](int64_t i, int64_t lane) {
        const int64_t k = lane / narrow, c = lane % narrow;
        return x[(i * kInterleave + k) * cols + wide + c];
      });
  for (int64_t r = groups * kInterleave; r < rows; ++r) {
    for (int64_t c = 0; c < narrow; ++c) partial[c] += x[r * cols + wide + c];
  }
  for (int64_t c = 0; c < narrow; ++c) {
    T sum = partial[c];
    for (int k = 1; k < kInterleave; ++k) sum += partial[k * narrow + c];
    out[wide + c] = sum;
  }
}

template float CascadeSum<float>(const float*, int64_t, int64_t);
template double CascadeSum<double>(const double*, int64_t, int64_t);
template void ColumnSums<float>(const float*, int64_t, int64_t, float*);
template void ColumnSums<double>(const double*, int64_t, int64_t, double*);

}  // namespace tandem::internal
