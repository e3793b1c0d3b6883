#include "tensor/nn/layers/sequential.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/trace/trace.h"
#include "tensor/autograd/autograd.h"

namespace tandem::nn {

absl::Status Sequential::Append(std::unique_ptr<Module> module) {
  absl::StatusOr<Module*> added =
      RegisterModule(std::to_string(layers_.size()), std::move(module));
  if (!added.ok()) return added.status();
  layers_.push_back(*added);
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Sequential::Forward(const Tensor& input) {
  Tensor x = input;
  for (size_t i = 0; i < layers_.size(); ++i) {
    // On the timeline: "Linear[0] forward", and the backward of the ops it
    // records as "Linear[0] backward".
    std::optional<trace::Scope> event;
    std::optional<ScopedModuleLabel> label;
    if (trace::Enabled()) {
      label.emplace(
          absl::StrCat(std::string(layers_[i]->type_name()), "[", i, "]"));
      event.emplace(absl::StrCat(std::string(layers_[i]->type_name()), "[", i,
                                 "] forward"),
                    "forward");
    }
    absl::StatusOr<Tensor> y =
        layer_call_ ? layer_call_(static_cast<int64_t>(i), *layers_[i], x)
                    : layers_[i]->Forward(x);
    if (!y.ok()) {
      return absl::Status(y.status().code(),
                          absl::StrCat("Sequential layer ", i, " (",
                                       std::string(layers_[i]->type_name()),
                                       "): ", y.status().message()));
    }
    x = *std::move(y);
  }
  return x;
}

Module* Sequential::at(int64_t i) const {
  const int64_t n = size();
  if (i < 0) i += n;
  if (i < 0 || i >= n) return nullptr;
  return layers_[static_cast<size_t>(i)];
}

void Sequential::ChildReplaced(Module* old_child, Module* replacement) {
  for (Module*& layer : layers_) {
    if (layer == old_child) layer = replacement;
  }
}

}  // namespace tandem::nn
