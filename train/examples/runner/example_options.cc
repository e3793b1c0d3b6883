#include "train/examples/runner/example_options.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::train {
namespace {

// "--epochs" -> "epochs": the rule's words name the bare option.
std::string Bare(const std::string& name) {
  return name.rfind("--", 0) == 0 ? name.substr(2) : name;
}

RankFlag WithRule(ConfigEntry entry, bool ok, std::string expected,
                  OptionScope scope) {
  return RankFlag{.entry = std::move(entry),
                  .ok = ok,
                  .expected = std::move(expected),
                  .agreed = scope == OptionScope::kAgreed};
}

}  // namespace

RankFlag OptionFlag(std::string name, int64_t value,
                    option_rules::IntRange rule, OptionScope scope) {
  RankFlag flag = IntFlag(std::move(name), value, rule.min, rule.max);
  flag.agreed = scope == OptionScope::kAgreed;
  return flag;
}

RankFlag OptionFlag(std::string name, double value,
                    option_rules::RealRange rule, OptionScope scope) {
  const std::string bare = Bare(name);
  std::string expected;
  if (std::isinf(rule.max)) {
    expected = absl::StrCat(bare, rule.min_open ? " > " : " >= ", rule.min,
                            ", finite");
  } else {
    expected = absl::StrCat(rule.min, rule.min_open ? " < " : " <= ", bare,
                            rule.max_open ? " < " : " <= ", rule.max);
  }
  const bool ok = std::isfinite(value) &&
                  (rule.min_open ? value > rule.min : value >= rule.min) &&
                  (rule.max_open ? value < rule.max : value <= rule.max);
  return WithRule(ConfigEntry(std::move(name), value), ok, std::move(expected),
                  scope);
}

RankFlag OptionFlag(std::string name, const std::string& value,
                    const option_rules::OneOfWords& rule, OptionScope scope) {
  bool ok = false;
  for (const std::string& w : rule.words) ok = ok || w == value;
  std::string expected;
  for (size_t i = 0; i < rule.words.size(); ++i) {
    if (i > 0)
      absl::StrAppend(&expected, i + 1 == rule.words.size() ? " or " : ", ");
    absl::StrAppend(&expected, rule.words[i]);
  }
  return WithRule(ConfigEntry(std::move(name), value), ok, std::move(expected),
                  scope);
}

RankFlag OptionFlag(std::string name, bool value, option_rules::AnyValue,
                    OptionScope scope) {
  return WithRule(ConfigEntry(std::move(name), value ? "true" : "false"), true,
                  "", scope);
}

std::optional<DType> AutocastDType(const std::string& amp) {
  if (amp == "bf16") return DType::kBF16;
  if (amp == "f16") return DType::kF16;
  return std::nullopt;
}

}  // namespace tandem::train
