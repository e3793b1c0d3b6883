#include "train/examples/runner/example_main.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "base/command_line.h"
#include "base/output_file.h"
#include "base/run_paths.h"
#include "base/std_streams.h"
#include "base/trace/trace.h"
#include "comm/launch_env.h"
#include "train/examples/runner/trace_file.h"
#include "train/launch/backend.h"
#include "train/launch/builtin_engines.h"
#include "train/loop/run_monitor.h"

// The help of --backend is generated from the registry (ExampleHelp).
ABSL_FLAG(std::string, backend, "auto", "see --help");
ABSL_FLAG(int, local_rank, -1,
          "Accepted as torch.distributed.launch appends it; must agree with "
          "LOCAL_RANK. -1: not given.");
ABSL_FLAG(int, world_size, 0,
          "Number of ranks; 0: the MPI job's size, the number of GPUs if "
          "there are any, else 2 simulated ranks.");
ABSL_FLAG(std::string, trace, "",
          "Write the run's timeline to this file: Chrome trace JSON with a "
          "track per rank (forward/backward per module, each gradient "
          "bucket's all-reduce, waits, optimizer step, data loading); open it "
          "in https://ui.perfetto.dev or chrome://tracing. Empty: off.");
ABSL_FLAG(std::string, progress, "auto",
          "Rank 0's progress line (step, epoch, samples/s, loss, ETA): auto "
          "(one line redrawn on a terminal, a plain line every 10 s "
          "otherwise), plain (plain lines even on a terminal) or off.");
ABSL_FLAG(std::string, metrics, "",
          "Write one JSON line per step, epoch and test result (loss, "
          "accuracy, samples/s, comm time, the loss scale under AMP) to this "
          "file; "
          "plot_metrics draws it. Empty: off.");
ABSL_FLAG(double, timeout, 300,
          "Seconds every collective may take before the job fails and names "
          "the ranks that never arrived; > 0 and finite.");
ABSL_FLAG(std::string, sim_ranks, "threads",
          "With --backend=sim: threads (one OS thread per rank) or fibers "
          "(user-space fibers on one worker thread per core; for thousands "
          "of ranks).");
ABSL_FLAG(int64_t, sim_stack_kib, 0,
          "With --backend=sim: each rank's stack in KiB (its thread's, or its "
          "fiber's with --sim_ranks=fibers), 16 to 1048576; 0: the default, "
          "1024. Raise it if a rank recurses deeply (a rank that overflows "
          "its stack crashes the process, saying so); only the pages a rank "
          "touches cost memory.");

ABSL_FLAG(std::string, checkpoint_dir, "",
          "Folder of the run's checkpoint (model.safetensors with PyTorch's "
          "names, training_state.safetensors beside it), written by rank 0 at "
          "every epoch end; a folder that holds one resumes from it. Empty: "
          "no checkpoints.");
ABSL_FLAG(int64_t, checkpoint_every, 0,
          "With --checkpoint_dir, also checkpoint every N steps; 0: at epoch "
          "ends only.");

namespace tandem::train {
namespace {

// Whether rank 0's progress line may be redrawn in place. A worker started
// by mpirun, srun or tandemrun/torchrun writes to its launcher, which
// forwards lines (OpenMPI even hands workers a pseudo-terminal): there the
// line is printed plainly, as in a log.
bool StdoutIsUsersTerminal() {
  if (isatty(fileno(stdout)) == 0) return false;
  absl::StatusOr<std::optional<comm::LaunchEnv>> env = comm::DetectLaunchEnv();
  return env.ok() && !env->has_value();
}

// The flags of the examples and of this runner (absl's own are unknown).
const std::vector<std::string>& ExampleFolders() {
  static const auto* const folders =
      new std::vector<std::string>{"train/examples/"};
  return *folders;
}

// An output that failed after every step ran: say that training itself
// succeeded (its checkpoint, if any, is saved), so that no one reruns it in
// vain.
absl::Status AfterTraining(const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat("training finished, but writing an output "
                                   "failed: ",
                                   s.message()));
}

CommandLine ExampleCommandLine(const ExampleSpec& spec) {
  return {.program = spec.name,
          .summary = spec.summary,
          .flag_folders = ExampleFolders(),
          .exit_codes =
              "Exit codes: 0 success, 1 runtime error (a rank "
              "failed), 2 usage error (bad flag or a backend that "
              "cannot run here).",
          .help_overrides = {{"backend", BuiltinEngines().BackendHelp()}}};
}

}  // namespace

absl::StatusOr<absl::Duration> TimeoutFromSeconds(double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--timeout=", seconds,
                     "; expected seconds > 0 and finite (e.g. --timeout=300)"));
  }
  return absl::Seconds(seconds);
}

