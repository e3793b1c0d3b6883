#include "tensor/nn/models/resnet.h"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/nn/init.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/batch_norm.h"
#include "tensor/nn/layers/conv2d.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/pooling.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"

namespace tandem::nn {
namespace {

// torchvision's conv3x3 and conv1x1: no bias; the weight draws PyTorch's
// default kaiming-uniform from `gen` now (it is redrawn later).
absl::StatusOr<std::unique_ptr<Conv2d>> Conv(int64_t in, int64_t out,
                                             int64_t kernel, int64_t stride,
                                             Generator& gen,
                                             const ResNetOptions& options) {
  const int64_t padding = kernel / 2;  // 3x3: 1, 1x1: 0, 7x7: 3
  return Conv2d::Create(in, out, {kernel, kernel}, {stride, stride},
                        {padding, padding}, gen,
                        {.bias = false, .dtype = options.dtype});
}

absl::StatusOr<std::unique_ptr<BatchNorm2d>> Norm(
    int64_t features, const ResNetOptions& options) {
  BatchNorm2d::Options o;
  o.dtype = options.dtype;
  return BatchNorm2d::Create(features, o);
}

// torchvision's last loop of ResNet.__init__, over self.modules() (this
// module, then its children depth first, in registration order).
absl::Status Reinitialise(Module& m, Generator& gen) {
  if (auto* conv = dynamic_cast<Conv2d*>(&m)) {
    TANDEM_RETURN_IF_ERROR(
        init::KaimingNormal(conv->weight(), 0.0, init::FanMode::kFanOut, gen));
  } else if (dynamic_cast<BatchNorm2d*>(&m) != nullptr) {
    for (const NamedTensor& p : m.NamedParameters()) {
      if (p.name == "weight") TANDEM_RETURN_IF_ERROR(FillInPlace(p.tensor, 1));
      if (p.name == "bias") TANDEM_RETURN_IF_ERROR(FillInPlace(p.tensor, 0));
    }
  }
  for (const auto& [name, child] : m.NamedChildren()) {
    TANDEM_RETURN_IF_ERROR(Reinitialise(*child, gen));
  }
  return absl::OkStatus();
}

// A block's tail: out + shortcut(x), then ReLU.
absl::StatusOr<Tensor> Join(const Tensor& out, const Tensor& x,
                            Module* downsample, ReLU& relu,
                            std::string_view block) {
  Tensor identity = x;
  if (downsample != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(identity, downsample->Forward(x));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor sum, AddResidual(out, identity, block));
  return relu.Forward(sum);
}

}  // namespace

absl::StatusOr<std::unique_ptr<BasicBlock>> BasicBlock::Create(
    int64_t inplanes, int64_t planes, int64_t stride,
    std::unique_ptr<Module> downsample, Generator& gen,
    const ResNetOptions& options) {
  auto b = std::unique_ptr<BasicBlock>(new BasicBlock());
  TANDEM_ASSIGN_OR_RETURN(
      b->conv1_, b->RegisterModule(
                     "conv1", Conv(inplanes, planes, 3, stride, gen, options)));
  TANDEM_ASSIGN_OR_RETURN(b->bn1_,
                          b->RegisterModule("bn1", Norm(planes, options)));
  TANDEM_ASSIGN_OR_RETURN(b->relu_,
                          b->RegisterModule("relu", std::make_unique<ReLU>()));
  TANDEM_ASSIGN_OR_RETURN(
      b->conv2_,
      b->RegisterModule("conv2", Conv(planes, planes, 3, 1, gen, options)));
  TANDEM_ASSIGN_OR_RETURN(b->bn2_,
                          b->RegisterModule("bn2", Norm(planes, options)));
  if (downsample != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(
        b->downsample_, b->RegisterModule("downsample", std::move(downsample)));
  }
  return b;
}

absl::StatusOr<Tensor> BasicBlock::Forward(const Tensor& input) {
  TANDEM_ASSIGN_OR_RETURN(Tensor out, conv1_->Forward(input));
  TANDEM_ASSIGN_OR_RETURN(out, bn1_->Forward(out));
  TANDEM_ASSIGN_OR_RETURN(out, relu_->Forward(out));
  TANDEM_ASSIGN_OR_RETURN(out, conv2_->Forward(out));
  TANDEM_ASSIGN_OR_RETURN(out, bn2_->Forward(out));
  return Join(out, input, downsample_, *relu_, "BasicBlock");
}

absl::StatusOr<std::unique_ptr<Bottleneck>> Bottleneck::Create(
    int64_t inplanes, int64_t planes, int64_t stride,
    std::unique_ptr<Module> downsample, Generator& gen,
    const ResNetOptions& options) {
  const int64_t width = planes;  // groups 1, base_width 64
  auto b = std::unique_ptr<Bottleneck>(new Bottleneck());
  TANDEM_ASSIGN_OR_RETURN(
      b->conv1_,
      b->RegisterModule("conv1", Conv(inplanes, width, 1, 1, gen, options)));
  TANDEM_ASSIGN_OR_RETURN(b->bn1_,
                          b->RegisterModule("bn1", Norm(width, options)));
  TANDEM_ASSIGN_OR_RETURN(
      b->conv2_,
      b->RegisterModule("conv2", Conv(width, width, 3, stride, gen, options)));
  TANDEM_ASSIGN_OR_RETURN(b->bn2_,
                          b->RegisterModule("bn2", Norm(width, options)));
  TANDEM_ASSIGN_OR_RETURN(
      b->conv3_, b->RegisterModule("conv3", Conv(width, planes * kExpansion, 1,
                                                 1, gen, options)));
  TANDEM_ASSIGN_OR_RETURN(
      b->bn3_, b->RegisterModule("bn3", Norm(planes * kExpansion, options)));
  TANDEM_ASSIGN_OR_RETURN(b->relu_,
                          b->RegisterModule("relu", std::make_unique<ReLU>()));
  if (downsample != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(
        b->downsample_, b->RegisterModule("downsample", std::move(downsample)));
  }
  return b;
}

absl::StatusOr<Tensor> Bottleneck::Forward(const Tensor& input) {
  TANDEM_ASSIGN_OR_RETURN(Tensor out, conv1_->Forward(input));
  TANDEM_ASSIGN_OR_RETURN(out, bn1_->Forward(out));
  TANDEM_ASSIGN_OR_RETURN(out, relu_->Forward(out));
  TANDEM_ASSIGN_OR_RETURN(out, conv2_->Forward(out));
  TANDEM_ASSIGN_OR_RETURN(out, bn2_->Forward(out));
  TANDEM_ASSIGN_OR_RETURN(out, relu_->Forward(out));
  TANDEM_ASSIGN_OR_RETURN(out, conv3_->Forward(out));
  TANDEM_ASSIGN_OR_RETURN(out, bn3_->Forward(out));
  return Join(out, input, downsample_, *relu_, "Bottleneck");
}

namespace {

// torchvision's ResNet._make_layer: the downsample (built first) when the
// stride or the width changes, then `blocks` blocks. `inplanes` is updated.
template <typename Block>
absl::StatusOr<std::unique_ptr<Sequential>> MakeLayer(
    int64_t& inplanes, int64_t planes, int64_t blocks, int64_t stride,
    Generator& gen, const ResNetOptions& options) {
  const int64_t out = planes * Block::kExpansion;
  std::unique_ptr<Module> downsample;
  if (stride != 1 || inplanes != out) {
    auto seq = std::make_unique<Sequential>();
    TANDEM_RETURN_IF_ERROR(
        seq->Append(Conv(inplanes, out, 1, stride, gen, options)));
    TANDEM_RETURN_IF_ERROR(seq->Append(Norm(out, options)));
    downsample = std::move(seq);
  }
  auto layer = std::make_unique<Sequential>();
  TANDEM_RETURN_IF_ERROR(layer->Append(Block::Create(
      inplanes, planes, stride, std::move(downsample), gen, options)));
  inplanes = out;
  for (int64_t i = 1; i < blocks; ++i) {
    TANDEM_RETURN_IF_ERROR(layer->Append(
        Block::Create(inplanes, planes, 1, nullptr, gen, options)));
  }
  return layer;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ResNet>> ResNet::Create(
    BlockKind block, std::array<int64_t, 4> layers, int64_t num_classes,
    Generator& gen, const ResNetOptions& options) {
  if (num_classes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ResNet::Create: num_classes must be >= 1, got ", num_classes));
  }
  for (int i = 0; i < 4; ++i) {
    if (layers[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("ResNet::Create: layer", i + 1,
                       " must have >= 1 block, got ", layers[i]));
    }
  }
  if (options.dtype != DType::kF32 && options.dtype != DType::kF64) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResNet::Create: dtype must be f32 or f64, got ",
                     DTypeName(options.dtype)));
  }
  auto m = std::unique_ptr<ResNet>(new ResNet());
  m->num_classes_ = num_classes;
  int64_t inplanes = 64;
  TANDEM_ASSIGN_OR_RETURN(
      m->conv1_,
      m->RegisterModule("conv1", Conv(3, inplanes, 7, 2, gen, options)));
  TANDEM_ASSIGN_OR_RETURN(m->bn1_,
                          m->RegisterModule("bn1", Norm(inplanes, options)));
  TANDEM_ASSIGN_OR_RETURN(m->relu_,
                          m->RegisterModule("relu", std::make_unique<ReLU>()));
  TANDEM_ASSIGN_OR_RETURN(
      m->maxpool_,
      m->RegisterModule("maxpool", std::make_unique<MaxPool2d>(3, 2, 1)));
  const int64_t planes[4] = {64, 128, 256, 512};
  for (int i = 0; i < 4; ++i) {
    const int64_t stride = i == 0 ? 1 : 2;
    absl::StatusOr<std::unique_ptr<Sequential>> layer =
        block == BlockKind::kBasic
            ? MakeLayer<BasicBlock>(inplanes, planes[i], layers[i], stride, gen,
                                    options)
            : MakeLayer<Bottleneck>(inplanes, planes[i], layers[i], stride, gen,
                                    options);
    TANDEM_ASSIGN_OR_RETURN(
        m->layers_[i],
        m->RegisterModule(absl::StrCat("layer", i + 1), std::move(layer)));
  }
  TANDEM_ASSIGN_OR_RETURN(
      m->avgpool_,
      m->RegisterModule("avgpool", std::make_unique<AdaptiveAvgPool2d>(
                                       std::array<int64_t, 2>{1, 1})));
  TANDEM_ASSIGN_OR_RETURN(
      m->fc_,
      m->RegisterModule("fc", Linear::Create(inplanes, num_classes, gen,
                                             {.dtype = options.dtype})));
  TANDEM_RETURN_IF_ERROR(Reinitialise(*m, gen));
  return m;
}

