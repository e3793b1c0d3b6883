// Parameter initialisers after torch.nn.init, drawing from an explicit
// tandem::Generator so that the same seed gives PyTorch's initial weights bit
// for bit (docs/pytorch_compat.md).
//
//   tandem::Generator gen(123);
//   TANDEM_ASSIGN_OR_RETURN(tandem::Tensor w, tandem::Tensor::Empty({30, 2}));
//   TANDEM_RETURN_IF_ERROR(tandem::nn::init::KaimingUniform(w, std::sqrt(5.0),
//   gen));
//   // w == torch.nn.init.kaiming_uniform_(torch.empty(30, 2), a=math.sqrt(5))
//   // after torch.manual_seed(123)
//
// Every function fills a CPU tensor of dtype f32 or f64 in place, in element
// order, and is not recorded by autograd (like PyTorch's init under
// no_grad). f32 draws one 32-bit output per element, f64 one 64-bit output,
// as PyTorch does. Other dtypes or devices give InvalidArgument.
// Thread-safety: the tensor and the generator must not be used concurrently.
#ifndef TANDEM_TENSOR_NN_INIT_H_
#define TANDEM_TENSOR_NN_INIT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace tandem::nn::init {

// nn.init.uniform_(t, from, to). The bounds are rounded to the tensor's
// dtype first, as PyTorch does.
absl::Status Uniform(const Tensor& t, double from, double to, Generator& gen);

// nn.init.normal_(t, mean, std): bit for bit PyTorch's values for f32 (as
// on an AVX2 CPU) and f64 (see Generator::Normal).
absl::Status Normal(const Tensor& t, double mean, double std, Generator& gen);

// PyTorch's fan_in: size(1) * (product of dims 2..), e.g. in_features for a
// Linear weight [out, in], in_channels * kh * kw for a Conv2d weight.
// InvalidArgument for fewer than 2 dims.
absl::StatusOr<int64_t> FanIn(const Tensor& weight);

// The bound of kaiming_uniform_(mode='fan_in', nonlinearity='leaky_relu')
// with negative slope `a`, in PyTorch's order of double operations:
//   gain = sqrt(2 / (1 + a^2)); std = gain / sqrt(fan_in); bound = sqrt(3) *
//   std
double KaimingUniformBound(int64_t fan_in, double a);

// nn.init.kaiming_uniform_(t, a=a): Uniform(t, -bound, bound) with
// fan_in = FanIn(t). Linear and Conv2d use a = sqrt(5). A zero fan_in is an
// error (PyTorch warns and does nothing).
absl::Status KaimingUniform(const Tensor& t, double a, Generator& gen);

// PyTorch's fan_out: size(0) * (product of dims 2..), e.g. out_channels *
// kh * kw for a Conv2d weight. InvalidArgument for fewer than 2 dims.
absl::StatusOr<int64_t> FanOut(const Tensor& weight);

enum class FanMode { kFanIn, kFanOut };
// nn.init.kaiming_normal_(t, a=a, mode=..., nonlinearity='leaky_relu'):
// Normal(t, 0, std) with, in PyTorch's order of double operations,
//   gain = sqrt(2 / (1 + a^2)); std = gain / sqrt(fan).
// a = 0 is nonlinearity='relu' too (the same gain, sqrt(2)): torchvision's
// ResNet uses kaiming_normal_(w, mode='fan_out', nonlinearity='relu'). A zero
// fan is an error (PyTorch warns and does nothing).
absl::Status KaimingNormal(const Tensor& t, double a, FanMode mode,
                           Generator& gen);

}  // namespace tandem::nn::init

#endif  // TANDEM_TENSOR_NN_INIT_H_
