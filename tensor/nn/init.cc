#include "tensor/nn/init.h"

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/dtype.h"
#include "tensor/device.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace tandem::nn::init {
namespace {

absl::Status CheckFillable(const Tensor& t, const char* what) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("nn::init::", what, ": the tensor is undefined"));
  }
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kF64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nn::init::", what, ": expected an f32 or f64 tensor, got ",
        std::string(DTypeName(t.dtype())), " with shape ",
        ShapeToString(t.shape())));
  }
  if (t.device() != Device::CPU()) {
    return absl::InvalidArgumentError(
        absl::StrCat("nn::init::", what, ": expected a CPU tensor, got one on ",
                     t.device().ToString(),
                     "; initialise on the CPU, then move it with To(device)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Uniform(const Tensor& t, double from, double to, Generator& gen) {
  absl::Status s = CheckFillable(t, "Uniform");
  if (!s.ok()) return s;
  if (t.dtype() == DType::kF32) {
    gen.Uniform(t.data<float>(), t.numel(), static_cast<float>(from),
                static_cast<float>(to));
  } else {
    gen.Uniform(t.data<double>(), t.numel(), from, to);
  }
  return absl::OkStatus();
}

absl::Status Normal(const Tensor& t, double mean, double std, Generator& gen) {
  absl::Status s = CheckFillable(t, "Normal");
  if (!s.ok()) return s;
  if (t.dtype() == DType::kF32) {
    gen.Normal(t.data<float>(), t.numel(), static_cast<float>(mean),
               static_cast<float>(std));
    return absl::OkStatus();
  }
  gen.Normal(t.data<double>(), t.numel(), mean, std);
  return absl::OkStatus();
}

namespace {

// size(dim) times the receptive field (the product of dims 2..).
absl::StatusOr<int64_t> Fan(const Tensor& weight, int dim, const char* fn) {
  if (!weight.defined() || weight.ndim() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nn::init::", fn, ": expected a weight with at least 2 dims, got ",
        weight.defined() ? ShapeToString(weight.shape())
                         : "an undefined tensor"));
  }
  int64_t fan = weight.dim(dim);
  for (int64_t i = 2; i < weight.ndim(); ++i) fan *= weight.dim(i);
  return fan;
}

}  // namespace

absl::StatusOr<int64_t> FanIn(const Tensor& weight) {
  return Fan(weight, 1, "FanIn");
}

absl::StatusOr<int64_t> FanOut(const Tensor& weight) {
  return Fan(weight, 0, "FanOut");
}

double KaimingUniformBound(int64_t fan_in, double a) {
  const double gain = std::sqrt(2.0 / (1 + a * a));
  const double std_dev = gain / std::sqrt(static_cast<double>(fan_in));
  return std::sqrt(3.0) * std_dev;
}

absl::Status KaimingUniform(const Tensor& t, double a, Generator& gen) {
  absl::StatusOr<int64_t> fan_in = FanIn(t);
  if (!fan_in.ok()) return fan_in.status();
  if (*fan_in == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nn::init::KaimingUniform: fan_in is 0 for a weight of shape ",
        ShapeToString(t.shape()), "; the bound would be infinite"));
  }
  const double bound = KaimingUniformBound(*fan_in, a);
  return Uniform(t, -bound, bound, gen);
}

absl::Status KaimingNormal(const Tensor& t, double a, FanMode mode,
                           Generator& gen) {
  absl::StatusOr<int64_t> fan = mode == FanMode::kFanIn ? FanIn(t) : FanOut(t);
  if (!fan.ok()) return fan.status();
  if (*fan == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nn::init::KaimingNormal: the fan is 0 for a weight of shape ",
        ShapeToString(t.shape()), "; the std would be infinite"));
  }
  const double gain = std::sqrt(2.0 / (1 + a * a));
  const double std_dev = gain / std::sqrt(static_cast<double>(*fan));
  return Normal(t, 0.0, std_dev, gen);
}

}  // namespace tandem::nn::init
