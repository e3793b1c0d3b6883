// The examples' shared runner: the flags every example has, the command line,
// the backend, and the exit codes. Each example's main is a few lines:
//
//   TANDEM_EXAMPLE_FLAGS(tandem::train::ToyDdpOptions, TANDEM_TOY_DDP_OPTIONS)
//   int main(int argc, char** argv) {
//     return tandem::train::ExampleMain(
//         argc, argv, {.name = "toy_ddp", .summary = "The toy example."},
//         tandem::train::ConfigSetup<tandem::train::ToyDdpConfig>(
//             ExampleOptionsFromFlags,
//             [](const tandem::train::ToyDdpConfig& config) {
//               return tandem::optim::Sgd::CheckHyperParameters(config.lr);
//             },
//             tandem::train::RunToyDdp));
//   }
//
// (ConfigSetup, below: the options and the checkpoint flags make the config,
// the check refuses what no rank could run, every rank runs RunToyDdp.)
//
// What an example's rank function does unless its header says otherwise
// (pipeline_demo's), so that its header need not say it: it is collective
// (every rank calls it, on the device the runner gives it); it first checks its
// flags on the ranks (CheckRankFlags, rank_flags.h: flags that differ between
// ranks, as mpirun MPMD can give them, fail on every rank naming each rank's
// value; a broken rule is named with its value and rule); its steps run on
// train/loop/training_loop.h, which stops every rank together on a non-finite
// loss or parameter (naming the epoch, step, rank and value) and saves and
// resumes checkpoints; its errors are those, the ones its header names, and the
// device's or communicator's.
//
// Common flags (defined here, once):
//   --backend      an engine of the launch registry or auto (the help lists
//                  them, generated from train/launch/builtin_engines.h)
//   --world_size   ranks; 0: the engine's default
//   --timeout      seconds every collective may take, > 0 and finite
//                  (default 300, as torch's init_process_group(timeout=))
//   --checkpoint_dir, --checkpoint_every
//                  checkpoints (train/checkpoint/run_checkpointer.h); an
//                  example reads them with ExampleCheckpointOptions() (or
//                  ConfigSetup) and hands them to its training loop
//                  (train/loop/training_loop.h): rank 0 saves the model, the
//                  optimizer and the progress; a folder that holds a
//                  checkpoint resumes from it (rank 0 says so), the resumed
//                  run prints the lines an uninterrupted one prints from
//                  there on and ends with the same weights, bit for bit
//   --trace        FILE: the run's timeline (base/trace), one Chrome trace
//                  JSON with a track per rank
//                  (train/examples/runner/trace_file.h); a FILE that cannot be
//                  created is a usage error
//   --progress     auto | plain | off: rank 0's progress line
//   --metrics      FILE: JSON lines per step, epoch and test result
//                  (train/loop/run_monitor.h; examples report to
//                  ActiveRunMonitor() from rank 0)
//
// Before anything runs, every path of the run (these and the example's own,
// ExampleSpec::paths) is checked as one list: an output that is, holds or
// sits inside another input or output is a usage error naming both flags, as
// is an output that cannot be written; per-rank trace parts that already
// exist are refused, never replaced or removed.
//
// The command line is parsed by base/command_line.h, not by
// absl::ParseCommandLine (which exits 1 on an unknown flag): flags are
// --name=value, --name value, --bool_flag or
// --nobool_flag (one or two dashes), for flags defined under train/examples/
// only (absl's --flagfile or --fromenv are unknown, never silently ignored);
// --help (or -h) prints the usage and exits 0. Positional arguments, an unknown
// flag or a bad value are usage errors. Exit codes, as Python's argparse: 0
// success, 2 usage error (bad flag, backend that cannot run here; the message
// says what to run instead), 1 runtime error (a rank failed; its error goes to
// stderr; or the run's output was lost: a closed stdout or stderr is refused
// before the run, a failed write to either, e.g. `> /dev/full` or a full
// disk, fails it at the end, said on the other stream: base/std_streams.h).
// Every message starts with the example's name.
#ifndef TANDEM_TRAIN_EXAMPLES_RUNNER_EXAMPLE_MAIN_H_
#define TANDEM_TRAIN_EXAMPLES_RUNNER_EXAMPLE_MAIN_H_

#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/command_line.h"
#include "base/run_paths.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "train/checkpoint/run_checkpointer.h"

