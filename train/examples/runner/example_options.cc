#include "train/examples/runner/example_options.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::train {
namespace {

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
  RankFlag flag = RealFlag(std::move(name), value, rule.min, rule.max,
                           rule.min_open, rule.max_open);
  flag.agreed = scope == OptionScope::kAgreed;
  return flag;
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
