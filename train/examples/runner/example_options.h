// An example's options, declared once. One list says, for each option, its
// type, name, default, rule, whether every rank must agree on it, and its
// help; from it come the flags (and so --help), the configuration struct
// with its defaults, the reading of the flags into that struct, the range
// checks with their messages, and the rank-agreement entries.
//
//   // toy_ddp_lib.h: the list (one X per option, each line ending in a
//   // backslash) and the struct.
//   #define TANDEM_TOY_DDP_OPTIONS(X)
//     X(int64_t, epochs, 3, Between(0, kMaxEpochs), kAgreed,
//       "Training epochs.")
//     X(int64_t, batch_size, 2, AtLeast(1), kAgreed, "Per-rank batch.")
//     X(std::string, log_ranks, "all", OneOf("all", "0"), kAgreed,
//       "all: every rank prints; 0: rank 0 only.")
//   TANDEM_EXAMPLE_OPTIONS(ToyDdpOptions, TANDEM_TOY_DDP_OPTIONS);
//   // The options with the runner's checkpoint flags (below).
//   using ToyDdpConfig = WithCheckpoint<ToyDdpOptions>;
//
//   // toy_ddp_main.cc, at namespace scope: an absl flag per option and
//   // `absl::StatusOr<ToyDdpOptions> ExampleOptionsFromFlags()`, which
//   // checks every rule (a usage error names each broken one).
//   TANDEM_EXAMPLE_FLAGS(tandem::train::ToyDdpOptions, TANDEM_TOY_DDP_OPTIONS)
//
//   // Anywhere: each option as a RankFlag (rank_flags.h), in list order.
//   CheckFlagRules(options.RankFlags());              // one process
//   CheckRankFlags(comm, device, "toy_ddp", options.RankFlags());  // ranks
//
// Rules (namespace option_rules; each names the option in its words):
//   Any()                     no rule
//   AtLeast(min)              an integer >= min          "batch_size >= 1"
//   Between(min, max)         an integer in [min, max]   "0 <= epochs <= 9"
//   FiniteAtLeast(min)        a finite real >= min       "lr >= 0, finite"
//   InOpenRange(a, b)         a real in (a, b)           "0 < f < 1"
//   InHalfOpenRange(a, b)     a real in [a, b)           "0 <= beta1 < 1"
//   AboveAtMost(a, b)         a real in (a, b]           "0 < lr <= 10"
//   OneOf("a", "b", ...)      one of the words           "a or b"
// Scopes: kAgreed (every rank must hold the same value: CheckRankFlags
// compares it, Entries() lists it, so a resume compares it too unless
// train/loop/must_match.h lets it change) or kLocal (this process's
// business: paths whose contents are compared instead, what is printed).
//
// The message of a broken rule is shared by every example:
//   --batch_size=0 (expected batch_size >= 1)
// Rules that join options (warm-up shorter than the run, a mode that
// excludes a dtype) stay hand-written beside the example's config.
#ifndef TANDEM_TRAIN_EXAMPLES_RUNNER_EXAMPLE_OPTIONS_H_
#define TANDEM_TRAIN_EXAMPLES_RUNNER_EXAMPLE_OPTIONS_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "train/checkpoint/run_checkpointer.h"
#include "train/examples/runner/rank_flags.h"