absl::StatusOr<Tensor> ResNet::Forward(const Tensor& input) {
  TANDEM_ASSIGN_OR_RETURN(Tensor x, conv1_->Forward(input));
  TANDEM_ASSIGN_OR_RETURN(x, bn1_->Forward(x));
  TANDEM_ASSIGN_OR_RETURN(x, relu_->Forward(x));
  TANDEM_ASSIGN_OR_RETURN(x, maxpool_->Forward(x));
  for (Sequential* layer : layers_) {
    TANDEM_ASSIGN_OR_RETURN(x, layer->Forward(x));
  }
  TANDEM_ASSIGN_OR_RETURN(x, avgpool_->Forward(x));
  TANDEM_ASSIGN_OR_RETURN(x, Flatten(x, 1));
  return fc_->Forward(x);
}

int64_t ResNet::NumParametersOf(BlockKind block, std::array<int64_t, 4> layers,
                                int64_t num_classes) {
  // torchvision's layout: conv1 7x7 and bn1 (a weight and a bias per
  // channel), four stages of blocks, each stage's first block with a 1x1
  // downsample (and its norm) where the stride or the width changes, fc.
  const bool basic = block == BlockKind::kBasic;
  const int64_t expansion =
      basic ? BasicBlock::kExpansion : Bottleneck::kExpansion;
  auto bn = [](int64_t c) { return 2 * c; };
  int64_t total = 3 * 64 * 7 * 7 + bn(64);
  int64_t inplanes = 64;
  const std::array<int64_t, 4> planes = {64, 128, 256, 512};
  for (int s = 0; s < 4; ++s) {
    const int64_t p = planes[s];
    const int64_t out = p * expansion;
    for (int64_t b = 0; b < layers[s]; ++b) {
      const int64_t in = b == 0 ? inplanes : out;
      if (basic) {
        total += in * p * 9 + bn(p) + p * p * 9 + bn(p);
      } else {
        total += in * p + bn(p) + p * p * 9 + bn(p) + p * out + bn(out);
      }
      const bool downsample = b == 0 && (s > 0 || in != out);
      if (downsample) total += in * out + bn(out);
    }
    inplanes = out;
  }
  return total + 512 * expansion * num_classes + num_classes;
}