absl::StatusOr<checkpoint::CheckpointOptions> ExampleCheckpointOptions() {
  checkpoint::CheckpointOptions options;
  options.dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.every_steps = absl::GetFlag(FLAGS_checkpoint_every);
  if (options.every_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--checkpoint_every=", options.every_steps,
                     "; expected 0 (epoch ends only) or a step count >= 1"));
  }
  if (options.every_steps > 0 && options.dir.empty()) {
    return absl::InvalidArgumentError(
        "--checkpoint_every needs --checkpoint_dir=DIR (where to write)");
  }
  return options;
}

absl::Status NoCheckpointFlags() {
  const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir);
  const int64_t every = absl::GetFlag(FLAGS_checkpoint_every);
  if (dir.empty() && every == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      dir.empty() ? absl::StrCat("--checkpoint_every=", every)
                  : absl::StrCat("--checkpoint_dir=", dir),
      "; this example writes no checkpoint (nothing would be saved or "
      "resumed): drop the flag"));
}

absl::StatusOr<ParsedCommandLine> ParseExampleFlags(
    const std::vector<std::string>& args) {
  return ParseFlags(args, ExampleFolders());
}

std::string ExampleHelp(const ExampleSpec& spec) {
  return CommandLineHelp(ExampleCommandLine(spec));
}

namespace {

// The current value of the example's flag `name`.
absl::StatusOr<std::string> FlagValue(const std::string& name) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr) {
    return absl::InternalError(absl::StrCat(
        "the example declares --", name,
        " as a path flag (ExampleSpec::paths) but defines no such flag"));
  }
  return flag->CurrentValue();
}

