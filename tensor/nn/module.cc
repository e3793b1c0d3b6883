#include "tensor/nn/module.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/dtype.h"
#include "tensor/allocator.h"
#include "tensor/device.h"
#include "tensor/tensor.h"
#include "tensor/tensor_impl.h"

namespace tandem::nn {
namespace {

std::string Describe(const Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return absl::StrCat(ShapeToString(t.shape()), " ",
                      std::string(DTypeName(t.dtype())));
}

std::string Quoted(const std::vector<std::string>& names) {
  return absl::StrJoin(names, ", ", [](std::string* out, const std::string& n) {
    absl::StrAppend(out, "\"", n, "\"");
  });
}

// A copy of `from`'s bytes in a new allocation on `to`. Blocks until the
// copy is complete. The non-CPU side's allocator moves the bytes, as in
// Tensor::To(Device).
absl::StatusOr<std::shared_ptr<Storage>> CopyStorage(const Storage& from,
                                                     Device to) {
  absl::StatusOr<std::shared_ptr<Storage>> moved =
      Storage::Allocate(to, from.nbytes());
  if (!moved.ok() || from.nbytes() == 0) return moved;
  const Device owner = to.is_cpu() ? from.device() : to;
  absl::StatusOr<std::shared_ptr<Allocator>> allocator = GetAllocator(owner);
  if (!allocator.ok()) return allocator.status();
  absl::Status s = (*allocator)
                       ->CopyBytes((*moved)->data(), to, from.data(),
                                   from.device(), from.nbytes());
  if (!s.ok()) return s;
  return moved;
}

}  // namespace

absl::StatusOr<StateDict> CloneStateDict(const StateDict& state) {
  StateDict copy;
  copy.reserve(state.size());
  for (const NamedTensor& entry : state) {
    if (!entry.tensor.defined()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CloneStateDict: entry \"", entry.name,
          "\" holds an undefined tensor; every entry needs a tensor"));
    }
    absl::StatusOr<Tensor> clone = entry.tensor.Detach().Clone();
    if (!clone.ok()) return clone.status();
    copy.push_back({entry.name, *std::move(clone)});
  }
  return copy;
}

absl::Status Module::CheckNewName(const char* kind,
                                  const std::string& name) const {
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(type_name()), ": a ", kind, " name must not be empty"));
  }
  if (name.find('.') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(type_name()), ": ", kind, " name \"", name,
        "\" contains '.', which separates nested names; pick another name"));
  }
  auto clash = [&](const char* what) {
    return absl::AlreadyExistsError(absl::StrCat(
        std::string(type_name()), ": cannot register ", kind, " \"", name,
        "\": a ", what, " with that name is already registered"));
  };
  for (const NamedTensor& p : parameters_) {
    if (p.name == name) return clash("parameter");
  }
  for (const NamedTensor& b : buffers_) {
    if (b.name == name) return clash("buffer");
  }
  for (const auto& [child_name, child] : children_) {
    if (child_name == name) return clash("submodule");
  }
  return absl::OkStatus();
}

absl::Status Module::RegisterParameter(std::string name, const Tensor& param) {
  absl::Status s = CheckNewName("parameter", name);
  if (!s.ok()) return s;
  if (!param.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(type_name()), ": parameter \"", name,
                     "\" is an undefined tensor"));
  }
  if (!IsFloatingPoint(param.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(type_name()), ": parameter \"", name, "\" has dtype ",
        std::string(DTypeName(param.dtype())),
        "; parameters must be floating point (f32, f64, f16, bf16). Register "
        "integer state with RegisterBuffer"));
  }
  if (!param.is_leaf()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(type_name()), ": parameter \"", name, "\" was produced by ",
        param.grad_fn_name(),
        " and is not a leaf; register a leaf (e.g. the result of Detach())"));
  }
  s = param.set_requires_grad(true);
  if (!s.ok()) return s;
  parameters_.push_back({std::move(name), param});
  return absl::OkStatus();
}

absl::Status Module::RegisterBuffer(std::string name, const Tensor& buffer) {
  absl::Status s = CheckNewName("buffer", name);
  if (!s.ok()) return s;
  if (!buffer.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(type_name()), ": buffer \"", name,
                     "\" is an undefined tensor"));
  }
  buffers_.push_back({std::move(name), buffer});
  return absl::OkStatus();
}

absl::StatusOr<Module*> Module::RegisterModule(std::string name,
                                               std::unique_ptr<Module> module) {
  absl::Status s = CheckNewName("submodule", name);
  if (!s.ok()) return s;
  if (module == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(type_name()), ": submodule \"", name, "\" is null"));
  }
  module->Train(training_);
  Module* raw = module.get();
  children_.emplace_back(std::move(name), std::move(module));
  return raw;
}