absl::StatusOr<ResNetArch> ResNetArchOf(std::string_view name) {
  using Kind = ResNet::BlockKind;
  if (name == "resnet18") return ResNetArch{Kind::kBasic, {2, 2, 2, 2}};
  if (name == "resnet34") return ResNetArch{Kind::kBasic, {3, 4, 6, 3}};
  if (name == "resnet50") return ResNetArch{Kind::kBottleneck, {3, 4, 6, 3}};
  return absl::InvalidArgumentError(
      absl::StrCat("no ResNet architecture named \"", std::string(name),
                   "\"; expected resnet18, resnet34 or resnet50"));
}

namespace {
absl::StatusOr<std::unique_ptr<ResNet>> Named(std::string_view name,
                                              int64_t num_classes,
                                              Generator& gen,
                                              const ResNetOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(const ResNetArch arch, ResNetArchOf(name));
  return ResNet::Create(arch.block, arch.layers, num_classes, gen, options);
}
}  // namespace

absl::StatusOr<std::unique_ptr<ResNet>> Resnet18(int64_t num_classes,
                                                 Generator& gen,
                                                 const ResNetOptions& options) {
  return Named("resnet18", num_classes, gen, options);
}

absl::StatusOr<std::unique_ptr<ResNet>> Resnet34(int64_t num_classes,
                                                 Generator& gen,
                                                 const ResNetOptions& options) {
  return Named("resnet34", num_classes, gen, options);
}

