#include "train/parallel/sharded/shard_weight_decay.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::train {
namespace {

constexpr char kWeightDecay[] = "weight_decay";

std::string Options(const std::map<std::string, double>& options) {
  std::string out;
  for (const auto& [key, value] : options) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", key, "=", value);
  }
  return out;
}

}  // namespace

absl::Status ApplyParamGroupWeightDecay(
    const optim::Optimizer& groups,
    const std::vector<nn::NamedTensor>& model_params,
    const std::vector<FlatShard>& layout, optim::Optimizer* local) {
  const std::vector<optim::ParamGroupState> states = groups.ExportParamGroups();
  // Every option but weight_decay must agree across groups.
  std::set<double> decays;
  for (size_t g = 0; g < states.size(); ++g) {
    std::map<std::string, double> rest = states[g].options;
    std::map<std::string, double> first = states[0].options;
    rest.erase(kWeightDecay);
    first.erase(kWeightDecay);
    if (rest != first) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sharded optimizer: param group ", g, " has {", Options(rest),
          "} but group 0 has {", Options(first),
          "}; a flat shard holds elements of several groups, so under "
          "zero1, zero2 and fsdp groups may differ only in weight_decay"));
    }
    auto it = states[g].options.find(kWeightDecay);
    if (it != states[g].options.end() && !states[g].params.empty()) {
      decays.insert(it->second);
    }
  }
  if (decays.size() <= 1 || local == nullptr) return absl::OkStatus();

  // Each model parameter's weight decay, by its index.
  std::map<const void*, double> by_tensor;
  for (const optim::ParamGroupState& g : states) {
    const double wd = g.options.at(kWeightDecay);
    for (int64_t k : g.params) {
      by_tensor[groups.params().at(k).impl().get()] = wd;
    }
  }
  std::vector<double> decay(model_params.size(), 0);
  for (size_t j = 0; j < model_params.size(); ++j) {
    auto it = by_tensor.find(model_params[j].tensor.impl().get());
    if (it == by_tensor.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sharded optimizer: parameter \"", model_params[j].name,
          "\" is in no param group; a flat shard steps every parameter's "
          "elements, so give every parameter a group"));
    }
    decay[j] = it->second;
  }
  for (const FlatShard& shard : layout) {
    if (shard.local_index < 0) continue;
    std::vector<optim::WeightDecayRun> runs;
    const int64_t lo = shard.local_begin, hi = shard.local_end;
    auto add = [&runs](int64_t begin, int64_t end, double wd) {
      if (end <= begin) return;
      if (!runs.empty() && runs.back().weight_decay == wd &&
          runs.back().end == begin) {
        runs.back().end = end;
      } else {
        runs.push_back({begin, end, wd});
      }
    };
    int64_t at = 0;  // relative to lo
    for (const FlatParamMember& m : shard.group.members()) {
      const int64_t begin = std::max(m.offset, lo) - lo;
      const int64_t end = std::min(m.offset + m.numel, hi) - lo;
      if (end <= begin) continue;
      add(at, begin, 0.0);  // padding between (none inside a group)
      add(begin, end, decay.at(m.index));
      at = end;
    }
    const int64_t numel = local->params().at(shard.local_index).numel();
    add(at, numel, 0.0);  // FSDP's padding at the end of the last shard
    TANDEM_RETURN_IF_ERROR(local->SetElementWeightDecay(
        static_cast<size_t>(shard.local_index), std::move(runs)));
  }
  return absl::OkStatus();
}

}  // namespace tandem::train