absl::StatusOr<std::unique_ptr<Module>> Module::ReplaceChild(
    const std::string& name, std::unique_ptr<Module> replacement) {
  if (!CanReplaceChild(name)) {
    return absl::FailedPreconditionError(absl::StrCat(
        std::string(type_name()), ": cannot replace child \"", name,
        "\" (this module type does not support ReplaceChild for it; it may "
        "keep its own pointer to that child)"));
  }
  if (replacement == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(type_name()), ": replacement for \"", name, "\" is null"));
  }
  for (auto& [child_name, child] : children_) {
    if (child_name != name) continue;
    replacement->Train(training_);
    std::unique_ptr<Module> old = std::move(child);
    child = std::move(replacement);
    ChildReplaced(old.get(), child.get());
    return old;
  }
  return absl::NotFoundError(absl::StrCat(
      std::string(type_name()), ": no child named \"", name, "\" to replace"));
}

void Module::CollectParameters(const std::string& prefix,
                               std::vector<NamedTensor>& out) const {
  for (const NamedTensor& p : parameters_) {
    out.push_back({prefix + p.name, p.tensor});
  }
  for (const auto& [name, child] : children_) {
    child->CollectParameters(absl::StrCat(prefix, name, "."), out);
  }
}

void Module::CollectBuffers(const std::string& prefix,
                            std::vector<NamedTensor>& out) const {
  for (const NamedTensor& b : buffers_) {
    out.push_back({prefix + b.name, b.tensor});
  }
  for (const auto& [name, child] : children_) {
    child->CollectBuffers(absl::StrCat(prefix, name, "."), out);
  }
}

void Module::CollectState(const std::string& prefix, nn::StateDict& out) const {
  for (const NamedTensor& p : parameters_) {
    out.push_back({prefix + p.name, p.tensor.Detach()});
  }
  for (const NamedTensor& b : buffers_) {
    out.push_back({prefix + b.name, b.tensor.Detach()});
  }
  for (const auto& [name, child] : children_) {
    child->CollectState(absl::StrCat(prefix, name, "."), out);
  }
}

std::vector<NamedTensor> Module::NamedParameters() const {
  std::vector<NamedTensor> out;
  CollectParameters("", out);
  return out;
}

std::vector<Tensor> Module::Parameters() const {
  std::vector<Tensor> out;
  for (NamedTensor& p : NamedParameters()) out.push_back(std::move(p.tensor));
  return out;
}

std::vector<NamedTensor> Module::NamedBuffers() const {
  std::vector<NamedTensor> out;
  CollectBuffers("", out);
  return out;
}

std::vector<Tensor> Module::Buffers() const {
  std::vector<Tensor> out;
  for (NamedTensor& b : NamedBuffers()) out.push_back(std::move(b.tensor));
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::NamedChildren() const {
  std::vector<std::pair<std::string, Module*>> out;
  for (const auto& [name, child] : children_) {
    out.emplace_back(name, child.get());
  }
  return out;
}

int64_t Module::NumParameters() const {
  int64_t total = 0;
  for (const Tensor& p : Parameters()) total += p.numel();
  return total;
}

void Module::Train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->Train(on);
}

nn::StateDict Module::StateDict() const {
  nn::StateDict out;
  CollectState("", out);
  return out;
}