// Every path the run reads or writes, checked as one list (see
// example_main.h), then each output's destination.
absl::Status CheckExamplePaths(const ExampleSpec& spec) {
  std::vector<PathFlag> flags = spec.paths;
  flags.push_back({.flag = "checkpoint_dir", .role = base::PathRole::kInOut});
  flags.push_back({.flag = "trace", .role = base::PathRole::kOutput});
  flags.push_back({.flag = "metrics", .role = base::PathRole::kOutput});
  std::vector<base::RunPath> paths;
  std::vector<const PathFlag*> outputs;
  for (const PathFlag& p : flags) {
    absl::StatusOr<std::string> value = FlagValue(p.flag);
    if (!value.ok()) return value.status();
    if (value->empty() || *value == p.not_a_path) continue;
    paths.push_back({.flag = "--" + p.flag,
                     .path = *value,
                     .role = p.role,
                     .rank_parts = p.flag == "trace"});
    if (p.role == base::PathRole::kOutput) outputs.push_back(&p);
  }
  if (absl::Status s = base::CheckRunPaths(paths); !s.ok()) return s;
  for (const PathFlag* p : outputs) {
    const std::string value = *FlagValue(p->flag);
    const std::string what = absl::StrCat("--", p->flag, "=", value);
    absl::Status s = p->folder ? base::CheckOutputFolder(value, what)
                               : base::CheckOutputPath(value, what);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// ExampleMain without the checks of its own output.
int RunExample(int argc, char** argv, const ExampleSpec& spec,
               const ExampleSetup& setup) {
  auto fail = [&spec](int code, const absl::Status& status) {
    std::fprintf(stderr, "%s: %s\n", spec.name.c_str(),
                 code == kExitUsageError ? std::string(status.message()).c_str()
                                         : status.ToString().c_str());
    return code;
  };
  if (std::optional<int> exit_code =
          HandleCommandLine(ExampleCommandLine(spec), argc, argv)) {
    return *exit_code;
  }
  absl::StatusOr<absl::Duration> timeout =
      TimeoutFromSeconds(absl::GetFlag(FLAGS_timeout));
  if (!timeout.ok()) return fail(kExitUsageError, timeout.status());
  if (absl::Status s = CheckExamplePaths(spec); !s.ok()) {
    return fail(kExitUsageError, s);
  }
  absl::StatusOr<ExampleRank> rank_main = setup();
  if (!rank_main.ok()) return fail(kExitUsageError, rank_main.status());
  if (absl::Status s = CheckLocalRankFlag(absl::GetFlag(FLAGS_local_rank));
      !s.ok()) {
    return fail(kExitUsageError, s);
  }
  absl::StatusOr<ResolvedBackend> backend =
      ResolveBackend({.backend = absl::GetFlag(FLAGS_backend),
                      .world_size = absl::GetFlag(FLAGS_world_size)});
  if (!backend.ok()) return fail(kExitUsageError, backend.status());

  const std::string trace_path = absl::GetFlag(FLAGS_trace);
  // Where each process is one rank of a launched world (mpi under mpirun,
  // gloo or nccl under tandemrun), the ranks write parts and rank 0 merges
  // them: one writer per file (trace_file.h).
  absl::StatusOr<std::optional<comm::LaunchEnv>> launched =
      comm::DetectLaunchEnv();
  const bool trace_per_rank =
      backend->backend == "mpi" || (launched.ok() && launched->has_value());
  if (!trace_path.empty()) {
    if (trace_per_rank) {
      absl::StatusOr<bool> in_place = base::WritesInPlace(trace_path, "trace");
      absl::Status s = !in_place.ok() ? in_place.status()
                       : *in_place    ? absl::OkStatus()
                                      : CheckNoTraceParts(trace_path);
      if (!s.ok()) return fail(kExitUsageError, s);
    }
    trace::Start();
  }

  absl::StatusOr<ProgressMode> progress =
      ParseProgressMode(absl::GetFlag(FLAGS_progress));
  if (!progress.ok()) return fail(kExitUsageError, progress.status());
  const std::string metrics_path = absl::GetFlag(FLAGS_metrics);
  // Only rank 0 reports to it (so under mpirun only rank 0's process prints
  // progress and creates the metrics file).
  RunMonitor monitor({.name = spec.name,
                      .progress = *progress,
                      .out = stdout,
                      .terminal = StdoutIsUsersTerminal(),
                      .metrics_path = metrics_path});
  ScopedActiveRunMonitor active_monitor(&monitor);

  const std::string sim_ranks = absl::GetFlag(FLAGS_sim_ranks);
  if (sim_ranks != "threads" && sim_ranks != "fibers") {
    return fail(
        kExitUsageError,
        absl::InvalidArgumentError(absl::StrCat(
            "--sim_ranks must be threads or fibers; found '", sim_ranks, "'")));
  }

  const int64_t stack_kib = absl::GetFlag(FLAGS_sim_stack_kib);
  if (stack_kib != 0 && (stack_kib < 16 || stack_kib > (int64_t{1} << 20))) {
    return fail(kExitUsageError,
                absl::InvalidArgumentError(absl::StrCat(
                    "--sim_stack_kib must be 0 (the default) or 16 to 1048576 "
                    "(1 GiB); found ",
                    stack_kib)));
  }

  RunOptions options;
  options.timeout = *timeout;
  options.sim_fibers = sim_ranks == "fibers";
  options.sim_stack_bytes = stack_kib * 1024;
  // A note well before the timeout, and at least every 30 s.
  options.stall_note_interval = std::min(absl::Seconds(30), *timeout / 10);
  const absl::Status status = RunOnBackend(
      *backend,
      [&](comm::Communicator& comm) {
        absl::Status s = (*rank_main)(comm, DeviceFor(comm));
        if (s.ok() && !trace_path.empty() && trace_per_rank) {
          s = AfterTraining(FinishRankTrace(comm, trace_path));
        }
        return s;
      },
      options);
  const absl::Status finished = monitor.Finish();
  if (!status.ok()) return fail(kExitRuntimeError, status);
  // Training succeeded from here on; an output that cannot be written is
  // still an error (exit 1), said as such. Every output is attempted.
  int code = kExitOk;
  if (!finished.ok()) code = fail(kExitRuntimeError, AfterTraining(finished));
  if (!trace_path.empty() && !trace_per_rank) {
    if (absl::Status s = WriteProcessTrace(trace_path); !s.ok()) {
      code = fail(kExitRuntimeError, AfterTraining(s));
    }
  }
  return code;
}

// `arg` with a dashed spelling of a flag in `dashed` underscored:
// "--dataset-size=5" -> "--dataset_size=5" (ExampleSpec::dashed).
std::string Underscored(const std::string& arg,
                        const std::vector<std::string>& dashed) {
  for (const std::string& name : dashed) {
    std::string spelled = name;
    std::replace(spelled.begin(), spelled.end(), '_', '-');
    for (const char* prefix : {"--", "-"}) {
      const std::string flag = prefix + spelled;
      if (arg == flag || arg.rfind(flag + "=", 0) == 0) {
        return prefix + name + arg.substr(flag.size());
      }
    }
  }
  return arg;
}

}  // namespace

int ExampleMain(int argc, char** argv, const ExampleSpec& spec,
                const ExampleSetup& setup) {
  std::vector<std::string> args(argv, argv + argc);
  std::vector<char*> underscored;
  for (std::string& arg : args) {
    arg = Underscored(arg, spec.dashed);
    underscored.push_back(arg.data());
  }
  underscored.push_back(nullptr);  // argv[argc], as the system's
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code = base::RefuseClosedStdStreams(spec.name)) {
    return *code;
  }
  // What the run printed must have reached its reader (base/std_streams.h).
  return base::FinishStdStreams(
      spec.name, RunExample(argc, underscored.data(), spec, setup));
}

}  // namespace tandem::train
