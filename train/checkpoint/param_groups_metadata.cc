#include "train/checkpoint/param_groups_metadata.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tandem::train::checkpoint {
namespace {

constexpr char kGroupsKey[] = "optimizer.param_groups";

std::string GroupKey(size_t g, const std::string& key) {
  return absl::StrCat(kGroupsKey, ".", g, ".", key);
}

absl::Status Malformed(const std::string& file, const std::string& key,
                       const std::string& value, const char* expected) {
  return absl::InvalidArgumentError(absl::StrCat(
      "checkpoint file ", file, ": metadata entry \"", key, "\" is \"", value,
      "\" but should be ", expected,
      "; the file is damaged: start from a fresh --checkpoint_dir"));
}

}  // namespace

void AddParamGroupsMetadata(const std::vector<optim::ParamGroupState>& groups,
                            Metadata& meta) {
  if (groups.empty()) return;
  meta[kGroupsKey] = absl::StrCat(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    std::string params;
    for (int64_t i : groups[g].params) {
      absl::StrAppend(&params, params.empty() ? "" : ",", i);
    }
    meta[GroupKey(g, "params")] = params;
    for (const auto& [key, value] : groups[g].options) {
      char text[32];
      std::snprintf(text, sizeof(text), "%.17g", value);
      meta[GroupKey(g, key)] = text;
    }
  }
}

absl::StatusOr<std::optional<std::vector<optim::ParamGroupState>>>
ReadParamGroupsMetadata(const Metadata& meta, const std::string& file) {
  auto count_it = meta.find(kGroupsKey);
  if (count_it == meta.end()) return std::nullopt;
  int64_t count = 0;
  if (!absl::SimpleAtoi(count_it->second, &count) || count < 1 ||
      count > 1000000) {
    return Malformed(file, kGroupsKey, count_it->second, "a group count >= 1");
  }
  std::vector<optim::ParamGroupState> groups(static_cast<size_t>(count));
  const std::string prefix = absl::StrCat(kGroupsKey, ".");
  for (const auto& [key, value] : meta) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = key.substr(prefix.size());
    const size_t dot = rest.find('.');
    int64_t g = -1;
    if (dot == std::string::npos ||
        !absl::SimpleAtoi(rest.substr(0, dot), &g) || g < 0 || g >= count) {
      return Malformed(file, key, value,
                       "named optimizer.param_groups.<group>.<key> with a "
                       "group below the count");
    }
    optim::ParamGroupState& group = groups[static_cast<size_t>(g)];
    const std::string name = rest.substr(dot + 1);
    if (name == "params") {
      if (value.empty()) continue;  // an empty group
      for (const absl::string_view piece : absl::StrSplit(value, ',')) {
        int64_t i = -1;
        if (!absl::SimpleAtoi(piece, &i) || i < 0) {
          return Malformed(file, key, value,
                           "a comma-separated list of parameter indices");
        }
        group.params.push_back(i);
      }
      continue;
    }
    double v = 0;
    if (!absl::SimpleAtod(value, &v)) {
      return Malformed(file, key, value, "a number");
    }
    group.options[name] = v;
  }
  return groups;
}

}  // namespace tandem::train::checkpoint