absl::Status Module::LoadStateDict(const nn::StateDict& state, bool strict) {
  absl::flat_hash_map<std::string, const Tensor*> given;
  std::vector<std::string> duplicated;
  for (const NamedTensor& entry : state) {
    if (!given.emplace(entry.name, &entry.tensor).second) {
      duplicated.push_back(entry.name);
    }
  }
  const nn::StateDict own = StateDict();
  std::vector<std::string> missing;
  std::vector<std::string> mismatched;
  absl::flat_hash_map<std::string, bool> known;
  for (const NamedTensor& entry : own) {
    known[entry.name] = true;
    auto it = given.find(entry.name);
    if (it == given.end()) {
      missing.push_back(entry.name);
      continue;
    }
    const Tensor& src = *it->second;
    if (!src.defined() || src.dtype() != entry.tensor.dtype() ||
        src.shape() != entry.tensor.shape()) {
      mismatched.push_back(absl::StrCat(
          "\"", entry.name, "\": the state dict has ", Describe(src),
          ", the module has ", Describe(entry.tensor)));
    }
  }
  std::vector<std::string> unexpected;
  if (strict) {
    for (const NamedTensor& entry : state) {
      if (!known.contains(entry.name)) unexpected.push_back(entry.name);
    }
  }
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty() ||
      !duplicated.empty()) {
    std::vector<std::string> problems;
    if (!missing.empty()) {
      problems.push_back(absl::StrCat("missing key(s): ", Quoted(missing)));
    }
    if (!unexpected.empty()) {
      problems.push_back(
          absl::StrCat("unexpected key(s): ", Quoted(unexpected)));
    }
    if (!duplicated.empty()) {
      problems.push_back(
          absl::StrCat("key(s) given more than once: ", Quoted(duplicated)));
    }
    for (const std::string& m : mismatched) {
      problems.push_back(absl::StrCat("shape/dtype mismatch for ", m));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "LoadStateDict: error(s) loading a state dict into ",
        std::string(type_name()), ": ", absl::StrJoin(problems, "; "),
        ". Nothing was loaded. The state dict must come from a module built "
        "with the same architecture and constructor arguments",
        strict ? " (strict = false ignores unexpected keys only)" : ""));
  }
  for (const NamedTensor& entry : own) {
    absl::Status s = entry.tensor.CopyFrom(*given.at(entry.name));
    if (!s.ok()) {
      return absl::Status(
          s.code(),
          absl::StrCat("LoadStateDict: copying \"", entry.name, "\" into ",
                       std::string(type_name()), ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

void Module::ZeroGrad(bool set_to_none) {
  for (const Tensor& p : Parameters()) {
    if (set_to_none) {
      p.ClearGrad();
    } else {
      p.ZeroGrad();
    }
  }
}

void Module::MarkGradsZero() {
  for (const Tensor& p : Parameters()) p.MarkGradZero();
}

absl::Status Module::To(Device device) {
  // Every tensor that moves: parameters, their gradients, buffers.
  struct Entry {
    std::string what;  // for errors: parameter "fc.weight", ...
    std::shared_ptr<TensorImpl> impl;
  };
  std::vector<Entry> entries;
  for (const NamedTensor& p : NamedParameters()) {
    entries.push_back(
        {absl::StrCat("parameter \"", p.name, "\""), p.tensor.impl()});
    // grad() is a handle on the stored gradient's own TensorImpl.
    const Tensor grad = p.tensor.grad();
    if (grad.defined()) {
      entries.push_back(
          {absl::StrCat("the gradient of \"", p.name, "\""), grad.impl()});
    }
  }
  for (const NamedTensor& b : NamedBuffers()) {
    entries.push_back(
        {absl::StrCat("buffer \"", b.name, "\""), b.tensor.impl()});
  }

  // 1. Copy each distinct allocation once (shared ones stay shared), before
  // touching any tensor: an error leaves the module as it was.
  // Keyed by the old allocation, which the map also keeps alive until every
  // tensor has been re-pointed (so no key can be freed and reused).
  absl::flat_hash_map<const Storage*, std::pair<std::shared_ptr<Storage>,
                                                std::shared_ptr<Storage>>>
      moved;
  for (const Entry& e : entries) {
    const Storage& from = *e.impl->storage;
    if (from.device() == device || moved.contains(&from)) continue;
    absl::StatusOr<std::shared_ptr<Storage>> copy = CopyStorage(from, device);
    if (!copy.ok()) {
      return absl::Status(
          copy.status().code(),
          absl::StrCat(std::string(type_name()), ".To(", device.ToString(),
                       "): moving ", e.what, " (", Describe(Tensor(e.impl)),
                       " on ", from.device().ToString(),
                       "): ", copy.status().message(), ". Nothing was moved"));
    }
    moved.emplace(&from, std::make_pair(e.impl->storage, *std::move(copy)));
  }
  // 2. Point every tensor at its new allocation (same offset, shape, dtype).
  for (const Entry& e : entries) {
    auto it = moved.find(e.impl->storage.get());
    if (it != moved.end()) e.impl->storage = it->second.second;
  }
  return absl::OkStatus();
}

void Module::AppendRepr(std::string& out) const {
  std::vector<std::string> extra_lines;
  const std::string extra = ExtraRepr();
  if (!extra.empty()) extra_lines = absl::StrSplit(extra, '\n');
  std::vector<std::string> child_lines;
  for (const auto& [name, child] : children_) {
    std::string child_repr;
    child->AppendRepr(child_repr);
    // PyTorch's _addindent: every line after the first moves right by 2.
    child_repr = absl::StrReplaceAll(child_repr, {{"\n", "\n  "}});
    child_lines.push_back(absl::StrCat("(", name, "): ", child_repr));
  }
  absl::StrAppend(&out, std::string(type_name()), "(");
  if (!extra_lines.empty() || !child_lines.empty()) {
    if (extra_lines.size() == 1 && child_lines.empty()) {
      absl::StrAppend(&out, extra_lines[0]);
    } else {
      std::vector<std::string> lines = extra_lines;
      lines.insert(lines.end(), child_lines.begin(), child_lines.end());
      absl::StrAppend(&out, "\n  ", absl::StrJoin(lines, "\n  "), "\n");
    }
  }
  absl::StrAppend(&out, ")");
}

std::string Module::ToString() const {
  std::string out;
  AppendRepr(out);
  return out;
}

}  // namespace tandem::nn
