// sampler: prints one rank's DistributedSampler indices, comma-separated on
// one line, exactly as PyTorch's DistributedSampler would yield them.
//
//   bazel run //train/data:sampler -- --size=10 --num_replicas=3 --rank=0
//   4,5,0,2
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_join.h"
#include "base/command_line.h"
#include "base/std_streams.h"
#include "train/data/distributed_sampler.h"

ABSL_FLAG(int64_t, size, -1,
          "Number of samples in the dataset (>= 0; required).");
ABSL_FLAG(int64_t, num_replicas, 1, "Number of ranks (the world size), >= 1.");
ABSL_FLAG(int64_t, rank, 0, "This rank, in [0, num_replicas).");
ABSL_FLAG(int64_t, seed, 0, "Shuffle seed, >= 0; the same on every rank.");
ABSL_FLAG(int64_t, epoch, 0,
          "Epoch (SetEpoch); the shuffle uses seed + epoch.");
ABSL_FLAG(bool, shuffle, true, "Shuffle (--noshuffle: indices in order).");
ABSL_FLAG(bool, drop_last, false,
          "Drop the tail so every rank gets floor(size / num_replicas) samples "
          "instead of padding with repeated samples.");

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  // Usage errors (unknown flag, bad value, positional argument) exit 2.
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "sampler",
           .summary =
               "Prints the indices one rank of torch.utils.data.distributed."
               "DistributedSampler yields, comma-separated, bit-identical to "
               "PyTorch.",
           .flag_folders = {"train/data/"},
           .exit_codes = "Exit codes: 0 success, 2 usage error (bad flag or "
                         "value).",
           .help_epilogue = "Example: sampler --size=10 --num_replicas=3 "
                            "--rank=0 --epoch=1"},
          argc, argv)) {
    return *exit_code;
  }
  const int64_t size = absl::GetFlag(FLAGS_size);
  if (size < 0) {
    std::cerr << "sampler: --size must be given and >= 0 (got " << size
              << ")\n";
    return 2;
  }
  const int64_t seed = absl::GetFlag(FLAGS_seed);
  if (seed < 0) {
    std::cerr << "sampler: --seed must be >= 0 (got " << seed << ")\n";
    return 2;
  }
  absl::StatusOr<tandem::train::DistributedSampler> sampler =
      tandem::train::DistributedSampler::Create(
          size, {.num_replicas = absl::GetFlag(FLAGS_num_replicas),
                 .rank = absl::GetFlag(FLAGS_rank),
                 .shuffle = absl::GetFlag(FLAGS_shuffle),
                 .seed = static_cast<uint64_t>(seed),
                 .drop_last = absl::GetFlag(FLAGS_drop_last)});
  if (!sampler.ok()) {
    std::cerr << "sampler: " << sampler.status().message() << "\n";
    return 2;
  }
  sampler->SetEpoch(absl::GetFlag(FLAGS_epoch));
  std::cout << absl::StrJoin(sampler->Indices(), ",") << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("sampler")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("sampler", Run(argc, argv));
}
