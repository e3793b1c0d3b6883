// tandem::train::CheckRankFlags — an example's start-up check of its flags,
// from one declarative list: every rank agrees on every entry first
// (CheckRanksAgree, train/parallel/core/config_agreement.h: per-rank flags
// under mpirun MPMD fail at once instead of hanging later), then each entry
// with a rule is checked against it, and every entry that breaks its rule is
// named in one error, the same on every rank.
//
//   TANDEM_RETURN_IF_ERROR(CheckRankFlags(
//       comm, device, "toy_ddp",
//       {IntFlag("--epochs", config.epochs, 0, kMaxEpochs),
//        IntFlag("--batch_size", config.batch_size, 1),
//        Flag("--lr", config.lr),  // agreed on; Sgd::Create checks it
//        Flag("--checkpoint_dir", config.checkpoint.dir)}));
//
// Errors (InvalidArgument):
//
//   ranks disagree on the configuration: --epochs is 3 on rank 0 and 4 on
//   rank 1; start every rank with the same flags and data
//
//   toy_ddp: --epochs=-1 (expected 0 <= epochs <= 1000000); --batch_size=0
//   (expected batch_size >= 1). Every rank was given these values: fix the
//   flags and start again
//
// Collective (every rank calls it with the same list, before its other
// collectives); the communicator's errors come back as they are.
#ifndef TANDEM_TRAIN_EXAMPLES_RUNNER_RANK_FLAGS_H_
#define TANDEM_TRAIN_EXAMPLES_RUNNER_RANK_FLAGS_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "train/checkpoint/run_checkpointer.h"
#include "train/parallel/core/config_agreement.h"

namespace tandem::train {

// One entry: its name and value as the ranks compare them, and, when it has
// a rule, whether the value keeps it and the rule in words.
struct RankFlag {
  ConfigEntry entry;
  bool ok = true;
  std::string expected{};  // e.g. "0 <= epochs <= 1000000"; empty: no rule
  // false: this process's own business, never compared across ranks (a
  // kLocal option, example_options.h); its rule is still checked.
  bool agreed = true;
};

// Agreed on, any value ("--lr": the optimizer checks it; "dataset hash"):
// a value ConfigEntry takes (text, integers, doubles).
template <typename T>
RankFlag Flag(std::string name, T value) {
  return RankFlag{.entry = ConfigEntry(std::move(name), value)};
}
// An integer in [min, max] (max: no upper bound when left out).
RankFlag IntFlag(std::string name, int64_t value, int64_t min,
                 int64_t max = std::numeric_limits<int64_t>::max());
// A finite real number from `min` to `max`, each end open or closed
// (infinite `max`: no upper bound). Its words: "0 < fraction < 1",
// "0 <= beta1 < 1", "lr >= 0, finite". NaN and the infinities fail.
RankFlag RealFlag(std::string name, double value, double min, double max,
                  bool min_open, bool max_open);

// `flags`, then --checkpoint_dir and --checkpoint_every (agreed on, no
// rule: ExampleCheckpointOptions checked them), the entries of an example
// whose checkpoint flags come after its options (toy_ddp, amp_ddp,
// ddp_demo, resnet_ddp). A resume may change both
// (train/loop/must_match.h).
std::vector<RankFlag> WithCheckpointFlags(
    std::vector<RankFlag> flags,
    const checkpoint::CheckpointOptions& checkpoint);

// As above: OK, or the agreement's error (entries with `agreed` only), or
// InvalidArgument naming `who`, each entry that breaks its rule with its
// value and rule (CheckFlagRules' words), and what to do.
absl::Status CheckRankFlags(comm::Communicator& comm, Device device,
                            std::string_view who,
                            const std::vector<RankFlag>& flags);

// The same rules in one process, with no communicator (an example's setup,
// whose error is a usage error): OK, or InvalidArgument naming each entry
// that breaks its rule, "--batch_size=0 (expected batch_size >= 1)", joined
// by "; ".
absl::Status CheckFlagRules(const std::vector<RankFlag>& flags);

// The entries of `flags` the ranks agree on, e.g. for
// MustMatchOnResume (train/loop/must_match.h).
std::vector<ConfigEntry> Entries(const std::vector<RankFlag>& flags);

// Each rank's share of a global batch, global_batch_size / world_size (so
// the optimisation barely depends on the world size). A world size that
// does not divide it is refused rather than rounded silently:
// InvalidArgument naming `who`, --global_batch_size, the nearest sizes the
// world divides, and what to change. Local (every rank finds the same).
// virtual_world > 0 (--virtual_world): each virtual rank's share,
// global_batch_size / virtual_world, whatever the world size; the refusal
// then names --virtual_world.
absl::StatusOr<int64_t> PerRankBatch(std::string_view who,
                                     int64_t global_batch_size, int world_size,
                                     int64_t virtual_world = 0);

// How an example's header line names its world: "4 rank(s) on sim", or
// under --virtual_world=K "K virtual ranks", which reads the same at every
// world size that plays K.
std::string WorldDescription(const comm::Communicator& comm,
                             int64_t virtual_world);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_RUNNER_RANK_FLAGS_H_
