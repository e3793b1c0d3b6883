#include "tensor/generator.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tensor/normal_fill.h"

namespace tandem {
namespace {

// PyTorch switches randperm from random() to random64() at this size so the
// modulo stays unbiased (uint32 max / 20).
constexpr int64_t kRandperm64Threshold = int64_t{0xFFFFFFFF} / 20;

constexpr double kPi = 3.14159265358979323846;

// ATen's uniform_real for float: 24 random bits scaled in double.
inline double UniformFloatBits(uint32_t v) {
  constexpr uint32_t kMask = (uint32_t{1} << 24) - 1;
  constexpr double kDivisor = 1.0 / static_cast<double>(uint32_t{1} << 24);
  return static_cast<double>(v & kMask) * kDivisor;
}

// ATen's uniform_real for double: 53 random bits.
inline double UniformDoubleBits(uint64_t v) {
  constexpr uint64_t kMask = (uint64_t{1} << 53) - 1;
  constexpr double kDivisor = 1.0 / static_cast<double>(uint64_t{1} << 53);
  return static_cast<double>(v & kMask) * kDivisor;
}

// Box-Muller on 16 doubles in place, like ATen's normal_fill_16<double>: the
// first 8 give the radii, the last 8 the angles, with the C library's
// log/cos/sin and the multiply-add fused as PyTorch's x86-64 build does.
void NormalFill16(double* data, double mean, double std) {
  for (int j = 0; j < 8; ++j) {
    const double u1 = 1 - data[j];  // [0, 1) -> (0, 1] for log.
    const double u2 = data[j + 8];
    const double radius = std::sqrt(-2 * std::log(u1));
    const double theta = 2.0 * kPi * u2;
    data[j] = std::fma(radius * std::cos(theta), std, mean);
    data[j + 8] = std::fma(radius * std::sin(theta), std, mean);
  }
}

// PyTorch's normal_fill: uniforms for all n, 16 at a time through `fill16`,
// and when n % 16 != 0 the last 16 drawn afresh and transformed again.
template <typename T, typename Fill16>
void NormalFill(Generator& gen, T* out, int64_t n, T mean, T std,
                Fill16 fill16) {
  gen.Uniform(out, n, T(0), T(1));
  for (int64_t i = 0; i + 16 <= n; i += 16) fill16(out + i, mean, std);
  if (n % 16 != 0) {
    T* tail = out + n - 16;
    gen.Uniform(tail, 16, T(0), T(1));
    fill16(tail, mean, std);
  }
}

}  // namespace

Generator::Generator(uint64_t seed) { ManualSeed(seed); }

void Generator::ManualSeed(uint64_t seed) {
  initial_seed_ = seed;
  engine_.seed(static_cast<uint32_t>(seed));
  next_double_normal_.reset();
}

uint32_t Generator::Random() { return static_cast<uint32_t>(engine_()); }

uint64_t Generator::Random64() {
  const uint64_t hi = Random();
  const uint64_t lo = Random();
  return (hi << 32) | lo;
}

std::vector<int64_t> Generator::Randperm(int64_t n) {
  if (n <= 0) return {};
  std::vector<int64_t> r(static_cast<size_t>(n));
  std::iota(r.begin(), r.end(), int64_t{0});
  const bool wide = n >= kRandperm64Threshold;
  for (int64_t i = 0; i < n - 1; ++i) {
    const uint64_t draw = wide ? Random64() : uint64_t{Random()};
    const int64_t z = static_cast<int64_t>(draw % static_cast<uint64_t>(n - i));
    std::swap(r[static_cast<size_t>(i)], r[static_cast<size_t>(i + z)]);
  }
  return r;
}

void Generator::Uniform(float* out, int64_t n, float from, float to) {
  // ATen computes `to - from` in the tensor's type, then widens, and its
  // x86-64 kernels are built with FMA contraction: x * range + from is one
  // fused operation (visible in f64 results; see generator_test).
  const double range = static_cast<double>(to - from);
  const double lo = static_cast<double>(from);
  for (int64_t i = 0; i < n; ++i) {
    out[i] =
        static_cast<float>(std::fma(UniformFloatBits(Random()), range, lo));
  }
}

void Generator::Uniform(double* out, int64_t n, double from, double to) {
  const double range = to - from;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = std::fma(UniformDoubleBits(Random64()), range, from);
  }
}

double Generator::NextDoubleNormal() {
  if (next_double_normal_.has_value()) {
    const double cached = *next_double_normal_;
    next_double_normal_.reset();
    return cached;
  }
  const double u1 = UniformDoubleBits(Random64());
  const double u2 = UniformDoubleBits(Random64());
  const double r = std::sqrt(-2.0 * std::log(1.0 - u2));
  const double theta = 2.0 * kPi * u1;
  next_double_normal_ = r * std::sin(theta);
  return r * std::cos(theta);
}

void Generator::Normal(float* out, int64_t n, float mean, float std) {
  if (n <= 0) return;
  if (n < 16) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<float>(
          std::fma(NextDoubleNormal(), double{std}, double{mean}));
    }
    return;
  }
  NormalFill(*this, out, n, mean, std, internal::NormalFill16);
}

void Generator::Normal(double* out, int64_t n, double mean, double std) {
  if (n <= 0) return;
  if (n < 16) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = std::fma(NextDoubleNormal(), std, mean);
    }
    return;
  }
  NormalFill(*this, out, n, mean, std,
             [](double* d, double m, double s) { NormalFill16(d, m, s); });
}

std::string Generator::State() const {
  std::ostringstream out;
  out << "tandem-generator-v1 " << initial_seed_ << " " << engine_ << " ";
  if (next_double_normal_.has_value()) {
    uint64_t bits;
    std::memcpy(&bits, &*next_double_normal_, sizeof(bits));
    out << "1 " << bits;
  } else {
    out << "0 0";
  }
  return out.str();
}

absl::Status Generator::SetState(const std::string& state) {
  std::istringstream in(state);
  std::string tag;
  uint64_t seed = 0;
  std::mt19937 engine;
  int has_normal = 0;
  uint64_t bits = 0;
  in >> tag >> seed >> engine >> has_normal >> bits;
  std::string rest;
  if (in.fail() || tag != "tandem-generator-v1" ||
      (has_normal != 0 && has_normal != 1) || (in >> rest)) {
    return absl::InvalidArgumentError(
        "Generator::SetState: the text is not a Generator::State() result "
        "(expected \"tandem-generator-v1 <seed> <624 words and position> "
        "<0|1> <bits>\"); pass what State() returned");
  }
  initial_seed_ = seed;
  engine_ = engine;
  next_double_normal_.reset();
  if (has_normal == 1) {
    double value;
    std::memcpy(&value, &bits, sizeof(value));
    next_double_normal_ = value;
  }
  return absl::OkStatus();
}

}  // namespace tandem
