// tandem::nn::ResNet — torchvision 0.14's ResNet-18/34/50
// (torchvision.models.resnet18(num_classes=N) etc.), built as torchvision
// builds it:
//   - the same module tree, so the same state-dict names and shapes
//     ("conv1.weight", "bn1.running_mean", "layer1.0.conv1.weight",
//     "layer2.0.downsample.0.weight", "fc.bias", ...) and the same
//     parameter count (11,689,512 for resnet18 with 1000 classes);
//   - the same initial weights, drawn from `gen` in torchvision's order:
//     every Conv2d (bias=False) and the Linear draw PyTorch's default
//     kaiming-uniform at construction, in construction order (a stage's
//     downsample convolution before its first block's), then every Conv2d
//     is redrawn with kaiming_normal_(mode='fan_out', nonlinearity='relu')
//     and every BatchNorm2d set to weight 1, bias 0, walking the modules in
//     registration order. So Resnet18(10, gen) after Generator gen(seed)
//     equals torchvision.models.resnet18(num_classes=10) after
//     torch.manual_seed(seed), bit for bit (docs/models.md says how this was
//     checked).
//
//   tandem::Generator gen(0);
//   TANDEM_ASSIGN_OR_RETURN(auto model, tandem::nn::Resnet18(10, gen));
//   TANDEM_ASSIGN_OR_RETURN(tandem::Tensor logits, model->Forward(images));
//   // images [N, 3, H, W] (H, W >= 32 or so) -> logits [N, 10]
//
// Forward is torchvision's: conv1 -> bn1 -> relu -> maxpool -> layer1..4 ->
// avgpool (adaptive, 1x1) -> flatten -> fc; each block adds its shortcut
// (identity or downsample) before the last ReLU. BatchNorm follows the
// module's mode (Train()/Eval()). Not built: zero_init_residual, groups,
// width_per_group, dilation (torchvision's defaults are what is built).
//
// Thread-safety: like every Module, used by one thread at a time.
#ifndef TANDEM_TENSOR_NN_MODELS_RESNET_H_
#define TANDEM_TENSOR_NN_MODELS_RESNET_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "tensor/generator.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::nn {

class Conv2d;
class BatchNorm2d;
class ReLU;
class MaxPool2d;
class AdaptiveAvgPool2d;
class Linear;
class Sequential;

struct ResNetOptions {
  DType dtype = DType::kF32;  // of every parameter and buffer: f32 or f64
};

// torchvision's BasicBlock (expansion 1): conv1 (3x3, stride), bn1, relu,
// conv2 (3x3), bn2, and "downsample" when given. Children in that order.
class BasicBlock : public Module {
 public:
  static constexpr int64_t kExpansion = 1;
  // `downsample` may be null (identity shortcut); build it before calling
  // (torchvision constructs it first, which decides the generator order).
  static absl::StatusOr<std::unique_ptr<BasicBlock>> Create(
      int64_t inplanes, int64_t planes, int64_t stride,
      std::unique_ptr<Module> downsample, Generator& gen,
      const ResNetOptions& options);
  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "BasicBlock"; }

  // ReplaceChild works for the norms ("bn1", "bn2"), e.g.
  // train::ConvertSyncBatchNorm.
  bool CanReplaceChild(const std::string& name) const override;

 protected:
  void ChildReplaced(Module* old_child, Module* replacement) override;

 private:
  BasicBlock() = default;
  // Owned by the Module base.
  Conv2d* conv1_ = nullptr;
  Module* bn1_ = nullptr;  // a BatchNorm2d, or what replaced it
  ReLU* relu_ = nullptr;
  Conv2d* conv2_ = nullptr;
  Module* bn2_ = nullptr;
  Module* downsample_ = nullptr;  // may be null
};