absl::StatusOr<std::unique_ptr<ResNet>> Resnet50(int64_t num_classes,
                                                 Generator& gen,
                                                 const ResNetOptions& options) {
  return Named("resnet50", num_classes, gen, options);
}

namespace {
// Points whichever of `slots` held `old_child` at `replacement`.
void Repoint(std::initializer_list<Module**> slots, Module* old_child,
             Module* replacement) {
  for (Module** slot : slots) {
    if (*slot == old_child) *slot = replacement;
  }
}
}  // namespace

bool BasicBlock::CanReplaceChild(const std::string& name) const {
  return name == "bn1" || name == "bn2";
}
void BasicBlock::ChildReplaced(Module* old_child, Module* replacement) {
  Repoint({&bn1_, &bn2_}, old_child, replacement);
}

bool Bottleneck::CanReplaceChild(const std::string& name) const {
  return name == "bn1" || name == "bn2" || name == "bn3";
}
void Bottleneck::ChildReplaced(Module* old_child, Module* replacement) {
  Repoint({&bn1_, &bn2_, &bn3_}, old_child, replacement);
}

bool ResNet::CanReplaceChild(const std::string& name) const {
  return name == "bn1";
}
void ResNet::ChildReplaced(Module* old_child, Module* replacement) {
  Repoint({&bn1_}, old_child, replacement);
}

}  // namespace tandem::nn