namespace tandem::train {

enum class OptionScope { kAgreed, kLocal };

namespace option_rules {

struct AnyValue {};
struct IntRange {
  int64_t min;
  int64_t max;
};
struct RealRange {
  double min;
  double max;
  bool min_open;
  bool max_open;
};
struct OneOfWords {
  std::vector<std::string> words;
};

inline AnyValue Any() { return {}; }
inline IntRange AtLeast(int64_t min) {
  return {min, std::numeric_limits<int64_t>::max()};
}
inline IntRange Between(int64_t min, int64_t max) { return {min, max}; }
inline RealRange FiniteAtLeast(double min) {
  return {min, std::numeric_limits<double>::infinity(), false, true};
}
inline RealRange InOpenRange(double above, double below) {
  return {above, below, true, true};
}
inline RealRange InHalfOpenRange(double min, double below) {
  return {min, below, false, true};
}
inline RealRange AboveAtMost(double above, double max) {
  return {above, max, true, false};
}
template <typename... Words>
OneOfWords OneOf(Words... words) {
  return {{std::string(words)...}};
}

}  // namespace option_rules

// One option as a RankFlag: `name` ("--lr") with its value as the ranks
// compare it (a bool as "true"/"false"), whether it keeps `rule`, and the
// rule in words. A kLocal option's entry is not compared across ranks.
RankFlag OptionFlag(std::string name, int64_t value,
                    option_rules::IntRange rule, OptionScope scope);
RankFlag OptionFlag(std::string name, double value,
                    option_rules::RealRange rule, OptionScope scope);
RankFlag OptionFlag(std::string name, const std::string& value,
                    const option_rules::OneOfWords& rule, OptionScope scope);
RankFlag OptionFlag(std::string name, bool value, option_rules::AnyValue rule,
                    OptionScope scope);
template <typename T>
RankFlag OptionFlag(std::string name, const T& value, option_rules::AnyValue,
                    OptionScope scope) {
  RankFlag flag = Flag(std::move(name), value);
  flag.agreed = scope == OptionScope::kAgreed;
  return flag;
}
inline RankFlag OptionFlag(std::string name, int value,
                           option_rules::IntRange rule, OptionScope scope) {
  return OptionFlag(std::move(name), static_cast<int64_t>(value), rule, scope);
}

// An example's config: its options and the checkpoint flags
// (--checkpoint_dir, --checkpoint_every: example_main.h's
// ExampleCheckpointOptions, which ConfigSetup reads into `checkpoint`).
template <typename Options>
struct WithCheckpoint : Options {
  checkpoint::CheckpointOptions checkpoint;
};

// An --amp option's dtype: "bf16" and "f16" theirs; anything else ("off",
// the rule's other word) nullopt, f32.
std::optional<DType> AutocastDType(const std::string& amp);

}  // namespace tandem::train

// The macros the list is written for. X(type, name, default, rule, scope,
// help): `rule` is an expression of option_rules, `scope` kAgreed or
// kLocal, `help` a string literal.
#define TANDEM_OPTION_MEMBER_(type, name, default_value, rule, scope, help) \
  type name = default_value;
#define TANDEM_OPTION_RANK_FLAG_(type, name, default_value, rule, scope, help) \
  ::tandem::train::OptionFlag(                                                 \
      "--" #name, name,                                                        \
      [] {                                                                     \
        using namespace ::tandem::train::option_rules;                         \
        return rule;                                                           \
      }(),                                                                     \
      ::tandem::train::OptionScope::scope),
#define TANDEM_OPTION_ABSL_FLAG_(type, name, default_value, rule, scope, help) \
  ABSL_FLAG(type, name, default_value, help);
#define TANDEM_OPTION_READ_(type, name, default_value, rule, scope, help) \
  options.name = absl::GetFlag(FLAGS_##name);

// The virtual world's flag, one entry for every example that trains
// (docs/virtual_world.md): put TANDEM_VIRTUAL_WORLD_OPTION(X) in the list.
#define TANDEM_VIRTUAL_WORLD_OPTION(X)                                      \
  X(int64_t, virtual_world, 0, AtLeast(0), kAgreed,                         \
    "Train as DDP at this many virtual ranks (0: off), with the same "      \
    "printed lines and checkpoint bytes at every world size that can play " \
    "them (powers of two dividing it, and itself): docs/virtual_world.md.")

// struct Struct { <an option member per entry, with its default>;
//                 std::vector<RankFlag> RankFlags() const; };
#define TANDEM_EXAMPLE_OPTIONS(Struct, LIST)                   \
  struct Struct {                                              \
    LIST(TANDEM_OPTION_MEMBER_)                                \
    std::vector<::tandem::train::RankFlag> RankFlags() const { \
      return {LIST(TANDEM_OPTION_RANK_FLAG_)};                 \
    }                                                          \
  }

// At global namespace scope of the example's main (needs absl/flags/flag.h):
// ABSL_FLAG(type, name, default, help) per entry, and, in an unnamed
// namespace, `absl::StatusOr<Struct> ExampleOptionsFromFlags()`: the flags'
// values, or CheckFlagRules' InvalidArgument (a usage error) naming every
// option that breaks its rule.
#define TANDEM_EXAMPLE_FLAGS(Struct, LIST)                                 \
  LIST(TANDEM_OPTION_ABSL_FLAG_)                                           \
  namespace {                                                              \
  absl::StatusOr<Struct> ExampleOptionsFromFlags() {                       \
    Struct options;                                                        \
    LIST(TANDEM_OPTION_READ_)                                              \
    absl::Status s = ::tandem::train::CheckFlagRules(options.RankFlags()); \
    if (!s.ok()) return s;                                                 \
    return options;                                                        \
  }                                                                        \
  }

#endif  // TANDEM_TRAIN_EXAMPLES_RUNNER_EXAMPLE_OPTIONS_H_