// torchvision's Bottleneck (expansion 4, ResNet v1.5: the stride on the
// 3x3): conv1 (1x1), bn1, conv2 (3x3, stride), bn2, conv3 (1x1, 4x planes),
// bn3, relu, and "downsample" when given. Children in that order.
class Bottleneck : public Module {
 public:
  static constexpr int64_t kExpansion = 4;
  static absl::StatusOr<std::unique_ptr<Bottleneck>> Create(
      int64_t inplanes, int64_t planes, int64_t stride,
      std::unique_ptr<Module> downsample, Generator& gen,
      const ResNetOptions& options);
  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "Bottleneck"; }

  // ReplaceChild works for the norms ("bn1", "bn2", "bn3"), e.g.
  // train::ConvertSyncBatchNorm.
  bool CanReplaceChild(const std::string& name) const override;

 protected:
  void ChildReplaced(Module* old_child, Module* replacement) override;

 private:
  Bottleneck() = default;
  Conv2d* conv1_ = nullptr;
  Module* bn1_ = nullptr;  // a BatchNorm2d, or what replaced it
  Conv2d* conv2_ = nullptr;
  Module* bn2_ = nullptr;
  Conv2d* conv3_ = nullptr;
  Module* bn3_ = nullptr;
  ReLU* relu_ = nullptr;
  Module* downsample_ = nullptr;  // may be null
};

class ResNet : public Module {
 public:
  enum class BlockKind { kBasic, kBottleneck };
  // torchvision's ResNet(block, layers, num_classes). Errors: num_classes
  // < 1, a stage with < 1 block, a dtype other than f32/f64.
  static absl::StatusOr<std::unique_ptr<ResNet>> Create(
      BlockKind block, std::array<int64_t, 4> layers, int64_t num_classes,
      Generator& gen, const ResNetOptions& options = {});
  // The parameters Create builds for these arguments, from the sizes alone
  // (no tensor is allocated), so that a world of models too large for the
  // machine is refused before any is built.
  static int64_t NumParametersOf(BlockKind block, std::array<int64_t, 4> layers,
                                 int64_t num_classes);
  // images [N, 3, H, W] -> logits [N, num_classes].
  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "ResNet"; }
  int64_t num_classes() const { return num_classes_; }

  // ReplaceChild works for the norm "bn1" (the blocks' norms are their
  // own children), e.g. train::ConvertSyncBatchNorm.
  bool CanReplaceChild(const std::string& name) const override;

 protected:
  void ChildReplaced(Module* old_child, Module* replacement) override;

 private:
  ResNet() = default;
  int64_t num_classes_ = 0;
  Conv2d* conv1_ = nullptr;
  Module* bn1_ = nullptr;  // a BatchNorm2d, or what replaced it
  ReLU* relu_ = nullptr;
  MaxPool2d* maxpool_ = nullptr;
  std::array<Sequential*, 4> layers_{};
  AdaptiveAvgPool2d* avgpool_ = nullptr;
  Linear* fc_ = nullptr;
};

// torchvision's named architectures: the block and each stage's blocks.
struct ResNetArch {
  ResNet::BlockKind block = ResNet::BlockKind::kBasic;
  std::array<int64_t, 4> layers{};
};
// "resnet18" (BasicBlock, [2, 2, 2, 2]), "resnet34" (BasicBlock, [3, 4, 6,
// 3]), "resnet50" (Bottleneck, [3, 4, 6, 3]): torchvision.models' names, as
// the reference training script's --arch takes them. InvalidArgument
// naming the three otherwise.
absl::StatusOr<ResNetArch> ResNetArchOf(std::string_view name);

// torchvision.models.resnet18/34/50(num_classes=...), weights=None.
absl::StatusOr<std::unique_ptr<ResNet>> Resnet18(
    int64_t num_classes, Generator& gen, const ResNetOptions& options = {});
absl::StatusOr<std::unique_ptr<ResNet>> Resnet34(
    int64_t num_classes, Generator& gen, const ResNetOptions& options = {});
absl::StatusOr<std::unique_ptr<ResNet>> Resnet50(
    int64_t num_classes, Generator& gen, const ResNetOptions& options = {});

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_MODELS_RESNET_H_