namespace tandem::train {

using ::tandem::kExitOk;
using ::tandem::kExitRuntimeError;
using ::tandem::kExitUsageError;

// One of the example's own flags that names a path the run reads or writes.
// The runner checks them together with its own (--checkpoint_dir, --trace,
// --metrics) before anything runs (base/run_paths.h: no output is, holds or
// sits inside another input or output) and checks that each output can be
// written (an output file as --trace is; an output folder as an export:
// base::CheckOutputFolder).
struct PathFlag {
  std::string flag;  // the flag's name without dashes: "data"
  base::PathRole role = base::PathRole::kInput;
  bool folder = false;          // an output that is a folder of files
  std::string not_a_path = {};  // a value that names no path ("synthetic")
};

struct ExampleSpec {
  std::string name;     // "toy_ddp": the first word of every message
  std::string summary;  // what the example does, for --help
  std::vector<PathFlag> paths = {};  // the example's path flags, above
  // Flags also taken with dashes for underscores, as a Python script's
  // argparse spells them (absl names cannot hold '-'): "dataset_size" reads
  // --dataset-size=5 and -dataset-size 5 as --dataset_size. The command line
  // is rewritten before parsing, so messages name the underscored flag.
  std::vector<std::string> dashed = {};
};

// What each rank runs; `device` is where the rank keeps its model and data
// (train::DeviceFor: its GPU on nccl, else the CPU).
using ExampleRank =
    std::function<absl::Status(comm::Communicator& comm, Device device)>;

// Reads the example's own flags after parsing; an error is a usage error.
using ExampleSetup = std::function<absl::StatusOr<ExampleRank>()>;

// Parses the command line, resolves the backend, runs the example on every
// rank this process hosts and returns the exit code (above).
int ExampleMain(int argc, char** argv, const ExampleSpec& spec,
                const ExampleSetup& setup);

// What ParseExampleFlags found (kRun or kHelp).
using ::tandem::ParsedCommandLine;

// Sets the registered absl flags from `args` (the command line without the
// program name). InvalidArgument naming the argument for a positional
// argument, an unknown flag, a missing or bad value; kHelp for --help or -h.
absl::StatusOr<ParsedCommandLine> ParseExampleFlags(
    const std::vector<std::string>& args);

// --checkpoint_dir and --checkpoint_every, for an ExampleSetup to pass to
// its ranks. InvalidArgument (a usage error) for a negative
// --checkpoint_every or one without --checkpoint_dir.
absl::StatusOr<checkpoint::CheckpointOptions> ExampleCheckpointOptions();

// For an example that does not checkpoint (pipeline_demo): InvalidArgument
// naming --checkpoint_dir or --checkpoint_every when either is given, OK
// when neither is.
absl::Status NoCheckpointFlags();

// --timeout in seconds as a Duration: InvalidArgument unless > 0 and finite.
absl::StatusOr<absl::Duration> TimeoutFromSeconds(double seconds);

// The --help text: the summary, the exit codes, then every flag defined under
// train/examples/ (the common ones and the example's own), --backend's help
// generated from the launch registry.
std::string ExampleHelp(const ExampleSpec& spec);

// An example's config from the flags: the options `options_from_flags`
// reads (TANDEM_EXAMPLE_FLAGS' ExampleOptionsFromFlags, every rule checked,
// example_options.h), then the checkpoint flags (ExampleCheckpointOptions),
// as Config{options, checkpoint}; a Config that is the options alone
// (pipeline_demo) takes no checkpoint and refuses the checkpoint flags
// (NoCheckpointFlags). With
// `make`, the config is what make(options, checkpoint) returns (a
// StatusOr<Config>: gpt_ddp derives its model from the options). The first
// error is returned (a usage error).
template <typename Config, typename Options>
absl::StatusOr<Config> ConfigFromFlags(
    absl::StatusOr<Options> (*options_from_flags)()) {
  absl::StatusOr<Options> options = options_from_flags();
  if (!options.ok()) return options.status();
  if constexpr (std::is_same_v<Config, Options>) {
    // Checkpoint flags given to an example that saves nothing would be
    // ignored silently: a run the user believes resumable is not.
    if (absl::Status none = NoCheckpointFlags(); !none.ok()) return none;
    return options;
  } else {
    absl::StatusOr<checkpoint::CheckpointOptions> checkpoint =
        ExampleCheckpointOptions();
    if (!checkpoint.ok()) return checkpoint.status();
    return Config{*std::move(options), *std::move(checkpoint)};
  }
}
template <typename Options, typename Make>
std::invoke_result_t<Make, const Options&, checkpoint::CheckpointOptions>
ConfigFromFlags(absl::StatusOr<Options> (*options_from_flags)(), Make make) {
  absl::StatusOr<Options> options = options_from_flags();
  if (!options.ok()) return options.status();
  absl::StatusOr<checkpoint::CheckpointOptions> checkpoint =
      ExampleCheckpointOptions();
  if (!checkpoint.ok()) return checkpoint.status();
  return make(*options, *std::move(checkpoint));
}

// The setup of an example that runs one function on a Config: the config
// from the flags (ConfigFromFlags), then `check(config)` (an absl::Status):
// what no rank could run, found before any starts (a usage error), and what
// must be set once per process before the ranks start (ddp_demo's
// CUDA_VISIBLE_DEVICES, resnet_ddp's kernel choice). Every rank then runs
// `run(comm, config, device)`; its status (a StatusOr's, for a run that
// returns a result) is the rank's.
template <typename Config, typename Options, typename Check, typename Run>
ExampleSetup ConfigSetup(absl::StatusOr<Options> (*options_from_flags)(),
                         Check check, Run run) {
  return [=]() -> absl::StatusOr<ExampleRank> {
    absl::StatusOr<Config> config = ConfigFromFlags<Config>(options_from_flags);
    if (!config.ok()) return config.status();
    if (absl::Status s = check(*config); !s.ok()) return s;
    return ExampleRank([config = *std::move(config), run](
                           comm::Communicator& comm, Device device) {
      auto result = run(comm, config, device);
      if constexpr (std::is_same_v<decltype(result), absl::Status>) {
        return result;
      } else {
        return result.status();
      }
    });
  };
}

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_RUNNER_EXAMPLE_MAIN_H_
